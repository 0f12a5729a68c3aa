import { defineConfig, type Options } from 'tsup';

type EsbuildPlugin = NonNullable<Options['esbuildPlugins']>[number];

/**
 * Lets esbuild drop bitcoin-address-validation (and bech32 behind it) when nothing calls it: the
 * package has top-level statements and no `sideEffects` field, so without this they stay in the
 * bundle as dead code run at load. viem declares `"sideEffects": false` itself.
 */
const addressValidationWithoutSideEffects: EsbuildPlugin = {
  name: 'address-validation-without-side-effects',
  setup(build) {
    build.onResolve({ filter: /^bitcoin-address-validation$/ }, async (args) => {
      if (args.pluginData === 'resolving') return undefined;
      const resolved = await build.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: 'resolving',
      });
      if (resolved.errors.length > 0) return { errors: resolved.errors };
      return { path: resolved.path, namespace: resolved.namespace, sideEffects: false };
    });
  },
};

/**
 * The published build: ESM and CJS with type declarations. @idem/contracts is private and never
 * published, so it is bundled in and is only a devDependency (tsup keeps every `dependencies` entry
 * external, in the declarations too); tRPC, zod, undici and standardwebhooks stay dependencies.
 *
 * Declarations: the paths entry makes rollup-plugin-dts resolve @idem/contracts to its source
 * rather than treat it as an external package (through the node_modules link it would), so the
 * contract types are inlined and the .d.ts/.d.cts import nothing from @idem/*.
 *
 * JS: the SDK uses only contracts' zod schemas and error codes, never `isValidDestination`, so
 * viem and bitcoin-address-validation are not in the bundle. That needs `splitting: false`: with
 * ESM code splitting esbuild still emitted viem's dynamically imported modules (ccip, secp256k1,
 * ws) as chunks and index.js imported two viem/noble chunks at load. test/package.test.ts checks
 * both.
 */
export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: { compilerOptions: { paths: { '@idem/contracts': ['../contracts/src/index.ts'] } } },
  // Bundled if anything ever reaches them, so the output never imports a package integrators lack.
  noExternal: ['@idem/contracts', 'viem', 'bitcoin-address-validation'],
  esbuildPlugins: [addressValidationWithoutSideEffects],
  splitting: false,
  treeshake: true,
  clean: true,
  sourcemap: true,
  target: 'node20',
});
