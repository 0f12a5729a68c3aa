import { createLogger } from '../logger.ts';
import { readSignerConfig } from '../signer-service/config.ts';
import { verifySignerLog } from '../signer-service/log.ts';
import { startSignerService } from '../signer-service/service.ts';
import { print, required, UsageError } from './usage.ts';

export const SIGNER_USAGE = `  signer                                          run the signer service until SIGINT/SIGTERM: it alone holds
                                                  the HSM session and PIN and signs only what an approval
                                                  covers (configuration: IDEM_SIGNER_*; docs/SIGNING.md)
  signer verify-log --log PATH [--json]           check the signer log's hash chain`;

type Flags = Record<string, string | boolean | undefined>;

/** `idem signer` and `idem signer verify-log`. */
export async function signerCommand(rest: string[], flags: Flags): Promise<number> {
  if (rest[0] === 'verify-log') {
    const result = verifySignerLog(required(flags, 'log'));
    print(result.ok ? { ok: true, lines: result.lines.length } : result, flags.json === true);
    return result.ok ? 0 : 1;
  }
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
