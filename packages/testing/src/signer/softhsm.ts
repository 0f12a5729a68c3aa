/**
 * A SoftHSM2 token for tests, initialised in a temporary directory with its own configuration
 * (SOFTHSM2_CONF), so no test depends on the machine's tokens. SoftHSM reads SOFTHSM2_CONF when
 * the module is initialised: the harness sets it in this process before any PKCS#11 call, and
 * `env` carries it to child processes (a worker the test starts and kills).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { Address } from 'viem';

export interface SoftHsmToken {
  readonly modulePath: string;
  readonly tokenLabel: string;
  /** The user PIN, and the name of the variable that holds it (a secret reference: `env:NAME`). */
  readonly pin: string;
  readonly pinVariable: string;
  /** Variables a child process needs to reach the same token. */
  readonly env: Record<string, string>;
  dispose(): void;
}

const modulePaths = ['/usr/lib/softhsm/libsofthsm2.so', '/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so'];

export function softHsmModulePath(): string | null {
  return modulePaths.find((path) => existsSync(path)) ?? null;
}

/** Initialises a fresh token; one configuration directory per process (SoftHSM reads it once). */
export function initSoftHsmToken(label = 'idem-test'): SoftHsmToken {
  const modulePath = softHsmModulePath();
  if (!modulePath) throw new Error('SoftHSM2 is not installed (apt-get install softhsm2)');
  const dir = mkdtempSync(join(tmpdir(), 'idem-softhsm-'));
  const tokens = join(dir, 'tokens');
  mkdirSync(tokens);
  const conf = join(dir, 'softhsm2.conf');
  writeFileSync(conf, `directories.tokendir = ${tokens}\nobjectstore.backend = file\nlog.level = ERROR\n`);
  process.env.SOFTHSM2_CONF = conf;
  const pin = '246810';
  execFileSync(
    'softhsm2-util',
    ['--init-token', '--free', '--label', label, '--so-pin', '13579', '--pin', pin],
    {
      env: { ...process.env, SOFTHSM2_CONF: conf },
      stdio: 'ignore',
    },
  );
  const pinVariable = 'IDEM_TEST_HSM_PIN';
  process.env[pinVariable] = pin;
  return {
    modulePath,
    tokenLabel: label,
    pin,
    pinVariable,
    env: { SOFTHSM2_CONF: conf, [pinVariable]: pin },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * Generates a hot-wallet key in the token, its PIN read through the token's variable. In a child
 * process (create-key.ts): this process may already have initialised PKCS#11 with another file's
 * token, and SoftHSM reads its configuration once per process.
 */
export async function tokenKey(
  token: SoftHsmToken,
  label: string,
): Promise<{ keyRef: string; address: Address }> {
  const script = fileURLToPath(new URL('./create-key.ts', import.meta.url));
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', script, token.modulePath, token.tokenLabel, token.pinVariable, label],
    { cwd: dirname(script), env: { PATH: process.env.PATH ?? '', ...token.env } },
  );
  return JSON.parse(stdout) as { keyRef: string; address: Address };
}
