import { defineConfig } from 'tsup';

/**
 * The published build: ESM and CJS with type declarations. The shared contracts are bundled in,
 * so integrators install one package; tRPC and zod stay dependencies.
 * Known gap: the declarations still import types from @idem/contracts (see README).
 */
export default defineConfig({
  entry: ['src/index.ts'],
  format: ['esm', 'cjs'],
  dts: { resolve: ['@idem/contracts'] },
  // Contracts' address checks (viem, bitcoin-address-validation) are bundled and tree-shaken away:
  // the SDK uses only the schemas.
  noExternal: ['@idem/contracts', 'viem', 'bitcoin-address-validation'],
  treeshake: true,
  clean: true,
  sourcemap: true,
  target: 'node20',
});
