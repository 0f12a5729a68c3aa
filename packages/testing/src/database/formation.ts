/**
 * A real high-availability PostgreSQL formation for tests: pg_auto_failover's monitor, a primary and
 * one synchronous standby, each its own PostgreSQL 15 on a free local port under a temporary
 * directory. The same engine an operator runs in production (docs/OPERATIONS.md), not a simulation:
 * a SIGKILLed primary is noticed by its keeper and the monitor, the standby is promoted, and the old
 * primary rejoins as a standby.
 *
 * PostgreSQL refuses to run as root, so under root every pg_autoctl command runs as the `postgres`
 * system user (runuser) in a directory that user owns. Trust authentication on 127.0.0.1 only.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';

const run = promisify(execFile);

const PG_AUTOCTL = '/usr/bin/pg_autoctl';
const PG_BIN = '/usr/lib/postgresql/15/bin';
const COMMAND_TIMEOUT_MS = 60_000;

/** Whether this machine can start a formation (Debian `postgresql-15-auto-failover`). */
export function formationAvailable(): boolean {
  return existsSync(PG_AUTOCTL) && existsSync(join(PG_BIN, 'pg_ctl'));
}

export interface FormationNode {
  name: string;
  port: number;
  pgdata: string;
}

const nodeStateSchema = z.object({
  nodename: z.string(),
  nodeport: z.number().int(),
  current_group_state: z.string(),
  assigned_group_state: z.string(),
  health: z.number().int(),
});
export type NodeState = z.infer<typeof nodeStateSchema>;

export interface Formation {
  readonly dir: string;
  readonly nodes: readonly FormationNode[];
  /**
   * A multi-host connection string to `database` with target_session_attrs=read-write, the hosts in
   * the order given by `order` (default: the standby first, the case a naive client gets wrong).
   */
  url(database?: string, order?: 'standby-first' | 'primary-first'): Promise<string>;
  state(): Promise<NodeState[]>;
  /** The node the monitor reports as primary (current and assigned state both primary). */
  primary(): Promise<FormationNode>;
  /**
   * SIGKILL of the primary's postmaster (the keeper then reports it down; the monitor promotes the
   * standby). Returns the node that was killed.
   */
  killPrimary(): Promise<FormationNode>;
  /** A planned switchover through the monitor; resolves when the monitor reports it done. */
  switchover(): Promise<void>;
  /**
   * Resolves when a node other than `formerPrimary` is primary and the other is a healthy secondary
   * again (synchronous replication restored), or throws after `timeoutMs`.
   */
  waitForPromotion(formerPrimary: FormationNode, timeoutMs?: number): Promise<FormationNode>;
  /**
   * Copies what explains a failover into `intoDir`: the monitor's event log (`pg_autoctl show
   * events`) and every node's PostgreSQL log, which stop() would delete with the formation.
   */
  collectLogs(intoDir: string): Promise<void>;
  /** Stops every process and deletes the directory. Safe to call twice. */
  stop(): Promise<void>;
}

interface Started {
  child: ChildProcess;
  pgdata: string;
}

/** pg_autoctl with its configuration, state and pid files inside the formation's directory. */
interface Autoctl {
  /** Runs one command to its end; its standard output. */
  run(args: string[]): Promise<string>;
  /** Starts `pg_autoctl run` for a data directory (a monitor or a node), recorded for stop(). */
  runService(pgdata: string): void;
  /** The services started, in order. */
  readonly started: readonly Started[];
}

const COMMON_OPTIONS = ['--pgctl', join(PG_BIN, 'pg_ctl'), '--auth', 'trust', '--no-ssl'];

export async function startFormation(options: { log?: (line: string) => void } = {}): Promise<Formation> {
  if (!formationAvailable())
    throw new Error('pg_auto_failover is not installed (Debian package postgresql-15-auto-failover)');
  const say = options.log ?? (() => {});
  const dir = mkdtempSync(join(tmpdir(), 'idem-formation-'));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const { uid, gid } = postgresIds();
    chownSync(dir, uid, gid);
  }
  const autoctl = autoctlIn(dir, asRoot);
  const stop = stopOnce(dir, autoctl);
  try {
    const [monitorPort, ...nodePorts] = await freePorts(3);
    const monitor = await startMonitor(autoctl, join(dir, 'monitor'), monitorPort as number);
    say(`monitor on ${monitorPort}`);
    const readState = async (): Promise<NodeState[]> => {
      const out = await autoctl.run(['show', 'state', '--pgdata', monitor.pgdata, '--json']);
      return z.array(nodeStateSchema).parse(JSON.parse(out));
    };
    const nodes: FormationNode[] = [];
    for (const [index, port] of nodePorts.entries()) {
      const node = { name: `node${index + 1}`, port: port as number, pgdata: join(dir, `node${index + 1}`) };
      await startNode(autoctl, monitor.url, node, readState);
      nodes.push(node);
      say(`${node.name} on ${node.port}`);
    }
    // Both nodes settled: primary plus a streaming synchronous secondary.
    await waitFor(async () => {
      const states = await readState();
      return states.length === 2 && states.every(settled);
    }, 60_000);
    return formationHandle({ dir, nodes, monitorData: monitor.pgdata, autoctl, readState, say, stop });
  } catch (error) {
    await stop();
    throw error;
  }
}

/** pg_autoctl under `dir`'s XDG directories, as the `postgres` system user when we are root. */
function autoctlIn(dir: string, asRoot: boolean): Autoctl {
  const env = {
    PATH: `${PG_BIN}:/usr/sbin:/usr/bin:/sbin:/bin`,
    XDG_CONFIG_HOME: join(dir, 'config'),
    XDG_DATA_HOME: join(dir, 'data'),
    XDG_RUNTIME_DIR: join(dir, 'run'),
    PG_CONFIG: join(PG_BIN, 'pg_config'),
    LANG: 'C.UTF-8',
  };
  const command = (args: string[]): [string, string[]] =>
    asRoot
      ? ['runuser', ['-u', 'postgres', '--', 'env', ...envArgs(env), PG_AUTOCTL, ...args]]
      : [PG_AUTOCTL, args];
  const started: Started[] = [];
  return {
    async run(args) {
      const [file, argv] = command(args);
      const { stdout } = await run(file, argv, { env, timeout: COMMAND_TIMEOUT_MS, maxBuffer: 8 << 20 });
      return stdout;
    },
    runService(pgdata) {
      const [file, argv] = command(['run', '--pgdata', pgdata]);
      const child = spawn(file, argv, { env, stdio: 'ignore', detached: false });
      started.push({ child, pgdata });
    },
    started,
  };
}

/**
 * Stops every service (the last started first), waits up to 10 s for each process before SIGKILL,
 * kills any postmaster left behind and deletes the directory. Safe to call twice.
 */
function stopOnce(dir: string, autoctl: Autoctl): () => Promise<void> {
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    for (const { pgdata } of [...autoctl.started].reverse())
      await autoctl.run(['stop', '--pgdata', pgdata, '--immediate']).catch(() => {});
    await Promise.all(autoctl.started.map(({ child }) => exitedOrKilled(child, 10_000)));
    // A postmaster whose keeper is gone would keep the directory busy: stop it directly too.
    for (const { pgdata } of autoctl.started) killPostmaster(pgdata);
    rmSync(dir, { recursive: true, force: true });
  };
}

/** Resolves when `child` has exited, or after `graceMs`, when it is sent SIGKILL. */
function exitedOrKilled(child: ChildProcess, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Creates and runs the monitor; resolves once it answers, with the URL the nodes register at. */
async function startMonitor(
  autoctl: Autoctl,
  pgdata: string,
  port: number,
): Promise<{ pgdata: string; url: string }> {
  await autoctl.run([
    'create',
    'monitor',
    ...COMMON_OPTIONS,
    '--pgdata',
    pgdata,
    '--pgport',
    String(port),
    '--hostname',
    '127.0.0.1',
  ]);
  autoctl.runService(pgdata);
  await waitFor(async () => {
    await autoctl.run(['show', 'state', '--pgdata', pgdata]);
    return true;
  }, 30_000);
  return { pgdata, url: `postgres://autoctl_node@127.0.0.1:${port}/pg_auto_failover?sslmode=disable` };
}

/**
 * Creates and runs one PostgreSQL node registered at the monitor; resolves once the monitor reports
 * it settled (or a single primary, as the first node is until the second joins).
 */
async function startNode(
  autoctl: Autoctl,
  monitorUrl: string,
  node: FormationNode,
  readState: () => Promise<NodeState[]>,
): Promise<void> {
  await autoctl.run([
    'create',
    'postgres',
    ...COMMON_OPTIONS,
    '--pgdata',
    node.pgdata,
    '--pgport',
    String(node.port),
    '--listen',
    '127.0.0.1',
    '--hostname',
    '127.0.0.1',
    '--name',
    node.name,
    '--dbname',
    'postgres',
    '--monitor',
    monitorUrl,
  ]);
  autoctl.runService(node.pgdata);
  // The second node clones the first: it must be a running primary first.
  await waitFor(
    async () =>
      (await readState()).some(
        (s) => s.nodename === node.name && (settled(s) || s.current_group_state === 'single'),
      ),
    60_000,
  );
}

/** The test's side of a started formation: URLs, state, the primary, faults and stop(). */
function formationHandle(parts: {
  dir: string;
  nodes: FormationNode[];
  monitorData: string;
  autoctl: Autoctl;
  readState: () => Promise<NodeState[]>;
  say: (line: string) => void;
  stop: () => Promise<void>;
}): Formation {
  const { dir, nodes, monitorData, autoctl, readState, say, stop } = parts;
  const nodeOf = (state: NodeState) => {
    const node = nodes.find((n) => n.name === state.nodename);
    if (!node) throw new Error(`unknown node ${state.nodename}`);
    return node;
  };
  const primary = async () => {
    const found = (await readState()).find(
      (s) => s.current_group_state === 'primary' && s.assigned_group_state === 'primary',
    );
    if (!found) throw new Error('no primary in the formation');
    return nodeOf(found);
  };
  return {
    dir,
    nodes,
    state: readState,
    primary,
    async url(database = 'postgres', order = 'standby-first') {
      const first = await primary();
      const standbys = nodes.filter((node) => node !== first);
      const ordered = order === 'primary-first' ? [first, ...standbys] : [...standbys, first];
      return `postgres://postgres@${ordered.map((n) => `127.0.0.1:${n.port}`).join(',')}/${database}?target_session_attrs=read-write`;
    },
    async killPrimary() {
      const node = await primary();
      if (!killPostmaster(node.pgdata)) throw new Error(`${node.name} has no running postmaster`);
      say(`SIGKILL ${node.name}'s postmaster`);
      return node;
    },
    async switchover() {
      await autoctl.run(['perform', 'switchover', '--pgdata', monitorData, '--wait', '60']);
    },
    async waitForPromotion(formerPrimary, timeoutMs = 90_000) {
      let promoted: FormationNode | null = null;
      await waitFor(async () => {
        const states = await readState();
        const next = states.find(
          (s) =>
            s.nodename !== formerPrimary.name &&
            s.current_group_state === 'primary' &&
            s.assigned_group_state === 'primary',
        );
        if (!next || !states.every(settled)) return false;
        promoted = nodeOf(next);
        return true;
      }, timeoutMs);
      if (!promoted) throw new Error('no promotion');
      return promoted;
    },
    async collectLogs(intoDir) {
      mkdirSync(intoDir, { recursive: true });
      const events = await autoctl
        .run(['show', 'events', '--count', '200', '--pgdata', monitorData])
        .catch((error: Error) => `pg_autoctl show events failed: ${error.message}`);
      writeFileSync(join(intoDir, 'monitor-events.txt'), events);
      for (const node of nodes) {
        const logDir = join(node.pgdata, 'log');
        if (!existsSync(logDir)) continue;
        const files = readdirSync(logDir).sort();
        writeFileSync(
          join(intoDir, `${node.name}-postgres.log`),
          files.map((file) => readFileSync(join(logDir, file), 'utf8')).join(''),
        );
      }
    },
    stop,
  };
}

/** A node at rest: primary or secondary, as assigned, and healthy. */
function settled(state: NodeState): boolean {
  return (
    state.current_group_state === state.assigned_group_state &&
    (state.current_group_state === 'primary' || state.current_group_state === 'secondary') &&
    state.health === 1
  );
}

/** SIGKILL of a data directory's postmaster, read from its postmaster.pid; false when none runs. */
function killPostmaster(pgdata: string): boolean {
  const pidFile = join(pgdata, 'postmaster.pid');
  if (!existsSync(pidFile)) return false;
  const pid = Number.parseInt(readFileSync(pidFile, 'utf8').split('\n')[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

function envArgs(env: Record<string, string>): string[] {
  return Object.entries(env).map(([key, value]) => `${key}=${value}`);
}

/** The `postgres` system user's uid and gid, from /etc/passwd. */
function postgresIds(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  if (!line) throw new Error('no postgres system user');
  const fields = line.split(':');
  return { uid: Number(fields[2]), gid: Number(fields[3]) };
}

async function freePorts(count: number): Promise<number[]> {
  const ports: number[] = [];
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolve(server));
        }),
    ),
  );
  for (const server of servers) {
    const address = server.address();
    if (address && typeof address === 'object') ports.push(address.port);
  }
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = null;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`formation: timed out after ${timeoutMs} ms${last ? ` (${(last as Error).message})` : ''}`);
}
