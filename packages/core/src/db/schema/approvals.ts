import { sql } from 'drizzle-orm';
import { check, jsonb, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * One row per staff decision on a withdrawal. Each records the payload hash it approved, so an
 * approval can never cover a payload other than the one stored (C02, C24). Append-only.
 */
export const approvals = pgTable(
  'approvals',
  {
    tenantId: uuid('tenant_id').notNull(),
    operationId: uuid('operation_id').notNull(),
    approver: text('approver').notNull(),
    payloadHash: text('payload_hash').notNull(),
    decision: text('decision').notNull(),
    reason: text('reason'),
    /**
     * The approver's passkey assertion (WebAuthn) over approvalChallenge(operation, payload hash,
     * decision), as the browser answered it: { credentialId, authenticatorData, clientDataJSON,
     * signature, userHandle, counter }, base64url. Null for a decision made without a passkey (an
     * approver with none active). Anyone holding the registered public key checks it again
     * (verifyApprovalAssertions): a row written without the approver's device carries none.
     */
    passkeyAssertion: jsonb('passkey_assertion'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.operationId, t.approver] }),
    check('approvals_decision_known', sql`${t.decision} in ('approve', 'reject')`),
    tenantPolicy(),
  ],
);
