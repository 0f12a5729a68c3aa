import { randomUUID } from 'node:crypto';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { databaseRefusal, newTenant } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import { closeBreak, escalateBreak, listBreaks, openBreak } from '../src/reconciliation/breaks.ts';

/**
 * Breaks that cannot hide (C21): a timing break never blocks a later genuine variance
 * on the same subject; it closes with evidence when the item arrives or escalates to a new
 * genuine_variance break linked to it. The database keeps the class immutable and the link
 * consistent whatever the application does; the statements below run as the application role.
 */
let t: TestDatabase;
let tenantId: string;

beforeAll(async () => {
  t = await createTestDatabase();
  tenantId = await newTenant(t.db, 'Breaks');
});
afterAll(() => t.dispose());

const timing = (subject: string) =>
  withTenant(t.db, tenantId, (tx) =>
    openBreak(tx, {
      tenantId,
      breakClass: 'timing',
      subject,
      assetCode: 'BTC',
      ledgerAmountMinor: '100',
      observedAmountMinor: '0',
      details: { reason: 'not at the custodian yet' },
    }),
  );

describe('I13-BRK break lifecycle', () => {
  it('I13-BRK C21 a genuine variance on a subject with an open timing break escalates it: a new linked break, the old closed as escalated', async () => {
    const subject = `operation:${randomUUID()}`;
    const first = await timing(subject);
    expect(first.opened).toBe(true);
    const later = await withTenant(t.db, tenantId, (tx) =>
      openBreak(tx, {
        tenantId,
        breakClass: 'genuine_variance',
        subject,
        assetCode: 'BTC',
        ledgerAmountMinor: '100',
        observedAmountMinor: '0',
        details: { reason: 'still not at the custodian after the window' },
      }),
    );
    expect(later.opened).toBe(true);
    expect(later.break.breakClass).toBe('genuine_variance');
    expect(later.break.escalatedFrom).toBe(first.break.breakId);
    expect(later.escalated?.breakId).toBe(first.break.breakId);
    const all = await withTenant(t.db, tenantId, (tx) => listBreaks(tx, { tenantId }));
    const old = all.find((b) => b.breakId === first.break.breakId);
    expect(old).toMatchObject({ status: 'closed', closedAs: 'escalated', breakClass: 'timing' });
    expect(old?.closureEvidence).toMatchObject({ escalatedTo: later.break.breakId });
    // The same genuine finding again is the open break, not another escalation.
    const again = await withTenant(t.db, tenantId, (tx) =>
      openBreak(tx, { tenantId, breakClass: 'genuine_variance', subject, details: { reason: 'again' } }),
    );
    expect(again).toMatchObject({ opened: false, break: { breakId: later.break.breakId } });
  });

  it('I13-BRK C21 a timing break closes itself as arrived with evidence; a person closes as resolved', async () => {
    const arrived = await timing(`operation:${randomUUID()}`);
    const closed = await withTenant(t.db, tenantId, (tx) =>
      closeBreak(tx, {
        tenantId,
        breakId: arrived.break.breakId,
        closedBy: 'reconciler',
        closedAs: 'arrived',
        evidence: { operationState: 'CONFIRMED' },
      }),
    );
    expect(closed).toMatchObject({ status: 'closed', closedAs: 'arrived' });
    const byStaff = await timing(`operation:${randomUUID()}`);
    const resolved = await withTenant(t.db, tenantId, (tx) =>
      closeBreak(tx, {
        tenantId,
        breakId: byStaff.break.breakId,
        closedBy: 'staff:fc',
        evidence: { note: 'checked' },
      }),
    );
    expect(resolved.closedAs).toBe('resolved');
  });

  it('I13-BRK C21 the database keeps the class immutable and the escalation link consistent', async () => {
    const subject = `operation:${randomUUID()}`;
    const open = await timing(subject);
    const app = (statement: ReturnType<typeof sql>) =>
      databaseRefusal(withTenant(t.db, tenantId, (tx) => tx.execute(statement)));
    const insertLinked = (from: string, subjectOf: string, breakClass = 'genuine_variance') => sql`
      insert into reconciliation_breaks (tenant_id, break_id, break_class, subject, details, owner, escalated_from)
      values (${tenantId}, ${randomUUID()}, ${breakClass}, ${subjectOf}, '{}'::jsonb, 'fc', ${from})`;

    // The class never changes: a timing break does not become a variance in place.
    expect(
      await app(
        sql`update reconciliation_breaks set break_class = 'genuine_variance' where break_id = ${open.break.breakId}`,
      ),
    ).toMatch(/immutable|permission denied/);
    // A link only from a timing break of the same subject that was closed as escalated.
    expect(await app(insertLinked(open.break.breakId, subject))).toMatch(/escalat/);
    // Closing as escalated without the escalated break in the same transaction is refused at commit.
    expect(
      await app(sql`update reconciliation_breaks set status = 'closed', closed_at = now(), closed_by = 'x',
                      closure_evidence = '{"a":1}'::jsonb, closed_as = 'escalated'
                    where break_id = ${open.break.breakId}`),
    ).toMatch(/escalat/);
    const escalated = await withTenant(t.db, tenantId, (tx) =>
      escalateBreak(tx, {
        tenantId,
        breakId: open.break.breakId,
        escalatedBy: 'reconciler',
        finding: { subject, details: { reason: 'window passed' } },
        evidence: { windowSeconds: 3600 },
      }),
    );
    expect(escalated.break.escalatedFrom).toBe(open.break.breakId);
    // Another subject, another class, or a second escalation of the same break: refused.
    expect(await app(insertLinked(open.break.breakId, `operation:${randomUUID()}`))).toMatch(/escalat/);
    expect(await app(insertLinked(open.break.breakId, subject, 'timing'))).toMatch(/escalat|check/);
    await withTenant(t.db, tenantId, (tx) =>
      closeBreak(tx, {
        tenantId,
        breakId: escalated.break.breakId,
        closedBy: 'staff:fc',
        evidence: { note: 'fixed at the custodian' },
      }),
    );
    expect(await app(insertLinked(open.break.breakId, subject))).toMatch(/escalat|duplicate|unique/);
    // Only the closed-as values we know, and only on a closed break.
    const other = await timing(`operation:${randomUUID()}`);
    expect(
      await app(
        sql`update reconciliation_breaks set closed_as = 'arrived' where break_id = ${other.break.breakId}`,
      ),
    ).toMatch(/closed_as|check/);
  });
});
