import {
  AppShell,
  Burger,
  Button,
  Container,
  Group,
  Loader,
  NavLink,
  ScrollArea,
  Stack,
  Text,
  Title,
} from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQuery } from '@tanstack/react-query';
import { useEffect } from 'react';
import { Link, Redirect, Route, Switch, useLocation } from 'wouter';
import { api, isSignedOut, setCsrfToken } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { Adjustments } from './Adjustments.tsx';
import { ApiKeys } from './ApiKeys.tsx';
import { Approvals } from './Approvals.tsx';
import { AttentionQueue } from './AttentionQueue.tsx';
import { AuditLog } from './AuditLog.tsx';
import { BrandingSettings } from './BrandingSettings.tsx';
import { Breaks } from './Breaks.tsx';
import { Deliveries } from './Deliveries.tsx';
import { Inbox } from './Inbox.tsx';
import { MfaEnrol, MfaVerify, StepUpPrompt } from './Mfa.tsx';
import { NewWithdrawal } from './NewWithdrawal.tsx';
import { OperationDetail } from './OperationDetail.tsx';
import { Overview } from './Overview.tsx';
import { Proposals } from './Proposals.tsx';
import { Reconciliation } from './Reconciliation.tsx';
import { RiskRules } from './RiskRules.tsx';
import { Search } from './Search.tsx';
import { StaffSessionProvider } from './session.tsx';
import { Team } from './Team.tsx';
import { WalletNonces } from './WalletNonces.tsx';
import { WebhookEndpoints } from './WebhookEndpoints.tsx';
import { Withdrawals } from './Withdrawals.tsx';

const SECTIONS = [
  { href: '/overview', label: 'Overview' },
  { href: '/withdrawals', label: 'Withdrawals' },
  { href: '/approvals', label: 'Approval queue' },
  { href: '/proposals', label: 'Proposals' },
  { href: '/broadcast', label: 'BROADCAST queue' },
  { href: '/unknown', label: 'UNKNOWN queue' },
  { href: '/failed', label: 'FAILED_TERMINAL queue' },
  { href: '/nonces', label: 'Wallet nonces' },
  { href: '/inbox', label: 'Webhook inbox' },
  { href: '/deliveries', label: 'Outbound webhooks' },
  { href: '/breaks', label: 'Reconciliation breaks' },
  { href: '/reconciliation', label: 'Balance reconciliation' },
  { href: '/search', label: 'Search' },
  { href: '/withdraw', label: 'New withdrawal' },
  { href: '/adjustments', label: 'Adjustments and credits' },
  { href: '/branding', label: 'Branding' },
  { href: '/audit', label: 'Audit log' },
  { href: '/api-keys', label: 'API keys' },
  { href: '/endpoints', label: 'Webhook endpoints' },
  { href: '/risk-rules', label: 'Risk rules' },
  { href: '/team', label: 'Team' },
];

/** The operator's staff screens. The server enforces every role; the screens only follow it. */
export function StaffApp() {
  const me = useQuery({ queryKey: ['staff', 'me'], queryFn: () => api.staffAuth.me.query() });
  const [location] = useLocation();
  const [opened, { toggle, close }] = useDisclosure(false);
  const signOut = useMutation({
    mutationFn: () => api.staffAuth.signOut.mutate(),
    onSettled: () => window.location.assign(`/staff/login?tenant=${me.data?.tenantId ?? ''}`),
  });
  useEffect(() => {
    if (me.data) setCsrfToken(me.data.csrfToken);
  }, [me.data]);
  // Navigating closes the phone-sized menu.
  // biome-ignore lint/correctness/useExhaustiveDependencies: location is the trigger, not an input
  useEffect(() => close(), [location, close]);

  if (me.isPending) return <Loader m="xl" aria-label="Loading" />;
  if (me.error) {
    if (isSignedOut(me.error)) return <Redirect to="~/staff/login" />;
    return (
      <Container py="xl">
        <ProblemAlert error={me.error} />
      </Container>
    );
  }
  // TOTP before anything else where the server requires it: enrol, or enter the code.
  if (me.data.mfa.state === 'enrol') return <MfaEnrol onSignOut={() => signOut.mutate()} />;
  if (me.data.mfa.state === 'verify') return <MfaVerify onSignOut={() => signOut.mutate()} />;
  return (
    <StaffSessionProvider me={me.data}>
      <StepUpPrompt />
      <AppShell
        header={{ height: 56 }}
        navbar={{ width: 240, breakpoint: 'sm', collapsed: { mobile: !opened } }}
        padding="md"
      >
        <AppShell.Header>
          <Group h="100%" px="md" justify="space-between" wrap="nowrap">
            <Group wrap="nowrap">
              <Burger
                opened={opened}
                onClick={toggle}
                hiddenFrom="sm"
                size="sm"
                aria-label="Toggle navigation"
              />
              <Text fw={700}>Idem staff</Text>
            </Group>
            <Group gap="xs" wrap="nowrap">
              <Text size="sm" visibleFrom="xs" data-testid="signed-in-as">
                {me.data.email} ({me.data.role})
              </Text>
              <Button size="xs" variant="default" onClick={() => signOut.mutate()}>
                Sign out
              </Button>
            </Group>
          </Group>
        </AppShell.Header>
        <AppShell.Navbar p="xs" component="nav" aria-label="Staff sections">
          {/* The sections outgrow a laptop's height: the menu scrolls on its own. */}
          <AppShell.Section grow component={ScrollArea}>
            {SECTIONS.map((section) => (
              <NavLink
                key={section.href}
                component={Link}
                href={section.href}
                label={section.label}
                // Filled: white on the primary shade reads at AA contrast, hovered or not.
                variant="filled"
                active={location === section.href}
                aria-current={location === section.href ? 'page' : undefined}
              />
            ))}
            {/* Served by the server itself, outside this app: a plain link, a full page load. */}
            <NavLink component="a" href="/docs" label="API reference" variant="subtle" />
          </AppShell.Section>
        </AppShell.Navbar>
        <AppShell.Main>
          <main>
            <Stack>
              <Switch>
                <Route path="/overview" component={Overview} />
                <Route path="/withdrawals" component={Withdrawals} />
                <Route path="/approvals" component={Approvals} />
                <Route path="/broadcast">
                  <AttentionQueue state="BROADCAST" />
                </Route>
                <Route path="/nonces" component={WalletNonces} />
                <Route path="/unknown">
                  <AttentionQueue state="UNKNOWN" />
                </Route>
                <Route path="/failed">
                  <AttentionQueue state="FAILED_TERMINAL" />
                </Route>
                <Route path="/inbox" component={Inbox} />
                <Route path="/deliveries" component={Deliveries} />
                <Route path="/audit" component={AuditLog} />
                <Route path="/breaks" component={Breaks} />
                <Route path="/reconciliation" component={Reconciliation} />
                <Route path="/search" component={Search} />
                <Route path="/withdraw" component={NewWithdrawal} />
                <Route path="/proposals" component={Proposals} />
                <Route path="/adjustments" component={Adjustments} />
                <Route path="/branding" component={BrandingSettings} />
                <Route path="/api-keys" component={ApiKeys} />
                <Route path="/endpoints" component={WebhookEndpoints} />
                <Route path="/risk-rules" component={RiskRules} />
                <Route path="/team" component={Team} />
                <Route path="/operations/:operationId">
                  {(params) => <OperationDetail operationId={params.operationId} />}
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
            </Stack>
          </main>
        </AppShell.Main>
      </AppShell>
    </StaffSessionProvider>
  );
}
