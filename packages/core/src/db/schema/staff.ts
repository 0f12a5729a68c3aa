import { sql } from 'drizzle-orm';
import {
  bigint,
  check,
  foreignKey,
  index,
  integer,
  pgTable,
  primaryKey,
  text,
  timestamp,
  unique,
  uuid,
} from 'drizzle-orm/pg-core';
import { tenantPolicy } from './tenant-policy.ts';

/**
 * The operator's staff, per tenant. The password is stored only as an argon2id hash (PHC string),
 * made by the server; core never sees a password. Roles are a closed set, checked by the database.
 */
export const staffUsers = pgTable(
  'staff_users',
  {
    tenantId: uuid('tenant_id').notNull(),
    userId: uuid('user_id').notNull(),
    /** Lower-cased; personal data, so it never enters the journal or an operation's history. */
    email: text('email').notNull(),
    passwordHash: text('password_hash').notNull(),
    role: text('role').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    disabledAt: timestamp('disabled_at', { withTimezone: true }),
    /**
     * TOTP (RFC 6238). The base32 secret of a confirmed enrolment; never returned by any
     * procedure after enrolment. `mfaPendingSecret` holds one being enrolled until a code confirms it.
     */
    mfaSecret: text('mfa_secret'),
    mfaPendingSecret: text('mfa_pending_secret'),
    mfaEnrolledAt: timestamp('mfa_enrolled_at', { withTimezone: true }),
    /** The last accepted time step: a code of this step or an earlier one is a replay. */
    mfaLastStep: bigint('mfa_last_step', { mode: 'number' }),
    /** SHA-256 of each unused recovery code; one is removed when used. */
    mfaRecoveryHashes: text('mfa_recovery_hashes').array().notNull().default(sql`'{}'::text[]`),
    /**
     * Codes tried (each takes its slot before it is checked) in the window that ends at
     * `mfaFailuresResetAt`; a right one resets it (see staff/mfa.ts).
     */
    mfaFailures: integer('mfa_failures').notNull().default(0),
    mfaFailuresResetAt: timestamp('mfa_failures_reset_at', { withTimezone: true }),
    /**
     * Before this instant the member's approvals are refused (COOLING_OFF): set on accepting an
     * invitation and on every role change to now plus the tenant's cooling-off period. Null: no
     * period (members created by the operator's own tools at provisioning).
     */
    approvalsFrom: timestamp('approvals_from', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.userId] }),
    unique('staff_users_tenant_email').on(t.tenantId, t.email),
    check('staff_users_role_known', sql`${t.role} in ('support', 'approver', 'operator', 'admin')`),
    tenantPolicy(),
  ],
);

/**
 * Browser sessions, staff and customer alike. Only the SHA-256 of the session secret is stored
 * (the secret carries 256 random bits, so a slow hash adds nothing); the cookie carries the
 * tenant id beside the secret so the lookup runs inside that tenant's row-level-security scope.
 */
export const webSessions = pgTable(
  'web_sessions',
  {
    tenantId: uuid('tenant_id').notNull(),
    sessionHash: text('session_hash').notNull(),
    kind: text('kind').notNull(),
    userId: uuid('user_id'),
    accountRef: text('account_ref'),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
    /** When this staff session last verified a TOTP or recovery code (null: never); step-up reads it. */
    mfaAt: timestamp('mfa_at', { withTimezone: true }),
    /**
     * This session's own budget of codes, beside the member's (staff/mfa.ts): a right code in
     * another session of the same member does not refill it.
     */
    mfaFailures: integer('mfa_failures').notNull().default(0),
    mfaFailuresResetAt: timestamp('mfa_failures_reset_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.sessionHash] }),
    check(
      'web_sessions_kind_subject',
      sql`(${t.kind} = 'staff' and ${t.userId} is not null and ${t.accountRef} is null)
        or (${t.kind} = 'customer' and ${t.accountRef} is not null and ${t.userId} is null)`,
    ),
    tenantPolicy(),
  ],
);

/**
 * One-time links the operator's backend asks for (customerSessions.create), each for one account.
 * Exchanged at most once (used_at is set by a conditional UPDATE) and only before it expires.
 */
export const customerSessionLinks = pgTable(
  'customer_session_links',
  {
    tenantId: uuid('tenant_id').notNull(),
    linkHash: text('link_hash').notNull(),
    accountRef: text('account_ref').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    usedAt: timestamp('used_at', { withTimezone: true }),
  },
  (t) => [primaryKey({ columns: [t.tenantId, t.linkHash] }), tenantPolicy()],
);

/**
 * Invitations to join a tenant's staff (Team screen). The link carries a 256-bit token
 * of which only the SHA-256 is stored; it is used at most once (conditional UPDATE on used_at) and
 * only before it expires. The invited member exists already, without a usable password, until the
 * link sets one.
 */
export const staffInvitations = pgTable(
  'staff_invitations',
  {
    tenantId: uuid('tenant_id').notNull(),
    invitationHash: text('invitation_hash').notNull(),
    userId: uuid('user_id').notNull(),
    createdBy: text('created_by').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
    usedAt: timestamp('used_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.invitationHash] }),
    foreignKey({
      name: 'staff_invitations_user',
      columns: [t.tenantId, t.userId],
      foreignColumns: [staffUsers.tenantId, staffUsers.userId],
    }),
    tenantPolicy(),
  ],
);

/**
 * Failed staff sign-ins per (tenant, e-mail), shared by every server process (I11-F7). The e-mail
 * is stored only as the SHA-256 of tenant and normalised address (personal data). A window ends at
 * `expires_at`; only a row past it is ever cleaned up. Written and read only through the
 * idem_sign_in_* functions (core/sql/idem_sign_in_take.sql, idem_sign_in_succeeded.sql), never
 * by the application role directly.
 */
export const signInFailures = pgTable(
  'sign_in_failures',
  {
    tenantId: uuid('tenant_id').notNull(),
    accountHash: text('account_hash').notNull(),
    failures: integer('failures').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.accountHash] }),
    index('sign_in_failures_expires').on(t.expiresAt),
    check('sign_in_failures_hash', sql`${t.accountHash} ~ '^[0-9a-f]{64}$'`),
    check('sign_in_failures_count', sql`${t.failures} >= 0`),
    tenantPolicy(),
  ],
);

/**
 * Sign-in attempts per client address, across tenants: one address guessing in many tenants is
 * one budget. Holds no tenant data (a SHA-256 of the address and a count), so it has no tenant_id;
 * only the idem_sign_in_* functions' owner may touch it.
 */
export const signInAddressFailures = pgTable(
  'sign_in_address_failures',
  {
    addressHash: text('address_hash').primaryKey(),
    failures: integer('failures').notNull(),
    expiresAt: timestamp('expires_at', { withTimezone: true }).notNull(),
  },
  (t) => [
    index('sign_in_address_failures_expires').on(t.expiresAt),
    check('sign_in_address_failures_hash', sql`${t.addressHash} ~ '^[0-9a-f]{64}$'`),
    check('sign_in_address_failures_count', sql`${t.failures} >= 0`),
  ],
).enableRLS();

/**
 * Staff passkeys (WebAuthn credentials). Registered by the member from their own device and stored
 * inactive: an approved, due `passkey_register` control change naming the credential activates it
 * (idem_guard_passkey_update), except the trust anchor, the first passkey of a tenant's lone admin
 * (docs/GOVERNANCE.md "Passkeys"). Only the public key is stored. Append-only but for activation
 * (once), revocation (once) and the signature counter (only upward).
 */
export const staffPasskeys = pgTable(
  'staff_passkeys',
  {
    tenantId: uuid('tenant_id').notNull(),
    /** base64url, as the browser names it. */
    credentialId: text('credential_id').notNull(),
    userId: uuid('user_id').notNull(),
    label: text('label').notNull(),
    /** The COSE public key, base64url. */
    publicKey: text('public_key').notNull(),
    /** The authenticator's signature counter last seen (0 for authenticators that keep none). */
    counter: bigint('counter', { mode: 'number' }).notNull().default(0),
    transports: text('transports').array().notNull().default(sql`'{}'::text[]`),
    createdAt: timestamp('created_at', { withTimezone: true }).notNull().defaultNow(),
    /** Null until its control change applies (or the trust anchor's registration). */
    activatedAt: timestamp('activated_at', { withTimezone: true }),
    revokedAt: timestamp('revoked_at', { withTimezone: true }),
  },
  (t) => [
    primaryKey({ columns: [t.tenantId, t.credentialId] }),
    index('staff_passkeys_user').on(t.tenantId, t.userId),
    foreignKey({
      name: 'staff_passkeys_user_fk',
      columns: [t.tenantId, t.userId],
      foreignColumns: [staffUsers.tenantId, staffUsers.userId],
    }),
    check('staff_passkeys_counter_nonnegative', sql`${t.counter} >= 0`),
    tenantPolicy(),
  ],
);
