/**
 * The load of a run: simulated integrators (one per client, plus an impatient one during a
 * failover drill) and depositors on the chain and through the custodian's webhooks.
 */
import { createIdemClient } from '@idem/sdk';
import { type DepositLog, runDepositors } from './deposits.ts';
import { type IntegratorLog, runClient, runImpatientClient, sleep } from './integrators.ts';
import type { Prng } from './prng.ts';
import type { ChaosProxy } from './proxy.ts';
import { type RunWorld, TENANTS } from './setup.ts';
import type { RunSystem } from './system.ts';

export interface LoadPlan {
  world: RunWorld;
  system: RunSystem;
  prng: Prng;
  /** Which server a depositor's webhook goes to. */
  targets: Prng;
  anvilRpcUrl: string;
  clients: number;
  servers: number;
  durationMs: number;
  thinkMs?: [number, number];
  startedAt: number;
  stopAt: number;
  seedLabel: string;
  /** During a failover drill: settles when the formation has settled again. */
  failoverEnd: Promise<unknown> | null;
}

/** Starts every integrator and depositor; settles when all of them have stopped. */
export function runLoad(plan: LoadPlan, integrators: IntegratorLog, deposits: DepositLog): Promise<unknown> {
  return Promise.all([
    ...clientRuns(plan, integrators),
    impatientRun(plan, integrators),
    depositRun(plan, deposits),
  ]);
}

function clientRuns(plan: LoadPlan, integrators: IntegratorLog): Promise<void>[] {
  const { world, system } = plan;
  return Array.from({ length: plan.clients }, (_, c) => {
    const tenantIndex = c % TENANTS;
    return runClient(
      {
        index: c,
        tenantIndex,
        accountId: world.accounts[c] as string,
        client: createIdemClient({
          baseUrl: (system.serverProxies[c % plan.servers] as ChaosProxy).url,
          apiKey: world.apiKeys[tenantIndex] as string,
          requestTimeoutMs: 4_000,
          retry: { attemptsMax: 3, totalMsMax: 10_000 },
        }),
        assets: tenantIndex === world.custodianTenant.index ? ['ETH', 'BTC'] : ['ETH'],
        prng: plan.prng.fork(`client-${c}`),
        startedAt: plan.startedAt,
        stopAt: plan.stopAt,
        thinkMsMin: plan.thinkMs?.[0] ?? 150,
        thinkMsMax: plan.thinkMs?.[1] ?? 900,
        seedLabel: plan.seedLabel,
      },
      integrators,
    );
  });
}

/**
 * I16-F4: from the failover event until the formation settled, one more integrator with a
 * deadline shorter than the outage gives up on what it cannot learn, and retries it afterwards.
 */
function impatientRun(plan: LoadPlan, integrators: IntegratorLog): Promise<void> {
  const { failoverEnd, world, system } = plan;
  if (!failoverEnd) return Promise.resolve();
  const baseUrl = (system.serverProxies[0] as ChaosProxy).url;
  const apiKey = world.apiKeys[0] as string;
  return sleep(Math.round(plan.durationMs * 0.4)).then(() =>
    runImpatientClient(
      {
        index: plan.clients,
        tenantIndex: 0,
        accountId: world.accounts[0] as string,
        client: createIdemClient({
          baseUrl,
          apiKey,
          requestTimeoutMs: 4_000,
          retry: { attemptsMax: 3, totalMsMax: 10_000 },
        }),
        assets: ['ETH'],
        prng: plan.prng.fork('impatient-client'),
        startedAt: plan.startedAt,
        stopAt: plan.stopAt,
        thinkMsMin: 150,
        thinkMsMax: 350,
        seedLabel: plan.seedLabel,
      },
      createIdemClient({
        baseUrl,
        apiKey,
        // Shorter than any outage the drill causes, even on a quiet machine where the pool
        // reconnects within a second: a submission caught in it is given up, not waited out
        // (a 1.5 s deadline gave up on nothing in a quiet switchover; the F4 test then failed).
        requestTimeoutMs: 250,
        retry: { attemptsMax: 1 },
      }),
      integrators,
      failoverEnd,
    ),
  );
}

function depositRun(plan: LoadPlan, deposits: DepositLog): Promise<void> {
  const { world, system } = plan;
  return runDepositors(
    {
      prng: plan.prng.fork('deposits'),
      stopAt: plan.stopAt,
      seedLabel: plan.seedLabel,
      anvilRpcUrl: plan.anvilRpcUrl,
      addresses: world.depositAddresses,
      webhook: {
        url: () =>
          `${(system.serverProxies[plan.targets.int(0, plan.servers - 1)] as ChaosProxy).url}/webhooks/${world.endpoint.endpointId}`,
        secret: world.endpoint.secret,
      },
      custodianAddresses: world.custodianDepositAddresses,
      receive: async ({ address, accountId, amountMinor }) => {
        const { deposit } = await system.simulator.control({
          deposit: { network: 'bitcoin', address, accountId, asset: 'BTC', amountMinor },
        });
        if (!deposit) throw new Error('the custodian simulator answered no deposit');
        return deposit.id;
      },
    },
    deposits,
  );
}
