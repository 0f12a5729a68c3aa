/**
 * The signer service's report key (I32-SIGNER): an Ed25519 key of the service's own, which no
 * tenant holds, signs balance-reconciliation runs for auditors. The service reads the finished run
 * from the database itself (read-only) and signs `idem.reconciliation-run.v2\n` + its JSON; the
 * public half is served at GET /v1/report-key and published by the server (GET /report-key.json).
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { IdemError, type ReportKey, SIGNER_REPORT_PREFIX, type SignedRunReport } from '@idem/contracts';
import { type Database, getRun } from '@idem/core';
import { reportKeyOf } from '@idem/workers';
import { sql } from 'drizzle-orm';
import { z } from 'zod';

export const signReportRequestSchema = z.object({ tenantId: z.uuid(), runId: z.uuid() });

/** Loads the key file, or creates it (mode 0600) on the first start. */
export function loadReportKey(path: string): KeyObject {
  if (!existsSync(path)) {
    const { privateKey } = generateKeyPairSync('ed25519');
    writeFileSync(path, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  }
  const key = createPrivateKey(readFileSync(path, 'utf8'));
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new IdemError('VALIDATION', 'IDEM_SIGNER_REPORT_KEY_FILE does not hold an Ed25519 private key');
  }
  return key;
}

export function publishedReportKey(privateKey: KeyObject): ReportKey {
  return reportKeyOf(createPublicKey(privateKey));
}

/** Signs a finished run of a tenant, as the service reads it. */
export async function signRun(
  db: Database,
  privateKey: KeyObject,
  request: z.infer<typeof signReportRequestSchema>,
): Promise<SignedRunReport> {
  const run = await db.transaction(async (tx) => {
    await tx.execute(sql`set transaction read only`);
    await tx.execute(sql`select set_config('app.tenant_id', ${request.tenantId}, true)`);
    return getRun(tx, request);
  });
  if (run.status === 'running') throw new IdemError('VALIDATION', 'the run has not finished');
  const payload = JSON.stringify(run);
  const signature = sign(null, Buffer.from(`${SIGNER_REPORT_PREFIX}${payload}`, 'utf8'), privateKey);
  return {
    format: 'idem.reconciliation-run.v2',
    signature: {
      scheme: 'ed25519',
      keyId: publishedReportKey(privateKey).keyId,
      signature: signature.toString('base64'),
    },
    payload,
  };
}
