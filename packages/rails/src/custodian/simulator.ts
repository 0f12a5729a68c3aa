/**
 * A custodian that behaves like a typical REST custody provider and misbehaves on request, so the
 * adapter's promises can be tested over real HTTP against a separate process.
 *
 * Real routes: POST /v1/transfers (idempotent on externalReference unless told otherwise),
 * GET /v1/transfers?externalReference=..., GET /v1/transfers/:id, GET /v1/transfers and
 * GET /v1/deposits by time window, GET /v1/deposits/:id, GET /v1/balances (the account's holdings: funded through
 * /_control, less completed transfers; misreported on request). Status and deposit webhooks are
 * signed with Standard Webhooks. Test routes: POST /_control (zod-validated, see
 * `controlBodySchema`; it also makes deposits arrive), POST /_seed (transfers put on the books
 * directly, see `seedBodySchema`) and GET /_ledger (every transfer and deposit, counts per
 * reference, webhook deliveries).
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { ControlBody } from './protocol.ts';
import { CustodianBooks } from './simulator-books.ts';
import { sendJson } from './simulator-http.ts';
import { route, type Simulator } from './simulator-routes.ts';

export { faultHeader } from './simulator-routes.ts';

export interface CustodianSimulatorOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Standard Webhooks secret (`whsec_...`) used to sign every status webhook. */
  webhookSecret: string;
  webhookUrl?: string | null;
  /** When set, /v1 routes require `authorization: Bearer <apiKey>`. */
  apiKey?: string;
  settlement?: NonNullable<ControlBody['settlement']>;
}

export interface RunningCustodianSimulator {
  readonly url: string;
  close(): Promise<void>;
}

export function generateWebhookSecret(): string {
  return `whsec_${randomBytes(24).toString('base64')}`;
}

/** Starts the simulator on its port: the books, the webhook outbox, and the routes over them. */
export async function startCustodianSimulator(
  options: CustodianSimulatorOptions,
): Promise<RunningCustodianSimulator> {
  const books = new CustodianBooks(options);
  const hanging = new Set<Socket>();
  const sim: Simulator = { books, apiKey: options.apiKey, hanging };
  const server = createServer((request, response) => {
    route(sim, request, response).catch((error: unknown) => {
      if (!response.headersSent) sendJson(response, 500, { error: 'internal', message: String(error) });
      else response.destroy();
    });
  });
  // Hung sockets are intentional for one fault; anything else idle this long is abandoned.
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve) =>
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve),
  );
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.address}:${address.port}`,
    async close() {
      books.close();
      for (const socket of hanging) socket.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
