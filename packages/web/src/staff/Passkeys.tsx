import { roleAllows } from '@idem/contracts';
import { Alert, Badge, Button, Group, Loader, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import {
  type PublicKeyCredentialCreationOptionsJSON,
  type RegistrationResponseJSON,
  startRegistration,
} from '@simplewebauthn/browser';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useStaff } from './session.tsx';

type Registered = Awaited<ReturnType<typeof api.staffPasskeys.register.mutate>>;

/**
 * The member's own passkeys (Security; docs/GOVERNANCE.md "Passkeys"). A new passkey is made on this
 * device and waits until another admin approves it (Proposals); then every withdrawal this member
 * approves is signed by it over the payload hash shown. A lone admin's first passkey, the tenant's
 * trust anchor, is active at once. Revoking one acts at once.
 */
export function Passkeys() {
  const queryClient = useQueryClient();
  const [label, setLabel] = useState('');
  const [registered, setRegistered] = useState<Registered | null>(null);
  const passkeys = useQuery({
    queryKey: ['staff', 'passkeys'],
    queryFn: () => api.staffPasskeys.list.query(),
  });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff', 'passkeys'] });
  const register = useMutation({
    mutationFn: async () => {
      const optionsJSON =
        (await api.staffPasskeys.registrationOptions.mutate()) as unknown as PublicKeyCredentialCreationOptionsJSON;
      const registration: RegistrationResponseJSON = await startRegistration({ optionsJSON });
      return api.staffPasskeys.register.mutate({
        label: label.trim(),
        registration: registration as Parameters<typeof api.staffPasskeys.register.mutate>[0]['registration'],
      });
    },
    onSuccess: (result) => {
      setRegistered(result);
      setLabel('');
      refresh();
    },
  });
  const revoke = useMutation({
    mutationFn: (credentialId: string) => api.staffPasskeys.revoke.mutate({ credentialId }),
    onSuccess: refresh,
  });
  return (
    <Stack>
      <Title order={1} size="h2">
        Passkeys
      </Title>
      <Text size="sm">
        A passkey lives on your own device (its fingerprint reader, face unlock or security key). Once it is
        active, every withdrawal you approve is signed by it over the exact payload hash you were shown, so
        nobody can approve in your name without your device, not even with access to the database. A new
        passkey is active once another admin approves it.
      </Text>
      <Group align="end">
        <TextInput
          label="Passkey name"
          description="To tell your devices apart, e.g. work laptop"
          value={label}
          onChange={(event) => setLabel(event.currentTarget.value)}
          maxLength={80}
        />
        <Button
          onClick={() => register.mutate()}
          loading={register.isPending}
          disabled={label.trim().length === 0}
          data-testid="passkey-register"
        >
          Register a passkey
        </Button>
      </Group>
      <ProblemAlert error={register.error} title="Passkey not registered" />
      <ProblemAlert error={revoke.error} title="Passkey not revoked" />
      {registered?.outcome === 'PROPOSED' ? (
        <Alert
          color="blue"
          role="status"
          title="Waiting for another admin"
          data-testid="passkey-proposed"
          data-proposal-id={registered.proposalId ?? ''}
        >
          Passkey “{registered.passkey.label}” is registered and sent to the other admins for approval (
          {registered.approvalsRequired} needed, under Proposals). It signs nothing until then.
        </Alert>
      ) : null}
      {registered?.outcome === 'APPLIED' ? (
        <Alert color="green" role="status" title="Passkey active" data-testid="passkey-active">
          Passkey “{registered.passkey.label}” is active: as your tenant’s only admin, it is the trust anchor
          the others’ passkeys are approved from.
        </Alert>
      ) : null}
      <TenantRequirement />
      <ProblemAlert error={passkeys.error} />
      {passkeys.isPending ? <Loader aria-label="Loading passkeys" /> : null}
      {passkeys.data && passkeys.data.passkeys.length === 0 ? <Text>No passkeys yet.</Text> : null}
      {passkeys.data && passkeys.data.passkeys.length > 0 ? (
        <Table striped data-testid="passkeys">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Registered</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th />
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {passkeys.data.passkeys.map((key) => (
              <Table.Tr key={key.credentialId} data-testid="passkey-row" data-label={key.label}>
                <Table.Td>{key.label}</Table.Td>
                <Table.Td>{formatTime(key.createdAt)}</Table.Td>
                <Table.Td>
                  <Badge
                    variant="filled"
                    color={key.revokedAt ? 'gray.7' : key.activatedAt ? 'teal.9' : 'yellow.9'}
                    data-testid="passkey-status"
                  >
                    {key.revokedAt
                      ? `revoked ${formatTime(key.revokedAt)}`
                      : key.activatedAt
                        ? 'active'
                        : 'awaiting approval'}
                  </Badge>
                </Table.Td>
                <Table.Td>
                  {key.revokedAt ? null : (
                    <Button
                      size="xs"
                      variant="light"
                      color="red"
                      loading={revoke.isPending}
                      onClick={() => revoke.mutate(key.credentialId)}
                    >
                      Revoke {key.label}
                    </Button>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      ) : null}
    </Stack>
  );
}

/**
 * Whether the tenant requires a passkey for every approval. An admin turns it on at once (a
 * tightening); turning it off is proposed to the other admins.
 */
function TenantRequirement() {
  const me = useStaff();
  const admin = roleAllows(me.role, 'administer');
  const queryClient = useQueryClient();
  const governance = useQuery({
    queryKey: ['staff', 'governance'],
    queryFn: () => api.staffConfig.governance.query(),
  });
  const set = useMutation({
    mutationFn: (requirePasskeyApprovals: boolean) =>
      api.staffConfig.setGovernance.mutate({ requirePasskeyApprovals }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['staff', 'governance'] }),
  });
  if (!governance.data) return <ProblemAlert error={governance.error} />;
  const required = governance.data.requirePasskeyApprovals;
  return (
    <Stack gap="xs" data-testid="passkey-requirement" data-required={String(required)}>
      <Text size="sm">
        {required
          ? 'Your organisation requires a passkey for every approval: without an active one you cannot approve.'
          : 'Your organisation does not yet require a passkey for every approval: members with an active passkey always approve with it.'}
      </Text>
      {admin ? (
        <Group>
          <Button
            size="xs"
            variant="default"
            loading={set.isPending}
            onClick={() => set.mutate(!required)}
            data-testid="passkey-requirement-toggle"
          >
            {required ? 'Propose to stop requiring passkeys' : 'Require a passkey for every approval'}
          </Button>
        </Group>
      ) : null}
      {set.data?.outcome === 'PROPOSED' ? (
        <Text size="sm" role="status">
          Sent to the other admins for approval.
        </Text>
      ) : null}
      <ProblemAlert error={set.error} title="Not changed" />
    </Stack>
  );
}
