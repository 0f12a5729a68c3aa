import { createHash } from 'node:crypto';
import { IdemError } from '@idem/contracts';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { fund, newTenant, submit, withdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALL_API_KEY_SCOPES,
  actAsAppRole,
  authenticateApiKey,
  createApiKey,
  createWebhookEndpoint,
  findWebhookEndpoint,
  listOperations,
  operationStats,
  recordInboxEvent,
  recordInboxRejection,
  revokeApiKey,
  rowsOf,
  schema,
  tenantOfEndpoint,
  withAppRole,
  withTenant,
} from '../src/index.ts';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => {
  await database.dispose();
});

describe('API keys', () => {
  it('authenticate to their own tenant only, are stored as a hash, and stop working once revoked', async () => {
    const { db } = database;
    const tenantId = await newTenant(db);
    const { keyId, apiKey } = await createApiKey(db, tenantId, {
      scopes: ALL_API_KEY_SCOPES,
      createdBy: 'test',
    });
    expect(apiKey).toMatch(/^idem_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
    expect(await authenticateApiKey(db, apiKey)).toEqual({
      tenantId,
      keyId,
      scopes: [...ALL_API_KEY_SCOPES],
      expiresAt: null,
    });

    const stored = await withTenant(db, tenantId, (tx) => tx.select().from(schema.apiKeys));
    expect(stored).toHaveLength(1);
    expect(JSON.stringify(stored)).not.toContain(apiKey.slice(-43));
    expect(stored[0]?.keyHash).toBe(createHash('sha256').update(apiKey).digest('hex'));

    // The same secret under another tenant's id is a different key, and unknown.
    const other = await newTenant(db);
    const forged = apiKey.replace(tenantId.replaceAll('-', ''), other.replaceAll('-', ''));
    await expect(authenticateApiKey(db, forged)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });

    await revokeApiKey(db, tenantId, keyId);
    await expect(authenticateApiKey(db, apiKey)).rejects.toBeInstanceOf(IdemError);
    await expect(revokeApiKey(db, tenantId, keyId)).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it("I31-KEYS the database keeps a key's minter and expiry, and refuses a widening that does not name its widener", async () => {
    const { db } = database;
    const tenantId = await newTenant(db);
    const { keyId } = await createApiKey(db, tenantId, {
      scopes: ['read', 'withdraw'],
      createdBy: 'staff:minter',
    });
    const attempt = (change: ReturnType<typeof sql>) =>
      withTenant(db, tenantId, (tx) =>
        tx.execute(sql`update api_keys set ${change} where tenant_id = ${tenantId} and key_id = ${keyId}`),
      );
    // Under the application role (withTenant): each is refused by the guard or by a missing grant.
    await expect(attempt(sql`scopes = array['read', 'withdraw', 'webhooks']`)).rejects.toThrow();
    await expect(attempt(sql`created_by = 'staff:someone-else'`)).rejects.toThrow();
    await expect(attempt(sql`expires_at = now() + interval '1 day'`)).rejects.toThrow();
    await expect(attempt(sql`scopes = array['read', 'bogus']`)).rejects.toThrow();
    // A widening that names its widener still needs an approved, due control change
    // (governance-guard.test.ts has the one that applies); a narrowing that names nobody is allowed.
    await expect(
      attempt(
        sql`scopes = array['read', 'withdraw', 'webhooks'], widened_by = 'staff:widener', widened_at = now()`,
      ),
    ).rejects.toThrow();
    await attempt(sql`scopes = array['withdraw']`);
    await expect(attempt(sql`widened_by = 'staff:other', widened_at = now()`)).rejects.toThrow();
    const [row] = await withTenant(db, tenantId, (tx) => tx.select().from(schema.apiKeys));
    expect(row).toMatchObject({
      scopes: ['withdraw'],
      createdBy: 'staff:minter',
      widenedBy: null,
    });
  });

  it('refuses anything not shaped like a key without touching the database', async () => {
    for (const key of ['', 'idem_', 'Bearer x', `idem_${'0'.repeat(32)}_short`]) {
      await expect(authenticateApiKey(database.db, key)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    }
  });
});

describe('inbox', () => {
  async function endpoint() {
    const tenantId = await newTenant(database.db);
    const created = await createWebhookEndpoint(database.db, tenantId, { source: 'custodian' });
    return { tenantId, ...created };
  }
  const deposit = (reference: string, amountMinor = '100') =>
    JSON.stringify({
      type: 'deposit.confirmed',
      data: { reference, accountId: 'acct-1', asset: 'ETH', amountMinor },
    });
  function deliver(e: Awaited<ReturnType<typeof endpoint>>, eventId: string, rawBody: string) {
    return withTenant(database.db, e.tenantId, (tx) =>
      recordInboxEvent(tx, {
        tenantId: e.tenantId,
        endpointId: e.endpointId,
        source: e.source,
        eventId,
        rawBody,
      }),
    );
  }
  async function counts(tenantId: string) {
    return withTenant(database.db, tenantId, async (tx) => ({
      events: (await tx.select().from(schema.inboxEvents)).length,
      work: (await tx.select().from(schema.workItems)).length,
      quarantined: (await tx.select().from(schema.inboxQuarantine)).length,
    }));
  }

  it('endpoint ids name their tenant and are found only inside that tenant', async () => {
    const e = await endpoint();
    expect(tenantOfEndpoint(e.endpointId)).toBe(e.tenantId);
    expect(e.secret).toMatch(/^whsec_/);
    const other = await newTenant(database.db);
    const seen = await withTenant(database.db, other, (tx) => findWebhookEndpoint(tx, other, e.endpointId));
    expect(seen).toBeNull();
  });

  it('C18 a new event commits with its work item; a redelivery adds nothing', async () => {
    const e = await endpoint();
    expect((await deliver(e, 'evt-1', deposit('dep-1'))).outcome).toBe('ACCEPTED');
    expect((await deliver(e, 'evt-1', deposit('dep-1'))).outcome).toBe('DUPLICATE');
    expect(await counts(e.tenantId)).toEqual({ events: 1, work: 1, quarantined: 0 });
  });

  it('C19 the same event id with a different body is quarantined, once per body, never applied', async () => {
    const e = await endpoint();
    await deliver(e, 'evt-2', deposit('dep-2', '100'));
    expect((await deliver(e, 'evt-2', deposit('dep-2', '999'))).outcome).toBe('QUARANTINED');
    expect((await deliver(e, 'evt-2', deposit('dep-2', '999'))).outcome).toBe('QUARANTINED');
    expect(await counts(e.tenantId)).toEqual({ events: 1, work: 1, quarantined: 1 });
  });

  it('C19 an unknown type is stored UNHANDLED without work; a malformed known type is quarantined', async () => {
    const e = await endpoint();
    const unknown = await deliver(e, 'evt-3', JSON.stringify({ type: 'kyc.updated', data: {} }));
    expect(unknown.outcome).toBe('UNHANDLED');
    const malformed = JSON.stringify({ type: 'deposit.confirmed', data: { amountMinor: '1.5' } });
    expect((await deliver(e, 'evt-4', malformed)).outcome).toBe('QUARANTINED');
    expect((await deliver(e, 'evt-5', 'not json')).outcome).toBe('QUARANTINED');
    const events = await withTenant(database.db, e.tenantId, (tx) => tx.select().from(schema.inboxEvents));
    expect(events.map((row) => row.status)).toEqual(['UNHANDLED']);
    expect(await counts(e.tenantId)).toEqual({ events: 1, work: 0, quarantined: 2 });
  });

  it('refuses a change to a stored event body, even from the owner role', async () => {
    const e = await endpoint();
    await deliver(e, 'evt-6', deposit('dep-6'));
    // drizzle wraps the database's refusal; its message is in the cause.
    const refused = (work: Promise<unknown>) =>
      work.then(
        () => 'not refused',
        (error: { message?: string; cause?: { message?: string } }) =>
          error.cause?.message ?? String(error.message),
      );
    expect(
      await refused(
        database.db.execute(sql`update inbox_events set body_sha256 = 'x' where event_id = 'evt-6'`),
      ),
    ).toMatch(/immutable evidence/);
    expect(
      await refused(database.db.execute(sql`delete from inbox_events where event_id = 'evt-6'`)),
    ).toMatch(/append-only; DELETE refused/);
  });

  it('I11-F9 C20 refusals are counted in a bucket per endpoint, reason and minute, which only counts up', async () => {
    const e = await endpoint();
    const reject = (reason: string, bodyLength: number) =>
      withTenant(database.db, e.tenantId, (tx) =>
        recordInboxRejection(tx, { tenantId: e.tenantId, endpointId: e.endpointId, reason, bodyLength }),
      );
    // Concurrent refusals each add one; reasons are a closed set whatever the verifier says.
    await Promise.all(Array.from({ length: 20 }, (_, i) => reject('No matching signature found', 100 + i)));
    await reject('Missing required headers', 7);
    await reject('something the verifier never said before', 3);
    const buckets = await withTenant(database.db, e.tenantId, (tx) =>
      tx.select().from(schema.inboxRejectionBuckets),
    );
    // Summed per reason: a minute boundary during the test may split a reason in two buckets.
    const byReason: Record<string, { rejections: number; bodyLengthMax: number }> = {};
    for (const row of buckets) {
      const seen = byReason[row.reason] ?? { rejections: 0, bodyLengthMax: 0 };
      byReason[row.reason] = {
        rejections: seen.rejections + row.rejections,
        bodyLengthMax: Math.max(seen.bodyLengthMax, row.bodyLengthMax),
      };
    }
    expect(byReason).toEqual({
      BAD_SIGNATURE: { rejections: 20, bodyLengthMax: 119 },
      MISSING_HEADERS: { rejections: 1, bodyLengthMax: 7 },
      OTHER: { rejections: 1, bodyLengthMax: 3 },
    });
    expect(buckets.length).toBeLessThanOrEqual(4);

    const refused = (work: Promise<unknown>) =>
      work.then(
        () => 'not refused',
        (error: { message?: string; cause?: { message?: string } }) =>
          error.cause?.message ?? String(error.message),
      );
    const bucket = sql`endpoint_id = ${e.endpointId} and reason = 'BAD_SIGNATURE'`;
    for (const change of [
      sql`update inbox_rejection_buckets set rejections = 1 where ${bucket}`,
      sql`update inbox_rejection_buckets set rejections = rejections + 5 where ${bucket}`,
      sql`update inbox_rejection_buckets set first_seen_at = now() - interval '1 day' where ${bucket}`,
      sql`update inbox_rejection_buckets set bucket_start = bucket_start - interval '1 minute' where ${bucket}`,
      sql`update inbox_rejection_buckets set reason = 'OTHER' where ${bucket}`,
    ]) {
      expect(await refused(database.db.execute(change))).toMatch(/only counts up, by one/);
    }
    expect(
      await refused(
        database.db.execute(
          sql`insert into inbox_rejection_buckets (tenant_id, endpoint_id, reason, bucket_start, rejections, body_length_max)
              values (${e.tenantId}, ${e.endpointId}, 'BAD_TIMESTAMP', now(), 1000, 1)`,
        ),
      ),
    ).toMatch(/starts at one/);
    expect(
      await refused(database.db.execute(sql`delete from inbox_rejection_buckets where ${bucket}`)),
    ).toMatch(/append-only; DELETE refused/);

    // The application role counts (a new bucket, then the same one), and may no longer add rows to
    // the per-delivery table.
    const asApp = <T>(work: (tx: Parameters<Parameters<typeof withTenant>[2]>[0]) => Promise<T>) =>
      withTenant(database.db, e.tenantId, async (tx) => {
        await actAsAppRole(tx);
        return work(tx);
      });
    for (let i = 0; i < 2; i += 1) {
      await asApp((tx) =>
        recordInboxRejection(tx, {
          tenantId: e.tenantId,
          endpointId: e.endpointId,
          reason: 'Message timestamp too old',
          bodyLength: 5,
        }),
      );
    }
    const stale = await asApp((tx) =>
      tx.select().from(schema.inboxRejectionBuckets).where(sql`reason = 'STALE_TIMESTAMP'`),
    );
    expect(stale.reduce((sum, row) => sum + row.rejections, 0)).toBe(2);
    expect(
      await refused(
        asApp((tx) =>
          tx.execute(
            sql`insert into inbox_rejections (tenant_id, rejection_id, endpoint_id, reason, body_length)
                values (${e.tenantId}, gen_random_uuid(), ${e.endpointId}, 'x', 1)`,
          ),
        ),
      ),
    ).toMatch(/permission denied/);
  });
});

describe('queries', () => {
  it('list pages newest first with a cursor and a state filter', async () => {
    const { db } = database;
    const tenantId = await newTenant(db);
    await fund(db, tenantId, 'acct-1', 'ETH', 10n ** 18n);
    for (let i = 0; i < 5; i += 1) {
      const request = withdrawal({ withdrawalId: `wd-list-${i}`, amountMinor: '1000' });
      await submit(db, tenantId, request, `withdrawal-wd-list-${i}`);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await withTenant(db, tenantId, (tx) =>
        listOperations(tx, tenantId, { kind: 'withdrawal', limit: 2, ...(cursor ? { cursor } : {}) }),
      );
      seen.push(...page.items.map((item) => item.reference));
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    expect(seen).toEqual(['wd-list-4', 'wd-list-3', 'wd-list-2', 'wd-list-1', 'wd-list-0']);
    const rejected = await withTenant(db, tenantId, (tx) =>
      listOperations(tx, tenantId, { kind: 'withdrawal', state: 'REJECTED', limit: 10 }),
    );
    expect(rejected.items).toEqual([]);
  });

  it('operation stats count across tenants through an aggregate-only function', async () => {
    const stats = await operationStats(database.db);
    expect(stats.find((s) => s.state === 'REQUESTED')?.operations).toBeGreaterThanOrEqual(5);
    // The application role itself still cannot read across tenants.
    const visible = await withAppRole(database.db, async (tx) => {
      return rowsOf(await tx.execute(sql`select * from operations`));
    });
    expect(visible).toEqual([]);
  });
});
