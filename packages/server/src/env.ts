import { fileURLToPath } from 'node:url';
import { type Network, networkSchema } from '@idem/contracts';
import { connectionStringSchema, type EgressPolicy, parseAllowEntry } from '@idem/core';
import type { FeePolicyInput } from '@idem/rails';
import { z } from 'zod';

/** The repository root, so the default data directory is the same whoever starts the process. */
const repositoryRoot = fileURLToPath(new URL('../../../', import.meta.url));

const flag = z
  .enum(['true', 'false', '1', '0'])
  .optional()
  .transform((value) => (value === undefined ? undefined : value === 'true' || value === '1'));

/**
 * A duration per network, e.g. `ethereum=1800000,bitcoin=7200000` (milliseconds); a network left
 * out keeps the worker's default.
 */
const perNetworkMs = z
  .string()
  .optional()
  .transform((value, check) => {
    if (value === undefined || value.trim() === '') return undefined;
    const result: Partial<Record<Network, number>> = {};
    for (const part of value.split(',')) {
      const [name, ms] = part.split('=').map((piece) => piece.trim());
      const network = networkSchema.safeParse(name);
      const duration = Number(ms);
      if (!network.success || !Number.isInteger(duration) || duration < 1_000) {
        check.addIssue({ code: 'custom', message: `expected network=milliseconds (>= 1000), got "${part}"` });
        return z.NEVER;
      }
      result[network.data] = duration;
    }
    return result;
  });

/**
 * The deployment's internal webhook targets: IP addresses, CIDR ranges and exact host names,
 * comma-separated (e.g. `10.20.0.0/16,hooks.corp.internal`). An entry that is none of these stops
 * the start, so a typo never silently allows nothing (or something else).
 */
const allowInternal = z
  .string()
  .optional()
  .transform((value, check) => {
    const entries = (value ?? '')
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '');
    for (const entry of entries) {
      const parsed = parseAllowEntry(entry);
      if ('error' in parsed) {
        check.addIssue({ code: 'custom', message: parsed.error });
        return z.NEVER;
      }
    }
    return entries;
  });

/**
 * Every environment variable the server and CLI read, parsed once. Nothing else reads process.env.
 */
const envSchema = z.object({
  /** Stack traces appear in error responses only in development. */
  NODE_ENV: z.enum(['development', 'production', 'test']).default('production'),
  PORT: z.coerce.number().int().min(0).max(65_535).default(3000),
  HOST: z.string().default('127.0.0.1'),
  /**
   * PostgreSQL. Several hosts with target_session_attrs=read-write follow an HA formation's primary
   * (docs/OPERATIONS.md). Without it the server runs on an embedded PGlite database in IDEM_DATA_DIR.
   */
  DATABASE_URL: connectionStringSchema.optional(),
  /**
   * The owner role's connection, for migrations and tenant provisioning when DATABASE_URL names
   * the restricted login role (docs/API.md, production setup). Defaults to DATABASE_URL.
   */
  MIGRATION_DATABASE_URL: connectionStringSchema.optional(),
  IDEM_DATA_DIR: z.string().default(`${repositoryRoot}.idem`),
  IDEM_DB_POOL_MAX: z.coerce.number().int().min(1).max(100).default(20),
  /**
   * Gathering of concurrent withdrawal submissions into one statement: on (the default),
   * a submission goes out at once while fewer than IDEM_BATCH_CONCURRENCY batches of its tenant are
   * being written, else it waits at most IDEM_BATCH_MAX_WAIT_MS or until IDEM_BATCH_MAX_ITEMS of its
   * tenant are waiting. Tenants never wait on each other. Off: every submission is its own statement, as before.
   */
  IDEM_BATCHING: z.enum(['on', 'off']).default('on'),
  IDEM_BATCH_MAX_ITEMS: z.coerce.number().int().min(1).max(1_000).default(64),
  IDEM_BATCH_MAX_WAIT_MS: z.coerce.number().int().min(0).max(1_000).default(2),
  /** Batches of one tenant written at once before its submissions gather (default 1). */
  IDEM_BATCH_CONCURRENCY: z.coerce.number().int().min(1).max(100).optional(),
  /**
   * A submission is gathered only when at least this many of its tenant's (itself included) are
   * being written or waiting; fewer go at once (light load: a small batch costs more than its calls).
   */
  IDEM_BATCH_GATHER_FROM: z.coerce.number().int().min(1).max(1_000).default(4),
  /** Apply migrations when the server starts (off when the app role cannot run DDL). */
  IDEM_MIGRATE_ON_START: flag.default(true),
  /** Request bodies above this are refused with PAYLOAD_TOO_LARGE before they are read in full. */
  IDEM_BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(10_485_760).default(65_536),
  /** How long an authenticated API key is remembered (a revocation takes effect within it; 0: off). */
  IDEM_API_KEY_CACHE_MS: z.coerce.number().int().min(0).max(60_000).default(5_000),
  /**
   * Per-tenant request rate, sustained per second; bursts of twice this are allowed. A bulk
   * submission costs one per item.
   */
  IDEM_RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(1).max(1_000_000).default(2_000),
  /** Staff password checks (argon2id, 19 MiB each) running at once; sign-ins beyond are RATE_LIMITED. */
  IDEM_PASSWORD_CHECKS_MAX: z.coerce.number().int().min(1).max(256).default(4),
  /**
   * The longest a verified TOTP code counts as fresh for step-up on this server, in seconds: a
   * tenant's window (mfa_fresh_seconds, 30 to 3600) applies when shorter. It only shortens windows.
   * Unset (the default): each tenant's own window.
   */
  IDEM_MFA_FRESH_SECONDS_MAX: z.coerce.number().int().min(1).max(3_600).optional(),
  /**
   * Reverse proxies in front of the server that append to X-Forwarded-For. 0 (the default): the
   * TCP peer is the client address and the header is ignored, since any client can write it.
   */
  IDEM_TRUSTED_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * Tests only: kill the process at a named point, to prove what survives a crash (C18).
   * Ignored when NODE_ENV is production.
   */
  IDEM_FAULT_INJECT: z.enum(['webhook-after-verify', 'webhook-after-commit']).optional(),
  /** An EVM node's JSON-RPC URL. Without it, embedded mode starts a local anvil chain. */
  IDEM_EVM_RPC_URL: z.string().url().optional(),
  IDEM_EVM_CHAIN_ID: z.coerce.number().int().min(1).default(31337),
  /**
   * The EVM network's fee policy (packages/rails/src/evm/fees.ts; defaults there). Fees are read
   * from the node at every signature: the pending base fee times IDEM_EVM_FEE_BASE_MULTIPLIER_PERCENT
   * plus the IDEM_EVM_FEE_PERCENTILE priority fee of the last IDEM_EVM_FEE_HISTORY_BLOCKS blocks,
   * bounded by the priority minimum and maximum and the per-gas ceiling, all in wei.
   */
  IDEM_EVM_FEE_PERCENTILE: z.coerce.number().int().min(1).max(99).optional(),
  IDEM_EVM_FEE_HISTORY_BLOCKS: z.coerce.number().int().min(1).max(1024).optional(),
  IDEM_EVM_FEE_BASE_MULTIPLIER_PERCENT: z.coerce.number().int().min(100).max(1_000).optional(),
  /** The least base-fee headroom a withdrawal's cap must leave, else it waits in APPROVED. */
  IDEM_EVM_FEE_MIN_HEADROOM_PERCENT: z.coerce.number().int().min(100).max(1_000).optional(),
  IDEM_EVM_PRIORITY_FEE_MIN_WEI: z.coerce.bigint().min(0n).optional(),
  IDEM_EVM_PRIORITY_FEE_MAX_WEI: z.coerce.bigint().min(0n).optional(),
  IDEM_EVM_MAX_FEE_PER_GAS_WEI: z.coerce.bigint().positive().optional(),
  /** A fee replacement's raise over the previous attempt, on both fees (at least 10). */
  IDEM_EVM_FEE_REPLACEMENT_BUMP_PERCENT: z.coerce.number().int().min(10).max(1_000).optional(),
  /** The custodian's API. Without it, embedded mode starts the custodian simulator in process. */
  IDEM_CUSTODIAN_URL: z.string().url().optional(),
  IDEM_CUSTODIAN_API_KEY: z.string().optional(),
  /** In embedded mode, start the local chain and the custodian simulator (off in API-only tests). */
  IDEM_EMBEDDED_RAILS: flag.default(true),
  /** Run a worker inside the server process (the default in embedded mode, where it is the only process). */
  IDEM_WORKER_IN_PROCESS: flag,
  IDEM_WORKER_INTERVAL_MS: z.coerce.number().int().min(50).max(60_000).default(1_000),
  IDEM_WORKER_LEASE_MS: z.coerce.number().int().min(100).max(600_000).default(30_000),
  /**
   * How often the worker applies each tenant's due control changes (the governance step): an
   * approved change takes effect at most this long after its effective time.
   */
  IDEM_GOVERNANCE_EVERY_MS: z.coerce.number().int().min(200).max(3_600_000).default(60_000),
  /** A worker pass still running after this long is reported once as an ALERT (its stage and tenant). */
  IDEM_WORKER_STALL_ALERT_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .default(5 * 60_000),
  /** After this long in UNKNOWN an operation is escalated to a named owner (C15). */
  IDEM_UNKNOWN_ESCALATE_AFTER_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .default(15 * 60_000),
  /**
   * The least time between the two chain passes that must both prove an EVM withdrawal was never
   * sent (its nonce taken at depth by another transaction) before its hold is released.
   */
  IDEM_NOT_SENT_CONFIRM_INTERVAL_MS: z.coerce.number().int().min(0).default(60_000),
  IDEM_ESCALATION_OWNER: z.string().min(1).max(100).default('ops-oncall'),
  /**
   * Per network, how long a BROADCAST may stay unmined before an alert, then before it is escalated
   * to IDEM_ESCALATION_OWNER. Defaults: ethereum 30 min / 2 h, bitcoin 2 h / 6 h.
   */
  IDEM_BROADCAST_ALERT_AFTER_MS: perNetworkMs,
  IDEM_BROADCAST_ESCALATE_AFTER_MS: perNetworkMs,
  /**
   * Per network, how long a sent EVM withdrawal may sit unmined before the worker signs a fee bump
   * (same nonce, within the approved cap). Default: ethereum 10 min.
   */
  IDEM_BUMP_AFTER_MS: perNetworkMs,
  /** How often each worker runs three-way reconciliation per tenant (0 turns it off). */
  IDEM_RECONCILE_EVERY_MS: z.coerce.number().int().min(0).default(60_000),
  /** How often each worker asks the custodian for deposits and statuses it may have missed, per tenant. */
  IDEM_CUSTODIAN_POLL_EVERY_MS: z.coerce.number().int().min(1_000).default(30_000),
  /** Where browsers reach this server (e.g. https://pay.example.com); customer links are built on it. */
  IDEM_PUBLIC_URL: z.string().url().optional(),
  /**
   * Session cookies `__Host-` prefixed and Secure. Defaults to on outside development (see
   * isDevelopment) and whenever IDEM_PUBLIC_URL is https.
   */
  IDEM_COOKIE_SECURE: flag,
  /** Deadline of one call to a hot wallet's signer (an HSM signs in milliseconds). */
  IDEM_SIGN_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(10_000),
  /**
   * The signer service (`idem signer`, docs/SIGNING.md) on loopback, e.g. http://127.0.0.1:8787:
   * hot wallets whose key is in an HSM are signed there, and this process needs no PIN. Needs
   * IDEM_SIGNER_TOKEN, this worker's own credential; a worker without it does not start.
   */
  IDEM_SIGNER_URL: z.string().url().optional(),
  IDEM_SIGNER_TOKEN: z.string().min(16).optional(),
  /**
   * Chaos runs only (packages/rails/src/signer/faults.ts): a control file that makes the signer's
   * answers arrive late on purpose. Refused outside NODE_ENV=test.
   */
  IDEM_SIGNER_FAULT_FILE: z.string().optional(),
  /** `idem deposit` against PostgreSQL: a credit with no approval, for development databases only. */
  IDEM_ALLOW_DIRECT_CREDIT: flag,
  /**
   * The key file whose key-encryption keys seal staff TOTP secrets at rest (auth/totp-secrets.ts;
   * docs/RUNBOOK.md). Keep it off the database host and out of database backups. Unset in
   * development: `mfa-kek.key` in IDEM_DATA_DIR, made on first use. Unset in production: TOTP is
   * refused (MFA_KEY_UNAVAILABLE) until it is set.
   */
  IDEM_MFA_KEY_FILE: z.string().min(1).optional(),
  /** The CLI's staff password for `idem proposal ... --as EMAIL` (else read from standard input). */
  IDEM_STAFF_PASSWORD: z.string().optional(),
  /** The CLI's TOTP code for `idem proposal ... --as EMAIL` when the member uses TOTP (else --code or a prompt). */
  IDEM_STAFF_TOTP: z.string().optional(),
  /**
   * The bearer token `/metrics` asks for. Unset: outside development `/metrics` answers 404; in
   * development a random token is made and printed at start.
   */
  IDEM_METRICS_TOKEN: z.string().min(16).max(200).optional(),
  /** How long the cross-tenant operation counts are reused: at most one database read per interval. */
  IDEM_METRICS_CACHE_MS: z.coerce.number().int().min(0).max(300_000).default(5_000),
  /**
   * How long the settled states' totals (which grow with the history) are reused; refreshed in the
   * background, so no scrape but the first waits on a read of every tenant's history (I14-LIST).
   */
  IDEM_METRICS_SETTLED_CACHE_MS: z.coerce.number().int().min(0).max(86_400_000).default(300_000),
  /**
   * Internal targets outbound webhooks may reach although they are not public addresses (loopback,
   * private, link-local, unique-local, CGNAT, ...): by address, CIDR range or exact host name.
   * Empty (the default): public addresses only. Cloud metadata addresses are refused whatever is
   * listed. A host named here may also be reached over plain http outside development.
   */
  IDEM_WEBHOOK_ALLOW_INTERNAL: allowInternal,
  /**
   * The SMTP server invitation e-mails go through, as a URL with host, port, TLS and credentials:
   * `smtps://user:password@smtp.example.com:465` or `smtp://relay.internal:587` (docs/RUNBOOK.md).
   * Unset: in development (`pnpm start`) each e-mail is printed to the console instead; in a
   * deployment nothing is sent and invitations wait in the outbox (a warning at start says so).
   */
  IDEM_SMTP_URL: z
    .string()
    .regex(/^smtps?:\/\/[^\s]+$/, { error: 'expected smtp://... or smtps://...' })
    .optional(),
  /** The From of every e-mail Idem sends (an address your SMTP server may send as). */
  IDEM_MAIL_FROM: z.string().min(3).max(200).default('Idem <no-reply@localhost>'),
  /** How often the mail sender looks for e-mails to send (each process sends; SKIP LOCKED splits them). */
  IDEM_MAIL_INTERVAL_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
  /** The built web app (packages/web/dist), served at /. */
  IDEM_WEB_DIST: z.string().default(`${repositoryRoot}packages/web/dist`),
});

export type Env = z.infer<typeof envSchema>;

/**
 * Development: NODE_ENV development or test, or the embedded demo (PGlite, reached over
 * http://localhost, one process). Everywhere else the defaults are a deployment's: `__Host-`
 * Secure cookies and no metrics without a token.
 */
export function isDevelopment(env: Env, options: { embedded: boolean }): boolean {
  return env.NODE_ENV !== 'production' || options.embedded;
}

/**
 * Where outbound webhooks may connect (core/src/delivery/egress.ts): https only outside
 * development (isDevelopment), public addresses only, plus the IDEM_WEBHOOK_ALLOW_INTERNAL
 * allowlist. Checked when an endpoint is saved and again by the worker at every connection.
 */
export function egressPolicyFrom(env: Env, options: { embedded: boolean }): EgressPolicy {
  return {
    allowPlainHttp: isDevelopment(env, options),
    allowInternal: env.IDEM_WEBHOOK_ALLOW_INTERNAL,
  };
}

export function readEnv(source: NodeJS.ProcessEnv = process.env): Env {
  const parsed = envSchema.safeParse(source);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`invalid environment:\n  ${problems.join('\n  ')}`);
  }
  return parsed.data;
}

/** The EVM fee policy the environment sets; unset entries take the policy's defaults. */
export function evmFeePolicy(env: Env): FeePolicyInput {
  const entries = {
    rewardPercentile: env.IDEM_EVM_FEE_PERCENTILE,
    historyBlocks: env.IDEM_EVM_FEE_HISTORY_BLOCKS,
    baseFeeMultiplierPercent: env.IDEM_EVM_FEE_BASE_MULTIPLIER_PERCENT,
    minHeadroomPercent: env.IDEM_EVM_FEE_MIN_HEADROOM_PERCENT,
    minPriorityFeeWei: env.IDEM_EVM_PRIORITY_FEE_MIN_WEI,
    maxPriorityFeeWei: env.IDEM_EVM_PRIORITY_FEE_MAX_WEI,
    maxFeePerGasWei: env.IDEM_EVM_MAX_FEE_PER_GAS_WEI,
    replacementBumpPercent: env.IDEM_EVM_FEE_REPLACEMENT_BUMP_PERCENT,
  };
  return Object.fromEntries(
    Object.entries(entries).filter(([, value]) => value !== undefined),
  ) as FeePolicyInput;
}
