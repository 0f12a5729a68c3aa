import { Writable } from 'node:stream';
import type { StaffRole } from '@idem/contracts';
import { createStaffUser, type Database, type EgressPolicy, withTenant } from '@idem/core';
import type { TestDatabase } from '@idem/testing/database';
import { type RunningServer, startServer } from '../../src/app.ts';
import { readEnv } from '../../src/env.ts';

/**
 * The real server in this process on a free port over the test's database (`settings`: extra
 * environment, NODE_ENV test and LOG_LEVEL silent unless they say otherwise). It logs nowhere and
 * its start-up lines go nowhere, unless `capture` names where: a test that reads the log gives a
 * `logDestination` (and a LOG_LEVEL in `settings`), one that reads what the server says at start
 * gives `announce`.
 */
export async function startSilentServer(
  database: TestDatabase,
  settings: Record<string, string> = {},
  capture: { logDestination?: Writable; announce?: (line: string) => void } = {},
): Promise<{ server: RunningServer; base: string }> {
  const silent = new Writable({ write: (_chunk, _encoding, done) => done() });
  const server = await startServer(
    readEnv({ PORT: '0', NODE_ENV: 'test', LOG_LEVEL: 'silent', ...settings }),
    {
      database,
      logDestination: capture.logDestination ?? silent,
      announce: capture.announce ?? (() => {}),
    },
  );
  return { server, base: `http://127.0.0.1:${server.port}` };
}

/**
 * The tests' webhook receivers listen on 127.0.0.1: a deployment's allowlist admits them
 * (IDEM_WEBHOOK_ALLOW_INTERNAL=127.0.0.1 for a server), as one would admit an internal receiver.
 */
export const LOCAL_RECEIVERS: EgressPolicy = { allowPlainHttp: false, allowInternal: ['127.0.0.1'] };

/** One staff member per role, `<role>@<domain>`, all with the same password hash. */
export async function createStaffOfRoles(
  db: Database,
  tenantId: string,
  roles: readonly StaffRole[],
  domain: string,
  passwordHash: string,
): Promise<void> {
  await withTenant(db, tenantId, async (tx) => {
    for (const role of roles) {
      await createStaffUser(tx, { tenantId, email: `${role}@${domain}`, role, passwordHash });
    }
  });
}
