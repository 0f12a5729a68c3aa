import type { IdemError, Network } from '@idem/contracts';
import { and, eq } from 'drizzle-orm';
import type { Database, Tx } from '../db/connect.ts';
import { assets, tenants } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';
import { validation } from './input-validation.ts';

/** What a withdrawal's payload takes from the stored state: the asset's network, the policy version. */
export interface WithdrawalContext {
  network: Network;
  policyVersion: number;
}

export async function readWithdrawalContext(
  tx: Tx,
  tenantId: string,
  asset: string,
): Promise<WithdrawalContext> {
  const [found] = await tx
    .select({ network: assets.network, policyVersion: tenants.policyVersion })
    .from(assets)
    .innerJoin(tenants, eq(tenants.tenantId, assets.tenantId))
    .where(and(eq(assets.tenantId, tenantId), eq(assets.code, asset)));
  if (!found) throw unknownAsset(asset);
  return { network: found.network as Network, policyVersion: found.policyVersion };
}

/** The stored context, read once for concurrent callers, and kept as the process's copy. */
export function freshContext(db: Database, tenantId: string, asset: string): Promise<WithdrawalContext> {
  return contextCache.read(tenantId, asset, () =>
    withTenant(db, tenantId, (tx) => readWithdrawalContext(tx, tenantId, asset)),
  );
}

export function unknownAsset(asset: string): IdemError {
  return validation('request.asset', `unknown asset ${asset}`);
}

/**
 * Asset networks and policy versions, per tenant and asset, for `submitWithdrawal`. Only a hint:
 * the database function checks every value it is given, so a stale or foreign entry costs one
 * more read and call, never a wrong payload. Bounded so a process serving many tenants stays small.
 */
export const contextCache = (() => {
  const LIMIT = 10_000;
  const entries = new Map<string, WithdrawalContext>();
  // One read per tenant and asset at a time: a burst of first submissions (or a bulk call) shares it.
  const reading = new Map<string, Promise<WithdrawalContext>>();
  const keyOf = (tenantId: string, asset: string) => `${tenantId}/${asset}`;
  const cache = {
    get: (tenantId: string, asset: string) => entries.get(keyOf(tenantId, asset)),
    set(tenantId: string, asset: string, context: WithdrawalContext) {
      if (entries.size >= LIMIT) entries.clear();
      entries.set(keyOf(tenantId, asset), context);
    },
    read(
      tenantId: string,
      asset: string,
      load: () => Promise<WithdrawalContext>,
    ): Promise<WithdrawalContext> {
      const key = keyOf(tenantId, asset);
      let pending = reading.get(key);
      if (!pending) {
        pending = load()
          .then((context) => {
            cache.set(tenantId, asset, context);
            return context;
          })
          .finally(() => reading.delete(key));
        reading.set(key, pending);
      }
      return pending;
    },
  };
  return cache;
})();
