import { existsSync } from 'node:fs';
import { withTenant } from '@idem/core';
import { openConfiguredDatabase } from '../database.ts';
import { readEnv } from '../env.ts';
import { createLogger } from '../logger.ts';
import { readSignerConfig } from '../signer-service/config.ts';
import { verifySignerLog } from '../signer-service/log.ts';
import { startSignerService } from '../signer-service/service.ts';
import { pinTenant, readTrustFile, tenantTrustAtBootstrap } from '../signer-service/trust-file.ts';
import { print, required, UsageError } from './usage.ts';

export const SIGNER_USAGE = `  signer                                          run the signer service until SIGINT/SIGTERM: it alone holds
                                                  the HSM session and PIN and signs only what an approval
                                                  covers (configuration: IDEM_SIGNER_*; docs/SIGNING.md)
  signer verify-log --log PATH [--json]           check the signer log's hash chain
  signer pin --tenant ID --origin URL --file PATH [--min-approvals N]
                                                  at bootstrap: pin the tenant's admins' active passkeys
                                                  and its auto-approve limits in the signer's trust file
                                                  (DATABASE_URL; docs/SIGNING.md "Chain of trust")`;

type Flags = Record<string, string | boolean | undefined>;

/** `idem signer` and `idem signer verify-log`. */
export async function signerCommand(rest: string[], flags: Flags): Promise<number> {
  if (rest[0] === 'verify-log') {
    const result = verifySignerLog(required(flags, 'log'));
    print(result.ok ? { ok: true, lines: result.lines.length } : result, flags.json === true);
    return result.ok ? 0 : 1;
  }
  if (rest[0] === 'pin' && rest.length === 1) return pinCommand(flags);
  if (rest.length > 0) throw new UsageError(`unknown signer command: ${rest.join(' ')}`);
  const config = readSignerConfig(process.env);
  // The PIN lives in this process's memory only from here on.
  delete process.env.IDEM_SIGNER_PKCS11_PIN;
  const log = createLogger({ level: process.env.LOG_LEVEL ?? 'info' });
  const service = await startSignerService(config, log);
  process.stdout.write(`${JSON.stringify({ event: 'signer-started', url: service.url })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await service.close();
  log.flush();
  return 0;
}

/** `idem signer pin`: writes one tenant's bootstrap trust into the signer's trust file. */
async function pinCommand(flags: Flags): Promise<number> {
  const tenantId = required(flags, 'tenant');
  const origin = required(flags, 'origin');
  const path = required(flags, 'file');
  const minApprovals = flags['min-approvals'] === undefined ? 1 : Number(flags['min-approvals']);
  if (!Number.isInteger(minApprovals) || minApprovals < 1 || minApprovals > 10) {
    throw new UsageError('--min-approvals: a whole number from 1 to 10');
  }
  const existing = existsSync(path) ? readTrustFile(path) : null;
  const database = await openConfiguredDatabase(readEnv(), { purpose: 'cli' });
  try {
    const trust = await withTenant(database.db, tenantId, (tx) =>
      tenantTrustAtBootstrap(tx, tenantId, minApprovals),
    );
    pinTenant(path, { tenantId, origin, trust }, existing);
    print(
      {
        tenantId,
        anchors: trust.anchors.length,
        autoApproveMaxMinor: trust.autoApproveMaxMinor,
        minApprovals,
        file: path,
      },
      flags.json === true,
    );
    return 0;
  } finally {
    await database.close();
  }
}
