/**
 * A real process that submits withdrawals concurrently through the batcher and stays
 * alive until the test kills it with SIGKILL. It prints `ACK <key> <outcome>` for every answer it
 * gets. Arguments: url tenantId requests-json (an array of { key, request }).
 */
import { openDatabase } from '../../src/db/connect.ts';
import { submitWithdrawal } from '../../src/operations/create-withdrawal.ts';

const [url, tenantId, itemsJson] = process.argv.slice(2);
if (!url || !tenantId || !itemsJson) throw new Error('usage: url tenantId items');
const items = JSON.parse(itemsJson) as { key: string; request: unknown }[];

// Two connections and one batch at a time: the first submission goes alone, the rest gather into
// one statement behind it.
const handle = await openDatabase({ url, maxConnections: 2, batching: { concurrency: 1, gatherFrom: 1 } });
// Report the size of each batch statement as it is sent (the test checks one gathered several).
const db = handle.db as unknown as {
  execute(query: unknown): Promise<unknown>;
  dialect: { sqlToQuery(query: unknown): { sql: string; params: unknown[] } };
};
const execute = db.execute.bind(db);
db.execute = (query: unknown) => {
  const { sql, params } = db.dialect.sqlToQuery(query);
  if (sql.includes('idem_create_withdrawals')) {
    process.stdout.write(`BATCH ${(JSON.parse(String(params[1])) as unknown[]).length}\n`);
  }
  return execute(query);
};
await Promise.all(
  items.map(({ key, request }) =>
    submitWithdrawal(handle.db, { tenantId, request, idempotencyKey: key }).then(
      (claim) => process.stdout.write(`ACK ${key} ${claim.outcome}\n`),
      (error: unknown) => process.stdout.write(`ERR ${key} ${String(error)}\n`),
    ),
  ),
);
await new Promise(() => {}); // stay until killed
