import { rowsOf, toView, withTenant } from '@idem/core';
import { createCustodianAdapter, generateWebhookSecret } from '@idem/rails';
import { type SimulatorProcess, spawnSimulator } from '@idem/testing/custodian';
import { strandWithdrawal } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { custodianInstruction } from '../src/steps/send.ts';
import { CHAIN_ID, type Environment, startEnvironment } from './environment.ts';

const BTC_DESTINATION = 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq';

let env: Environment;
let simulator: SimulatorProcess;

beforeAll(async () => {
  env = await startEnvironment();
  simulator = await spawnSimulator({ webhookSecret: generateWebhookSecret() });
});
// The custodian never forgets a transfer between tests: faults and settlement change, the ledger stays.
afterAll(async () => {
  await simulator.stop();
  await env.close();
});
beforeEach(async () => {
  await simulator.control({ settlement: { outcome: 'complete', afterMs: 50 } });
});

/** Every call the workers made to the custodian, in order, with the reference it was about. */
const calls: { call: 'submit' | 'lookup'; reference: string }[] = [];

function worker() {
  const adapter = createCustodianAdapter({ baseUrl: simulator.url, timeoutMs: 1_000 });
  return env.worker({
    rails: {
      evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID },
      custodian: {
        submit: (request, options) => {
          calls.push({ call: 'submit', reference: request.externalReference });
          return adapter.submit(request, options);
        },
        lookupByReference: (reference, options) => {
          calls.push({ call: 'lookup', reference });
          return adapter.lookupByReference(reference, options);
        },
        listTransfers: (options) => adapter.listTransfers(options),
        balances: () => adapter.balances(),
        depositsBetween: (window) => adapter.depositsBetween(window),
        depositById: (id, options) => adapter.depositById(id, options),
        transfersUpdatedBetween: (window) => adapter.transfersUpdatedBetween(window),
      },
    },
  });
}

function callsFor(reference: string): string[] {
  return calls.filter((c) => c.reference === reference).map((c) => c.call);
}

async function transfersFor(reference: string): Promise<number> {
  const ledger = await simulator.ledger();
  return ledger.countsByReference[reference] ?? 0;
}

/** The states an operation went through, in order. */
async function history(operationId: string): Promise<string[]> {
  const rows = rowsOf<{ to_state: string }>(
    await env.t.db.execute(
      sql`select to_state from operation_transitions where operation_id = ${operationId} order by seq`,
    ),
  );
  return rows.map((row) => row.to_state);
}

/** Worker passes, a little apart, until the operation reaches `state` (at most 20 s). */
async function settleUntil(operationId: string, state: string): Promise<void> {
  const w = worker();
  await vi.waitFor(
    async () => {
      await w.runOnce();
      expect((await env.operation(operationId)).state).toBe(state);
    },
    { timeout: 20_000, interval: 120 },
  );
}

describe('withdrawals through a custodian that misbehaves', () => {
  it('a clean path: acknowledged with our reference, then completed: CONFIRMED, one transfer', async () => {
    const op = await env.withdraw(50_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await settleUntil(op.operationId, 'CONFIRMED');
    const final = await env.operation(op.operationId);
    expect(final.state).toBe('CONFIRMED');
    expect(final.providerRef).toBeTruthy();
    expect(await transfersFor(op.operationId)).toBe(1);
  });

  it('I15 a custodian-routed withdrawal shows where the money went: the transfer id and the hash the custodian reports', async () => {
    const op = await env.withdraw(51_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await settleUntil(op.operationId, 'CONFIRMED');
    const final = await env.operation(op.operationId);
    expect(final.state).toBe('CONFIRMED');
    const reported = await createCustodianAdapter({ baseUrl: simulator.url }).lookupByReference(
      op.operationId,
    );
    if (reported.found !== 'one') throw new Error(`the custodian holds ${reported.found} transfers`);
    expect(reported.transfer.txHash).toMatch(/^0x[0-9a-f]{64}$/);
    const view = toView(final);
    // Our own transaction hash stays null: we signed nothing; the custodian's answer names the rest.
    expect(view).toMatchObject({
      txHash: null,
      custodianTransferId: reported.transfer.id,
      custodianTxHash: reported.transfer.txHash,
    });
  });

  it('C16 a 200 without our reference leaves the operation UNKNOWN until the custodian is asked', async () => {
    // The transfer settles 3 s after submission, so the lookup that follows UNKNOWN finds it still
    // in flight (BROADCAST) however slow the machine, then completed.
    await simulator.control({
      fault: 'ok-without-reference',
      faultTimes: 1,
      settlement: { outcome: 'complete', afterMs: 3_000 },
    });
    const op = await env.withdraw(60_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    // Passes until the custodian's record settles it, three seconds on.
    await settleUntil(op.operationId, 'CONFIRMED');
    // The acknowledgment did not count: UNKNOWN first, then the custodian's record by our reference.
    expect(await history(op.operationId)).toEqual(
      expect.arrayContaining(['SIGNED', 'UNKNOWN', 'BROADCAST', 'CONFIRMED']),
    );
    expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
    expect(await transfersFor(op.operationId)).toBe(1);
  });

  // Distinct amounts: the same destination and amount again would (rightly) be sent to review (C06).
  for (const [index, fault] of (
    ['accept-then-timeout', 'accept-then-5xx', 'accept-then-reset'] as const
  ).entries()) {
    it(`C13 ${fault}: UNKNOWN, reconciled by our reference, exactly one transfer`, async () => {
      await simulator.control({ fault, faultTimes: 1 });
      const op = await env.withdraw(70_000n + BigInt(index), { asset: 'BTC', destination: BTC_DESTINATION });
      await settleUntil(op.operationId, 'CONFIRMED');
      const states = await history(op.operationId);
      expect(states.slice(states.indexOf('SIGNED'), states.indexOf('SIGNED') + 2)).toEqual([
        'SIGNED',
        'UNKNOWN',
      ]);
      expect(states.at(-1)).toBe('CONFIRMED');
      expect((await env.operation(op.operationId)).state).toBe('CONFIRMED');
      expect(await transfersFor(op.operationId)).toBe(1);
    });
  }

  it('C13 a withdrawal whose stored instruction cannot be read holds up no other: the same pass resends the sound one and names the unreadable one', async () => {
    // Two withdrawals that never reached the custodian, UNKNOWN: one stored instruction is sound,
    // the other unreadable (damaged in storage). Reconciliation visits them in random order.
    const strand = async (
      amount: bigint,
      artifact: (op: Awaited<ReturnType<typeof env.withdraw>>) => string,
    ) => {
      const requested = await env.withdraw(amount, { asset: 'BTC', destination: BTC_DESTINATION });
      return withTenant(env.t.db, env.tenantId, (tx) =>
        strandWithdrawal(tx, requested, 'UNKNOWN', { txHash: null, signedArtifact: artifact(requested) }),
      );
    };
    const damaged = await strand(73_000n, () => '0xbytes');
    const sound = await strand(74_000n, (op) => custodianInstruction(op));
    const before = env.logLines.length;
    await worker().runOnce();
    const lines = env.logLines.slice(before);
    expect(lines.filter((line) => line.includes('"stage skipped"') && line.includes('"reconcile"'))).toEqual(
      [],
    );
    // Resent under our reference and accepted: one transfer, on its way.
    expect((await env.operation(sound.operationId)).state).not.toBe('UNKNOWN');
    expect(await transfersFor(sound.operationId)).toBe(1);
    // The damaged one stays UNKNOWN, funds held, and the log names it.
    expect((await env.operation(damaged.operationId)).state).toBe('UNKNOWN');
    expect(
      lines.some((line) => line.includes(damaged.operationId) && line.includes('could not be reconciled')),
    ).toBe(true);
    expect(await transfersFor(damaged.operationId)).toBe(0);
  });

  it('C14 a clean refusal is verified against the custodian before the hold is released', async () => {
    await simulator.control({ fault: 'reject', faultTimes: 1 });
    const op = await env.withdraw(80_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await settleUntil(op.operationId, 'VERIFIED_NOT_SENT');
    expect(await history(op.operationId)).toEqual(
      expect.arrayContaining(['SIGNED', 'UNKNOWN', 'VERIFIED_NOT_SENT']),
    );
    expect((await env.operation(op.operationId)).state).toBe('VERIFIED_NOT_SENT');
    expect(await transfersFor(op.operationId)).toBe(0);
    // The refusal alone released nothing: the custodian was asked by our reference first.
    expect(callsFor(op.operationId)).toEqual(['submit', 'lookup']);
  });

  it('C14 a transfer the custodian reports failed ends VERIFIED_NOT_SENT', async () => {
    await simulator.control({ settlement: { outcome: 'fail', afterMs: 20 } });
    const op = await env.withdraw(90_000n, { asset: 'BTC', destination: BTC_DESTINATION });
    await settleUntil(op.operationId, 'VERIFIED_NOT_SENT');
    expect((await env.operation(op.operationId)).state).toBe('VERIFIED_NOT_SENT');
    expect(await transfersFor(op.operationId)).toBe(1);
  });
});
