/**
 * `pnpm chaos --seed N --duration 60s [--workers 3] [--servers 2] [--clients 8] [--signer local|pkcs11] [--html]`
 * Exits 0 when every invariant holds, 1 when one is violated (the seed and the first violation are
 * printed), 2 on a usage error.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { formatHtml, formatJsonLine, formatText } from './report.ts';
import { runChaos } from './run.ts';

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
  signer: z.enum(['local', 'pkcs11']).default('local'),
  html: z.boolean().default(false),
  out: z.string().optional(),
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
  },
});
const parsed = argsSchema.safeParse({
  ...values,
  seed: values.seed ?? String(Math.floor(Math.random() * 1_000_000)),
});
if (!parsed.success) {
  process.stderr.write(
    `usage: pnpm chaos --seed N [--duration 60s] [--workers 3] [--servers 2] [--clients 8] [--signer local|pkcs11] [--quiet 90s] [--html] [--out DIR]\n${parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}\n`,
  );
  process.exit(2);
}
const args = parsed.data;
// A chaos run needs a real PostgreSQL server: several processes share it.
const databaseUrl =
  process.env.TEST_DATABASE_URL || process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

process.stderr.write(`chaos: seed ${args.seed}, ${args.duration / 1000}s of faults\n`);
const report = await runChaos({
  seed: args.seed,
  durationMs: args.duration,
  servers: args.servers,
  workers: args.workers,
  clients: args.clients,
  signer: args.signer,
  databaseUrl,
  ...(args.quiet !== undefined ? { quietMsMax: args.quiet } : {}),
  ...(args.out ? { outDir: args.out } : {}),
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
process.exit(report.ok ? 0 : 1);
