import type { Prng } from './prng.ts';

/**
 * The fault schedule: what goes wrong, when, and where, derived only from the seed and the run's
 * shape (duration, process counts). It is written into every report, so a failing run can be
 * re-run with the same faults in the same order at the same offsets.
 */
export type ProxyMode = 'drop-after-forward' | 'hang-after-forward' | '502-after-forward' | 'delay';
export type ProxySite = 'server' | 'custodian' | 'chain';
export type CustodianSubmitFault =
  | 'accept-then-timeout'
  | 'accept-then-5xx'
  | 'accept-then-reset'
  | 'reject'
  | 'ok-without-reference'
  | 'ok-id-only';
export type WebhookDeliveryFault = 'duplicate' | 'late' | 'out-of-order' | 'conflicting-body';

export type FaultEvent =
  | { atMs: number; kind: 'kill-server'; target: number; restartAfterMs: number }
  | { atMs: number; kind: 'kill-worker'; target: number; restartAfterMs: number }
  | {
      atMs: number;
      kind: 'proxy';
      site: ProxySite;
      target: number;
      mode: ProxyMode;
      times: number;
      delayMs: number;
      /** Only requests whose method, path or body contain this are hit (null: any request). */
      match: string | null;
    }
  | { atMs: number; kind: 'pg-terminate' }
  | { atMs: number; kind: 'custodian-submit'; fault: CustodianSubmitFault; times: number }
  | { atMs: number; kind: 'webhook-delivery'; delivery: WebhookDeliveryFault; forMs: number }
  | { atMs: number; kind: 'settlement-fail'; forMs: number }
  | { atMs: number; kind: 'anvil-reorg'; depth: number }
  | { atMs: number; kind: 'anvil-drop' };

export type FaultKind = FaultEvent['kind'];

export const FAULT_KINDS: readonly FaultKind[] = [
  'kill-server',
  'kill-worker',
  'proxy',
  'pg-terminate',
  'custodian-submit',
  'webhook-delivery',
  'settlement-fail',
  'anvil-reorg',
  'anvil-drop',
];

/** How often each kind is drawn after the first pass (which has one of each). */
const weights: readonly (readonly [FaultKind, number])[] = [
  ['kill-server', 2],
  ['kill-worker', 3],
  ['proxy', 6],
  ['pg-terminate', 3],
  ['custodian-submit', 3],
  ['webhook-delivery', 2],
  ['settlement-fail', 1],
  ['anvil-reorg', 2],
  ['anvil-drop', 2],
];

export interface ScheduleShape {
  faultPhaseMs: number;
  servers: number;
  workers: number;
}

/** No fault in the first seconds: processes are warming up and nothing is in flight yet. */
const warmupMs = 2_000;
const gapMsMin = 700;
const gapMsMax = 2_600;

export function buildSchedule(prng: Prng, shape: ScheduleShape): FaultEvent[] {
  const events: FaultEvent[] = [];
  // One of each kind first, in a seeded order, so even a short run exercises every fault.
  const firstPass = [...FAULT_KINDS];
  for (let i = firstPass.length - 1; i > 0; i -= 1) {
    const j = prng.int(0, i);
    [firstPass[i], firstPass[j]] = [firstPass[j] as FaultKind, firstPass[i] as FaultKind];
  }
  let atMs = warmupMs;
  while (atMs < shape.faultPhaseMs) {
    const kind = firstPass.shift() ?? prng.weighted(weights);
    events.push(eventOf(prng, kind, atMs, shape));
    atMs += prng.int(gapMsMin, gapMsMax);
  }
  return events;
}

function eventOf(prng: Prng, kind: FaultKind, atMs: number, shape: ScheduleShape): FaultEvent {
  switch (kind) {
    case 'kill-server':
      return { atMs, kind, target: prng.int(0, shape.servers - 1), restartAfterMs: prng.int(200, 2_500) };
    case 'kill-worker':
      return { atMs, kind, target: prng.int(0, shape.workers - 1), restartAfterMs: prng.int(200, 2_500) };
    case 'proxy': {
      const site = prng.weighted<ProxySite>([
        ['server', 3],
        ['custodian', 2],
        ['chain', 2],
      ]);
      const mode = prng.weighted<ProxyMode>([
        ['drop-after-forward', 4],
        ['hang-after-forward', 2],
        ['502-after-forward', 2],
        ['delay', 2],
      ]);
      const match =
        site === 'server'
          ? prng.pick(['withdrawals.submit', '/webhooks/', null])
          : site === 'custodian'
            ? prng.pick(['POST /v1/transfers', null])
            : prng.pick(['eth_sendRawTransaction', 'eth_sendRawTransaction', null]);
      return {
        atMs,
        kind,
        site,
        target: site === 'server' ? prng.int(0, shape.servers - 1) : 0,
        mode,
        times: prng.int(1, 3),
        delayMs: prng.int(200, 2_500),
        match,
      };
    }
    case 'pg-terminate':
      return { atMs, kind };
    case 'custodian-submit':
      return {
        atMs,
        kind,
        fault: prng.pick<CustodianSubmitFault>([
          'accept-then-timeout',
          'accept-then-5xx',
          'accept-then-reset',
          'reject',
          'ok-without-reference',
          'ok-id-only',
        ]),
        times: prng.int(1, 3),
      };
    case 'webhook-delivery':
      return {
        atMs,
        kind,
        delivery: prng.pick<WebhookDeliveryFault>(['duplicate', 'late', 'out-of-order', 'conflicting-body']),
        forMs: prng.int(1_000, 5_000),
      };
    case 'settlement-fail':
      return { atMs, kind, forMs: prng.int(500, 3_000) };
    case 'anvil-reorg':
      return { atMs, kind, depth: prng.int(1, 4) };
    case 'anvil-drop':
      return { atMs, kind };
  }
}

/** One line per event, for the text report and for reading a failing seed's schedule. */
export function describeEvent(event: FaultEvent): string {
  const at = `t+${(event.atMs / 1000).toFixed(1)}s`;
  switch (event.kind) {
    case 'kill-server':
    case 'kill-worker':
      return `${at} ${event.kind} #${event.target} (restart after ${event.restartAfterMs} ms)`;
    case 'proxy':
      return `${at} proxy ${event.site}#${event.target} ${event.mode} x${event.times}${event.mode === 'delay' ? ` ${event.delayMs} ms` : ''} on ${event.match ?? 'any request'}`;
    case 'pg-terminate':
      return `${at} pg_terminate_backend on active connections`;
    case 'custodian-submit':
      return `${at} custodian ${event.fault} x${event.times}`;
    case 'webhook-delivery':
      return `${at} custodian webhooks ${event.delivery} for ${event.forMs} ms`;
    case 'settlement-fail':
      return `${at} custodian settles transfers as failed for ${event.forMs} ms`;
    case 'anvil-reorg':
      return `${at} anvil_reorg depth ${event.depth}`;
    case 'anvil-drop':
      return `${at} anvil_dropTransaction of a pending hot-wallet transaction`;
  }
}
