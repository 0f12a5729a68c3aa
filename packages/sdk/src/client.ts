import {
  type AssetEntry,
  type BalanceEntry,
  type CreateCustomerSessionOutput,
  createCustomerSessionOutputSchema,
  getBalancesOutputSchema,
  type ListDepositsInput,
  type ListDepositsOutput,
  type ListWithdrawalsInput,
  type ListWithdrawalsOutput,
  listAssetsOutputSchema,
  listDepositsOutputSchema,
  listWithdrawalsOutputSchema,
  type OperationView,
  operationViewSchema,
  problemSchema,
  type SubmitWithdrawalOutput,
  type SubmitWithdrawalsOutput,
  submitWithdrawalOutputSchema,
  submitWithdrawalsOutputSchema,
  type WithdrawalRequest,
} from '@idem/contracts';
import { createTRPCUntypedClient, httpLink, TRPCClientError } from '@trpc/client';
import type { z } from 'zod';
import { IdemApiError, IdemTransportError } from './errors.ts';
import { withdrawalKey } from './key.ts';
import { backoffMs, DEFAULT_RETRY, type RetryPolicy } from './retry.ts';
import { undiciTransport } from './transport.ts';

/**
 * The procedure paths this SDK calls. The facade below is the stable surface: a router refactor on
 * the server changes this table, never an integrator's code. The server's tests check each path.
 */
export const PROCEDURES = {
  submitWithdrawal: { path: 'withdrawals.submit', type: 'mutation' },
  submitWithdrawals: { path: 'withdrawals.submitMany', type: 'mutation' },
  getWithdrawal: { path: 'withdrawals.get', type: 'query' },
  listWithdrawals: { path: 'withdrawals.list', type: 'query' },
  getWithdrawalByKey: { path: 'withdrawals.getByKey', type: 'query' },
  listDeposits: { path: 'deposits.list', type: 'query' },
  getBalances: { path: 'balances.get', type: 'query' },
  listAssets: { path: 'assets.list', type: 'query' },
  createCustomerSession: { path: 'customerSessions.create', type: 'mutation' },
} as const;

export interface IdemClientOptions {
  /** Where the server listens, e.g. `https://idem.example.com` (the SDK appends `/trpc`). */
  baseUrl: string;
  apiKey: string;
  retry?: Partial<RetryPolicy>;
  /** Per attempt; a timed-out attempt is retried with the same key. */
  requestTimeoutMs?: number;
  /**
   * A fetch implementation, for runtimes other than Node (Deno, Bun, workers) or for tests. On
   * Node the default is undici's request API over a keep-alive pool (`undiciTransport`).
   */
  fetch?: typeof fetch;
}

export interface IdemClient {
  withdrawals: {
    /**
     * Creates the withdrawal, or returns the one this key already created (`outcome: 'REPLAYED'`,
     * also success). The key is yours: derive it from your withdrawal id (`withdrawalKey(id)`).
     */
    submit(
      request: WithdrawalRequest,
      idempotencyKey: string,
    ): Promise<{ outcome: SubmitWithdrawalOutput['outcome']; withdrawal: OperationView }>;
    /**
     * Up to 1,000 withdrawals in one call, each with its own key (default:
     * `withdrawalKey(request.withdrawalId)`). `results` holds one answer per item, in order: what
     * `submit` would return (`{ outcome, withdrawal }`) or, where `submit` would throw, `{ error }`
     * with the same code, `holderKey`, `retryAfterMs` or `issues`. One item's refusal never fails
     * the others. The call is retried as a whole on UNAVAILABLE, rate limiting and network errors,
     * which is safe: every item replays by its key. Throws IdemApiError only when the batch itself
     * is refused (VALIDATION: not 1 to 1,000 items) or stays unanswerable.
     */
    submitMany(
      items: { request: WithdrawalRequest; idempotencyKey?: string }[],
    ): Promise<SubmitWithdrawalsOutput>;
    get(withdrawalId: string): Promise<OperationView>;
    list(filter?: ListWithdrawalsInput): Promise<ListWithdrawalsOutput>;
    /**
     * What a key holds: the withdrawal it created. After a lost answer or a conflict naming
     * `holderKey`, this tells you what that key produced; NOT_FOUND means it produced nothing.
     */
    getByKey(idempotencyKey: string): Promise<OperationView>;
  };
  deposits: { list(filter?: ListDepositsInput): Promise<ListDepositsOutput> };
  balances: { get(accountId: string): Promise<BalanceEntry[]> };
  assets: { list(): Promise<AssetEntry[]> };
  customerSessions: {
    /**
     * A one-time URL that opens the customer screens for one account, and when it stops working.
     * Send the customer there (a redirect or a link); it can be used once. A retry after a network
     * error may mint a second link: the unused one simply expires.
     */
    create(input: { accountId: string; expiresInSeconds?: number }): Promise<CreateCustomerSessionOutput>;
  };
}

export function createIdemClient(options: IdemClientOptions): IdemClient {
  const policy: RetryPolicy = { ...DEFAULT_RETRY, ...options.retry };
  const timeoutMs = options.requestTimeoutMs ?? 10_000;
  const trpc = createTRPCUntypedClient({
    links: [
      httpLink({
        url: `${options.baseUrl.replace(/\/+$/, '')}/trpc`,
        headers: { authorization: `Bearer ${options.apiKey}` },
        fetch: options.fetch ?? undiciTransport(),
      }),
    ],
  });

  async function call<S extends z.ZodType>(
    procedure: (typeof PROCEDURES)[keyof typeof PROCEDURES],
    input: unknown,
    output: S,
  ): Promise<z.infer<S>> {
    const started = Date.now();
    for (let attempt = 1; ; attempt += 1) {
      let failure: IdemApiError | IdemTransportError | undefined;
      let result: unknown;
      try {
        const signal = AbortSignal.timeout(timeoutMs);
        result =
          procedure.type === 'mutation'
            ? await trpc.mutation(procedure.path, input, { signal })
            : await trpc.query(procedure.path, input, { signal });
      } catch (error) {
        failure = classify(error, attempt);
      }
      // Outside the try: an answer that breaks the contract is a bug to report, not to retry.
      if (failure === undefined) return output.parse(result);
      // Conflicts, validation and every other definite refusal are final: retrying cannot change them.
      if (failure instanceof IdemApiError && !failure.isRetryable) throw failure;
      const retryAfterMs = failure instanceof IdemApiError ? failure.problem.retryAfterMs : undefined;
      const waitMs = backoffMs(policy, attempt, retryAfterMs);
      if (attempt >= policy.attemptsMax || Date.now() - started + waitMs > policy.totalMsMax) throw failure;
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }

  return {
    withdrawals: {
      submit: (request, idempotencyKey) =>
        call(PROCEDURES.submitWithdrawal, { request, idempotencyKey }, submitWithdrawalOutputSchema),
      submitMany: (items) =>
        call(
          PROCEDURES.submitWithdrawals,
          {
            items: items.map(({ request, idempotencyKey }) => ({
              request,
              idempotencyKey: idempotencyKey ?? defaultKey(request),
            })),
          },
          submitWithdrawalsOutputSchema,
        ),
      get: (withdrawalId) => call(PROCEDURES.getWithdrawal, { withdrawalId }, operationViewSchema),
      list: (filter = {}) => call(PROCEDURES.listWithdrawals, filter, listWithdrawalsOutputSchema),
      getByKey: (idempotencyKey) =>
        call(PROCEDURES.getWithdrawalByKey, { idempotencyKey }, operationViewSchema),
    },
    deposits: {
      list: (filter = {}) => call(PROCEDURES.listDeposits, filter, listDepositsOutputSchema),
    },
    balances: {
      get: (accountId) => call(PROCEDURES.getBalances, { accountId }, getBalancesOutputSchema),
    },
    assets: { list: () => call(PROCEDURES.listAssets, undefined, listAssetsOutputSchema) },
    customerSessions: {
      create: (input) => call(PROCEDURES.createCustomerSession, input, createCustomerSessionOutputSchema),
    },
  };
}

/**
 * The key a withdrawal gets when the caller names none. An id no key can be made from (empty, or
 * padded with spaces) is invalid anyway: the item is sent without a key, and the server refuses
 * that item alone (VALIDATION) instead of the whole batch failing here.
 */
function defaultKey(request: WithdrawalRequest): string | undefined {
  try {
    return withdrawalKey(request.withdrawalId);
  } catch {
    return undefined;
  }
}

/** An Idem problem when the response carried one; otherwise the outcome is unknown (transport). */
function classify(error: unknown, attempt: number): IdemApiError | IdemTransportError {
  if (error instanceof TRPCClientError) {
    const problem = problemSchema.safeParse(error.data);
    if (problem.success) return new IdemApiError(problem.data);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new IdemTransportError(`no answer from the Idem API (${message})`, attempt, error);
}
