import { rowsOf, schema, withTenant } from '@idem/core';
import { type ServerProcess, startServerProcess } from '@idem/testing/server';
import { eq, sql } from 'drizzle-orm';
import postgres from 'postgres';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Backend,
  backendKinds,
  createBackend,
  createWebhookEndpoint,
  disposeBackend,
  provisionTenant,
  type TenantFixture,
  uniqueId,
  withDirectDatabase,
} from './support/provision.ts';

interface Endpoint {
  endpointId: string;
  secret: string;
  source: string;
}

function deposit(reference: string, amountMinor = '100') {
  return JSON.stringify({
    type: 'deposit.confirmed',
    timestamp: '2026-01-01T00:00:00Z',
    data: { reference, accountId: 'cust-7', asset: 'ETH', amountMinor },
  });
}

/** Posts a body signed the Standard Webhooks way with `secret` (the sender's side). */
async function deliver(baseUrl: string, endpointId: string, secret: string, eventId: string, body: string) {
  // One instant for the signature and its header: two clock reads can straddle a second.
  const at = new Date();
  const signature = new Webhook(secret).sign(eventId, at, body);
  return fetch(`${baseUrl}/webhooks/${endpointId}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'webhook-id': eventId,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signature,
    },
    body,
  });
}

const METRICS_TOKEN = 'webhook-test-metrics-token';

async function scrape(baseUrl: string): Promise<string> {
  const response = await fetch(`${baseUrl}/metrics`, {
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  expect(response.status).toBe(200);
  return response.text();
}

async function inboxOf(backend: Backend, tenantId: string) {
  return withDirectDatabase(backend, (db) =>
    withTenant(db, tenantId, async (tx) => ({
      events: await tx.select().from(schema.inboxEvents),
      work: (await tx.select().from(schema.workItems)).filter((item) => item.topic === 'inbox.event'),
      quarantine: await tx.select().from(schema.inboxQuarantine),
      rejections: await tx.select().from(schema.inboxRejectionBuckets),
    })),
  );
}

describe.each(backendKinds)('webhook intake (%s)', (kind) => {
  let backend: Backend;
  let tenant: TenantFixture;
  let other: TenantFixture;
  let endpoint: Endpoint;
  let otherEndpoint: Endpoint;
  let server: ServerProcess;

  beforeAll(async () => {
    backend = await createBackend(kind);
    await withDirectDatabase(backend, async (db) => {
      tenant = await provisionTenant(db);
      other = await provisionTenant(db);
      endpoint = await createWebhookEndpoint(db, tenant.tenantId, { source: 'custodian' });
      otherEndpoint = await createWebhookEndpoint(db, other.tenantId, { source: 'custodian' });
    });
  });
  afterAll(async () => {
    await server?.stop();
    if (backend) await disposeBackend(backend);
  });

  /** Runs `work` against a fresh server process, stopped afterwards (PGlite needs it stopped to inspect). */
  async function withServer(env: Record<string, string>, work: (server: ServerProcess) => Promise<void>) {
    server = await startServerProcess({ ...backend.env, ...env });
    try {
      await work(server);
    } finally {
      await server.stop();
    }
  }

  it('C18 C19 C20 each input class gets its answer, and only verified input is stored', async () => {
    const ids = { fresh: uniqueId('evt'), unknown: uniqueId('evt'), malformed: uniqueId('evt') };
    let metricsText = '';
    await withServer({ IDEM_METRICS_TOKEN: METRICS_TOKEN }, async ({ baseUrl }) => {
      const send = (id: string, body: string, secret = endpoint.secret, to = endpoint.endpointId) =>
        deliver(baseUrl, to, secret, id, body);

      // New event: stored with its work item before the 200.
      const first = await send(ids.fresh, deposit('dep-a'));
      expect([first.status, await first.json()]).toEqual([200, { received: true, outcome: 'ACCEPTED' }]);
      // Redelivery, same body: processed once.
      expect(((await (await send(ids.fresh, deposit('dep-a'))).json()) as { outcome: string }).outcome).toBe(
        'DUPLICATE',
      );
      // Same id, different body: quarantined, 2xx once the quarantine row is committed.
      const changed = await send(ids.fresh, deposit('dep-a', '999999'));
      expect([changed.status, ((await changed.json()) as { outcome: string }).outcome]).toEqual([
        200,
        'QUARANTINED',
      ]);
      // Unknown type: stored UNHANDLED.
      const unknown = await send(ids.unknown, JSON.stringify({ type: 'kyc.reviewed', data: { level: 2 } }));
      expect(((await unknown.json()) as { outcome: string }).outcome).toBe('UNHANDLED');
      // A verified body that is not what its type says: quarantined, never guessed.
      const malformed = await send(ids.malformed, JSON.stringify({ type: 'deposit.confirmed', data: {} }));
      expect(((await malformed.json()) as { outcome: string }).outcome).toBe('QUARANTINED');

      // C20: a bad signature, another tenant's secret, an unknown endpoint: 401, nothing stored.
      const forged = await send(
        uniqueId('evt'),
        deposit('dep-x'),
        `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
      );
      expect(forged.status).toBe(401);
      const crossTenant = await send(uniqueId('evt'), deposit('dep-y'), otherEndpoint.secret);
      expect(crossTenant.status).toBe(401);
      const unknownEndpoint = await send(
        uniqueId('evt'),
        deposit('dep-z'),
        endpoint.secret,
        endpoint.endpointId.replace(/.{4}$/, '0000'),
      );
      expect(unknownEndpoint.status).toBe(401);
      const unsigned = await fetch(`${baseUrl}/webhooks/${endpoint.endpointId}`, {
        method: 'POST',
        body: deposit('q'),
      });
      expect(unsigned.status).toBe(401);
      expect(((await unsigned.json()) as { code: string }).code).toBe('UNAUTHORIZED');

      metricsText = await scrape(baseUrl);
    });

    const inbox = await inboxOf(backend, tenant.tenantId);
    expect(inbox.events.map((event) => [event.eventId, event.status, event.deliveries]).sort()).toEqual(
      [
        [ids.fresh, 'RECEIVED', 2],
        [ids.unknown, 'UNHANDLED', 1],
      ].sort(),
    );
    expect(inbox.work).toHaveLength(1);
    expect(inbox.quarantine.map((row) => [row.eventId, row.reason]).sort()).toEqual(
      [
        [ids.fresh, 'BODY_MISMATCH'],
        [ids.malformed, 'MALFORMED'],
      ].sort(),
    );
    // Rejections are counted with minimal metadata, never a body (the other tenant's secret is a
    // bad signature here).
    const counted = (reason: string) =>
      inbox.rejections.filter((row) => row.reason === reason).reduce((sum, row) => sum + row.rejections, 0);
    expect([counted('BAD_SIGNATURE'), counted('MISSING_HEADERS')]).toEqual([2, 1]);
    for (const rejection of inbox.rejections) expect(Object.keys(rejection)).not.toContain('body');
    expect((await inboxOf(backend, other.tenantId)).events).toEqual([]);

    expect(metricsText).toMatch(/idem_webhook_deliveries_total\{outcome="ACCEPTED"\} 1/);
    expect(metricsText).toMatch(/idem_webhook_deliveries_total\{outcome="QUARANTINED"\} 2/);
    expect(metricsText).toMatch(/idem_webhook_deliveries_total\{outcome="REJECTED_SIGNATURE"\} 3/);
    expect(metricsText).toMatch(/idem_webhook_deliveries_total\{outcome="UNKNOWN_ENDPOINT"\} 1/);
  });

  it('I11-F9 C20 1,000 bad-signature posts leave a bounded number of rows, and the count stays visible', async () => {
    // A fresh endpoint of the same tenant, so the rows counted below are this test's alone.
    const target = await withDirectDatabase(backend, (db) =>
      createWebhookEndpoint(db, tenant.tenantId, { source: 'custodian' }),
    );
    const forger = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
    const posts = 1_000;
    let metricsText = '';
    let minutesSpanned = 0;
    await withServer({ IDEM_METRICS_TOKEN: METRICS_TOKEN }, async ({ baseUrl }) => {
      const started = Date.now();
      let next = 0;
      const statuses: number[] = [];
      // Twenty connections at a time, as an attacker with a small botnet would.
      await Promise.all(
        Array.from({ length: 20 }, async () => {
          while (next < posts) {
            next += 1;
            const response = await deliver(baseUrl, target.endpointId, forger, uniqueId('evt'), deposit('x'));
            statuses.push(response.status);
            await response.body?.cancel();
          }
        }),
      );
      expect(statuses.filter((status) => status === 401)).toHaveLength(posts);
      // Buckets are per minute: a slow machine whose burst crosses more minute boundaries may keep more.
      minutesSpanned = Math.floor(Date.now() / 60_000) - Math.floor(started / 60_000) + 1;
      metricsText = await scrape(baseUrl);
    });
    const count = async (query: string) =>
      withDirectDatabase(backend, (db) =>
        withTenant(db, tenant.tenantId, async (tx) =>
          rowsOf<{ n: string }>(await tx.execute(sql.raw(query))),
        ),
      );
    const endpointId = target.endpointId.replace(/'/g, '');
    // The append-only per-delivery table no longer grows with an attacker's traffic...
    const individual = await count(
      `select count(*) as n from inbox_rejections where endpoint_id = '${endpointId}'`,
    );
    expect(Number(individual[0]?.n)).toBe(0);
    // ...the buckets do not grow with it either (one a minute, whatever the number of posts)...
    const buckets = await withDirectDatabase(backend, (db) =>
      withTenant(db, tenant.tenantId, (tx) =>
        tx
          .select()
          .from(schema.inboxRejectionBuckets)
          .where(eq(schema.inboxRejectionBuckets.endpointId, target.endpointId)),
      ),
    );
    expect(buckets.length).toBeGreaterThanOrEqual(1);
    expect(buckets.length).toBeLessThanOrEqual(minutesSpanned);
    // ...and every refusal is still counted, for staff in the table and in the metrics.
    expect(buckets.reduce((sum, bucket) => sum + bucket.rejections, 0)).toBe(posts);
    expect(buckets.every((bucket) => bucket.reason === 'BAD_SIGNATURE')).toBe(true);
    expect(metricsText).toMatch(/idem_webhook_deliveries_total\{outcome="REJECTED_SIGNATURE"\} 1000\n/);
  });

  it.each(['webhook-after-verify', 'webhook-after-commit'])(
    'C18 a server killed at %s: the redelivery is processed exactly once',
    async (faultPoint) => {
      const eventId = uniqueId('evt');
      const body = deposit(uniqueId('dep'));
      await withServer({ IDEM_FAULT_INJECT: faultPoint }, async ({ baseUrl, exited }) => {
        // The sender sees no 2xx (the connection dies), so it will redeliver.
        await expect(deliver(baseUrl, endpoint.endpointId, endpoint.secret, eventId, body)).rejects.toThrow();
        expect(await exited).toBe(null); // Killed by the signal, not exited.
      });
      await withServer({}, async ({ baseUrl }) => {
        const redelivery = await deliver(baseUrl, endpoint.endpointId, endpoint.secret, eventId, body);
        expect(redelivery.status).toBe(200);
        const expected = faultPoint === 'webhook-after-commit' ? 'DUPLICATE' : 'ACCEPTED';
        expect(((await redelivery.json()) as { outcome: string }).outcome).toBe(expected);
      });
      const inbox = await inboxOf(backend, tenant.tenantId);
      expect(inbox.events.filter((event) => event.eventId === eventId)).toHaveLength(1);
      expect(
        inbox.work.filter((item) => (item.payload as { eventId: string }).eventId === eventId),
      ).toHaveLength(1);
    },
  );

  it.skipIf(kind !== 'postgres')(
    'C20 a database that cannot commit answers 503, and the retry is accepted',
    async () => {
      if (backend.kind !== 'postgres' || !backend.database.url) throw new Error('PostgreSQL only');
      const name = new URL(backend.database.url).pathname.slice(1);
      const admin = postgres(backend.database.url.replace(`/${name}`, '/postgres'), {
        max: 1,
        onnotice: () => {},
      });
      const eventId = uniqueId('evt');
      const body = deposit(uniqueId('dep'));
      try {
        await withServer({ IDEM_METRICS_TOKEN: METRICS_TOKEN }, async ({ baseUrl }) => {
          // Take the database away from the server: refuse new connections, end the open ones.
          await admin.unsafe(`alter database "${name}" allow_connections false`);
          await admin.unsafe(
            `select pg_terminate_backend(pid) from pg_stat_activity where datname = '${name}' and pid <> pg_backend_pid()`,
          );
          const down = await deliver(baseUrl, endpoint.endpointId, endpoint.secret, eventId, body);
          expect(down.status).toBe(503);
          expect(down.headers.get('retry-after')).toBe('5');
          const ready = await fetch(`${baseUrl}/readyz`);
          expect(ready.status).toBe(503);
          // The metrics say so too, rather than serving the last good counts as if nothing happened.
          expect(await scrape(baseUrl)).toMatch(/^idem_metrics_database_errors 1$/m);

          await admin.unsafe(`alter database "${name}" allow_connections true`);
          const retried = await deliver(baseUrl, endpoint.endpointId, endpoint.secret, eventId, body);
          expect(retried.status).toBe(200);
          expect(((await retried.json()) as { outcome: string }).outcome).toBe('ACCEPTED');
          expect(await scrape(baseUrl)).toMatch(/^idem_metrics_database_errors 0$/m);
        });
      } finally {
        await admin.unsafe(`alter database "${name}" allow_connections true`);
        await admin.end();
      }
      // The test's own pool was cut off too; it reconnects on next use.
      const inbox = await inboxOf(backend, tenant.tenantId);
      expect(inbox.events.filter((event) => event.eventId === eventId)).toHaveLength(1);
    },
  );
});
