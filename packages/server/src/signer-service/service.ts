/**
 * `idem signer`: the one process that holds the HSM session and its PIN (docs/SIGNING.md). Workers
 * ask it over loopback HTTP, each with its own bearer credential, to sign an UNSIGNED transaction
 * for an operation; it reads the operation, its approval, the hot wallet and the fee cap from the
 * database on its own connection in a read-only transaction, decodes the transaction and signs only
 * what the approval covers (policy.ts). Everything it signs or refuses goes to its hash-chained
 * log (log.ts) before the answer leaves. Requests are handled one at a time: the (wallet, nonce)
 * check and the log line that records the signature can never interleave.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ErrorCode, errorStatus, IdemError } from '@idem/contracts';
import {
  type Database,
  feeCapInForce,
  freezeCoversWhere,
  getHotWallet,
  getOperation,
  openDatabase,
  rowsOf,
  schema,
} from '@idem/core';
import {
  type DigestSigner,
  isPkcs11KeyRef,
  openPkcs11Key,
  parsePkcs11KeyRef,
  type SignRequest,
  signRequestSchema,
} from '@idem/rails';
import { and, eq, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { getAddress, type Hex, keccak256, parseTransaction, serializeTransaction } from 'viem';
import { assertApprovalTrusted } from './approval-trust.ts';
import type { SignerConfig } from './config.ts';
import { SignerLog, type SignerLogEvent, type SignerLogLine } from './log.ts';
import { checkSigning, type SignedIndex, type SigningFacts, SigningFrozen } from './policy.ts';
import { loadReportKey, publishedReportKey, signReportRequestSchema, signRun } from './report.ts';
import type { TrustFile } from './trust-file.ts';

export interface RunningSignerService {
  url: string;
  close(): Promise<void>;
}

const bodyBytesMax = 64 * 1024;

/** (wallet, nonce) -> operations and operation -> nonces, from the log's signed lines. */
function signedIndex(lines: SignerLogLine[]): SignedIndex & { add(line: SignerLogEvent): void } {
  const byNonce = new Map<string, Set<string>>();
  const byOperation = new Map<string, Set<number>>();
  const add = (line: SignerLogEvent) => {
    if (line.outcome !== 'signed' || !line.wallet || line.nonce === undefined || !line.operationId) return;
    const key = `${line.wallet.toLowerCase()}:${line.nonce}`;
    byNonce.set(key, (byNonce.get(key) ?? new Set()).add(line.operationId));
    byOperation.set(line.operationId, (byOperation.get(line.operationId) ?? new Set()).add(line.nonce));
  };
  for (const line of lines) add(line);
  return {
    add,
    operationsAt: (wallet, nonce) => byNonce.get(`${wallet.toLowerCase()}:${nonce}`) ?? new Set(),
    noncesOf: (operationId) => byOperation.get(operationId) ?? new Set(),
  };
}

/**
 * Reads what the approval covers, on the service's own connection (its login a member of the
 * read-only role idem_signer, migration signer_role), in a read-only transaction.
 */
async function readFacts(db: Database, request: SignRequest, trust: TrustFile): Promise<SigningFacts> {
  return db.transaction(async (tx) => {
    // One snapshot for the operation, its decisions and the chain of trust they rest on.
    await tx.execute(sql`set transaction isolation level repeatable read, read only`);
    // As the connection's own role (a member of the read-only idem_signer), bound to the tenant.
    await tx.execute(sql`select set_config('app.tenant_id', ${request.tenantId}, true)`);
    const operation = await getOperation(tx, request.tenantId, request.operationId);
    // A payment or a fee bump pays the destination: its approval must be one we believe. A cancel
    // pays nothing and is checked against the recorded attempt (policy.ts).
    if (request.kind !== 'cancel') await assertApprovalTrusted(tx, trust, operation);
    const wallet = await getHotWallet(tx, request.tenantId, operation.network);
    const [asset] = await tx
      .select({ contractAddress: schema.assets.contractAddress })
      .from(schema.assets)
      .where(and(eq(schema.assets.tenantId, request.tenantId), eq(schema.assets.code, operation.assetCode)));
    if (!asset) throw new IdemError('NOT_FOUND', `asset ${operation.assetCode} not found`);
    const cap = await feeCapInForce(tx, operation);
    // In the same snapshot as the approval: a freeze committed before it is seen, one after it
    // finds the signature already logged (the claim's own check stops what comes after).
    const freezes = rowsOf<{ freeze_id: string; scope: string }>(
      await tx.execute(sql`select f.freeze_id::text as freeze_id, f.scope from freezes f
         where ${freezeCoversWhere({
           tenantId: sql`${request.tenantId}::uuid`,
           assetCode: sql`${operation.assetCode}`,
           accountRef: sql`${operation.accountRef}`,
         })}
         order by f.frozen_at`),
    ).map((row) => ({ freezeId: row.freeze_id, scope: row.scope }));
    return { operation, wallet, tokenContract: asset.contractAddress, feeCapWei: cap.capMinor, freezes };
  });
}

/** The API's error codes, and the signer's own FROZEN (policy.ts SigningFrozen). */
type RefusalCode = ErrorCode | SigningFrozen['code'];

function refusalCode(error: unknown): RefusalCode {
  return error instanceof IdemError || error instanceof SigningFrozen ? error.code : 'VALIDATION';
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > bodyBytesMax) {
        reject(new IdemError('PAYLOAD_TOO_LARGE', 'request body over 64 KiB'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** The token's key for a wallet: module, token and PIN from our configuration; only the id from the row. */
function hsmKeys(config: SignerConfig): (wallet: SigningFacts['wallet']) => DigestSigner {
  const keys = new Map<string, DigestSigner>();
  const pin = config.pin;
  return (wallet) => {
    if (!isPkcs11KeyRef(wallet.keyRef)) {
      throw new IdemError(
        'VALIDATION',
        'the hot wallet has no HSM key; the signer service signs HSM keys only',
      );
    }
    const { keyId } = parsePkcs11KeyRef(wallet.keyRef);
    let key = keys.get(keyId);
    if (!key) {
      key = openPkcs11Key({
        modulePath: config.modulePath,
        tokenLabel: config.tokenLabel,
        keyId,
        pin: () => pin,
      });
      keys.set(keyId, key);
    }
    if (getAddress(key.address) !== getAddress(wallet.address)) {
      throw new IdemError(
        'VALIDATION',
        "the token's key does not belong to the hot wallet's registered address",
      );
    }
    return key;
  };
}

/** The worker a bearer credential belongs to (compared by SHA-256, in constant time), or null. */
function authenticate(workers: SignerConfig['workers'], header: string | undefined): string | null {
  const token = /^Bearer (\S{16,512})$/.exec(header ?? '')?.[1];
  if (!token) return null;
  const digest = createHash('sha256').update(token, 'utf8').digest();
  return workers.find((w) => timingSafeEqual(w.tokenSha256, digest))?.name ?? null;
}

export async function startSignerService(config: SignerConfig, log: Logger): Promise<RunningSignerService> {
  const opened = SignerLog.open(config.logPath);
  const signerLog = opened.log;
  const index = signedIndex(opened.lines);
  const database = await openDatabase({ url: config.databaseUrl, maxConnections: 4, batching: false });
  const keyFor = hsmKeys(config);

  async function sign(worker: string, request: SignRequest) {
    const parsed = parseTransaction(request.transaction as Hex);
    if (parsed.type !== 'eip1559' || parsed.r !== undefined || parsed.nonce === undefined || !parsed.gas) {
      throw new IdemError('VALIDATION', 'expected an unsigned EIP-1559 transaction with nonce and gas');
    }
    const unsigned = {
      ...parsed,
      nonce: parsed.nonce,
      gas: parsed.gas,
      maxFeePerGas: parsed.maxFeePerGas ?? 0n,
    };
    // Signed is exactly what was decoded: the canonical serialisation must be the bytes received.
    if (serializeTransaction(unsigned).toLowerCase() !== request.transaction.toLowerCase()) {
      throw new IdemError('VALIDATION', 'the transaction is not in canonical form');
    }
    const facts = await readFacts(database.db, request, config.trust);
    const base = {
      worker,
      tenantId: request.tenantId,
      operationId: request.operationId,
      kind: request.kind,
      wallet: facts.wallet.address,
      nonce: unsigned.nonce,
      to: unsigned.to ?? null,
      value: (unsigned.value ?? 0n).toString(),
    };
    checkSigning(request.kind, unsigned, facts, config, index);
    const key = keyFor(facts.wallet);
    const signature = await key.signDigest(keccak256(request.transaction as Hex));
    const event: SignerLogEvent = {
      outcome: 'signed',
      ...base,
      txHash: keccak256(serializeTransaction(unsigned, signature)),
    };
    // Logged (and on disk) before the signature leaves this process.
    signerLog.append(event);
    index.add(event);
    return { signature };
  }

  function refuse(res: ServerResponse, code: RefusalCode, message: string, event: Partial<SignerLogEvent>) {
    signerLog.append({ outcome: 'refused', worker: null, ...event, code, reason: message.slice(0, 300) });
    log.warn({ code, message, operationId: event.operationId, worker: event.worker }, 'signing refused');
    answer(res, code === 'FROZEN' ? SigningFrozen.status : errorStatus[code], { error: { code, message } });
  }

  let queue: Promise<unknown> = Promise.resolve();
  /** Runs one request at a time: the (wallet, nonce) check and the log line never interleave. */
  function inTurn<T>(work: () => Promise<T>): Promise<T> {
    const run = queue.then(work);
    queue = run.catch(() => undefined);
    return run;
  }

  const reportKey = config.reportKeyPath ? loadReportKey(config.reportKeyPath) : null;
  async function signReport(worker: string, body: unknown) {
    if (!reportKey) throw new IdemError('NOT_FOUND', 'this signer service has no report key');
    const request = signReportRequestSchema.safeParse(body);
    if (!request.success) throw new IdemError('VALIDATION', 'malformed report request');
    const report = await signRun(database.db, reportKey, request.data);
    signerLog.append({
      outcome: 'signed',
      worker,
      tenantId: request.data.tenantId,
      runId: request.data.runId,
      kind: 'report',
      txHash: `0x${createHash('sha256').update(report.payload).digest('hex')}`,
    });
    return report;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === 'GET' && req.url === '/v1/report-key' && reportKey) {
      answer(res, 200, publishedReportKey(reportKey));
      return;
    }
    const route = req.method === 'POST' ? req.url : undefined;
    if (route !== '/v1/sign' && route !== '/v1/sign-report') {
      answer(res, 404, {
        error: { code: 'NOT_FOUND', message: 'POST /v1/sign, POST /v1/sign-report, GET /v1/report-key' },
      });
      return;
    }
    const worker = authenticate(config.workers, req.headers.authorization);
    if (!worker) {
      refuse(res, 'UNAUTHORIZED', 'missing or unknown worker credential', {});
      return;
    }
    let request: SignRequest | undefined;
    try {
      const json: unknown = JSON.parse(await readBody(req));
      if (route === '/v1/sign-report') {
        answer(res, 200, await inTurn(() => signReport(worker, json)));
        return;
      }
      const body = signRequestSchema.safeParse(json);
      if (!body.success) throw new IdemError('VALIDATION', 'malformed signing request');
      const current = body.data;
      request = current;
      answer(res, 200, await inTurn(() => sign(worker, current)));
    } catch (error) {
      const code = refusalCode(error);
      const message = error instanceof Error ? error.message : String(error);
      refuse(res, code, message, {
        worker,
        ...(route === '/v1/sign-report' ? { kind: 'report' } : {}),
        ...(request
          ? {
              tenantId: request.tenantId,
              operationId: request.operationId,
              kind: request.kind,
              txHash: keccak256(request.transaction as Hex),
            }
          : {}),
      });
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      log.error({ message: String(error) }, 'signer service request failed');
      if (!res.headersSent) answer(res, 500, { error: { code: 'INTERNAL', message: 'internal error' } });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  return {
    url: `http://${host}:${port}`,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await database.close();
      signerLog.close();
    },
  };
}
