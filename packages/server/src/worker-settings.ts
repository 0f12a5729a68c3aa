import { DEFAULT_REPLACE_POLICIES, type WorkerOptions } from '@idem/workers';
import { type Env, egressPolicyFrom } from './env.ts';

/**
 * The worker's settings read from the environment, in one place for both ways a worker runs (in
 * the server process, and `idem worker`): leases, escalation, the two-pass not-sent interval,
 * BROADCAST alert ages, the stalled-pass alert, reconciliation and custodian-poll cadence, automatic
 * fee bumps and where outbound webhooks may connect (`embedded`: the demo, which counts as
 * development).
 */
export function workerSettingsFrom(
  env: Env,
  options: { embedded: boolean } = { embedded: false },
): Omit<WorkerOptions, 'db' | 'rails' | 'log' | 'workerId' | 'probe'> {
  const bumpAfter = env.IDEM_BUMP_AFTER_MS;
  return {
    egress: egressPolicyFrom(env, options),
    leaseMs: env.IDEM_WORKER_LEASE_MS,
    stallAlertMs: env.IDEM_WORKER_STALL_ALERT_MS,
    unknownEscalateAfterMs: env.IDEM_UNKNOWN_ESCALATE_AFTER_MS,
    notSentConfirmIntervalMs: env.IDEM_NOT_SENT_CONFIRM_INTERVAL_MS,
    escalationOwner: env.IDEM_ESCALATION_OWNER,
    ...(env.IDEM_BROADCAST_ALERT_AFTER_MS
      ? { broadcastAlertAfterMs: env.IDEM_BROADCAST_ALERT_AFTER_MS }
      : {}),
    ...(env.IDEM_BROADCAST_ESCALATE_AFTER_MS
      ? { broadcastEscalateAfterMs: env.IDEM_BROADCAST_ESCALATE_AFTER_MS }
      : {}),
    ...(env.IDEM_RECONCILE_EVERY_MS > 0 ? { reconcileEveryMs: env.IDEM_RECONCILE_EVERY_MS } : {}),
    custodianPollEveryMs: env.IDEM_CUSTODIAN_POLL_EVERY_MS,
    governanceEveryMs: env.IDEM_GOVERNANCE_EVERY_MS,
    ...(bumpAfter
      ? {
          replacePolicies: Object.fromEntries(
            Object.entries(bumpAfter).map(([network, bumpAfterMs]) => [
              network,
              { bumpAfterMs, maxBumps: DEFAULT_REPLACE_POLICIES[network]?.maxBumps ?? 5 },
            ]),
          ),
        }
      : {}),
  };
}
