import { createWithdrawal, withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningServer } from '../src/app.ts';
import { hashPassword } from '../src/auth/password.ts';
import { createStaffOfRoles, startSilentServer } from './support/in-process.ts';
import { ETH, evmAddress, provisionTenant, type TenantFixture } from './support/provision.ts';
import { dataOf, PASSWORD, type StaffSession, staffHttp } from './support/staff-http.ts';

/**
 * The operator's Overview and Withdrawals explorer over real HTTP: any staff role reads
 * them (support included), the export is a mutation that is itself audited, and a tenant sees only
 * its own withdrawals.
 */
let database: TestDatabase;
let server: RunningServer;
let base: string;
let tenant: TenantFixture;
let other: TenantFixture;
const destination = evmAddress();
const { call, signIn } = staffHttp(() => base);

const session = (tenantId: string, role: 'support' | 'admin'): Promise<StaffSession> =>
  signIn({ tenantId, email: `${role}@overview.invalid`, password: PASSWORD });

/** The export's rows by header; these values hold no comma or quote, so a split reads them. */
function csvRecords(csv: string): Record<string, string>[] {
  const [header, ...lines] = csv.trim().split('\n');
  const names = (header ?? '').split(',');
  return lines.map((line) => Object.fromEntries(line.split(',').map((value, i) => [names[i], value])));
}

interface Row {
  reference: string;
  amountMinor: string;
  destination: string | null;
}

beforeAll(async () => {
  database = await createTestDatabase({ maxConnections: 5 });
  const passwordHash = await hashPassword(PASSWORD);
  tenant = await provisionTenant(database.db, { name: 'Overview' });
  other = await provisionTenant(database.db, { name: 'Other' });
  for (const t of [tenant, other]) {
    await createStaffOfRoles(database.db, t.tenantId, ['support', 'admin'], 'overview.invalid', passwordHash);
  }
  const amounts = [1n, 2n, 3n];
  for (const [i, amount] of amounts.entries()) {
    await withTenant(database.db, tenant.tenantId, (tx) =>
      createWithdrawal(tx, {
        tenantId: tenant.tenantId,
        idempotencyKey: `k-ov-${i}`,
        request: {
          withdrawalId: `wd-ov-${i}`,
          accountId: 'cust-7',
          asset: 'ETH',
          destination: i === 1 ? destination : evmAddress(),
          amountMinor: (amount * ETH).toString(),
        },
      }),
    );
  }
  await withTenant(database.db, other.tenantId, (tx) =>
    createWithdrawal(tx, {
      tenantId: other.tenantId,
      idempotencyKey: 'k-other',
      request: {
        withdrawalId: 'wd-other',
        accountId: 'cust-7',
        asset: 'ETH',
        destination,
        amountMinor: ETH.toString(),
      },
    }),
  );
  ({ server, base } = await startSilentServer(database));
});

afterAll(async () => {
  await server?.close();
  await database?.dispose();
});

describe('I14-OVERVIEW over HTTP', () => {
  it('I14-OVERVIEW support reads the figures of its own tenant only; without a session it is refused', async () => {
    const support = await session(tenant.tenantId, 'support');
    const overview = dataOf<{
      openByState: { state: string; count: number }[];
      held: { asset: string; heldMinor: string }[];
      oldest: { queue: string; reference: string | null }[];
    }>(await call('staffOverview.overview', { session: support }));
    expect(overview.openByState).toEqual([{ state: 'REQUESTED', count: 3 }]);
    expect(overview.held).toEqual([{ asset: 'ETH', heldMinor: (6n * ETH).toString(), withdrawals: 3 }]);
    expect(overview.oldest.find((row) => row.queue === 'AWAITING_APPROVAL')?.reference).toBe('wd-ov-0');

    const theirs = dataOf<{ held: { heldMinor: string }[] }>(
      await call('staffOverview.overview', { session: await session(other.tenantId, 'support') }),
    );
    expect(theirs.held).toEqual([{ asset: 'ETH', heldMinor: ETH.toString(), withdrawals: 1 }]);

    const anonymous = await call('staffOverview.overview');
    expect(anonymous.body.error?.data.code).toBe('UNAUTHORIZED');
  });
});

describe('I14-EXPLORER over HTTP', () => {
  it('I14-EXPLORER support filters by exact destination and pages by amount; another tenant’s withdrawal never shows', async () => {
    const support = await session(tenant.tenantId, 'support');
    const byDestination = dataOf<{ items: Row[] }>(
      await call('staffOverview.withdrawals', { session: support, input: { destination } }),
    );
    expect(byDestination.items.map((row) => row.reference)).toEqual(['wd-ov-1']);

    const first = dataOf<{ items: Row[]; nextCursor: string | null }>(
      await call('staffOverview.withdrawals', { session: support, input: { sort: 'amount_desc', limit: 2 } }),
    );
    expect(first.items.map((row) => row.reference)).toEqual(['wd-ov-2', 'wd-ov-1']);
    const second = dataOf<{ items: Row[]; nextCursor: string | null }>(
      await call('staffOverview.withdrawals', {
        session: support,
        input: { sort: 'amount_desc', limit: 2, cursor: first.nextCursor },
      }),
    );
    expect(second.items.map((row) => row.reference)).toEqual(['wd-ov-0']);
    expect(second.nextCursor).toBeNull();

    // A cursor of one sort is refused under another, rather than read as a wrong position.
    const mixed = await call('staffOverview.withdrawals', {
      session: support,
      input: { sort: 'created_desc', cursor: first.nextCursor },
    });
    expect(mixed.body.error?.data.code).toBe('VALIDATION');
  });

  it('I14-EXPLORER the CSV export holds what the filter selects, in exact minor units, and is audited', async () => {
    const support = await session(tenant.tenantId, 'support');
    const exported = dataOf<{ csv: string; rows: number; truncated: boolean }>(
      await call('staffOverview.exportWithdrawals', {
        mutation: true,
        session: support,
        input: { amountMinMinor: (2n * ETH).toString(), sort: 'amount_asc' },
      }),
    );
    const records = csvRecords(exported.csv);
    expect(records.map((r) => [r.reference, r.amountMinor, r.state])).toEqual([
      ['wd-ov-1', (2n * ETH).toString(), 'REQUESTED'],
      ['wd-ov-2', (3n * ETH).toString(), 'REQUESTED'],
    ]);
    expect(records[0]?.destination).toBe(destination);
    expect(exported).toMatchObject({ rows: 2, truncated: false });

    const admin = await session(tenant.tenantId, 'admin');
    const audit = dataOf<{ items: { actor: string; action: string; details: unknown }[] }>(
      await call('staffAudit.list', { session: admin, input: { action: 'staffOverview.exportWithdrawals' } }),
    );
    expect(audit.items).toHaveLength(1);
    expect(audit.items[0]?.actor).toMatch(/^staff:/);
    // What was exported: the filter, as asked.
    expect(audit.items[0]?.details).toMatchObject({
      amountMinMinor: (2n * ETH).toString(),
      sort: 'amount_asc',
    });
  });
});
