import {
  Alert,
  Anchor,
  Button,
  Code,
  Container,
  Group,
  Image,
  List,
  Modal,
  Paper,
  Stack,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, type ReactNode, useEffect, useRef, useState } from 'react';
import { api, setStepUpPrompt } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/**
 * TOTP screens (I14-MFA): enrolment (QR code, secret, then the recovery codes once), the
 * code asked after the password, and the step-up prompt before approving, resolving, cancelling
 * and configuration. The server decides when each is needed (`me.mfa.state`, STEP_UP_REQUIRED).
 */

function CodeInput({
  value,
  onChange,
  label,
}: {
  value: string;
  onChange(code: string): void;
  label: string;
}) {
  return (
    <TextInput
      label={label}
      value={value}
      onChange={(event) => onChange(event.currentTarget.value.replace(/\s/g, ''))}
      inputMode="numeric"
      autoComplete="one-time-code"
      maxLength={6}
      required
      data-autofocus
    />
  );
}

function Frame({ title, children }: { title: string; children: ReactNode }) {
  return (
    <Container size={480} py="xl">
      <main>
        <Paper withBorder p="lg">
          <Stack>
            <Title order={1} size="h2">
              {title}
            </Title>
            {children}
          </Stack>
        </Paper>
      </main>
    </Container>
  );
}

/** Enrolment: shown until the member confirms a code; their role requires it in this organisation. */
export function MfaEnrol({ onSignOut }: { onSignOut(): void }) {
  const queryClient = useQueryClient();
  const [code, setCode] = useState('');
  const start = useMutation({ mutationFn: () => api.staffAuth.mfaEnrolStart.mutate() });
  const confirm = useMutation({
    mutationFn: () => api.staffAuth.mfaEnrolConfirm.mutate({ code }),
  });
  const started = useRef(false);
  useEffect(() => {
    // Once per screen: each start replaces the pending secret.
    if (started.current) return;
    started.current = true;
    start.mutate();
  }, [start]);
  if (confirm.data) {
    return (
      <Frame title="Save your recovery codes">
        <Text>
          Each code signs you in once if you lose your authenticator. They are shown only now: store them
          somewhere safe.
        </Text>
        <List data-testid="recovery-codes" spacing={4}>
          {confirm.data.recoveryCodes.map((recovery) => (
            <List.Item key={recovery}>
              <Code>{recovery}</Code>
            </List.Item>
          ))}
        </List>
        <Button onClick={() => void queryClient.invalidateQueries({ queryKey: ['staff', 'me'] })}>
          I have saved them, continue
        </Button>
      </Frame>
    );
  }
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    confirm.mutate();
  };
  return (
    <Frame title="Set up your authenticator">
      <Text size="sm">
        Your role needs a second factor. Scan the code with an authenticator app (or type the secret), then
        enter the 6-digit code it shows.
      </Text>
      <ProblemAlert error={start.error} />
      {start.data ? (
        <>
          <Image
            src={start.data.qrDataUrl}
            alt="QR code of your authenticator secret"
            w={200}
            h={200}
            data-testid="mfa-qr"
            data-otpauth={start.data.otpauthUrl}
          />
          <Text size="sm">
            Secret: <Code data-testid="mfa-secret">{start.data.secret}</Code>
          </Text>
        </>
      ) : null}
      <form onSubmit={onSubmit}>
        <Stack>
          <CodeInput label="Code from your authenticator" value={code} onChange={setCode} />
          <ProblemAlert error={confirm.error} title="Not confirmed" />
          <Group>
            <Button type="submit" loading={confirm.isPending} disabled={!start.data}>
              Confirm
            </Button>
            <Anchor component="button" type="button" onClick={onSignOut}>
              Sign out
            </Anchor>
          </Group>
        </Stack>
      </form>
    </Frame>
  );
}

/** After the password: the code from the authenticator, or a recovery code. */
export function MfaVerify({ onSignOut }: { onSignOut(): void }) {
  const queryClient = useQueryClient();
  const [code, setCode] = useState('');
  const [recovery, setRecovery] = useState(false);
  const verify = useMutation({
    mutationFn: () =>
      api.staffAuth.mfaVerify.mutate(recovery ? { recoveryCode: code } : { code: code.replace(/\D/g, '') }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['staff', 'me'] }),
  });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    verify.mutate();
  };
  return (
    <Frame title="Enter your code">
      <form onSubmit={onSubmit}>
        <Stack>
          {recovery ? (
            <TextInput
              label="Recovery code"
              value={code}
              onChange={(event) => setCode(event.currentTarget.value)}
              autoComplete="off"
              required
            />
          ) : (
            <CodeInput label="Code from your authenticator" value={code} onChange={setCode} />
          )}
          <ProblemAlert error={verify.error} title="Not verified" />
          <Group>
            <Button type="submit" loading={verify.isPending}>
              Verify
            </Button>
            <Anchor component="button" type="button" onClick={() => setRecovery(!recovery)}>
              {recovery ? 'Use the authenticator instead' : 'Use a recovery code'}
            </Anchor>
            <Anchor component="button" type="button" onClick={onSignOut}>
              Sign out
            </Anchor>
          </Group>
        </Stack>
      </form>
    </Frame>
  );
}

/**
 * The step-up prompt: registered with the API client while the staff screens are open; a mutation
 * refused with STEP_UP_REQUIRED opens it, and is sent again once a fresh code is verified.
 */
export function StepUpPrompt() {
  const [pending, setPending] = useState<((verified: boolean) => void) | null>(null);
  const [code, setCode] = useState('');
  const verify = useMutation({ mutationFn: () => api.staffAuth.mfaVerify.mutate({ code }) });
  useEffect(() => {
    setStepUpPrompt(
      () =>
        new Promise<boolean>((resolve) => {
          setCode('');
          verify.reset();
          setPending(() => resolve);
        }),
    );
    return () => setStepUpPrompt(null);
  }, [verify.reset]);
  const finish = (verified: boolean) => {
    pending?.(verified);
    setPending(null);
  };
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    verify.mutate(undefined, { onSuccess: () => finish(true) });
  };
  return (
    <Modal
      opened={pending !== null}
      onClose={() => finish(false)}
      title="Confirm it is you"
      closeButtonProps={{ 'aria-label': 'Cancel' }}
    >
      <form onSubmit={onSubmit} data-testid="step-up">
        <Stack>
          <Alert color="blue" variant="light">
            This action needs a fresh code from your authenticator.
          </Alert>
          <CodeInput label="Code from your authenticator" value={code} onChange={setCode} />
          <ProblemAlert error={verify.error} title="Not verified" />
          <Group>
            <Button type="submit" loading={verify.isPending}>
              Verify and continue
            </Button>
            <Button variant="default" onClick={() => finish(false)}>
              Cancel
            </Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}
