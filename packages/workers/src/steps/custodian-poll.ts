import { CUSTODIAN_SOURCE, type InboundEventType } from '@idem/contracts';
import {
  advanceCursor,
  depositAddressOwners,
  findOperation,
  recordInboxEvent,
  scanCursor,
  schema,
  withTenant,
} from '@idem/core';
import type { CustodianDeposit } from '@idem/rails';
import { eq } from 'drizzle-orm';
import { z } from 'zod';
import type { WorkerContext } from '../context.ts';
import { routeFor } from '../rails.ts';

const { assets } = schema;

/** The poller's position per tenant, in `chain_cursors` (a scan cursor like a chain's): epoch ms. */
const CUSTODIAN_CURSOR = 'custodian';
/**
 * Each window starts this far before the stored cursor: a custodian that indexes late, or a clock
 * that runs behind ours, is read again. Re-reading is free: the inbox drops a repeated event.
 */
const POLL_OVERLAP_MS = 15 * 60_000;
/** On a tenant's first poll, how far back to look. */
const FIRST_POLL_LOOKBACK_MS = 24 * 60 * 60_000;
/** The longest window one read covers; after a long downtime the poller catches up window by window. */
const POLL_WINDOW_MS_MAX = 6 * 60 * 60_000;
/** Windows one pass reads at most (two days of catching up); the next pass goes on from there. */
const POLL_WINDOWS_PER_PASS_MAX = 8;
/** How often each worker polls the custodian per tenant unless told otherwise. */
export const CUSTODIAN_POLL_EVERY_MS_DEFAULT = 30_000;
/** The endpoint id the poller's events carry in the inbox (no webhook endpoint delivered them). */
const POLLER_ENDPOINT = 'custodian-poller';

/**
 * The state in which a polled status is handed to the inbox: the custodian acknowledged the transfer
 * under our reference and only its outcome is missing. An UNKNOWN withdrawal is left to the
 * reconciler, which asks by our reference and escalates when the custodian holds two transfers for
 * it (C13, C14); a status read from a list must not settle it around that check.
 */
const AWAITING_OUTCOME = 'BROADCAST';

/**
 * Recovery of missed custodian events. Asks the custodian what happened in a time
 * window (deposits confirmed, transfers whose status changed), starting a little before where the
 * last pass stopped, and records each finding in the tenant's inbox as an event, beside the
 * webhooks. The inbox applies them by its one set of rules: a deposit is credited through
 * `recordDeposit` under the same key as its webhook (`deposit-custodian-<reference>`), so whichever
 * arrives second is a replay, and a conflicting one is parked; a transfer status moves a withdrawal
 * only along the inbox's edges, after its terms are compared. A lost webhook costs a delay, never
 * money.
 *
 * A deposit is this tenant's when it arrived at one of the tenant's registered deposit addresses
 * on that network; it is credited to the account the address is registered to. A transfer is this
 * tenant's when our reference on it is one of the tenant's BROADCAST withdrawals. The cursor moves
 * in the same transaction as the events it covered, so a pass that dies changes nothing and a
 * restart resumes from the stored position.
 */
export async function pollCustodian(ctx: WorkerContext, tenantId: string): Promise<number> {
  const now = Date.now();
  let accepted = 0;
  for (let windows = 0; windows < POLL_WINDOWS_PER_PASS_MAX; windows++) {
    const read = await pollWindow(ctx, tenantId, now);
    if (!read) break;
    accepted += read.accepted;
    if (read.reached >= now) break;
  }
  return accepted;
}

/** Reads and records one window from the stored position; null when there is nothing to poll. */
async function pollWindow(
  ctx: WorkerContext,
  tenantId: string,
  now: number,
): Promise<{ accepted: number; reached: number } | null> {
  const custodian = ctx.rails.config.custodian;
  if (!custodian) return null;
  const setup = await withTenant(ctx.db, tenantId, async (tx) => {
    const networks = [
      ...new Set(
        (await tx.select({ network: assets.network }).from(assets).where(eq(assets.tenantId, tenantId)))
          .map((a) => a.network)
          .filter((network) => routeFor(network).kind === 'custodian'),
      ),
    ];
    if (networks.length === 0) return null;
    const cursor = await scanCursor(tx, tenantId, CUSTODIAN_CURSOR, now - FIRST_POLL_LOOKBACK_MS);
    return { networks, cursor };
  });
  if (!setup) return null;

  const window = {
    from: new Date(setup.cursor - POLL_OVERLAP_MS),
    to: new Date(Math.min(now, setup.cursor + POLL_WINDOW_MS_MAX)),
  };
  // Both reads before anything is written: a custodian that cannot be asked moves nothing.
  const deposits = await custodian.depositsBetween(window);
  const transfers = await custodian.transfersUpdatedBetween(window);

  return withTenant(ctx.db, tenantId, async (tx) => {
    let accepted = 0;
    const record = async (eventId: string, type: InboundEventType, timestamp: string, data: unknown) => {
      const { outcome } = await recordInboxEvent(tx, {
        tenantId,
        endpointId: POLLER_ENDPOINT,
        source: CUSTODIAN_SOURCE,
        eventId,
        rawBody: JSON.stringify({ type, timestamp, data }),
      });
      if (outcome === 'ACCEPTED') accepted += 1;
    };

    for (const network of setup.networks) {
      const ours = deposits.filter((d) => d.network === network);
      const ownerOf = await depositAddressOwners(
        tx,
        tenantId,
        network,
        ours.map((d) => d.address),
      );
      for (const deposit of ours) {
        // Exactly as registered: bech32 is case-insensitive, base58 is not, so no folding.
        const accountRef = ownerOf.get(deposit.address);
        if (!accountRef) continue;
        await record(
          `poll:${deposit.id}`,
          'deposit.confirmed',
          deposit.confirmedAt,
          depositData(deposit, accountRef),
        );
      }
    }
    for (const transfer of transfers) {
      if (!z.uuid().safeParse(transfer.externalReference).success) continue;
      const op = await findOperation(tx, tenantId, transfer.externalReference);
      if (op?.kind !== 'withdrawal' || op.state !== AWAITING_OUTCOME) continue;
      // The status and when it was reported name the event: a later change is a new event, the
      // same one read again in an overlapping window is the same event with the same body.
      await record(
        `poll:${transfer.id}:${transfer.status}:${transfer.updatedAt}`,
        `transfer.${transfer.status}`,
        transfer.updatedAt,
        transfer,
      );
    }
    await advanceCursor(tx, tenantId, CUSTODIAN_CURSOR, window.to.getTime());
    if (accepted > 0)
      ctx.log.info({ tenantId, accepted, ...isoWindow(window) }, 'custodian poll found events');
    return { accepted, reached: window.to.getTime() };
  });
}

/** The `deposit.confirmed` data the custodian's webhook carries for this deposit. */
function depositData(deposit: CustodianDeposit, accountRef: string) {
  return {
    reference: deposit.id,
    accountId: accountRef,
    asset: deposit.asset,
    amountMinor: deposit.amountMinor,
    ...(deposit.txHash ? { txHash: deposit.txHash } : {}),
  };
}

function isoWindow(window: { from: Date; to: Date }) {
  return { from: window.from.toISOString(), to: window.to.toISOString() };
}
