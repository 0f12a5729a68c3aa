/**
 * `pnpm chaos --seed N --duration 60s [--workers 3] [--servers 2] [--clients 8] [--signer local|pkcs11|service] [--html]`
 * `pnpm chaos --failover kill|switchover|both [--seed N ...]`: the failover drill on a local
 * pg_auto_failover formation instead of the seeded faults (one run per scenario).
 * Exits 0 when every invariant holds, 1 when one is violated (the seed and the first violation are
 * printed), 2 on a usage error.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startFormation } from '@idem/testing/formation';
import { z } from 'zod';
import { formatHtml, formatJsonLine, formatText } from './report.ts';
import { type ChaosOptions, type ChaosReport, runChaos } from './run.ts';

const durationSchema = z
  .string()
  .regex(/^\d+(ms|s|m)?$/, { error: 'a duration such as 60s, 2m or 45000ms' })
  .transform((text) => {
    const n = Number.parseInt(text, 10);
    if (text.endsWith('ms')) return n;
    if (text.endsWith('m')) return n * 60_000;
    return n * 1_000;
  });

const argsSchema = z.object({
  seed: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  duration: durationSchema.default(60_000),
  quiet: durationSchema.optional(),
  workers: z.coerce.number().int().min(1).max(8).default(3),
  servers: z.coerce.number().int().min(1).max(4).default(2),
  clients: z.coerce.number().int().min(1).max(32).default(8),
  signer: z.enum(['local', 'pkcs11', 'service']).default('local'),
  html: z.boolean().default(false),
  out: z.string().optional(),
  failover: z.enum(['kill', 'switchover', 'both']).optional(),
});

const { values } = parseArgs({
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    seed: { type: 'string' },
    duration: { type: 'string' },
    quiet: { type: 'string' },
    workers: { type: 'string' },
    servers: { type: 'string' },
    clients: { type: 'string' },
    signer: { type: 'string' },
    html: { type: 'boolean' },
    out: { type: 'string' },
    failover: { type: 'string' },
  },
});
const parsed = argsSchema.safeParse({
  ...values,
  seed: values.seed ?? String(Math.floor(Math.random() * 1_000_000)),
});
if (!parsed.success) {
  process.stderr.write(
    `usage: pnpm chaos --seed N [--duration 60s] [--workers 3] [--servers 2] [--clients 8] [--signer local|pkcs11|service] [--quiet 90s] [--html] [--out DIR] [--failover kill|switchover|both]\n${parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}\n`,
  );
  process.exit(2);
}
const args = parsed.data;
// A chaos run needs a real PostgreSQL server: several processes share it.
const databaseUrl =
  process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

const runOne = async (failover?: ChaosOptions['failover'], url = databaseUrl): Promise<ChaosReport> => {
  const report = await runChaos({
    seed: args.seed,
    durationMs: args.duration,
    servers: args.servers,
    workers: args.workers,
    clients: args.clients,
    signer: args.signer,
    databaseUrl: url,
    ...(args.quiet !== undefined ? { quietMsMax: args.quiet } : {}),
    ...(args.out ? { outDir: args.out } : {}),
    ...(failover ? { failover } : {}),
    progress: (line) => process.stderr.write(`chaos: ${line}\n`),
  });
  const text = formatText(report);
  process.stdout.write(`${text}\n${formatJsonLine(report)}\n`);
  writeFileSync(join(report.outDir, 'report.txt'), `${text}\n`);
  writeFileSync(join(report.outDir, 'report.json'), `${JSON.stringify(report, null, 2)}\n`);
  if (args.html) {
    const path = join(report.outDir, 'report.html');
    writeFileSync(path, formatHtml(report));
    process.stdout.write(`html report: ${path}\n`);
  }
  return report;
};

if (args.failover) {
  process.stderr.write(
    `chaos: failover drill (${args.failover}), seed ${args.seed}, starting a pg_auto_failover formation\n`,
  );
  const formation = await startFormation({
    log: (line) => process.stderr.write(`chaos: formation ${line}\n`),
  });
  let ok = true;
  try {
    const scenarios = args.failover === 'both' ? (['kill', 'switchover'] as const) : [args.failover];
    for (const scenario of scenarios) {
      const report = await runOne({ scenario, formation }, await formation.url('postgres', 'standby-first'));
      ok &&= report.ok;
    }
  } finally {
    await formation.stop();
  }
  process.exit(ok ? 0 : 1);
}

process.stderr.write(`chaos: seed ${args.seed}, ${args.duration / 1000}s of faults\n`);
const report = await runOne();
process.exit(report.ok ? 0 : 1);
