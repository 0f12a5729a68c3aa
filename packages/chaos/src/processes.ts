/**
 * The system under test as separate operating-system processes: API servers and workers started
 * from the bundles `pnpm start` and `pnpm idem worker` run, exactly as an operator would run them.
 * Each can be SIGKILLed at any moment and started again; its output goes to a log file in the run
 * directory.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { bundle, CLI_BUNDLE, SERVER_BUNDLE } from '@idem/server/bundle';

/** Built once per run from the sources under test; a SIGKILL of the node process kills the real thing. */
let bundles: Promise<unknown> | null = null;
const built = () => {
  bundles ??= Promise.all([bundle('server'), bundle('cli')]);
  return bundles;
};
const startupTimeoutMs = 60_000;

const alive = new Set<ChildProcess>();
let exitHookInstalled = false;

/** A run that ends abruptly (an exception, a test timeout) must not leave servers and workers behind. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of alive) child.kill('SIGKILL');
  });
}

export interface ManagedProcess {
  readonly name: string;
  /** The URL it listens on (servers), once started. */
  readonly url: string | null;
  readonly running: boolean;
  /** Started and announced readiness, and not exited since. */
  readonly ready: boolean;
  readonly starts: number;
  start(): Promise<void>;
  kill(): void;
  stop(): Promise<void>;
  /**
   * Called when the process exits without being told to (a crash), as a supervisor (systemd,
   * Kubernetes) would notice it. Not called for kill() or stop().
   */
  onUnplannedExit(handler: (detail: string) => void): void;
}

interface Spec {
  name: string;
  args: string[];
  env: Record<string, string>;
  /** Returns the URL (or '' for processes without one) when a line of output says it is ready. */
  ready: (line: string) => string | null;
  logDir: string;
}

function managed(spec: Spec): ManagedProcess {
  installExitHook();
  let child: ChildProcess | null = null;
  let url: string | null = null;
  let starts = 0;
  let log: WriteStream | null = null;
  let expectingExit = false;
  let unplanned: ((detail: string) => void) | null = null;

  const start = async (): Promise<void> => {
    if (child) throw new Error(`${spec.name} is already running`);
    starts += 1;
    expectingExit = false;
    log ??= createWriteStream(join(spec.logDir, `${spec.name}.log`), { flags: 'a' });
    log.write(`\n=== start ${starts} at ${new Date().toISOString()} ===\n`);
    await built();
    const proc = spawn(process.execPath, spec.args, {
      env: { ...process.env, ...spec.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = proc;
    alive.add(proc);
    let started = false;
    proc.once('exit', (code, signal) => {
      alive.delete(proc);
      log?.write(`=== exit code=${code} signal=${signal} ===\n`);
      if (child === proc) {
        child = null;
        url = null;
        // Startup failures are reported by start() itself.
        if (!expectingExit && started) unplanned?.(`code=${code} signal=${signal}`);
      }
    });
    proc.stderr?.on('data', (chunk: Buffer) => log?.write(chunk));
    url = await new Promise<string>((resolve, reject) => {
      let pending = '';
      const timer = setTimeout(
        () => reject(new Error(`${spec.name} did not start in time`)),
        startupTimeoutMs,
      );
      proc.stdout?.on('data', (chunk: Buffer) => {
        log?.write(chunk);
        pending += chunk.toString('utf8');
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) {
          const found = spec.ready(line);
          if (found !== null) {
            clearTimeout(timer);
            resolve(found);
          }
        }
      });
      proc.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${spec.name} exited during startup (code ${code}, signal ${signal})`));
      });
    });
    started = true;
  };

  return {
    name: spec.name,
    get url() {
      return url;
    },
    get running() {
      return child !== null;
    },
    get ready() {
      return child !== null && url !== null;
    },
    get starts() {
      return starts;
    },
    start,
    kill() {
      expectingExit = true;
      child?.kill('SIGKILL');
    },
    onUnplannedExit(handler) {
      unplanned = handler;
    },
    async stop() {
      expectingExit = true;
      const proc = child;
      if (!proc) return;
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
      await new Promise<void>((resolve) => (log ? log.end(resolve) : resolve()));
      log = null;
    },
  };
}

export function serverProcess(name: string, env: Record<string, string>, logDir: string): ManagedProcess {
  return managed({
    name,
    args: [SERVER_BUNDLE],
    env: {
      ...env,
      PORT: '0',
      HOST: '127.0.0.1',
      IDEM_WORKER_IN_PROCESS: 'false',
      IDEM_EMBEDDED_RAILS: 'false',
      IDEM_MIGRATE_ON_START: 'false',
    },
    ready: (line) => /Idem listening on (http:\/\/[\d.]+:\d+)/.exec(line)?.[1] ?? null,
    logDir,
  });
}

export function workerProcess(name: string, env: Record<string, string>, logDir: string): ManagedProcess {
  return managed({
    name,
    args: [CLI_BUNDLE, 'worker', '--id', name],
    env,
    ready: (line) => (line.includes('"worker-started"') ? '' : null),
    logDir,
  });
}

/** The signer service (`idem signer`): the only process that holds the HSM PIN (--signer service). */
/**
 * `idem signer pin` for one tenant, as an operator runs it at bootstrap: the tenant's admins'
 * passkeys and its auto-approve limits go into the signer's trust file.
 */
export async function pinSignerTrust(input: {
  databaseUrl: string;
  tenantId: string;
  file: string;
}): Promise<void> {
  const args = [
    'signer',
    'pin',
    '--tenant',
    input.tenantId,
    '--origin',
    'http://localhost',
    '--file',
    input.file,
  ];
  await promisify(execFile)(process.execPath, [CLI_BUNDLE, ...args], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: input.databaseUrl },
  });
}

export function signerProcess(name: string, env: Record<string, string>, logDir: string): ManagedProcess {
  return managed({
    name,
    args: [CLI_BUNDLE, 'signer'],
    env,
    ready: (line) => (line.includes('"signer-started"') ? (JSON.parse(line) as { url: string }).url : null),
    logDir,
  });
}
