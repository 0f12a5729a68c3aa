/**
 * Starts worker-until-killed.ts as its own process, waits until it reports being stopped at
 * `step`, then kills it with SIGKILL: whatever it held only in memory is gone, as in a real crash.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { SendStep } from '../../src/context.ts';

const script = fileURLToPath(new URL('./worker-until-killed.ts', import.meta.url));

export async function killWorkerAt(input: {
  databaseUrl: string;
  rpcUrl: string;
  chainId: number;
  step: SendStep;
  leaseMs: number;
  /** Extra JSON for the worker (fees, replace policies), as worker-until-killed.ts reads it. */
  extra?: Record<string, unknown>;
  /** Variables the process needs beyond this one's (an HSM's configuration and PIN). */
  env?: Record<string, string>;
}): Promise<void> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      script,
      input.databaseUrl,
      input.rpcUrl,
      String(input.chainId),
      input.step,
      String(input.leaseMs),
      JSON.stringify(input.extra ?? {}),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...input.env } },
  );
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr += String(chunk);
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`worker never reached ${input.step}: ${stderr}`)),
      60_000,
    );
    child.stdout.on('data', (chunk) => {
      if (String(chunk).includes(`STOPPED ${input.step}`)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('exit', () => reject(new Error(`worker exited before ${input.step}: ${stderr}`)));
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}
