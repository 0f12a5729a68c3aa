import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { SERVER_BUNDLE } from '@idem/server/bundle';

/** The server package's folder (its bundle lives in its dist/): the process runs from there. */
const serverRoot = fileURLToPath(new URL('..', pathToFileURL(SERVER_BUNDLE)));

export interface ServerProcess {
  baseUrl: string;
  port: number;
  /** The server's process id (the bench reads its CPU time). */
  pid: number;
  /** Every line the server wrote to stdout and stderr, as written (for log-capture tests). */
  output: string[];
  exited: Promise<number | null>;
  /** SIGTERM and wait for a clean exit. */
  stop(): Promise<void>;
  /** SIGKILL: no cleanup at all. */
  kill(): Promise<void>;
}

/**
 * Starts the real server (the bundle of `src/main.ts` that `pnpm start` runs, built by the tests'
 * global setup) as a child process on a free port (PORT=0; the port is
 * read back from the server's own "Idem listening on" line).
 */
export async function startServerProcess(
  env: Record<string, string>,
  /** Extra Node flags, e.g. `--cpu-prof` for a profile of the server under bench load. */
  nodeArgs: string[] = [],
): Promise<ServerProcess> {
  const child: ChildProcess = spawn(process.execPath, [...nodeArgs, SERVER_BUNDLE], {
    cwd: serverRoot,
    env: {
      PATH: process.env.PATH ?? '',
      NODE_ENV: 'test',
      PORT: '0',
      LOG_LEVEL: 'info',
      // API tests need no chain, custodian or worker; the workers package tests those.
      IDEM_EMBEDDED_RAILS: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  let stopping = false;
  let port: number | undefined;
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  // A server that dies under a test shows up there only as a refused or closed connection: say
  // here that it exited, and what it wrote last.
  void exited.then((code) => {
    if (!stopping && port !== undefined) {
      process.stderr.write(
        `server process ${child.pid} exited with ${code} during a test; its last output:\n${output.join('').slice(-4_000)}\n`,
      );
    }
  });
  port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output.join('')}`)), 60_000);
    let pending = '';
    const onData = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output.push(text);
      pending += text;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        const listening = /^Idem listening on http:\/\/[^\s]+:(\d+) /.exec(line);
        if (listening?.[1]) {
          clearTimeout(timer);
          resolve(Number(listening[1]));
        }
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString('utf8')));
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${output.join('')}`));
    });
  });
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    pid: child.pid ?? 0,
    output,
    exited,
    stop: async () => {
      stopping = true;
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
    kill: async () => {
      stopping = true;
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
