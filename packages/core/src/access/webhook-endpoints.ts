import { randomBytes } from 'node:crypto';
import { IdemError } from '@idem/contracts';
import { and, eq, isNull, sql } from 'drizzle-orm';
import { z } from 'zod';
import type { Database, Executor } from '../db/connect.ts';
import { webhookEndpoints } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';
import { newWebhookSecret, secretsInForce } from './endpoint-secrets.ts';

/**
 * An endpoint id is `we_<tenant id, 32 hex>_<16 random hex>`: it appears in the URL a source posts
 * to, and names the tenant so the endpoint is looked up inside that tenant's scope. It is not a
 * credential; the signature over the body is (C20).
 */
const ENDPOINT_ID_PATTERN = /^we_([0-9a-f]{32})_[0-9a-f]{16}$/;

export const webhookSourceSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, { error: 'source must be a short lowercase name such as custodian' });

export function tenantOfEndpoint(endpointId: string): string | null {
  const hex = ENDPOINT_ID_PATTERN.exec(endpointId)?.[1];
  if (!hex) return null;
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Creates an endpoint for one source. The secret is returned once, for the source's configuration. */
export async function createWebhookEndpoint(
  db: Database,
  tenantId: string,
  input: { source: string },
): Promise<{ endpointId: string; source: string; secret: string }> {
  const parsed = webhookSourceSchema.safeParse(input.source);
  if (!parsed.success) throw new IdemError('VALIDATION', parsed.error.issues[0]?.message ?? 'bad source');
  const endpointId = `we_${tenantId.replaceAll('-', '').toLowerCase()}_${randomBytes(8).toString('hex')}`;
  const secret = newWebhookSecret();
  await withTenant(db, tenantId, async (tx) => {
    await tx.insert(webhookEndpoints).values({ tenantId, endpointId, source: parsed.data, secret });
  });
  return { endpointId, source: parsed.data, secret };
}

/**
 * An active endpoint, read in the caller's tenant transaction, with the secrets a signature may
 * use now: the current one, and the one a rotation replaced while its overlap lasts.
 */
export async function findWebhookEndpoint(
  tx: Executor,
  tenantId: string,
  endpointId: string,
): Promise<{ endpointId: string; source: string; secrets: string[] } | null> {
  const rows = await tx
    .select({
      endpointId: webhookEndpoints.endpointId,
      source: webhookEndpoints.source,
      secret: webhookEndpoints.secret,
      previousSecret: webhookEndpoints.previousSecret,
      previousSecretUntil: webhookEndpoints.previousSecretUntil,
      // The database's clock decides the overlap, like the rotation that set it.
      now: sql<Date>`now()`.mapWith(webhookEndpoints.createdAt),
    })
    .from(webhookEndpoints)
    .where(
      and(
        eq(webhookEndpoints.tenantId, tenantId),
        eq(webhookEndpoints.endpointId, endpointId),
        isNull(webhookEndpoints.disabledAt),
      ),
    );
  const row = rows[0];
  if (!row) return null;
  return { endpointId: row.endpointId, source: row.source, secrets: secretsInForce(row, row.now) };
}
