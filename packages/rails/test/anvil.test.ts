/**
 * The anvil launcher: free ports, chain id, mining modes, and no orphaned node when the process
 * that started it exits or is terminated.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { rpc } from '@idem/testing/chain';
import { describe, expect, it } from 'vitest';
import { startAnvil } from '../src/evm/anvil.ts';

/** Alive means running: a zombie (exited, not yet reaped) counts as gone. */
function isRunning(pid: number): boolean {
  const statPath = `/proc/${pid}/stat`;
  if (!existsSync(statPath)) return false;
  const state = readFileSync(statPath, 'utf8').split(') ')[1]?.[0];
  return state !== undefined && state !== 'Z';
}

describe('anvil launcher', () => {
  it('starts two nodes on distinct free ports with the requested chain id, and stop() ends the process', async () => {
    const [a, b] = await Promise.all([startAnvil({ chainId: 1337 }), startAnvil({ chainId: 31338 })]);
    try {
      expect(a.port).not.toBe(b.port);
      expect(Number(await rpc<string>(a.rpcUrl, 'eth_chainId'))).toBe(1337);
      expect(Number(await rpc<string>(b.rpcUrl, 'eth_chainId'))).toBe(31338);
      expect(isRunning(a.pid)).toBe(true);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    expect(isRunning(a.pid)).toBe(false);
    expect(isRunning(b.pid)).toBe(false);
    await a.stop(); // idempotent
  });

  it('manual mining holds blocks until asked; interval mining produces them on its own', async () => {
    const manual = await startAnvil({ mining: 'manual' });
    const interval = await startAnvil({ mining: { intervalSeconds: 1 } });
    try {
      // The interval chain mines its first block on its own (after about a second); by then the
      // manual chain, started first, has had as long and still shows none.
      await expect
        .poll(async () => Number(await rpc<string>(interval.rpcUrl, 'eth_blockNumber')), {
          timeout: 10_000,
          interval: 100,
        })
        .toBeGreaterThanOrEqual(1);
      expect(Number(await rpc<string>(manual.rpcUrl, 'eth_blockNumber'))).toBe(0);
    } finally {
      await Promise.all([manual.stop(), interval.stop()]);
    }
  });

  for (const mode of ['exit', 'sigterm'] as const) {
    it(`kills its node when the parent process ${mode === 'exit' ? 'exits' : 'receives SIGTERM'}`, async () => {
      const tsxCli = createRequire(import.meta.url).resolve('tsx/cli');
      const fixture = fileURLToPath(new URL('./fixtures/anvil-parent.ts', import.meta.url));
      const parent = spawn(process.execPath, [tsxCli, fixture, mode === 'exit' ? 'exit' : 'wait'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const line = await new Promise<string>((resolve, reject) => {
        let output = '';
        parent.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString('utf8');
          if (output.includes('\n')) resolve(output.split('\n')[0] ?? '');
        });
        parent.once('exit', () => reject(new Error(`parent exited before reporting: ${output}`)));
      });
      const { anvilPid, rpcUrl } = JSON.parse(line) as { anvilPid: number; rpcUrl: string };
      if (mode === 'sigterm') {
        expect(Number(await rpc<string>(rpcUrl, 'eth_chainId'))).toBe(31337);
        parent.kill('SIGTERM');
      }
      await expect.poll(() => isRunning(anvilPid), { timeout: 5_000, interval: 50 }).toBe(false);
    });
  }
});
