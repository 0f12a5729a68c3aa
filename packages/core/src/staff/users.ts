import { randomUUID } from 'node:crypto';
import { IdemError, type StaffRole } from '@idem/contracts';
import { and, eq, isNull } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { staffUsers } from '../db/schema/index.ts';

export interface StaffUser {
  tenantId: string;
  userId: string;
  email: string;
  role: StaffRole;
}

/** The actor recorded in an operation's history for a staff member's action. */
export function staffActor(userId: string): string {
  return `staff:${userId}`;
}

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

/**
 * Creates a staff member. The password hash is made by the caller (the server owns the hashing
 * library); a second account with the same e-mail in one tenant is refused.
 */
export async function createStaffUser(
  tx: Tx,
  input: { tenantId: string; email: string; passwordHash: string; role: StaffRole },
): Promise<StaffUser> {
  const email = normalizeEmail(input.email);
  const userId = randomUUID();
  const inserted = await tx
    .insert(staffUsers)
    .values({ tenantId: input.tenantId, userId, email, passwordHash: input.passwordHash, role: input.role })
    .onConflictDoNothing()
    .returning({ userId: staffUsers.userId });
  if (inserted.length === 0) {
    throw new IdemError('IDEMPOTENCY_CONFLICT', 'a staff member with this e-mail already exists');
  }
  return { tenantId: input.tenantId, userId, email, role: input.role };
}

/** An active staff member by e-mail, with the stored hash for the caller to verify. */
export async function findStaffForSignIn(
  tx: Tx,
  tenantId: string,
  email: string,
): Promise<(StaffUser & { passwordHash: string }) | null> {
  const rows = await tx
    .select()
    .from(staffUsers)
    .where(
      and(
        eq(staffUsers.tenantId, tenantId),
        eq(staffUsers.email, normalizeEmail(email)),
        isNull(staffUsers.disabledAt),
      ),
    );
  const row = rows[0];
  if (!row) return null;
  return {
    tenantId: row.tenantId,
    userId: row.userId,
    email: row.email,
    role: row.role as StaffRole,
    passwordHash: row.passwordHash,
  };
}
