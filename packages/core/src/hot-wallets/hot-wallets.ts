import { IdemError, type Network } from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import type { Database, Tx } from '../db/connect.ts';
import { hotWallets } from '../db/schema/index.ts';
import { withTenantAsConnection } from '../db/tenant-scope.ts';

export type HotWallet = typeof hotWallets.$inferSelect;

/**
 * Registers a tenant's hot wallet as the deployment's own tools do (the CLI's `idem hot-wallet`):
 * in a transaction of the connection's own role, not the application's. The application role may
 * not add a hot wallet (its key reference decides what the worker loads to sign), so this
 * needs the tables' owner's login, as `createApiKey` does.
 */
export async function provisionHotWallet(
  db: Database,
  input: { tenantId: string; network: Network; address: string; keyRef: string; nextNonce?: number },
): Promise<HotWallet> {
  return withTenantAsConnection(db, input.tenantId, (tx) => registerHotWallet(tx, input));
}

/**
 * Registers a tenant's hot wallet for a network (once; the address never changes after), in the
 * caller's transaction, which must be the owner's (`provisionHotWallet`): the database refuses the
 * application role.
 */
export async function registerHotWallet(
  tx: Tx,
  input: { tenantId: string; network: Network; address: string; keyRef: string; nextNonce?: number },
): Promise<HotWallet> {
  await tx
    .insert(hotWallets)
    .values({
      tenantId: input.tenantId,
      network: input.network,
      address: input.address,
      keyRef: input.keyRef,
      nextNonce: input.nextNonce ?? 0,
    })
    .onConflictDoNothing();
  return getHotWallet(tx, input.tenantId, input.network);
}

/** Every hot wallet of a tenant, by network. Its key reference locates a key; it holds none. */
export async function listHotWallets(tx: Tx, tenantId: string): Promise<HotWallet[]> {
  return tx.select().from(hotWallets).where(eq(hotWallets.tenantId, tenantId)).orderBy(hotWallets.network);
}

export async function getHotWallet(tx: Tx, tenantId: string, network: string): Promise<HotWallet> {
  const rows = await tx
    .select()
    .from(hotWallets)
    .where(and(eq(hotWallets.tenantId, tenantId), eq(hotWallets.network, network)));
  const wallet = rows[0];
  if (!wallet) throw new IdemError('NOT_FOUND', `no hot wallet for ${network}`);
  return wallet;
}

/**
 * Hands out the wallet's next nonce by one conditional UPDATE. Call it in the transaction that
 * records the signature: the row lock serialises signers of one wallet, and a rollback returns
 * the nonce, so no two signed transactions ever share one and none is skipped.
 */
export async function allocateNonce(
  tx: Tx,
  tenantId: string,
  network: string,
): Promise<{ nonce: number; wallet: HotWallet }> {
  const rows = await tx
    .update(hotWallets)
    .set({ nextNonce: sql`${hotWallets.nextNonce} + 1` })
    .where(and(eq(hotWallets.tenantId, tenantId), eq(hotWallets.network, network)))
    .returning();
  const wallet = rows[0];
  if (!wallet) throw new IdemError('NOT_FOUND', `no hot wallet for ${network}`);
  return { nonce: wallet.nextNonce - 1, wallet };
}
