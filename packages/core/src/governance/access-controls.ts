import { type ApiKeyScope, type ControlChangeOutcome, IdemError } from '@idem/contracts';
import { and, eq, isNull } from 'drizzle-orm';
import { type MintApiKeyInput, mintApiKey, setApiKeyScopes } from '../access/api-keys.ts';
import type { Database, Tx } from '../db/connect.ts';
import { apiKeys } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';
import type { EgressPolicy } from '../delivery/egress.ts';
import { checkedOutboundUrl, insertOutboundEndpoint } from '../delivery/outbound-endpoints.ts';
import { proposeControlChange } from '../proposals/control.ts';

/**
 * The staff screens' API keys and outbound endpoints, classified like every control change
 * (docs/GOVERNANCE.md): a new key, a key's added scope and a new outbound endpoint loosen, so one
 * admin's request is a control change that other admins approve and that applies after the
 * tenant's delay; narrowing, revoking and disabling tighten and act at once. The secret of a new
 * key or endpoint is generated and answered now, once, to the proposer, while the row waits
 * inactive: the approvers never see it, and nobody has to hand it over later. A tenant with one
 * admin loosens nothing, so it mints no key here (FORBIDDEN; the deployment's CLI still can).
 */

function proposed(proposal: { proposalId: string; approvalsRequired: number }): ControlChangeOutcome {
  return {
    outcome: 'PROPOSED',
    proposalId: proposal.proposalId,
    approvalsRequired: proposal.approvalsRequired,
  };
}

const APPLIED: ControlChangeOutcome = { outcome: 'APPLIED', proposalId: null, approvalsRequired: null };

/** Mints the key inactive and proposes its activation, in the caller's tenant transaction. */
export async function proposeApiKey(
  tx: Tx,
  tenantId: string,
  input: Omit<MintApiKeyInput, 'inactive'>,
): Promise<
  ControlChangeOutcome & { keyId: string; apiKey: string; scopes: ApiKeyScope[]; expiresAt: Date | null }
> {
  const minted = await mintApiKey(tx, tenantId, { ...input, inactive: true });
  const { proposal } = await proposeControlChange(tx, {
    tenantId,
    actor: input.createdBy,
    change: { control: 'api_key_create', keyId: minted.keyId },
  });
  return { ...proposed(proposal), ...minted };
}

/**
 * A key's scopes: a list that only removes applies now; one that adds any scope is proposed (the
 * answer then carries the scopes still in force and `widened: false`), and the proposer becomes the
 * key's widener when it applies, so four eyes refuses them on what the key submits.
 */
export async function changeApiKeyScopes(
  tx: Tx,
  tenantId: string,
  input: { keyId: string; scopes: readonly ApiKeyScope[]; actor: string },
): Promise<ControlChangeOutcome & { keyId: string; scopes: ApiKeyScope[]; widened: boolean }> {
  const [current] = await tx
    .select({ scopes: apiKeys.scopes })
    .from(apiKeys)
    .where(and(eq(apiKeys.tenantId, tenantId), eq(apiKeys.keyId, input.keyId), isNull(apiKeys.revokedAt)));
  if (!current) throw new IdemError('NOT_FOUND', 'no active API key with that id');
  if (input.scopes.every((scope) => current.scopes.includes(scope))) {
    return { ...APPLIED, ...(await setApiKeyScopes(tx, tenantId, input)) };
  }
  const { proposal } = await proposeControlChange(tx, {
    tenantId,
    actor: input.actor,
    change: { control: 'api_key_scopes', keyId: input.keyId, scopes: [...input.scopes] },
  });
  return {
    ...proposed(proposal),
    keyId: input.keyId,
    scopes: current.scopes as ApiKeyScope[],
    widened: false,
  };
}

/**
 * An outbound endpoint: the URL is checked against the egress policy first (VALIDATION, nothing
 * written), then stored inactive with its signing secret and its activation proposed. The worker
 * checks the URL again at every connection.
 */
export async function proposeOutboundEndpoint(
  db: Database,
  tenantId: string,
  input: { url: string; actor: string },
  egress: EgressPolicy,
): Promise<ControlChangeOutcome & { endpointId: string; url: string; secret: string }> {
  const url = await checkedOutboundUrl(input.url, egress);
  return withTenant(db, tenantId, async (tx) => {
    const created = await insertOutboundEndpoint(tx, tenantId, { url, inactive: true });
    const { proposal } = await proposeControlChange(tx, {
      tenantId,
      actor: input.actor,
      change: { control: 'webhook_endpoint_create', endpointId: created.endpointId },
    });
    return { ...proposed(proposal), ...created };
  });
}
