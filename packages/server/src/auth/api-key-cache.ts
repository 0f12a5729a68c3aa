import { createHash } from 'node:crypto';
import type { AuthenticatedApiKey } from '@idem/core';

/**
 * Remembers API keys that authenticated, for a few seconds, so a busy integrator's requests do not
 * each pay a database transaction for the lookup. Only the key's SHA-256 is kept, with the key's
 * tenant, id, scopes and expiry. A revocation or a change of scopes made on another server
 * therefore takes effect within the TTL (IDEM_API_KEY_CACHE_MS, default 5 s; 0 turns caching off);
 * one made through this server's staff screens forgets the key at once. An entry never outlives
 * the key's own expiry, so an expired key is refused at its expiry whatever the TTL. Failures are
 * never cached.
 */
export class ApiKeyCache {
  private readonly entries = new Map<string, { key: AuthenticatedApiKey; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly capacity = 10_000,
  ) {}

  get(apiKey: string, now = Date.now()): AuthenticatedApiKey | null {
    if (this.ttlMs <= 0) return null;
    const digest = hash(apiKey);
    const entry = this.entries.get(digest);
    if (!entry) return null;
    if (entry.expiresAt <= now) {
      this.entries.delete(digest);
      return null;
    }
    return entry.key;
  }

  set(apiKey: string, key: AuthenticatedApiKey, now = Date.now()): void {
    if (this.ttlMs <= 0) return;
    const expiresAt = Math.min(now + this.ttlMs, key.expiresAt?.getTime() ?? Number.POSITIVE_INFINITY);
    if (expiresAt <= now) return;
    // Oldest first out: a Map iterates in insertion order.
    if (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(hash(apiKey), { key, expiresAt });
  }

  /**
   * Drops a key at once, so a revocation or a narrowing of scopes made on this server applies to
   * the key's next request instead of after the TTL. Other servers still hold it until their TTL
   * ends.
   */
  forget(keyId: string): void {
    for (const [digest, entry] of this.entries) {
      if (entry.key.keyId === keyId) this.entries.delete(digest);
    }
  }
}

function hash(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}
