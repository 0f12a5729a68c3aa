import { allTenantIds, verifyAuditChain, withTenant } from '@idem/core';
import { z } from 'zod';
import { openConfiguredDatabase } from '../database.ts';
import { readEnv } from '../env.ts';
import { print, UsageError } from './usage.ts';

type Flags = Record<string, string | boolean | undefined>;

export const AUDIT_USAGE = `  audit verify [--tenant ID] [--json]             walk the audit log's hash chain of one tenant or every
                                                  tenant: prints each tenant's entries and head hash, or
                                                  the first row that does not hold (id, position, check,
                                                  expected, found); exit 1 on any break`;

/**
 * `idem audit verify`: recomputes every audit row's hash and link in chain order, per tenant, and
 * compares the last row with the tenant's chain head. Returns the exit code: 0 when every chain
 * holds, 1 when one does not (all tenants are still walked, so one break does not hide another).
 */
export async function auditCommand(sub: string[], flags: Flags): Promise<number> {
  const [action] = sub;
  if (action !== 'verify') throw new UsageError(`unknown audit command: ${action ?? '(none)'}`);
  const only = typeof flags.tenant === 'string' ? flags.tenant : null;
  if (only !== null && !z.uuid().safeParse(only).success)
    throw new UsageError('--tenant must be a tenant id');
  const database = await openConfiguredDatabase(readEnv(), { purpose: 'cli' });
  try {
    await database.migrateAsOwner();
    const db = database.db;
    const tenants = only ? [only] : await allTenantIds(db);
    const reports = [];
    for (const tenantId of tenants) {
      reports.push(await withTenant(db, tenantId, (tx) => verifyAuditChain(tx, tenantId)));
    }
    const broken = reports.filter((report) => !report.ok);
    print({ ok: broken.length === 0, tenants: reports }, flags.json === true);
    for (const report of broken) {
      const at = report.break;
      if (!at) continue;
      process.stderr.write(
        `idem: audit chain of tenant ${report.tenantId} breaks at position ${at.position}` +
          ` (entry ${at.entryId ?? 'none: rows at the end are missing'}), check ${at.check}:` +
          ` expected ${at.expected}, found ${at.found}\n`,
      );
    }
    return broken.length === 0 ? 0 : 1;
  } finally {
    await database.close();
  }
}
