/**
 * Every control id a test name carries is listed in docs/CONTROLS.md, so `grep -rn C09 packages`
 * always leads from a control to its evidence and an id cannot be made up in a test name.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = new URL('../../../', import.meta.url).pathname;
const self = new URL(import.meta.url).pathname;

/** A control id: C01, I17, a suffixed form such as I14-LIST, I11-F4 or I13-REC-7. */
const ID = /\b[CI]\d{1,2}[a-z]?(?:-(?![CI]\d)[A-Z][A-Z0-9]*)*(?:-\d+)?\b/g;

/** The ids docs/CONTROLS.md lists: the first cell of each table row, in backticks or not. */
function listedIds(markdown: string): Set<string> {
  const ids = new Set<string>();
  for (const line of markdown.split('\n')) {
    const cell = /^\|\s*`?([CI]\d[^`|\s]*)`?\s*\|/.exec(line);
    if (cell?.[1]) ids.add(cell[1]);
  }
  return ids;
}

function testFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory() && entry.name !== 'node_modules') walk(path);
      else if (/\.test\.tsx?$/.test(entry.name)) files.push(path);
    }
  };
  for (const pkg of readdirSync(join(root, 'packages'), { withFileTypes: true })) {
    if (!pkg.isDirectory()) continue;
    const dir = join(root, 'packages', pkg.name, 'test');
    if (existsSync(dir)) walk(dir);
  }
  return files;
}

/** Skips a quoted string or template literal starting at `i`; returns its text and the index after it. */
function readString(source: string, i: number): { text: string; end: number } {
  const quote = source[i];
  let text = '';
  let j = i + 1;
  while (j < source.length && source[j] !== quote) {
    if (source[j] === '\\') {
      text += source[j + 1];
      j += 2;
    } else if (quote === '`' && source.startsWith('${', j)) {
      j = skipBalanced(source, j + 1, '{', '}');
      text += ' ';
    } else {
      text += source[j];
      j += 1;
    }
  }
  return { text, end: j + 1 };
}

/** Skips from the opening bracket at `i` to after its match, stepping over strings. */
function skipBalanced(source: string, i: number, open: string, close: string): number {
  let depth = 0;
  let j = i;
  while (j < source.length) {
    const c = source[j] as string;
    if (c === "'" || c === '"' || c === '`') {
      j = readString(source, j).end;
      continue;
    }
    if (c === open) depth += 1;
    if (c === close) {
      depth -= 1;
      if (depth === 0) return j + 1;
    }
    j += 1;
  }
  return j;
}

/** The first-argument titles of describe / it / test calls, modifiers such as .each(...) or .skipIf(...) included. */
function testTitles(source: string): string[] {
  const titles: string[] = [];
  const call = /(?<![\w.$])(?:describe|it|test)\b/g;
  for (let match = call.exec(source); match; match = call.exec(source)) {
    let j = match.index + match[0].length;
    for (;;) {
      while (/\s/.test(source[j] ?? '')) j += 1;
      const modifier = /^\.(\w+)/.exec(source.slice(j, j + 40));
      if (modifier?.[1]) {
        j += modifier[0].length;
        while (/\s/.test(source[j] ?? '')) j += 1;
        if (['each', 'skipIf', 'runIf', 'for'].includes(modifier[1]) && source[j] === '(') {
          j = skipBalanced(source, j, '(', ')');
        } else if (modifier[1] === 'each' && source[j] === '`') {
          j = readString(source, j).end;
        }
        continue;
      }
      break;
    }
    if (source[j] !== '(') continue;
    j += 1;
    while (/\s/.test(source[j] ?? '')) j += 1;
    const quote = source[j];
    if (quote === "'" || quote === '"' || quote === '`') titles.push(readString(source, j).text);
  }
  return titles;
}

describe('control ids in test names', () => {
  const listed = listedIds(readFileSync(join(root, 'docs/CONTROLS.md'), 'utf8'));

  it('docs/CONTROLS.md lists the go/no-go controls C01 to C25', () => {
    for (let n = 1; n <= 25; n += 1) expect(listed).toContain(`C${String(n).padStart(2, '0')}`);
  });

  it('every id a describe, it or test title uses is listed in docs/CONTROLS.md', () => {
    const unlisted: string[] = [];
    let titles = 0;
    for (const file of testFiles().filter((path) => path !== self)) {
      for (const title of testTitles(readFileSync(file, 'utf8'))) {
        titles += 1;
        for (const id of title.match(ID) ?? []) {
          if (!listed.has(id)) unlisted.push(`${file.slice(root.length)}: ${id} in "${title}"`);
        }
      }
    }
    expect(titles).toBeGreaterThan(500);
    expect(unlisted).toEqual([]);
  });

  it('reads titles through modifiers and template literals', () => {
    const source = [
      "describe.skipIf(!f(a, ')'))('I18 one', () => {",
      "  it.each([['x', 1]])('C09 two %s', () => {});",
      `  test(\`C01 three \${name}\`, () => {});`,
      '  other("C99 not a test");',
      '});',
    ].join('\n');
    expect(testTitles(source)).toEqual(['I18 one', 'C09 two %s', 'C01 three  ']);
    expect('I14-LIST and I13-REC-7, I11-F10, C01-C06'.match(ID)).toEqual([
      'I14-LIST',
      'I13-REC-7',
      'I11-F10',
      'C01',
      'C06',
    ]);
  });
});
