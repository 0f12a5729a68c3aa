export { type ApprovedPayload, payloadHash } from '@idem/contracts/payload';
export {
  ALL_API_KEY_SCOPES,
  API_KEY_SECRET_BYTES,
  type AuthenticatedApiKey,
  activateApiKey,
  apiKeyActor,
  apiKeyOwners,
  authenticateApiKey,
  createApiKey,
  hashApiKey,
  keyIdOfActor,
  listApiKeys,
  type MintApiKeyInput,
  mintApiKey,
  type ParsedApiKey,
  parseApiKey,
  revokeApiKey,
  setApiKeyScopes,
} from './access/api-keys.ts';
export {
  disableEndpoint,
  listEndpoints,
  newWebhookSecret,
  rotateEndpointSecret,
  secretsInForce,
} from './access/endpoint-secrets.ts';
export {
  createWebhookEndpoint,
  findWebhookEndpoint,
  tenantOfEndpoint,
  webhookSourceSchema,
} from './access/webhook-endpoints.ts';
export { assertNotCoolingOff } from './approvals/cooling-off.ts';
export { type Decision, type DecisionResult, decideWithdrawal, requesterOf } from './approvals/decide.ts';
export {
  type AttemptFees,
  type AttemptKind,
  approvedCancel,
  attemptHashes,
  attemptsByOperation,
  type FeeCap,
  feeCapInForce,
  leaseForReplacement,
  listAttempts,
  openBumpRequest,
  REPLACEABLE_STATES,
  recordAttempt,
  recordOriginalAttempt,
  requestFeeBump,
  type SignedAttempt,
} from './attempts/attempts.ts';
export { operationAttempts, walletNonceView } from './attempts/views.ts';
export {
  AUDIT_GENESIS_HASH,
  type AuditChainRow,
  auditEntryHash,
  verifyAuditChain,
} from './audit/audit-chain.ts';
export { type AuditRecord, exportAudit, listAudit, recordAudit } from './audit/audit-log.ts';
export {
  type AuditedResult,
  type AuditOkWhen,
  runAudited,
  settled,
} from './audit/audited-transaction.ts';
export { type Branding, DEFAULT_PRIMARY_COLOR, getBranding, setBranding } from './branding/branding.ts';
export { explorerUrlFor, listExplorers, setExplorer } from './branding/explorers.ts';
export {
  getAccountWithdrawal,
  intentIdentity,
  listAccountWithdrawals,
  submitWebWithdrawal,
} from './customer/account.ts';
export { type InProgressDuplicate, refuseUnconfirmedDuplicate } from './customer/duplicates.ts';
export { APP_ROLE, actAsAppRole, withAppRole } from './db/app-role.ts';
export type { Database, DatabaseHandle, Executor, OpenOptions, Tx } from './db/connect.ts';
export { batchingOf, migrationsFolder, openDatabase } from './db/connect.ts';
export {
  type ConnectionString,
  connectionStringSchema,
  formatConnectionString,
  parseConnectionString,
  withDatabase,
} from './db/connection-string.ts';
export { errorCodes } from './db/error-codes.ts';
export { rowsOf } from './db/rows.ts';
export * as schema from './db/schema/index.ts';
export { withTenant, withTenantAsConnection } from './db/tenant-scope.ts';
export {
  addressRefusal,
  assertEgressAllowed,
  type EgressPolicy,
  EgressRefused,
  type HostResolver,
  parseAllowEntry,
  permittedAddresses,
  type ResolvedAddress,
  STRICT_EGRESS,
  urlRefusal,
} from './delivery/egress.ts';
export {
  activateOutboundEndpoint,
  activeOutboundEndpoints,
  createOutboundEndpoint,
  type OutboundEndpoint,
} from './delivery/outbound-endpoints.ts';
export {
  type AttemptOutcome,
  DELIVERY_ATTEMPTS_MAX,
  fanOutNotification,
  leaseDueDeliveries,
  listDeliveries,
  recordDeliveryAttempt,
  redeliver,
} from './delivery/webhook-deliveries.ts';
export {
  advanceCursor,
  type DepositObservation,
  depositAddressOwners,
  listDepositAddresses,
  markObservation,
  observationsIn,
  observeDeposit,
  recordCanonical,
  recordReplaced,
  registerDepositAddress,
  rewindCursor,
  type ScanPosition,
  scanCursor,
  scanPosition,
} from './deposits/watch.ts';
export {
  freeze,
  freezeAsOperator,
  freezeInForce,
  heldWithdrawals,
  liftFreeze,
  listFreezes,
  OPERATOR_NAME,
  proposeUnfreeze,
} from './freeze/freeze.ts';
export {
  freezeCoversWhere,
  heldByFreeze,
  notHeldByFreeze,
  withdrawalHeldByFreeze,
} from './freeze/hold.ts';
export {
  applyFreezeTrip,
  checkFreezeTrips,
  freezeTripLoosens,
  listFreezeTrips,
  setFreezeTrip,
  TRIP_ACTOR_PREFIX,
} from './freeze/trips.ts';
export {
  changeApiKeyScopes,
  proposeApiKey,
  proposeOutboundEndpoint,
} from './governance/access-controls.ts';
export {
  changeGovernance,
  changeRiskRule,
  changeStaffRole,
  enableStaff,
  requestStaffInvite,
} from './governance/controls.ts';
export { riskRuleLoosens, roleLoosens } from './governance/loosening.ts';
export {
  CONTROL_NOTICE_MAIL_TOPIC,
  type ControlNoticeMailPayload,
  controlNoticeMailOf,
} from './governance/notice-mail.ts';
export { listNotifications, notifyAdmins } from './governance/notify.ts';
export {
  allocateNonce,
  getHotWallet,
  type HotWallet,
  listHotWallets,
  provisionHotWallet,
  registerHotWallet,
} from './hot-wallets/hot-wallets.ts';
export {
  EVENT_ID_LENGTH_MAX,
  type InboxRecordOutcome,
  recordInboxEvent,
  recordInboxRejection,
  type VerifiedDelivery,
} from './inbox/record-event.ts';
export { type BalanceView, getBalances } from './journal/balances.ts';
export { type Posting, type PostResult, postEntry, SYSTEM_ACCOUNTS } from './journal/post-entry.ts';
export { balancesDifferingFromPostings, networkFeesExpensed } from './journal/queries.ts';
export { type ItemOutcome, MAX_BATCH_ITEMS, submitWithdrawals } from './operations/batched-creation.ts';
export { type BatchObserver, observeBatches } from './operations/batcher-registry.ts';
export { claimIdentity, type IdentityClaim, IN_FLIGHT_RETRY_AFTER_MS } from './operations/claim-identity.ts';
export {
  type CreateWithdrawalInput,
  type CreationStep,
  createWithdrawal,
  submitWithdrawal,
} from './operations/create-withdrawal.ts';
export {
  approvalOf,
  assertPayloadIntact,
  findByKey,
  findByReference,
  findOperation,
  getOperation,
  type Operation,
  recomputeHash,
  toView,
} from './operations/operation-record.ts';
export { previewWithdrawal } from './operations/preview-withdrawal.ts';
export { creditAsOperator, recordAdjustment, recordDeposit } from './operations/record-credit.ts';
export { reverseDeposit } from './operations/reverse-deposit.ts';
export { type BatchingOptions, DEFAULT_BATCHING } from './operations/withdrawal-batcher.ts';
export {
  completeWorkItem,
  deferWorkItem,
  enqueue,
  lockDueWorkItems,
  type WorkTopic,
  workRetryDelayMs,
} from './outbox/enqueue.ts';
export { applyDueControlChanges, proposeControlChange } from './proposals/control.ts';
export {
  countedApprovers,
  decideProposal,
  expiryRefusal,
  type ProposalDecision,
  type ProposalDecisionResult,
} from './proposals/decide.ts';
export { proposalOperationKey } from './proposals/kinds/preconditions.ts';
export {
  type SettlementAttestation,
  settlementAttestationSchema,
} from './proposals/kinds/resolve-withdrawal.ts';
export {
  type ExecuteContext,
  PROPOSAL_RULES,
  type PrepareContext,
  type ProposalRule,
} from './proposals/kinds.ts';
export { cancelProposal, type ProposeResult, propose } from './proposals/propose.ts';
export { listProposals, proposalsAwaiting } from './proposals/queries.ts';
export {
  findProposal,
  getProposal,
  type ProposalRecord,
  proposalHash,
  toProposalView,
} from './proposals/record.ts';
export {
  type AssetView,
  LIST_LIMIT_MAX,
  listAssets,
  listOperations,
  operationListConditions,
  operationPageQuery,
  pageOperations,
} from './queries/list.ts';
export { type OperationStats, operationStats, settledOperationStats } from './queries/operation-stats.ts';
export { computeOverview, overviewStatements } from './queries/overview.ts';
export { explorerPageQuery, exploreWithdrawals, exportWithdrawals } from './queries/withdrawal-explorer.ts';
export {
  allTenantIds,
  type CustodianAccountLedger,
  custodianAccountLedger,
  custodianAccountOf,
  IN_FLIGHT_WITHDRAWAL_STATES,
  type LedgerFigures,
  ledgerFigures,
} from './reconciliation/balances.ts';
export {
  type BreakClass,
  type BreakClosure,
  type BreakFinding,
  closeBreak,
  DEFAULT_BREAK_OWNERS,
  escalateBreak,
  listBreaks,
  openBreak,
  openBreaksOfClass,
  type ReconciliationBreak,
} from './reconciliation/breaks.ts';
export { failRun, finishRun, getRun, listRuns, runHistory, startRun } from './reconciliation/runs.ts';
export { expireIdempotencyKeys, KEY_RETENTION_DAYS_DEFAULT } from './retention/expire-keys.ts';
export { type PolicyChange, policyHistory } from './risk/policy-history.ts';
export {
  assessRisk,
  type RiskAssessment,
  type RiskFlag,
  type RiskPolicyInput,
  reviewWithdrawal,
  setRiskPolicy,
  setRiskPolicyAsOperator,
} from './risk/review.ts';
export { changeRiskRuleNow, listRiskRules, riskRuleHistory } from './risk/rules.ts';
export { storedAssertionRefusal } from './staff/assertion-check.ts';
export { staffTenantsForEmail, tenantForSlug } from './staff/directory.ts';
export {
  forgetInvitationLink,
  INVITATION_MAIL_TOPIC,
  type InvitationMailPayload,
  invitationMailOf,
  type MailMessage,
} from './staff/invitation-mail.ts';
export {
  acceptMfaStep,
  confirmMfaEnrolment,
  listMfaSecrets,
  MFA_FAILURE_WINDOW_MS,
  MFA_FAILURES_MAX,
  type MfaRecord,
  mfaStateOf,
  resealMfaSecret,
  reserveMfaAttempt,
  spendRecoveryCode,
  startMfaEnrolment,
} from './staff/mfa.ts';
export {
  type ApprovalAssertionCheck,
  approvalAssertionOptions,
  approvalChallenge,
  checkDecisionAssertion,
  type ExpectedRelyingParties,
  expectedRelyingParties,
  listPasskeys,
  passkeyRegistrationOptions,
  passkeyRequiredFor,
  registerPasskey,
  registrationChallenge,
  relyingPartyOf,
  revokePasskey,
  type StoredAssertion,
  verifyApprovalAssertions,
  type WebAuthnRelyingParty,
} from './staff/passkeys.ts';
export {
  type ProposalAssertionCheck,
  proposalAssertionOptions,
  proposalChallenge,
  verifyProposalAssertions,
} from './staff/proposal-assertions.ts';
export {
  listApprovalQueue,
  listAttentionQueue,
  listInboxAttention,
  operationTimeline,
  searchOperations,
  toStaffView,
} from './staff/queries.ts';
export { escalateOperation } from './staff/runbook.ts';
export {
  authenticateCustomerSession,
  authenticateStaffSession,
  CUSTOMER_LINK_MS_DEFAULT,
  CUSTOMER_SESSION_MS,
  createCustomerLink,
  openWebSession,
  type ParsedToken,
  parseWebToken,
  redeemCustomerLink,
  revokeWebSession,
  STAFF_SESSION_MS,
  type StaffSessionUser,
} from './staff/sessions.ts';
export { STOP_REASON_MIN, STOPPED_BY_STAFF, stopWithdrawal } from './staff/stop-withdrawal.ts';
export {
  acceptInvitation,
  disableStaff,
  INVITATION_MS,
  inviteStaff,
  listTeam,
  NO_PASSWORD_YET,
  type StaffInvitationInput,
  setStaffRole,
  type TeamMemberRow,
} from './staff/team.ts';
export {
  createStaffUser,
  findStaffForSignIn,
  normalizeEmail,
  type StaffUser,
  staffActor,
} from './staff/users.ts';
export { assignOwner } from './state-machine/assign-owner.ts';
export {
  LEASE_MS_MAX,
  type Leased,
  leaseForSigning,
  recordSigned,
  releaseLease,
  takeOverSigned,
} from './state-machine/lease.ts';
export { type TransitionContext, transition } from './state-machine/transition.ts';
export {
  allowedNext,
  findEdge,
  HOLDING_STATES,
  IN_FLIGHT_STATES,
  SETTLED_STATES,
} from './state-machine/transitions.ts';
export { clearWaiting, markWaiting } from './state-machine/waiting.ts';
export {
  activeAdminCount,
  GOVERNANCE_DEFAULTS,
  type Governance,
  governanceOf,
  governanceView,
  PROPOSAL_TTL_SECONDS_DEFAULT,
  setTenantGovernance,
} from './tenants/governance.ts';
export {
  type AssetConfig,
  createTenant,
  DEFAULT_ASSETS,
  setApproverCoolingOff,
  setTenantMfa,
  slugFromName,
} from './tenants/provision.ts';
