// Sums the closing "Tests" lines of every vitest run in a log and prints the plain summary line
// CI readers look for: "N passed, N failed" (", N skipped" when any were skipped).
import { readFileSync } from 'node:fs';

// Colour codes start with the escape character; strip them before reading the counts.
const escapeCharacter = String.fromCharCode(27);
const log = readFileSync(process.argv[2] ?? '/dev/stdin', 'utf8').replace(
  new RegExp(`${escapeCharacter}\\[[0-9;]*m`, 'g'),
  '',
);
let passed = 0;
let failed = 0;
let skipped = 0;
for (const line of log.split('\n')) {
  const match = /\bTests\s+(.*)\(\d+\)\s*$/.exec(line);
  if (!match) continue;
  for (const [, count, kind] of match[1].matchAll(/(\d+) (passed|failed|skipped)/g)) {
    if (kind === 'passed') passed += Number(count);
    else if (kind === 'failed') failed += Number(count);
    else skipped += Number(count);
  }
}
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
