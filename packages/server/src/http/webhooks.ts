import type { IncomingMessage, ServerResponse } from 'node:http';
import { type InboxOutcome, scrubMessage } from '@idem/contracts';
import {
  type Database,
  findWebhookEndpoint,
  recordInboxEvent,
  recordInboxRejection,
  tenantOfEndpoint,
  withTenant,
} from '@idem/core';
import type { Logger } from 'pino';
import { Webhook } from 'standardwebhooks';
import type { Env } from '../env.ts';
import { isDatabaseUnavailable } from '../errors.ts';
import type { Metrics } from '../metrics.ts';
import { BodyTooLargeError, readBody } from './body.ts';
import { sendJson, sendProblem } from './problem.ts';

export interface WebhookDeps {
  db: Database;
  env: Env;
  log: Logger;
  metrics: Metrics;
}

/**
 * `POST /webhooks/:endpointId`. In order: the endpoint names the tenant; the signature is checked
 * over the raw body with the endpoint's secret before the body is looked at (C20); then the inbox
 * row and its work item commit together, and only then is 2xx sent (C18). A database that cannot
 * commit answers 503 so the sender retries.
 */
export async function handleWebhook(
  req: IncomingMessage,
  res: ServerResponse,
  endpointId: string,
  requestId: string,
  deps: WebhookDeps,
): Promise<InboxOutcome | null> {
  const { db, env, log, metrics } = deps;
  const count = (outcome: InboxOutcome) => {
    metrics.webhookDeliveries.inc({ outcome });
    return outcome;
  };

  let raw: Buffer;
  try {
    raw = await readBody(req, env.IDEM_BODY_LIMIT_BYTES);
  } catch (error) {
    if (error instanceof BodyTooLargeError) {
      sendProblem(res, requestId, 'PAYLOAD_TOO_LARGE', 'the webhook body is over the size limit');
      return null;
    }
    throw error;
  }

  const tenantId = tenantOfEndpoint(endpointId);
  let endpoint: Awaited<ReturnType<typeof findWebhookEndpoint>> = null;
  if (tenantId) {
    try {
      endpoint = await withTenant(db, tenantId, (tx) => findWebhookEndpoint(tx, tenantId, endpointId));
    } catch (error) {
      return unavailable(error);
    }
  }
  if (!tenantId || !endpoint) {
    // Nothing about an unknown endpoint is stored: there is no tenant to store it under.
    log.warn({ requestId, bodyLength: raw.length }, 'webhook for an unknown endpoint refused');
    sendProblem(res, requestId, 'UNAUTHORIZED', 'unknown endpoint or bad signature');
    return count('UNKNOWN_ENDPOINT');
  }

  const body = raw.toString('utf8');
  const headers = {
    'webhook-id': headerOf(req, 'webhook-id'),
    'webhook-timestamp': headerOf(req, 'webhook-timestamp'),
    'webhook-signature': headerOf(req, 'webhook-signature'),
  };
  // During a rotation's overlap a signature by the previous secret is as good as one by the new;
  // outside it only the current secret verifies.
  let reason: string | null = null;
  for (const secret of endpoint.secrets) {
    try {
      new Webhook(secret).verify(body, headers, { jsonParse: false });
      reason = null;
      break;
    } catch (error) {
      reason = error instanceof Error ? error.message : 'verification failed';
    }
  }
  if (reason !== null) {
    try {
      await withTenant(db, tenantId, (tx) =>
        recordInboxRejection(tx, { tenantId, endpointId, reason: reason ?? '', bodyLength: raw.length }),
      );
    } catch (error) {
      log.error({ requestId, err: scrubMessage(String(error)) }, 'could not record a webhook rejection');
    }
    log.warn({ requestId, tenantId, endpointId, reason }, 'webhook signature refused');
    sendProblem(res, requestId, 'UNAUTHORIZED', 'unknown endpoint or bad signature');
    return count('REJECTED_SIGNATURE');
  }
  faultPoint(env, 'webhook-after-verify');

  let recorded: Awaited<ReturnType<typeof recordInboxEvent>>;
  try {
    recorded = await withTenant(db, tenantId, (tx) =>
      recordInboxEvent(tx, {
        tenantId,
        endpointId,
        source: endpoint.source,
        eventId: headers['webhook-id'],
        rawBody: body,
      }),
    );
  } catch (error) {
    return unavailable(error);
  }
  faultPoint(env, 'webhook-after-commit');

  const context = { requestId, tenantId, source: endpoint.source, eventId: headers['webhook-id'] };
  if (recorded.outcome === 'QUARANTINED') {
    // The alert: an owner must look at two bodies under one event id, or a body we cannot read.
    log.error({ ...context, alert: 'webhook_quarantined' }, 'ALERT webhook event quarantined (C19)');
  } else if (recorded.outcome === 'UNHANDLED') {
    // Stored, never acted on: a sender's event we do not understand may be money moving.
    log.error(
      { ...context, eventType: recorded.eventType, alert: 'webhook_unhandled' },
      'ALERT webhook event of a type we do not handle stored UNHANDLED (C19)',
    );
  } else {
    log.info({ ...context, outcome: recorded.outcome, eventType: recorded.eventType }, 'webhook recorded');
  }
  sendJson(res, 200, { received: true, outcome: recorded.outcome });
  return count(recorded.outcome);

  function unavailable(error: unknown): InboxOutcome {
    const down = isDatabaseUnavailable(error);
    log.error(
      { requestId, err: scrubMessage(String(error)), databaseUnavailable: down },
      'webhook not recorded',
    );
    sendProblem(res, requestId, 'INTERNAL', 'the event could not be recorded; retry later', 503, {
      'retry-after': '5',
    });
    return count('UNAVAILABLE');
  }
}

function headerOf(req: IncomingMessage, name: string): string {
  const value = req.headers[name];
  return (Array.isArray(value) ? value[0] : value) ?? '';
}

function faultPoint(env: Env, point: NonNullable<Env['IDEM_FAULT_INJECT']>): void {
  if (env.IDEM_FAULT_INJECT === point && env.NODE_ENV !== 'production') {
    process.kill(process.pid, 'SIGKILL');
  }
}
