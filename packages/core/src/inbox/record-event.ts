import { createHash, randomUUID } from 'node:crypto';
import { inboundEnvelopeSchema, inboundEventDataSchemas, isKnownInboundType } from '@idem/contracts';
import { and, eq, sql } from 'drizzle-orm';
import type { Tx } from '../db/connect.ts';
import { answerOnceReplicated } from '../db/replicated-answer.ts';
import {
  type InboxRejectionReason,
  inboxEvents,
  inboxQuarantine,
  inboxRejectionBuckets,
} from '../db/schema/index.ts';
import { enqueue } from '../outbox/enqueue.ts';

export type InboxRecordOutcome = 'ACCEPTED' | 'DUPLICATE' | 'UNHANDLED' | 'QUARANTINED';

export interface VerifiedDelivery {
  tenantId: string;
  endpointId: string;
  source: string;
  /** The sender's event id (the `webhook-id` header), already verified with the body. */
  eventId: string;
  /** The raw body, exactly as signed. */
  rawBody: string;
}

export const EVENT_ID_LENGTH_MAX = 255;

/**
 * Records a verified delivery in the caller's tenant transaction; the caller acknowledges only
 * after COMMIT (C18). The (tenant, source, event id) key is the serialisation point:
 * - a new id with a known type: the event and its work item, together (ACCEPTED);
 * - the same id and the same body again: nothing new (DUPLICATE), only the delivery count moves;
 * - the same id with a different body: quarantined for a person, never applied (C19);
 * - a body that is not the envelope, or a known type whose data does not parse: quarantined;
 * - a type we do not know: stored UNHANDLED, no work item (C19).
 */
export async function recordInboxEvent(
  tx: Tx,
  delivery: VerifiedDelivery,
): Promise<{ outcome: InboxRecordOutcome; eventType: string | null }> {
  const bodySha256 = createHash('sha256').update(delivery.rawBody, 'utf8').digest('hex');
  const eventId = delivery.eventId.slice(0, EVENT_ID_LENGTH_MAX);

  const envelope = parseEnvelope(delivery.rawBody);
  if (!envelope.ok) {
    await quarantine(tx, delivery, eventId, bodySha256, 'MALFORMED');
    return { outcome: 'QUARANTINED', eventType: null };
  }
  const { type, body } = envelope;
  const known = isKnownInboundType(type);
  if (known && !inboundEventDataSchemas[type].safeParse(body.data).success) {
    await quarantine(tx, delivery, eventId, bodySha256, 'MALFORMED');
    return { outcome: 'QUARANTINED', eventType: type };
  }

  const inserted = await tx
    .insert(inboxEvents)
    .values({
      tenantId: delivery.tenantId,
      source: delivery.source,
      eventId,
      endpointId: delivery.endpointId,
      eventType: type,
      bodySha256,
      body,
      status: known ? 'RECEIVED' : 'UNHANDLED',
    })
    .onConflictDoNothing()
    .returning({ eventId: inboxEvents.eventId });

  if (inserted.length === 1) {
    if (!known) return { outcome: 'UNHANDLED', eventType: type };
    await enqueue(tx, {
      tenantId: delivery.tenantId,
      topic: 'inbox.event',
      payload: { source: delivery.source, eventId, eventType: type },
    });
    return { outcome: 'ACCEPTED', eventType: type };
  }

  // The id is taken; the conflicting row is committed (PostgreSQL waited for it) and immutable.
  // The sender stops retrying on our answer, so the answer waits until the standby holds that row.
  await answerOnceReplicated(tx);
  const existing = await tx
    .select({ bodySha256: inboxEvents.bodySha256 })
    .from(inboxEvents)
    .where(
      and(
        eq(inboxEvents.tenantId, delivery.tenantId),
        eq(inboxEvents.source, delivery.source),
        eq(inboxEvents.eventId, eventId),
      ),
    );
  const first = existing[0];
  if (!first) throw new Error('recordInboxEvent: insert conflicted but no event is visible');
  if (first.bodySha256 !== bodySha256) {
    await quarantine(tx, delivery, eventId, bodySha256, 'BODY_MISMATCH');
    return { outcome: 'QUARANTINED', eventType: type };
  }
  await tx
    .update(inboxEvents)
    .set({ deliveries: sql`${inboxEvents.deliveries} + 1`, lastDeliveryAt: sql`now()` })
    .where(
      and(
        eq(inboxEvents.tenantId, delivery.tenantId),
        eq(inboxEvents.source, delivery.source),
        eq(inboxEvents.eventId, eventId),
      ),
    );
  return { outcome: 'DUPLICATE', eventType: type };
}

/**
 * Counts a delivery that failed verification in its endpoint's bucket for this minute and reason:
 * minimal metadata, never its body (C20). One statement, so concurrent refusals each add one;
 * the rows grow with time, never with an attacker's traffic (I11-F9).
 */
export async function recordInboxRejection(
  tx: Tx,
  input: { tenantId: string; endpointId: string; reason: string; bodyLength: number },
): Promise<void> {
  const bodyLength = Math.max(0, Math.min(Math.trunc(input.bodyLength), 2_147_483_647));
  await tx
    .insert(inboxRejectionBuckets)
    .values({
      tenantId: input.tenantId,
      endpointId: input.endpointId,
      reason: rejectionReasonOf(input.reason),
      bucketStart: sql`date_trunc('minute', now())`,
      rejections: 1,
      bodyLengthMax: bodyLength,
    })
    .onConflictDoUpdate({
      target: [
        inboxRejectionBuckets.tenantId,
        inboxRejectionBuckets.endpointId,
        inboxRejectionBuckets.reason,
        inboxRejectionBuckets.bucketStart,
      ],
      set: {
        rejections: sql`${inboxRejectionBuckets.rejections} + 1`,
        lastSeenAt: sql`greatest(${inboxRejectionBuckets.lastSeenAt}, now())`,
        bodyLengthMax: sql`greatest(${inboxRejectionBuckets.bodyLengthMax}, excluded.body_length_max)`,
      },
    });
}

/** The verifier's message (standardwebhooks) as one of a closed set of reasons. */
export function rejectionReasonOf(message: string): InboxRejectionReason {
  if (/missing required headers/i.test(message)) return 'MISSING_HEADERS';
  if (/no matching signature/i.test(message)) return 'BAD_SIGNATURE';
  if (/invalid signature headers/i.test(message)) return 'BAD_TIMESTAMP';
  if (/timestamp too old/i.test(message)) return 'STALE_TIMESTAMP';
  if (/timestamp too new/i.test(message)) return 'FUTURE_TIMESTAMP';
  return 'OTHER';
}

type Envelope = { ok: true; type: string; body: Record<string, unknown> } | { ok: false };

function parseEnvelope(rawBody: string): Envelope {
  let json: unknown;
  try {
    json = JSON.parse(rawBody);
  } catch {
    return { ok: false };
  }
  const parsed = inboundEnvelopeSchema.safeParse(json);
  if (!parsed.success || typeof json !== 'object' || json === null) return { ok: false };
  return { ok: true, type: parsed.data.type, body: json as Record<string, unknown> };
}

async function quarantine(
  tx: Tx,
  delivery: VerifiedDelivery,
  eventId: string,
  bodySha256: string,
  reason: 'BODY_MISMATCH' | 'MALFORMED',
): Promise<void> {
  // One row per distinct body: a redelivered conflicting body does not pile up, and still gets 2xx.
  await tx
    .insert(inboxQuarantine)
    .values({
      tenantId: delivery.tenantId,
      quarantineId: randomUUID(),
      source: delivery.source,
      eventId,
      endpointId: delivery.endpointId,
      reason,
      bodySha256,
      body: delivery.rawBody,
    })
    .onConflictDoNothing();
}
