import { assetsRouter } from './routers/assets.ts';
import { balancesRouter } from './routers/balances.ts';
import { brandingRouter } from './routers/branding.ts';
import { customerRouter } from './routers/customer.ts';
import { customerSessionsRouter } from './routers/customer-sessions.ts';
import { depositsRouter } from './routers/deposits.ts';
import { staffAuditRouter } from './routers/staff-audit.ts';
import { staffAuthRouter } from './routers/staff-auth.ts';
import { staffConfigRouter } from './routers/staff-config.ts';
import { staffConsoleRouter } from './routers/staff-console.ts';
import { staffFreezeRouter } from './routers/staff-freeze.ts';
import { staffOperationsRouter } from './routers/staff-operations.ts';
import { staffOverviewRouter } from './routers/staff-overview.ts';
import { staffPasskeysRouter } from './routers/staff-passkeys.ts';
import { staffProposalsRouter } from './routers/staff-proposals.ts';
import { staffReconciliationRouter } from './routers/staff-reconciliation.ts';
import { staffTeamRouter } from './routers/staff-team.ts';
import { withdrawalsRouter } from './routers/withdrawals.ts';
import { router } from './trpc.ts';

/** Names to procedures; each procedure lives in its router file with its schemas. */
export const appRouter = router({
  withdrawals: withdrawalsRouter,
  deposits: depositsRouter,
  balances: balancesRouter,
  assets: assetsRouter,
  customerSessions: customerSessionsRouter,
  // The web screens (docs/WEB.md): cookie sessions, CSRF-checked mutations.
  customer: customerRouter,
  staffAuth: staffAuthRouter,
  staff: staffOperationsRouter,
  staffAudit: staffAuditRouter,
  staffConsole: staffConsoleRouter,
  // What an operator looks at first: the Overview and the Withdrawals explorer.
  staffOverview: staffOverviewRouter,
  // Four eyes for every manual money path: resolutions, adjustments, manual credits.
  staffProposals: staffProposalsRouter,
  // Balance-level reconciliation: run now, runs and figures, CSV and signed JSON exports.
  staffReconciliation: staffReconciliationRouter,
  branding: brandingRouter,
  // Configuration that needed the CLI: API keys, webhook endpoints, risk rules (administrators).
  staffConfig: staffConfigRouter,
  // The Team screen: invitations, roles, disabling (admins; step-up).
  staffTeam: staffTeamRouter,
  // A member's own passkeys (WebAuthn): registered inactive, activated by another admin's approval.
  staffPasskeys: staffPasskeysRouter,
  // The freeze switch: one operator freezes at once; lifting needs another admin.
  staffFreeze: staffFreezeRouter,
});

export type AppRouter = typeof appRouter;
