import { roleAllows } from '@idem/contracts';
import { Badge, Button, Code, Group, Loader, Table, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { SecretOnce } from './SecretOnce.tsx';
import { useStaff } from './session.tsx';

/**
 * The tenant's API keys: created with a label and shown once, listed with a prefix to
 * tell them apart and their last use (to the minute), revoked. Administrators change; operators read.
 */
export function ApiKeys() {
  const me = useStaff();
  const admin = roleAllows(me.role, 'administer');
  const queryClient = useQueryClient();
  const [label, setLabel] = useState('');
  const [shown, setShown] = useState<{ label: string; apiKey: string } | null>(null);
  const [confirming, setConfirming] = useState<string | null>(null);
  const keys = useQuery({ queryKey: ['staff', 'api-keys'], queryFn: () => api.staffConfig.apiKeys.query() });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff', 'api-keys'] });
  const create = useMutation({
    mutationFn: () => api.staffConfig.createApiKey.mutate({ label }),
    onSuccess: (created) => {
      setShown({ label: created.label, apiKey: created.apiKey });
      setLabel('');
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
        few seconds by every other.
      </Text>
      {admin ? (
        <form
          onSubmit={(event) => {
            event.preventDefault();
            create.mutate();
          }}
        >
          <Group align="end">
            <TextInput
              label="Label"
              description="What the key is for, e.g. payouts backend"
              value={label}
              onChange={(event) => setLabel(event.currentTarget.value)}
              maxLength={120}
              required
            />
            <Button type="submit" loading={create.isPending}>
              Create key
            </Button>
          </Group>
        </form>
      ) : null}
      <ProblemAlert error={create.error} title="Key not created" />
      <ProblemAlert error={revoke.error} title="Key not revoked" />
      {shown ? (
        <SecretOnce
          title={`New API key "${shown.label}"`}
          secret={shown.apiKey}
          onDone={() => setShown(null)}
        />
      ) : null}
      <ProblemAlert error={keys.error} />
      {keys.isPending ? <Loader aria-label="Loading keys" /> : null}
      {keys.data && keys.data.length === 0 ? <Text>No keys yet.</Text> : null}
      {keys.data && keys.data.length > 0 ? (
        <Table.ScrollContainer minWidth={720}>
          <Table striped data-testid="api-keys">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Label</Table.Th>
                <Table.Th>Prefix</Table.Th>
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
                  <Table.Td>{formatTime(key.createdAt)}</Table.Td>
                  <Table.Td>{key.lastUsedAt ? formatTime(key.lastUsedAt) : 'never'}</Table.Td>
                  <Table.Td>
                    <Badge variant="filled" color={key.revokedAt ? 'gray.7' : 'teal.9'}>
                      {key.revokedAt ? `revoked ${formatTime(key.revokedAt)}` : 'active'}
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
