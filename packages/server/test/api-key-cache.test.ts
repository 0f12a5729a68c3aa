import type { AuthenticatedApiKey } from '@idem/core';
import { describe, expect, it, vi } from 'vitest';
import { ApiKeyCache } from '../src/auth/api-key-cache.ts';

const who: AuthenticatedApiKey = {
  tenantId: '00000000-0000-4000-8000-000000000001',
  keyId: 'k1',
  scopes: ['read'],
  expiresAt: null,
};

describe('the authenticated API key cache', () => {
  it('remembers a key for its TTL only, by digest', () => {
    vi.useFakeTimers();
    try {
      const cache = new ApiKeyCache(5_000);
      cache.set('idem_secret_1', who);
      expect(cache.get('idem_secret_1')).toEqual(who);
      expect(cache.get('idem_secret_2')).toBeNull();
      vi.advanceTimersByTime(5_001);
      expect(cache.get('idem_secret_1')).toBeNull();
      expect(
        JSON.stringify([...(cache as unknown as { entries: Map<string, unknown> }).entries.keys()]),
      ).not.toContain('secret');
    } finally {
      vi.useRealTimers();
    }
  });

  it('evicts the oldest entry at capacity, and a TTL of 0 turns it off', () => {
    const cache = new ApiKeyCache(5_000, 2);
    cache.set('a', who);
    cache.set('b', who);
    cache.set('c', who);
    expect(cache.get('a')).toBeNull();
    expect(cache.get('c')).toEqual(who);
    const off = new ApiKeyCache(0);
    off.set('a', who);
    expect(off.get('a')).toBeNull();
  });

  it('I31-KEYS never answers for a key past its own expiry, whatever the TTL', () => {
    vi.useFakeTimers();
    try {
      const cache = new ApiKeyCache(60_000);
      const expiring = { ...who, expiresAt: new Date(Date.now() + 1_000) };
      cache.set('idem_expiring', expiring);
      expect(cache.get('idem_expiring')).toEqual(expiring);
      vi.advanceTimersByTime(1_000);
      expect(cache.get('idem_expiring')).toBeNull();
      // A key already past its expiry is not remembered at all.
      cache.set('idem_expired', { ...who, expiresAt: new Date(Date.now() - 1) });
      expect(cache.get('idem_expired')).toBeNull();
    } finally {
      vi.useRealTimers();
    }
  });
});
