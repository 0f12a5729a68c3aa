/**
 * The invariants checked at the end of every run, against three independent records: the ledger
 * (read directly from PostgreSQL as the owner, beneath row-level security), the chain (every block
 * of the canonical chain, decoded), and the custodian's own ledger. A check that depends on a part
 * of the system that has not landed says so ("not yet checkable") instead of passing.
 */
import { HOLDING_STATES } from '@idem/core';
import type { Ledger } from '@idem/rails';
import type { BalanceRunReport } from '@idem/workers';
import type { Sql } from 'postgres';
import { type Hex, keccak256, parseTransaction, recoverTransactionAddress } from 'viem';
import type { DepositLog } from './deposits.ts';
import type { IntegratorLog } from './integrators.ts';

export type CheckStatus = 'pass' | 'fail' | 'not-checkable';

export interface CheckResult {
  id: string;
  title: string;
  status: CheckStatus;
  /** Numbers that show what was looked at (a pass over nothing is not a pass). */
  detail: string;
  violations: string[];
}

export interface ChainTransfer {
  hash: string;
  from: string;
  to: string;
  valueWei: string;
  /** The sender's nonce: every signed attempt of one withdrawal shares it. */
  nonce: number;
  blockNumber: number;
}

export interface ChainView {
  head: number;
  /** Canonical transactions sent by tenants' hot wallets. */
  hotWalletTransfers: ChainTransfer[];
  /** Canonical transactions sent by the deposit funder. */
  depositTransfers: ChainTransfer[];
}

export interface TenantInfo {
  index: number;
  tenantId: string;
  hotWallet: string;
  ethConfirmations: number;
}

/** What has landed in the tree this run was started from, detected from the source, not assumed. */
export interface Landed {
  depositWatcher: boolean;
  inboxProcessing: boolean;
  reconciliation: boolean;
}

export interface InvariantInput {
  sql: Sql;
  /**
   * The balance-level reconciliation of every tenant made after the quiet phase (the workers' own
   * code): per asset and holding place, the ledger against the chain at a pinned block and the
   * custodian's reported balance.
   */
  balanceRuns: BalanceRunReport[];
  tenants: TenantInfo[];
  /** The tenant whose webhook endpoint the custodian calls (BTC goes through it). */
  custodianTenantId: string;
  chain: ChainView;
  custodian: Ledger;
  integrators: IntegratorLog;
  deposits: DepositLog;
  landed: Landed;
  /**
   * Every raw transaction that reached the node, in order (the recording proxy in front of anvil).
   * It may still grow while the check runs (workers that have not converged keep sending): the
   * check copies it before it reads the ledger.
   */
  broadcast: readonly string[];
  /** When each of `broadcast` reached the node (epoch ms, same index), to explain a violation. */
  broadcastAt?: readonly number[];
}

/** Our transaction hashes: each maps to its withdrawal; cancels are listed apart (they pay nobody). */
interface OurHashes {
  opByTxHash: Map<string, OpRow>;
  cancels: Set<string>;
  hashesOf: Map<string, string[]>;
}

const FINAL = new Set(['CONFIRMED', 'REJECTED', 'VERIFIED_NOT_SENT']);
const OWNED_FINAL = new Set(['UNKNOWN', 'FAILED_TERMINAL']);
const LIST_MAX = 20;

interface OpRow {
  tenant_id: string;
  operation_id: string;
  kind: string;
  idempotency_key: string;
  reference: string;
  account_ref: string;
  asset_code: string;
  network: string;
  destination: string | null;
  amount_minor: string;
  state: string;
  owner: string | null;
  tx_hash: string | null;
  key_expired_at: Date | null;
  held: string;
}

function result(
  id: string,
  title: string,
  detail: string,
  violations: string[],
  status?: CheckStatus,
): CheckResult {
  return {
    id,
    title,
    status: status ?? (violations.length > 0 ? 'fail' : 'pass'),
    detail,
    violations: violations
      .slice(0, LIST_MAX)
      .concat(violations.length > LIST_MAX ? [`... and ${violations.length - LIST_MAX} more`] : []),
  };
}

export async function checkInvariants(input: InvariantInput): Promise<CheckResult[]> {
  const { sql } = input;
  // What reached the node is taken BEFORE the ledger is read. A worker stores a signature before
  // it sends it, so everything sent before this moment is in the ledger read below; a transaction
  // signed, stored and sent while the check runs (a run that did not converge still has busy
  // workers) would otherwise be judged against a ledger read from before its commit (I18-SENT).
  const reachedNode: NodeArrival[] = input.broadcast.map((raw, i) => ({
    raw,
    atMs: input.broadcastAt?.[i] ?? null,
  }));
  const ledgerReadAtMs = Date.now();
  const ops = await sql<OpRow[]>`
    select o.tenant_id::text, o.operation_id::text, o.kind, o.idempotency_key, o.reference, o.account_ref,
           o.asset_code, o.network, o.destination, o.amount_minor::text, o.state, o.owner, o.tx_hash,
           o.key_expired_at,
           coalesce((select sum(p.amount) from journal_entries e
                     join postings p on p.tenant_id = e.tenant_id and p.entry_id = e.entry_id
                     where e.tenant_id = o.tenant_id and e.operation_id = o.operation_id
                       and p.bucket = 'held'), 0)::text as held
    from operations o`;
  const withdrawals = ops.filter((op) => op.kind === 'withdrawal');
  const breakRows = await sql<{ tenant_id: string; subject: string }[]>`
    select tenant_id::text, subject from reconciliation_breaks where status = 'open'`;
  const openBreaks = new Set(breakRows.map((row) => `${row.tenant_id}:${row.subject}`));
  const explained = (op: OpRow) => openBreaks.has(`${op.tenant_id}:operation:${op.operation_id}`);
  const breakMentions = (text: string) =>
    breakRows.some((row) => row.subject.toLowerCase().includes(text.toLowerCase()));
  // Every hash we signed for a withdrawal (fee bumps and cancels too), and which of them are cancels.
  const identities = await withdrawalChainIdentities(sql);
  const opById = new Map(withdrawals.map((op) => [op.operation_id, op]));
  const ours: OurHashes = { opByTxHash: new Map(), cancels: new Set(), hashesOf: new Map() };
  for (const identity of identities) {
    const op = opById.get(identity.operationId);
    if (!op) continue;
    for (const hash of identity.hashes) ours.opByTxHash.set(hash, op);
    for (const hash of identity.cancelHashes) ours.cancels.add(hash);
    ours.hashesOf.set(op.operation_id, identity.hashes);
  }
  const tenantOfWallet = new Map(input.tenants.map((t) => [t.hotWallet.toLowerCase(), t]));

  return [
    convergence(withdrawals),
    await atMostOneTransfer(input),
    everyAcknowledgedExistsOnce(input, withdrawals, ours, tenantOfWallet),
    await journalBalances(sql),
    ledgerAgreesWithRails(input, withdrawals, ours, explained, breakMentions),
    depositsOnce(input, ops),
    holds(withdrawals),
    await webhooksInInbox(input),
    await fencing(sql),
    await sentOnlyPersisted(input, reachedNode, ledgerReadAtMs, ours),
  ];
}

/**
 * Fencing held: every lease generation of a withdrawal belongs to one worker (two workers acting
 * under one generation means a claim was lost, as a failover that dropped an acknowledged commit
 * would do), generations only grow along its attempts, and none is newer than the operation's own.
 */
async function fencing(sql: Sql): Promise<CheckResult> {
  const [probe] = await sql<{ attempts: boolean }[]>`
    select to_regclass('public.signed_attempts') is not null as attempts`;
  if (!probe?.attempts)
    return result(
      'fencing',
      'no worker acted on a stale lease',
      'no signed_attempts table',
      [],
      'not-checkable',
    );
  const rows = await sql<
    {
      operation_id: string;
      attempts: number;
      shared: string | null;
      regress: string | null;
      ahead: string | null;
    }[]
  >`
    select a.operation_id::text, count(*)::int as attempts,
           (select string_agg(distinct x.lease_generation::text, ',') from signed_attempts x
             where x.tenant_id = a.tenant_id and x.operation_id = a.operation_id
             group by x.lease_generation having count(distinct x.created_by) > 1 limit 1) as shared,
           (select string_agg(x.attempt_no::text, ',') from signed_attempts x
             join signed_attempts y on y.tenant_id = x.tenant_id and y.operation_id = x.operation_id
                                   and y.attempt_no < x.attempt_no and y.lease_generation > x.lease_generation
             where x.tenant_id = a.tenant_id and x.operation_id = a.operation_id) as regress,
           (select string_agg(x.attempt_no::text, ',') from signed_attempts x
             where x.tenant_id = a.tenant_id and x.operation_id = a.operation_id
               and x.lease_generation > o.lease_generation) as ahead
    from signed_attempts a
    join operations o on o.tenant_id = a.tenant_id and o.operation_id = a.operation_id
    group by a.tenant_id, a.operation_id, o.lease_generation`;
  const violations: string[] = [];
  let attempts = 0;
  for (const row of rows) {
    attempts += row.attempts;
    if (row.shared)
      violations.push(
        `withdrawal ${row.operation_id}: lease generation ${row.shared} was used by two workers`,
      );
    if (row.regress)
      violations.push(
        `withdrawal ${row.operation_id}: attempt(s) ${row.regress} carry an older generation than an earlier attempt`,
      );
    if (row.ahead)
      violations.push(
        `withdrawal ${row.operation_id}: attempt(s) ${row.ahead} carry a generation newer than the operation's`,
      );
  }
  return result(
    'fencing',
    'no worker acted on a stale lease: one worker per lease generation, generations only grow',
    `${rows.length} withdrawals with ${attempts} signed attempts`,
    violations,
  );
}

/** One raw transaction as the recording proxy saw it reach the node. */
interface NodeArrival {
  raw: string;
  atMs: number | null;
}

/**
 * Sent only once persisted (I18-SENT): a signature is used only once persisted. Every transaction
 * of a hot wallet that reached the node is one the ledger stored (the operation's bytes or a
 * recorded attempt), so a signature whose answer came late, or whose worker died before the write,
 * was never sent. (An HSM's second
 * signature of one nonce is a different transaction: sent unpersisted, it would pay twice.)
 * `reachedNode` was copied before the ledger was read (see checkInvariants). A violation carries
 * what explains it: the transaction, when it reached the node, what the ledger holds for its
 * wallet and nonce (which withdrawal, which worker and lease generation signed each attempt, and
 * when), and whether the hash is stored when read again after the check.
 */
async function sentOnlyPersisted(
  input: InvariantInput,
  reachedNode: readonly NodeArrival[],
  ledgerReadAtMs: number,
  ours: OurHashes,
): Promise<CheckResult> {
  const wallets = new Set(input.tenants.map((t) => t.hotWallet.toLowerCase()));
  const seen = new Set<string>();
  let fromHotWallets = 0;
  const violations: string[] = [];
  for (const { raw, atMs } of reachedNode) {
    if (seen.has(raw.toLowerCase())) continue;
    seen.add(raw.toLowerCase());
    const sender = await recoverTransactionAddress({ serializedTransaction: raw as never }).catch(() => null);
    if (!sender || !wallets.has(sender.toLowerCase())) continue;
    fromHotWallets += 1;
    const hash = keccak256(raw as Hex).toLowerCase();
    if (ours.opByTxHash.has(hash)) continue;
    const tx = parseTransaction(raw as Hex);
    const nonce = tx.nonce ?? -1;
    const when = atMs === null ? 'at an unrecorded time' : `at ${new Date(atMs).toISOString()}`;
    violations.push(
      `hot wallet ${sender} sent ${hash} (nonce ${nonce}, to ${tx.to}, value ${tx.value ?? 0n}), which the ledger never stored; ` +
        `it reached the node ${when}, the ledger was read at ${new Date(ledgerReadAtMs).toISOString()}; ` +
        (await storedForNonce(input.sql, sender, nonce, hash)),
    );
  }
  return result(
    'sent-only-persisted',
    'every hot-wallet transaction that reached the node was persisted before it was sent',
    `${fromHotWallets} distinct hot-wallet transactions reached the node (taken before the ledger was read)`,
    violations,
    fromHotWallets === 0 ? 'not-checkable' : undefined,
  );
}

/**
 * The ledger read again, after the check, for one unstored transaction: whether its hash is stored
 * now (then the check raced a commit, and the ledger is not at fault) and every attempt stored for
 * its wallet and nonce, with the worker and the lease generation that signed it.
 */
async function storedForNonce(sql: Sql, sender: string, nonce: number, hash: string): Promise<string> {
  const [now] = await sql<{ stored: boolean }[]>`
    select exists (select 1 from operations where lower(tx_hash) = ${hash})
        or exists (select 1 from signed_attempts where lower(tx_hash) = ${hash}) as stored`;
  const rows = await sql<
    {
      operation_id: string;
      state: string;
      attempt_no: number | null;
      kind: string | null;
      tx_hash: string | null;
      created_by: string | null;
      lease_generation: string | null;
      created_at: Date | null;
    }[]
  >`
    select o.operation_id::text, o.state, a.attempt_no, a.kind, coalesce(a.tx_hash, o.tx_hash) as tx_hash,
           a.created_by, coalesce(a.lease_generation, o.lease_generation)::text as lease_generation, a.created_at
    from operations o
    join hot_wallets w on w.tenant_id = o.tenant_id and w.network = o.network
    left join signed_attempts a on a.tenant_id = o.tenant_id and a.operation_id = o.operation_id
    where lower(w.address) = ${sender.toLowerCase()} and o.chain_nonce = ${nonce}
    order by o.operation_id, a.attempt_no`;
  const again = now?.stored
    ? 'stored when read again after the check (a commit the check did not see: the check raced a worker)'
    : 'not stored when read again after the check';
  if (rows.length === 0) return `${again}; the ledger holds no withdrawal signed with that nonce`;
  const stored = rows.map(
    (row) =>
      `withdrawal ${row.operation_id} (${row.state}) ${row.kind ?? 'original'} attempt ${row.attempt_no ?? 1} ${row.tx_hash ?? 'no hash'}` +
      ` signed by ${row.created_by ?? 'an unrecorded worker'} under lease generation ${row.lease_generation ?? '?'}` +
      `${row.created_at ? ` at ${row.created_at.toISOString()}` : ''}`,
  );
  return `${again}; stored for that nonce: ${stored.join('; ')}`;
}

/** Quiet phase outcome: every withdrawal final, or UNKNOWN/FAILED_TERMINAL with a named owner. */
function convergence(withdrawals: OpRow[]): CheckResult {
  const stuck = withdrawals.filter(
    (op) => !FINAL.has(op.state) && !(OWNED_FINAL.has(op.state) && op.owner !== null),
  );
  return result(
    'converge',
    'every withdrawal ends CONFIRMED, REJECTED, VERIFIED_NOT_SENT, or UNKNOWN/FAILED_TERMINAL with a named owner',
    `${withdrawals.length} withdrawals, ${stuck.length} not converged`,
    stuck.map(
      (op) =>
        `operation ${op.operation_id} (${op.asset_code}) still ${op.state}${op.owner ? ` owner ${op.owner}` : ' without owner'}`,
    ),
  );
}

/**
 * What the ledger knows of each EVM withdrawal's transactions: every hash we signed for it (the
 * operation's tx_hash, plus every row of signed_attempts where that table exists: fee bumps and
 * cancels share the nonce), which of them are cancels, and the hot wallet and nonce it was signed with.
 */
export interface WithdrawalChainIdentity {
  tenantId: string;
  operationId: string;
  state: string;
  destination: string | null;
  amountMinor: string;
  hotWallet: string | null;
  nonce: number | null;
  hashes: string[];
  cancelHashes: string[];
}

export async function withdrawalChainIdentities(sql: Sql): Promise<WithdrawalChainIdentity[]> {
  const [probe] = await sql<{ attempts: boolean }[]>`
    select to_regclass('public.signed_attempts') is not null as attempts`;
  // Before the attempts table exists, the operation's own hash is the only one it can have.
  const rows = probe?.attempts
    ? await sql<IdentityRow[]>`
        select o.tenant_id::text, o.operation_id::text, o.state, o.destination, o.amount_minor::text,
               w.address as hot_wallet, o.chain_nonce::text as nonce,
               array(select o.tx_hash where o.tx_hash is not null
                     union select a.tx_hash from signed_attempts a
                           where a.tenant_id = o.tenant_id and a.operation_id = o.operation_id) as hashes,
               array(select a.tx_hash from signed_attempts a
                     where a.tenant_id = o.tenant_id and a.operation_id = o.operation_id
                       and a.kind = 'cancel') as cancel_hashes
        from operations o
        left join hot_wallets w on w.tenant_id = o.tenant_id and w.network = o.network
        where o.kind = 'withdrawal' and o.network = 'ethereum'`
    : await sql<IdentityRow[]>`
        select o.tenant_id::text, o.operation_id::text, o.state, o.destination, o.amount_minor::text,
               w.address as hot_wallet, o.chain_nonce::text as nonce,
               array_remove(array[o.tx_hash], null) as hashes, array[]::text[] as cancel_hashes
        from operations o
        left join hot_wallets w on w.tenant_id = o.tenant_id and w.network = o.network
        where o.kind = 'withdrawal' and o.network = 'ethereum'`;
  return rows.map((row) => ({
    tenantId: row.tenant_id,
    operationId: row.operation_id,
    state: row.state,
    destination: row.destination,
    amountMinor: row.amount_minor,
    hotWallet: row.hot_wallet,
    nonce: row.nonce === null ? null : Number(row.nonce),
    hashes: row.hashes.map((h) => h.toLowerCase()),
    cancelHashes: row.cancel_hashes.map((h) => h.toLowerCase()),
  }));
}

interface IdentityRow {
  tenant_id: string;
  operation_id: string;
  state: string;
  destination: string | null;
  amount_minor: string;
  hot_wallet: string | null;
  nonce: string | null;
  hashes: string[];
  cancel_hashes: string[];
}

export type AttributedBy = 'hash' | 'nonce' | 'destination+amount';

export interface Attribution {
  transfer: ChainTransfer;
  /** The withdrawals it is counted for (none: it belongs to no withdrawal; I2 and I4 report that). */
  operationIds: string[];
  by: AttributedBy | null;
  /** A zero-value transfer from a hot wallet to itself: it takes a nonce, it pays nobody. */
  cancel: boolean;
}

export function isCancel(transfer: ChainTransfer): boolean {
  return transfer.valueWei === '0' && transfer.to.toLowerCase() === transfer.from.toLowerCase();
}

/**
 * Which withdrawal each hot-wallet transaction on chain is, most certain first: one of its hashes;
 * else the withdrawal signed with that wallet and nonce (a replacement whose hash was never
 * recorded); else, for a payout, every withdrawal with that destination and amount (a transfer
 * whose hash we do not know at all, such as a second payout signed outside the worker).
 */
export function attributeTransfers(
  withdrawals: readonly WithdrawalChainIdentity[],
  transfers: readonly ChainTransfer[],
): Attribution[] {
  const byHash = new Map<string, string>();
  const byNonce = new Map<string, string>();
  const byTerms = new Map<string, string[]>();
  for (const w of withdrawals) {
    for (const hash of w.hashes) byHash.set(hash, w.operationId);
    if (w.hotWallet && w.nonce !== null)
      byNonce.set(`${w.hotWallet.toLowerCase()}:${w.nonce}`, w.operationId);
    if (w.destination) {
      const terms = `${w.destination.toLowerCase()}:${w.amountMinor}`;
      byTerms.set(terms, [...(byTerms.get(terms) ?? []), w.operationId]);
    }
  }
  return transfers.map((transfer) => {
    const cancel = isCancel(transfer);
    const hashOwner = byHash.get(transfer.hash.toLowerCase());
    if (hashOwner) return { transfer, operationIds: [hashOwner], by: 'hash', cancel };
    const nonceOwner = byNonce.get(`${transfer.from.toLowerCase()}:${transfer.nonce}`);
    if (nonceOwner) return { transfer, operationIds: [nonceOwner], by: 'nonce', cancel };
    const termsOwners = cancel
      ? []
      : (byTerms.get(`${transfer.to.toLowerCase()}:${transfer.valueWei}`) ?? []);
    if (termsOwners.length > 0)
      return { transfer, operationIds: termsOwners, by: 'destination+amount', cancel };
    return { transfer, operationIds: [], by: null, cancel };
  });
}

/**
 * 1. At most one transfer per withdrawal. On chain every transaction of a hot wallet is counted
 * for the withdrawal it is (see attributeTransfers), cancels excepted, whichever of its attempts
 * it was; transactions no withdrawal claims are still grouped by destination (each withdrawal has
 * its own), so a second payout to one destination is caught whoever sent it. At the custodian,
 * `countsByReference` is at most 1.
 */
export async function atMostOneTransfer(
  input: Pick<InvariantInput, 'sql' | 'chain' | 'custodian'>,
): Promise<CheckResult> {
  const violations: string[] = [];
  const withdrawals = await withdrawalChainIdentities(input.sql);
  const attributions = attributeTransfers(withdrawals, input.chain.hotWalletTransfers);
  const payouts = new Map<string, Attribution[]>();
  const unclaimedByDestination = new Map<string, ChainTransfer[]>();
  const tally = { hash: 0, nonce: 0, 'destination+amount': 0, unclaimed: 0, cancels: 0 };
  for (const attribution of attributions) {
    if (attribution.cancel) {
      tally.cancels += 1;
      continue;
    }
    tally[attribution.by ?? 'unclaimed'] += 1;
    for (const operationId of attribution.operationIds)
      payouts.set(operationId, [...(payouts.get(operationId) ?? []), attribution]);
    if (attribution.operationIds.length === 0) {
      const key = attribution.transfer.to.toLowerCase();
      unclaimedByDestination.set(key, [...(unclaimedByDestination.get(key) ?? []), attribution.transfer]);
    }
  }
  for (const [operationId, paid] of payouts)
    if (paid.length > 1)
      violations.push(
        `withdrawal ${operationId}: ${paid.length} transfers on chain: ${paid.map((a) => `${a.transfer.hash} (by ${a.by})`).join(', ')}`,
      );
  for (const [destination, transfers] of unclaimedByDestination)
    if (transfers.length > 1)
      violations.push(
        `${transfers.length} chain transfers no withdrawal claims to ${destination}: ${transfers.map((t) => t.hash).join(', ')}`,
      );
  for (const [reference, count] of Object.entries(input.custodian.countsByReference))
    if (count > 1) violations.push(`${count} custodian transfers under reference ${reference}`);
  const attempts = withdrawals.reduce((sum, w) => sum + w.hashes.length, 0);
  return result(
    'I1',
    'at most one transfer per withdrawal (every attempt counted on chain; custodian)',
    `${input.chain.hotWalletTransfers.length} chain transfers from hot wallets over ${input.chain.head + 1} blocks, matched to ${withdrawals.length} ETH withdrawals (${attempts} signed hashes): ${tally.hash} by hash, ${tally.nonce} by nonce, ${tally['destination+amount']} by destination+amount, ${tally.unclaimed} unclaimed, ${tally.cancels} cancels; ${input.custodian.transfers.length} custodian transfers`,
    violations,
  );
}

/** 2. Every withdrawal an integrator saw CREATED or REPLAYED exists once; every transfer belongs to one. */
function everyAcknowledgedExistsOnce(
  input: InvariantInput,
  withdrawals: OpRow[],
  ours: OurHashes,
  tenantOfWallet: Map<string, TenantInfo>,
): CheckResult {
  const violations: string[] = [...input.integrators.violations];
  const byReference = new Map<string, OpRow[]>();
  for (const op of withdrawals) {
    const key = `${op.tenant_id}:${op.reference}`;
    byReference.set(key, [...(byReference.get(key) ?? []), op]);
  }
  const byKey = new Set(withdrawals.map((op) => `${op.tenant_id}:${op.idempotency_key}`));
  const tenantId = (index: number) => input.tenants[index]?.tenantId ?? '?';
  for (const seen of input.integrators.seen.values()) {
    const found = byReference.get(`${tenantId(seen.tenantIndex)}:${seen.withdrawalId}`) ?? [];
    if (found.length !== 1) {
      const byId = withdrawals.filter((op) => seen.operationIds.has(op.operation_id));
      violations.push(
        `withdrawal ${seen.withdrawalId} was acknowledged; ${found.length} operations hold it (answers: ${seen.acks.join('; ')}; as ${[...seen.operationIds].join(',')}, ${byId.length} stored under that id)`,
      );
      continue;
    }
    const op = found[0] as OpRow;
    if (!seen.operationIds.has(op.operation_id) || seen.operationIds.size !== 1)
      violations.push(
        `withdrawal ${seen.withdrawalId}: acknowledged as ${[...seen.operationIds].join(',')}, stored as ${op.operation_id}`,
      );
    if (op.idempotency_key !== seen.key)
      violations.push(
        `withdrawal ${seen.withdrawalId}: held by key ${op.idempotency_key}, acknowledged under ${seen.key}`,
      );
  }
  for (const attempt of input.integrators.secondClient)
    if (byKey.has(`${tenantId(attempt.tenantIndex)}:${attempt.freshKey}`))
      violations.push(`C04: the refused fresh key ${attempt.freshKey} left an operation behind`);
  for (const transfer of input.chain.hotWalletTransfers) {
    const hash = transfer.hash.toLowerCase();
    const op = ours.opByTxHash.get(hash);
    const tenant = tenantOfWallet.get(transfer.from.toLowerCase());
    if (!op || op.tenant_id !== tenant?.tenantId) {
      violations.push(`chain transfer ${transfer.hash} from ${transfer.from} belongs to no withdrawal`);
      continue;
    }
    if (ours.cancels.has(hash)) {
      if (!isCancel(transfer))
        violations.push(
          `chain transfer ${transfer.hash} is withdrawal ${op.operation_id}'s cancel but pays ${transfer.valueWei} to ${transfer.to}`,
        );
      continue;
    }
    if (op.destination?.toLowerCase() !== transfer.to.toLowerCase() || op.amount_minor !== transfer.valueWei)
      violations.push(
        `chain transfer ${transfer.hash} pays ${transfer.valueWei} to ${transfer.to}; its withdrawal says ${op.amount_minor} to ${op.destination}`,
      );
  }
  const btc = new Map(
    withdrawals.filter((op) => op.tenant_id === input.custodianTenantId).map((op) => [op.operation_id, op]),
  );
  for (const transfer of input.custodian.transfers) {
    const op = btc.get(transfer.externalReference);
    if (!op)
      violations.push(
        `custodian transfer ${transfer.id} (reference ${transfer.externalReference}) belongs to no withdrawal`,
      );
    else if (op.amount_minor !== transfer.amountMinor || op.destination !== transfer.destination)
      violations.push(`custodian transfer ${transfer.id} terms differ from withdrawal ${op.operation_id}`);
  }
  return result(
    'I2',
    'every acknowledged withdrawal exists once; every transfer belongs to one',
    `${input.integrators.seen.size} withdrawals acknowledged to integrators, ${input.integrators.secondClient.length} second-client attempts, ${withdrawals.length} stored`,
    violations,
  );
}

/** 3. Every entry balances per asset; every balance equals its postings; nothing negative. */
async function journalBalances(sql: Sql): Promise<CheckResult> {
  const unbalanced = await sql<{ entry_id: string; asset_code: string; total: string }[]>`
    select e.entry_id::text, p.asset_code, sum(p.amount)::text as total
    from journal_entries e join postings p on p.tenant_id = e.tenant_id and p.entry_id = e.entry_id
    group by e.tenant_id, e.entry_id, p.asset_code having sum(p.amount) <> 0`;
  const drift = await sql<
    {
      account_ref: string;
      asset_code: string;
      available: string;
      held: string;
      posted_available: string;
      posted_held: string;
    }[]
  >`
    with posted as (
      select tenant_id, account as account_ref, asset_code,
             coalesce(sum(amount) filter (where bucket = 'available'), 0) as available,
             coalesce(sum(amount) filter (where bucket = 'held'), 0) as held
      from postings where bucket in ('available', 'held') group by 1, 2, 3)
    select coalesce(b.account_ref, p.account_ref) as account_ref, coalesce(b.asset_code, p.asset_code) as asset_code,
           coalesce(b.available, 0)::text as available, coalesce(b.held, 0)::text as held,
           coalesce(p.available, 0)::text as posted_available, coalesce(p.held, 0)::text as posted_held
    from balances b full join posted p
      on p.tenant_id = b.tenant_id and p.account_ref = b.account_ref and p.asset_code = b.asset_code
    where coalesce(b.available, 0) <> coalesce(p.available, 0) or coalesce(b.held, 0) <> coalesce(p.held, 0)`;
  const negative = await sql<{ account_ref: string; asset_code: string }[]>`
    select account_ref, asset_code from balances where available < 0 or held < 0`;
  const [counts] = await sql<{ entries: string; postings: string; balances: string }[]>`
    select (select count(*) from journal_entries)::text as entries, (select count(*) from postings)::text as postings,
           (select count(*) from balances)::text as balances`;
  return result(
    'I3',
    'journal: entries balance per asset, balances equal their postings, nothing negative',
    `${counts?.entries} entries, ${counts?.postings} postings, ${counts?.balances} balances`,
    [
      ...unbalanced.map((row) => `entry ${row.entry_id} sums to ${row.total} ${row.asset_code}`),
      ...drift.map(
        (row) =>
          `balance ${row.account_ref}/${row.asset_code} is ${row.available}/${row.held}, postings say ${row.posted_available}/${row.posted_held}`,
      ),
      ...negative.map((row) => `balance ${row.account_ref}/${row.asset_code} is negative`),
    ],
  );
}

/**
 * 4. The ledger agrees with the chain and the custodian. First at the balance level:
 * for every tenant, asset and holding place, what the hot wallet and deposit addresses hold at a
 * pinned block, and what the shared custodian account reports, equals the ledger's custody figure
 * up to named in-flight items; a place not observed, or a remainder, is a violation (money the
 * books do not explain, whatever breaks were opened). Then per withdrawal: confirmed withdrawals
 * equal outflows on the chain and at the custodian, or an open break says why.
 */
function ledgerAgreesWithRails(
  input: InvariantInput,
  withdrawals: OpRow[],
  ours: OurHashes,
  explained: (op: OpRow) => boolean,
  breakMentions: (text: string) => boolean,
): CheckResult {
  const violations: string[] = [];
  let placesCompared = 0;
  for (const run of input.balanceRuns) {
    if (run.result === null)
      violations.push(`tenant ${run.tenantId}: balance reconciliation failed: ${run.note}`);
    for (const figure of run.figures) {
      placesCompared += 1;
      const where = `tenant ${run.tenantId} ${figure.place} ${figure.assetCode}`;
      if (figure.observedMinor === null)
        violations.push(`${where}: not observed (${run.note ?? 'no reason'})`);
      else if (figure.unexplainedMinor !== '0')
        violations.push(
          `${where}: ledger ${figure.expectedMinor}, observed ${figure.observedMinor}, explained ${figure.explainedMinor}, unexplained ${figure.unexplainedMinor}`,
        );
    }
  }
  if (placesCompared === 0) violations.push('no balance was compared: a pass over nothing is not a pass');
  const onChain = new Set(input.chain.hotWalletTransfers.map((t) => t.hash.toLowerCase()));
  let confirmedEth = 0n;
  let outflowEth = 0n;
  for (const transfer of input.chain.hotWalletTransfers) outflowEth += BigInt(transfer.valueWei);
  for (const op of withdrawals.filter((w) => w.network === 'ethereum' && w.state === 'CONFIRMED')) {
    confirmedEth += BigInt(op.amount_minor);
    // Whichever of its attempts was mined settles it; a cancel never does.
    const payouts = (ours.hashesOf.get(op.operation_id) ?? []).filter((hash) => !ours.cancels.has(hash));
    if (!payouts.some((hash) => onChain.has(hash)))
      if (!explained(op))
        violations.push(
          `withdrawal ${op.operation_id} is CONFIRMED but its transaction is not on the canonical chain`,
        );
  }
  for (const transfer of input.chain.hotWalletTransfers) {
    const op = ours.opByTxHash.get(transfer.hash.toLowerCase());
    if (op && ours.cancels.has(transfer.hash.toLowerCase())) {
      // A mined cancel pays nobody; it only proves the withdrawal was not sent.
      if (op.state === 'CONFIRMED' && !explained(op))
        violations.push(
          `withdrawal ${op.operation_id} is CONFIRMED but its cancel ${transfer.hash} was mined`,
        );
      continue;
    }
    // An outflow no withdrawal accounts for is money gone: only an open break may stand for it.
    if (!op && !breakMentions(transfer.hash))
      violations.push(
        `${transfer.valueWei} wei left hot wallet ${transfer.from} in ${transfer.hash}: no withdrawal and no open break`,
      );
    if (op && op.state !== 'CONFIRMED' && FINAL.has(op.state) && !explained(op))
      violations.push(
        `transaction ${transfer.hash} is on chain but its withdrawal ${op.operation_id} is ${op.state}`,
      );
    if (op && OWNED_FINAL.has(op.state) && !explained(op))
      violations.push(
        `transaction ${transfer.hash} is on chain; withdrawal ${op.operation_id} is ${op.state} with no open break`,
      );
  }
  const byReference = new Map(input.custodian.transfers.map((t) => [t.externalReference, t]));
  let confirmedBtc = 0n;
  let completedBtc = 0n;
  const btcOps = new Set(withdrawals.map((op) => op.operation_id));
  for (const transfer of input.custodian.transfers) {
    if (transfer.status === 'completed') completedBtc += BigInt(transfer.amountMinor);
    if (
      transfer.status === 'completed' &&
      !btcOps.has(transfer.externalReference) &&
      !breakMentions(transfer.id)
    )
      violations.push(
        `the custodian completed transfer ${transfer.id} of ${transfer.amountMinor}: no withdrawal and no open break`,
      );
  }
  for (const op of withdrawals.filter(
    (w) => w.tenant_id === input.custodianTenantId && w.network === 'bitcoin',
  )) {
    const transfer = byReference.get(op.operation_id);
    if (op.state === 'CONFIRMED') {
      confirmedBtc += BigInt(op.amount_minor);
      if (transfer?.status !== 'completed' && !explained(op))
        violations.push(
          `withdrawal ${op.operation_id} is CONFIRMED; the custodian's transfer is ${transfer?.status ?? 'missing'}`,
        );
    } else if (
      transfer?.status === 'completed' &&
      (FINAL.has(op.state) || OWNED_FINAL.has(op.state)) &&
      !explained(op)
    )
      violations.push(
        `the custodian completed a transfer for withdrawal ${op.operation_id}, which is ${op.state}`,
      );
  }
  return result(
    'I4',
    'ledger agrees with chain and custodian (or an open break explains the difference)',
    `${placesCompared} asset/place balances compared; ETH confirmed ${confirmedEth} wei vs chain outflow ${outflowEth} wei; BTC confirmed ${confirmedBtc} vs custodian completed ${completedBtc} sat${input.landed.reconciliation ? '' : '; three-way reconciliation not landed, so no break can explain a difference'}`,
    violations,
  );
}

/** 5. Every deposit credited exactly once; a reorganised deposit reversed by a compensating entry. */
function depositsOnce(input: InvariantInput, ops: OpRow[]): CheckResult {
  const violations: string[] = [];
  const notes: string[] = [];
  const deposits = ops.filter((op) => op.kind === 'deposit');
  // On chain.
  const sent = input.deposits.chain.length;
  const canonical = input.chain.depositTransfers;
  if (!input.landed.depositWatcher) {
    notes.push(
      `chain: ${sent} deposits sent (${canonical.length} canonical), deposit watcher not landed: not checked`,
    );
  } else {
    const tenantByAddress = new Map(input.deposits.chain.map((d) => [d.address.toLowerCase(), d]));
    const canonicalHashes = new Set(canonical.map((t) => t.hash.toLowerCase()));
    let deep = 0;
    for (const transfer of canonical) {
      const target = tenantByAddress.get(transfer.to.toLowerCase());
      const tenant = input.tenants.find((t) => t.index === target?.tenantIndex);
      if (!target || !tenant) continue;
      if (input.chain.head - transfer.blockNumber + 1 < tenant.ethConfirmations + 2) continue;
      deep += 1;
      const credited = deposits.filter(
        (op) =>
          op.tenant_id === tenant.tenantId &&
          op.reference.toLowerCase().includes(transfer.hash.toLowerCase()),
      );
      const live = credited.filter((op) => op.state === 'CONFIRMED');
      if (live.length !== 1)
        violations.push(
          `chain deposit ${transfer.hash} is canonical and deep; ${live.length} credits (${credited.map((op) => op.state).join(',')})`,
        );
      else if (live[0]?.amount_minor !== transfer.valueWei)
        violations.push(
          `chain deposit ${transfer.hash} of ${transfer.valueWei} credited as ${live[0]?.amount_minor}`,
        );
    }
    for (const op of deposits) {
      const hash = /0x[0-9a-f]{64}/i.exec(op.reference)?.[0]?.toLowerCase();
      if (
        hash &&
        input.deposits.chain.some((d) => d.txHash.toLowerCase() === hash) &&
        !canonicalHashes.has(hash) &&
        op.state !== 'REVERSED'
      )
        violations.push(
          `deposit ${op.operation_id} credits ${hash}, which a reorganisation removed, and is ${op.state}`,
        );
    }
    notes.push(`chain: ${sent} sent, ${canonical.length} canonical, ${deep} deep enough to require a credit`);
  }
  // Through custodian webhooks.
  const webhookSent = input.deposits.webhooks.length;
  if (!input.landed.inboxProcessing) {
    notes.push(`custodian webhooks: ${webhookSent} deposits sent, inbox processing not landed: not checked`);
  } else {
    let checked = 0;
    for (const event of input.deposits.webhooks) {
      const credited = deposits.filter(
        (op) => op.tenant_id === input.custodianTenantId && op.reference === event.reference,
      );
      if (credited.length > 1)
        violations.push(`custodian deposit ${event.reference} credited ${credited.length} times`);
      // Any credit, acknowledged or not, must carry the deposit's amount: a deposit whose original
      // answers were all lost can still be credited, and with the wrong body (I13-BTC, seed 18).
      const wrong = credited.find((op) => op.amount_minor !== event.amountMinor);
      if (wrong)
        violations.push(
          `custodian deposit ${event.reference} of ${event.amountMinor} credited as ${wrong.amount_minor} (a changed body must be quarantined)`,
        );
      if (!event.acknowledged) continue;
      checked += 1;
      if (credited.length !== 1)
        violations.push(`custodian deposit ${event.reference} was acknowledged; ${credited.length} credits`);
    }
    notes.push(`custodian webhooks: ${webhookSent} sent, ${checked} acknowledged and checked`);
  }
  const anything = input.landed.depositWatcher || input.landed.inboxProcessing;
  return result(
    'I5',
    'every deposit credited exactly once; a reorganised deposit reversed',
    notes.join('; '),
    violations,
    anything ? undefined : 'not-checkable',
  );
}

/** 6. Every non-terminal withdrawal holds its funds; no key of a non-terminal operation expired. */
function holds(withdrawals: OpRow[]): CheckResult {
  const violations: string[] = [];
  let holding = 0;
  for (const op of withdrawals) {
    const mustHold = (HOLDING_STATES as readonly string[]).includes(op.state);
    if (mustHold) holding += 1;
    const expected = mustHold ? op.amount_minor : '0';
    if (op.held !== expected)
      violations.push(
        `withdrawal ${op.operation_id} is ${op.state} and holds ${op.held} (expected ${expected})`,
      );
    if (!FINAL.has(op.state) && op.key_expired_at !== null)
      violations.push(`withdrawal ${op.operation_id} is ${op.state} but its key expired`);
  }
  return result(
    'I6',
    'every non-terminal withdrawal holds its funds; no key of a non-terminal operation expired',
    `${withdrawals.length} withdrawals, ${holding} in holding states`,
    violations,
  );
}

/** 7. Every acknowledged webhook is in the inbox; none was applied twice. */
async function webhooksInInbox(input: InvariantInput): Promise<CheckResult> {
  const { sql } = input;
  const rows = await sql<{ event_id: string; status: string; body_amount: string | null }[]>`
    select event_id, status, body->'data'->>'amountMinor' as body_amount from inbox_events
    where tenant_id = ${input.custodianTenantId} and source = 'custodian'`;
  const inbox = new Map(rows.map((row) => [row.event_id, row]));
  const violations: string[] = [];
  const simulatorAcked = new Set(
    input.custodian.webhookDeliveries
      .filter((d) => d.status !== null && d.status >= 200 && d.status < 300)
      .map((d) => d.webhookId),
  );
  for (const id of simulatorAcked)
    if (!inbox.has(id)) violations.push(`custodian webhook ${id} was acknowledged but is not in the inbox`);
  const depositAcked = input.deposits.webhooks.filter((d) => d.acknowledged);
  for (const event of depositAcked) {
    const row = inbox.get(event.eventId);
    if (!row) violations.push(`deposit webhook ${event.eventId} was acknowledged but is not in the inbox`);
    else if (row.body_amount !== event.amountMinor)
      violations.push(
        `deposit webhook ${event.eventId}: the inbox kept a body with ${row.body_amount}, not the acknowledged ${event.amountMinor}`,
      );
  }
  const twice = await sql<{ event_id: string; n: string }[]>`
    select payload->>'eventId' as event_id, count(*)::text as n from work_items
    where tenant_id = ${input.custodianTenantId} and topic = 'inbox.event'
    group by 1 having count(*) > 1`;
  for (const row of twice)
    violations.push(`inbound event ${row.event_id} was queued for processing ${row.n} times`);
  const [quarantined] = await sql<{ n: string }[]>`select count(*)::text as n from inbox_quarantine`;
  let unprocessed = 0;
  if (input.landed.inboxProcessing) {
    const waiting = await sql<{ source: string; event_id: string; event_type: string }[]>`
      select source, event_id, event_type from inbox_events where status = 'RECEIVED'`;
    unprocessed = waiting.length;
    for (const row of waiting)
      violations.push(
        `inbound ${row.source} event ${row.event_id} (${row.event_type}) is still RECEIVED after the quiet phase`,
      );
  }
  return result(
    'I7',
    'every acknowledged webhook is in the inbox; none applied twice',
    `${simulatorAcked.size} custodian transfer webhooks and ${depositAcked.length} deposit webhooks acknowledged, ${rows.length} inbox events, ${quarantined?.n ?? 0} quarantined${input.landed.inboxProcessing ? `, ${unprocessed} unprocessed` : '; inbox processing not landed: "applied once" checked only as "queued once"'}`,
    violations,
  );
}
