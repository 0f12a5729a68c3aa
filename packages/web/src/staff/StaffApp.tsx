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
} from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQuery } from '@tanstack/react-query';
import { useEffect } from 'react';
import { Redirect, useLocation } from 'wouter';
import { api, isSignedOut, setCsrfToken } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { MfaEnrol, MfaVerify, StepUpPrompt } from './Mfa.tsx';
import { StaffMenu } from './menu.tsx';
import { StaffRoutes } from './routes.tsx';
import { StaffSessionProvider } from './session.tsx';

/**
 * The operator's staff screens. The server enforces every role; the menu and the router follow the
 * same role table (./menu.tsx, ./routes.tsx), so a member sees and opens only their own screens.
 */
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
            <StaffMenu role={me.data.role} location={location} />
            {/* Served by the server itself, outside this app: a plain link, a full page load. */}
            <NavLink component="a" href="/docs" label="API reference" variant="subtle" />
          </AppShell.Section>
        </AppShell.Navbar>
        <AppShell.Main>
          <main>
            <Stack>
              <StaffRoutes />
            </Stack>
          </main>
        </AppShell.Main>
      </AppShell>
    </StaffSessionProvider>
  );
}
