import { timingSafeEqual } from 'node:crypto';
import {
  IdemError,
  type ReconciliationRunDetail,
  reconciliationRunDetailSchema,
  type SignedRunReport,
  signedRunReportSchema,
} from '@idem/contracts';
import { activeOutboundEndpoints, type Database, getRun, withTenant } from '@idem/core';
import { Webhook } from 'standardwebhooks';

const CSV_COLUMNS = [
  'run_id',
  'ran_by',
  'trigger',
  'started_at',
  'finished_at',
  'result',
  'place',
  'asset_code',
  'liabilities_available_minor',
  'liabilities_held_minor',
  'custody_control_minor',
  'fee_expense_minor',
  'in_flight_withdrawals_minor',
  'expected_minor',
  'observed_minor',
  'explained_minor',
  'unexplained_minor',
  'pinned_block',
  'reported_at',
  'account_tenants',
  'break_id',
] as const;

/** One row per place and asset; amounts as integers in minor units, never formatted. */
export function runCsv(run: ReconciliationRunDetail): string {
  const rows = run.figures.map((f) => [
    run.runId,
    run.ranBy,
    run.trigger,
    run.startedAt,
    run.finishedAt ?? '',
    run.result ?? '',
    f.place,
    f.assetCode,
    f.liabilitiesAvailableMinor,
    f.liabilitiesHeldMinor,
    f.custodyControlMinor,
    f.feeExpenseMinor,
    f.inFlightWithdrawalsMinor,
    f.expectedMinor,
    f.observedMinor ?? '',
    f.explainedMinor,
    f.unexplainedMinor ?? '',
    f.pinnedBlock?.toString() ?? '',
    f.reportedAt ?? '',
    String(f.accountTenants),
    f.breakId ?? '',
  ]);
  return `${[CSV_COLUMNS as readonly string[], ...rows].map((row) => row.map(csvCell).join(',')).join('\r\n')}\r\n`;
}

function csvCell(value: string): string {
  // A leading =, +, - or @ would be a formula in a spreadsheet: quote and prefix it (amounts may be negative).
  const guarded = /^[=+@]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(guarded) ? `"${guarded.replaceAll('"', '""')}"` : guarded;
}

/**
 * The run as the auditor receives it: its JSON, signed with the tenant's own outbound-webhook
 * secret by the Standard Webhooks scheme (HMAC-SHA256 over `<id>.<timestamp>.<payload>`), the
 * same scheme and key the tenant already verifies our webhooks with. The oldest active endpoint's
 * secret signs; the report names that endpoint, never the secret.
 */
export async function signRunReport(
  db: Database,
  tenantId: string,
  runId: string,
  now: Date = new Date(),
): Promise<SignedRunReport> {
  const { run, endpoint } = await withTenant(db, tenantId, async (tx) => ({
    run: await getRun(tx, { tenantId, runId }),
    endpoint: (await activeOutboundEndpoints(tx, tenantId)).sort(
      (a, b) => a.createdAt.getTime() - b.createdAt.getTime(),
    )[0],
  }));
  if (!endpoint) {
    throw new IdemError(
      'VALIDATION',
      'the tenant has no active outbound webhook endpoint, whose secret signs the report',
    );
  }
  if (run.status === 'running') throw new IdemError('VALIDATION', 'the run has not finished');
  const payload = JSON.stringify(run);
  const id = `recon_${run.runId}`;
  const signature = new Webhook(endpoint.secret).sign(id, now, payload);
  return {
    format: 'idem.reconciliation-run.v1',
    signature: {
      scheme: 'standard-webhooks',
      id,
      timestamp: String(Math.floor(now.getTime() / 1000)),
      signature,
      endpointId: endpoint.endpointId,
    },
    payload,
  };
}

/**
 * Checks a signed report with the tenant's outbound-webhook secret and returns the run it
 * carries. Unlike a webhook, a report has no freshness window: an auditor verifies it months
 * later, so only the signature over the exact payload is checked.
 */
export function verifyRunReport(text: string, secret: string): ReconciliationRunDetail {
  const report = signedRunReportSchema.parse(JSON.parse(text));
  const { id, timestamp, signature } = report.signature;
  const expected = new Webhook(secret).sign(id, new Date(Number(timestamp) * 1000), report.payload);
  // The header may list several signatures ("v1,<a> v1,<b>"); ours is one.
  const offered = signature.split(' ').map((part) => Buffer.from(part));
  const wanted = Buffer.from(expected);
  if (!offered.some((part) => part.length === wanted.length && timingSafeEqual(part, wanted))) {
    throw new IdemError('UNAUTHORIZED', 'the report signature does not match this secret');
  }
  return reconciliationRunDetailSchema.parse(JSON.parse(report.payload));
}
