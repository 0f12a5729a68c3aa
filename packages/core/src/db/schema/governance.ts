import { sql } from 'drizzle-orm';
import { check, integer, pgTable, primaryKey, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * A tenant's governance settings: how long a proposal stays open. A tenant without a row has the
 * defaults (core/src/tenants/governance.ts), so a tenant made before these settings existed
 * behaves like a new one.
 */
export const tenantGovernance = pgTable(
  'tenant_governance',
  {
    tenantId: uuid('tenant_id').notNull(),
    /** A proposal not decided within this many seconds of being made expires (72 hours by default). */
    proposalTtlSeconds: integer('proposal_ttl_seconds').notNull().default(259_200),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId] }),
    check('tenant_governance_ttl_range', sql`${t.proposalTtlSeconds} between 1 and 2592000`),
    tenantPolicy(),
  ],
);
