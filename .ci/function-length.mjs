#!/usr/bin/env node
// Fails when a function's body runs past FUNCTION_LINES_MAX lines (a function that grows past a
// screen or two is several functions). Scans the shipped code and the scripts a reader runs:
// packages/*/{src,bench,scripts}/**/*.{ts,tsx}, packages/testing/src (the tests' shared support)
// included. Tests are left out: a `describe` block is a list of cases, not a function to split.
//
// What counts: every function, method, accessor, constructor and arrow function, each measured on
// its own. A function's length is the lines of its body, from the line of its opening brace (or of
// an arrow's expression) to the line where it ends, functions nested in it included: a factory
// whose closures share its state, or a React component with its handlers inline, is read as one
// piece, so it is measured as one. (`--own` measures each without its nested bodies instead.)
//
// Usage: node .ci/function-length.mjs [--max N] [--all] [--own]   (--all: print those over N/2)

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const FUNCTION_LINES_MAX = 150;
const root = fileURLToPath(new URL('..', import.meta.url));
const scanned = ['src', 'bench', 'scripts'];

const args = process.argv.slice(2);
const maxIndex = args.indexOf('--max');
const max = maxIndex >= 0 ? Number(args[maxIndex + 1]) : FUNCTION_LINES_MAX;
const ownLinesOnly = args.includes('--own');

function sourceFiles(dir) {
  const found = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name === 'generated') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) found.push(...sourceFiles(path));
    else if (/\.tsx?$/.test(name) && !name.endsWith('.d.ts')) found.push(path);
  }
  return found;
}

function files() {
  const packages = join(root, 'packages');
  const found = [];
  for (const pkg of readdirSync(packages)) {
    for (const folder of scanned) {
      const dir = join(packages, pkg, folder);
      try {
        if (statSync(dir).isDirectory()) found.push(...sourceFiles(dir));
      } catch {
        // This package has no such folder.
      }
    }
  }
  return found.sort();
}

function nameOf(node) {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  if (node.name) return node.name.getText();
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) return parent.name.getText();
  if (ts.isCallExpression(parent)) {
    const callee = parent.expression.getText();
    return `(callback of ${callee.length > 40 ? `${callee.slice(0, 40)}…` : callee})`;
  }
  return '(anonymous)';
}

const lineOf = (file, position) => file.getLineAndCharacterOfPosition(position).line;
const spanOf = (file, body) => lineOf(file, body.getEnd()) - lineOf(file, body.getStart(file)) + 1;

function measure(path) {
  const text = readFileSync(path, 'utf8');
  const kind = path.endsWith('.tsx') ? ts.ScriptKind.TSX : ts.ScriptKind.TS;
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true, kind);
  const functions = [];
  // Returns the lines of the function bodies found under `node`, outermost only, after recording
  // each function's own length.
  function visit(node) {
    if (ts.isFunctionLike(node) && node.body) {
      const span = spanOf(file, node.body);
      const nested = childBodies(node.body);
      functions.push({
        path,
        name: nameOf(node),
        line: lineOf(file, node.getStart(file)) + 1,
        lines: ownLinesOnly ? span - nested : span,
      });
      return span;
    }
    return childBodies(node);
  }
  function childBodies(node) {
    let lines = 0;
    ts.forEachChild(node, (child) => {
      lines += visit(child);
    });
    return lines;
  }
  childBodies(file);
  return functions;
}

const measured = files().flatMap(measure);
const threshold = args.includes('--all') ? max / 2 : max;
const long = measured.filter((f) => f.lines > threshold).sort((a, b) => b.lines - a.lines);
for (const f of long) {
  console.log(`${relative(root, f.path)}:${f.line}  ${f.name}  ${f.lines} lines`);
}
const over = long.filter((f) => f.lines > max);
if (over.length > 0) {
  console.error(
    `\n${over.length} function(s) over ${max} lines${ownLinesOnly ? ' (nested bodies not counted)' : ''}. ` +
      'Split each by job into named functions or files.',
  );
  process.exit(1);
}
console.log(`function-length: ${measured.length} functions, none over ${max} lines.`);
