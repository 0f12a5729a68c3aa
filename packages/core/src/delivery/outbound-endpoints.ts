import { randomUUID } from 'node:crypto';
import { IdemError } from '@idem/contracts';
import { and, eq, isNotNull, isNull, sql } from 'drizzle-orm';
import { newWebhookSecret } from '../access/endpoint-secrets.ts';
import type { Database, Tx } from '../db/connect.ts';
import { outboundEndpoints } from '../db/schema/index.ts';
import { withTenantAsConnection } from '../db/tenant-scope.ts';
import { assertEgressAllowed, type EgressPolicy } from './egress.ts';

export type OutboundEndpoint = typeof outboundEndpoints.$inferSelect;

/**
 * The deployment's own tools (the CLI's `outbound-endpoint create`; fixtures): registers, active at
 * once, where the tenant receives Idem's webhooks, as the connection's role. The database stores an
 * active endpoint only for the tables' owner or a superuser (idem_guard_inactive_insert); the staff
 * screens store one inactive and propose it (proposeOutboundEndpoint). The secret (Standard Webhooks, `whsec_`) is
 * returned once to the operator, who verifies our signatures with it. The URL must pass the
 * deployment's egress policy (https, public addresses or the allowlist): a refusal is a VALIDATION
 * error and writes nothing. The worker checks again at every connection (DNS can change).
 */
export async function createOutboundEndpoint(
  db: Database,
  tenantId: string,
  input: { url: string },
  egress: EgressPolicy,
): Promise<{ endpointId: string; url: string; secret: string }> {
  const url = await checkedOutboundUrl(input.url, egress);
  return withTenantAsConnection(db, tenantId, (tx) =>
    insertOutboundEndpoint(tx, tenantId, { url, inactive: false }),
  );
}

/** The URL as the egress policy admits it (VALIDATION otherwise): checked before anything is written. */
export async function checkedOutboundUrl(url: string, egress: EgressPolicy): Promise<string> {
  if (url.length > 2048) throw new IdemError('VALIDATION', 'url is at most 2048 characters');
  return assertEgressAllowed(url, egress);
}

/**
 * Stores an endpoint whose URL the egress policy admitted. `inactive`: it receives nothing until an
 * approved `webhook_endpoint_create` control change activates it (the staff screens). Active: only
 * the deployment's tools' role may store it so (idem_guard_inactive_insert).
 */
export async function insertOutboundEndpoint(
  tx: Tx,
  tenantId: string,
  input: { url: string; inactive: boolean },
): Promise<{ endpointId: string; url: string; secret: string }> {
  const endpointId = randomUUID();
  const secret = newWebhookSecret();
  await tx.insert(outboundEndpoints).values({
    tenantId,
    endpointId,
    url: input.url,
    secret,
    ...(input.inactive ? { activatedAt: null } : {}),
  });
  return { endpointId, url: input.url, secret };
}

/**
 * Activates an endpoint stored inactive: the apply step of its approved control change. One
 * disabled while it waited stays disabled (INVALID_TRANSITION: the change is refused). The URL is
 * checked against the egress policy again at every connection.
 */
export async function activateOutboundEndpoint(
  tx: Tx,
  tenantId: string,
  endpointId: string,
): Promise<{ endpointId: string }> {
  const [row] = await tx
    .update(outboundEndpoints)
    .set({ activatedAt: sql`now()` })
    .where(
      and(
        eq(outboundEndpoints.tenantId, tenantId),
        eq(outboundEndpoints.endpointId, endpointId),
        isNull(outboundEndpoints.disabledAt),
        isNull(outboundEndpoints.activatedAt),
      ),
    )
    .returning({ endpointId: outboundEndpoints.endpointId });
  if (!row) throw new IdemError('INVALID_TRANSITION', 'the endpoint was disabled or is already active');
  return row;
}

/** Endpoints that receive: activated (approved, where that was needed) and not disabled. */
export async function activeOutboundEndpoints(tx: Tx, tenantId: string): Promise<OutboundEndpoint[]> {
  return tx
    .select()
    .from(outboundEndpoints)
    .where(
      and(
        eq(outboundEndpoints.tenantId, tenantId),
        isNull(outboundEndpoints.disabledAt),
        isNotNull(outboundEndpoints.activatedAt),
      ),
    );
}
