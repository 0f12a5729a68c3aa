import { readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { allTenantIds, getRun, listRuns, withTenant } from '@idem/core';
import {
  type BalanceRunReport,
  type CustodianAccountPass,
  reconcileBalances,
  reconcileTenant,
  runCsv,
  signRunReport,
  verifyRunReport,
} from '@idem/workers';
import { z } from 'zod';
import { openConfiguredDatabase } from '../database.ts';
import { readEnv } from '../env.ts';
import { createLogger } from '../logger.ts';
import { startMoneyMovers } from '../money-movers.ts';
import { print as printResult, required, UsageError } from './usage.ts';

type Flags = Record<string, string | boolean | undefined>;

export const RECONCILE_USAGE = `  reconcile [--tenant ID] [--json]                three-way and balance-level reconciliation now, for one
                                                  tenant or every tenant; opens breaks; exit 3 on any
                                                  finding or variance
  reconcile runs --tenant ID [--json]             the stored balance reconciliation runs
  reconcile show --tenant ID --run ID [--csv]     a run with its figures (or its CSV)
  reconcile export --tenant ID --run ID [--out FILE]
                                                  a run as JSON signed by the signer service's own key
                                                  (IDEM_SIGNER_URL), else the tenant's outbound-webhook secret
  reconcile verify FILE [--public-key FILE | --secret whsec_...]
                                                  check a signed report: the signer service's public key
                                                  (PEM, or the server's /report-key.json), or the secret
                                                  (--secret or IDEM_REPORT_SECRET); prints the run, exit 1 if forged`;

function runId(flags: Flags): string {
  const id = required(flags, 'run');
  if (!z.uuid().safeParse(id).success) throw new UsageError('--run must be a run id (a UUID)');
  return id;
}

/** `idem reconcile ...`: returns the exit code. */
export async function reconcileCommand(sub: string[], flags: Flags): Promise<number> {
  const [action, file] = sub;
  if (action === 'verify') return verify(file, flags);
  if (action !== undefined && !['runs', 'show', 'export'].includes(action)) {
    throw new UsageError(`unknown reconcile command: ${action}`);
  }
  const env = readEnv();
  const database = await openConfiguredDatabase(env, { purpose: 'cli' });
  try {
    await database.migrateAsOwner();
    const db = database.db;
    if (action === 'runs') {
      const tenantId = required(flags, 'tenant');
      print({ runs: await withTenant(db, tenantId, (tx) => listRuns(tx, { tenantId })) }, flags);
      return 0;
    }
    if (action === 'show') {
      const tenantId = required(flags, 'tenant');
      const run = await withTenant(db, tenantId, (tx) => getRun(tx, { tenantId, runId: runId(flags) }));
      if (flags.csv === true) process.stdout.write(runCsv(run));
      else print({ ...run }, flags);
      return 0;
    }
    if (action === 'export') {
      const signer =
        env.IDEM_SIGNER_URL && env.IDEM_SIGNER_TOKEN
          ? { url: env.IDEM_SIGNER_URL, token: env.IDEM_SIGNER_TOKEN }
          : undefined;
      const report = await signRunReport(db, required(flags, 'tenant'), runId(flags), new Date(), signer);
      const text = `${JSON.stringify(report, null, 2)}\n`;
      if (typeof flags.out === 'string') {
        writeFileSync(flags.out, text, { mode: 0o644 });
        print(
          {
            written: flags.out,
            runId: runId(flags),
            ...('endpointId' in report.signature
              ? { endpointId: report.signature.endpointId }
              : { keyId: report.signature.keyId }),
          },
          flags,
        );
      } else process.stdout.write(text);
      return 0;
    }
    return await reconcileNow(db, typeof flags.tenant === 'string' ? flags.tenant : null, flags, env);
  } finally {
    await database.close();
  }
}

async function reconcileNow(
  db: Awaited<ReturnType<typeof openConfiguredDatabase>>['db'],
  only: string | null,
  flags: Flags,
  env: ReturnType<typeof readEnv>,
): Promise<number> {
  const log = createLogger({ level: env.LOG_LEVEL });
  const moneyMovers = await startMoneyMovers({ ...env, IDEM_WORKER_IN_PROCESS: false }, db, log, {
    embedded: false,
  });
  try {
    const ranBy = `cli:${userInfo().username}`;
    const ctx = {
      db,
      rails: moneyMovers.rails,
      log,
      workerId: 'cli-reconcile',
      leaseMs: env.IDEM_WORKER_LEASE_MS,
      batchSize: 20,
      reorgWindowSeconds: 3_600,
      unknownEscalateAfterMs: env.IDEM_UNKNOWN_ESCALATE_AFTER_MS,
      notSentConfirmIntervalMs: env.IDEM_NOT_SENT_CONFIRM_INTERVAL_MS,
      escalationOwner: env.IDEM_ESCALATION_OWNER,
      now: Date.now,
    };
    const tenants = only ? [only] : await allTenantIds(db);
    // A shared custodian account is observed once for all the tenants of this command.
    const accountPasses = new Map<string, Promise<CustodianAccountPass>>();
    const results: { tenantId: string; findings: number; balance: Omit<BalanceRunReport, 'figures'> }[] = [];
    let troubled = false;
    for (const tenantId of tenants) {
      const transactions = await reconcileTenant(ctx, tenantId);
      const { figures: _figures, ...balance } = await reconcileBalances(ctx, tenantId, {
        ranBy,
        trigger: 'on_demand',
        accountPasses,
      });
      troubled ||=
        transactions.findings.length > 0 ||
        balance.result === null ||
        ['variance', 'incomplete'].includes(balance.result);
      results.push({ tenantId, findings: transactions.findings.length, balance });
    }
    print({ tenants: results }, flags);
    return troubled ? 3 : 0;
  } finally {
    await moneyMovers.stop();
  }
}

function verify(file: string | undefined, flags: Flags): number {
  if (!file) throw new UsageError('reconcile verify needs the report FILE');
  // A report signed by the signer service is checked with its public key (GET /report-key.json),
  // one signed with the tenant's outbound-webhook secret with that secret.
  const publicKey = typeof flags['public-key'] === 'string' ? readPublicKey(flags['public-key']) : null;
  const secret =
    publicKey ?? (typeof flags.secret === 'string' ? flags.secret : process.env.IDEM_REPORT_SECRET);
  if (!secret) throw new UsageError('--public-key FILE, or --secret (or IDEM_REPORT_SECRET), is required');
  try {
    const run = verifyRunReport(readFileSync(file, 'utf8'), secret);
    print(
      {
        verified: true,
        runId: run.runId,
        tenantId: run.tenantId,
        result: run.result,
        ranBy: run.ranBy,
        finishedAt: run.finishedAt,
        figures: run.figures.length,
      },
      flags,
    );
    return 0;
  } catch (error) {
    print(
      { verified: false, reason: error instanceof Error ? error.message.slice(0, 200) : 'unreadable' },
      flags,
    );
    return 1;
  }
}

/** A PEM public key, or the JSON the server publishes at /report-key.json (its publicKey field). */
function readPublicKey(file: string): string {
  const text = readFileSync(file, 'utf8');
  return text.trimStart().startsWith('{')
    ? String((JSON.parse(text) as { publicKey?: unknown }).publicKey)
    : text;
}

function print(result: Record<string, unknown>, flags: Flags): void {
  printResult(result, flags.json === true);
}
