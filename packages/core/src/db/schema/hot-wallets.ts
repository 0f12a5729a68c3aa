import { sql } from 'drizzle-orm';
import { bigint, check, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * A tenant's hot wallet per network. The next nonce is allocated by a conditional UPDATE in the
 * signing transaction, so two workers can never sign with one nonce.
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
