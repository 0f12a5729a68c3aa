/**
 * Runs the custodian simulator as a separate process (bin/custodian-simulator.ts under tsx) and
 * drives its test routes over real HTTP, so nothing in the custodian tests shares memory with it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import {
  type ControlBody,
  type CustodianDeposit,
  type CustodianTransfer,
  custodianDepositSchema,
  type Ledger,
  ledgerSchema,
} from '@idem/rails';

export interface SimulatorProcess {
  readonly url: string;
  /** Applies a control; answers the deposit it made arrive, if it asked for one. */
  control(body: ControlBody): Promise<{ deposit?: CustodianDeposit }>;
  /** Puts transfers on the simulator's books directly (POST /_seed, in chunks). */
  seed(transfers: readonly CustodianTransfer[]): Promise<void>;
  ledger(): Promise<Ledger>;
  stop(): Promise<void>;
}

// A tsx start-up; a minute, since the suites run side by side on two cores and it once took over 15 s.
const startupTimeoutMs = 60_000;
const seedChunk = 5_000;
// The simulator's entry point sits beside the rails package's sources (its exports name only src/index.ts).
const binPath = join(
  dirname(createRequire(import.meta.url).resolve('@idem/rails')),
  '../bin/custodian-simulator.ts',
);

export async function spawnSimulator(env: {
  webhookSecret: string;
  webhookUrl?: string;
}): Promise<SimulatorProcess> {
  const tsxCli = createRequire(import.meta.url).resolve('tsx/cli');
  const child: ChildProcess = spawn(process.execPath, [tsxCli, binPath], {
    env: {
      ...process.env,
      CUSTODIAN_WEBHOOK_SECRET: env.webhookSecret,
      ...(env.webhookUrl ? { CUSTODIAN_WEBHOOK_URL: env.webhookUrl } : {}),
      CUSTODIAN_EXIT_WITH_PARENT: '1',
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`simulator did not start: ${output}`)), startupTimeoutMs);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      const line = output.split('\n').find((l) => l.includes('"listening"'));
      if (line) {
        clearTimeout(timer);
        resolve((JSON.parse(line) as { url: string }).url);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`simulator exited (${code}): ${output}`));
    });
  });
  child.stdout?.resume();
  child.stderr?.resume();

  return {
    url,
    async control(body) {
      const response = await fetch(`${url}/_control`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(3_000),
      });
      if (response.status !== 200)
        throw new Error(`control refused: ${response.status} ${await response.text()}`);
      const answer = (await response.json()) as { deposit?: unknown };
      return answer.deposit === undefined ? {} : { deposit: custodianDepositSchema.parse(answer.deposit) };
    },
    async seed(transfers) {
      for (let start = 0; start < transfers.length; start += seedChunk) {
        const response = await fetch(`${url}/_seed`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ transfers: transfers.slice(start, start + seedChunk) }),
          signal: AbortSignal.timeout(10_000),
        });
        if (response.status !== 200)
          throw new Error(`seed refused: ${response.status} ${await response.text()}`);
      }
    },
    async ledger() {
      const response = await fetch(`${url}/_ledger`, { signal: AbortSignal.timeout(3_000) });
      return ledgerSchema.parse(await response.json());
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
