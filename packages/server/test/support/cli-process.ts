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
export function idem(env: Record<string, string>, ...args: string[]): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI_BUNDLE, ...args], {
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
      reject(new Error(`idem ${args.join(' ')} did not exit within 120 s:\n${stdout}\n${stderr}`));
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

/** The address of a `pkcs11:` key, opened in a child process with `env` (support/pkcs11-address.ts). */
export function pkcs11Address(env: Record<string, string>, keyRef: string): Promise<string> {
  const script = fileURLToPath(new URL('./pkcs11-address.ts', import.meta.url));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, keyRef], {
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
    child.once('error', reject);
    child.once('close', (code) => {
      if (code === 0) resolve(stdout.trim());
      else reject(new Error(`pkcs11-address exited ${code}: ${stderr}`));
    });
  });
}
