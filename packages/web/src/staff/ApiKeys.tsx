import { type ApiKeyView, roleAllows } from '@idem/contracts';
import { Alert, Badge, Button, Code, Group, Loader, Table, Text, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { ApiKeyForm, type NewKey } from './ApiKeyForm.tsx';
import { SecretOnce } from './SecretOnce.tsx';
import { useStaff } from './session.tsx';

/** Who minted or widened a key, as the screen names them. */
function ownerText(actor: string | null, email: string | null): string {
  if (email) return email;
  if (actor === null) return 'unknown (minted before owners were recorded)';
  return actor;
}

/**
 * The tenant's API keys: created with a label, scopes and an expiry, and shown once; listed with a
 * prefix to tell them apart, their scopes, who minted and last widened them (four eyes refuses
 * those staff on what the key submits), expiry and last use (to the minute); revoked.
 * Administrators change; operators read. A key without an expiry is allowed and warned about.
 */
export function ApiKeys() {
  const me = useStaff();
  const admin = roleAllows(me.role, 'administer');
  const queryClient = useQueryClient();
  const [shown, setShown] = useState<{ label: string; apiKey: string; proposalId: string | null } | null>(
    null,
  );
  const [confirming, setConfirming] = useState<string | null>(null);
  const keys = useQuery({ queryKey: ['staff', 'api-keys'], queryFn: () => api.staffConfig.apiKeys.query() });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff', 'api-keys'] });
  const create = useMutation({
    mutationFn: (key: NewKey) => api.staffConfig.createApiKey.mutate(key),
    onSuccess: (created) => {
      setShown({ label: created.label, apiKey: created.apiKey, proposalId: created.proposalId });
      refresh();
    },
  });
  const revoke = useMutation({
    mutationFn: (keyId: string) => api.staffConfig.revokeApiKey.mutate({ keyId }),
    onSuccess: () => {
      setConfirming(null);
      refresh();
    },
  });
  return (
    <>
      <Title order={1} size="h2">
        API keys
      </Title>
      <Text size="sm">
        Your backend calls Idem with these keys. A revoked key is refused at once by this server, and within a
        few seconds by every other. A key may only do what its scopes allow. The staff member who created a
        key or last added a scope to it cannot approve a withdrawal the key submits. A new key, or a scope
        added to one, is active once another admin approves it and the waiting time has passed (Proposals).
      </Text>
      {admin ? <ApiKeyForm pending={create.isPending} onCreate={(key) => create.mutate(key)} /> : null}
      <ProblemAlert error={create.error} title="Key not created" />
      <ProblemAlert error={revoke.error} title="Key not revoked" />
      {shown ? (
        <SecretOnce
          title={
            shown.proposalId
              ? `New API key "${shown.label}": active once another admin approves`
              : `New API key "${shown.label}"`
          }
          secret={shown.apiKey}
          proposalId={shown.proposalId}
          onDone={() => setShown(null)}
        />
      ) : null}
      <ProblemAlert error={keys.error} />
      <NoExpiryWarning keys={keys.data ?? []} />
      {keys.isPending ? <Loader aria-label="Loading keys" /> : null}
      {keys.data && keys.data.length === 0 ? <Text>No keys yet.</Text> : null}
      {keys.data && keys.data.length > 0 ? (
        <Table.ScrollContainer minWidth={1100}>
          <Table striped data-testid="api-keys">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Label</Table.Th>
                <Table.Th>Prefix</Table.Th>
                <Table.Th>Scopes</Table.Th>
                <Table.Th>Owner</Table.Th>
                <Table.Th>Expires</Table.Th>
                <Table.Th>Created</Table.Th>
                <Table.Th>Last used</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {keys.data.map((key) => (
                <Table.Tr key={key.keyId} data-testid={`api-key-${key.label}`}>
                  <Table.Td>{key.label}</Table.Td>
                  <Table.Td>
                    <Code>{key.prefix}…</Code>
                  </Table.Td>
                  <Table.Td>
                    <Group gap={4}>
                      {key.scopes.map((scope) => (
                        <Code key={scope}>{scope}</Code>
                      ))}
                    </Group>
                  </Table.Td>
                  <KeyOwner keyView={key} />
                  <Table.Td>
                    {key.expiresAt ? (
                      formatTime(key.expiresAt)
                    ) : (
                      <Text size="sm" fw={700} c="red.9">
                        never expires
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>{formatTime(key.createdAt)}</Table.Td>
                  <Table.Td>{key.lastUsedAt ? formatTime(key.lastUsedAt) : 'never'}</Table.Td>
                  <Table.Td>
                    <Badge
                      variant="filled"
                      color={key.revokedAt ? 'gray.7' : key.activatedAt ? 'teal.9' : 'yellow.9'}
                    >
                      {key.revokedAt
                        ? `revoked ${formatTime(key.revokedAt)}`
                        : key.activatedAt
                          ? 'active'
                          : 'awaiting approval'}
                    </Badge>
                  </Table.Td>
                  <Table.Td>
                    {admin && !key.revokedAt ? (
                      confirming === key.keyId ? (
                        <Group gap="xs" wrap="nowrap">
                          <Button
                            size="xs"
                            color="red"
                            loading={revoke.isPending}
                            onClick={() => revoke.mutate(key.keyId)}
                          >
                            Confirm revoke {key.label}
                          </Button>
                          <Button size="xs" variant="default" onClick={() => setConfirming(null)}>
                            Keep
                          </Button>
                        </Group>
                      ) : (
                        <Button
                          size="xs"
                          variant="light"
                          color="red"
                          onClick={() => setConfirming(key.keyId)}
                        >
                          Revoke {key.label}
                        </Button>
                      )
                    ) : null}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      ) : null}
    </>
  );
}

function KeyOwner({ keyView }: { keyView: ApiKeyView }) {
  return (
    <Table.Td>
      <Text size="sm">{ownerText(keyView.createdBy, keyView.createdByEmail)}</Text>
      {keyView.widenedBy ? (
        <Text size="xs">
          widened by {ownerText(keyView.widenedBy, keyView.widenedByEmail)}
          {keyView.widenedAt ? ` ${formatTime(keyView.widenedAt)}` : ''}
        </Text>
      ) : null}
    </Table.Td>
  );
}

/** Active keys without an expiry work until someone revokes them: say so above the list. */
function NoExpiryWarning({ keys }: { keys: ApiKeyView[] }) {
  const forever = keys.filter((key) => !key.revokedAt && !key.expiresAt);
  if (forever.length === 0) return null;
  return (
    <Alert color="red.9" variant="outline" title="Keys that never expire" data-testid="no-expiry-warning">
      {forever.length === 1 ? 'One active key has' : `${forever.length} active keys have`} no expiry (
      {forever.map((key) => key.label).join(', ')}): it works until someone revokes it. Prefer keys that
      expire, and replace them before they do.
    </Alert>
  );
}
