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
  type PreviewWithdrawalOutput,
  previewWithdrawalOutputSchema,
  problemSchema,
  type SubmitWithdrawalOutput,
  type SubmitWithdrawalsOutput,
  submitWithdrawalOutputSchema,
  submitWithdrawalsOutputSchema,
  type WithdrawalRequest,
  withdrawalKey,
} from '@idem/contracts';
import type { z } from 'zod';
import { IdemApiError, IdemTransportError, isRetryableCode } from './errors.ts';
import { backoffMs, DEFAULT_RETRY, type RetryPolicy } from './retry.ts';
import { type LinkFetch, undiciTransport } from './transport.ts';
import { type Procedure, ProcedureError, procedureCaller } from './wire.ts';

/**
 * The procedure paths this SDK calls. The facade below is the stable surface: a router refactor on
 * the server changes this table, never an integrator's code. The server's tests check each path.
 */
export const PROCEDURES = {
  submitWithdrawal: { path: 'withdrawals.submit', type: 'mutation' },
  submitWithdrawals: { path: 'withdrawals.submitMany', type: 'mutation' },
  previewWithdrawal: { path: 'withdrawals.preview', type: 'mutation' },
  getWithdrawal: { path: 'withdrawals.get', type: 'query' },
  listWithdrawals: { path: 'withdrawals.list', type: 'query' },
  getWithdrawalByKey: { path: 'withdrawals.getByKey', type: 'query' },
  listDeposits: { path: 'deposits.list', type: 'query' },
  getBalances: { path: 'balances.get', type: 'query' },
  listAssets: { path: 'assets.list', type: 'query' },
  createCustomerSession: { path: 'customerSessions.create', type: 'mutation' },
} as const satisfies Record<string, Procedure>;

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
  fetch?: LinkFetch;
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
     * and items answered IN_FLIGHT, UNAVAILABLE or 5xx are sent again (with the same keys, within the
     * same retry budget), which is safe: every item replays by its key. Throws IdemApiError only when
     * the batch itself is refused (VALIDATION: not 1 to 1,000 items) or stays unanswerable.
     */
    submitMany(
      items: { request: WithdrawalRequest; idempotencyKey?: string }[],
    ): Promise<SubmitWithdrawalsOutput>;
    /**
     * The dry run: what the policy would decide for this request now (ALLOW, REVIEW with N
     * approvers, DENY with a code), the balance after, whether a freeze would hold it, and whether
     * its withdrawal id (or `idempotencyKey`, when given) is taken. Writes nothing: the key and the
     * withdrawal id stay free for `submit`. Not a reservation: `submit` judges anew.
     */
    preview(request: WithdrawalRequest, idempotencyKey?: string): Promise<PreviewWithdrawalOutput>;
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
  const callProcedure = procedureCaller({
    url: `${options.baseUrl.replace(/\/+$/, '')}/trpc`,
    apiKey: options.apiKey,
    fetch: options.fetch ?? undiciTransport(),
  });

  async function call<S extends z.ZodType>(
    procedure: Procedure,
    input: unknown,
    output: S,
    /** When the caller's retry budget started (a bulk call's later rounds share the first's). */
    started = Date.now(),
  ): Promise<z.infer<S>> {
    for (let attempt = 1; ; attempt += 1) {
      let failure: IdemApiError | IdemTransportError | undefined;
      let result: unknown;
      // A timer cleared with the answer: AbortSignal.timeout's cannot be, and each one fired
      // seconds after its call had ended (a timer and an abort event per call, for nothing).
      const attemptTimeout = new AbortController();
      const timer = setTimeout(() => attemptTimeout.abort(), timeoutMs);
      try {
        result = await callProcedure(procedure, input, attemptTimeout.signal);
      } catch (error) {
        failure = classify(error, attempt);
      } finally {
        clearTimeout(timer);
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

  /**
   * The bulk call, retried as `submit` is: the whole call on network errors and retryable
   * refusals (inside `call`), then, within the same budget, again for just the items answered with
   * a retryable code (IN_FLIGHT, UNAVAILABLE, a 5xx), with the same keys. That is safe since each
   * item replays by its key; the other items keep their first answers.
   */
  async function submitMany(
    items: { request: WithdrawalRequest; idempotencyKey?: string }[],
  ): Promise<SubmitWithdrawalsOutput> {
    const started = Date.now();
    const sent = items.map(({ request, idempotencyKey }) => ({
      request,
      idempotencyKey: idempotencyKey ?? defaultKey(request),
    }));
    const results: SubmitWithdrawalsOutput['results'] = [];
    let pending = sent.map((_, index) => index);
    for (let round = 1; ; round += 1) {
      const answer = await call(
        PROCEDURES.submitWithdrawals,
        { items: pending.map((index) => sent[index]) },
        submitWithdrawalsOutputSchema,
        started,
      );
      if (answer.results.length !== pending.length) {
        throw new Error(`the batch answered ${answer.results.length} results for ${pending.length} items`);
      }
      const again: number[] = [];
      let retryAfterMs: number | undefined;
      answer.results.forEach((result, position) => {
        const index = pending[position] as number;
        results[index] = result;
        if ('error' in result && isRetryableCode(result.error.code)) {
          again.push(index);
          if (result.error.retryAfterMs !== undefined)
            retryAfterMs = Math.max(retryAfterMs ?? 0, result.error.retryAfterMs);
        }
      });
      if (again.length === 0 || round >= policy.attemptsMax) return { results };
      const waitMs = backoffMs(policy, round, retryAfterMs);
      if (Date.now() - started + waitMs > policy.totalMsMax) return { results };
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      pending = again;
    }
  }

  return {
    withdrawals: {
      submit: (request, idempotencyKey) =>
        call(PROCEDURES.submitWithdrawal, { request, idempotencyKey }, submitWithdrawalOutputSchema),
      submitMany: (items) => submitMany(items),
      preview: (request, idempotencyKey) =>
        call(
          PROCEDURES.previewWithdrawal,
          idempotencyKey === undefined ? { request } : { request, idempotencyKey },
          previewWithdrawalOutputSchema,
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
  if (error instanceof ProcedureError) {
    const problem = problemSchema.safeParse(error.data);
    if (problem.success) return new IdemApiError(problem.data);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new IdemTransportError(`no answer from the Idem API (${message})`, attempt, error);
}
