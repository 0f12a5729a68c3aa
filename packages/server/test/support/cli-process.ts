import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { CLI_BUNDLE } from '../../scripts/bundle.ts';

const serverRoot = fileURLToPath(new URL('../../', import.meta.url));

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real `idem` CLI in a child process, as `pnpm idem` does: the bundle of src/cli/main.ts
 * (built once per test run by test/support/global-setup.ts), with only PATH and `env` in its
 * environment. Resolves when it exits. On PGlite the CLI holds the data directory while it runs,
 * so callers inspect the database only after this resolves.
 */
export async function idem(env: Record<string, string>, ...args: string[]): Promise<CliRun> {
  return runNode([CLI_BUNDLE, ...args], env, `idem ${args.join(' ')}`);
}

/** The address of a `pkcs11:` key, opened in a child process with `env` (support/pkcs11-address.ts). */
export async function pkcs11Address(env: Record<string, string>, keyRef: string): Promise<string> {
  const script = fileURLToPath(new URL('./pkcs11-address.ts', import.meta.url));
  const run = await runNode(['--import', 'tsx', script, keyRef], env, 'pkcs11-address');
  if (run.code !== 0) throw new Error(`pkcs11-address exited ${run.code}: ${run.stderr}`);
  return run.stdout.trim();
}

/** Node on `args` in a child process with only PATH and `env`; resolves when it exits (120 s at most). */
function runNode(args: string[], env: Record<string, string>, name: string): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: serverRoot,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString('utf8');
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not exit within 120 s:\n${stdout}\n${stderr}`));
    }, 120_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
