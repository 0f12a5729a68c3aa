import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DatabaseHandle } from '@idem/core';
import type { DestinationStream, Logger } from 'pino';
import { loadMfaKeys, type MfaKeyRing } from './auth/totp-secrets.ts';
import { openConfiguredDatabase } from './database.ts';
import { DEMO_ACCOUNT, demoCustomerLink, seedDemoTenant } from './demo.ts';
import { type Env, egressPolicyFrom, isDevelopment } from './env.ts';
import { createIdemServer } from './http/server.ts';
import { createLogger } from './logger.ts';
import { startMailSender } from './mail.ts';
import { createMetrics } from './metrics.ts';
import { startMoneyMovers } from './money-movers.ts';
import { railReconciler } from './reconciler.ts';
import { railWitness } from './settlement-witness.ts';

export interface RunningServer {
  server: Server;
  port: number;
  log: Logger;
  close(): Promise<void>;
}

/** Opens the database, applies migrations, seeds the demo tenant (embedded mode only) and listens. */
export async function startServer(
  env: Env,
  options: {
    logDestination?: DestinationStream;
    announce?: (line: string) => void;
    /** An already open, migrated database (tests); the server then leaves closing it to the caller. */
    database?: DatabaseHandle;
  } = {},
): Promise<RunningServer> {
  const log = createLogger({
    level: env.LOG_LEVEL,
    ...(options.logDestination ? { destination: options.logDestination } : {}),
  });
  const announce = options.announce ?? ((line: string) => process.stdout.write(`${line}\n`));
  // The key file is read before anything starts: a bad one stops the start, not the first sign-in.
  const mfaKeys = mfaKeysOf(env, { handedDatabase: options.database !== undefined, announce, log });
  const database = options.database
    ? { ...options.database, close: async () => {} }
    : await openConfiguredDatabase(env, { purpose: 'server' });
  if (!options.database && env.IDEM_MIGRATE_ON_START) await openedMigrate(database);

  const moneyMovers = await startMoneyMovers(env, database.db, log, {
    embedded: database.kind === 'pglite' && !options.database,
  });
  for (const line of moneyMovers.describe) announce(`Idem: started ${line}`);

  if (database.kind === 'pglite') {
    const demo = await seedDemoTenant(database.db, { evm: moneyMovers.rails.config.evm });
    if (demo) {
      announce(
        [
          '',
          'Idem: created a demo tenant on this new embedded database.',
          `  tenant id: ${demo.tenantId}`,
          `  organisation (staff sign-in): ${demo.slug}`,
          `  API key:   ${demo.apiKey}`,
          `  account ${DEMO_ACCOUNT} holds 2 BTC, 10 ETH and 10,000 USDC.`,
          '  The key is shown once; store it now. (pnpm idem apikey create --tenant <id> mints another.)',
          '  Staff sign-in (passwords shown once; pnpm idem user create adds more):',
          ...demo.staff.map(
            (member) => `    ${member.role.padEnd(8)} ${member.email}  password: ${member.password}`,
          ),
          '',
        ].join('\n'),
      );
    }
  }

  const embedded = database.kind === 'pglite' && !options.database;
  const development = isDevelopment(env, { embedded });
  const mail = startMailSender(env, database.db, log, { development, announce });
  const metrics = createMetrics(database.db, {
    cacheMs: env.IDEM_METRICS_CACHE_MS,
    settledCacheMs: env.IDEM_METRICS_SETTLED_CACHE_MS,
  });
  // /metrics always asks for a bearer token. Development without one gets a token for this run,
  // printed like the demo's API key; a deployment without one serves no metrics (and says so).
  let metricsToken = env.IDEM_METRICS_TOKEN ?? null;
  if (!metricsToken && development) {
    metricsToken = randomBytes(24).toString('base64url');
    announce(`Idem: metrics token for this run (set IDEM_METRICS_TOKEN to choose one): ${metricsToken}`);
  } else if (!metricsToken) {
    log.warn('IDEM_METRICS_TOKEN is not set: /metrics answers 404');
  }
  const server = createIdemServer({
    db: database.db,
    env,
    log,
    metrics,
    development,
    metricsToken,
    mfaKeys,
    egress: egressPolicyFrom(env, { embedded }),
    witness: railWitness(database.db, moneyMovers.rails),
    reconciler: railReconciler(database.db, moneyMovers.rails, log),
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(env.PORT, env.HOST, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ port, database: database.kind }, 'listening');
  // Also in plain text, whatever LOG_LEVEL is: people and test harnesses read the port from it.
  announce(`Idem listening on http://${env.HOST}:${port} (${database.kind})`);
  if (database.kind === 'pglite' && !options.database) {
    const baseUrl = env.IDEM_PUBLIC_URL ?? `http://${env.HOST}:${port}`;
    const link = await demoCustomerLink(database.db, baseUrl);
    if (link) {
      const staffLogin = link.slug ? `?org=${link.slug}` : `?tenant=${link.tenantId}`;
      announce(`Idem: staff screens at ${baseUrl}/staff/login${staffLogin}`);
      announce(`Idem: demo customer link for ${DEMO_ACCOUNT} (one use, 10 minutes): ${link.url}`);
    }
  }

  return {
    server,
    port,
    log,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await mail?.stop();
      await moneyMovers.stop();
      await database.close();
      log.flush();
    },
  };
}

async function openedMigrate(database: DatabaseHandle): Promise<void> {
  const withOwner = database as DatabaseHandle & { migrateAsOwner?: () => Promise<void> };
  await (withOwner.migrateAsOwner ? withOwner.migrateAsOwner() : database.migrate());
}

/** The TOTP key ring (auth/totp-secrets.ts), saying when development made its key file. */
function mfaKeysOf(
  env: Env,
  options: { handedDatabase: boolean; announce: (line: string) => void; log: Logger },
): MfaKeyRing | null {
  const { ring, created } = loadMfaKeys({
    keyFile: env.IDEM_MFA_KEY_FILE,
    dataDir: env.IDEM_DATA_DIR,
    // Embedded exactly when no database is handed in and none is named (openConfiguredDatabase).
    development: isDevelopment(env, { embedded: !options.handedDatabase && !env.DATABASE_URL }),
  });
  if (ring && created) {
    options.announce(
      `Idem: made a TOTP key file for development at ${ring.path} (it seals staff TOTP secrets; ` +
        'set IDEM_MFA_KEY_FILE to your own in production and keep it out of database backups)',
    );
  } else if (!ring) {
    options.log.warn(
      'IDEM_MFA_KEY_FILE is not set: staff TOTP enrolment and codes are refused (MFA_KEY_UNAVAILABLE)',
    );
  }
  return ring;
}
