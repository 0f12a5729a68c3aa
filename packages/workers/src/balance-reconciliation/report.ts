import { createHash, createPublicKey, type KeyObject, timingSafeEqual, verify } from 'node:crypto';
import {
  IdemError,
  type ReconciliationRunDetail,
  type ReportKey,
  reconciliationRunDetailSchema,
  SIGNER_REPORT_PREFIX,
  type SignedRunReport,
  signedRunReportSchema,
  signerSignedRunReportSchema,
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
  signerService?: { url: string; token: string },
): Promise<SignedRunReport> {
  // With the signer service, its own Ed25519 key signs what it reads itself (I32-SIGNER).
  if (signerService) return requestSignerReport(signerService, tenantId, runId);
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
export function verifyRunReport(text: string, secretOrPublicKey: string): ReconciliationRunDetail {
  const report = signedRunReportSchema.parse(JSON.parse(text));
  if (report.format === 'idem.reconciliation-run.v2') {
    if (!secretOrPublicKey.includes('BEGIN PUBLIC KEY')) {
      throw new IdemError(
        'UNAUTHORIZED',
        "the report is signed by the signer service: verify it with the service's public key",
      );
    }
    const key = createPublicKey(secretOrPublicKey);
    const valid =
      reportKeyOf(key).keyId === report.signature.keyId &&
      verify(
        null,
        Buffer.from(`${SIGNER_REPORT_PREFIX}${report.payload}`, 'utf8'),
        key,
        Buffer.from(report.signature.signature, 'base64'),
      );
    if (!valid) throw new IdemError('UNAUTHORIZED', 'the report signature does not match this public key');
    return reconciliationRunDetailSchema.parse(JSON.parse(report.payload));
  }
  const secret = secretOrPublicKey;
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

/** The published form of the signer service's report key; its id is a prefix of the SPKI's SHA-256. */
export function reportKeyOf(publicKey: KeyObject): ReportKey {
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return {
    algorithm: 'ed25519',
    keyId: createHash('sha256').update(der).digest('hex').slice(0, 16),
    publicKey: String(publicKey.export({ type: 'spki', format: 'pem' })),
  };
}

/** Asks the signer service to sign a finished run; it reads the run from the database itself. */
async function requestSignerReport(
  service: { url: string; token: string },
  tenantId: string,
  runId: string,
): Promise<SignedRunReport> {
  let response: Response;
  try {
    response = await fetch(new URL('/v1/sign-report', service.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${service.token}` },
      body: JSON.stringify({ tenantId, runId }),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    throw new IdemError('SIGNER_UNAVAILABLE', `signer service unreachable: ${String(error).slice(0, 200)}`);
  }
  const body = (await response.json().catch(() => null)) as {
    error?: { code?: string; message?: string };
  } | null;
  if (!response.ok) {
    const code = body?.error?.code;
    const message = `signer service refused the report: ${body?.error?.message ?? `HTTP ${response.status}`}`;
    if (code === 'NOT_FOUND' || code === 'VALIDATION') throw new IdemError(code, message);
    throw new IdemError('SIGNER_UNAVAILABLE', message);
  }
  return signerSignedRunReportSchema.parse(body);
}
