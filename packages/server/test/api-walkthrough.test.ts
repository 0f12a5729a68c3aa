import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { onPostgres } from '@idem/testing/database';
import { describe, expect, it } from 'vitest';
import { serveForTests } from './support/served.ts';

const run = promisify(execFile);
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const apiDoc = readFileSync(new URL('docs/API.md', `file://${repoRoot}`), 'utf8');

/** The walkthrough's command blocks, each with the output block that follows it. */
function walkthrough(): { commands: string; expected: string[] }[] {
  const start = apiDoc.indexOf('<!-- walkthrough:start -->');
  const end = apiDoc.indexOf('<!-- walkthrough:end -->');
  if (start < 0 || end < start) throw new Error('docs/API.md has no walkthrough markers');
  const blocks = [...apiDoc.slice(start, end).matchAll(/```(sh|text)\n([\s\S]*?)```/g)];
  const steps: { commands: string; expected: string[] }[] = [];
  for (let index = 0; index < blocks.length; index += 2) {
    const [command, output] = [blocks[index], blocks[index + 1]];
    if (command?.[1] !== 'sh' || output?.[1] !== 'text')
      throw new Error('each sh block needs a text block after it');
    steps.push({ commands: command[2] ?? '', expected: (output[2] ?? '').trimEnd().split('\n') });
  }
  return steps;
}

/** `…` stands for anything; every expected line must match an output line, in order. */
function matchesInOrder(actual: string[], expected: string[]): string | null {
  let at = 0;
  for (const line of expected) {
    const pattern = new RegExp(
      `^${line
        .split('…')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    );
    while (at < actual.length && !pattern.test(actual[at] ?? '')) at += 1;
    if (at === actual.length) return line;
    at += 1;
  }
  return null;
}

describe.skipIf(!onPostgres)('I15 the curl walkthrough in docs/API.md runs as written (PostgreSQL)', () => {
  const served = serveForTests({ kind: 'postgres', provision: async () => null });

  it('I15 every command block gives the output the document shows', async () => {
    if (served.backend.kind !== 'postgres') throw new Error('the walkthrough runs on PostgreSQL');
    const steps = walkthrough();
    expect(steps.length).toBeGreaterThanOrEqual(5);
    // One shell, so variables set by a block are there for the next; a marker between blocks.
    const script = [
      'set -e',
      ...steps.map((step, index) => `${step.commands}\nprintf '\\n@@step ${index}\\n'`),
    ].join('\n');
    const { stdout } = await run('bash', ['-c', script], {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/root',
        IDEM: served.server.baseUrl,
        DATABASE_URL: served.backend.env.DATABASE_URL ?? '',
        IDEM_ALLOW_DIRECT_CREDIT: '1',
        NODE_ENV: 'development',
      },
      timeout: 120_000,
    });
    const outputs = stdout.split(/^@@step \d+\n?/m);
    for (const [index, step] of steps.entries()) {
      const actual = (outputs[index] ?? '').replaceAll('\r', '').split('\n');
      expect(matchesInOrder(actual, step.expected), `step ${index} output:\n${outputs[index]}`).toBeNull();
    }
  }, 180_000);
});
