export type { CustodianAccountPass } from './balance-reconciliation/custodian.ts';
export { reportKeyOf, runCsv, signRunReport, verifyRunReport } from './balance-reconciliation/report.ts';
export {
  type BalanceRunOptions,
  type BalanceRunReport,
  reconcileBalances,
} from './balance-reconciliation/run.ts';
export type { SendStep, WorkerContext } from './context.ts';
export { type Mailer, printingMailer, smtpMailer } from './mail/mailer.ts';
export { createMailSender, type MailSender, type MailSenderOptions } from './mail/sender.ts';
export {
  defaultKeyResolver,
  keyLocation,
  RailRegistry,
  type RailsConfig,
  routeFor,
  signerFor,
} from './rails.ts';
export {
  type Finding,
  type ReconciliationOptions,
  type ReconciliationReport,
  reconcileTenant,
} from './reconciliation.ts';
export { attestSettlement, type SettlementAssertion } from './settlement-witness.ts';
export { DEFAULT_REPLACE_POLICIES, type ReplacePolicy } from './steps/replace.ts';
export { BROADCAST_ALERT_AFTER_MS, BROADCAST_ESCALATE_AFTER_MS } from './steps/stuck.ts';
export { createWorker, type TickReport, type Worker, type WorkerOptions } from './worker.ts';
