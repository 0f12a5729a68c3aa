import { Button, Container, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { useLocation, useSearchParams } from 'wouter';
import { api, problemOf, setCsrfToken } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/**
 * Staff sign-in: organisation slug, e-mail and password. The organisation may be left
 * empty when the e-mail belongs to one organisation only; the server asks for it otherwise.
 * `?org=<slug>` fills it in; an older `?tenant=<id>` link still works (the id is sent instead).
 */
export function StaffLogin() {
  const [params] = useSearchParams();
  const [, navigate] = useLocation();
  const tenantId = params.get('tenant');
  const [organisation, setOrganisation] = useState(params.get('org') ?? '');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signIn = useMutation({
    mutationFn: () =>
      api.staffAuth.signIn.mutate({
        email,
        password,
        ...(organisation.trim() ? { organisation: organisation.trim() } : tenantId ? { tenantId } : {}),
      }),
    onSuccess: (me) => {
      setCsrfToken(me.csrfToken);
      navigate('/staff/overview');
    },
  });
  const needsOrganisation = signIn.error ? problemOf(signIn.error).code === 'ORGANISATION_REQUIRED' : false;
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    signIn.mutate();
  };
  return (
    <Container size={420} py="xl">
      <main>
        <Paper withBorder p="lg">
          <form onSubmit={onSubmit}>
            <Stack>
              <Title order={1} size="h2">
                Staff sign-in
              </Title>
              <Text size="sm" c="dimmed">
                For the operator's staff. Customers open their screens from the exchange.
              </Text>
              <TextInput
                label="Organisation"
                description={
                  tenantId && !organisation
                    ? 'Given by your sign-in link; or type your organisation'
                    : 'Your organisation’s short name, e.g. acme-exchange (may be left empty if you belong to one only)'
                }
                value={organisation}
                onChange={(event) => setOrganisation(event.currentTarget.value)}
                required={needsOrganisation}
                error={needsOrganisation ? 'Enter your organisation' : undefined}
                autoComplete="organization"
              />
              <TextInput
                label="E-mail"
                type="email"
                value={email}
                onChange={(event) => setEmail(event.currentTarget.value)}
                required
                autoComplete="username"
              />
              <PasswordInput
                label="Password"
                value={password}
                onChange={(event) => setPassword(event.currentTarget.value)}
                required
                autoComplete="current-password"
              />
              <ProblemAlert error={signIn.error} title="Sign-in failed" />
              <Button type="submit" loading={signIn.isPending}>
                Sign in
              </Button>
            </Stack>
          </form>
        </Paper>
      </main>
    </Container>
  );
}
