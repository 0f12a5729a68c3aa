// EVM rail: a real chain through viem, a hot wallet, classified broadcasts and chain evidence.

// Custodian rail: the REST adapter, the wire protocol, and the misbehaving simulator.
export {
  type CustodianAdapter,
  type CustodianAdapterConfig,
  CustodianListIncompleteError,
  createCustodianAdapter,
  type ReferenceLookup,
  type SubmitAmbiguity,
  type SubmitOutcome,
  transfersListedMax,
  type VerifiedWebhook,
  verifyWebhook,
  WebhookRejectedError,
} from './custodian/adapter.ts';
export * from './custodian/protocol.ts';
export {
  type CustodianSimulatorOptions,
  faultHeader,
  generateWebhookSecret,
  type RunningCustodianSimulator,
  startCustodianSimulator,
} from './custodian/simulator.ts';
export {
  type AnvilInstance,
  type AnvilOptions,
  anvilDevPrivateKeys,
  resolveAnvilBinary,
  startAnvil,
} from './evm/anvil.ts';
export type { DepositScanRequest } from './evm/deposits.ts';
export {
  type CapVerdict,
  type FeePolicy,
  type FeePolicyInput,
  type FeeQuote,
  type Fees,
  feePolicy,
  feePolicySchema,
  feesWithinCap,
  quoteFees,
  replacementFees,
} from './evm/fees.ts';
export {
  createEvmRail,
  type EvmRail,
  type EvmRailConfig,
  type EvmRailLimits,
  type ReplacementFees,
} from './evm/rail.ts';
export { testTokenAbi, testTokenBytecode } from './evm/test-token.artifact.ts';
export { type DeployTestTokenOptions, deployTestToken } from './evm/test-token.ts';
export * from './evm/types.ts';
// The signer interface: who holds a hot wallet's key (docs/SIGNING.md).
export { lateAnsweringSigner } from './signer/faults.ts';
export { DEVELOPMENT_CHAIN_IDS, localKeySigner } from './signer/local-key.ts';
export {
  createPkcs11Key,
  formatPkcs11KeyRef,
  isPkcs11KeyRef,
  openPkcs11Key,
  openPkcs11Signer,
  type Pkcs11KeyLocation,
  parsePkcs11KeyRef,
  pinRefSchema,
  pkcs11ModulePathSchema,
  pkcs11TokenLabelSchema,
} from './signer/pkcs11.ts';
export {
  type RemoteSignerOptions,
  remoteSigner,
  type SignRequest,
  signRequestSchema,
  signResponseSchema,
} from './signer/remote.ts';
export {
  type Approval,
  type ApprovedTransfer,
  assertApproved,
  type DigestSignature,
  type DigestSigner,
  ethereumSignature,
  type SigningContext,
  type SigningKind,
  signTimeoutMsDefault,
} from './signer/signer.ts';
