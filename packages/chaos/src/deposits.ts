/**
 * Deposits, injected only through the public paths: native ETH sent on chain to registered
 * deposit addresses (the deposit watcher must find them), and BTC arriving at the custodian's
 * registered addresses (on the simulator's books, which also notifies), each then notified again
 * by this depositor: `deposit.confirmed` webhooks signed with the custodian endpoint's secret and
 * posted to the server's /webhooks/:endpointId. Its deliveries are duplicated, delayed, reordered
 * and replayed with a changed body, from the seed; the inbox credits only what the custodian's own
 * record says, and the poller finds what no notification brought.
 */
import { anvilDevPrivateKeys } from '@idem/rails';
import { Webhook } from 'standardwebhooks';
import { createWalletClient, type Hex, http } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { foundry } from 'viem/chains';
import { sleep } from './integrators.ts';
import type { Prng } from './prng.ts';

export interface ChainDeposit {
  txHash: string;
  tenantIndex: number;
  address: string;
  accountRef: string;
  amountWei: string;
}

export interface WebhookDeposit {
  eventId: string;
  /** The custodian's id for the deposit, which its notifications carry as the reference. */
  reference: string;
  /** The custodian deposit address it arrived at, registered to `accountId`. */
  address: string;
  accountId: string;
  amountMinor: string;
  /** The intake answered 2xx to at least one delivery of the original body. */
  acknowledged: boolean;
  /** Deliveries of this event id with a different body (must be quarantined, never credited). */
  conflictingBodiesSent: number;
  deliveries: number;
}

export interface DepositLog {
  chain: ChainDeposit[];
  chainSendErrors: number;
  webhooks: WebhookDeposit[];
  faults: Record<string, number>;
}

export function newDepositLog(): DepositLog {
  return { chain: [], chainSendErrors: 0, webhooks: [], faults: {} };
}

export interface DepositSetup {
  prng: Prng;
  stopAt: number;
  seedLabel: string;
  anvilRpcUrl: string;
  /** Deposit addresses per tenant index, each with its account. */
  addresses: { tenantIndex: number; address: string; accountRef: string }[];
  /** The custodian tenant's webhook endpoint, reached through a server proxy. */
  webhook: { url: () => string; secret: string };
  /** The custodian tenant's accounts' deposit addresses at the custodian. */
  custodianAddresses: { accountRef: string; address: string }[];
  /** Makes a deposit arrive at the custodian (its books); answers the custodian's id for it. */
  receive(deposit: { address: string; accountId: string; amountMinor: string }): Promise<string>;
}

/** The account that funds on-chain deposits: anvil dev key 3 (1 and 2 are the tenants' hot wallets). */
export const DEPOSIT_FUNDER_KEY = anvilDevPrivateKeys[3];

export async function runDepositors(setup: DepositSetup, log: DepositLog): Promise<void> {
  await Promise.all([chainDepositor(setup, log), webhookDepositor(setup, log)]);
}

async function chainDepositor(setup: DepositSetup, log: DepositLog): Promise<void> {
  const prng = setup.prng.fork('chain-deposits');
  const wallet = createWalletClient({
    account: privateKeyToAccount(DEPOSIT_FUNDER_KEY as Hex),
    chain: foundry,
    transport: http(setup.anvilRpcUrl, { retryCount: 0, timeout: 5_000 }),
  });
  while (Date.now() < setup.stopAt) {
    await sleep(prng.int(700, 2_000));
    const target = prng.pick(setup.addresses);
    const amountWei = String(prng.int(1, 100_000) * 10_000_000_000);
    try {
      const txHash = await wallet.sendTransaction({ to: target.address as Hex, value: BigInt(amountWei) });
      log.chain.push({
        txHash,
        tenantIndex: target.tenantIndex,
        address: target.address,
        accountRef: target.accountRef,
        amountWei,
      });
    } catch {
      // A reorg or a dropped pool can make the funder's nonce stale; the next send picks it up again.
      log.chainSendErrors += 1;
    }
  }
}

async function webhookDepositor(setup: DepositSetup, log: DepositLog): Promise<void> {
  const prng = setup.prng.fork('webhook-deposits');
  const signer = new Webhook(setup.webhook.secret);
  let n = 0;
  const fault = (name: string) => {
    log.faults[name] = (log.faults[name] ?? 0) + 1;
  };
  while (Date.now() < setup.stopAt) {
    await sleep(prng.int(800, 2_500));
    n += 1;
    const planned = [planEvent(setup, prng, n)];
    // Sometimes two deposits arrive together, in reverse order.
    if (prng.chance(0.2)) {
      n += 1;
      planned.unshift(planEvent(setup, prng, n));
      fault('webhook_reordered');
    }
    const events: WebhookDeposit[] = [];
    for (const event of planned) {
      try {
        event.reference = await setup.receive(event);
        events.push(event);
      } catch {
        // The simulator did not take it: no deposit arrived, so none is notified.
        fault('custodian_deposit_refused');
      }
    }
    await Promise.all(
      events.map(async (event) => {
        log.webhooks.push(event);
        const kind = prng.weighted([
          ['normal', 5],
          ['duplicate', 2],
          ['late', 1],
          ['conflicting-body', 1],
        ] as const);
        if (kind !== 'normal') fault(`webhook_${kind}`);
        if (kind === 'late') await sleep(prng.int(1_000, 4_000));
        await deliverEvent(setup, signer, event, kind === 'late' ? 'normal' : kind);
      }),
    );
  }
}

export type DeliveryKind = 'normal' | 'duplicate' | 'conflicting-body';

/** One deposit event delivered as a provider would, with its fault. */
export async function deliverEvent(
  setup: Pick<DepositSetup, 'webhook'>,
  signer: Webhook,
  event: WebhookDeposit,
  kind: DeliveryKind,
): Promise<void> {
  await deliver(setup, signer, event, event.amountMinor);
  if (kind === 'duplicate') await deliver(setup, signer, event, event.amountMinor);
  // A changed body is a replay of a delivered event (C19: quarantined, never credited). Sent when
  // the original got no 2xx, it would be the first body the intake stores for the id, and the
  // ledger would credit the changed amount (I13-BTC, seed 18): a provider redelivers the body it
  // sent, so a changed one makes sense only after the original was acknowledged.
  if (kind === 'conflicting-body' && event.acknowledged) {
    event.conflictingBodiesSent += 1;
    await deliver(setup, signer, event, (BigInt(event.amountMinor) + 1n).toString());
  }
}

/** A deposit to one of the custodian addresses; its reference is the custodian's id once it arrives. */
function planEvent(setup: DepositSetup, prng: Prng, n: number): WebhookDeposit {
  const { accountRef, address } = prng.pick(setup.custodianAddresses);
  return {
    eventId: `evt_${setup.seedLabel}_dep_${n}`,
    reference: '',
    address,
    accountId: accountRef,
    amountMinor: String(prng.int(10_000, 5_000_000)),
    acknowledged: false,
    conflictingBodiesSent: 0,
    deliveries: 0,
  };
}

/** Delivers like a provider: signed, retried on anything but 2xx, a few times. */
async function deliver(
  setup: Pick<DepositSetup, 'webhook'>,
  signer: Webhook,
  event: WebhookDeposit,
  amountMinor: string,
): Promise<void> {
  const timestamp = new Date();
  const body = JSON.stringify({
    type: 'deposit.confirmed',
    timestamp: timestamp.toISOString(),
    data: { reference: event.reference, accountId: event.accountId, asset: 'BTC', amountMinor },
  });
  const signature = signer.sign(event.eventId, timestamp, body);
  for (let attempt = 1; attempt <= 4; attempt += 1) {
    event.deliveries += 1;
    try {
      const response = await fetch(setup.webhook.url(), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': event.eventId,
          'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
          'webhook-signature': signature,
        },
        body,
        signal: AbortSignal.timeout(5_000),
      });
      await response.arrayBuffer();
      if (response.status >= 200 && response.status < 300) {
        if (amountMinor === event.amountMinor) event.acknowledged = true;
        return;
      }
    } catch {
      // No answer: deliver again, as a provider would.
    }
    await sleep(500 * attempt);
  }
}

/**
 * The BTC the custodian holds for the deposits it received: every one the depositor made arrive,
 * whether or not any notification got through (the simulator's holdings are funded with it before
 * the balance-level reconciliation, I4). What no notification brought, the poller finds on the
 * custodian's books and credits.
 */
export function btcTheCustodianHolds(webhooks: readonly WebhookDeposit[]): bigint {
  return webhooks.reduce((sum, event) => sum + BigInt(event.amountMinor), 0n);
}
