import { z } from 'zod';

/**
 * Staff roles and what each may do: one table read by the server (which refuses with FORBIDDEN),
 * the CLI and the web screens (which only show the buttons a role may use). The database checks
 * the role set itself.
 */
export const staffRoles = ['support', 'approver', 'operator', 'admin'] as const;
export const staffRoleSchema = z.enum(staffRoles);
export type StaffRole = (typeof staffRoles)[number];

/** What each role may do beyond reading. */
export const ROLE_PERMISSIONS = {
  /** Read queues, history, inbox, breaks; search. */
  read: ['support', 'approver', 'operator', 'admin'],
  /** Approve or reject a withdrawal under review (four-eyes, bound to the payload hash). */
  decide: ['approver', 'admin'],
  /** Runbook actions: assign an owner, resolve with evidence, close breaks, create manual withdrawals. */
  operate: ['operator', 'admin'],
  /** Branding and staff accounts. */
  administer: ['admin'],
} as const satisfies Record<string, readonly StaffRole[]>;
export type Permission = keyof typeof ROLE_PERMISSIONS;

export function roleAllows(role: StaffRole, permission: Permission): boolean {
  return (ROLE_PERMISSIONS[permission] as readonly StaffRole[]).includes(role);
}

/**
 * The staff screens and the permission each needs to be of any use: the menu lists, and the router
 * opens, only a role's screens, so a member never lands on one whose reads the server would refuse.
 * A screen that only reads needs `read`; one made to act (propose, mint, configure) needs the
 * permission its actions need, and one whose list itself is guarded needs what guards it.
 */
export const STAFF_SCREEN_PERMISSIONS = {
  overview: 'read',
  withdrawals: 'read',
  approvals: 'read',
  proposals: 'read',
  broadcast: 'read',
  unknown: 'read',
  failed: 'read',
  search: 'read',
  operation: 'read',
  withdraw: 'operate',
  adjustments: 'operate',
  nonces: 'read',
  breaks: 'read',
  reconciliation: 'read',
  inbox: 'read',
  deliveries: 'read',
  branding: 'administer',
  apiKeys: 'operate',
  endpoints: 'operate',
  riskRules: 'read',
  team: 'administer',
  audit: 'administer',
  passkeys: 'read',
  freeze: 'read',
} as const satisfies Record<string, Permission>;
export type StaffScreen = keyof typeof STAFF_SCREEN_PERMISSIONS;

export function roleSeesScreen(role: StaffRole, screen: StaffScreen): boolean {
  return roleAllows(role, STAFF_SCREEN_PERMISSIONS[screen]);
}
