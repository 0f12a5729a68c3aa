import { sql } from 'drizzle-orm';
import { pgPolicy } from 'drizzle-orm/pg-core';

/**
 * The one row-level-security policy every tenant table carries: a row is visible and writable only
 * when its tenant_id equals the transaction's `app.tenant_id` (set by `withTenant`). An unset
 * setting yields NULL, which matches nothing, so a forgotten scope sees no rows rather than all.
 */
export const tenantPolicy = () =>
  pgPolicy('tenant_isolation', {
    as: 'permissive',
    for: 'all',
    using: sql`tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid`,
    withCheck: sql`tenant_id = nullif(current_setting('app.tenant_id', true), '')::uuid`,
  });
