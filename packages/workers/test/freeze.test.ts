/**
 * The freeze switch on a real chain (docs/GOVERNANCE.md "Freeze"): under a freeze in force, of the
 * tenant, of the asset or of the account, nothing new is signed or sent; the withdrawal stays
 * APPROVED, held and shown, while one already broadcast goes on to its confirmation. Once another
 * admin has approved the lift and the governance step has applied it, the held withdrawal goes out.
 */
import { type FreezeInput, IdemError } from '@idem/contracts';
import {
  applyDueControlChanges,
  decideProposal,
  freeze,
  leaseForSigning,
  listFreezes,
  proposeUnfreeze,
  rowsOf,
  setTenantGovernance,
  type Tx,
  withTenant,
} from '@idem/core';
import { staffMembers } from '@idem/testing/tenants';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHAIN_ID, type Environment, ETH, startEnvironment } from './environment.ts';

let env: Environment;
let operator: string;
let alice: string;
let bob: string;
beforeAll(async () => {
  env = await startEnvironment();
  [operator] = (await staffMembers(env.t.db, env.tenantId, 'operator', 1)) as [string];
  [alice, bob] = (await staffMembers(env.t.db, env.tenantId, 'admin', 2)) as [string, string];
  await setTenantGovernance(env.t.db, { tenantId: env.tenantId, looseningDelaySeconds: 0 });
});
afterAll(() => env.close());

const inTenant = <T>(work: (tx: Tx) => Promise<T>) => withTenant(env.t.db, env.tenantId, work);

/** Another admin approves the lift of a freeze, and the governance step applies it. */
async function liftWithTwoAdmins(freezeId: string): Promise<void> {
  const tenantId = env.tenantId;
  const { proposalId } = await inTenant((tx) => proposeUnfreeze(tx, { tenantId, actor: alice, freezeId }));
  const [row] = rowsOf<{ payload_hash: string }>(
    await inTenant((tx) =>
      tx.execute(sql`select payload_hash from proposals where proposal_id = ${proposalId}::uuid`),
    ),
  );
  await inTenant((tx) =>
    decideProposal(tx, {
      tenantId,
      proposalId: proposalId as string,
      staffId: bob,
      payloadHash: row?.payload_hash as string,
      decision: 'approve',
    }),
  );
  expect(await inTenant((tx) => applyDueControlChanges(tx, tenantId))).toMatchObject({ applied: 1 });
}

describe('I33-FREEZE workers hold frozen work and settle what is on chain', () => {
  const scopes: { name: string; request: FreezeInput; elsewhere: FreezeInput }[] = [
    {
      name: 'tenant',
      request: { scope: 'tenant', reason: 'incident' },
      elsewhere: { scope: 'tenant', reason: 'x' },
    },
    {
      name: 'asset',
      request: { scope: 'asset', assetCode: 'ETH', reason: 'node suspect' },
      elsewhere: { scope: 'asset', assetCode: 'BTC', reason: 'another asset' },
    },
    {
      name: 'account',
      request: { scope: 'account', accountRef: 'acct-1', reason: 'account takeover' },
      elsewhere: { scope: 'account', accountRef: 'acct-2', reason: 'another account' },
    },
  ];

  for (const { name, request, elsewhere } of scopes) {
    it(`I33-FREEZE ${name === 'tenant' ? 'a' : 'an'} ${name} freeze holds a new withdrawal unsigned while a broadcast one still confirms; after the approved lift it goes out`, async () => {
      const tenantId = env.tenantId;
      const worker = env.worker();
      // Already on chain before the freeze: one confirmation of the two ETH needs.
      const before = await env.withdraw(ETH / 10n);
      await worker.runOnce();
      expect((await env.operation(before.operationId)).state).toBe('BROADCAST');

      // A freeze elsewhere (another asset, another account) holds nothing here.
      let other: string | null = null;
      if (name !== 'tenant') {
        other = (await inTenant((tx) => freeze(tx, { tenantId, actor: operator, request: elsewhere })))
          .freezeId;
      }
      const frozen = await inTenant((tx) => freeze(tx, { tenantId, actor: operator, request }));
      const held = await env.withdraw(ETH / 20n);
      await worker.runOnce();
      await env.mine(1);
      await worker.runOnce();
      await worker.runOnce();

      expect((await env.operation(before.operationId)).state).toBe('CONFIRMED');
      const waiting = await env.operation(held.operationId);
      expect(waiting.state).toBe('APPROVED');
      expect(waiting.signedArtifact).toBeNull();
      expect(await env.balanceOf(held.destination ?? '')).toBe(0n);
      const view = await inTenant((tx) => listFreezes(tx, tenantId));
      expect(view.held).toEqual([
        expect.objectContaining({ operationId: held.operationId, heldBy: [frozen.freezeId] }),
      ]);
      // A worker that read the withdrawal before the freeze, and skips the candidate read, still
      // cannot claim it: the freeze is a condition of the claim's own statement.
      expect(
        await inTenant((tx) =>
          leaseForSigning(tx, { operation: waiting, workerId: 'racer', leaseMs: 5_000 }),
        ),
      ).toBeNull();
      expect((await env.operation(held.operationId)).state).toBe('APPROVED');

      await liftWithTwoAdmins(frozen.freezeId);
      await worker.runOnce();
      expect((await env.operation(held.operationId)).state).toBe('BROADCAST');
      expect(await env.balanceOf(held.destination ?? '')).toBe(ETH / 20n);
      expect((await inTenant((tx) => listFreezes(tx, tenantId))).held).toEqual([]);
      if (other) await liftWithTwoAdmins(other);
      await env.mine(2);
      await worker.runOnce();
    });
  }
});

describe('I33-FREEZE a FROZEN refusal that no freeze explains', () => {
  it('I33-FREEZE the signer refuses a withdrawal as frozen while no freeze here covers it: nothing signed, the withdrawal stays APPROVED, and the worker alerts', async () => {
    // A signer that disagrees with this database (its own read says frozen; here nothing is).
    const worker = env.worker({
      rails: {
        evm: { rpcUrl: env.rpcUrl, chainId: CHAIN_ID, requestTimeoutMs: 2_000 },
        decorateSigner: (signer) => ({
          address: signer.address,
          location: signer.location,
          signDigest: () =>
            Promise.reject(
              new IdemError('VALIDATION', 'signer service refused (FROZEN): freeze in force', {
                signerRefusal: 'FROZEN',
              }),
            ),
        }),
      },
    });
    const op = await env.withdraw(ETH / 9n);
    const before = env.logLines.length;
    await worker.runOnce();
    const after = await env.operation(op.operationId);
    expect(after.state).toBe('APPROVED');
    expect(after.signedArtifact).toBeNull();
    const mine = env.logLines.slice(before).filter((line) => line.includes(op.operationId));
    expect(mine.some((line) => line.includes('"alert":true') && line.includes('no freeze here covers'))).toBe(
      true,
    );
  });
});
