import { Container, Loader, Stack, Text, Title } from '@mantine/core';
import { useEffect, useState } from 'react';
import { useLocation } from 'wouter';
import { api, setCsrfToken } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/**
 * The one-time link lands here with its token in the URL fragment. The token is taken out of the
 * address bar at once and exchanged, once, for the session cookie; then the account's screens open.
 * A module-level promise keeps a second render from spending the link twice.
 */
let exchange: Promise<unknown> | null = null;

export function CustomerStart() {
  const [, navigate] = useLocation();
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    const token = window.location.hash.slice(1);
    if (token) window.history.replaceState(null, '', '/customer/start');
    exchange ??= token
      ? api.customerSessions.exchange.mutate({ token }).then((me) => setCsrfToken(me.csrfToken))
      : Promise.reject(new Error('this page needs the link your exchange gave you'));
    exchange.then(
      () => navigate('/customer', { replace: true }),
      (failure: unknown) => setError(failure),
    );
  }, [navigate]);
  return (
    <Container size="xs" py="xl">
      <Stack>
        <Title order={1}>Opening your account</Title>
        {error ? (
          <>
            <ProblemAlert error={error} title="This link cannot be used" />
            <Text>Links work once and for a few minutes. Go back to the exchange and open it again.</Text>
          </>
        ) : (
          <Loader aria-label="Opening your account" />
        )}
      </Stack>
    </Container>
  );
}
