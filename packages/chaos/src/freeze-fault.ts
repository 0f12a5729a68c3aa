/**
 * The freeze fault (docs/GOVERNANCE.md "Freeze"): an admin of one tenant freezes one of its
 * accounts, or its ETH, through core's own freeze function while the load and the other faults go
 * on; after the event's window another admin approves the lift the first proposed, and the
 * governance step applies it (the database lets the application role lift it no other way). What
 * the freeze held must then move, so the run still converges. Each freeze's window is kept for
 * the check that nothing under it was signed (freeze-check.ts).
 */
import {
  applyDueControlChanges,
  type Database,
  type DatabaseHandle,
  decideProposal,
  freeze,
  openDatabase,
  proposeUnfreeze,
  withTenant,
} from '@idem/core';
import type { Sql } from 'postgres';
import { sleep } from './integrators.ts';
import type { FaultEvent } from './schedule.ts';
import { TENANTS } from './setup.ts';

type FreezeEvent = Extract<FaultEvent, { kind: 'freeze' }>;

/** One freeze the run made: what it covers and when it was surely committed. */
export interface FreezeWindow {
  tenantId: string;
  freezeId: string;
  scope: 'account' | 'asset';
  assetCode: string | null;
  accountRef: string | null;
  /**
   * The database's clock read in a transaction begun after the freeze committed. A claim whose
   * transaction began after this saw the freeze; one begun between the freeze's own start and this
   * may have claimed before the commit (a signature in flight, which the freeze does not stop).
   */
  committedBy: string;
  lifted: boolean;
}

export class FreezeDrill {
  readonly windows: FreezeWindow[] = [];
  /** A lift that failed: a fault error of the run. */
  readonly errors: string[] = [];
  private handle: DatabaseHandle | null = null;
  private readonly lifts: Promise<void>[] = [];

  constructor(
    /** The run's own connection, as the owner: the drill's reads. */
    private readonly sql: Sql,
    private readonly databaseUrl: string,
    private readonly world: {
      tenants: { tenantId: string }[];
      accounts: string[];
      tenantAdmins: [string, string][];
    },
  ) {}

  /** The run's own connection (not the system's), named so pg-terminate leaves it alone. */
  private async db(): Promise<Database> {
    if (!this.handle) {
      const url = new URL(this.databaseUrl);
      url.searchParams.set('application_name', 'idem-chaos');
      this.handle = await openDatabase({ url: url.toString(), maxConnections: 2 });
    }
    return this.handle.db;
  }

  /** Freezes as the event says, and schedules its lift after `forMs`. */
  async freeze(event: FreezeEvent): Promise<FreezeWindow> {
    const index = event.tenant % TENANTS;
    const tenant = this.world.tenants[index];
    const admins = this.world.tenantAdmins[index];
    if (!tenant || !admins) throw new Error(`no tenant #${index} with admins`);
    const tenantId = tenant.tenantId;
    const own = this.world.accounts.filter((_, c) => c % TENANTS === index);
    const accountRef = own[event.account % Math.max(1, own.length)] ?? null;
    const request =
      event.scope === 'asset' || accountRef === null
        ? { scope: 'asset' as const, assetCode: 'ETH', reason: 'chaos: freeze fault' }
        : { scope: 'account' as const, accountRef, reason: 'chaos: freeze fault' };
    const db = await this.db();
    const frozen = await retried(() =>
      withTenant(db, tenantId, (tx) => freeze(tx, { tenantId, actor: admins[0], request })),
    );
    // As text: the database's microseconds, which a JS Date would round away.
    const [clock] = await this.sql<{ now: string }[]>`select now()::text as now`;
    const window: FreezeWindow = {
      tenantId,
      freezeId: frozen.freezeId,
      scope: request.scope,
      assetCode: frozen.assetCode,
      accountRef: frozen.accountRef,
      committedBy: clock?.now ?? new Date().toISOString(),
      lifted: false,
    };
    this.windows.push(window);
    this.lifts.push(
      sleep(event.forMs).then(() =>
        this.lift(window).catch((error: unknown) => {
          this.errors.push(`lift of freeze ${window.freezeId}: ${(error as Error).message}`);
        }),
      ),
    );
    return window;
  }

  /**
   * The real lift: one admin proposes it, the other approves it, the governance step applies it
   * (the workers run that step too; applied here as well so the lift does not wait on a worker
   * that a fault has just killed).
   */
  async lift(window: FreezeWindow): Promise<void> {
    if (window.lifted) return;
    const { tenantId, freezeId } = window;
    const index = this.world.tenants.findIndex((t) => t.tenantId === tenantId);
    const [proposer, approver] = this.world.tenantAdmins[index] as [string, string];
    const db = await this.db();
    const lifted = async () =>
      (
        await this.sql<{ lifted: boolean }[]>`
        select lifted_at is not null as lifted from freezes where freeze_id = ${freezeId}::uuid`
      )[0]?.lifted === true;
    await retried(async () => {
      if (await lifted()) return;
      const proposed = await withTenant(db, tenantId, (tx) =>
        proposeUnfreeze(tx, { tenantId, actor: proposer, freezeId }),
      );
      const proposalId = proposed.proposalId as string;
      const [proposal] = await this.sql<{ payload_hash: string; state: string }[]>`
        select payload_hash, state from proposals where proposal_id = ${proposalId}::uuid`;
      // Approved by the other admin, the one the proposer's approval never replaces.
      if (proposal?.state === 'PENDING')
        await withTenant(db, tenantId, (tx) =>
          decideProposal(tx, {
            tenantId,
            proposalId,
            staffId: approver,
            payloadHash: proposal.payload_hash,
            decision: 'approve',
          }),
        );
      await withTenant(db, tenantId, (tx) => applyDueControlChanges(tx, tenantId));
      if (!(await lifted())) throw new Error('approved, but the governance step did not lift it');
    });
    window.lifted = true;
  }

  /** The quiet phase: every lift scheduled has run, and a freeze still in force is lifted now. */
  async liftAll(): Promise<void> {
    await Promise.all(this.lifts);
    for (const window of this.windows)
      await this.lift(window).catch((error: unknown) => {
        this.errors.push(`lift of freeze ${window.freezeId} in the quiet phase: ${(error as Error).message}`);
      });
  }

  async close(): Promise<void> {
    await this.handle?.close();
    this.handle = null;
  }
}

/** Faults terminate connections and kill processes: a step of the drill is tried a few times. */
async function retried<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      if (attempt >= 5) throw error;
      await sleep(300 * attempt);
    }
  }
}
