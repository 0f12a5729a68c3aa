import type { Database } from '@idem/core';
import type { Logger } from 'pino';
import type { RailRegistry } from './rails.ts';
import type { ReplacePolicy } from './steps/replace.ts';

/** Points in the send path where a fault-injection probe may run (tests kill the process there). */
export type SendStep = 'signed' | 'broadcast-returned' | 'replacement-signed' | 'replacement-recorded';

export interface WorkerContext {
  db: Database;
  rails: RailRegistry;
  log: Logger;
  workerId: string;
  /** How long a claim is exclusive. A worker that dies loses it after this. */
  leaseMs: number;
  /** Operations per stage per tenant per tick. */
  batchSize: number;
  /** How long a confirmation is re-checked against reorganisations. */
  reorgWindowSeconds: number;
  /** After this long in UNKNOWN an operation gets a named owner and an alert (C15). */
  unknownEscalateAfterMs: number;
  /** Who owns escalations. */
  escalationOwner: string;
  probe?: (step: SendStep, operationId: string) => Promise<void>;
  /** Automatic fee bumps per network (issue 12); networks not named use the defaults. */
  replacePolicies?: Record<string, ReplacePolicy>;
}
