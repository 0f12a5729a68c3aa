export type {
  AssetEntry,
  BalanceEntry,
  ErrorCode,
  ListDepositsInput,
  ListDepositsOutput,
  ListWithdrawalsInput,
  ListWithdrawalsOutput,
  OperationState,
  OperationView,
  PreviewDecision,
  PreviewWithdrawalOutput,
  Problem,
  SubmitOutcome,
  SubmitWithdrawalsOutput,
  WithdrawalBatchItemError,
  WithdrawalBatchResult,
  WithdrawalRequest,
} from '@idem/contracts';
export { type OperationWebhook, operationWebhookSchema, withdrawalKey } from '@idem/contracts';
export { createIdemClient, type IdemClient, type IdemClientOptions, PROCEDURES } from './client.ts';
export { IdemApiError, IdemTransportError } from './errors.ts';
export { backoffMs, DEFAULT_RETRY, type RetryPolicy } from './retry.ts';
export { type LinkFetch, undiciTransport } from './transport.ts';
export { verifyWebhook } from './webhooks.ts';
