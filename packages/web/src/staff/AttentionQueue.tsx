import type { AttentionQueueItem, StaffOperationView } from '@idem/contracts';
import {
  Badge,
  Button,
  Code,
  Group,
  Loader,
  Paper,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { displayAmount, formatAge, formatTime, stateColor } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { Pager, useCursorPages, useStaffAssets } from './shared.tsx';

type QueueState = 'BROADCAST' | 'UNKNOWN' | 'FAILED_TERMINAL';

const EXPLANATION: Record<QueueState, string> = {
  BROADCAST:
    'Sent and not yet mined. Funds stay held. A withdrawal past its network’s alert age has a fee too low or was dropped: open it to bump the fee or propose a cancel (Wallet nonces shows what it blocks).',
  UNKNOWN:
    'The outcome of a send is not known. Funds stay held. The worker reconciles against the custodian and the chain before anything is resent; a person resolves only with evidence.',
  FAILED_TERMINAL:
    'Stopped for a person: funds stay held. Investigate, then resolve with evidence or escalate to a named owner.',
};

/**
 * The BROADCAST, UNKNOWN or FAILED_TERMINAL queue, oldest in its state first, with the time in
 * that state (for BROADCAST, since it was broadcast), owner and the runbook actions.
 */
export function AttentionQueue({ state }: { state: QueueState }) {
  const pages = useCursorPages();
  const queue = useQuery({
    queryKey: ['staff', 'queue', state, pages.cursor ?? null],
    queryFn: () =>
      api.staff.queue.query({ state, limit: 25, ...(pages.cursor ? { cursor: pages.cursor } : {}) }),
  });
  return (
    <Stack>
      <Title order={1} size="h2">
        {state} queue
      </Title>
      <Text size="sm">{EXPLANATION[state]}</Text>
      {queue.isPending ? <Loader aria-label="Loading queue" /> : null}
      <ProblemAlert error={queue.error} />
      {queue.data?.items.length === 0 ? <Text>The queue is empty.</Text> : null}
      {queue.data && queue.data.items.length > 0 ? (
        <>
          <QueueTable items={queue.data.items} state={state} />
          {state === 'BROADCAST'
            ? null
            : queue.data.items.map((item) => <RunbookActions key={item.operationId} item={item} />)}
        </>
      ) : null}
      <Pager pages={pages} nextCursor={queue.data?.nextCursor} />
    </Stack>
  );
}

/**
 * The queue as a table. Age is the time since the withdrawal entered this state (its history, not
 * the last owner change); a BROADCAST one past the alert age this server knows for its network is
 * marked, in words as well as colour.
 */
function QueueTable({ items, state }: { items: AttentionQueueItem[]; state: QueueState }) {
  const assets = useStaffAssets().data ?? [];
  const sinceLabel = state === 'BROADCAST' ? 'Broadcast at' : `${state} since`;
  return (
    <Table.ScrollContainer minWidth={760}>
      <Table striped data-testid="operation-table">
        <Table.Caption>{`${state} withdrawals, longest in this state first`}</Table.Caption>
        <Table.Thead>
          <Table.Tr>
            <Table.Th scope="col">Withdrawal</Table.Th>
            <Table.Th scope="col">Account</Table.Th>
            <Table.Th scope="col">Amount</Table.Th>
            <Table.Th scope="col">State</Table.Th>
            <Table.Th scope="col">{sinceLabel}</Table.Th>
            <Table.Th scope="col">Age in state</Table.Th>
            <Table.Th scope="col">Owner</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {items.map((item) => {
            const pastAlert =
              item.alertAfterSeconds !== null && item.stateAgeSeconds >= item.alertAfterSeconds;
            return (
              <Table.Tr key={item.operationId} data-testid="queue-row" data-past-alert={pastAlert}>
                <Table.Td>
                  <Link href={`/operations/${item.operationId}`}>
                    <Code>{item.reference}</Code>
                  </Link>
                </Table.Td>
                <Table.Td>{item.accountId}</Table.Td>
                <Table.Td ff="monospace">{displayAmount(item.amountMinor, item.asset, assets)}</Table.Td>
                <Table.Td>
                  <Badge color={stateColor(item.state)} variant="filled" tt="none">
                    {item.state}
                  </Badge>
                </Table.Td>
                <Table.Td>{formatTime(item.stateSince)}</Table.Td>
                <Table.Td>
                  <Group gap={6} wrap="nowrap">
                    <Text size="sm" fw={pastAlert ? 700 : undefined} data-testid="state-age">
                      {formatAge(item.stateAgeSeconds)}
                    </Text>
                    {pastAlert && item.alertAfterSeconds !== null ? (
                      <Badge color="red.9" variant="filled" tt="none" data-testid="past-alert">
                        {`past alert age (${formatAge(item.alertAfterSeconds)})`}
                      </Badge>
                    ) : null}
                  </Group>
                </Table.Td>
                <Table.Td>{item.owner ?? 'unassigned'}</Table.Td>
              </Table.Tr>
            );
          })}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

/** Escalate (name an owner), saying what it records; resolving is proposed on the operation's page. */
export function RunbookActions({ item }: { item: StaffOperationView }) {
  const queryClient = useQueryClient();
  const [owner, setOwner] = useState('');
  const [ownerReason, setOwnerReason] = useState('');
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff'] });
  const escalate = useMutation({
    mutationFn: () =>
      api.staff.escalate.mutate({ operationId: item.operationId, owner, reason: ownerReason }),
    onSuccess: refresh,
  });
  return (
    <Paper withBorder p="sm" component="section" aria-label={`Actions for ${item.reference}`}>
      <Stack gap="xs">
        <Text fw={600}>
          Actions for <Code>{item.reference}</Code> (owner: {item.owner ?? 'unassigned'})
        </Text>
        <form
          onSubmit={(event: FormEvent) => {
            event.preventDefault();
            escalate.mutate();
          }}
        >
          <Group align="end" wrap="wrap">
            <TextInput
              label="Escalate to owner"
              value={owner}
              onChange={(e) => setOwner(e.currentTarget.value)}
              required
            />
            <TextInput
              label="Why"
              value={ownerReason}
              onChange={(e) => setOwnerReason(e.currentTarget.value)}
              required
            />
            <Button type="submit" variant="light" loading={escalate.isPending}>
              Escalate
            </Button>
          </Group>
          <Text size="xs" c="dimmed">
            Records in the history: the new owner, the previous owner, your reason, and you as the actor.
          </Text>
        </form>
        <ProblemAlert error={escalate.error} title="Escalation refused" />
        <Text size="sm">
          To resolve it, open the operation:{' '}
          <Link href={`/operations/${item.operationId}`}>propose a resolution</Link>. One staff member
          proposes, another with the approver role approves, and the chain or custodian must prove it.
        </Text>
      </Stack>
    </Paper>
  );
}
