/**
 * The fault phase's hand: injects each event of the seeded schedule into the running system,
 * restarts what it killed (and what died on its own, as a supervisor would), counts what it did,
 * and at the quiet phase takes every fault back.
 */
import { writeFileSync } from 'node:fs';
import type { AnvilInstance } from '@idem/rails';
import type { ActiveRule } from '@idem/testing/chain';
import type { Sql } from 'postgres';
import type { createPublicClient, Hex } from 'viem';
import type { FreezeDrill } from './freeze-fault.ts';
import { sleep } from './integrators.ts';
import type { Prng } from './prng.ts';
import type { ManagedProcess } from './processes.ts';
import type { ChaosProxy } from './proxy.ts';
import { describeEvent, type FaultEvent, type NodeMethods } from './schedule.ts';
import { rpc } from './setup.ts';
import type { RunSystem } from './system.ts';

/** One kind of fault event, by its `kind`. */
type EventOf<K extends FaultEvent['kind']> = Extract<FaultEvent, { kind: K }>;

export class FaultInjector {
  readonly faultsInjected: Record<string, number> = {};
  readonly faultErrors: string[] = [];
  /** Processes that died without being killed (crashes the faults provoked): findings, not faults. */
  readonly unplannedExits: string[] = [];
  /** Node faults added, so the report can say how many calls each one changed. */
  readonly nodeRules: { label: string; rule: ActiveRule }[] = [];
  private readonly restarts: Promise<void>[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  // One restart at a time per process: a kill during a restart, or a crash right after a kill,
  // must not start two copies that fight over one name.
  private readonly restarting = new Set<string>();
  /** The base fee before the first spike: where fees return at the end of the fault phase. */
  private baseFeeBeforeSpikes: bigint | null = null;

  constructor(
    private readonly system: RunSystem,
    private readonly context: {
      sql: Sql;
      databaseName: string;
      anvil: AnvilInstance;
      chain: ReturnType<typeof createPublicClient>;
      hotWallets: Set<string>;
      signerFaultFile: string;
      /** Which pending transaction a drop hits. */
      targets: Prng;
      /** Which calls reach a lagging node. */
      lagCoin: Prng;
      /** Freezes and their lifts through the real approval path. */
      freezes: FreezeDrill;
    },
  ) {}

  /** Counts a fault (or a skipped one, named so) under its label. */
  count(name: string, times = 1): void {
    this.faultsInjected[name] = (this.faultsInjected[name] ?? 0) + times;
  }

  /** A process that dies on its own is a finding: counted, reported, and restarted. */
  superviseUnplannedExits(startedAt: number): void {
    const { servers, workers, serverProxies } = this.system;
    const at = () => `at t+${((Date.now() - startedAt) / 1000).toFixed(1)}s`;
    for (const [s, server] of servers.entries())
      server.onUnplannedExit((detail) => {
        this.unplannedExits.push(`${server.name} ${detail} ${at()}`);
        (serverProxies[s] as ChaosProxy).setUpstream(null);
        this.restart(server, 500, () => (serverProxies[s] as ChaosProxy).setUpstream(server.url));
      });
    for (const worker of [...workers, ...(this.system.signer ? [this.system.signer] : [])])
      worker.onUnplannedExit((detail) => {
        this.unplannedExits.push(`${worker.name} ${detail} ${at()}`);
        this.restart(worker, 500, () => {});
      });
  }

  /** Sets a timer per event; an event that throws is reported as a fault error. */
  schedule(events: readonly FaultEvent[]): void {
    for (const event of events)
      this.timers.push(
        setTimeout(() => {
          this.inject(event).catch((error: unknown) =>
            this.faultErrors.push(`${describeEvent(event)}: ${(error as Error).message}`),
          );
        }, event.atMs),
      );
  }

  inject(event: FaultEvent): Promise<void> {
    switch (event.kind) {
      case 'kill-server':
        return this.killServer(event);
      case 'kill-worker':
        return this.killWorker(event);
      case 'proxy':
        return this.queueProxyFault(event);
      case 'pg-terminate':
        return this.terminateBackends();
      case 'custodian-submit':
        return this.custodianSubmitFault(event);
      case 'webhook-delivery':
        return this.webhookDeliveryFault(event);
      case 'settlement-fail':
        return this.settlementFailure(event);
      case 'anvil-reorg':
        return this.reorg(event);
      case 'anvil-drop':
        return this.dropPendingTransaction();
      case 'node':
        return this.nodeFault(event);
      case 'signer-timeout':
        return this.signerTimeout(event);
      case 'kill-signer':
        return this.killSigner(event);
      case 'fee-spike':
        return this.feeSpike(event);
      case 'freeze':
        return this.context.freezes.freeze(event).then((window) => this.count(`freeze ${window.scope}`));
    }
  }

  /**
   * The quiet phase begins: restarts finish, proxies and the node pass everything, fees calm
   * down, the custodian behaves, and any process still down is started.
   */
  async takeFaultsBack(): Promise<void> {
    const { servers, workers, serverProxies, custodianProxy, chainProxy, nodeFaults, simulator } =
      this.system;
    await Promise.all(this.restarts);
    // What a freeze held must move before convergence is judged: its lift has run, or runs now.
    await this.context.freezes.liftAll();
    for (const proxy of [...serverProxies, custodianProxy, chainProxy]) proxy.clearFaults();
    nodeFaults.clearRules();
    // Fees return to where they were before the first spike (or lower, if they decayed below it):
    // under every maximum fee signed so far, so the quiet phase can converge without a bump.
    if (this.baseFeeBeforeSpikes !== null) {
      const now = (await this.context.chain.getBlock()).baseFeePerGas ?? 0n;
      const calm = now < this.baseFeeBeforeSpikes ? now : this.baseFeeBeforeSpikes;
      await rpc(this.context.anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${calm.toString(16)}`]);
    }
    await simulator.control({
      fault: 'none',
      webhooks: { delivery: 'normal' },
      settlement: { outcome: 'complete', afterMs: 1_500 },
    });
    for (const [s, server] of servers.entries())
      if (!server.ready) {
        if (server.running) server.kill();
        await sleep(100);
        await server.start();
        (serverProxies[s] as ChaosProxy).setUpstream(server.url);
      }
    for (const worker of workers)
      if (!worker.ready) {
        if (worker.running) worker.kill();
        await sleep(100);
        await worker.start();
      }
  }

  /** No more scheduled events (nor the undoing of timed ones). */
  clearTimers(): void {
    for (const timer of this.timers) clearTimeout(timer);
  }

  private restart(proc: ManagedProcess, afterMs: number, onUp: () => void): void {
    if (this.restarting.has(proc.name)) return;
    this.restarting.add(proc.name);
    this.restarts.push(
      (async () => {
        await sleep(afterMs);
        for (let attempt = 1; attempt <= 5 && !proc.ready; attempt += 1) {
          try {
            if (proc.running) proc.kill();
            await sleep(100);
            await proc.start();
            onUp();
          } catch (error) {
            this.faultErrors.push(`restart of ${proc.name} failed: ${(error as Error).message}`);
            await sleep(1_000);
          }
        }
        this.restarting.delete(proc.name);
      })(),
    );
  }

  private async killServer(event: EventOf<'kill-server'>): Promise<void> {
    const server = this.system.servers[event.target] as ManagedProcess;
    const proxy = this.system.serverProxies[event.target] as ChaosProxy;
    if (!server.ready || this.restarting.has(server.name)) return this.count('kill-server (skipped: not up)');
    proxy.setUpstream(null);
    server.kill();
    this.count('kill-server');
    this.restart(server, event.restartAfterMs, () => proxy.setUpstream(server.url));
  }

  private async killWorker(event: EventOf<'kill-worker'>): Promise<void> {
    const worker = this.system.workers[event.target] as ManagedProcess;
    if (!worker.ready || this.restarting.has(worker.name)) return this.count('kill-worker (skipped: not up)');
    worker.kill();
    this.count('kill-worker');
    this.restart(worker, event.restartAfterMs, () => {});
  }

  private async queueProxyFault(event: EventOf<'proxy'>): Promise<void> {
    const { serverProxies, custodianProxy, chainProxy } = this.system;
    const proxy =
      event.site === 'server'
        ? serverProxies[event.target]
        : event.site === 'custodian'
          ? custodianProxy
          : chainProxy;
    proxy?.inject({ mode: event.mode, times: event.times, delayMs: event.delayMs, match: event.match });
    this.count(`proxy-queued ${event.site} ${event.mode}`);
  }

  private async terminateBackends(): Promise<void> {
    const { sql, databaseName } = this.context;
    // Aim at work in progress: wait briefly for a backend inside a statement or a transaction.
    for (let tries = 0; tries < 30; tries += 1) {
      const rows = await sql<{ terminated: number }[]>`
        select count(*) filter (where pg_terminate_backend(pid))::int as terminated
        from pg_stat_activity
        where datname = ${databaseName} and pid <> pg_backend_pid()
          and application_name <> 'idem-chaos'
          and state in ('active', 'idle in transaction', 'idle in transaction (aborted)')`;
      const terminated = rows[0]?.terminated ?? 0;
      if (terminated > 0) {
        this.count('pg-terminate');
        this.count('pg-terminate connections', terminated);
        return;
      }
      await sleep(50);
    }
    return this.count('pg-terminate (skipped: nothing in flight)');
  }

  private async custodianSubmitFault(event: EventOf<'custodian-submit'>): Promise<void> {
    await this.system.simulator.control({ fault: event.fault, faultTimes: event.times });
    this.count(`custodian ${event.fault}`);
  }

  private async webhookDeliveryFault(event: EventOf<'webhook-delivery'>): Promise<void> {
    const { simulator } = this.system;
    await simulator.control({ webhooks: { delivery: event.delivery, lateMs: 3_000 } });
    this.count(`custodian webhooks ${event.delivery}`);
    this.timers.push(
      setTimeout(
        () => void simulator.control({ webhooks: { delivery: 'normal' } }).catch(() => {}),
        event.forMs,
      ),
    );
  }

  private async settlementFailure(event: EventOf<'settlement-fail'>): Promise<void> {
    const { simulator } = this.system;
    await simulator.control({ settlement: { outcome: 'fail', afterMs: 1_500 } });
    this.count('custodian settlement fail');
    this.timers.push(
      setTimeout(
        () => void simulator.control({ settlement: { outcome: 'complete', afterMs: 1_500 } }).catch(() => {}),
        event.forMs,
      ),
    );
  }

  private async reorg(event: EventOf<'anvil-reorg'>): Promise<void> {
    const head = Number(await this.context.chain.getBlockNumber());
    if (head <= event.depth + 1) return this.count('anvil-reorg (skipped: chain too short)');
    await rpc(this.context.anvil.rpcUrl, 'anvil_reorg', [event.depth, []]);
    this.count(`anvil-reorg depth ${event.depth}`);
  }

  private async dropPendingTransaction(): Promise<void> {
    // A hot wallet's transaction sits in the pool for under a block interval: look for one briefly.
    for (let tries = 0; tries < 25; tries += 1) {
      const candidates = await this.pendingHotWalletHashes();
      if (candidates.length > 0) {
        await rpc(this.context.anvil.rpcUrl, 'anvil_dropTransaction', [
          this.context.targets.pick(candidates),
        ]);
        return this.count('anvil-drop');
      }
      await sleep(80);
    }
    return this.count('anvil-drop (skipped: nothing pending)');
  }

  private async nodeFault(event: EventOf<'node'>): Promise<void> {
    const { nodeFaults } = this.system;
    const methods = NODE_METHODS[event.methods];
    if (event.mode === 'lag') {
      const head = Number(await this.context.chain.getBlockNumber());
      const until = Date.now() + event.forMs;
      const { lagCoin } = this.context;
      // Some calls reach the lagging node, others a current one, as behind a load balancer.
      const rule = nodeFaults.addRule({
        methods,
        mode: 'lag',
        lagHeight: Math.max(0, head - event.lagBlocks),
        when: () => Date.now() < until && lagCoin.int(1, 100) <= event.sharePercent,
      });
      this.nodeRules.push({ label: 'node lag', rule });
    } else {
      const rule = nodeFaults.addRule({ methods, mode: event.mode, times: event.times });
      this.nodeRules.push({ label: `node ${event.mode}`, rule });
    }
    this.count(`node ${event.mode}`);
  }

  private async killSigner(event: EventOf<'kill-signer'>): Promise<void> {
    const { signer } = this.system;
    if (!signer?.ready || this.restarting.has(signer.name))
      return this.count('kill-signer (skipped: not up)');
    signer.kill();
    this.count('kill-signer');
    this.restart(signer, event.restartAfterMs, () => {});
  }

  private async signerTimeout(event: EventOf<'signer-timeout'>): Promise<void> {
    writeFileSync(
      this.context.signerFaultFile,
      JSON.stringify({ holdUntil: Date.now() + event.forMs, holdMs: event.holdMs }),
    );
    this.count('signer-timeout');
  }

  private async feeSpike(event: EventOf<'fee-spike'>): Promise<void> {
    const { chain, anvil } = this.context;
    const latest = await chain.getBlock();
    const current = latest.baseFeePerGas ?? 0n;
    if (this.baseFeeBeforeSpikes === null || current < this.baseFeeBeforeSpikes)
      this.baseFeeBeforeSpikes = current;
    const pending = await this.pendingHotWalletHashes();
    const spike = BigInt(event.baseFeeGwei) * 10n ** 9n;
    // Held for a few blocks (set again before each), then it decays by 1/8 per block on its own.
    for (let block = 0; block < event.holdBlocks; block += 1) {
      await rpc(anvil.rpcUrl, 'anvil_setNextBlockBaseFeePerGas', [`0x${spike.toString(16)}`]);
      await sleep(1_000);
    }
    this.count('fee-spike');
    // anvil evicts what the new base fee makes unminable instead of keeping it pooled as geth
    // does: those are dropped transactions whose stored bytes cannot be mined until fees fall.
    const stillPooled = new Set(await this.pendingHotWalletHashes());
    let evicted = 0;
    for (const hash of pending) {
      if (stillPooled.has(hash)) continue;
      const receipt = await chain.getTransactionReceipt({ hash: hash as Hex }).catch(() => null);
      if (!receipt) evicted += 1;
    }
    if (evicted > 0) this.count('fee-spike evicted pending', evicted);
  }

  private async pendingHotWalletHashes(): Promise<string[]> {
    const pool = (await rpc(this.context.anvil.rpcUrl, 'txpool_content', [])) as {
      pending?: Record<string, Record<string, { hash: string }>>;
    };
    return Object.entries(pool.pending ?? {})
      .filter(([from]) => this.context.hotWallets.has(from.toLowerCase()))
      .flatMap(([, byNonce]) => Object.values(byNonce).map((tx) => tx.hash));
  }
}

/** The JSON-RPC methods each node fault may hit. */
const NODE_READS = [
  'eth_blockNumber',
  'eth_getBlockByNumber',
  'eth_getBlockByHash',
  'eth_getTransactionReceipt',
  'eth_getTransactionByHash',
  'eth_getTransactionCount',
  'eth_getLogs',
  'eth_getBalance',
  'eth_call',
  'eth_feeHistory',
  'eth_maxPriorityFeePerGas',
  'eth_gasPrice',
  'eth_estimateGas',
];
const NODE_METHODS: Record<NodeMethods, readonly string[]> = {
  reads: NODE_READS,
  send: ['eth_sendRawTransaction'],
  any: [...NODE_READS, 'eth_sendRawTransaction', 'eth_chainId'],
};
