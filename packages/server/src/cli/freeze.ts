import { userInfo } from 'node:os';
import { type FreezeInput, IdemError } from '@idem/contracts';
import {
  type Database,
  freezeAsOperator,
  listFreezes,
  OPERATOR_NAME,
  runAudited,
  schema,
  settled,
  tenantForSlug,
  withTenant,
} from '@idem/core';
import { eq } from 'drizzle-orm';
import { z } from 'zod';
import { required, UsageError } from './usage.ts';

export const FREEZE_USAGE = `  freeze --tenant SLUG|ID --scope tenant|asset|account [--asset CODE] [--account REF] --reason TEXT
         [--by WHO] [--json]                      freeze at once, as the deployment's operator (recorded as
                                                  cli:WHO, by default cli:<your OS user>): nothing under it
                                                  is claimed, signed (the signer service refuses it too)
                                                  or sent; fee bumps and cancels of what is broadcast go on
  freeze list --tenant SLUG|ID [--json]           the freezes in force and the withdrawals they hold
                                                  (no CLI lift: lifting is a staff control change,
                                                  staffFreeze.proposeUnfreeze, that other admins approve;
                                                  docs/GOVERNANCE.md "Freeze")`;

type Flags = Record<string, string | boolean | undefined>;

const tenantIdSchema = z.uuid();

/** The tenant a `--tenant` names: its id, or its organisation slug. NOT_FOUND when neither. */
async function tenantOf(db: Database, named: string): Promise<string> {
  const byId = tenantIdSchema.safeParse(named);
  const tenantId = byId.success ? byId.data : await tenantForSlug(db, named.toLowerCase());
  const found =
    tenantId !== null &&
    (await withTenant(db, tenantId, (tx) =>
      tx
        .select({ tenantId: schema.tenants.tenantId })
        .from(schema.tenants)
        .where(eq(schema.tenants.tenantId, tenantId)),
    ).then((rows) => rows.length === 1));
  if (!found || tenantId === null) throw new IdemError('NOT_FOUND', `no tenant ${named}`);
  return tenantId;
}

/**
 * `idem freeze` and `idem freeze list`. Freezing from the CLI is a tightening, like the staff
 * screen's: no second person is asked. There is deliberately no `freeze lift`: a loosening is a
 * control change other admins approve, and the database refuses any other lift.
 */
export async function freezeCommand(
  db: Database,
  rest: string[],
  flags: Flags,
): Promise<Record<string, unknown>> {
  if (rest.length === 1 && rest[0] === 'list') {
    const tenantId = await tenantOf(db, required(flags, 'tenant'));
    const { freezes, held } = await withTenant(db, tenantId, (tx) => listFreezes(tx, tenantId));
    const inForce = freezes.filter((f) => f.liftedAt === null);
    if (flags.json === true) return { tenantId, freezes: inForce, held };
    // Readable in an incident: one line per freeze and per withdrawal it holds.
    return {
      tenantId,
      freezes: inForce.length,
      ...Object.fromEntries(
        inForce.map((f) => [
          `freeze ${f.freezeId}`,
          `${f.scope}${f.assetCode ? ` ${f.assetCode}` : ''}${f.accountRef ? ` ${f.accountRef}` : ''}` +
            ` by ${f.frozenBy} at ${f.frozenAt}: ${f.reason}` +
            (f.pendingLiftProposalId ? ` (lift proposed: ${f.pendingLiftProposalId})` : ''),
        ]),
      ),
      held: held.length,
      ...Object.fromEntries(
        held.map((w) => [
          `held ${w.operationId}`,
          `${w.state} ${w.amountMinor} ${w.assetCode} from ${w.accountRef}, by ${w.heldBy.join(', ')}`,
        ]),
      ),
    };
  }
  if (rest.length > 0) {
    throw new UsageError(
      `unknown freeze command: ${rest.join(' ')} (a freeze is lifted only by a staff control change)`,
    );
  }
  const tenantId = await tenantOf(db, required(flags, 'tenant'));
  // Handed to the schema as typed: a missing or stray target, or no reason, is a VALIDATION refusal.
  const request = {
    scope: flags.scope,
    ...(flags.asset === undefined ? {} : { assetCode: flags.asset }),
    ...(flags.account === undefined ? {} : { accountRef: flags.account }),
    ...(flags.reason === undefined ? {} : { reason: flags.reason }),
  } as FreezeInput;
  const operator = typeof flags.by === 'string' && flags.by !== '' ? flags.by : userInfo().username;
  // In the tenant's audit log like a staff member's freeze: the tenant's admins see who froze them
  // from the deployment's side, and a refused attempt with its code (nothing else is written then).
  const entry = (outcome: string) => ({
    tenantId,
    actor: OPERATOR_NAME.test(operator) ? `cli:${operator}` : 'cli:(unnamed)',
    action: 'cli:freeze',
    outcome,
    sourceAddress: 'cli',
    details: request,
  });
  return settled(
    await runAudited(db, tenantId, { entry, okWhen: 'always' }, (tx) =>
      freezeAsOperator(tx, { tenantId, operator, request }),
    ),
  );
}
