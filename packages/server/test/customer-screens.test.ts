import type { StaffRole } from '@idem/contracts';
import { createIdemClient } from '@idem/sdk';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { createStaffOfRoles, startSilentServer } from './support/in-process.ts';
import { ETH, evmAddress, provisionTenant, type TenantFixture, uniqueId } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * The customer screens, server side, over real HTTP: the second-device confirmation
 * (I14-DEVICE), the account's own deposit history (I14-DEPOSITS) and the block explorer link an
 * admin configures per network (I14-LIVE).
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;

interface Answer {
  status: number;
  body: {
    result?: { data: unknown };
    error?: { data: { code: string; detail: string; duplicateOf?: { operationId: string; state: string } } };
  };
  setCookie: string[];
}
type Session = StaffSession;

const http = staffHttp(() => base);

/** The staff screens' tRPC-over-HTTP call (support/staff-http.ts), typed with the duplicate's details. */
async function call(
  path: string,
  options: { input?: unknown; session?: Session; mutation?: boolean } = {},
): Promise<Answer> {
  return (await http.call(path, options)) as Answer;
}

function sessionFrom(answer: Answer): Session {
  const cookie = answer.setCookie[0]?.split(';')[0];
  if (!cookie) throw new Error(`no cookie set: ${JSON.stringify(answer.body)}`);
  return { cookie, csrf: dataOf<{ csrfToken: string }>(answer).csrfToken };
}

/** One device: a one-time link exchanged for its own session, as a phone or a laptop does. */
async function openDevice(accountId: string): Promise<Session> {
  const sdk = createIdemClient({ baseUrl: base, apiKey: tenant.apiKey });
  const { url } = await sdk.customerSessions.create({ accountId });
  const token = new URL(url).hash.slice(1);
  return sessionFrom(await call('customerSessions.exchange', { mutation: true, input: { token } }));
}

async function signIn(role: StaffRole): Promise<Session> {
  return sessionFrom(
    await call('staffAuth.signIn', {
      mutation: true,
      input: { tenantId: tenant.tenantId, email: `${role}@screens.invalid`, password: PASSWORD },
    }),
  );
}

function withdraw(session: Session, input: Record<string, unknown>): Promise<Answer> {
  return call('customer.withdraw', { mutation: true, session, input });
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  tenant = await provisionTenant(database.db, {
    name: 'Screens',
    fund: [
      { accountId: 'cust-phone', asset: 'ETH', amountMinor: (100n * ETH).toString() },
      { accountId: 'cust-dep', asset: 'ETH', amountMinor: ETH.toString() },
      { accountId: 'cust-dep', asset: 'ETH', amountMinor: (2n * ETH).toString() },
      { accountId: 'cust-dep', asset: 'ETH', amountMinor: (3n * ETH).toString() },
      { accountId: 'cust-other', asset: 'ETH', amountMinor: (7n * ETH).toString() },
    ],
  });
  await provisionRiskPolicy(database.db, {
    tenantId: tenant.tenantId,
    assetCode: 'ETH',
    autoApproveMaxMinor: ETH.toString(),
    fourEyesMinMinor: (5n * ETH).toString(),
    actor: 'test',
  });
  await createStaffOfRoles(
    database.db,
    tenant.tenantId,
    ['admin', 'support'],
    'screens.invalid',
    await hashPassword(PASSWORD),
  );
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I14-DEVICE a second device cannot silently repeat an in-progress withdrawal', () => {
  it('I14-DEVICE the same asset, destination and amount from a second session is refused with POSSIBLE_DUPLICATE naming the first, until confirmed by that id', async () => {
    const phone = await openDevice('cust-phone');
    const laptop = await openDevice('cust-phone');
    const payload = { asset: 'ETH', destination: evmAddress(), amountMinor: (ETH / 10n).toString() };
    const phoneIntent = crypto.randomUUID();
    const first = await withdraw(phone, { intentId: phoneIntent, ...payload });
    expect(first.status).toBe(200);
    const firstId = dataOf<{ withdrawal: { operationId: string } }>(first).withdrawal.operationId;

    // The laptop mints its own intent id: before this check it was a second withdrawal.
    const laptopIntent = crypto.randomUUID();
    const refused = await withdraw(laptop, { intentId: laptopIntent, ...payload });
    expect(refused.status).toBe(409);
    expect(refused.body.error?.data.code).toBe('POSSIBLE_DUPLICATE');
    expect(refused.body.error?.data.duplicateOf?.operationId).toBe(firstId);
    expect(refused.body.error?.data.duplicateOf?.state).toBe('APPROVED');

    // Nothing was written by the refusal: the account still has exactly one withdrawal.
    const listed = dataOf<{ items: { operationId: string }[] }>(
      await call('customer.withdrawals', { session: laptop, input: {} }),
    );
    expect(listed.items.map((item) => item.operationId)).toEqual([firstId]);

    // A confirmation naming anything but the in-progress withdrawal is no confirmation.
    const wrongName = await withdraw(laptop, {
      intentId: laptopIntent,
      ...payload,
      confirmDuplicateOf: crypto.randomUUID(),
    });
    expect(wrongName.body.error?.data.code).toBe('POSSIBLE_DUPLICATE');

    // The phone's own retry of its intent is a replay, never a duplicate.
    const replay = await withdraw(phone, { intentId: phoneIntent, ...payload });
    expect(dataOf<{ outcome: string }>(replay).outcome).toBe('REPLAYED');

    const confirmed = await withdraw(laptop, {
      intentId: laptopIntent,
      ...payload,
      confirmDuplicateOf: firstId,
    });
    expect(confirmed.status).toBe(200);
    const second = dataOf<{ outcome: string; withdrawal: { operationId: string } }>(confirmed);
    expect(second.outcome).toBe('CREATED');
    expect(second.withdrawal.operationId).not.toBe(firstId);
  });

  it('I14-DEVICE a different amount, a different destination or a finished first withdrawal needs no confirmation', async () => {
    const device = await openDevice('cust-phone');
    const destination = evmAddress();
    const amountMinor = (ETH / 20n).toString();
    expect(
      (await withdraw(device, { intentId: crypto.randomUUID(), asset: 'ETH', destination, amountMinor }))
        .status,
    ).toBe(200);
    const otherAmount = await withdraw(device, {
      intentId: crypto.randomUUID(),
      asset: 'ETH',
      destination,
      amountMinor: (ETH / 21n).toString(),
    });
    expect(otherAmount.status).toBe(200);
    const otherDestination = await withdraw(device, {
      intentId: crypto.randomUUID(),
      asset: 'ETH',
      destination: evmAddress(),
      amountMinor,
    });
    expect(otherDestination.status).toBe(200);
    // A withdrawal stored REJECTED (more than the balance) is finished: repeating it is no duplicate.
    const tooMuch = { asset: 'ETH', destination, amountMinor: (1000n * ETH).toString() };
    const rejected = await withdraw(device, { intentId: crypto.randomUUID(), ...tooMuch });
    expect(dataOf<{ withdrawal: { state: string } }>(rejected).withdrawal.state).toBe('REJECTED');
    expect((await withdraw(device, { intentId: crypto.randomUUID(), ...tooMuch })).status).toBe(200);
  });

  it('I14-DEVICE two devices submitting the same withdrawal at the same instant: one is created, the other is refused naming it', async () => {
    const [phone, laptop] = await Promise.all([openDevice('cust-phone'), openDevice('cust-phone')]);
    const payload = { asset: 'ETH', destination: evmAddress(), amountMinor: (ETH / 50n).toString() };
    for (let round = 0; round < 5; round += 1) {
      const amountMinor = (BigInt(payload.amountMinor) + BigInt(round)).toString();
      const answers = await Promise.all(
        [phone, laptop].map((device) =>
          withdraw(device, { intentId: crypto.randomUUID(), ...payload, amountMinor }),
        ),
      );
      const statuses = answers.map((answer) => answer.status).sort();
      expect(statuses, `round ${round}`).toEqual([200, 409]);
      const created = answers.find((answer) => answer.status === 200);
      const refused = answers.find((answer) => answer.status === 409);
      expect(refused?.body.error?.data.duplicateOf?.operationId).toBe(
        created && dataOf<{ withdrawal: { operationId: string } }>(created).withdrawal.operationId,
      );
    }
  });

  it('I14-DEVICE another account with the same payload is not a duplicate of this one', async () => {
    const destination = evmAddress();
    const amountMinor = (ETH / 30n).toString();
    const mine = await withdraw(await openDevice('cust-phone'), {
      intentId: crypto.randomUUID(),
      asset: 'ETH',
      destination,
      amountMinor,
    });
    expect(mine.status).toBe(200);
    const theirs = await withdraw(await openDevice('cust-other'), {
      intentId: crypto.randomUUID(),
      asset: 'ETH',
      destination,
      amountMinor,
    });
    expect(theirs.status).toBe(200);
  });
});

describe("I14-DEPOSITS the customer's own deposits", () => {
  it('I14-DEPOSITS lists only the session account’s deposits, newest first, cursor paged', async () => {
    const session = await openDevice('cust-dep');
    const first = dataOf<{ items: { amountMinor: string; accountId: string }[]; nextCursor: string | null }>(
      await call('customer.deposits', { session, input: { limit: 2 } }),
    );
    expect(first.items.map((item) => item.amountMinor)).toEqual([
      (3n * ETH).toString(),
      (2n * ETH).toString(),
    ]);
    expect(first.nextCursor).not.toBeNull();
    const second = dataOf<{ items: { amountMinor: string }[]; nextCursor: string | null }>(
      await call('customer.deposits', { session, input: { limit: 2, cursor: first.nextCursor } }),
    );
    expect(second.items.map((item) => item.amountMinor)).toEqual([ETH.toString()]);
    expect(second.nextCursor).toBeNull();
    expect(first.items.every((item) => item.accountId === 'cust-dep')).toBe(true);
  });

  it('I14-DEPOSITS takes no account from the input: the session decides', async () => {
    const session = await openDevice('cust-dep');
    const answer = await call('customer.deposits', { session, input: { accountId: 'cust-other' } });
    expect(answer.status).toBe(400);
  });
});

describe('I14-LIVE the block explorer link per network', () => {
  it('I14-LIVE an admin sets an https template with {txHash}; support may not; a bad template is refused', async () => {
    const admin = await signIn('admin');
    const support = await signIn('support');
    const template = 'https://etherscan.io/tx/{txHash}';
    const set = await call('branding.setExplorer', {
      mutation: true,
      session: admin,
      input: { network: 'ethereum', txUrlTemplate: template },
    });
    expect(set.status).toBe(200);
    const forbidden = await call('branding.setExplorer', {
      mutation: true,
      session: support,
      input: { network: 'ethereum', txUrlTemplate: template },
    });
    expect(forbidden.status).toBe(403);
    for (const bad of [
      'http://etherscan.io/tx/{txHash}',
      'https://etherscan.io/tx/',
      'javascript:{txHash}',
    ]) {
      const refused = await call('branding.setExplorer', {
        mutation: true,
        session: admin,
        input: { network: 'ethereum', txUrlTemplate: bad },
      });
      expect(refused.body.error?.data.code).toBe('VALIDATION');
    }
    const listed = dataOf<{ network: string; txUrlTemplate: string | null }[]>(
      await call('branding.explorers', { session: support }),
    );
    expect(listed).toContainEqual({ network: 'ethereum', txUrlTemplate: template });
    expect(listed).toContainEqual({ network: 'bitcoin', txUrlTemplate: null });
  });

  it('I14-LIVE the customer detail carries no explorer URL while there is no transaction hash', async () => {
    const session = await openDevice('cust-phone');
    const created = dataOf<{ withdrawal: { operationId: string } }>(
      await withdraw(session, {
        intentId: crypto.randomUUID(),
        asset: 'ETH',
        destination: evmAddress(),
        amountMinor: (ETH / 40n).toString(),
      }),
    );
    const detail = dataOf<{ explorerUrl: string | null; withdrawal: { txHash: string | null } }>(
      await call('customer.withdrawal', { session, input: { operationId: created.withdrawal.operationId } }),
    );
    expect(detail.withdrawal.txHash).toBeNull();
    expect(detail.explorerUrl).toBeNull();
    expect(uniqueId('x')).toMatch(/^x-/);
  });
});
