import { IdemError } from '@idem/contracts';
import { eq, sql } from 'drizzle-orm';
import type { Database, Executor } from '../db/connect.ts';
import { tenantGovernance } from '../db/schema/index.ts';

/** How long a proposal stays open by default: three days, a weekend and a working day. */
export const PROPOSAL_TTL_SECONDS_DEFAULT = 72 * 60 * 60;
const PROPOSAL_TTL_SECONDS_MAX = 30 * 24 * 60 * 60;

export interface Governance {
  proposalTtlSeconds: number;
}

export const GOVERNANCE_DEFAULTS: Governance = {
  proposalTtlSeconds: PROPOSAL_TTL_SECONDS_DEFAULT,
};

/** The tenant's governance settings; the defaults when it has never changed them. */
export async function governanceOf(db: Executor, tenantId: string): Promise<Governance> {
  const [row] = await db.select().from(tenantGovernance).where(eq(tenantGovernance.tenantId, tenantId));
  if (!row) return { ...GOVERNANCE_DEFAULTS };
  return { proposalTtlSeconds: row.proposalTtlSeconds };
}

/**
 * Sets a tenant's governance settings from the deployment's own tools (the CLI, test fixtures):
 * an administrative path, like setTenantMfa, outside any staff member's reach.
 */
export async function setTenantGovernance(
  db: Database,
  input: { tenantId: string; proposalTtlSeconds?: number },
): Promise<Governance> {
  const ttl = input.proposalTtlSeconds;
  if (ttl !== undefined && (!Number.isInteger(ttl) || ttl < 1 || ttl > PROPOSAL_TTL_SECONDS_MAX))
    throw new IdemError('VALIDATION', `a proposal lifetime is 1..${PROPOSAL_TTL_SECONDS_MAX} seconds`);
  return db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('app.tenant_id', ${input.tenantId}, true)`);
    const values = { ...(ttl === undefined ? {} : { proposalTtlSeconds: ttl }) };
    const insert = tx.insert(tenantGovernance).values({ tenantId: input.tenantId, ...values });
    if (Object.keys(values).length === 0) await insert.onConflictDoNothing();
    else await insert.onConflictDoUpdate({ target: tenantGovernance.tenantId, set: values });
    return governanceOf(tx, input.tenantId);
  });
}
