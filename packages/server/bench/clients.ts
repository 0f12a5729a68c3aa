/** The bench's integrators: the SDK (tRPC), plain HTTP on the REST face, and the bulk API. */
import { createIdemClient, withdrawalKey } from '@idem/sdk';
import { Client as UndiciClient } from 'undici';
import type { Submit } from './measure.ts';

/** Where the bench's withdrawals go, and as whom. */
export interface Integrator {
  baseUrl: string;
  apiKey: string;
  destination: string;
}

export function sdkClient({ baseUrl, apiKey, destination }: Integrator): Submit {
  const idem = createIdemClient({ baseUrl, apiKey });
  return async (withdrawalId, accountId) =>
    (
      await idem.withdrawals.submit(
        { withdrawalId, accountId, asset: 'ETH', destination, amountMinor: '1000' },
        withdrawalKey(withdrawalId),
      )
    ).outcome;
}

// The REST face as a non-TypeScript integrator calls it: plain HTTP/1.1, one keep-alive
// connection each. The load generator is undici's Client, the cheapest HTTP/1.1 client measured
// on Node here (0.13 ms of CPU per call against 0.19 to 0.21 for node:http's request, two
// interleaved pairs of REST runs on 2026-12-01): on 2 shared cores, the clients' CPU is taken
// from the server and PostgreSQL, and pgbench's own client is C.
export function postWithdrawal(
  connection: UndiciClient,
  { apiKey, destination }: Integrator,
  withdrawalId: string,
  accountId: string,
) {
  return connection.request({
    path: '/v1/withdrawals',
    method: 'POST',
    headers: {
      authorization: `Bearer ${apiKey}`,
      'content-type': 'application/json',
      'idempotency-key': withdrawalKey(withdrawalId),
    },
    body: JSON.stringify({ withdrawalId, accountId, asset: 'ETH', destination, amountMinor: '1000' }),
  });
}

export function restClient(integrator: Integrator, baseUrl = integrator.baseUrl): Submit {
  const connection = new UndiciClient(baseUrl, { pipelining: 1 });
  return async (withdrawalId, accountId) => {
    const answer = await postWithdrawal(connection, integrator, withdrawalId, accountId);
    await answer.body.dump();
    // The outcome from the status: 201 created, 200 replayed.
    if (answer.statusCode === 201) return 'CREATED';
    if (answer.statusCode === 200) return 'REPLAYED';
    throw new Error(`REST answered ${answer.statusCode}`);
  };
}

/** One bulk call of `items` withdrawals; all of them must be created. */
export function bulkCaller(
  integrator: Integrator,
  items: number,
  nextId: () => string,
  account: () => string,
): () => Promise<'CREATED'> {
  const bulkClient = createIdemClient({ baseUrl: integrator.baseUrl, apiKey: integrator.apiKey });
  return async () => {
    const { results } = await bulkClient.withdrawals.submitMany(
      Array.from({ length: items }, () => ({
        request: {
          withdrawalId: nextId(),
          accountId: account(),
          asset: 'ETH',
          destination: integrator.destination,
          amountMinor: '1000',
        },
      })),
    );
    const created = results.filter((r) => 'outcome' in r && r.outcome === 'CREATED').length;
    if (created !== items) throw new Error(`a bulk call created ${created} of ${items}`);
    return 'CREATED' as const;
  };
}
