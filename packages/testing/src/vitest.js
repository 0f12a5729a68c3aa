// Plain JavaScript (typed by vitest.d.ts beside it): vitest loads config files with Node, which
// cannot import a workspace package's TypeScript.
import { defineConfig } from 'vitest/config';

/** @param {import('./vitest.d.ts').IdemTestOptions} options */
export function defineIdemConfig(options) {
  const parallel = options.fileParallelism ?? false;
  return defineConfig({
    test: {
      include: ['test/**/*.test.ts'],
      testTimeout: options.testTimeout,
      hookTimeout: options.hookTimeout ?? options.testTimeout,
      ...(options.globalSetup ? { globalSetup: options.globalSetup } : {}),
      // Child processes (forks) rather than threads: tests start servers, chains and native addons.
      pool: 'forks',
      isolate: options.isolate ?? true,
      fileParallelism: parallel,
      ...(parallel ? { maxWorkers: options.maxWorkers ?? 2 } : {}),
    },
  });
}
