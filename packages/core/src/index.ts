export { openDatabase, migrationsFolder } from './db/connect.ts';
export type { Database, DatabaseHandle, Executor, OpenOptions, Tx } from './db/connect.ts';
export { rowsOf } from './db/rows.ts';
export { APP_ROLE, withTenant } from './db/tenant-scope.ts';
export * as schema from './db/schema/index.ts';
export { getBalances, sumPostings, type BalanceView } from './journal/balances.ts';
export { postEntry, SYSTEM_ACCOUNTS, type Posting, type PostResult } from './journal/post-entry.ts';
export { claimIdentity, IN_FLIGHT_RETRY_AFTER_MS, type IdentityClaim } from './operations/claim-identity.ts';
export { createWithdrawal, type CreateWithdrawalInput, type CreationStep } from './operations/create-withdrawal.ts';
export {
  assertPayloadIntact,
  findByKey,
  findByReference,
  findOperation,
  getOperation,
  recomputeHash,
  toView,
  type Operation,
} from './operations/operation-record.ts';
export { recordAdjustment, recordDeposit } from './operations/record-credit.ts';
export { enqueue, type WorkTopic } from './outbox/enqueue.ts';
export { payloadHash, type ApprovedPayload } from './payload/payload-hash.ts';
export { expireIdempotencyKeys, KEY_RETENTION_DAYS_DEFAULT } from './retention/expire-keys.ts';
export { claim, type Claimed, LEASE_MS_MAX, recordSigned, releaseClaim } from './state-machine/claim.ts';
export { transition, type TransitionContext } from './state-machine/transition.ts';
export { allowedNext, findEdge, HOLDING_STATES, IN_FLIGHT_STATES, SETTLED_STATES } from './state-machine/transitions.ts';
export { createTenant, DEFAULT_ASSETS, type AssetConfig } from './tenants/provision.ts';
