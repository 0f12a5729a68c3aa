import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { openDatabase, rowsOf, submitWithdrawal, submitWithdrawals } from '../src/index.ts';
import { fundedTenant } from './workload.ts';

/**
 * Where PostgreSQL's time goes as batches grow: one connection writes CALLS items
 * sequentially, alone (the single-item function) or in batches of each size (the batch function,
 * through the bulk entry point), and the backend's own CPU time is read from /proc before and after.
 * Sequential on purpose: no queueing, no other process on that backend, so CPU per item is the
 * statement's cost (execution, triggers, index maintenance, WAL, COMMIT), not the machine's.
 */
export interface BatchSizeFigure {
  size: number;
  itemsPerSec: number;
  /** The backend's user+system CPU per item (null where /proc cannot be read). */
  backendCpuMsPerItem: number | null;
}

export const BATCH_SIZES = [1, 2, 3, 4, 16, 64, 256] as const;
const CALLS = 2_048;

function backendCpuMs(pid: number): number | null {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return null;
  }
}

export async function batchSizePhase(url: string): Promise<BatchSizeFigure[]> {
  const setup = await openDatabase({ url, maxConnections: 4 });
  const tenant = await fundedTenant(setup.db, 'bench batch sizes', 16, 4);
  await setup.close();
  const figures: BatchSizeFigure[] = [];
  let sequence = 0;
  const item = () => {
    sequence += 1;
    const withdrawalId = `bs-${sequence}`;
    return {
      idempotencyKey: `withdrawal-${withdrawalId}`,
      request: {
        withdrawalId,
        accountId: tenant.accountIds[sequence % tenant.accountIds.length] ?? 'acct-0',
        asset: 'ETH',
        destination: '0x52908400098527886E0F7030069857D2E4169EE7',
        amountMinor: '1000',
      },
    };
  };
  for (const size of BATCH_SIZES) {
    const handle = await openDatabase({ url, maxConnections: 1, batching: false });
    try {
      // Warm the connection, its prepared statements and the process's context cache.
      await submitWithdrawal(handle.db, { tenantId: tenant.tenantId, ...item() });
      await submitWithdrawals(handle.db, { tenantId: tenant.tenantId, items: [item(), item()] });
      const [row] = rowsOf<{ pid: number }>(await handle.db.execute(sql`select pg_backend_pid() as pid`));
      const pid = row?.pid ?? 0;
      const cpuBefore = backendCpuMs(pid);
      const started = performance.now();
      for (let written = 0; written < CALLS; written += size) {
        if (size === 1) await submitWithdrawal(handle.db, { tenantId: tenant.tenantId, ...item() });
        else {
          const outcomes = await submitWithdrawals(handle.db, {
            tenantId: tenant.tenantId,
            items: Array.from({ length: size }, item),
          });
          if (!outcomes.every((outcome) => outcome.ok && outcome.claim.outcome === 'CREATED')) {
            throw new Error(`a batch of ${size} did not create every item`);
          }
        }
      }
      const seconds = (performance.now() - started) / 1000;
      const cpuAfter = backendCpuMs(pid);
      figures.push({
        size,
        itemsPerSec: Math.round(CALLS / seconds),
        backendCpuMsPerItem:
          cpuBefore === null || cpuAfter === null
            ? null
            : Math.round(((cpuAfter - cpuBefore) / CALLS) * 1000) / 1000,
      });
    } finally {
      await handle.close();
    }
  }
  return figures;
}
