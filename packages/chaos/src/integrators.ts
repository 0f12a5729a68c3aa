/**
 * Simulated integrators: exchanges calling Idem through the SDK, well and badly. Each client has
 * its own seeded stream of choices. What each one saw is recorded, because the invariants check
 * the system against what integrators were told, not against what the system says about itself.
 */

import type { WithdrawalRequest } from '@idem/contracts';
import { IdemApiError, type IdemClient, IdemTransportError, withdrawalKey } from '@idem/sdk';
import { getAddress } from 'viem';
import type { Prng } from './prng.ts';

export interface SeenWithdrawal {
  tenantIndex: number;
  withdrawalId: string;
  key: string;
  operationIds: Set<string>;
  request: WithdrawalRequest;
  firstSeenAtMs: number;
  /** Every answer that acknowledged it: outcome, state and ms since the run began (for a failed check). */
  acks: string[];
}

export interface SecondClientAttempt {
  tenantIndex: number;
  withdrawalId: string;
  freshKey: string;
  holderKey: string;
  /** What came back: the refusal's holder key, or another outcome (a violation of C04). */
  answer: string;
}

export interface IntegratorLog {
  seen: Map<string, SeenWithdrawal>;
  secondClient: SecondClientAttempt[];
  /** Contradictions a client noticed on the spot (e.g. one key answered with two operations). */
  violations: string[];
  counts: Record<string, number>;
  /** When each CREATED answer arrived (ms since the run started), for throughput. */
  createdAtMs: number[];
  /**
   * Submissions whose outcome the client never learned (it gave up retrying): retried later with
   * the same key (resolveUnknown), each must come back as one operation.
   */
  unknown: UnknownSubmission[];
}

export interface UnknownSubmission {
  setup: ClientSetup;
  request: WithdrawalRequest;
  key: string;
}

export function newIntegratorLog(): IntegratorLog {
  return { seen: new Map(), secondClient: [], violations: [], counts: {}, createdAtMs: [], unknown: [] };
}

export interface ClientSetup {
  index: number;
  tenantIndex: number;
  accountId: string;
  client: IdemClient;
  /** BTC goes through the custodian; only the tenant whose webhook endpoint the custodian calls has it. */
  assets: readonly ('ETH' | 'BTC')[];
  prng: Prng;
  startedAt: number;
  stopAt: number;
  thinkMsMin: number;
  thinkMsMax: number;
  seedLabel: string;
}

/** Valid mainnet addresses of each kind (the custodian never moves real coins). */
const BTC_DESTINATIONS = [
  'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq',
  '1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2',
  '3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy',
] as const;

/** A client gives up on one submission after this many rounds of SDK retries (then the outcome is unknown to it). */
const roundsMax = 6;

type Attempt =
  | { kind: 'ok'; outcome: 'CREATED' | 'REPLAYED'; operationId: string; state: string }
  | { kind: 'refused'; error: IdemApiError }
  | { kind: 'unknown' };

function bump(log: IntegratorLog, name: string): void {
  log.counts[name] = (log.counts[name] ?? 0) + 1;
}

/**
 * A well-behaved submission: after a timeout, a lost answer or IN_FLIGHT, ask again with the same
 * key, a bounded number of times.
 */
async function submitUntilKnown(
  setup: ClientSetup,
  log: IntegratorLog,
  request: WithdrawalRequest,
  key: string,
): Promise<Attempt> {
  let ambiguous = false;
  for (let round = 1; round <= roundsMax; round += 1) {
    bump(log, 'submit_calls');
    try {
      const answer = await setup.client.withdrawals.submit(request, key);
      // The commit's outcome was unknown to the client at least once; the same key settled it.
      if (ambiguous) bump(log, 'known_after_retry');
      return {
        kind: 'ok',
        outcome: answer.outcome,
        operationId: answer.withdrawal.operationId,
        state: answer.withdrawal.state,
      };
    } catch (error) {
      if (error instanceof IdemApiError && !error.isRetryable) return { kind: 'refused', error };
      ambiguous = true;
      bump(
        log,
        error instanceof IdemTransportError ? 'transport_errors' : `api_${(error as IdemApiError).code}`,
      );
      if (Date.now() > setup.stopAt + 20_000) break;
      await sleep(300 + setup.prng.int(0, 700));
    }
  }
  bump(log, 'gave_up_unknown');
  log.unknown.push({ setup, request, key });
  return { kind: 'unknown' };
}

/**
 * The integrator's later retry of every submission it gave up on, with the same key and request,
 * as a well-behaved client does once the service answers again: each must now come back CREATED or
 * REPLAYED, and `record` checks the key never maps to two operations.
 */
export async function resolveUnknown(
  log: IntegratorLog,
): Promise<{ retried: number; resolved: number; resolvedKeys: string[] }> {
  const pending = log.unknown.splice(0);
  const resolvedKeys: string[] = [];
  for (const { setup, request, key } of pending) {
    const answer = await submitUntilKnown({ ...setup, stopAt: Date.now() }, log, request, key);
    record(setup, log, request, key, answer);
    if (answer.kind === 'ok') bump(log, `unknown_resolved_${answer.outcome.toLowerCase()}`);
    // A stored refusal (INSUFFICIENT_FUNDS is kept and replayed) is a known outcome too.
    if (answer.kind === 'refused') bump(log, `unknown_resolved_refused_${answer.error.code}`);
    if (answer.kind !== 'unknown') resolvedKeys.push(key);
    else
      log.violations.push(
        `withdrawal ${request.withdrawalId} (key ${key}) still unknown when retried after the faults`,
      );
  }
  return { retried: pending.length, resolved: resolvedKeys.length, resolvedKeys };
}

/**
 * An impatient integrator for the failover drill (I16-F4): its client-side deadline is shorter
 * than the outage and it does not retry, so a submission that fails or times out during the
 * failover is given up with its outcome unknown (it may have committed). It submits from the
 * event until `until` settles and a second more; `resolveUnknown` later asks again with the same
 * key through `setup.client` (a patient client), and each must resolve to one operation.
 */
export async function runImpatientClient(
  setup: ClientSetup,
  impatient: IdemClient,
  log: IntegratorLog,
  until: Promise<unknown>,
): Promise<void> {
  let over = false;
  void until
    .finally(() => sleep(1_000))
    .finally(() => {
      over = true;
    });
  for (let n = 1; !over; n += 1) {
    const request = newRequest(setup, n);
    const key = withdrawalKey(request.withdrawalId);
    bump(log, 'impatient_submits');
    try {
      const answer = await impatient.withdrawals.submit(request, key);
      record(setup, log, request, key, {
        kind: 'ok',
        outcome: answer.outcome,
        operationId: answer.withdrawal.operationId,
        state: answer.withdrawal.state,
      });
    } catch (error) {
      if (error instanceof IdemApiError && !error.isRetryable) bump(log, `refused_${error.code}`);
      else {
        bump(
          log,
          error instanceof IdemTransportError ? 'transport_errors' : `api_${(error as IdemApiError).code}`,
        );
        bump(log, 'gave_up_unknown');
        log.unknown.push({ setup, request, key });
      }
    }
    // Dense enough that an outage of a few hundred milliseconds still catches submissions.
    await sleep(setup.prng.int(50, 150));
  }
}

function record(
  setup: ClientSetup,
  log: IntegratorLog,
  request: WithdrawalRequest,
  key: string,
  a: Attempt,
): void {
  if (a.kind !== 'ok') return;
  bump(log, a.outcome === 'CREATED' ? 'created' : 'replayed');
  if (a.outcome === 'CREATED') log.createdAtMs.push(Date.now() - setup.startedAt);
  const id = `${setup.tenantIndex}:${request.withdrawalId}`;
  const ack = `${a.outcome} ${a.state} at ${Date.now() - setup.startedAt} ms`;
  const existing = log.seen.get(id);
  if (existing) {
    existing.acks.push(ack);
    existing.operationIds.add(a.operationId);
    if (existing.operationIds.size > 1)
      log.violations.push(
        `C03: key ${key} of tenant #${setup.tenantIndex} answered with operations ${[...existing.operationIds].join(', ')}`,
      );
    return;
  }
  log.seen.set(id, {
    tenantIndex: setup.tenantIndex,
    withdrawalId: request.withdrawalId,
    key,
    operationIds: new Set([a.operationId]),
    request,
    firstSeenAtMs: Date.now() - setup.startedAt,
    acks: [ack],
  });
}

function newRequest(setup: ClientSetup, n: number): WithdrawalRequest {
  const { prng } = setup;
  const asset = prng.pick(setup.assets);
  const withdrawalId = `${setup.seedLabel}-c${setup.index}-w${n}`;
  // A few requests ask for more than the account holds: they must end REJECTED (INSUFFICIENT_FUNDS).
  const tooMuch = prng.chance(0.03);
  if (asset === 'ETH') {
    return {
      withdrawalId,
      accountId: setup.accountId,
      asset,
      destination: getAddress(`0x${prng.hex(20)}`),
      amountMinor: tooMuch ? '900000000000000000000000' : String(prng.int(1, 1_000_000) * 1_000_000_000),
    };
  }
  return {
    withdrawalId,
    accountId: setup.accountId,
    asset,
    destination: prng.pick(BTC_DESTINATIONS),
    amountMinor: tooMuch ? '90000000000000' : String(prng.int(1_000, 50_000_000)),
  };
}

export async function runClient(setup: ClientSetup, log: IntegratorLog): Promise<void> {
  const { prng } = setup;
  const mine: SeenWithdrawal[] = [];
  let n = 0;
  while (Date.now() < setup.stopAt) {
    const action = prng.weighted([
      ['submit', 60],
      ['double-submit', 18],
      ['second-client', 12],
      ['poll', 10],
    ] as const);
    if (action === 'submit' || action === 'double-submit' || mine.length === 0) {
      n += 1;
      const request = newRequest(setup, n);
      const key = withdrawalKey(request.withdrawalId);
      if (action === 'double-submit') {
        bump(log, 'double_submits');
        const [first, second] = await Promise.all([
          submitUntilKnown(setup, log, request, key),
          submitUntilKnown(setup, log, request, key),
        ]);
        record(setup, log, request, key, first);
        record(setup, log, request, key, second);
      } else {
        bump(log, 'submits');
        const answer = await submitUntilKnown(setup, log, request, key);
        record(setup, log, request, key, answer);
        if (answer.kind === 'refused') bump(log, `refused_${answer.error.code}`);
      }
      const seen = log.seen.get(`${setup.tenantIndex}:${request.withdrawalId}`);
      if (seen) mine.push(seen);
    } else if (action === 'second-client') {
      // Another client of the same exchange submits an already-claimed withdrawal under a fresh key.
      const target = prng.pick(mine);
      const freshKey = `${target.key}-second-${prng.hex(4)}`;
      bump(log, 'second_client');
      const answer = await submitUntilKnown(setup, log, target.request, freshKey);
      const holder =
        answer.kind === 'refused' && answer.error.isIdempotencyConflict
          ? `IDEMPOTENCY_CONFLICT holder=${answer.error.problem.holderKey ?? '(none)'}`
          : answer.kind === 'refused'
            ? `refused ${answer.error.code}`
            : answer.kind;
      log.secondClient.push({
        tenantIndex: setup.tenantIndex,
        withdrawalId: target.withdrawalId,
        freshKey,
        holderKey: target.key,
        answer: holder,
      });
      if (answer.kind === 'ok')
        log.violations.push(
          `C04: a fresh key for claimed withdrawal ${target.withdrawalId} was answered ${answer.outcome}`,
        );
      else if (answer.kind === 'refused' && answer.error.problem.holderKey !== target.key)
        log.violations.push(
          `C04: a fresh key for claimed withdrawal ${target.withdrawalId} was refused without naming its holder (${holder})`,
        );
    } else {
      const target = prng.pick(mine);
      bump(log, 'polls');
      try {
        const view = await setup.client.withdrawals.get(target.withdrawalId);
        if (!target.operationIds.has(view.operationId))
          log.violations.push(
            `withdrawal ${target.withdrawalId} read back as another operation ${view.operationId}`,
          );
      } catch (error) {
        if (error instanceof IdemApiError && error.isNotFound)
          log.violations.push(`withdrawal ${target.withdrawalId} was acknowledged but reads back NOT_FOUND`);
      }
    }
    await sleep(prng.int(setup.thinkMsMin, setup.thinkMsMax));
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
