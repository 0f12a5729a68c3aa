import { IdemError } from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { staffUsers } from '../db/schema/index.ts';

const STAFF_ID = /^staff:([0-9a-f-]{36})$/;

/**
 * A member who joined or changed role recently approves nothing until the tenant's cooling-off
 * period has passed (staff_users.approvals_from, set by the database): otherwise an admin could
 * invite a second address of their own, accept, and approve their own requests as a second person
 * at once. Refused with COOLING_OFF before anything is recorded, naming when approvals will count;
 * the database refuses such an approval too (trigger approvals_cooling_off). Rejections are not
 * held back: refusing money to move is always allowed.
 */
export async function assertNotCoolingOff(tx: Tx, tenantId: string, staffId: string): Promise<void> {
  const userId = STAFF_ID.exec(staffId)?.[1];
  if (!userId) return;
  const [row] = await tx
    .select({ from: staffUsers.approvalsFrom })
    .from(staffUsers)
    .where(
      and(
        eq(staffUsers.tenantId, tenantId),
        eq(staffUsers.userId, userId),
        sql`${staffUsers.approvalsFrom} > now()`,
      ),
    );
  if (row?.from) {
    throw new IdemError(
      'COOLING_OFF',
      `this staff member joined or changed role recently and can approve from ${row.from.toISOString()}; nothing was recorded`,
    );
  }
}
