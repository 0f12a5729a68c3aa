// Sums the closing "Tests" lines of every vitest run in a log and prints the plain summary line
// CI readers look for: "N passed, N failed" (", N skipped" when any were skipped). When a test
// failed, vitest's "Failed Tests" section of each package is printed again just above that line:
// CI keeps only the log's tail, and turbo may print another package's output after the failure.
import { readFileSync } from 'node:fs';

// Colour codes start with the escape character; strip them before reading the counts.
const escapeCharacter = String.fromCharCode(27);
const log = readFileSync(process.argv[2] ?? '/dev/stdin', 'utf8').replace(
  new RegExp(`${escapeCharacter}\\[[0-9;]*m`, 'g'),
  '',
);
const lines = log.split('\n');
let passed = 0;
let failed = 0;
let skipped = 0;
for (const line of lines) {
  const match = /\bTests\s+(.*)\(\d+\)\s*$/.exec(line);
  if (!match) continue;
  for (const [, count, kind] of match[1].matchAll(/(\d+) (passed|failed|skipped)/g)) {
    if (kind === 'passed') passed += Number(count);
    else if (kind === 'failed') failed += Number(count);
    else skipped += Number(count);
  }
}

// Each failing package's section runs from vitest's "Failed Tests" (or "Unhandled Errors") banner
// to its "Test Files" totals line; a few dozen lines each is enough to name the test and the cause.
const MAX_LINES_PER_SECTION = 60;
const failures = [];
for (let index = 0; index < lines.length; index++) {
  if (!/⎯+ (Failed Tests|Unhandled Errors?|Failed Suites) \d+ ⎯+/.test(lines[index])) continue;
  const section = [];
  while (index < lines.length && !/\bTest Files\s/.test(lines[index])) section.push(lines[index++]);
  failures.push(section.slice(0, MAX_LINES_PER_SECTION).join('\n'));
}
if (failures.length > 0) console.log(`\nwhat failed, again:\n${failures.join('\n')}\n`);
console.log(`${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}`);
