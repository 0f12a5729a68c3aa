import { type GovernanceSettingsInput, type GovernanceView, IdemError } from '@idem/contracts';
import { and, count, eq, isNull, ne, sql } from 'drizzle-orm';
import type { Database, Executor, Tx } from '../db/connect.ts';
import { staffUsers, tenantGovernance } from '../db/schema/index.ts';
import { NO_PASSWORD_YET } from '../staff/team.ts';

/** How long a proposal stays open by default: three days, a weekend and a working day. */
export const PROPOSAL_TTL_SECONDS_DEFAULT = 72 * 60 * 60;
const SECONDS_MAX = 30 * 24 * 60 * 60;

export interface Governance {
  proposalTtlSeconds: number;
  /** Admins who must agree to a loosening, the proposer included. */
  adminQuorum: number;
  /** Seconds between a loosening's approval and its effect. */
  looseningDelaySeconds: number;
  /** Created with one admin on purpose (docs/GOVERNANCE.md, single-admin mode). */
  singleAdmin: boolean;
  /** Every withdrawal approval needs the approver's passkey (docs/GOVERNANCE.md "Passkeys"). */
  requirePasskeyApprovals: boolean;
}

export const GOVERNANCE_DEFAULTS: Governance = {
  proposalTtlSeconds: PROPOSAL_TTL_SECONDS_DEFAULT,
  adminQuorum: 2,
  looseningDelaySeconds: 24 * 60 * 60,
  singleAdmin: false,
  requirePasskeyApprovals: false,
};

/** The tenant's governance settings; the defaults when it has never changed them. */
export async function governanceOf(db: Executor, tenantId: string): Promise<Governance> {
  const [row] = await db.select().from(tenantGovernance).where(eq(tenantGovernance.tenantId, tenantId));
  if (!row) return { ...GOVERNANCE_DEFAULTS };
  return {
    proposalTtlSeconds: row.proposalTtlSeconds,
    adminQuorum: row.adminQuorum,
    looseningDelaySeconds: row.looseningDelaySeconds,
    singleAdmin: row.singleAdmin,
    requirePasskeyApprovals: row.requirePasskeyApprovals,
  };
}

/** Admins who can act: not disabled, and with a password (an unused invitation is not an admin yet). */
export async function activeAdminCount(db: Executor, tenantId: string): Promise<number> {
  const [row] = await db
    .select({ n: count() })
    .from(staffUsers)
    .where(
      and(
        eq(staffUsers.tenantId, tenantId),
        eq(staffUsers.role, 'admin'),
        isNull(staffUsers.disabledAt),
        ne(staffUsers.passwordHash, NO_PASSWORD_YET),
      ),
    );
  return row?.n ?? 0;
}

/** The settings with the admins counted and the mode they put the tenant in. */
export async function governanceView(db: Executor, tenantId: string): Promise<GovernanceView> {
  const settings = await governanceOf(db, tenantId);
  const activeAdmins = await activeAdminCount(db, tenantId);
  const mode = activeAdmins === 0 ? 'setup' : activeAdmins === 1 ? 'single_admin' : 'quorum';
  return {
    adminQuorum: settings.adminQuorum,
    looseningDelaySeconds: settings.looseningDelaySeconds,
    proposalTtlSeconds: settings.proposalTtlSeconds,
    requirePasskeyApprovals: settings.requirePasskeyApprovals,
    activeAdmins,
    mode,
  };
}

type SettingValues = Partial<Omit<Governance, 'singleAdmin'>> & { singleAdmin?: boolean };

function checkSettings(values: SettingValues): void {
  const inRange = (v: number | undefined, min: number, max: number) =>
    v === undefined || (Number.isInteger(v) && v >= min && v <= max);
  if (!inRange(values.proposalTtlSeconds, 1, SECONDS_MAX))
    throw new IdemError('VALIDATION', `a proposal lifetime is 1..${SECONDS_MAX} seconds`);
  if (!inRange(values.looseningDelaySeconds, 0, SECONDS_MAX))
    throw new IdemError('VALIDATION', `a loosening delay is 0..${SECONDS_MAX} seconds`);
  if (!inRange(values.adminQuorum, 2, 20)) throw new IdemError('VALIDATION', 'an admin quorum is 2..20');
}

/** Writes settings in the caller's tenant-scoped transaction (a control change being applied). */
export async function writeGovernance(tx: Tx, tenantId: string, values: SettingValues): Promise<Governance> {
  checkSettings(values);
  const insert = tx.insert(tenantGovernance).values({ tenantId, ...values });
  if (Object.keys(values).length === 0) await insert.onConflictDoNothing();
  else await insert.onConflictDoUpdate({ target: tenantGovernance.tenantId, set: values });
  return governanceOf(tx, tenantId);
}

/** The settings a governance control change asks for, as columns. */
export function settingsOf(input: GovernanceSettingsInput): SettingValues {
  return {
    ...(input.adminQuorum === undefined ? {} : { adminQuorum: input.adminQuorum }),
    ...(input.looseningDelaySeconds === undefined
      ? {}
      : { looseningDelaySeconds: input.looseningDelaySeconds }),
    ...(input.proposalTtlSeconds === undefined ? {} : { proposalTtlSeconds: input.proposalTtlSeconds }),
    ...(input.requirePasskeyApprovals === undefined
      ? {}
      : { requirePasskeyApprovals: input.requirePasskeyApprovals }),
  };
}

/**
 * Sets a tenant's governance settings from the deployment's own tools (the CLI at creation, test
 * fixtures): an administrative path, like setTenantMfa, outside any staff member's reach. Staff
 * change them only through a control change their admin quorum approves.
 */
export async function setTenantGovernance(
  db: Database,
  input: { tenantId: string } & SettingValues,
): Promise<Governance> {
  const { tenantId, ...values } = input;
  return db.transaction(async (tx) => {
    await tx.execute(sql`select set_config('app.tenant_id', ${tenantId}, true)`);
    return writeGovernance(tx, tenantId, values);
  });
}
