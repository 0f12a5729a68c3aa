import { Button, Container, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { useLocation, useSearchParams } from 'wouter';
import { api, setCsrfToken } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

export function StaffLogin() {
  const [params] = useSearchParams();
  const [, navigate] = useLocation();
  const [tenantId, setTenantId] = useState(params.get('tenant') ?? '');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signIn = useMutation({
    mutationFn: () => api.staffAuth.signIn.mutate({ tenantId: tenantId.trim(), email, password }),
    onSuccess: (me) => {
      setCsrfToken(me.csrfToken);
      navigate('/staff/overview');
    },
  });
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
                label="Organisation id"
                description="Your tenant id, as given by your administrator"
                value={tenantId}
                onChange={(event) => setTenantId(event.currentTarget.value)}
                required
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
