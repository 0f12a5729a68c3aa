import { asc, eq } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { policyHistory as history } from '../db/schema/index.ts';

export type PolicyChange = typeof history.$inferSelect;

/**
 * A tenant's policy changes, oldest first: who changed which rules when, from which version to
 * which, and the rules before and after. Read in the tenant's scope (row-level security).
 */
export async function policyHistory(tx: Tx, tenantId: string): Promise<PolicyChange[]> {
  return tx.select().from(history).where(eq(history.tenantId, tenantId)).orderBy(asc(history.toVersion));
}
