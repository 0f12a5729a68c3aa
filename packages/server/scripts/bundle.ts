import { mkdir, readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

/**
 * Bundles the `idem` CLI (src/cli/main.ts) and the server (src/main.ts) into one ES module each.
 * Loading the sources through tsx's loader costs about 1.8 s per start (over a thousand modules,
 * each resolved across tsx's hook thread); a bundle starts in a fraction of that. `pnpm idem`,
 * `pnpm start` and the tests that start either as a process run these bundles, rebuilt whenever a
 * source is newer, so there is one artifact per entry and it is never stale.
 */

const serverRoot = fileURLToPath(new URL('../', import.meta.url));
const ENTRIES = {
  cli: { source: join(serverRoot, 'src', 'cli', 'main.ts'), bundle: join(serverRoot, 'dist', 'idem.mjs') },
  server: { source: join(serverRoot, 'src', 'main.ts'), bundle: join(serverRoot, 'dist', 'server.mjs') },
} as const;
type Entry = keyof typeof ENTRIES;
export const CLI_BUNDLE = ENTRIES.cli.bundle;
export const SERVER_BUNDLE = ENTRIES.server.bundle;

/**
 * Packages that find files beside their own code at run time (PGlite's WebAssembly, native
 * addons, pino's worker): imported from where pnpm installed them, by absolute path.
 */
const IN_PLACE = [/^@electric-sql\/pglite/, /^pkcs11js$/, /^@node-rs\/argon2/, /^pino$/, /^pg-native$/];

const inPlace: Plugin = {
  name: 'in-place',
  setup(builder) {
    builder.onResolve({ filter: /^[@a-z]/ }, async (args) => {
      if (args.pluginData === 'in-place' || !IN_PLACE.some((pattern) => pattern.test(args.path))) return;
      const resolved = await builder.resolve(args.path, {
        kind: args.kind,
        resolveDir: args.resolveDir,
        importer: args.importer,
        pluginData: 'in-place',
      });
      if (resolved.errors.length > 0) return { errors: resolved.errors };
      return { path: resolved.path, external: true };
    });
  },
};

/** Our sources keep their own `import.meta.url`, so paths relative to a source file still hold. */
const ownLocation: Plugin = {
  name: 'own-location',
  setup(builder) {
    builder.onLoad({ filter: /\/packages\/[^/]+\/src\/.*\.ts$/ }, async (args) => {
      const source = await readFile(args.path, 'utf8');
      return {
        contents: source.replaceAll('import.meta.url', JSON.stringify(pathToFileURL(args.path).href)),
        loader: 'ts',
        resolveDir: dirname(args.path),
      };
    });
  },
};

export async function bundle(entry: Entry): Promise<string> {
  const { source, bundle: outfile } = ENTRIES[entry];
  const result = await build({
    entryPoints: [source],
    outfile,
    // Written below by rename, whole: the server's and the chaos tests both build this file while
    // run side by side, and a process started from a half-written bundle fails.
    write: false,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    logLevel: 'warning',
    // Bundled CommonJS packages call require() for Node's own modules.
    banner: {
      js: "import { createRequire as __idemRequire } from 'node:module'; const require = __idemRequire(import.meta.url);",
    },
    plugins: [inPlace, ownLocation],
  });
  const [output] = result.outputFiles;
  if (!output) throw new Error(`esbuild wrote nothing for ${entry}`);
  const partial = `${outfile}.${process.pid}.partial`;
  await mkdir(dirname(outfile), { recursive: true });
  await writeFile(partial, output.contents);
  await rename(partial, outfile);
  return outfile;
}

/** Whether the bundle is older than any workspace source, package manifest or the lockfile. */
async function stale(outfile: string): Promise<boolean> {
  const built = await stat(outfile).then(
    (s) => s.mtimeMs,
    () => null,
  );
  if (built === null) return true;
  const repository = join(serverRoot, '..', '..');
  const inputs = [join(repository, 'pnpm-lock.yaml')];
  for (const pkg of await readdir(join(repository, 'packages'))) {
    inputs.push(join(repository, 'packages', pkg, 'package.json'));
    const src = join(repository, 'packages', pkg, 'src');
    const files = await readdir(src, { recursive: true }).catch(() => [] as string[]);
    inputs.push(...files.map((file) => join(src, file)));
  }
  for (const input of inputs) {
    const changed = await stat(input).then(
      (s) => s.mtimeMs,
      () => 0,
    );
    if (changed > built) return true;
  }
  return false;
}

// `pnpm idem` and `pnpm start` run `bundle.ts <cli|server> --if-stale` first: a rebuild only after
// a source changed.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const entry = process.argv[2];
  if (entry !== 'cli' && entry !== 'server') throw new Error('usage: bundle.ts <cli|server> [--if-stale]');
  if (!process.argv.includes('--if-stale') || (await stale(ENTRIES[entry].bundle))) await bundle(entry);
}
