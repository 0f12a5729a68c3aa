/**
 * The signer service's own configuration, read from variables that only this process is given
 * (docs/SIGNING.md). The PKCS#11 module must be one of the allowlisted paths; the PIN comes from a
 * variable or a file of this process, never from the database or a worker; workers are named with
 * the SHA-256 of their bearer credential, never the credential itself.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { IdemError } from '@idem/contracts';
import { pkcs11ModulePathSchema, pkcs11TokenLabelSchema } from '@idem/rails';
import { z } from 'zod';
import { readTrustFile, type TrustFile } from './trust-file.ts';

export interface SignerConfig {
  modulePath: string;
  tokenLabel: string;
  /** Read once at start; the variable is removed from the environment after. */
  pin: string;
  host: string;
  port: number;
  /** Worker name by the SHA-256 (hex) of its bearer credential. */
  workers: { name: string; tokenSha256: Buffer }[];
  databaseUrl: string;
  chainId: number;
  logPath: string;
  /** The Ed25519 report key's PEM file (created on the first start); none: no report signing. */
  reportKeyPath: string | null;
  gasLimitMax: bigint;
  maxFeePerGasMax: bigint;
  /** The anchors, limits and origins pinned at bootstrap (trust-file.ts), read once at start. */
  trust: TrustFile;
}

const envSchema = z.object({
  IDEM_SIGNER_PKCS11_MODULE: z.string().min(1),
  IDEM_SIGNER_PKCS11_MODULES: z.string().min(1),
  IDEM_SIGNER_PKCS11_TOKEN: z.string().min(1),
  IDEM_SIGNER_PKCS11_PIN: z.string().min(1).optional(),
  IDEM_SIGNER_PKCS11_PIN_FILE: z.string().min(1).optional(),
  IDEM_SIGNER_LISTEN: z.string().default('127.0.0.1:8787'),
  IDEM_SIGNER_WORKERS: z.string().min(1),
  IDEM_SIGNER_DATABASE_URL: z.string().min(1),
  IDEM_SIGNER_CHAIN_ID: z.coerce.number().int().min(1),
  IDEM_SIGNER_LOG: z.string().min(1),
  IDEM_SIGNER_REPORT_KEY_FILE: z.string().min(1).optional(),
  /** Required: without it the service would have to believe the database's approvals. */
  IDEM_SIGNER_TRUST_FILE: z.string().min(1),
  IDEM_SIGNER_GAS_LIMIT_MAX: z.coerce.bigint().positive().default(300_000n),
  /** The network's ceiling per gas (the fee policy's maxFeePerGasWei default: 500 gwei). */
  IDEM_SIGNER_MAX_FEE_PER_GAS_WEI: z.coerce.bigint().positive().default(500_000_000_000n),
});

const refuse = (message: string): never => {
  throw new IdemError('VALIDATION', message);
};

/** Loopback only: the service is reached by workers on the same host, never over a network. */
function listenAddress(value: string): { host: string; port: number } {
  const match = /^(?:\[([0-9a-fA-F:]+)\]|([0-9.]+|localhost)):(\d{1,5})$/.exec(value);
  const host = match?.[1] ?? match?.[2];
  const port = Number(match?.[3]);
  if (!host || !Number.isInteger(port) || port > 65_535) {
    return refuse('IDEM_SIGNER_LISTEN: host:port, e.g. 127.0.0.1:8787');
  }
  const loopback = host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
  if (!loopback)
    refuse(`IDEM_SIGNER_LISTEN: ${host} is not a loopback address; the service listens on loopback only`);
  return { host, port };
}

function workerCredentials(value: string): SignerConfig['workers'] {
  return value.split(',').map((entry) => {
    const [name, digest] = entry.trim().split('=');
    if (!name || !/^[A-Za-z0-9._-]{1,64}$/.test(name) || !digest || !/^[0-9a-f]{64}$/.test(digest)) {
      return refuse('IDEM_SIGNER_WORKERS: name=sha256hex of the worker token, comma-separated');
    }
    return { name, tokenSha256: Buffer.from(digest, 'hex') };
  });
}

export function readSignerConfig(env: NodeJS.ProcessEnv = process.env): SignerConfig {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    return refuse(`signer configuration: ${issues.join('; ')}`);
  }
  const e = parsed.data;
  const allowed = e.IDEM_SIGNER_PKCS11_MODULES.split(',').map((path) => path.trim());
  const modulePath = pkcs11ModulePathSchema.safeParse(e.IDEM_SIGNER_PKCS11_MODULE);
  if (!modulePath.success || !allowed.includes(modulePath.data)) {
    refuse(
      `IDEM_SIGNER_PKCS11_MODULE ${e.IDEM_SIGNER_PKCS11_MODULE} is not in the allowlist IDEM_SIGNER_PKCS11_MODULES; refusing to load it`,
    );
  }
  const tokenLabel = pkcs11TokenLabelSchema.safeParse(e.IDEM_SIGNER_PKCS11_TOKEN);
  if (!tokenLabel.success) refuse('IDEM_SIGNER_PKCS11_TOKEN: a token label');
  if (!!e.IDEM_SIGNER_PKCS11_PIN === !!e.IDEM_SIGNER_PKCS11_PIN_FILE) {
    refuse('set exactly one of IDEM_SIGNER_PKCS11_PIN and IDEM_SIGNER_PKCS11_PIN_FILE');
  }
  const pin =
    e.IDEM_SIGNER_PKCS11_PIN ??
    readFileSync(e.IDEM_SIGNER_PKCS11_PIN_FILE ?? '', 'utf8')
      .split('\n')[0]
      ?.trim();
  if (!pin) return refuse('the signer PIN is empty');
  return {
    modulePath: e.IDEM_SIGNER_PKCS11_MODULE,
    tokenLabel: e.IDEM_SIGNER_PKCS11_TOKEN,
    pin,
    ...listenAddress(e.IDEM_SIGNER_LISTEN),
    workers: workerCredentials(e.IDEM_SIGNER_WORKERS),
    databaseUrl: e.IDEM_SIGNER_DATABASE_URL,
    chainId: e.IDEM_SIGNER_CHAIN_ID,
    logPath: e.IDEM_SIGNER_LOG,
    reportKeyPath: e.IDEM_SIGNER_REPORT_KEY_FILE ?? null,
    gasLimitMax: e.IDEM_SIGNER_GAS_LIMIT_MAX,
    maxFeePerGasMax: e.IDEM_SIGNER_MAX_FEE_PER_GAS_WEI,
    trust: readTrustFile(e.IDEM_SIGNER_TRUST_FILE),
  };
}
