import { createHash } from 'node:crypto';

/**
 * Remembers API keys that authenticated, for a few seconds, so a busy integrator's requests do not
 * each pay a database transaction for the lookup. Only the key's SHA-256 is kept. A revocation
 * made on another server therefore takes effect within the TTL (IDEM_API_KEY_CACHE_MS, default 5 s;
 * 0 turns caching off); one made through this server's staff screens forgets the key at once.
 * Failures are never cached.
 */
export class ApiKeyCache {
  private readonly entries = new Map<string, { tenantId: string; keyId: string; expiresAt: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly capacity = 10_000,
  ) {}

  get(apiKey: string): { tenantId: string; keyId: string } | null {
    if (this.ttlMs <= 0) return null;
    const digest = hash(apiKey);
    const entry = this.entries.get(digest);
    if (!entry) return null;
    if (entry.expiresAt <= Date.now()) {
      this.entries.delete(digest);
      return null;
    }
    return { tenantId: entry.tenantId, keyId: entry.keyId };
  }

  set(apiKey: string, value: { tenantId: string; keyId: string }): void {
    if (this.ttlMs <= 0) return;
    // Oldest first out: a Map iterates in insertion order.
    if (this.entries.size >= this.capacity) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.set(hash(apiKey), { ...value, expiresAt: Date.now() + this.ttlMs });
  }

  /**
   * Drops a key at once, so a revocation made on this server refuses the key on its next request
   * instead of after the TTL. Other servers still hold it until their TTL ends.
   */
  forget(keyId: string): void {
    for (const [digest, entry] of this.entries) {
      if (entry.keyId === keyId) this.entries.delete(digest);
    }
  }
}

function hash(apiKey: string): string {
  return createHash('sha256').update(apiKey, 'utf8').digest('hex');
}
