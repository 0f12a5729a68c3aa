import type { ViteUserConfig } from 'vitest/config';

/** What differs between the packages' suites; everything else is the same everywhere. */
export interface IdemTestOptions {
  /** A test's limit in milliseconds. */
  testTimeout: number;
  /** A hook's limit (start-up of servers, chains, databases) in milliseconds; the test limit if unset. */
  hookTimeout?: number;
  /** Files run once before the suite (bundles to build). */
  globalSetup?: string[];
  /**
   * Whether test files run side by side, at most `maxWorkers` at once. Only where files share
   * nothing but the PostgreSQL server (each gets its own database) and take no fixed ports.
   */
  fileParallelism?: boolean;
  /** Files at once when `fileParallelism` is on: this machine and CI have two cores. */
  maxWorkers?: number;
  /**
   * Whether each file gets fresh modules (default). Off, the files a worker process runs share one
   * module graph: each file's seconds of imports are paid once, so only for suites whose modules
   * keep no state between files.
   */
  isolate?: boolean;
}

/** The vitest configuration every package's vitest.config.ts starts from. */
export function defineIdemConfig(options: IdemTestOptions): ViteUserConfig;
