import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createOutboundEndpoint, type EgressPolicy, type HostResolver, rowsOf } from '@idem/core';
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Environment, ETH, LOCAL_RECEIVERS, startEnvironment } from './environment.ts';

/**
 * The worker checks every webhook connection again, whatever was checked when the endpoint was
 * saved: the host is resolved once per connection, each address must be public (or allowlisted),
 * and the connection goes to the address that was checked, so a DNS answer that changes between the
 * check and the connection (rebinding) cannot aim it inside. A plain TCP listener on 127.0.0.1
 * counts every connection it is offered: a refused delivery must leave it at zero. What staff see of
 * a failure is one generic text; the reason is in the worker's log only.
 */
let env: Environment;
let listener: Server;
let port: number;
let connections = 0;
let answer = 204;

const PUBLIC_V4 = '93.184.215.14';

/** Development: plain http allowed, nothing internal allowed. */
const DEVELOPMENT: EgressPolicy = { allowPlainHttp: true, allowInternal: [] };

/** A resolver that answers `first` to the first question about each name, then `then`. */
function rebinding(first: string, then: string): HostResolver & { asked: string[] } {
  const asked: string[] = [];
  const resolve = async (hostname: string) => {
    asked.push(hostname);
    const address = asked.filter((name) => name === hostname).length === 1 ? first : then;
    return [{ address, family: address.includes(':') ? (6 as const) : (4 as const) }];
  };
  return Object.assign(resolve, { asked });
}

/** Saves an endpoint through an allowlisted URL, then points its row at `url` (a row saved before the check existed). */
async function savedBeforeTheCheck(url: string): Promise<string> {
  const { endpointId } = await createOutboundEndpoint(
    env.t.db,
    env.tenantId,
    { url: `http://127.0.0.1:${port}/placeholder` },
    LOCAL_RECEIVERS,
  );
  await env.t.db.execute(sql`update outbound_endpoints set url = ${url} where endpoint_id = ${endpointId}`);
  return endpointId;
}

async function deliveriesOf(endpointId: string) {
  return rowsOf<{
    status: string;
    attempts: number;
    last_error: string | null;
    last_response_status: number | null;
  }>(
    await env.t.db.execute(
      sql`select status, attempts, last_error, last_response_status from webhook_deliveries where endpoint_id = ${endpointId}`,
    ),
  );
}

/** One notification raised and one worker pass with `egress`: every endpoint gets one attempt. */
async function onePass(egress: EgressPolicy): Promise<void> {
  await env.withdraw(ETH / 1013n);
  await env.worker({ egress }).runOnce();
}

beforeAll(async () => {
  env = await startEnvironment();
  listener = createServer((_request, response) => {
    response.writeHead(answer).end();
  });
  listener.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as AddressInfo).port;
});
afterEach(async () => {
  // Each test registers its own endpoints: retire them and their queues, so the next test's pass
  // is not spent releasing deliveries to disabled endpoints.
  await env.t.db.execute(sql`update outbound_endpoints set disabled_at = now() where disabled_at is null`);
  await env.t.db.execute(sql`update webhook_deliveries set status = 'dead' where status = 'pending'`);
  connections = 0;
  answer = 204;
});
afterAll(async () => {
  await new Promise<void>((resolve) => listener.close(() => resolve()));
  await env.close();
});

describe('I31-EGRESS the worker refuses internal targets at every connection', () => {
  it('I31-EGRESS endpoints aimed inside (saved before the check) are refused without a connection, and staff see one generic failure', async () => {
    const targets = [
      `http://127.0.0.1:${port}/hook`,
      `http://localhost:${port}/hook`,
      `http://[::ffff:127.0.0.1]:${port}/hook`,
      `http://0.0.0.0:${port}/hook`,
      `http://2130706433:${port}/hook`,
      'http://169.254.169.254/latest/meta-data/',
      'http://10.0.0.5:8080/admin',
      `http://127.0.0.1:5432/`,
    ];
    const endpointIds = [];
    for (const url of targets) endpointIds.push(await savedBeforeTheCheck(url));
    await onePass(DEVELOPMENT);
    expect(connections).toBe(0);
    for (const endpointId of endpointIds) {
      const rows = await deliveriesOf(endpointId);
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows.filter((r) => r.attempts > 0)) {
        expect(row).toMatchObject({
          status: 'pending',
          last_error: 'delivery failed',
          last_response_status: null,
        });
      }
    }
    // The reason is in the worker's structured log, by endpoint, without the URL's path.
    const refusals = env.logLines.filter((line) => line.includes('"egress refused"'));
    expect(refusals.some((line) => line.includes('loopback'))).toBe(true);
    expect(refusals.some((line) => line.includes('metadata'))).toBe(true);
    expect(refusals.some((line) => line.includes('private'))).toBe(true);
    expect(refusals.join('\n')).not.toContain('meta-data');
  });

  it('I31-EGRESS DNS rebinding: a name public when saved and internal when connecting never reaches the local listener', async () => {
    const resolve = rebinding(PUBLIC_V4, '127.0.0.1');
    const egress: EgressPolicy = { ...DEVELOPMENT, resolve };
    const { endpointId } = await createOutboundEndpoint(
      env.t.db,
      env.tenantId,
      { url: `http://localhost:${port}/hook` },
      egress,
    );
    expect(resolve.asked).toEqual(['localhost']);
    await onePass(egress);
    expect(resolve.asked.length).toBeGreaterThan(1);
    expect(connections).toBe(0);
    const [row] = (await deliveriesOf(endpointId)).filter((r) => r.attempts > 0);
    expect(row).toMatchObject({ last_error: 'delivery failed', last_response_status: null });
  });

  it('I31-EGRESS the connection goes to the address the check resolved: an allowlisted name only the resolver knows is delivered', async () => {
    const resolve: HostResolver = async (hostname) => {
      if (hostname !== 'receiver.internal') throw new Error(`getaddrinfo ENOTFOUND ${hostname}`);
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const egress: EgressPolicy = { allowPlainHttp: false, allowInternal: ['receiver.internal'], resolve };
    const { endpointId } = await createOutboundEndpoint(
      env.t.db,
      env.tenantId,
      { url: `http://receiver.internal:${port}/hook` },
      egress,
    );
    await onePass(egress);
    expect(connections).toBeGreaterThan(0);
    const rows = await deliveriesOf(endpointId);
    expect(rows.some((r) => r.status === 'done' && r.last_response_status === 204)).toBe(true);
  });

  it('I31-EGRESS outside development a plain-http endpoint saved earlier is refused at connection, unless the allowlist names its host', async () => {
    const resolve: HostResolver = async () => [{ address: '127.0.0.1', family: 4 }];
    // The address is allowlisted by range, the host name is not: https would be allowed, http is not.
    const production: EgressPolicy = { allowPlainHttp: false, allowInternal: ['127.0.0.0/8'], resolve };
    const endpointId = await savedBeforeTheCheck(`http://receiver.local.test:${port}/hook`);
    await onePass(production);
    expect(connections).toBe(0);
    const [row] = (await deliveriesOf(endpointId)).filter((r) => r.attempts > 0);
    expect(row).toMatchObject({ last_error: 'delivery failed', last_response_status: null });
    expect(
      env.logLines.some((line) => line.includes('"egress refused"') && line.includes('url must use https')),
    ).toBe(true);
  });

  it('I31-EGRESS a receiver that answers an error shows staff the generic failure; its status is in the log only', async () => {
    answer = 503;
    const { endpointId } = await createOutboundEndpoint(
      env.t.db,
      env.tenantId,
      { url: `http://127.0.0.1:${port}/failing` },
      LOCAL_RECEIVERS,
    );
    await onePass(LOCAL_RECEIVERS);
    expect(connections).toBeGreaterThan(0);
    const [row] = (await deliveriesOf(endpointId)).filter((r) => r.attempts > 0);
    expect(row).toMatchObject({ last_error: 'delivery failed', last_response_status: null });
    expect(env.logLines.some((line) => line.includes(endpointId) && line.includes('HTTP 503'))).toBe(true);
  });
});
