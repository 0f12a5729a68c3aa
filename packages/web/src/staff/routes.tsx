import { roleSeesScreen, type StaffScreen } from '@idem/contracts';
import { Alert, Anchor, Title } from '@mantine/core';
import type { ReactNode } from 'react';
import { Link, Redirect, Route, Switch } from 'wouter';
import { Adjustments } from './Adjustments.tsx';
import { ApiKeys } from './ApiKeys.tsx';
import { Approvals } from './Approvals.tsx';
import { AttentionQueue } from './AttentionQueue.tsx';
import { AuditLog } from './AuditLog.tsx';
import { BrandingSettings } from './BrandingSettings.tsx';
import { Breaks } from './Breaks.tsx';
import { Deliveries } from './Deliveries.tsx';
import { Freeze } from './Freeze.tsx';
import { Inbox } from './Inbox.tsx';
import { NewWithdrawal } from './NewWithdrawal.tsx';
import { OperationDetail } from './OperationDetail.tsx';
import { Overview } from './Overview.tsx';
import { Passkeys } from './Passkeys.tsx';
import { ProposalPage, Proposals } from './Proposals.tsx';
import { Reconciliation } from './Reconciliation.tsx';
import { RiskRules } from './RiskRules.tsx';
import { Search } from './Search.tsx';
import { useStaff } from './session.tsx';
import { Team } from './Team.tsx';
import { WalletNonces } from './WalletNonces.tsx';
import { WebhookEndpoints } from './WebhookEndpoints.tsx';
import { Withdrawals } from './Withdrawals.tsx';

/**
 * A screen this role may not use, opened by its address: said plainly, and nothing is asked of the
 * server (the screen is not rendered), so no refusal reaches the browser's console.
 */
function NotAvailable() {
  const me = useStaff();
  return (
    <Alert color="gray" title="Not available" data-testid="not-available">
      This screen is not available to your role ({me.role}). Ask an admin if your work needs it.{' '}
      <Anchor component={Link} href="/overview">
        Back to the overview
      </Anchor>
    </Alert>
  );
}

/** Renders the screen only for a role that may use it. */
function Allowed({ screen, children }: { screen: StaffScreen; children: ReactNode }) {
  const me = useStaff();
  return roleSeesScreen(me.role, screen) ? children : <NotAvailable />;
}

/** Every staff screen by address, each behind its role check. */
export function StaffRoutes() {
  return (
    <Switch>
      <Route path="/passkeys">
        <Allowed screen="passkeys">
          <Passkeys />
        </Allowed>
      </Route>
      <Route path="/overview">
        <Allowed screen="overview">
          <Overview />
        </Allowed>
      </Route>
      <Route path="/withdrawals">
        <Allowed screen="withdrawals">
          <Withdrawals />
        </Allowed>
      </Route>
      <Route path="/approvals">
        <Allowed screen="approvals">
          <Approvals />
        </Allowed>
      </Route>
      <Route path="/broadcast">
        <Allowed screen="broadcast">
          <AttentionQueue state="BROADCAST" />
        </Allowed>
      </Route>
      <Route path="/nonces">
        <Allowed screen="nonces">
          <WalletNonces />
        </Allowed>
      </Route>
      <Route path="/unknown">
        <Allowed screen="unknown">
          <AttentionQueue state="UNKNOWN" />
        </Allowed>
      </Route>
      <Route path="/failed">
        <Allowed screen="failed">
          <AttentionQueue state="FAILED_TERMINAL" />
        </Allowed>
      </Route>
      <Route path="/inbox">
        <Allowed screen="inbox">
          <Inbox />
        </Allowed>
      </Route>
      <Route path="/deliveries">
        <Allowed screen="deliveries">
          <Deliveries />
        </Allowed>
      </Route>
      <Route path="/audit">
        <Allowed screen="audit">
          <AuditLog />
        </Allowed>
      </Route>
      <Route path="/breaks">
        <Allowed screen="breaks">
          <Breaks />
        </Allowed>
      </Route>
      <Route path="/reconciliation">
        <Allowed screen="reconciliation">
          <Reconciliation />
        </Allowed>
      </Route>
      <Route path="/search">
        <Allowed screen="search">
          <Search />
        </Allowed>
      </Route>
      <Route path="/withdraw">
        <Allowed screen="withdraw">
          <NewWithdrawal />
        </Allowed>
      </Route>
      <Route path="/proposals">
        <Allowed screen="proposals">
          <Proposals />
        </Allowed>
      </Route>
      <Route path="/proposals/:proposalId">
        {(params) => (
          <Allowed screen="proposals">
            <ProposalPage proposalId={params.proposalId} />
          </Allowed>
        )}
      </Route>
      <Route path="/adjustments">
        <Allowed screen="adjustments">
          <Adjustments />
        </Allowed>
      </Route>
      <Route path="/branding">
        <Allowed screen="branding">
          <BrandingSettings />
        </Allowed>
      </Route>
      <Route path="/api-keys">
        <Allowed screen="apiKeys">
          <ApiKeys />
        </Allowed>
      </Route>
      <Route path="/endpoints">
        <Allowed screen="endpoints">
          <WebhookEndpoints />
        </Allowed>
      </Route>
      <Route path="/freeze">
        <Allowed screen="freeze">
          <Freeze />
        </Allowed>
      </Route>
      <Route path="/risk-rules">
        <Allowed screen="riskRules">
          <RiskRules />
        </Allowed>
      </Route>
      <Route path="/team">
        <Allowed screen="team">
          <Team />
        </Allowed>
      </Route>
      <Route path="/operations/:operationId">
        {(params) => (
          <Allowed screen="operation">
            <OperationDetail operationId={params.operationId} />
          </Allowed>
        )}
      </Route>
      <Route path="/">
        <Redirect to="/overview" />
      </Route>
      <Route>
        <Title order={1} size="h2">
          Choose a section
        </Title>
      </Route>
    </Switch>
  );
}
