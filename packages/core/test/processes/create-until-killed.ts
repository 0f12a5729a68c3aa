/**
 * A real process that creates a withdrawal and stops dead at a chosen step, inside its open
 * transaction, until the test kills it with SIGKILL. Arguments: url tenantId step key request-json
 */
import { openDatabase } from '../../src/db/connect.ts';
import { withTenant } from '../../src/db/tenant-scope.ts';
import { createWithdrawal } from '../../src/operations/create-withdrawal.ts';

const [url, tenantId, stopAt, key, requestJson] = process.argv.slice(2);
if (!url || !tenantId || !stopAt || !key || !requestJson)
  throw new Error('usage: url tenantId step key request');

const handle = await openDatabase({ url, maxConnections: 1 });
await withTenant(handle.db, tenantId, (tx) =>
  createWithdrawal(tx, {
    tenantId,
    request: JSON.parse(requestJson),
    idempotencyKey: key,
    probe: async (step) => {
      if (step !== stopAt) return;
      process.stdout.write(`STOPPED ${step}\n`);
      await new Promise(() => {}); // hang inside the transaction until killed
    },
  }),
);
process.stdout.write('COMMITTED\n');
await handle.close();
