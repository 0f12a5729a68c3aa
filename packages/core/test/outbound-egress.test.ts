import { createServer, type Server } from 'node:net';
import { IdemError } from '@idem/contracts';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { newTenant } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rowsOf } from '../src/db/rows.ts';
import type { EgressPolicy, HostResolver } from '../src/delivery/egress.ts';
import { createOutboundEndpoint } from '../src/delivery/outbound-endpoints.ts';

/**
 * Where an outbound webhook may point, checked when an administrator saves it: the host is
 * resolved and every address must be public (or on the deployment's allowlist), and plain http is
 * for development only. A refusal is a VALIDATION error that writes nothing. Names resolve through a
 * resolver the test controls, so no address here is ever contacted; a listener on 127.0.0.1 proves
 * that saving `localhost` sends nothing to it.
 */
let t: TestDatabase;
let tenantId: string;
let listener: Server;
let listenerPort: number;
let connections = 0;

/** Internal addresses a webhook must never be aimed at, each with why. */
const REFUSED: [address: string, why: string][] = [
  ['127.0.0.1', 'loopback'],
  ['127.8.9.10', 'loopback (all of 127/8)'],
  ['::1', 'IPv6 loopback'],
  ['10.0.0.5', 'private (RFC 1918)'],
  ['172.16.3.4', 'private (RFC 1918)'],
  ['192.168.1.1', 'private (RFC 1918)'],
  ['169.254.169.254', 'cloud metadata (link-local)'],
  ['169.254.170.2', 'container metadata (link-local)'],
  ['fe80::1', 'IPv6 link-local'],
  ['fd00:ec2::254', 'cloud metadata (unique-local)'],
  ['fc00::7', 'unique-local'],
  ['100.64.0.1', 'carrier-grade NAT'],
  ['100.100.100.200', 'cloud metadata (carrier-grade NAT)'],
  ['192.0.0.192', 'cloud metadata (reserved)'],
  ['0.0.0.0', 'unspecified (connects to this host)'],
  ['::', 'IPv6 unspecified'],
  ['224.0.0.1', 'multicast'],
  ['ff02::1', 'IPv6 multicast'],
  ['255.255.255.255', 'broadcast'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
  ['::ffff:10.0.0.5', 'IPv4-mapped private'],
  ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
];

const PUBLIC_V4 = '93.184.215.14';

/** Answers `names` from a table; any other name does not exist. Counts every question. */
function resolverOf(names: Record<string, string[]>): HostResolver & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (hostname: string) => {
    asked.push(hostname);
    const addresses = names[hostname];
    if (!addresses)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({
      address,
      family: address.includes(':') ? (6 as const) : (4 as const),
    }));
  };
  return Object.assign(resolve, { asked });
}

function production(resolve?: HostResolver, allowInternal: string[] = []): EgressPolicy {
  return { allowPlainHttp: false, allowInternal, ...(resolve ? { resolve } : {}) };
}

async function endpointCount(): Promise<number> {
  const [row] = rowsOf<{ n: number }>(
    await t.db.execute(sql`select count(*)::int as n from outbound_endpoints`),
  );
  return row?.n ?? -1;
}

async function refusal(url: string, policy: EgressPolicy): Promise<IdemError> {
  const before = await endpointCount();
  const error = await createOutboundEndpoint(t.db, tenantId, { url }, policy).then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error, `${url} was saved`).toBeInstanceOf(IdemError);
  expect((error as IdemError).code).toBe('VALIDATION');
  expect(await endpointCount(), 'a refusal writes nothing').toBe(before);
  return error as IdemError;
}

function literalHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db);
  listener = createServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  listenerPort = (listener.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise<void>((resolve) => listener.close(() => resolve()));
  await t.dispose();
});

describe('I31-EGRESS outbound endpoints are refused when saved if they reach inside', () => {
  it('I31-EGRESS every internal address is refused as a literal host, with a VALIDATION error that writes nothing', async () => {
    for (const [address, why] of REFUSED) {
      const error = await refusal(`https://${literalHost(address)}/hook`, production());
      expect(error.message, why).toMatch(/public address/);
    }
  });

  it('I31-EGRESS every internal address is refused when a host name resolves to it, naming neither the address nor its range', async () => {
    for (const [address, why] of REFUSED) {
      const resolve = resolverOf({ 'hooks.partner.example': [address] });
      const error = await refusal('https://hooks.partner.example/hook', production(resolve));
      expect(resolve.asked, why).toEqual(['hooks.partner.example']);
      expect(error.message).not.toContain(address);
    }
    // One internal address among public ones is enough: the connection could take any of them.
    const mixed = resolverOf({ 'hooks.partner.example': [PUBLIC_V4, '10.1.2.3'] });
    await refusal('https://hooks.partner.example/hook', production(mixed));
    // A name that does not resolve gets the same answer as one that resolves inside, so the
    // refusal does not tell an administrator which internal names exist.
    const unknown = await refusal('https://nowhere.partner.example/hook', production(resolverOf({})));
    const internal = await refusal(
      'https://db.partner.example/hook',
      production(resolverOf({ 'db.partner.example': ['10.0.0.5'] })),
    );
    expect(unknown.message).toBe(internal.message);
  });

  it('I31-EGRESS localhost through the system resolver is refused, and nothing reaches a listener on 127.0.0.1', async () => {
    await refusal(`https://localhost:${listenerPort}/hook`, production());
    await refusal(`http://localhost:${listenerPort}/hook`, { allowPlainHttp: true, allowInternal: [] });
    // The URL parser's other spellings of 127.0.0.1 (decimal, short, hex) are the same address.
    for (const host of ['2130706433', '127.1', '0x7f.0.0.1']) {
      await refusal(`https://${host}:${listenerPort}/hook`, production());
    }
    expect(connections).toBe(0);
  });

  it('I31-EGRESS plain http is refused outside development; a public https endpoint is saved', async () => {
    const resolve = resolverOf({ 'hooks.partner.example': [PUBLIC_V4] });
    const error = await refusal('http://hooks.partner.example/hook', production(resolve));
    expect(error.message).toMatch(/https/);
    const saved = await createOutboundEndpoint(
      t.db,
      tenantId,
      { url: 'https://hooks.partner.example/hook' },
      production(resolve),
    );
    expect(saved.url).toBe('https://hooks.partner.example/hook');
    const development = await createOutboundEndpoint(
      t.db,
      tenantId,
      { url: 'http://hooks.partner.example/dev' },
      { allowPlainHttp: true, allowInternal: [], resolve },
    );
    expect(development.url).toBe('http://hooks.partner.example/dev');
    // Credentials in the URL would be shown to every staff member who lists endpoints.
    await refusal('https://user:pass@hooks.partner.example/hook', production(resolve));
  });

  it('I31-EGRESS the deployment allowlist admits internal targets by address, range or host name; metadata stays refused', async () => {
    const allow = ['127.0.0.1', '10.20.0.0/16', 'receiver.internal', '169.254.0.0/16'];
    const resolve = resolverOf({ 'receiver.internal': ['10.99.0.7'], 'other.internal': ['10.99.0.8'] });
    const policy = production(resolve, allow);
    for (const url of [
      `http://127.0.0.1:${listenerPort}/hook`,
      'https://10.20.3.4/hook',
      'http://receiver.internal:8080/hook',
    ]) {
      const saved = await createOutboundEndpoint(t.db, tenantId, { url }, policy);
      expect(saved.url).toBe(url);
    }
    // Not on the list: refused although its neighbours are.
    await refusal('https://10.21.0.1/hook', policy);
    await refusal('https://other.internal/hook', policy);
    // Plain http outside development only to a host the allowlist names.
    await refusal(
      'http://hooks.partner.example/hook',
      production(resolverOf({ 'hooks.partner.example': [PUBLIC_V4] }), allow),
    );
    // Metadata services are never a webhook receiver, whatever range the allowlist opens.
    await refusal('https://169.254.169.254/latest/meta-data/', policy);
    expect(connections).toBe(0);
  });
});
