import { type Database, rowsOf } from '@idem/core';
import { type SQL, sql } from 'drizzle-orm';

/**
 * Time passing without waiting for it: instead of sleeping until the database's clock passes a
 * row's deadline (a lease, a control change's effective time, an age a check looks for), a test
 * moves the row's timestamp back. Only the timestamp moves: the version and every other column stay
 * as they were, as when the time really passes. The guards' triggers refuse such a write to anyone,
 * the tables' owner included, so it runs with triggers off for its one transaction
 * (session_replication_role = replica): `db` must be the owner's connection (createTestDatabase's;
 * a superuser on both PostgreSQL and PGlite), never the application's role.
 */
async function backdate(db: Database, update: SQL): Promise<number> {
  return db.transaction(async (tx) => {
    await tx.execute(sql`set local session_replication_role = replica`);
    return rowsOf(await tx.execute(sql`${update} returning 1`)).length;
  });
}

function exactlyOne(what: string, rows: number): void {
  if (rows !== 1) throw new Error(`${what}: expected one row to move back, moved ${rows}`);
}

/**
 * The operation's lease, if it holds one, has run out: it expired a second ago (a claim checks
 * `< now()`). Returns whether there was a lease to move.
 */
export async function expireLease(db: Database, operationId: string): Promise<boolean> {
  const moved = await backdate(
    db,
    sql`update operations set lease_expires_at = now() - interval '1 second'
         where operation_id = ${operationId}::uuid and lease_expires_at > now() - interval '1 second'`,
  );
  return moved > 0;
}

/** An approved control change's delay has passed: it became effective a second ago. */
export async function makeControlChangeDue(db: Database, proposalId: string): Promise<void> {
  exactlyOne(
    `control change ${proposalId}`,
    await backdate(
      db,
      sql`update proposals set effective_at = now() - interval '1 second'
           where proposal_id = ${proposalId}::uuid and state = 'APPROVED'`,
    ),
  );
}

/**
 * Operations look `seconds` older in their state: their last change (updated_at, what the metrics'
 * ages and the scheduler's reorganisation window read) moves back by that much. `where` picks them
 * (e.g. sql`operation_id = ${id}::uuid`); returns how many moved.
 */
export function ageOperations(db: Database, where: SQL, seconds: number): Promise<number> {
  return backdate(
    db,
    sql`update operations set updated_at = updated_at - make_interval(secs => ${seconds}) where ${where}`,
  );
}

/**
 * Operations' history looks `seconds` older: the state changes they recorded (operation_transitions,
 * what "became UNKNOWN within the window" counts, core/src/freeze/trips.ts) and their last change
 * (as ageOperations) move back by that much. `where` picks operations (columns of `operations`);
 * returns how many operations moved.
 */
export async function ageOperationHistory(db: Database, where: SQL, seconds: number): Promise<number> {
  await backdate(
    db,
    sql`update operation_transitions tr set created_at = tr.created_at - make_interval(secs => ${seconds})
          from operations where operations.tenant_id = tr.tenant_id
           and operations.operation_id = tr.operation_id and ${where}`,
  );
  return ageOperations(db, where, seconds);
}
