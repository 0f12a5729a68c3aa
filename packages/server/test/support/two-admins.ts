import { createStaffUser, setTenantGovernance, withTenant } from '@idem/core';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { provisionRiskPolicy } from '@idem/testing/tenants';
import { afterAll, beforeAll } from 'vitest';
import type { RunningServer } from '../../src/app.ts';
import { hashPassword } from '../../src/auth/password.ts';
import { startSilentServer } from './in-process.ts';
import { ETH, provisionTenant, type TenantFixture } from './provision.ts';
import { PASSWORD, type StaffHttp, type StaffSession, staffHttp } from './staff-http.ts';

/** The tenant's staff: two admins, so one approves what the other proposes, and an approver. */
export const TWO_ADMINS_STAFF = ['admin', 'admin2', 'approver'] as const;
export type TwoAdminsMember = (typeof TWO_ADMINS_STAFF)[number];

export interface TwoAdminsTenant {
  readonly database: TestDatabase;
  /** The server's address. */
  readonly base: string;
  readonly tenant: TenantFixture;
  readonly call: StaffHttp['call'];
  readonly signIn: StaffHttp['signIn'];
  /** A member's session, signed in on first use and kept for the file. */
  session(who: TwoAdminsMember): Promise<StaffSession>;
}

/**
 * Registers the hooks of a test file about what staff configure under the admin quorum (API keys,
 * their scopes, outbound endpoints): a fresh database; a tenant with ETH rules (auto-approve up to
 * 1 ETH, one approval up to 5 ETH), two admins and an approver (`<who>@<domain>`, PASSWORD) and
 * `looseningDelaySeconds` before an approved change applies; then the real server in this process
 * with `env`. No worker runs: a withdrawal waits unreviewed, and tests apply control changes
 * themselves (support/control-changes.ts). Read the fields inside tests.
 */
export function twoAdminsTenant(options: {
  name: string;
  domain: string;
  looseningDelaySeconds: number;
  env: Record<string, string>;
}): TwoAdminsTenant {
  let database: TestDatabase | undefined;
  let server: RunningServer | undefined;
  let base: string | undefined;
  let tenant: TenantFixture | undefined;
  const http = staffHttp(() => started(base));
  const sessions = new Map<TwoAdminsMember, StaffSession>();

  beforeAll(async () => {
    database = await createTestDatabase({ maxConnections: 5 });
    const provisioned = await provisionTenant(database.db, { name: options.name });
    tenant = provisioned;
    const passwordHash = await hashPassword(PASSWORD);
    await provisionRiskPolicy(database.db, {
      tenantId: provisioned.tenantId,
      assetCode: 'ETH',
      autoApproveMaxMinor: ETH.toString(),
      fourEyesMinMinor: (5n * ETH).toString(),
      velocityMaxPerHour: 1000,
      actor: 'test:setup',
    });
    await withTenant(database.db, provisioned.tenantId, async (tx) => {
      for (const who of TWO_ADMINS_STAFF) {
        await createStaffUser(tx, {
          tenantId: provisioned.tenantId,
          email: `${who}@${options.domain}`,
          role: who === 'approver' ? 'approver' : 'admin',
          passwordHash,
        });
      }
    });
    await setTenantGovernance(database.db, {
      tenantId: provisioned.tenantId,
      looseningDelaySeconds: options.looseningDelaySeconds,
    });
    ({ server, base } = await startSilentServer(database, options.env));
  });
  afterAll(async () => {
    await server?.close();
    await database?.dispose();
  });

  return {
    get database() {
      return started(database);
    },
    get base() {
      return started(base);
    },
    get tenant() {
      return started(tenant);
    },
    call: http.call,
    signIn: http.signIn,
    async session(who) {
      const known = sessions.get(who);
      if (known) return known;
      const made = await http.signIn({
        tenantId: started(tenant).tenantId,
        email: `${who}@${options.domain}`,
        password: PASSWORD,
      });
      sessions.set(who, made);
      return made;
    },
  };
}

function started<V>(value: V | undefined): V {
  if (value === undefined)
    throw new Error('the tenant and its server are not set up yet (read this inside a test)');
  return value;
}
