import { randomUUID } from 'node:crypto';
import { IdemError } from '@idem/contracts';
import { and, eq, isNull } from 'drizzle-orm';
import { z } from 'zod';
import { newWebhookSecret } from '../access/endpoint-secrets.ts';
import type { Database, Tx } from '../db/connect.ts';
import { outboundEndpoints } from '../db/schema/index.ts';
import { withTenant } from '../db/tenant-scope.ts';

const urlSchema = z
  .url({ error: 'url must be an absolute http(s) URL' })
  .refine((value) => /^https?:\/\//.test(value), { error: 'url must use http or https' });

export type OutboundEndpoint = typeof outboundEndpoints.$inferSelect;

/**
 * Registers where the tenant receives Idem's webhooks. The secret (Standard Webhooks, `whsec_`) is
 * returned once to the operator, who verifies our signatures with it.
 */
export async function createOutboundEndpoint(
  db: Database,
  tenantId: string,
  input: { url: string },
): Promise<{ endpointId: string; url: string; secret: string }> {
  const parsed = urlSchema.safeParse(input.url);
  if (!parsed.success) throw new IdemError('VALIDATION', parsed.error.issues[0]?.message ?? 'invalid url');
  const endpointId = randomUUID();
  const secret = newWebhookSecret();
  await withTenant(db, tenantId, (tx) =>
    tx.insert(outboundEndpoints).values({ tenantId, endpointId, url: parsed.data, secret }),
  );
  return { endpointId, url: parsed.data, secret };
}

export async function activeOutboundEndpoints(tx: Tx, tenantId: string): Promise<OutboundEndpoint[]> {
  return tx
    .select()
    .from(outboundEndpoints)
    .where(and(eq(outboundEndpoints.tenantId, tenantId), isNull(outboundEndpoints.disabledAt)));
}
