import type { Network } from '@idem/contracts';
import type { Database, EgressPolicy } from '@idem/core';
import type { Logger } from 'pino';
import type { RailRegistry } from './rails.ts';
import type { ReplacePolicy } from './steps/replace.ts';

/** Points in the send path where a fault-injection probe may run (tests kill the process there). */
export type SendStep =
  /** The withdrawal is claimed and the signer is about to be asked (where a test races a freeze). */
  | 'signing'
  /** The signer answered; its signature is not persisted yet (where the I18 C12 test kills the worker). */
  | 'signer-answered'
  | 'signed'
  | 'broadcast-returned'
  | 'replacement-signed'
  | 'replacement-recorded';

export interface WorkerContext {
  db: Database;
  rails: RailRegistry;
  log: Logger;
  workerId: string;
  /** How long a lease is exclusive. A worker that dies loses it after this. */
  leaseMs: number;
  /** Operations per stage per tenant per tick. */
  batchSize: number;
  /** How long a confirmation is re-checked against reorganisations. */
  reorgWindowSeconds: number;
  /** After this long in UNKNOWN an operation gets a named owner and an alert (C15). */
  unknownEscalateAfterMs: number;
  /** The least time between the two chain passes a VERIFIED_NOT_SENT verdict needs. */
  notSentConfirmIntervalMs: number;
  /** Who owns escalations. */
  escalationOwner: string;
  /** Per network: a BROADCAST not mined after this long raises an alert (defaults in steps/settle.ts). */
  broadcastAlertAfterMs?: Partial<Record<Network, number>>;
  /** Per network: a BROADCAST not mined after this long gets the escalation owner and an alert. */
  broadcastEscalateAfterMs?: Partial<Record<Network, number>>;
  probe?: (step: SendStep, operationId: string) => Promise<void>;
  /** Automatic fee bumps per network; networks not named use the defaults. */
  replacePolicies?: Record<string, ReplacePolicy>;
  /** Where outbound webhooks may connect, checked again at every connection (absent: the strictest). */
  egress?: EgressPolicy;
  /**
   * The time, in epoch milliseconds, that ages are measured against (a BROADCAST not mined, an
   * UNKNOWN past its window, a fee bump's wait, a timing break's window): Date.now unless injected,
   * so a test ages a row by moving the clock instead of sleeping through the age.
   */
  now(): number;
}
