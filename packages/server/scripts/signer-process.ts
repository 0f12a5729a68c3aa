/**
 * `idem signer` started from the CLI bundle as its own process, with only PATH and `env`, for the
 * tests and the bench that talk to the service over loopback. Resolves with its URL once it prints
 * that it listens; rejects with its output when it exits or has not started within 30 s.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CLI_BUNDLE } from './bundle.ts';

const serverRoot = fileURLToPath(new URL('../', import.meta.url));

export interface SignerProcess {
  child: ChildProcess;
  url: string;
}

export function startSignerProcess(env: Record<string, string>): Promise<SignerProcess> {
  const child = spawn(process.execPath, [CLI_BUNDLE, 'signer'], {
    cwd: serverRoot,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`signer did not start: ${output}`)), 30_000);
    const read = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const line = output.split('\n').find((l) => l.includes('"signer-started"'));
      if (line) {
        clearTimeout(timer);
        resolve({ child, url: (JSON.parse(line) as { url: string }).url });
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`signer exited with ${code}: ${output}`));
    });
  });
}

/** SIGTERM, and waits for the exit; nothing when it has already exited. */
export async function stopSignerProcess(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
