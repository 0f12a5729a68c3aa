import { join } from 'node:path';
import { isIdemError, scrubbedError } from '@idem/contracts';
import type { Database } from '@idem/core';
import {
  type AnvilInstance,
  createCustodianAdapter,
  generateWebhookSecret,
  lateAnsweringSigner,
  type RunningCustodianSimulator,
  startAnvil,
  startCustodianSimulator,
} from '@idem/rails';
import { createWorker, RailRegistry, type RailsConfig, type Worker } from '@idem/workers';
import type { Logger } from 'pino';
import { type Env, evmFeePolicy } from './env.ts';
import { workerSettingsFrom } from './worker-settings.ts';

/**
 * The money rails and the worker that drives them. With URLs configured, it connects to a real EVM
 * node and a real custodian. In embedded mode (no DATABASE_URL), it starts what a new user needs
 * to see withdrawals complete: a local anvil chain whose state is kept beside the embedded
 * database, the custodian simulator, and one worker in process.
 */
export interface MoneyMovers {
  rails: RailRegistry;
  worker: Worker | null;
  describe: string[];
  stop(): Promise<void>;
}

export async function startMoneyMovers(
  env: Env,
  db: Database,
  log: Logger,
  options: { embedded: boolean },
): Promise<MoneyMovers> {
  const embedded = options.embedded && env.IDEM_EMBEDDED_RAILS;
  const stops: (() => Promise<void>)[] = [];
  const describe: string[] = [];
  const config: RailsConfig = {};

  let anvil: AnvilInstance | null = null;
  if (env.IDEM_EVM_RPC_URL) {
    config.evm = {
      rpcUrl: env.IDEM_EVM_RPC_URL,
      chainId: env.IDEM_EVM_CHAIN_ID,
      fees: evmFeePolicy(env),
      signTimeoutMs: env.IDEM_SIGN_TIMEOUT_MS,
    };
  } else if (embedded) {
    anvil = await startAnvil({
      chainId: env.IDEM_EVM_CHAIN_ID,
      mining: { intervalSeconds: 1 },
      statePath: join(env.IDEM_DATA_DIR, 'anvil-state.json'),
    });
    stops.push(() => (anvil as AnvilInstance).stop());
    config.evm = { rpcUrl: anvil.rpcUrl, chainId: anvil.chainId, fees: evmFeePolicy(env) };
    describe.push(`local EVM chain (anvil) at ${anvil.rpcUrl}`);
  }

  let simulator: RunningCustodianSimulator | null = null;
  if (env.IDEM_CUSTODIAN_URL) {
    config.custodian = createCustodianAdapter({
      baseUrl: env.IDEM_CUSTODIAN_URL,
      ...(env.IDEM_CUSTODIAN_API_KEY ? { apiKey: env.IDEM_CUSTODIAN_API_KEY } : {}),
    });
  } else if (embedded) {
    simulator = await startCustodianSimulator({
      webhookSecret: generateWebhookSecret(),
      settlement: { outcome: 'complete', afterMs: 2_000 },
    });
    stops.push(() => (simulator as RunningCustodianSimulator).close());
    config.custodian = createCustodianAdapter({ baseUrl: simulator.url });
    describe.push(`custodian simulator at ${simulator.url}`);
  }

  if (env.IDEM_SIGNER_URL) {
    if (!env.IDEM_SIGNER_TOKEN) {
      throw new Error(
        'IDEM_SIGNER_URL is set without IDEM_SIGNER_TOKEN: this worker has no credential for the signer service',
      );
    }
    config.signerService = { url: env.IDEM_SIGNER_URL, token: env.IDEM_SIGNER_TOKEN };
    describe.push(`HSM keys signed by the signer service at ${new URL(env.IDEM_SIGNER_URL).host}`);
  }
  const faultFile = env.IDEM_SIGNER_FAULT_FILE;
  if (faultFile) {
    if (env.NODE_ENV !== 'test')
      throw new Error('IDEM_SIGNER_FAULT_FILE is for chaos runs (NODE_ENV=test) only');
    config.decorateSigner = (signer) => lateAnsweringSigner(signer, faultFile);
    describe.push('signer answers delayed on purpose (chaos)');
  }
  const rails = new RailRegistry(config);
  // A fee policy the environment got wrong stops the start, not the first signature.
  if (config.evm) rails.feePolicy();
  if (config.evm) await verifyNodeChainAtStart(rails, log);
  const inProcess = env.IDEM_WORKER_IN_PROCESS ?? embedded;
  let worker: Worker | null = null;
  if (inProcess) {
    worker = createWorker({
      db,
      rails,
      log,
      workerId: `server-${process.pid}`,
      ...workerSettingsFrom(env, options),
    });
    worker.start(env.IDEM_WORKER_INTERVAL_MS);
    describe.push('a worker in this process');
  }
  return {
    rails,
    worker,
    describe,
    stop: async () => {
      await worker?.stop();
      for (const stop of stops.reverse()) await stop();
    },
  };
}

/**
 * A node of another chain than configured stops the start: the in-process key guard must decide
 * by the chain the node reports, not by IDEM_EVM_CHAIN_ID's default. A node that does not answer
 * yet does not: the worker asks again before it signs anything.
 */
async function verifyNodeChainAtStart(rails: RailRegistry, log: Logger): Promise<void> {
  try {
    await rails.verifyNodeChain();
  } catch (error) {
    if (isIdemError(error)) throw error;
    log.warn(
      { message: scrubbedError(error, 300) },
      'EVM node chain id unverified at start; checked again before signing',
    );
  }
}
