import { sql } from 'drizzle-orm';
import { bigint, check, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * A tenant's hot wallet per network. The next nonce is allocated by a conditional UPDATE in the
 * signing transaction, so two workers can never sign with one nonce. Written only by the
 * deployment's own tools (the CLI's `idem hot-wallet`, as the tables' owner): the application role
 * may read a wallet and advance its nonce, never add one, since its key reference decides what the
 * worker loads to sign.
 */
export const hotWallets = pgTable(
  'hot_wallets',
  {
    tenantId: uuid('tenant_id').notNull(),
    network: text('network').notNull(),
    address: text('address').notNull(),
    /**
     * Where the signing key lives, never the key: 'pkcs11:…' (an HSM, docs/SIGNING.md), or on
     * development chains only 'dev:<index>', 'env:<VARIABLE>', 'keystore:<path>#<VARIABLE>'.
     */
    keyRef: text('key_ref').notNull(),
    nextNonce: bigint('next_nonce', { mode: 'number' }).notNull().default(0),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.network] }),
    check('hot_wallets_nonce_non_negative', sql`${t.nextNonce} >= 0`),
    tenantPolicy(),
  ],
);

/**
 * Which tenant holds each hot-wallet address, across the deployment: one address is one nonce
 * sequence, so two tenants' rows for it would allocate the same nonces. Unique across
 * tenants by nature, so not keyed by tenant (a reference table on Citus, docs/SERIALIZATION.md),
 * like `tenant_slugs`. Written only by the database, for each new hot wallet (trigger
 * hot_wallets_claim_address, core/sql/idem_claim_hot_wallet_address.sql); the application role has no
 * privilege on it.
 */
export const hotWalletAddresses = pgTable(
  'hot_wallet_addresses',
  {
    network: text('network').notNull(),
    address: text('address').notNull(),
    tenantId: uuid('tenant_id').notNull(),
  },
  (t) => [primaryKey({ columns: [t.network, t.address] }), tenantPolicy()],
);
