/**
 * The system under test as separate processes, each behind the proxy that injects its faults:
 * API servers, workers, the custodian simulator, and the chain path
 * (processes -> chainProxy -> nodeFaults -> anvil).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { AnvilInstance } from '@idem/rails';
import { type FaultProxy, startFaultProxy } from '@idem/testing/chain';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import {
  type ManagedProcess,
  pinSignerTrust,
  serverProcess,
  signerProcess,
  workerProcess,
} from './processes.ts';
import { type ChaosProxy, startChaosProxy } from './proxy.ts';
import { CHAIN_ID, type Cleanups, OPENING_BTC, type RunWorld, type SoftHsmToken } from './setup.ts';

export interface RunSystem {
  servers: ManagedProcess[];
  workers: ManagedProcess[];
  /** One per server, in the same order: the integrators' and webhooks' way in. */
  serverProxies: ChaosProxy[];
  custodianProxy: ChaosProxy;
  /** Loses answers after forwarding, in front of `nodeFaults`. */
  chainProxy: ChaosProxy;
  /** A node behind a load balancer: 429, no answer, a lagging view. */
  nodeFaults: FaultProxy;
  simulator: SimulatorProcess;
  /** The signer service (`--signer service`), restarted on the same address after a kill. */
  signer: ManagedProcess | null;
  /** Its hash-chained log. */
  signerLog: string | null;
}

export async function startSystem(input: {
  anvil: AnvilInstance;
  world: RunWorld;
  databaseUrl: string;
  servers: number;
  workers: number;
  outDir: string;
  token: SoftHsmToken | null;
  signerFaultFile: string;
  signerService?: boolean;
  cleanups: Cleanups;
}): Promise<RunSystem> {
  const { cleanups, world } = input;
  const serverProxies: ChaosProxy[] = [];
  for (let s = 0; s < input.servers; s += 1) serverProxies.push(await startChaosProxy(null));
  const custodianProxy = await startChaosProxy(null);
  const nodeFaults: FaultProxy = await startFaultProxy(input.anvil.rpcUrl);
  cleanups.push(() => nodeFaults.close());
  const chainProxy = await startChaosProxy(nodeFaults.url);
  for (const proxy of [...serverProxies, custodianProxy, chainProxy]) cleanups.push(() => proxy.close());
  const simulator = await startSimulator(serverProxies, world, cleanups);
  custodianProxy.setUpstream(simulator.url);
  await simulator.control({ settlement: { outcome: 'complete', afterMs: 1_500 } });
  // Every tenant shares the deployment's one (omnibus) custodian account: it holds their opening BTC.
  await simulator.control({
    fund: { asset: 'BTC', amountMinor: (OPENING_BTC * BigInt(world.accounts.length)).toString() },
  });

  const common = { DATABASE_URL: input.databaseUrl, LOG_LEVEL: 'warn', NODE_ENV: 'test' };
  // Servers read the chain only for staff resolutions, but through the same faulty path as workers.
  const chainEnv = { IDEM_EVM_RPC_URL: chainProxy.url, IDEM_EVM_CHAIN_ID: String(CHAIN_ID) };
  const servers = serverProxies.map((_, s) =>
    serverProcess(`server-${s}`, { ...common, ...chainEnv, IDEM_DB_POOL_MAX: '4' }, input.outDir),
  );
  const workerEnv = {
    ...common,
    IDEM_DB_POOL_MAX: '3',
    ...chainEnv,
    IDEM_CUSTODIAN_URL: custodianProxy.url,
    ...workerTimings(input.token, input.signerFaultFile),
  };
  const service =
    input.signerService && input.token ? await signerService({ ...input, world }, common.DATABASE_URL) : null;
  const workers = Array.from({ length: input.workers }, (_, w) =>
    workerProcess(
      `worker-${w}`,
      service ? { ...withoutHsm(workerEnv, input.token), ...service.workerEnv(w) } : workerEnv,
      input.outDir,
    ),
  );
  if (service) {
    cleanups.push(() => service.process.stop());
    await service.process.start();
  }
  for (const proc of [...servers, ...workers]) cleanups.push(() => proc.stop());
  await Promise.all([
    ...servers.map(async (server, s) => {
      await server.start();
      (serverProxies[s] as ChaosProxy).setUpstream(server.url);
    }),
    ...workers.map((worker) => worker.start()),
  ]);
  return {
    servers,
    workers,
    serverProxies,
    custodianProxy,
    chainProxy,
    nodeFaults,
    simulator,
    signer: service?.process ?? null,
    signerLog: service?.logPath ?? null,
  };
}

/**
 * The signer service for `--signer service`: it alone gets the token's configuration and PIN, on a
 * fixed loopback port (a restart after a kill comes back where the workers look), one credential
 * per worker. Workers get the service's URL and their token, and neither the module nor the PIN.
 */
async function signerService(
  input: { token: SoftHsmToken | null; outDir: string; workers: number; world: RunWorld },
  databaseUrl: string,
) {
  const token = input.token as SoftHsmToken;
  // Every tenant here is approved by the automatic review alone: its pinned limits cover them.
  const trustFile = join(input.outDir, 'signer-trust.json');
  for (const tenant of input.world.tenants) {
    await pinSignerTrust({ databaseUrl, tenantId: tenant.tenantId, file: trustFile });
  }
  const port = await freePort();
  const tokens = Array.from({ length: input.workers }, () => randomBytes(24).toString('hex'));
  const logPath = join(input.outDir, 'signer-log.jsonl');
  const process = signerProcess(
    'signer',
    {
      ...token.env,
      IDEM_SIGNER_PKCS11_MODULE: token.modulePath,
      IDEM_SIGNER_PKCS11_MODULES: token.modulePath,
      IDEM_SIGNER_PKCS11_TOKEN: token.tokenLabel,
      IDEM_SIGNER_PKCS11_PIN: token.pin,
      IDEM_SIGNER_LISTEN: `127.0.0.1:${port}`,
      IDEM_SIGNER_WORKERS: tokens
        .map((t, w) => `worker-${w}=${createHash('sha256').update(t).digest('hex')}`)
        .join(','),
      IDEM_SIGNER_DATABASE_URL: databaseUrl,
      IDEM_SIGNER_CHAIN_ID: String(CHAIN_ID),
      IDEM_SIGNER_LOG: logPath,
      IDEM_SIGNER_TRUST_FILE: trustFile,
      LOG_LEVEL: 'warn',
    },
    input.outDir,
  );
  return {
    process,
    logPath,
    workerEnv: (w: number) => ({
      IDEM_SIGNER_URL: `http://127.0.0.1:${port}`,
      IDEM_SIGNER_TOKEN: tokens[w] ?? '',
    }),
  };
}

/** The worker's variables without the HSM's: no module configuration, no PIN. */
function withoutHsm(env: Record<string, string>, token: SoftHsmToken | null): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !(token && name in token.env)));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function startSimulator(
  serverProxies: ChaosProxy[],
  world: RunWorld,
  cleanups: Cleanups,
): Promise<SimulatorProcess> {
  const webhookUrl = () => `${(serverProxies[0] as ChaosProxy).url}/webhooks/${world.endpoint.endpointId}`;
  const simulator: SimulatorProcess = await spawnSimulator({
    webhookSecret: world.endpoint.secret,
    webhookUrl: webhookUrl(),
  });
  cleanups.push(() => simulator.stop());
  return simulator;
}

/** The workers' timings, short so that every recovery the faults call for happens within the run. */
function workerTimings(token: SoftHsmToken | null, signerFaultFile: string): Record<string, string> {
  return {
    IDEM_WORKER_INTERVAL_MS: '300',
    // Short leases, so a killed worker's leases are taken over within the run.
    IDEM_WORKER_LEASE_MS: '4000',
    // A pass that hangs is named in the worker's log well inside the quiet phase.
    IDEM_WORKER_STALL_ALERT_MS: '15000',
    // Short, so an UNKNOWN nobody can resolve gets its named owner inside the quiet phase.
    IDEM_UNKNOWN_ESCALATE_AFTER_MS: '5000',
    // Two chain passes prove a withdrawal not sent; short, so both fit in the run.
    IDEM_NOT_SENT_CONFIRM_INTERVAL_MS: '1000',
    // Stuck transactions (evicted by a fee spike, dropped) are bumped within the run.
    IDEM_BUMP_AFTER_MS: 'ethereum=2000',
    // The custodian is asked for what its notifications missed every 2 s, so a deposit whose
    // every notification was lost is credited within the quiet phase.
    IDEM_CUSTODIAN_POLL_EVERY_MS: '2000',
    ...(token ? { ...token.env, IDEM_SIGN_TIMEOUT_MS: '1000', IDEM_SIGNER_FAULT_FILE: signerFaultFile } : {}),
  };
}
