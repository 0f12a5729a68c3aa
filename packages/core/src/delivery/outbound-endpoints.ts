import { randomUUID } from 'node:crypto';
import { IdemError } from '@idem/contracts';
import { and, eq, isNull } from 'drizzle-orm';
import { newWebhookSecret } from '../access/endpoint-secrets.ts';
import type { Database, Tx } from '../db/connect.ts';
import { outboundEndpoints } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';
import { assertEgressAllowed, type EgressPolicy } from './egress.ts';

export type OutboundEndpoint = typeof outboundEndpoints.$inferSelect;

/**
 * Registers where the tenant receives Idem's webhooks. The secret (Standard Webhooks, `whsec_`) is
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
  if (input.url.length > 2048) throw new IdemError('VALIDATION', 'url is at most 2048 characters');
  const url = await assertEgressAllowed(input.url, egress);
  const endpointId = randomUUID();
  const secret = newWebhookSecret();
  await withTenant(db, tenantId, (tx) =>
    tx.insert(outboundEndpoints).values({ tenantId, endpointId, url, secret }),
  );
  return { endpointId, url, secret };
}

export async function activeOutboundEndpoints(tx: Tx, tenantId: string): Promise<OutboundEndpoint[]> {
  return tx
    .select()
    .from(outboundEndpoints)
    .where(and(eq(outboundEndpoints.tenantId, tenantId), isNull(outboundEndpoints.disabledAt)));
}
