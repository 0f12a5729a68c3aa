import {
  IdemError,
  listProposalsInputSchema,
  type Permission,
  proposalStateSchema,
  roleAllows,
} from '@idem/contracts';
import {
  type AuditRecord,
  cancelProposal,
  type Database,
  decideProposal,
  expiryRefusal,
  findStaffForSignIn,
  getProposal,
  listProposals,
  propose,
  recordAudit,
  runAudited,
  type StaffUser,
  settled,
  staffActor,
  type Tx,
  toProposalView,
  withTenant,
} from '@idem/core';
import { z } from 'zod';
import { verifyPassword } from '../auth/password.ts';
import { readEnv } from '../env.ts';
import { requireCliCode } from './mfa.ts';
import { readPassword } from './read-password.ts';

import { required, UsageError } from './usage.ts';

type Flags = Record<string, string | boolean | undefined>;

function proposalId(flags: Flags): string {
  const id = required(flags, 'id');
  if (!z.uuid().safeParse(id).success) throw new UsageError('--id must be a proposal id (a UUID)');
  return id;
}

/**
 * The staff member acting from the CLI: `--as EMAIL`, the password from IDEM_STAFF_PASSWORD or
 * standard input, verified with the same argon2id check as the web sign-in. The role must hold
 * `permission`. Unknown e-mail and wrong password are refused alike. A member who uses TOTP (or
 * must) gives a code too (cli/mfa.ts); every refusal is audited.
 */
async function signIn(
  db: Database,
  tenantId: string,
  flags: Flags,
  permission: Permission,
  action: string,
): Promise<StaffUser> {
  const email = required(flags, 'as');
  const password = readEnv().IDEM_STAFF_PASSWORD ?? (await readPassword(`Password for ${email}: `));
  const user = await withTenant(db, tenantId, (tx) => findStaffForSignIn(tx, tenantId, email));
  const ok = await verifyPassword(user?.passwordHash ?? null, password);
  if (!user || !ok) {
    await auditCliAlone(db, tenantId, 'anonymous', 'signIn', 'UNAUTHORIZED', { email }).catch(
      () => undefined,
    );
    throw new IdemError('UNAUTHORIZED', 'wrong organisation, e-mail or password');
  }
  if (!roleAllows(user.role, permission)) {
    await auditCliAlone(db, tenantId, staffActor(user.userId), action, 'FORBIDDEN', {});
    throw new IdemError('FORBIDDEN', `the ${user.role} role may not do this (needs ${permission})`);
  }
  const staff = { tenantId: user.tenantId, userId: user.userId, email: user.email, role: user.role };
  try {
    await requireCliCode(db, readEnv(), staff, flags);
  } catch (error) {
    const code = error instanceof IdemError ? error.code : 'INTERNAL';
    await auditCliAlone(db, tenantId, staffActor(user.userId), action, code, {}).catch(() => undefined);
    throw error;
  }
  return staff;
}

/** An audit entry for the CLI: the source is the operator's shell, not an address. */
function cliEntry(
  tenantId: string,
  actor: string,
  action: string,
  outcome: string,
  details: unknown,
): AuditRecord {
  return { tenantId, actor, action: `cli:${action}`, outcome, sourceAddress: 'cli', details };
}

/** The same, in a transaction of its own (a refusal, after its rollback). */
function auditCliAlone(
  db: Database,
  tenantId: string,
  actor: string,
  action: string,
  outcome: string,
  details: unknown,
): Promise<void> {
  return withTenant(db, tenantId, (tx) =>
    recordAudit(tx, cliEntry(tenantId, actor, action, outcome, details)),
  );
}

/**
 * A staff action from the CLI, audited like one from the screens: a success in the action's own
 * transaction; a refusal in that same transaction, recorded with its code after a savepoint undid
 * what the action wrote (core's runAudited); any other failure on its own after the rollback.
 */
async function audited<T>(
  db: Database,
  staff: StaffUser,
  action: string,
  details: unknown,
  work: (tx: Tx) => Promise<T>,
  refusalOf?: (value: T) => IdemError | null,
): Promise<T> {
  const actor = staffActor(staff.userId);
  const entry = (outcome: string) => cliEntry(staff.tenantId, actor, action, outcome, details);
  try {
    return settled(
      await runAudited(
        db,
        staff.tenantId,
        { entry, okWhen: 'always', ...(refusalOf ? { refusalOf } : {}) },
        work,
      ),
    );
  } catch (error) {
    if (error instanceof IdemError) throw error;
    await auditCliAlone(db, staff.tenantId, actor, action, 'INTERNAL', details).catch(() => undefined);
    throw error;
  }
}

async function proposeFromFlags(
  db: Database,
  flags: Flags,
  request: (flags: Flags) => { kind: 'adjustment' | 'manual_credit'; payload: Record<string, unknown> },
) {
  const tenantId = required(flags, 'tenant');
  // Check what was typed before asking for a password.
  const { kind, payload } = request(flags);
  const idempotencyKey = required(flags, 'key');
  const staff = await signIn(db, tenantId, flags, 'operate', `proposal ${kind}`);
  return audited(db, staff, `proposal ${kind}`, { kind, idempotencyKey, payload }, async (tx) => {
    const result = await propose(tx, {
      tenantId,
      actor: staffActor(staff.userId),
      request: { kind, idempotencyKey, payload },
    });
    return { outcome: result.outcome, proposal: await toProposalView(tx, result.proposal) };
  });
}

async function decideFromFlags(db: Database, flags: Flags, decision: 'approve' | 'reject') {
  const tenantId = required(flags, 'tenant');
  const id = proposalId(flags);
  const payloadHash = required(flags, 'hash');
  const reason = typeof flags.reason === 'string' ? flags.reason : undefined;
  if (decision === 'reject' && !reason) throw new UsageError('--reason is required to reject');
  const staff = await signIn(db, tenantId, flags, 'decide', `proposal ${decision}`);
  const decided = await audited(
    db,
    staff,
    `proposal ${decision}`,
    { proposalId: id, payloadHash, reason },
    async (tx) => {
      const result = await decideProposal(tx, {
        tenantId,
        proposalId: id,
        staffId: staffActor(staff.userId),
        payloadHash,
        decision,
        reason,
      });
      return { ...result, view: await toProposalView(tx, result.proposal) };
    },
    // Marked EXPIRED in the committed transaction; the command fails with EXPIRED, audited as such.
    expiryRefusal,
  );
  return { proposal: decided.view };
}

/**
 * `idem proposal ...`: adjustments and manual credits, proposed by one staff member and approved by
 * another (four eyes, bound to the payload hash), through core's one proposal mechanism.
 */
export const proposalCommands: Record<
  string,
  (db: Database, flags: Flags) => Promise<Record<string, unknown>>
> = {
  'proposal adjustment': (db, flags) =>
    proposeFromFlags(db, flags, (f) => ({
      kind: 'adjustment',
      payload: {
        accountId: required(f, 'account'),
        asset: required(f, 'asset'),
        amountMinor: required(f, 'amount'),
        reason: required(f, 'reason'),
      },
    })),
  'proposal credit': (db, flags) =>
    proposeFromFlags(db, flags, (f) => ({
      kind: 'manual_credit',
      payload: {
        accountId: required(f, 'account'),
        asset: required(f, 'asset'),
        amountMinor: required(f, 'amount'),
        reference: required(f, 'reference'),
        reason: required(f, 'reason'),
      },
    })),
  'proposal list': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const state = flags.state === undefined ? undefined : proposalStateSchema.safeParse(flags.state);
    if (state && !state.success)
      throw new UsageError('--state must be PENDING, EXECUTED, REJECTED or CANCELLED');
    const options = listProposalsInputSchema.parse({
      ...(state ? { state: state.data } : {}),
      ...(typeof flags.cursor === 'string' ? { cursor: flags.cursor } : {}),
      limit: 100,
    });
    await signIn(db, tenantId, flags, 'read', 'proposal list');
    return withTenant(db, tenantId, (tx) => listProposals(tx, tenantId, options));
  },
  'proposal show': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const id = proposalId(flags);
    await signIn(db, tenantId, flags, 'read', 'proposal show');
    return withTenant(db, tenantId, async (tx) => toProposalView(tx, await getProposal(tx, tenantId, id)));
  },
  'proposal approve': (db, flags) => decideFromFlags(db, flags, 'approve'),
  'proposal reject': (db, flags) => decideFromFlags(db, flags, 'reject'),
  'proposal cancel': async (db, flags) => {
    const tenantId = required(flags, 'tenant');
    const id = proposalId(flags);
    // Core lets only the proposer cancel; who that is comes from the password, not a flag.
    const staff = await signIn(db, tenantId, flags, 'read', 'proposal cancel');
    return audited(db, staff, 'proposal cancel', { proposalId: id }, async (tx) => {
      const cancelled = await cancelProposal(tx, {
        tenantId,
        proposalId: id,
        actor: staffActor(staff.userId),
      });
      return { proposal: await toProposalView(tx, cancelled) };
    });
  },
};
