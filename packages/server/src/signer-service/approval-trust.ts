/**
 * Whether a withdrawal's approval is one the signer service believes, without believing the
 * database (docs/SIGNING.md "Chain of trust"). Whoever holds the application's database login can
 * write an APPROVED operation, decision rows, a passkey row or a looser risk rule; none of that
 * carries a WebAuthn assertion made on an approver's device with a key the service trusts. So a
 * payment is covered only when:
 *  - the tenant is pinned in the trust file, and
 *  - its amount is within the asset's pinned auto-approve limit (the automatic review's
 *    approvals are signed under that limit alone), or
 *  - distinct approvers, none of them its requester, at least max(the pinned minimum, the
 *    operation's approvals_required), each approved its payload hash with an assertion that
 *    verifies under a trusted key.
 * A key is trusted when it is a pinned anchor, or when the EXECUTED `passkey_register` control
 * change that activated its credential bound that very key in its hashed evidence and was approved
 * by enough other members with assertions under keys trusted the same way. The key comes from that
 * chain, never from the passkey row, so a key swapped in the database verifies nothing.
 */
import { IdemError } from '@idem/contracts';
import {
  approvalChallenge,
  type Executor,
  type ExpectedRelyingParties,
  expectedRelyingParties,
  type Operation,
  proposalChallenge,
  proposalHash,
  rowsOf,
  storedAssertionRefusal,
} from '@idem/core';
import { sql } from 'drizzle-orm';
import type { TenantTrust, TrustFile } from './trust-file.ts';

type KeyTrust = { publicKey: string } | { refused: string };

const staffUserId = (actor: string): string | null => /^staff:([0-9a-f-]{36})$/.exec(actor)?.[1] ?? null;

const credentialOf = (assertion: unknown): string | null => {
  const id = (assertion as { credentialId?: unknown } | null)?.credentialId;
  return typeof id === 'string' ? id : null;
};

interface Decision {
  approver: string;
  assertion: unknown;
}

/** One signing request's view of the chain: keys resolved once, cycles refused. */
class ChainOfTrust {
  private readonly resolved = new Map<string, Promise<KeyTrust>>();
  private readonly rp: ExpectedRelyingParties;

  constructor(
    private readonly db: Executor,
    private readonly tenantId: string,
    private readonly trust: TenantTrust,
    origins: string[],
  ) {
    this.rp = expectedRelyingParties(origins);
  }

  /** The key `userId`'s credential is trusted with, or why it is not. */
  keyOf(credentialId: string, userId: string, visiting: ReadonlySet<string> = new Set()): Promise<KeyTrust> {
    const id = `${credentialId}\u0000${userId}`;
    if (visiting.has(id)) return Promise.resolve({ refused: 'its trust would rest on itself' });
    let found = this.resolved.get(id);
    if (!found) {
      found = this.resolve(credentialId, userId, new Set([...visiting, id]));
      this.resolved.set(id, found);
    }
    return found;
  }

  private async resolve(
    credentialId: string,
    userId: string,
    visiting: ReadonlySet<string>,
  ): Promise<KeyTrust> {
    const anchor = this.trust.anchors.find((a) => a.credentialId === credentialId && a.userId === userId);
    if (anchor) return { publicKey: anchor.publicKey };
    const [passkey] = rowsOf<{ revoked: boolean }>(
      await this.db.execute(sql`select revoked_at is not null as revoked from staff_passkeys
        where tenant_id = ${this.tenantId}::uuid and credential_id = ${credentialId} and user_id = ${userId}::uuid`),
    );
    if (!passkey) return { refused: 'no such passkey of the approver' };
    if (passkey.revoked) return { refused: 'the passkey is revoked' };
    const registrations = rowsOf<{
      proposal_id: string;
      payload: Record<string, unknown>;
      evidence: Record<string, unknown> | null;
      payload_hash: string;
      proposed_by: string;
      approvals_required: number;
    }>(
      await this.db.execute(sql`select proposal_id::text, payload, evidence, payload_hash, proposed_by, approvals_required
        from proposals
        where tenant_id = ${this.tenantId}::uuid and kind = 'control_change' and state = 'EXECUTED'
          and payload->'change'->>'control' = 'passkey_register'
          and payload->'change'->>'credentialId' = ${credentialId}
          and payload->'change'->>'userId' = ${userId}
        order by created_at`),
    );
    const reasons: string[] = [];
    for (const registration of registrations) {
      const hash = proposalHash({
        tenantId: this.tenantId,
        kind: 'control_change',
        payload: registration.payload,
        evidence: registration.evidence,
      });
      if (hash !== registration.payload_hash) {
        reasons.push('its registration was altered after it was proposed');
        continue;
      }
      const inForce = registration.evidence?.inForce as { publicKey?: unknown } | undefined;
      if (typeof inForce?.publicKey !== 'string') {
        reasons.push('its registration did not bind a public key');
        continue;
      }
      const decisions = rowsOf<Decision>(
        await this.db.execute(sql`select approver, passkey_assertion as assertion from proposal_decisions
          where tenant_id = ${this.tenantId}::uuid and proposal_id = ${registration.proposal_id}::uuid
            and decision = 'approve' and payload_hash = ${hash}`),
      );
      const verified = await this.verifiedApprovers(
        decisions,
        proposalChallenge(registration.proposal_id, hash, 'approve'),
        new Set([registration.proposed_by, `staff:${userId}`]),
        visiting,
      );
      const required = Math.max(this.trust.minApprovals, registration.approvals_required);
      if (verified.approvers.size >= required) return { publicKey: inForce.publicKey };
      reasons.push(
        `its registration has ${verified.approvers.size} of ${required} approvals by trusted passkeys${verified.refusals.length ? ` (${verified.refusals.join('; ')})` : ''}`,
      );
    }
    return { refused: reasons[0] ?? 'it is no anchor and no approved registration activated it' };
  }

  /** The approvers (by user) whose assertion over `challenge` verifies under a trusted key. */
  async verifiedApprovers(
    decisions: Decision[],
    challenge: string,
    excluded: ReadonlySet<string>,
    visiting: ReadonlySet<string> = new Set(),
  ): Promise<{ approvers: Set<string>; refusals: string[] }> {
    const approvers = new Set<string>();
    const refusals: string[] = [];
    for (const decision of decisions) {
      const userId = staffUserId(decision.approver);
      const credentialId = credentialOf(decision.assertion);
      let reason: string | null = null;
      if (!userId) reason = 'not a staff member';
      else if (excluded.has(decision.approver)) reason = 'may not approve their own request';
      else if (!credentialId) reason = 'no passkey assertion';
      else {
        const key = await this.keyOf(credentialId, userId, visiting);
        reason =
          'refused' in key
            ? `passkey not trusted: ${key.refused}`
            : await storedAssertionRefusal(decision.assertion, {
                challenge,
                publicKey: key.publicKey,
                rp: this.rp,
              });
      }
      if (reason === null && userId) approvers.add(userId);
      else refusals.push(`${decision.approver}: ${reason}`);
    }
    return { approvers, refusals };
  }
}

const forbidden = (message: string): never => {
  throw new IdemError('FORBIDDEN', message);
};

/**
 * Throws FORBIDDEN unless the operation's payment is covered by the trust file: within the pinned
 * auto-approve limit, or approved by enough trusted passkeys. `db` is the service's read-only
 * transaction, bound to the tenant.
 */
export async function assertApprovalTrusted(db: Executor, file: TrustFile, op: Operation): Promise<void> {
  const trust = file.tenants[op.tenantId];
  if (!trust) return forbidden('the tenant is not pinned in the signer trust file');
  const limit = trust.autoApproveMaxMinor[op.assetCode];
  if (limit !== undefined && BigInt(op.amountMinor) <= BigInt(limit)) return;
  const required = Math.max(trust.minApprovals, op.approvalsRequired ?? 0);
  const decisions = rowsOf<Decision>(
    await db.execute(sql`select approver, passkey_assertion as assertion from approvals
      where tenant_id = ${op.tenantId}::uuid and operation_id = ${op.operationId}::uuid
        and decision = 'approve' and payload_hash = ${op.payloadHash}`),
  );
  const [requested] = rowsOf<{ actor: string }>(
    await db.execute(sql`select actor from operation_transitions
      where tenant_id = ${op.tenantId}::uuid and operation_id = ${op.operationId}::uuid and from_state is null`),
  );
  const chain = new ChainOfTrust(db, op.tenantId, trust, file.origins);
  const { approvers, refusals } = await chain.verifiedApprovers(
    decisions,
    approvalChallenge(op.operationId, op.payloadHash, 'approve'),
    new Set(requested ? [requested.actor] : []),
  );
  if (approvers.size < required) {
    forbidden(
      `above the pinned auto-approve limit, and ${approvers.size} of ${required} approvals carry an assertion by a trusted passkey${refusals.length ? `: ${refusals.join('; ')}` : ''}`.slice(
        0,
        600,
      ),
    );
  }
}
