import { randomBytes } from 'node:crypto';
import type { StaffRole } from '@idem/contracts';
import { createStaffUser, type Database, disableStaff, staffActor, withTenant } from '@idem/core';

/**
 * A stored password hash no password verifies: fixture members act through core directly, and
 * the server's tests that sign in make their own members with a real hash.
 */
const NO_SIGN_IN = 'fixture-member-without-password';

/**
 * A real staff member of the tenant, active, with `role`; returns the actor string decisions
 * carry ('staff:<user id>'). Proposals count only approvals by active members whose role may
 * decide, so tests decide as members made here rather than as made-up names.
 */
export async function staffMember(
  db: Database,
  tenantId: string,
  role: StaffRole = 'approver',
  email = `${role}-${randomBytes(4).toString('hex')}@example.test`,
): Promise<string> {
  const user = await withTenant(db, tenantId, (tx) =>
    createStaffUser(tx, { tenantId, email, role, passwordHash: NO_SIGN_IN }),
  );
  return staffActor(user.userId);
}

/** Several members of one role at once, in order. */
export async function staffMembers(
  db: Database,
  tenantId: string,
  role: StaffRole,
  count: number,
): Promise<string[]> {
  const members: string[] = [];
  for (let i = 0; i < count; i += 1) members.push(await staffMember(db, tenantId, role));
  return members;
}

/** Disables a member made by `staffMember` (its actor string), as another admin would. */
export async function disableMember(db: Database, tenantId: string, actor: string): Promise<void> {
  const userId = actor.replace(/^staff:/, '');
  await withTenant(db, tenantId, (tx) =>
    disableStaff(tx, { tenantId, userId, actorUserId: '00000000-0000-0000-0000-000000000000' }),
  );
}
