import { parseArgs } from 'node:util';
import { IdemError } from '@idem/contracts';
import {
  createApiKey,
  createTenant,
  createWebhookEndpoint,
  type Database,
  recordDeposit,
  revokeApiKey,
  toView,
  withTenant,
} from '@idem/core';
import { openConfiguredDatabase } from '../database.ts';
import { readEnv } from '../env.ts';

const USAGE = `Usage: pnpm idem <command> [options]

  migrate                                         apply database migrations
  tenant create --name NAME [--json]              create a tenant (BTC, ETH, USDC) and its first API key
  apikey create --tenant ID [--label L] [--json]  mint an API key (shown once)
  apikey revoke --tenant ID --key-id KEY_ID       revoke an API key
  deposit --tenant ID --account REF --asset CODE --amount MINOR --key KEY [--reference REF] [--json]
                                                  credit an account through the deposit path (C24)
  webhook-endpoint create --tenant ID --source NAME [--json]
                                                  create a webhook endpoint; prints its id and secret

Works against DATABASE_URL, or the embedded database in IDEM_DATA_DIR while the server is stopped.`;

type Flags = Record<string, string | boolean | undefined>;

/** Each command takes the open database and its flags, and returns what to print. */
const commands: Record<string, (db: Database, flags: Flags) => Promise<Record<string, unknown>>> = {
  'tenant create': async (db, flags) => {
    const { tenantId } = await createTenant(db, { name: required(flags, 'name') });
    const { apiKey, keyId } = await createApiKey(db, tenantId, { label: 'initial' });
    return { tenantId, apiKey, keyId };
  },
  'apikey create': async (db, flags) => {
    const label = typeof flags.label === 'string' ? flags.label : 'cli';
    return createApiKey(db, required(flags, 'tenant'), { label });
  },
  'apikey revoke': async (db, flags) => {
    await revokeApiKey(db, required(flags, 'tenant'), required(flags, 'key-id'));
    return { revoked: required(flags, 'key-id') };
  },
  deposit: async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const idempotencyKey = required(flags, 'key');
    const claim = await withTenant(db, tenantId, (tx) =>
      recordDeposit(tx, {
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
      }),
    );
    return { outcome: claim.outcome, deposit: toView(claim.operation) };
  },
  'webhook-endpoint create': async (db, flags) =>
    createWebhookEndpoint(db, required(flags, 'tenant'), { source: required(flags, 'source') }),
};

function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      tenant: { type: 'string' },
      label: { type: 'string' },
      'key-id': { type: 'string' },
      account: { type: 'string' },
      asset: { type: 'string' },
      amount: { type: 'string' },
      key: { type: 'string' },
      reference: { type: 'string' },
      source: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  const name = positionals.join(' ');
  if (values.help || name === '' || name === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
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

function print(result: Record<string, unknown>, json: boolean): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(result)}\n`);
    return;
  }
  for (const [key, value] of Object.entries(result)) {
    process.stdout.write(`${key}: ${typeof value === 'object' ? JSON.stringify(value) : String(value)}\n`);
  }
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
