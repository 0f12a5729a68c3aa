import { Button, Container, Paper, PasswordInput, Stack, Text, Title } from '@mantine/core';
import { useMutation } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { useLocation } from 'wouter';
import { api, setCsrfToken } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/**
 * The invitation link's page (I14-TEAM): `/staff/invite#<token>`. The token sits in the
 * fragment (never in a server log or a Referer) and is removed from the address bar at once; the
 * person chooses their password, which uses the invitation and signs them in.
 */
export function StaffInvite() {
  const [, navigate] = useLocation();
  const [token] = useState(() => {
    const fromHash = window.location.hash.slice(1);
    if (fromHash) window.history.replaceState(null, '', window.location.pathname);
    return fromHash;
  });
  const [password, setPassword] = useState('');
  const [again, setAgain] = useState('');
  const accept = useMutation({
    mutationFn: () => api.staffAuth.acceptInvitation.mutate({ token, password }),
    onSuccess: (me) => {
      setCsrfToken(me.csrfToken);
      navigate('/staff/approvals');
    },
  });
  const mismatch = again !== '' && again !== password;
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    if (!mismatch) accept.mutate();
  };
  return (
    <Container size={420} py="xl">
      <main>
        <Paper withBorder p="lg">
          <form onSubmit={onSubmit}>
            <Stack>
              <Title order={1} size="h2">
                Join your team
              </Title>
              <Text size="sm">Choose your password (at least 12 characters). This link works once.</Text>
              <PasswordInput
                label="New password"
                value={password}
                onChange={(event) => setPassword(event.currentTarget.value)}
                minLength={12}
                required
                autoComplete="new-password"
              />
              <PasswordInput
                label="Repeat the password"
                value={again}
                onChange={(event) => setAgain(event.currentTarget.value)}
                error={mismatch ? 'The two passwords differ' : undefined}
                required
                autoComplete="new-password"
              />
              <ProblemAlert error={accept.error} title="Not accepted" />
              <Button type="submit" loading={accept.isPending} disabled={!token}>
                Set password and sign in
              </Button>
            </Stack>
          </form>
        </Paper>
      </main>
    </Container>
  );
}
