import { createHash, randomBytes } from 'node:crypto';
import { openDatabase } from '@idem/core';
import { serverUrl, type TestDatabase } from '@idem/testing/database';
import type { SoftHsmToken } from '@idem/testing/signer';
import { sql } from 'drizzle-orm';

/**
 * The signer service's own login for a test: a member of the read-only role idem_signer, named at
 * random (roles are the cluster's, not the test database's) and dropped by `drop`.
 */
export interface SignerLogin {
  name: string;
  /** The test database's URL under this login. */
  url: string;
  drop(): Promise<void>;
}

export async function createSignerLogin(t: TestDatabase, prefix: string): Promise<SignerLogin> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  await t.db.execute(sql.raw(`create role ${name} login in role idem_signer`));
  const login = new URL(t.url ?? '');
  login.username = name;
  login.password = '';
  return {
    name,
    url: login.toString(),
    drop: async () => {
      const admin = await openDatabase({ url: serverUrl() ?? '', maxConnections: 1 });
      try {
        await admin.db.execute(sql.raw(`drop role if exists ${name}`));
      } finally {
        await admin.close();
      }
    },
  };
}

/**
 * The environment `idem signer` runs with in these tests: the SoftHSM2 token's key, one worker
 * (`worker-a`, known by the hash of `workerToken`), the service's login, a loopback port of its
 * choosing, and its log and trust file; `more` adds or overrides settings.
 */
export function signerServiceEnv(options: {
  token: SoftHsmToken;
  workerToken: string;
  login: SignerLogin;
  chainId: number;
  logPath: string;
  trustFile: string;
  more?: Record<string, string>;
}): Record<string, string> {
  const { token } = options;
  return {
    SOFTHSM2_CONF: token.env.SOFTHSM2_CONF ?? '',
    IDEM_SIGNER_PKCS11_MODULE: token.modulePath,
    IDEM_SIGNER_PKCS11_MODULES: token.modulePath,
    IDEM_SIGNER_PKCS11_TOKEN: token.tokenLabel,
    IDEM_SIGNER_PKCS11_PIN: token.pin,
    IDEM_SIGNER_LISTEN: '127.0.0.1:0',
    IDEM_SIGNER_WORKERS: `worker-a=${createHash('sha256').update(options.workerToken).digest('hex')}`,
    IDEM_SIGNER_DATABASE_URL: options.login.url,
    IDEM_SIGNER_CHAIN_ID: String(options.chainId),
    IDEM_SIGNER_LOG: options.logPath,
    IDEM_SIGNER_TRUST_FILE: options.trustFile,
    LOG_LEVEL: 'warn',
    ...options.more,
  };
}
