import { type ExplorerSetting, explorerTxUrl, type Network, networkSchema } from '@idem/contracts';
import { and, eq } from 'drizzle-orm';
import type { Executor, Tx } from '../db/connect.ts';
import { tenantNetworkExplorers } from '../db/schema/index.ts';

/** Every network with the tenant's explorer template, null where none is set (I14-LIVE). */
export async function listExplorers(db: Executor, tenantId: string): Promise<ExplorerSetting[]> {
  const rows = await db
    .select()
    .from(tenantNetworkExplorers)
    .where(eq(tenantNetworkExplorers.tenantId, tenantId));
  return networkSchema.options.map((network) => ({
    network,
    txUrlTemplate: rows.find((row) => row.network === network)?.txUrlTemplate ?? null,
  }));
}

/** Sets (or, with null, removes) one network's template; the caller validated it (contracts). */
export async function setExplorer(
  tx: Tx,
  input: { tenantId: string; network: Network; txUrlTemplate: string | null; actor: string },
): Promise<ExplorerSetting> {
  if (input.txUrlTemplate === null) {
    await tx
      .delete(tenantNetworkExplorers)
      .where(
        and(
          eq(tenantNetworkExplorers.tenantId, input.tenantId),
          eq(tenantNetworkExplorers.network, input.network),
        ),
      );
    return { network: input.network, txUrlTemplate: null };
  }
  const values = { txUrlTemplate: input.txUrlTemplate, updatedBy: input.actor, updatedAt: new Date() };
  await tx
    .insert(tenantNetworkExplorers)
    .values({ tenantId: input.tenantId, network: input.network, ...values })
    .onConflictDoUpdate({
      target: [tenantNetworkExplorers.tenantId, tenantNetworkExplorers.network],
      set: values,
    });
  return { network: input.network, txUrlTemplate: input.txUrlTemplate };
}

/** The transaction's page on the tenant's explorer for `network`, or null (no hash, no template). */
export async function explorerUrlFor(
  db: Executor,
  tenantId: string,
  network: string,
  txHash: string | null,
): Promise<string | null> {
  if (!txHash) return null;
  const rows = await db
    .select({ template: tenantNetworkExplorers.txUrlTemplate })
    .from(tenantNetworkExplorers)
    .where(and(eq(tenantNetworkExplorers.tenantId, tenantId), eq(tenantNetworkExplorers.network, network)));
  return explorerTxUrl(rows[0]?.template ?? null, txHash);
}
