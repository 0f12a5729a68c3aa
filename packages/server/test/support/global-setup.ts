import { bundleCli } from '../../scripts/bundle-cli.ts';

/** The CLI tests run the bundle `pnpm idem` runs, built from the sources under test. */
export async function setup(): Promise<void> {
  await bundleCli();
}
