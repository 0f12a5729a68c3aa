import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

export interface Row {
  name: string;
  connections: number;
  ops: number;
  opsPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** ops/s divided by pgbench's TPC-B tps in the same run. */
  ratio: number;
  /** The minimum ratio this row must reach, when it has a target. */
  target: number | null;
  correct: boolean;
}

export function printTable(rows: Row[]): void {
  const header = ['phase', 'conns', 'ops', 'ops/s', 'p50 ms', 'p99 ms', 'x pgbench', 'target', 'correct'];
  const lines = rows.map((row) => [
    row.name,
    String(row.connections),
    String(row.ops),
    row.opsPerSec.toFixed(0),
    row.p50Ms.toFixed(2),
    row.p99Ms.toFixed(2),
    row.ratio.toFixed(2),
    row.target === null ? '-' : `>=${row.target} ${row.ratio >= row.target ? 'MET' : 'MISSED'}`,
    row.correct ? 'yes' : 'NO',
  ]);
  const widths = header.map((cell, i) =>
    Math.max(cell.length, ...lines.map((line) => (line[i] ?? '').length)),
  );
  const format = (cells: string[]) => cells.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ');
  console.log(format(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const line of lines) console.log(format(line));
}

/** One grep-able line, and the same object in bench-results/core.json. */
export async function publish(result: unknown, file: string): Promise<void> {
  const json = JSON.stringify(result);
  console.log(`BENCH_JSON ${json}`);
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, `${JSON.stringify(result, null, 2)}\n`);
}

export function round(value: number, digits = 2): number {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}
