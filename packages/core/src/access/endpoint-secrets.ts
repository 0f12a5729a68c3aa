import { randomBytes } from 'node:crypto';
import {
  type EndpointDirection,
  IdemError,
  type InboundEndpointView,
  type OutboundEndpointView,
  type RotateEndpointSecretInput,
} from '@idem/contracts';
import { and, asc, eq, isNull, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { outboundEndpoints, webhookEndpoints } from '../db/schema/index.ts';

/** A Standard Webhooks secret: `whsec_` and 256 random bits in base64. Shown once. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/**
 * The secrets an endpoint's signatures may use at `now`: the current one first, then the one the
 * last rotation replaced while its overlap lasts. Inbound intake accepts a signature by either;
 * outbound delivery signs with both, so a receiver verifies with whichever it holds.
 */
export function secretsInForce(
  endpoint: { secret: string; previousSecret: string | null; previousSecretUntil: Date | null },
  now: Date,
): string[] {
  const previous =
    endpoint.previousSecret !== null &&
    endpoint.previousSecretUntil !== null &&
    endpoint.previousSecretUntil > now
      ? [endpoint.previousSecret]
      : [];
  return [endpoint.secret, ...previous];
}

function tableOf(direction: EndpointDirection) {
  return direction === 'inbound' ? webhookEndpoints : outboundEndpoints;
}

/**
 * Replaces an active endpoint's secret. The old one stays valid for `overlapMinutes` (0: refused at
 * once). A rotation during an overlap ends the older secret's overlap: only the secret being
 * replaced is kept, so at most two are ever in force.
 */
export async function rotateEndpointSecret(
  tx: Tx,
  tenantId: string,
  input: RotateEndpointSecretInput,
): Promise<{ endpointId: string; secret: string; previousSecretUntil: string | null }> {
  const table = tableOf(input.direction);
  const secret = newWebhookSecret();
  const overlap = input.overlapMinutes > 0;
  const [rotated] = await tx
    .update(table)
    .set({
      secret,
      // The right-hand `secret` is the row's value before this UPDATE: the one being replaced.
      previousSecret: overlap ? sql`${table.secret}` : null,
      previousSecretUntil: overlap ? sql`now() + ${input.overlapMinutes} * interval '1 minute'` : null,
      rotatedAt: sql`now()`,
    })
    .where(
      and(
        eq(table.tenantId, tenantId),
        // An outbound id is a uuid column: compare as text so a malformed id is simply not found.
        sql`${table.endpointId}::text = ${input.endpointId}`,
        isNull(table.disabledAt),
      ),
    )
    .returning({ endpointId: table.endpointId, previousSecretUntil: table.previousSecretUntil });
  if (!rotated) throw new IdemError('NOT_FOUND', `no active ${input.direction} endpoint with that id`);
  return {
    endpointId: rotated.endpointId,
    secret,
    previousSecretUntil: rotated.previousSecretUntil?.toISOString() ?? null,
  };
}

/** Stops an endpoint: intake refuses its deliveries, or nothing more is sent to it. Final. */
export async function disableEndpoint(
  tx: Tx,
  tenantId: string,
  input: { direction: EndpointDirection; endpointId: string },
): Promise<void> {
  const table = tableOf(input.direction);
  const [disabled] = await tx
    .update(table)
    .set({ disabledAt: sql`now()` })
    .where(
      and(
        eq(table.tenantId, tenantId),
        sql`${table.endpointId}::text = ${input.endpointId}`,
        isNull(table.disabledAt),
      ),
    )
    .returning({ endpointId: table.endpointId });
  if (!disabled) throw new IdemError('NOT_FOUND', `no active ${input.direction} endpoint with that id`);
}

/** Both kinds of endpoint, oldest first, without their secrets. */
export async function listEndpoints(
  tx: Tx,
  tenantId: string,
): Promise<{ inbound: InboundEndpointView[]; outbound: OutboundEndpointView[] }> {
  const inbound = await tx
    .select()
    .from(webhookEndpoints)
    .where(eq(webhookEndpoints.tenantId, tenantId))
    .orderBy(asc(webhookEndpoints.createdAt), asc(webhookEndpoints.endpointId));
  const outbound = await tx
    .select()
    .from(outboundEndpoints)
    .where(eq(outboundEndpoints.tenantId, tenantId))
    .orderBy(asc(outboundEndpoints.createdAt), asc(outboundEndpoints.endpointId));
  const lifecycle = (row: {
    createdAt: Date;
    rotatedAt: Date | null;
    previousSecretUntil: Date | null;
    disabledAt: Date | null;
  }) => ({
    createdAt: row.createdAt.toISOString(),
    rotatedAt: row.rotatedAt?.toISOString() ?? null,
    previousSecretUntil: row.previousSecretUntil?.toISOString() ?? null,
    disabledAt: row.disabledAt?.toISOString() ?? null,
  });
  return {
    inbound: inbound.map((row) => ({ endpointId: row.endpointId, source: row.source, ...lifecycle(row) })),
    outbound: outbound.map((row) => ({
      endpointId: row.endpointId,
      url: row.url,
      ...lifecycle(row),
      activatedAt: row.activatedAt?.toISOString() ?? null,
    })),
  };
}
