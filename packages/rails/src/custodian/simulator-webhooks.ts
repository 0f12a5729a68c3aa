/**
 * The simulator's webhooks: signed with Standard Webhooks, delivered one at a time in emission
 * order with a few retries, and misdelivered on request (late, duplicated, altered, reordered,
 * dropped).
 */
import { Webhook } from 'standardwebhooks';
import type {
  CustodianDeposit,
  CustodianTransfer,
  Ledger,
  WebhookDelivery,
  WebhookEventType,
} from './protocol.ts';

const deliveriesLogMax = 1_000;
const webhookAttemptsMax = 3;
const webhookTimeoutMs = 2_000;
const webhookBackoffMs = 100;

/** How webhooks go out now (the /_control `webhooks` settings). */
export interface WebhookSettings {
  url: string | null;
  delivery: WebhookDelivery;
  lateMs: number;
  drop: string[];
}

export class WebhookOutbox {
  /** Every delivery attempt, for /_ledger (bounded). */
  readonly deliveries: Ledger['webhookDeliveries'] = [];
  private readonly signer: Webhook;
  private readonly heldEvents = new Map<string, { webhookId: string; type: string; body: string }[]>();
  private shutdown = new AbortController();
  private deliveryChain: Promise<void> = Promise.resolve();

  constructor(
    secret: string,
    private readonly settings: () => WebhookSettings,
    /** Runs `action` after `ms`, on a timer the simulator clears on reset and close. */
    private readonly later: (ms: number, action: () => void) => void,
  ) {
    this.signer = new Webhook(secret);
  }

  /** Forgets every delivery and cancels what was queued. */
  reset(): void {
    this.deliveries.length = 0;
    this.heldEvents.clear();
    this.shutdown.abort();
    this.shutdown = new AbortController();
    this.deliveryChain = Promise.resolve();
  }

  /** Cancels what was queued, for good. */
  close(): void {
    this.shutdown.abort();
  }

  emitTransfer(transfer: CustodianTransfer, type: WebhookEventType): void {
    const webhookId = `msg_${transfer.id}_${type.replace('transfer.', '')}`;
    const body = JSON.stringify({ type, occurredAt: transfer.updatedAt, data: transfer });
    const { delivery, lateMs, drop } = this.settings();
    if (drop.includes(type)) return;
    switch (delivery) {
      case 'normal':
        this.enqueue(webhookId, type, body);
        return;
      case 'duplicate':
        this.enqueue(webhookId, type, body);
        this.enqueue(webhookId, type, body);
        return;
      case 'late':
        this.later(lateMs, () => this.enqueue(webhookId, type, body));
        return;
      case 'conflicting-body': {
        this.enqueue(webhookId, type, body);
        const altered = { ...transfer, amountMinor: (BigInt(transfer.amountMinor) + 1n).toString() };
        this.enqueue(
          webhookId,
          type,
          JSON.stringify({ type, occurredAt: transfer.updatedAt, data: altered }),
        );
        return;
      }
      case 'out-of-order': {
        // Hold a transfer's events until its final one, then send them newest first.
        const held = this.heldEvents.get(transfer.id) ?? [];
        held.push({ webhookId, type, body });
        if (type === 'transfer.submitted') {
          this.heldEvents.set(transfer.id, held);
          return;
        }
        this.heldEvents.delete(transfer.id);
        for (const event of held.reverse()) this.enqueue(event.webhookId, event.type, event.body);
        return;
      }
    }
  }

  /** A deposit's one webhook, in the inbound `deposit.confirmed` shape; delays and repeats apply. */
  emitDeposit(deposit: CustodianDeposit): void {
    const type = 'deposit.confirmed';
    const { delivery, lateMs, drop } = this.settings();
    if (drop.includes(type)) return;
    const webhookId = `msg_${deposit.id}_deposit`;
    const { id, accountId, asset, amountMinor, txHash } = deposit;
    const body = JSON.stringify({
      type,
      occurredAt: deposit.confirmedAt,
      data: { reference: id, accountId, asset, amountMinor, ...(txHash ? { txHash } : {}) },
    });
    if (delivery === 'late') this.later(lateMs, () => this.enqueue(webhookId, type, body));
    else this.enqueue(webhookId, type, body);
    if (delivery === 'duplicate') this.enqueue(webhookId, type, body);
  }

  private enqueue(webhookId: string, type: string, body: string): void {
    // One delivery at a time, in emission order: misordering happens only when asked for.
    // Bound to the current generation: a reset or close cancels what was queued before it.
    const { signal } = this.shutdown;
    this.deliveryChain = this.deliveryChain.then(() => this.deliver(webhookId, type, body, signal));
  }

  private async deliver(
    webhookId: string,
    type: string,
    body: string,
    cancelled: AbortSignal,
  ): Promise<void> {
    const url = this.settings().url;
    if (!url) return;
    for (let attempt = 1; attempt <= webhookAttemptsMax; attempt++) {
      if (cancelled.aborted) return;
      const timestamp = new Date();
      let status: number | null = null;
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'webhook-id': webhookId,
            'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
            'webhook-signature': this.signer.sign(webhookId, timestamp, body),
          },
          body,
          signal: AbortSignal.any([cancelled, AbortSignal.timeout(webhookTimeoutMs)]),
        });
        status = response.status;
        await response.body?.cancel();
      } catch {
        status = null;
      }
      if (this.deliveries.length < deliveriesLogMax) this.deliveries.push({ webhookId, type, status, body });
      if (status !== null && status >= 200 && status < 300) return;
      await new Promise((resolve) => setTimeout(resolve, webhookBackoffMs * attempt));
    }
  }
}
