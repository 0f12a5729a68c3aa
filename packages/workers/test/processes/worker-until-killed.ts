/**
 * A real worker process that stops dead at a chosen point of the send path until the test kills
 * it with SIGKILL. Arguments: databaseUrl rpcUrl chainId stopAt leaseMs
 */
import { openDatabase } from '@idem/core';
import pino from 'pino';
import { RailRegistry } from '../../src/rails.ts';
import { createWorker } from '../../src/worker.ts';

const [url, rpcUrl, chainId, stopAt, leaseMs] = process.argv.slice(2);
if (!url || !rpcUrl || !chainId || !stopAt || !leaseMs)
  throw new Error('usage: url rpcUrl chainId stopAt leaseMs');

// Optional: fixed fees (wei, decimal strings) and replace policies, as JSON (the stuck-withdrawal tests).
const extra = JSON.parse(process.argv[7] ?? '{}') as {
  fees?: { maxFeePerGasWei: string; maxPriorityFeePerGasWei: string };
  replacePolicies?: Record<string, { bumpAfterMs: number; maxBumps: number }>;
};
const handle = await openDatabase({ url, maxConnections: 2 });
const worker = createWorker({
  db: handle.db,
  rails: new RailRegistry({
    evm: { rpcUrl, chainId: Number(chainId) },
    ...(extra.fees
      ? {
          fees: {
            maxFeePerGasWei: BigInt(extra.fees.maxFeePerGasWei),
            maxPriorityFeePerGasWei: BigInt(extra.fees.maxPriorityFeePerGasWei),
          },
        }
      : {}),
  }),
  ...(extra.replacePolicies ? { replacePolicies: extra.replacePolicies } : {}),
  log: pino({ level: 'silent' }),
  workerId: 'doomed-worker',
  leaseMs: Number(leaseMs),
  probe: async (step, operationId) => {
    if (step !== stopAt) return;
    process.stdout.write(`STOPPED ${step} ${operationId}\n`);
    await new Promise(() => {});
  },
});
await worker.runOnce();
process.stdout.write('FINISHED\n');
await handle.close();
