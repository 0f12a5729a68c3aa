import { createHash } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import { type Database, normalizeEmail, rowsOf, withTenant } from '@idem/core';
import { sql } from 'drizzle-orm';

/**
 * Bounds password guessing (I11-F7). Every attempt is counted in PostgreSQL, before its password is
 * checked, against two budgets shared by all server processes: per (tenant, e-mail), 10 per 15
 * minutes, and per client address across tenants, 100 per 15 minutes (the limits live in the
 * idem_sign_in_take function, core/sql/idem_sign_in_take.sql). A correct password clears the
 * account's counter and gives the address its attempt back. Windows end by time only; nothing
 * resets them wholesale. Only SHA-256 digests reach the database, never an e-mail or an address.
 */
export interface SignInAttempt {
  tenantId: string;
  email: string;
  /** The client address as the server decided it (http/client-address.ts). */
  clientAddress: string;
}

/** Takes one attempt; answers 0 to go ahead, or the milliseconds until a budget has room again. */
export async function takeSignInAttempt(db: Database, attempt: SignInAttempt): Promise<number> {
  const { account, address } = keysOf(attempt);
  // Under the application role (withTenant), which may only EXECUTE the function.
  const rows = await withTenant(db, attempt.tenantId, async (tx) =>
    rowsOf<{ wait_ms: number }>(
      await tx.execute(
        sql`select idem_sign_in_take(${attempt.tenantId}::uuid, ${account}, ${address}) as wait_ms`,
      ),
    ),
  );
  return Number(rows[0]?.wait_ms ?? 0);
}

export async function signInSucceeded(db: Database, attempt: SignInAttempt): Promise<void> {
  const { account, address } = keysOf(attempt);
  await withTenant(db, attempt.tenantId, (tx) =>
    tx.execute(sql`select idem_sign_in_succeeded(${attempt.tenantId}::uuid, ${account}, ${address})`),
  );
}

/** The digests stored for an attempt: exported so tests can look for (and not find) clear text. */
export function keysOf(attempt: SignInAttempt): { account: string; address: string } {
  return {
    account: sha256(`idem-sign-in-account\n${attempt.tenantId}\n${normalizeEmail(attempt.email)}`),
    address: sha256(`idem-sign-in-address\n${addressBudgetOf(attempt.clientAddress)}`),
  };
}

/**
 * The unit an address budget covers: an IPv4 address (IPv4-mapped IPv6 included), or an IPv6 /64,
 * since one subscriber usually holds a whole /64 and could otherwise take a fresh budget per guess.
 */
export function addressBudgetOf(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped?.[1]) return mapped[1];
  if (isIPv4(address)) return address;
  const bare = address.split('%')[0] ?? '';
  if (!isIPv6(bare)) return address;
  const [head = '', tail] = bare.split('::');
  const groups = (part: string) => (part === '' ? [] : part.split(':'));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  // An embedded IPv4 tail fills two groups; it never reaches the first four.
  const width = (parts: string[]) => parts.reduce((sum, part) => sum + (part.includes('.') ? 2 : 1), 0);
  const full = [...left, ...Array<string>(8 - width(left) - width(right)).fill('0'), ...right];
  const prefix = full.slice(0, 4).map((group) => Number.parseInt(group, 16).toString(16));
  return `${prefix.join(':')}::/64`;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * A cap on concurrent argon2id verifications in this process (19 MiB and tens of milliseconds
 * each). Beyond it a sign-in is refused at once rather than queued: a queue would let a flood of
 * sign-ins hold memory and delay every honest one behind it.
 */
export class PasswordCheckCap {
  private running = 0;

  constructor(private readonly max: number) {}

  /** A release function when a slot is free, null when the cap is reached. */
  tryAcquire(): (() => void) | null {
    if (this.running >= this.max) return null;
    this.running += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.running -= 1;
    };
  }
}
