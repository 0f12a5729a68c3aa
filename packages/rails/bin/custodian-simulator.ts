/**
 * Runs the custodian simulator as its own process:
 *   CUSTODIAN_WEBHOOK_SECRET=whsec_... [CUSTODIAN_PORT=0] [CUSTODIAN_WEBHOOK_URL=...] \
 *   [CUSTODIAN_API_KEY=...] tsx bin/custodian-simulator.ts
 * Prints one JSON line `{"event":"listening","url":"http://127.0.0.1:PORT"}` on stdout once it
 * accepts requests, so a parent process can find it; exits on SIGTERM or SIGINT.
 */
import { z } from 'zod';
import { startCustodianSimulator } from '../src/custodian/simulator.ts';

const env = z
  .object({
    CUSTODIAN_PORT: z.coerce.number().int().min(0).max(65_535).default(0),
    CUSTODIAN_HOST: z.string().default('127.0.0.1'),
    CUSTODIAN_WEBHOOK_SECRET: z.string().startsWith('whsec_'),
    CUSTODIAN_WEBHOOK_URL: z.url().optional(),
    CUSTODIAN_API_KEY: z.string().min(16).optional(),
  })
  .parse(process.env);

const simulator = await startCustodianSimulator({
  port: env.CUSTODIAN_PORT,
  host: env.CUSTODIAN_HOST,
  webhookSecret: env.CUSTODIAN_WEBHOOK_SECRET,
  webhookUrl: env.CUSTODIAN_WEBHOOK_URL ?? null,
  ...(env.CUSTODIAN_API_KEY ? { apiKey: env.CUSTODIAN_API_KEY } : {}),
});
process.stdout.write(`${JSON.stringify({ event: 'listening', url: simulator.url })}\n`);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    simulator.close().finally(() => process.exit(0));
  });
}
// Exit when the parent that started us goes away (its end of our stdin closes).
if (process.env.CUSTODIAN_EXIT_WITH_PARENT === '1') {
  process.stdin.resume();
  process.stdin.once('end', () => {
    simulator.close().finally(() => process.exit(0));
  });
}
