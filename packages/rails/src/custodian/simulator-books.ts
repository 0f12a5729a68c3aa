/**
 * The simulated custodian's books and behaviour settings: transfers, deposits, what the account
 * holds, the submit fault to play next, how webhooks go out, and how transfers settle.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type {
  ControlBody,
  CreateTransferBody,
  CustodianDeposit,
  CustodianTransfer,
  SubmitFault,
  WebhookDelivery,
} from './protocol.ts';
import { WebhookOutbox, type WebhookSettings } from './simulator-webhooks.ts';

export const transfersMax = 100_000;

interface Behaviour {
  fault: { fault: SubmitFault; remaining: number | null };
  idempotency: 'reference' | 'none';
  webhooks: WebhookSettings;
  settlement: NonNullable<ControlBody['settlement']>;
}

export class CustodianBooks {
  readonly transfers: CustodianTransfer[] = [];
  readonly deposits: CustodianDeposit[] = [];
  /** What the account holds per asset: funded, less every completed transfer. */
  readonly holdings = new Map<string, bigint>();
  readonly misreports = new Map<string, bigint>();
  readonly outbox: WebhookOutbox;
  state: Behaviour;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly defaults: Behaviour;

  constructor(options: {
    webhookSecret: string;
    webhookUrl?: string | null;
    settlement?: NonNullable<ControlBody['settlement']>;
  }) {
    this.defaults = {
      fault: { fault: 'none', remaining: null },
      idempotency: 'reference',
      webhooks: {
        url: options.webhookUrl ?? null,
        delivery: 'normal' as WebhookDelivery,
        lateMs: 500,
        drop: [],
      },
      settlement: options.settlement ?? { outcome: 'complete' as const, afterMs: 50 },
    };
    this.state = structuredClone(this.defaults);
    this.outbox = new WebhookOutbox(
      options.webhookSecret,
      () => this.state.webhooks,
      (ms, action) => this.later(ms, action),
    );
  }

  /** The transfer already made for this reference, when references make submissions idempotent. */
  existing(externalReference: string): CustodianTransfer | undefined {
    return this.state.idempotency === 'reference'
      ? this.transfers.find((t) => t.externalReference === externalReference)
      : undefined;
  }

  /** Books a new transfer as submitted, announces it, and schedules its settlement. */
  book(input: CreateTransferBody): CustodianTransfer {
    const now = new Date().toISOString();
    const transfer: CustodianTransfer = {
      id: `trf_${randomUUID()}`,
      ...input,
      status: 'submitted',
      createdAt: now,
      updatedAt: now,
    };
    this.transfers.push(transfer);
    this.outbox.emitTransfer({ ...transfer }, 'transfer.submitted');
    this.settle(transfer);
    return transfer;
  }

  /** The configured submit fault, counted down when it was given a number of times. */
  takeFault(): SubmitFault {
    const { fault, remaining } = this.state.fault;
    if (remaining !== null) {
      this.state.fault =
        remaining <= 1 ? { fault: 'none', remaining: null } : { fault, remaining: remaining - 1 };
    }
    return fault;
  }

  /** Applies a /_control body; answers the deposit it made arrive, if any. */
  applyControl(control: ControlBody): CustodianDeposit | null {
    // After a reset, the rest of the body applies to the fresh state.
    if (control.reset) this.reset();
    if (control.fault) this.state.fault = { fault: control.fault, remaining: control.faultTimes ?? null };
    if (control.idempotency) this.state.idempotency = control.idempotency;
    if (control.webhooks) {
      const { url, delivery, lateMs, drop } = control.webhooks;
      if (url !== undefined) this.state.webhooks.url = url;
      if (delivery) this.state.webhooks.delivery = delivery;
      if (lateMs !== undefined) this.state.webhooks.lateMs = lateMs;
      if (drop) this.state.webhooks.drop = drop;
    }
    if (control.settlement) this.state.settlement = control.settlement;
    if (control.fund) {
      const { asset, amountMinor } = control.fund;
      this.holdings.set(asset, (this.holdings.get(asset) ?? 0n) + BigInt(amountMinor));
    }
    if (control.settleHeld) this.settleHeld(control.settleHeld.externalReference, control.settleHeld.outcome);
    if (control.misreportBalance === null) this.misreports.clear();
    else if (control.misreportBalance) {
      this.misreports.set(control.misreportBalance.asset, BigInt(control.misreportBalance.deltaMinor));
    }
    return control.deposit ? this.receiveDeposit(control.deposit) : null;
  }

  /** Stops every timer and cancels queued webhooks (the server's close). */
  close(): void {
    this.outbox.close();
    for (const timer of this.timers) clearTimeout(timer);
  }

  private reset(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.transfers.length = 0;
    this.holdings.clear();
    this.misreports.clear();
    this.deposits.length = 0;
    this.outbox.reset();
    this.state = structuredClone(this.defaults);
  }

  private later(ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      action();
    }, ms);
    this.timers.add(timer);
  }

  private receiveDeposit(input: NonNullable<ControlBody['deposit']>): CustodianDeposit {
    const deposit: CustodianDeposit = {
      id: `dep_${randomUUID()}`,
      network: input.network,
      address: input.address,
      accountId: input.accountId,
      asset: input.asset,
      amountMinor: input.amountMinor,
      txHash: randomBytes(32).toString('hex'),
      status: 'confirmed',
      confirmedAt: input.confirmedAt ?? new Date().toISOString(),
    };
    this.deposits.push(deposit);
    this.outbox.emitDeposit(deposit);
    return deposit;
  }

  private settle(transfer: CustodianTransfer): void {
    const { outcome, afterMs } = this.state.settlement;
    if (outcome === 'hold') return;
    this.later(afterMs, () => this.settleNow(transfer, outcome));
  }

  /** Completes or fails a transfer now and notifies, like its settlement at the time it was due. */
  private settleNow(transfer: CustodianTransfer, outcome: 'complete' | 'fail'): void {
    const now = new Date().toISOString();
    if (outcome === 'complete') {
      this.holdings.set(
        transfer.asset,
        (this.holdings.get(transfer.asset) ?? 0n) - BigInt(transfer.amountMinor),
      );
      Object.assign(transfer, {
        status: 'completed',
        txHash: `0x${randomBytes(32).toString('hex')}`,
        updatedAt: now,
      });
      this.outbox.emitTransfer({ ...transfer }, 'transfer.completed');
    } else {
      Object.assign(transfer, {
        status: 'failed',
        failureReason: 'simulated on-chain failure',
        updatedAt: now,
      });
      this.outbox.emitTransfer({ ...transfer }, 'transfer.failed');
    }
  }

  /** Settles the held (still submitted) transfers under a reference now; answers how many. */
  private settleHeld(externalReference: string, outcome: 'complete' | 'fail'): number {
    const held = this.transfers.filter(
      (t) => t.externalReference === externalReference && t.status === 'submitted',
    );
    for (const transfer of held) this.settleNow(transfer, outcome);
    return held.length;
  }
}
