import { type AnvilInstance, startAnvil } from '@idem/rails';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSilentServer } from './support/in-process.ts';

let anvil: AnvilInstance;
let database: TestDatabase;

beforeAll(async () => {
  // A node that reports chain 1, as a production node would.
  anvil = await startAnvil({ chainId: 1 });
  database = await createTestDatabase({ maxConnections: 3 });
});
afterAll(async () => {
  await database?.dispose();
  await anvil?.stop();
});

describe('I32-CHAIN the server trusts the chain id its node reports', () => {
  it('I32-CHAIN a server left at the development chain id refuses to start against a node of chain 1', async () => {
    const starting = startSilentServer(database, {
      IDEM_EVM_RPC_URL: anvil.rpcUrl,
      IDEM_WORKER_IN_PROCESS: 'false',
    });
    await expect(starting).rejects.toThrow(/reports chain 1, not the configured chain 31337/);
  });
});
