/**
 * The signer service's own append-only log: one JSON line per request it signed or refused, each
 * carrying the SHA-256 of the line before it (`prev`) and of itself (`hash`), so a line removed,
 * changed or reordered breaks the chain from there on. The log is written (and fsynced) before a
 * signature leaves the process; it is replayed at start to rebuild which (wallet, nonce) pairs were
 * signed for which operation, and a broken chain stops the start.
 */

import { createHash } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, writeSync } from 'node:fs';
import { IdemError } from '@idem/contracts';

export interface SignerLogEvent {
  outcome: 'signed' | 'refused';
  worker: string | null;
  tenantId?: string;
  operationId?: string;
  /** A reconciliation run the report key signed. */
  runId?: string;
  kind?: string;
  wallet?: string;
  nonce?: number;
  /**
   * keccak-256 of the signed transaction (signed) or of the unsigned one (refused); for a report,
   * SHA-256 of its payload.
   */
  txHash?: string;
  to?: string | null;
  value?: string;
  code?: string;
  reason?: string;
}

export interface SignerLogLine extends SignerLogEvent {
  seq: number;
  at: string;
  prev: string;
  hash: string;
}

const genesis = '0'.repeat(64);

/** SHA-256 of the line as written without its `hash` (JSON keeps the order its keys were written in). */
function lineHash(line: Omit<SignerLogLine, 'hash'>): string {
  return createHash('sha256').update(JSON.stringify(line), 'utf8').digest('hex');
}

/** Checks every line's hash and link; returns the lines, or where the chain breaks. */
export function verifySignerLog(
  path: string,
): { ok: true; lines: SignerLogLine[] } | { ok: false; brokenAt: number; reason: string } {
  if (!existsSync(path)) return { ok: true, lines: [] };
  const lines: SignerLogLine[] = [];
  let prev = genesis;
  const texts = readFileSync(path, 'utf8')
    .split('\n')
    .filter((text) => text !== '');
  for (const [index, text] of texts.entries()) {
    let line: SignerLogLine;
    try {
      line = JSON.parse(text) as SignerLogLine;
    } catch {
      return { ok: false, brokenAt: index + 1, reason: 'not JSON' };
    }
    const { hash, ...rest } = line;
    if (line.seq !== index + 1)
      return { ok: false, brokenAt: index + 1, reason: 'sequence number out of order' };
    if (line.prev !== prev)
      return { ok: false, brokenAt: index + 1, reason: 'does not link to the line before' };
    if (lineHash(rest) !== hash)
      return { ok: false, brokenAt: index + 1, reason: 'hash does not match the line' };
    lines.push(line);
    prev = hash;
  }
  return { ok: true, lines };
}

export class SignerLog {
  private prev: string;
  private seq: number;
  private constructor(
    private readonly fd: number,
    lines: SignerLogLine[],
  ) {
    this.prev = lines.at(-1)?.hash ?? genesis;
    this.seq = lines.length;
  }

  /** Opens the log for appending after verifying it; returns the lines already in it. */
  static open(path: string): { log: SignerLog; lines: SignerLogLine[] } {
    const verified = verifySignerLog(path);
    if (!verified.ok) {
      throw new IdemError(
        'VALIDATION',
        `the signer log ${path} is broken at line ${verified.brokenAt} (${verified.reason}); refusing to start`,
      );
    }
    const fd = openSync(path, 'a', 0o600);
    return { log: new SignerLog(fd, verified.lines), lines: verified.lines };
  }

  /** Appends one line and flushes it to disk before returning. */
  append(event: SignerLogEvent): SignerLogLine {
    const body = { ...event, seq: this.seq + 1, at: new Date().toISOString(), prev: this.prev };
    const line: SignerLogLine = { ...body, hash: lineHash(body) };
    writeSync(this.fd, `${JSON.stringify(line)}\n`);
    fsyncSync(this.fd);
    this.seq = line.seq;
    this.prev = line.hash;
    return line;
  }

  close(): void {
    closeSync(this.fd);
  }
}
