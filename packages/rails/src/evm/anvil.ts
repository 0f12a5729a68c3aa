/**
 * Starts a real anvil (Foundry's local EVM node, shipped on npm as @foundry-rs/anvil) as a child
 * process on a free port and waits until it answers JSON-RPC. Tests use it to run the EVM rail
 * against real EVM execution, and `pnpm start` can use it as the local chain.
 *
 * The child is killed when the parent exits normally or on SIGINT/SIGTERM/SIGHUP. A parent killed
 * with SIGKILL cannot run any handler, so its anvil outlives it; nothing here can prevent that.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createRequire } from 'node:module';

export interface AnvilOptions {
  /** EIP-155 chain id the node reports and enforces. Default 31337. */
  chainId?: number;
  /**
   * How blocks are produced. `auto` mines one block per transaction (the default; fastest tests).
   * `{ intervalSeconds }` mines on a timer, so a transaction sits in the pool until the next block.
   * `manual` mines only on `evm_mine`/`anvil_mine`, so a transaction stays pending until a test says.
   */
  mining?: 'auto' | 'manual' | { intervalSeconds: number };
  /** How long to wait for the node to answer JSON-RPC. Default 15 s. */
  startupTimeoutMs?: number;
  /** Path to an anvil binary; by default the one from @foundry-rs/anvil's platform package. */
  binaryPath?: string;
  /** Number of funded dev accounts. Default 10 (anvil's default). */
  accounts?: number;
  /**
   * A file the chain's state is loaded from at start and saved to every few seconds and on exit,
   * so an embedded development chain survives a restart alongside the embedded database.
   */
  statePath?: string;
}

export interface AnvilInstance {
  readonly rpcUrl: string;
  readonly port: number;
  readonly chainId: number;
  readonly pid: number;
  /** Stops the node and waits for the process to exit (SIGKILL after 3 s). Idempotent. */
  stop(): Promise<void>;
}

/** The default anvil dev mnemonic's first keys, as anvil itself prints them. Public test keys: never hold value on a real chain. */
export const anvilDevPrivateKeys = [
  '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a',
  '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba',
  '0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e',
  '0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356',
  '0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97',
  '0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6',
] as const;

const startupTimeoutMsDefault = 15_000;
const stopGraceMs = 3_000;
/** Anvil prints its banner and then this line; we read at most this much output while waiting. */
const startupOutputBytesMax = 256 * 1024;
const listeningPattern = /Listening on ([\d.]+):(\d+)/;

const running = new Set<ChildProcess>();
let exitHooksInstalled = false;

/** Kills every anvil this process started. Synchronous, because it runs inside 'exit'. */
function killAllChildren(): void {
  for (const child of running) {
    try {
      child.kill('SIGKILL');
    } catch {
      // Already gone: nothing to clean up.
    }
  }
  running.clear();
}

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.once('exit', killAllChildren);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      killAllChildren();
      // Keep Node's default behaviour (terminate) unless someone else handles this signal.
      process.off(signal, onSignal);
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

/** Resolves the platform binary inside @foundry-rs/anvil's optional dependency. */
export function resolveAnvilBinary(): string {
  const require = createRequire(import.meta.url);
  const wrapperPackage = require.resolve('@foundry-rs/anvil/package.json');
  const platformArch = `${process.platform === 'win32' ? 'win32' : process.platform}-${process.arch === 'x64' ? 'amd64' : process.arch}`;
  const binaryName = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  return createRequire(wrapperPackage).resolve(`@foundry-rs/anvil-${platformArch}/bin/${binaryName}`);
}

export async function startAnvil(options: AnvilOptions = {}): Promise<AnvilInstance> {
  const chainId = options.chainId ?? 31337;
  const startupTimeoutMs = options.startupTimeoutMs ?? startupTimeoutMsDefault;
  const mining = options.mining ?? 'auto';
  // Port 0 lets the kernel pick a free port atomically; anvil prints the port it bound.
  const args = ['--host', '127.0.0.1', '--port', '0', '--chain-id', String(chainId)];
  args.push('--accounts', String(options.accounts ?? 10));
  if (options.statePath) args.push('--state', options.statePath, '--state-interval', '5');
  if (mining === 'manual') args.push('--no-mining');
  else if (mining !== 'auto') {
    if (!Number.isInteger(mining.intervalSeconds) || mining.intervalSeconds < 1) {
      throw new RangeError('mining.intervalSeconds must be a positive integer');
    }
    args.push('--block-time', String(mining.intervalSeconds));
  }

  installExitHooks();
  const child = spawn(options.binaryPath ?? resolveAnvilBinary(), args, {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      running.delete(child);
      resolve();
    });
  });

  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), stopGraceMs);
    await exited;
    clearTimeout(timer);
  };

  try {
    const port = await waitForListeningPort(child, startupTimeoutMs);
    const rpcUrl = `http://127.0.0.1:${port}`;
    await waitForRpc(rpcUrl, chainId, startupTimeoutMs);
    // Output after startup is not needed; drain it so a full pipe never blocks the node.
    child.stdout?.resume();
    child.stderr?.resume();
    return { rpcUrl, port, chainId, pid: child.pid ?? -1, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function waitForListeningPort(child: ChildProcess, timeoutMs: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(
      () => finish(new Error(`anvil did not start listening within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer): void => {
      if (output.length < startupOutputBytesMax) output += chunk.toString('utf8');
      const match = listeningPattern.exec(output);
      if (match?.[2]) finish(undefined, Number(match[2]));
    };
    const onExit = (code: number | null, signal: string | null): void => {
      finish(
        new Error(`anvil exited during startup (code ${code}, signal ${signal}): ${output.slice(-2000)}`),
      );
    };
    const onError = (error: Error): void => finish(error);
    function finish(error?: Error, port?: number): void {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
      if (error) reject(error);
      else resolve(port as number);
    }
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

async function waitForRpc(rpcUrl: string, chainId: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  let reported: string | undefined;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
        signal: AbortSignal.timeout(1_000),
      });
      const body = (await response.json()) as { result?: string };
      if (body.result !== undefined) reported = body.result;
    } catch (error) {
      lastError = error;
    }
    if (reported !== undefined) {
      if (Number(reported) !== chainId)
        throw new Error(`anvil reports chain id ${reported}, expected ${chainId}`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(
    `anvil at ${rpcUrl} did not answer eth_chainId within ${timeoutMs} ms: ${String(lastError)}`,
  );
}
