import { type Permission, ROLE_PERMISSIONS, type StaffRole } from '@idem/contracts';
import { and, eq, isNull } from 'drizzle-orm';
import type { Executor } from '../db/connect.ts';
import { staffUsers } from '../db/schema/index.ts';
import { staffActor } from '../staff/users.ts';

/**
 * The tenant's active members and their roles, by the actor string decisions carry
 * ('staff:<user id>'). A decision counts only while its author is in this map with a role that
 * holds the permission: disabling a member or taking the role away withdraws their approvals from
 * every proposal not yet executed.
 */
export async function activeMembers(db: Executor, tenantId: string): Promise<Map<string, StaffRole>> {
  const rows = await db
    .select({ userId: staffUsers.userId, role: staffUsers.role })
    .from(staffUsers)
    .where(and(eq(staffUsers.tenantId, tenantId), isNull(staffUsers.disabledAt)));
  return new Map(rows.map((row) => [staffActor(row.userId), row.role as StaffRole]));
}

/** Whether `actor` is an active member whose role holds `permission`. */
export function counts(members: Map<string, StaffRole>, actor: string, permission: Permission): boolean {
  const role = members.get(actor);
  return role !== undefined && (ROLE_PERMISSIONS[permission] as readonly StaffRole[]).includes(role);
}
