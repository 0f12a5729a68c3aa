import { randomBytes } from 'node:crypto';
import { userInfo } from 'node:os';
import { parseArgs } from 'node:util';
import {
  type ApiKeyScope,
  amountMinorSchema,
  explorerTemplateSchema,
  IdemError,
  isValidDestination,
  networkSchema,
  staffRoleSchema,
} from '@idem/contracts';
import {
  ALL_API_KEY_SCOPES,
  closeBreak,
  createApiKey,
  createOutboundEndpoint,
  createStaffUser,
  createTenant,
  createWebhookEndpoint,
  creditAsOperator,
  type Database,
  errorCodes,
  type HotWallet,
  listBreaks,
  listExplorers,
  listHotWallets,
  policyHistory,
  provisionHotWallet,
  revokeApiKey,
  setApproverCoolingOff,
  setExplorer,
  setRiskPolicyAsOperator,
  setTenantGovernance,
  setTenantMfa,
  toView,
  withTenant,
} from '@idem/core';
import { createPkcs11Key, pinRefSchema } from '@idem/rails';
import { createWorker, keyLocation, routeFor } from '@idem/workers';
import { z } from 'zod';
import { hashPassword, PASSWORD_LENGTH_MIN } from '../auth/password.ts';
import { openConfiguredDatabase } from '../database.ts';
import { egressPolicyFrom, readEnv } from '../env.ts';
import { createLogger } from '../logger.ts';
import { startMoneyMovers } from '../money-movers.ts';
import { workerSettingsFrom } from '../worker-settings.ts';
import { AUDIT_USAGE, auditCommand } from './audit.ts';
import { FREEZE_USAGE, freezeCommand } from './freeze.ts';
import { resealTenantSecrets } from './mfa.ts';
import { proposalCommands } from './proposals.ts';
import { readPassword } from './read-password.ts';
import { RECONCILE_USAGE, reconcileCommand } from './reconcile.ts';
import { SIGNER_USAGE, signerCommand } from './signer.ts';
import { print, required, UsageError } from './usage.ts';

const USAGE = `Usage: pnpm idem <command> [options]

  migrate                                         apply database migrations
  tenant create --name NAME [--slug ORG] [--mfa on|off] [--admin EMAIL (--admin2 EMAIL | --single-admin)] [--json]
                                                  the first admins (each with a one-time initial password shown once);
                                                  two by default, one only in single-admin mode; none: setup mode
                                                  create a tenant (BTC, ETH, USDC) and its first API key;
                                                  ORG is what staff sign in with (from the name when omitted);
                                                  TOTP for approvers, operators, admins (on by default)
  tenant mfa --tenant ID [--mfa on|off] [--fresh-seconds 30..3600] [--json]
                                                  TOTP requirement and step-up window of a tenant
  mfa reseal --tenant ID [--json]                 seal the tenant's TOTP secrets under the first key of
                                                  IDEM_MFA_KEY_FILE (key rotation; docs/RUNBOOK.md)
  tenant cooling-off --tenant ID --seconds 0..2592000 [--json]
                                                  how long a new or re-roled member waits before
                                                  their approvals count (86400 by default)
  apikey create --tenant ID [--label L] [--scopes S,S] [--expires ISO_DATE] [--json]
                                                  mint an API key (shown once); scopes from withdraw,
                                                  customer-sessions, read, webhooks (all when omitted)
  apikey revoke --tenant ID --key-id KEY_ID       revoke an API key
  deposit --tenant ID --account REF --asset CODE --amount MINOR --key KEY [--reference REF] [--json]
                                                  credit an account directly, with no approval: embedded
                                                  database only (on PostgreSQL needs IDEM_ALLOW_DIRECT_CREDIT=1)
  proposal credit --tenant ID --as EMAIL --account REF --asset CODE --amount MINOR --reference REF
                  --reason TEXT --key KEY         propose a manual credit (operator, admin)
  proposal adjustment --tenant ID --as EMAIL --account REF --asset CODE --amount=[-]MINOR
                  --reason TEXT --key KEY         propose an adjustment; negative debits (operator, admin)
  proposal list --tenant ID --as EMAIL [--state PENDING|EXECUTED|REJECTED|CANCELLED]
  proposal show --tenant ID --as EMAIL --id PROPOSAL
  proposal approve|reject --tenant ID --as EMAIL --id PROPOSAL --hash PAYLOAD_HASH [--reason TEXT]
                                                  decide as another staff member (approver, admin); the
                                                  last approval executes it
  proposal cancel --tenant ID --as EMAIL --id PROPOSAL
                                                  the proposer withdraws a pending proposal
                                                  (proposal commands sign in as --as: the password comes
                                                  from IDEM_STAFF_PASSWORD or standard input; a member
                                                  who uses TOTP adds a code: --code CODE, IDEM_STAFF_TOTP
                                                  or the prompt)
  webhook-endpoint create --tenant ID --source NAME [--json]
                                                  create a webhook endpoint; prints its id and secret
  hot-wallet register --tenant ID --network ethereum --address ADDR --key-ref env:VAR|keystore:/file.json#PASSWORD_VAR [--next-nonce N]
                                                  register a tenant's hot wallet with an in-process key
                                                  (development chains only: its key stays in VAR)
  hot-wallet create --tenant ID --network ethereum --pkcs11-module PATH --pkcs11-token LABEL
                    --pkcs11-pin-ref env:NAME|file:/path [--label L]
                                                  generate the hot wallet's key inside an HSM and
                                                  register the wallet (the PIN is read from the reference)
  hot-wallet list --tenant ID [--json]            each hot wallet: address, where its key lives, next nonce
  risk-policy set --tenant ID --asset CODE --auto-approve-max MINOR --four-eyes-min MINOR [--by WHO]
                                                  set the review thresholds of one asset; a real change
                                                  bumps the tenant's policy version and is recorded
                                                  (as WHO, by default cli:<your OS user>); raising a
                                                  limit needs the owner's DATABASE_URL
  risk-policy history --tenant ID [--json]        every policy change: who, when, version from -> to,
                                                  the rules before and after
${FREEZE_USAGE}
  explorer set --tenant ID --network bitcoin|ethereum (--template URL|--none) [--by WHO] [--json]
                                                  the block explorer customers' transaction hashes link
                                                  to: an https URL with {txHash}; --none removes the link
  explorer list --tenant ID [--json]              each network's explorer template (null: no link)
  breaks list --tenant ID [--status open|closed]  reconciliation breaks (C21)
  breaks close --tenant ID --break-id ID --by WHO --evidence JSON
                                                  close a break with the evidence found
  outbound-endpoint create --tenant ID --url URL [--json]
                                                  where the operator receives signed state-change webhooks
${RECONCILE_USAGE}
${AUDIT_USAGE}
  user create --tenant ID --email E --role support|approver|operator|admin [--password P]
                                                  create a staff user for the web screens; without
                                                  --password it prompts (or reads one line from stdin)
  worker [--id NAME]                              run a worker until SIGINT/SIGTERM (PostgreSQL only;
                                                  embedded mode runs one inside pnpm start)
${SIGNER_USAGE}

Works against DATABASE_URL, or the embedded database in IDEM_DATA_DIR while the server is stopped.`;

type Flags = Record<string, string | boolean | undefined>;

/** A hot wallet as the CLI shows it: where its key lives, never the key or a PIN. */
function walletView(wallet: HotWallet) {
  return {
    network: wallet.network,
    address: wallet.address,
    keyLocation: keyLocation(wallet.keyRef),
    nextNonce: wallet.nextNonce,
  };
}

/** Each command takes the open database and its flags, and returns what to print. */
const commands: Record<string, (db: Database, flags: Flags) => Promise<Record<string, unknown>>> = {
  'tenant create': async (db, flags) => {
    firstAdminEmails(flags);
    const mfa = typeof flags.mfa === 'string' ? flags.mfa : 'on';
    if (mfa !== 'on' && mfa !== 'off') throw new UsageError('--mfa is on or off');
    const { tenantId, slug } = await createTenant(db, {
      name: required(flags, 'name'),
      ...(typeof flags.slug === 'string' ? { slug: flags.slug } : {}),
      mfaRequired: mfa === 'on',
    });
    const { apiKey, keyId } = await createApiKey(db, tenantId, {
      label: 'initial',
      scopes: ALL_API_KEY_SCOPES,
      createdBy: `cli:${userInfo().username}`,
    });
    const admins = await createFirstAdmins(db, tenantId, flags);
    return { tenantId, slug, mfaRequired: mfa === 'on', apiKey, keyId, ...admins };
  },
  'tenant mfa': async (db, flags) => {
    const mfa = flags.mfa;
    if (mfa !== undefined && mfa !== 'on' && mfa !== 'off') throw new UsageError('--mfa is on or off');
    const fresh = flags['fresh-seconds'];
    if (mfa === undefined && fresh === undefined)
      throw new UsageError('--mfa or --fresh-seconds is required');
    return setTenantMfa(db, {
      tenantId: required(flags, 'tenant'),
      ...(mfa === undefined ? {} : { mfaRequired: mfa === 'on' }),
      ...(typeof fresh === 'string' ? { mfaFreshSeconds: Number(fresh) } : {}),
    });
  },
  // How long a member who joined or changed role waits before their approvals count (staff cannot
  // change it: the application role may not update tenants).
  'tenant cooling-off': async (db, flags) =>
    setApproverCoolingOff(db, {
      tenantId: required(flags, 'tenant'),
      seconds: Number(required(flags, 'seconds')),
    }),
  'apikey create': async (db, flags) => {
    const label = typeof flags.label === 'string' ? flags.label : 'cli';
    const scopes =
      typeof flags.scopes === 'string'
        ? (flags.scopes.split(',').map((scope) => scope.trim()) as ApiKeyScope[])
        : ALL_API_KEY_SCOPES;
    const expires = typeof flags.expires === 'string' ? new Date(flags.expires) : null;
    if (expires && Number.isNaN(expires.getTime())) throw new UsageError('--expires is an ISO date');
    const created = await createApiKey(db, required(flags, 'tenant'), {
      label,
      scopes,
      expiresAt: expires,
      createdBy: `cli:${userInfo().username}`,
    });
    return { ...created, expiresAt: created.expiresAt?.toISOString() ?? null };
  },
  'apikey revoke': async (db, flags) => {
    await revokeApiKey(db, required(flags, 'tenant'), required(flags, 'key-id'));
    return { revoked: required(flags, 'key-id') };
  },
  deposit: async (db, flags) => {
    const env = readEnv();
    // A direct credit has no second person: a shortcut for the embedded demo only. On PostgreSQL
    // (production) money is credited by an approved proposal, unless explicitly enabled (I11-F5).
    if (env.DATABASE_URL && !env.IDEM_ALLOW_DIRECT_CREDIT) {
      throw new IdemError(
        'FORBIDDEN',
        'a direct credit has no approval; use `idem proposal credit` (approved by a second staff member), ' +
          'or set IDEM_ALLOW_DIRECT_CREDIT=1 on a development database',
      );
    }
    const tenantId = required(flags, 'tenant');
    const idempotencyKey = required(flags, 'key');
    const claim = await creditAsOperator(db, {
      tenantId,
      deposit: {
        // The reference defaults to the key: one manual credit per key, replayable.
        reference: typeof flags.reference === 'string' ? flags.reference : idempotencyKey,
        accountId: required(flags, 'account'),
        asset: required(flags, 'asset'),
        amountMinor: required(flags, 'amount'),
      },
      idempotencyKey,
      actor: 'cli',
    });
    return { outcome: claim.outcome, deposit: toView(claim.operation) };
  },
  'hot-wallet register': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const nextNonce = typeof flags['next-nonce'] === 'string' ? Number(flags['next-nonce']) : 0;
    if (!Number.isSafeInteger(nextNonce) || nextNonce < 0)
      throw new UsageError('--next-nonce must be a non-negative integer');
    const network = networkSchema.parse(required(flags, 'network'));
    const address = required(flags, 'address');
    if (!isValidDestination(network, address))
      throw new UsageError(`--address is not a valid ${network} address`);
    const keyRef = required(flags, 'key-ref');
    if (!/^(env:[A-Z0-9_]+|keystore:\/[^#]+#[A-Z0-9_]+)$/.test(keyRef)) {
      throw new UsageError(
        '--key-ref must be env:VARIABLE or keystore:/path/to/file.json#PASSWORD_VARIABLE (the key is never stored)',
      );
    }
    // As the tables' owner: the application role may not add a hot wallet.
    const wallet = await provisionHotWallet(db, { tenantId, network, address, keyRef, nextNonce });
    return {
      network: wallet.network,
      address: wallet.address,
      keyRef: wallet.keyRef,
      nextNonce: wallet.nextNonce,
    };
  },
  'hot-wallet create': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const network = networkSchema.parse(required(flags, 'network'));
    if (routeFor(network).kind !== 'evm') throw new UsageError(`--network ${network} has no hot wallet`);
    const pinRef = required(flags, 'pkcs11-pin-ref');
    // A PIN on the command line would sit in shell history and the process list: references only.
    if (!pinRefSchema.safeParse(pinRef).success) {
      throw new UsageError(
        '--pkcs11-pin-ref must be a secret reference (env:NAME or file:/path), never the PIN',
      );
    }
    const existing = await withTenant(db, tenantId, (tx) => listHotWallets(tx, tenantId));
    if (existing.some((wallet) => wallet.network === network)) {
      throw new IdemError('VALIDATION', `tenant already has a hot wallet for ${network}; nothing generated`);
    }
    const key = await createPkcs11Key({
      modulePath: required(flags, 'pkcs11-module'),
      tokenLabel: required(flags, 'pkcs11-token'),
      pinRef,
      label: typeof flags.label === 'string' ? flags.label : `idem-${network}-${tenantId.slice(0, 8)}`,
    });
    const wallet = await provisionHotWallet(db, {
      tenantId,
      network,
      address: key.address,
      keyRef: key.keyRef,
    });
    if (wallet.address !== key.address) {
      throw new IdemError(
        'VALIDATION',
        `tenant already has a hot wallet for ${network}; the new key is unused`,
      );
    }
    return walletView(wallet);
  },
  'hot-wallet list': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const wallets = await withTenant(db, tenantId, (tx) => listHotWallets(tx, tenantId));
    return { wallets: wallets.map(walletView) };
  },
  'risk-policy set': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const policy = {
      tenantId,
      assetCode: required(flags, 'asset'),
      autoApproveMaxMinor: amountMinorSchema.or(z.literal('0')).parse(required(flags, 'auto-approve-max')),
      fourEyesMinMinor: amountMinorSchema.parse(required(flags, 'four-eyes-min')),
    };
    const actor = typeof flags.by === 'string' && flags.by !== '' ? flags.by : `cli:${userInfo().username}`;
    // As the connection's own role: the database takes a looser rule only from the tables' owner
    // (the application's login tightens only; staff loosen through an approved control change).
    const { changed, policyVersion } = await setRiskPolicyAsOperator(db, { ...policy, actor }).catch(
      (error: unknown) => {
        if (!errorCodes(error).includes('42501')) throw error;
        throw new IdemError(
          'FORBIDDEN',
          `the database takes a looser ${policy.assetCode} rule only from the tables' owner: run risk-policy set ` +
            "with the owner's DATABASE_URL, or loosen it from the staff screens (a control change other admins approve)",
        );
      },
    );
    return { ...policy, changed, policyVersion };
  },
  freeze: (db, flags) => freezeCommand(db, [], flags),
  'freeze list': (db, flags) => freezeCommand(db, ['list'], flags),
  'risk-policy history': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const changes = await withTenant(db, tenantId, (tx) => policyHistory(tx, tenantId));
    return {
      changes: changes.map(({ tenantId: _tenant, changedAt, ...change }) => ({
        ...change,
        changedAt: changedAt.toISOString(),
      })),
    };
  },
  'explorer set': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const network = networkSchema.parse(required(flags, 'network'));
    if ((flags.none === true) === (typeof flags.template === 'string')) {
      throw new UsageError('give exactly one of --template URL and --none');
    }
    const parsed = flags.none === true ? null : explorerTemplateSchema.safeParse(flags.template);
    if (parsed && !parsed.success) {
      throw new IdemError('VALIDATION', parsed.error.issues[0]?.message ?? 'invalid --template');
    }
    const actor = typeof flags.by === 'string' && flags.by !== '' ? flags.by : `cli:${userInfo().username}`;
    const setting = await withTenant(db, tenantId, (tx) =>
      setExplorer(tx, { tenantId, network, txUrlTemplate: parsed ? parsed.data : null, actor }),
    );
    return { ...setting };
  },
  'explorer list': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    return { explorers: await withTenant(db, tenantId, (tx) => listExplorers(tx, tenantId)) };
  },
  'breaks list': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const status = flags.status === 'open' || flags.status === 'closed' ? flags.status : undefined;
    const breaks = await withTenant(db, tenantId, (tx) =>
      listBreaks(tx, { tenantId, ...(status ? { status } : {}) }),
    );
    return { breaks };
  },
  'breaks close': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    let evidence: unknown;
    try {
      evidence = JSON.parse(required(flags, 'evidence'));
    } catch {
      throw new UsageError('--evidence must be a JSON object');
    }
    const parsed = z.record(z.string(), z.unknown()).safeParse(evidence);
    if (!parsed.success) throw new UsageError('--evidence must be a JSON object');
    const closed = await withTenant(db, tenantId, (tx) =>
      closeBreak(tx, {
        tenantId,
        breakId: required(flags, 'break-id'),
        closedBy: required(flags, 'by'),
        evidence: parsed.data,
      }),
    );
    return { closed };
  },
  // The same egress policy as the server's: the embedded database (no DATABASE_URL) is the demo.
  'outbound-endpoint create': async (db, flags) => {
    const env = readEnv();
    const egress = egressPolicyFrom(env, { embedded: env.DATABASE_URL === undefined });
    return createOutboundEndpoint(db, required(flags, 'tenant'), { url: required(flags, 'url') }, egress);
  },
  'user create': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const role = staffRoleSchema.safeParse(required(flags, 'role'));
    if (!role.success) throw new UsageError('--role must be support, approver, operator or admin');
    const email = required(flags, 'email');
    if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw new UsageError('--email must be an e-mail address');
    const password = typeof flags.password === 'string' ? flags.password : await readPassword('Password: ');
    if (password.length < PASSWORD_LENGTH_MIN) {
      throw new UsageError(`the password needs at least ${PASSWORD_LENGTH_MIN} characters`);
    }
    const passwordHash = await hashPassword(password);
    const user = await withTenant(db, tenantId, (tx) =>
      createStaffUser(tx, { tenantId, email, role: role.data, passwordHash }),
    );
    return { userId: user.userId, tenantId, email: user.email, role: user.role };
  },
  'mfa reseal': (db, flags) => resealTenantSecrets(db, readEnv(), required(flags, 'tenant')),
  'webhook-endpoint create': async (db, flags) =>
    createWebhookEndpoint(db, required(flags, 'tenant'), { source: required(flags, 'source') }),
  ...proposalCommands,
};

/** Node's parser errors (an unknown option, a flag without its value) are usage errors too. */
function parseFlags(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        name: { type: 'string' },
        slug: { type: 'string' },
        mfa: { type: 'string' },
        admin: { type: 'string' },
        admin2: { type: 'string' },
        'single-admin': { type: 'boolean' },
        'fresh-seconds': { type: 'string' },
        tenant: { type: 'string' },
        origin: { type: 'string' },
        file: { type: 'string' },
        'min-approvals': { type: 'string' },
        label: { type: 'string' },
        scopes: { type: 'string' },
        expires: { type: 'string' },
        'key-id': { type: 'string' },
        account: { type: 'string' },
        asset: { type: 'string' },
        amount: { type: 'string' },
        key: { type: 'string' },
        reference: { type: 'string' },
        source: { type: 'string' },
        network: { type: 'string' },
        address: { type: 'string' },
        'key-ref': { type: 'string' },
        'next-nonce': { type: 'string' },
        'pkcs11-module': { type: 'string' },
        'pkcs11-token': { type: 'string' },
        'pkcs11-pin-ref': { type: 'string' },
        'auto-approve-max': { type: 'string' },
        'four-eyes-min': { type: 'string' },
        status: { type: 'string' },
        'break-id': { type: 'string' },
        by: { type: 'string' },
        evidence: { type: 'string' },
        id: { type: 'string' },
        url: { type: 'string' },
        email: { type: 'string' },
        role: { type: 'string' },
        password: { type: 'string' },
        as: { type: 'string' },
        reason: { type: 'string' },
        scope: { type: 'string' },
        hash: { type: 'string' },
        code: { type: 'string' },
        state: { type: 'string' },
        cursor: { type: 'string' },
        run: { type: 'string' },
        out: { type: 'string' },
        log: { type: 'string' },
        secret: { type: 'string' },
        'public-key': { type: 'string' },
        csv: { type: 'boolean' },
        template: { type: 'string' },
        none: { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean' },
      },
    });
  } catch (error) {
    if (error instanceof Error && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS')) {
      throw new UsageError(error.message);
    }
    throw error;
  }
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv);
  const name = positionals.join(' ');
  if (values.help || name === '' || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  if (positionals[0] === 'reconcile') return reconcileCommand(positionals.slice(1), values);
  if (positionals[0] === 'audit') return auditCommand(positionals.slice(1), values);
  if (positionals[0] === 'signer') return signerCommand(positionals.slice(1), values);
  if (name === 'worker')
    return runWorker(typeof values.id === 'string' ? values.id : `worker-${process.pid}`);
  const run = commands[name];
  if (name !== 'migrate' && !run) {
    process.stderr.write(`unknown command: ${name}\n\n${USAGE}\n`);
    return 2;
  }
  const env = readEnv();
  const database = await openConfiguredDatabase(env, { purpose: 'cli' });
  try {
    // Every command applies pending migrations first (as the owner role), so a fresh database works.
    await database.migrateAsOwner();
    if (name === 'migrate') {
      print({ migrated: true, database: database.kind }, values.json === true);
      return 0;
    }
    const result = await (run as NonNullable<typeof run>)(database.db, values);
    print(result, values.json === true);
    return 0;
  } finally {
    await database.close();
  }
}

/**
 * A worker process: several may run at once against one PostgreSQL; each leases work with
 * SKIP LOCKED and conditional updates. Stops cleanly on SIGINT or SIGTERM (a SIGKILL is survived
 * too: another worker takes over after the lease).
 */
async function runWorker(workerId: string): Promise<number> {
  const env = readEnv();
  if (!env.DATABASE_URL)
    throw new UsageError('worker needs DATABASE_URL (embedded mode runs its worker inside pnpm start)');
  const log = createLogger({ level: env.LOG_LEVEL });
  const database = await openConfiguredDatabase(env, { purpose: 'cli' });
  await database.migrateAsOwner();
  const moneyMovers = await startMoneyMovers({ ...env, IDEM_WORKER_IN_PROCESS: false }, database.db, log, {
    embedded: false,
  });
  const worker = createWorker({
    db: database.db,
    rails: moneyMovers.rails,
    log,
    workerId,
    ...workerSettingsFrom(env),
  });
  worker.start(env.IDEM_WORKER_INTERVAL_MS);
  process.stdout.write(`${JSON.stringify({ event: 'worker-started', workerId })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await worker.stop();
  await moneyMovers.stop();
  await database.close();
  log.flush();
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (error instanceof UsageError) {
      process.stderr.write(`${error.message}\n\n${USAGE}\n`);
      process.exit(2);
    }
    const message = error instanceof IdemError ? `${error.code}: ${error.message}` : String(error);
    process.stderr.write(`idem: ${message}\n`);
    process.exit(1);
  },
);

/**
 * The first admins a new tenant names: two (--admin, --admin2), so no control can be loosened by
 * one person from the start, or one with --single-admin (docs/GOVERNANCE.md, single-admin mode).
 * Checked before anything is created.
 */
function firstAdminEmails(flags: Record<string, string | boolean | undefined>): string[] {
  // No admin named: the tenant stays in setup mode (no staff) until the deployment adds them.
  if (flags.admin === undefined && flags.admin2 === undefined && flags['single-admin'] !== true) return [];
  const first = required(flags, 'admin');
  const second = typeof flags.admin2 === 'string' ? flags.admin2 : undefined;
  if (!second && flags['single-admin'] !== true)
    throw new UsageError('name two admins (--admin, --admin2), or one with --single-admin');
  if (second && flags['single-admin'] === true) throw new UsageError('--single-admin names one admin');
  const emails = second ? [first, second] : [first];
  for (const email of emails)
    if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw new UsageError('--admin must be an e-mail address');
  return emails;
}

/** Creates the named admins, each with a one-time initial password shown once in this answer. */
async function createFirstAdmins(
  db: Database,
  tenantId: string,
  flags: Record<string, string | boolean | undefined>,
) {
  const emails = firstAdminEmails(flags);
  if (emails.length === 0) return { admins: [], mode: 'setup' };
  if (emails.length === 1) await setTenantGovernance(db, { tenantId, singleAdmin: true });
  const admins: { email: string; userId: string; initialPassword: string }[] = [];
  for (const email of emails) {
    const initialPassword = randomBytes(18).toString('base64url');
    const passwordHash = await hashPassword(initialPassword);
    const user = await withTenant(db, tenantId, (tx) =>
      createStaffUser(tx, { tenantId, email, role: 'admin', passwordHash }),
    );
    admins.push({ email: user.email, userId: user.userId, initialPassword });
  }
  return { admins, mode: emails.length === 1 ? 'single_admin' : 'quorum' };
}
