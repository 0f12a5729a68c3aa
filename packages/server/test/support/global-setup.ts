import { bundle } from '../../scripts/bundle.ts';

/** The tests start the CLI and the server as `pnpm idem` and `pnpm start` do: from their bundles. */
export async function setup(): Promise<void> {
  await Promise.all([bundle('cli'), bundle('server')]);
}
