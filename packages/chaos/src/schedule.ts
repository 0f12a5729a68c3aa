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
/** How the node misbehaves on a call (`@idem/testing/chain`'s JSON-RPC rules): nothing is forwarded on 429 and hang. */
export type NodeFaultMode = '429' | 'hang' | 'lag';
/** Which JSON-RPC calls a node fault hits: chain reads, the send, or any call. */
export type NodeMethods = 'reads' | 'send' | 'any';

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
  | { atMs: number; kind: 'anvil-drop' }
  | {
      atMs: number;
      kind: 'node';
      mode: NodeFaultMode;
      methods: NodeMethods;
      /** 429 and hang: how many matching calls are hit (a burst). */
      times: number;
      /** lag: how long the lagging view is served, how far behind, and on what share of the calls. */
      forMs: number;
      lagBlocks: number;
      sharePercent: number;
    }
  | { atMs: number; kind: 'fee-spike'; baseFeeGwei: number; holdBlocks: number }
  /** The HSM signs, then its answers arrive after the workers' deadline for a while (`--signer pkcs11`). */
  | { atMs: number; kind: 'signer-timeout'; forMs: number; holdMs: number }
  /** The signer service is SIGKILLed (mid-request when one is in flight) and restarted (`--signer service`). */
  | { atMs: number; kind: 'kill-signer'; restartAfterMs: number }
  /**
   * An operator freezes one tenant's account (or its ETH) through the core freeze function; after
   * `forMs` two of its admins lift it through the real path (a `freeze_lift` proposed by one,
   * approved by the other, applied by the governance step). Nothing under it may be signed meanwhile.
   */
  | {
      atMs: number;
      kind: 'freeze';
      /** The tenant, by index (modulo the run's tenants). */
      tenant: number;
      scope: 'account' | 'asset';
      /** With `account`: which of the tenant's client accounts (modulo their number). */
      account: number;
      forMs: number;
    };

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
  'node',
  'fee-spike',
  'signer-timeout',
  'kill-signer',
  'freeze',
];

/** Node faults come in three modes; the first pass has one of each, so every run exercises all three. */
const NODE_MODES: readonly NodeFaultMode[] = ['429', 'hang', 'lag'];

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
  ['node', 4],
  ['fee-spike', 2],
  ['signer-timeout', 2],
  ['kill-signer', 2],
];

export interface ScheduleShape {
  faultPhaseMs: number;
  servers: number;
  workers: number;
  /** Who holds the hot wallets' keys; signer faults exist only with an HSM (`--signer pkcs11`). */
  signer?: 'local' | 'pkcs11' | 'service';
}

/**
 * The kinds a run of this shape can draw: a run with in-process keys keeps its seeds' schedules,
 * and so does a pkcs11 run (the signer service's kill exists only with `--signer service`).
 */
export function faultKindsOf(shape: ScheduleShape): readonly FaultKind[] {
  if (shape.signer === 'service') return FAULT_KINDS;
  const without = shape.signer === 'pkcs11' ? ['kill-signer'] : ['kill-signer', 'signer-timeout'];
  return FAULT_KINDS.filter((kind) => !without.includes(kind));
}

/** No fault in the first seconds: processes are warming up and nothing is in flight yet. */
const warmupMs = 2_000;
const gapMsMin = 700;
const gapMsMax = 2_600;
/** The first pass is denser, so a 25 s run still gets one fault of every kind and node mode. */
const firstPassGapMsMax = 1_700;

export function buildSchedule(prng: Prng, shape: ScheduleShape): FaultEvent[] {
  const events: FaultEvent[] = [];
  // One of each kind (and each node mode) first, in a seeded order, so even a short run exercises every fault.
  // The freeze is not drawn: it is placed once, below, from its own stream.
  const firstPass: [FaultKind, NodeFaultMode | null][] = [
    ...faultKindsOf(shape)
      .filter((kind) => kind !== 'node' && kind !== 'freeze')
      .map((kind) => [kind, null] as [FaultKind, null]),
    ...NODE_MODES.map((mode) => ['node', mode] as [FaultKind, NodeFaultMode]),
  ];
  for (let i = firstPass.length - 1; i > 0; i -= 1) {
    const j = prng.int(0, i);
    [firstPass[i], firstPass[j]] = [
      firstPass[j] as [FaultKind, NodeFaultMode | null],
      firstPass[i] as [FaultKind, NodeFaultMode | null],
    ];
  }
  let atMs = warmupMs;
  while (atMs < shape.faultPhaseMs) {
    const first = firstPass.shift();
    const kinds = faultKindsOf(shape);
    const kind = first?.[0] ?? prng.weighted(weights.filter(([k]) => kinds.includes(k)));
    events.push(eventOf(prng, kind, atMs, shape, first?.[1] ?? null));
    atMs += prng.int(gapMsMin, first && firstPass.length > 0 ? firstPassGapMsMax : gapMsMax);
  }
  const freeze = freezeOf(prng.fork('freeze'), shape.faultPhaseMs);
  const at = events.findIndex((event) => event.atMs > freeze.atMs);
  events.splice(at === -1 ? events.length : at, 0, freeze);
  return events;
}

/**
 * One freeze per run, from its own stream (so the other faults of a seed stay where they were):
 * from 30-40% of the fault phase for 35% of it, so what it held is released, and moves, while the
 * other faults still strike.
 */
function freezeOf(prng: Prng, faultPhaseMs: number): EventOf<'freeze'> {
  return {
    atMs: Math.round(faultPhaseMs * 0.3) + prng.int(0, Math.round(faultPhaseMs * 0.1)),
    kind: 'freeze',
    tenant: prng.int(0, 15),
    scope: prng.weighted<'account' | 'asset'>([
      ['account', 2],
      ['asset', 1],
    ]),
    account: prng.int(0, 15),
    forMs: Math.round(faultPhaseMs * 0.35),
  };
}

type EventOf<K extends FaultKind> = Extract<FaultEvent, { kind: K }>;

function eventOf(
  prng: Prng,
  kind: FaultKind,
  atMs: number,
  shape: ScheduleShape,
  nodeMode: NodeFaultMode | null,
): FaultEvent {
  switch (kind) {
    case 'kill-server':
      return { atMs, kind, target: prng.int(0, shape.servers - 1), restartAfterMs: prng.int(200, 2_500) };
    case 'kill-worker':
      return { atMs, kind, target: prng.int(0, shape.workers - 1), restartAfterMs: prng.int(200, 2_500) };
    case 'kill-signer':
      return { atMs, kind, restartAfterMs: prng.int(200, 2_500) };
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
    case 'node': {
      const mode = nodeMode ?? prng.pick(NODE_MODES);
      // A lagging view is about reads; a rate limiter or a hang can hit the send too.
      const methods: NodeMethods =
        mode === 'lag' ? 'reads' : prng.pick<NodeMethods>(['reads', 'send', 'any']);
      return {
        atMs,
        kind,
        mode,
        methods,
        times: mode === '429' ? prng.int(2, 12) : prng.int(1, 3),
        forMs: prng.int(1_000, 5_000),
        lagBlocks: prng.int(1, 6),
        sharePercent: prng.int(30, 100),
      };
    }
    case 'fee-spike':
      // Above any fee signed before it (today's fixed 100 gwei cap, or the node's base fee plus tip).
      return { atMs, kind, baseFeeGwei: prng.int(150, 1_000), holdBlocks: prng.int(1, 4) };
    case 'signer-timeout':
      // Held past the workers' signer deadline (IDEM_SIGN_TIMEOUT_MS in the run: 1,000 ms).
      return { atMs, kind, forMs: prng.int(1_000, 4_000), holdMs: prng.int(1_500, 3_000) };
    case 'freeze':
      return freezeOf(prng, shape.faultPhaseMs);
  }
}

/** One line per event, for the text report and for reading a failing seed's schedule. */
export function describeEvent(event: FaultEvent): string {
  const at = `t+${(event.atMs / 1000).toFixed(1)}s`;
  switch (event.kind) {
    case 'kill-server':
    case 'kill-worker':
      return `${at} ${event.kind} #${event.target} (restart after ${event.restartAfterMs} ms)`;
    case 'kill-signer':
      return `${at} kill-signer (restart after ${event.restartAfterMs} ms)`;
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
    case 'node':
      return event.mode === 'lag'
        ? `${at} node lag: ${event.lagBlocks} blocks behind on ${event.sharePercent}% of chain reads for ${event.forMs} ms`
        : `${at} node ${event.mode === '429' ? 'HTTP 429' : 'hang (no answer)'} x${event.times} on ${event.methods === 'send' ? 'eth_sendRawTransaction' : event.methods === 'reads' ? 'chain reads' : 'any call'}`;
    case 'fee-spike':
      return `${at} base fee spike to ${event.baseFeeGwei} gwei for ${event.holdBlocks} block(s) (anvil evicts pending transactions priced below it)`;
    case 'signer-timeout':
      return `${at} HSM answers held ${event.holdMs} ms (past the signer deadline) for ${event.forMs} ms`;
    case 'freeze':
      return `${at} freeze tenant #${event.tenant}'s ${event.scope === 'asset' ? 'ETH' : `account #${event.account}`} for ${event.forMs} ms, lifted by two admins`;
  }
}
