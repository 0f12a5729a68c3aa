import { IdemError } from '@idem/contracts';
import { createTestDatabase, type TestDatabase } from '@idem/testing/database';
import { approveWithdrawal, fund, newTenant, submit } from '@idem/testing/tenants';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withTenant } from '../src/db/tenant-scope.ts';
import { getOperation, type Operation } from '../src/operations/operation-record.ts';
import { leaseForSigning, recordSigned } from '../src/state-machine/lease.ts';
import { transition } from '../src/state-machine/transition.ts';
import { allowedNext } from '../src/state-machine/transitions.ts';
import { expectLedgerInvariants } from './ledger-invariants.ts';

/**
 * Random sequences of creates, replays, conflicting reuses, second clients, deposits and state
 * transitions. After every step the ledger's invariants must hold:
 * every entry balances per asset; every balance equals the sum of its postings; nothing is
 * negative; every withdrawal that still holds funds is covered by its account's held balance.
 */
let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(() => t.dispose());

const ACCOUNTS = ['a1', 'a2'];
const DESTINATIONS = [
  '0x52908400098527886E0F7030069857D2E4169EE7',
  '0x8617E340B3D01FA5F11F306F4090FD50E238070D',
];

type Command =
  | { kind: 'create'; key: number; ref: number; account: number; amount: number; destination: number }
  | { kind: 'deposit'; account: number; amount: number }
  | { kind: 'advance'; pick: number; choice: number; steps: number };

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  fc.record({
    kind: fc.constant('create' as const),
    key: fc.integer({ min: 0, max: 5 }),
    ref: fc.integer({ min: 0, max: 5 }),
    account: fc.integer({ min: 0, max: 1 }),
    amount: fc.integer({ min: 1, max: 400 }),
    destination: fc.integer({ min: 0, max: 1 }),
  }),
  fc.record({
    kind: fc.constant('deposit' as const),
    account: fc.integer({ min: 0, max: 1 }),
    amount: fc.integer({ min: 1, max: 500 }),
  }),
  fc.record({
    kind: fc.constant('advance' as const),
    pick: fc.nat(),
    choice: fc.nat(),
    steps: fc.integer({ min: 1, max: 6 }),
  }),
);

async function advance(tenantId: string, op: Operation, choice: number): Promise<void> {
  await withTenant(t.db, tenantId, async (tx) => {
    const current = await getOperation(tx, tenantId, op.operationId);
    const next = allowedNext(current.kind, current.state);
    const to = next[choice % Math.max(next.length, 1)];
    if (!to) return;
    if (to === 'SIGNING') {
      await leaseForSigning(tx, { operation: current, workerId: 'w', leaseMs: 60_000 });
    } else if (to === 'SIGNED') {
      await recordSigned(tx, {
        tenantId,
        operationId: current.operationId,
        leaseGeneration: current.leaseGeneration,
        signedArtifact: '0xbytes',
        txHash: `0x${current.operationId.replaceAll('-', '')}`,
        workerId: current.leaseOwner ?? 'w',
      });
    } else if (to === 'APPROVED' && current.state === 'REQUESTED') {
      // The only approval the database accepts: reviewed, then decided by real approvers (I32-DB).
      await approveWithdrawal(tx, current);
    } else {
      await transition(tx, current, to, { actor: 'property', reason: 'random walk' });
    }
  });
}

describe('ledger properties', () => {
  it('random sequences keep every entry balanced, balances equal to postings, nothing negative, holds covering open withdrawals', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(commandArb, { minLength: 1, maxLength: 25 }), async (commands) => {
        const tenantId = await newTenant(t.db);
        const created: Operation[] = [];
        for (const command of commands) {
          if (command.kind === 'deposit') {
            await fund(t.db, tenantId, ACCOUNTS[command.account] ?? 'a1', 'ETH', BigInt(command.amount));
          } else if (command.kind === 'create') {
            const request = {
              withdrawalId: `ref-${command.ref}`,
              accountId: ACCOUNTS[command.account] ?? 'a1',
              asset: 'ETH',
              destination: DESTINATIONS[command.destination] ?? '',
              amountMinor: String(command.amount),
            };
            try {
              const result = await submit(t.db, tenantId, request, `key-${command.key}`);
              if (result.outcome === 'CREATED') created.push(result.operation);
              else expect(result.operation.reference).toBe(request.withdrawalId);
            } catch (error) {
              // The only refusals for valid input are the identity ones.
              expect(error).toBeInstanceOf(IdemError);
              expect(['IDEMPOTENCY_CONFLICT', 'IN_FLIGHT']).toContain((error as IdemError).code);
            }
          } else if (created.length > 0) {
            const op = created[command.pick % created.length];
            // Several steps at once, so random walks reach the deep states (CONFIRMED, reorgs).
            for (let step = 0; op && step < command.steps; step++) {
              await advance(tenantId, op, command.choice + step);
              await expectLedgerInvariants(t.db, tenantId);
            }
          }
          await expectLedgerInvariants(t.db, tenantId);
        }
      }),
      { numRuns: 25 },
    );
  });
});
