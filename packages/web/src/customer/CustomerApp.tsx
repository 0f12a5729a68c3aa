import { Anchor, AppShell, Container, Group, Image, Loader, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useEffect } from 'react';
import { Link, Route, Switch } from 'wouter';
import { api, isSignedOut, setCsrfToken } from '../api.ts';
import { useSetBrand } from '../ui/brand.tsx';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { readableTextOn } from '../ui/theme.ts';
import { Balances } from './Balances.tsx';
import { History } from './History.tsx';
import { Withdraw } from './Withdraw.tsx';
import { WithdrawalDetail } from './WithdrawalDetail.tsx';

/** The customer screens, under the tenant's brand, for the one account of the session. */
export function CustomerApp() {
  const me = useQuery({ queryKey: ['customer', 'me'], queryFn: () => api.customer.me.query() });
  const setBrand = useSetBrand();
  useEffect(() => {
    if (me.data) {
      setCsrfToken(me.data.csrfToken);
      setBrand(me.data.branding.primaryColor);
      document.title = me.data.branding.displayName;
    }
  }, [me.data, setBrand]);

  if (me.isPending) {
    return (
      <Container py="xl">
        <Loader aria-label="Loading" />
      </Container>
    );
  }
  if (me.error) {
    return (
      <Container size="sm" py="xl">
        <Stack>
          <Title order={1}>{isSignedOut(me.error) ? 'Your session has ended' : 'Something went wrong'}</Title>
          {isSignedOut(me.error) ? (
            <Text>
              For your security, sessions are short. Go back to the exchange and open this page again.
            </Text>
          ) : null}
          <ProblemAlert error={me.error} />
        </Stack>
      </Container>
    );
  }
  const { branding, accountId } = me.data;
  const onBrand = readableTextOn(branding.primaryColor);
  return (
    <AppShell header={{ height: 64 }} padding="md">
      <AppShell.Header bg={branding.primaryColor} c={onBrand} data-testid="brand-header">
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="sm" wrap="nowrap">
            {branding.logoUrl ? (
              <Image src={branding.logoUrl} alt={`${branding.displayName} logo`} h={36} w="auto" />
            ) : null}
            <Text fw={700} size="lg" data-testid="brand-name">
              {branding.displayName}
            </Text>
          </Group>
          <nav aria-label="Account">
            <Group gap="md" wrap="nowrap">
              <Anchor component={Link} href="/" c={onBrand} underline="always">
                Wallet
              </Anchor>
              <Anchor component={Link} href="/history" c={onBrand} underline="always">
                History
              </Anchor>
            </Group>
          </nav>
        </Group>
      </AppShell.Header>
      <AppShell.Main>
        <Container size="md" px={0}>
          <main>
            <Text size="sm" c="dimmed" mb="sm">
              Account {accountId}
            </Text>
            <Switch>
              <Route path="/">
                <Stack gap="xl">
                  <Balances />
                  <Withdraw tenantId={me.data.tenantId} accountId={accountId} />
                </Stack>
              </Route>
              <Route path="/history" component={History} />
              <Route path="/withdrawals/:operationId">
                {(params) => <WithdrawalDetail operationId={params.operationId} />}
              </Route>
            </Switch>
          </main>
        </Container>
      </AppShell.Main>
    </AppShell>
  );
}
