import { Badge, Code, Loader, Paper, Stack, Table, Text, Timeline, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api.ts';
import { displayAmount, formatAge, formatTime, stateColor } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { RunbookActions } from './AttentionQueue.tsx';
import { useStaffAssets } from './shared.tsx';

/** One operation as staff see it, with its full history: actor, reason and evidence of each step. */
export function OperationDetail({ operationId }: { operationId: string }) {
  const detail = useQuery({
    queryKey: ['staff', 'operation', operationId],
    queryFn: () => api.staff.get.query({ operationId }),
  });
  const assets = useStaffAssets().data ?? [];
  if (detail.isPending) return <Loader aria-label="Loading operation" />;
  if (detail.error) {
    return (
      <Stack>
        <Title order={1} size="h2">
          Operation
        </Title>
        <ProblemAlert error={detail.error} />
      </Stack>
    );
  }
  const { operation, timeline } = detail.data;
  return (
    <Stack>
      <Title order={1} size="h2">
        {operation.kind} <Code>{operation.reference}</Code>
      </Title>
      <Paper withBorder p="sm">
        <Table variant="vertical" fz="sm">
          <Table.Tbody>
            <Table.Tr>
              <Table.Th w={170}>State</Table.Th>
              <Table.Td>
                <Badge color={stateColor(operation.state)} variant="filled">
                  {operation.state}
                </Badge>{' '}
                for {formatAge(operation.ageSeconds)}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Amount</Table.Th>
              <Table.Td ff="monospace">
                {displayAmount(operation.amountMinor, operation.asset, assets)}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Account</Table.Th>
              <Table.Td>{operation.accountId}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Destination</Table.Th>
              <Table.Td>
                <Code style={{ wordBreak: 'break-all' }}>{operation.destination ?? 'none'}</Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Transaction hash</Table.Th>
              <Table.Td>
                <Code style={{ wordBreak: 'break-all' }}>{operation.txHash ?? 'none yet'}</Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Payload hash</Table.Th>
              <Table.Td>
                <Code style={{ wordBreak: 'break-all' }}>{operation.payloadHash}</Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Owner</Table.Th>
              <Table.Td>{operation.owner ?? 'unassigned'}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Requested by</Table.Th>
              <Table.Td>{operation.requester}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Approvals</Table.Th>
              <Table.Td>
                {operation.approvals.length === 0
                  ? 'none'
                  : operation.approvals.map((entry) => `${entry.decision} by ${entry.approver}`).join('; ')}
              </Table.Td>
            </Table.Tr>
          </Table.Tbody>
        </Table>
      </Paper>
      {operation.state === 'UNKNOWN' || operation.state === 'FAILED_TERMINAL' ? (
        <RunbookActions item={operation} />
      ) : null}
      <Title order={2} size="h3">
        History
      </Title>
      <Timeline active={timeline.length - 1} bulletSize={18} lineWidth={2} data-testid="staff-timeline">
        {timeline.map((entry) => (
          <Timeline.Item key={entry.seq} title={`${entry.fromState ?? 'new'} → ${entry.toState}`}>
            <Text size="sm">{entry.reason}</Text>
            <Text size="xs" c="dimmed">
              {formatTime(entry.createdAt)} by {entry.actor}
            </Text>
            {entry.evidence ? (
              <Code block style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>
                {JSON.stringify(entry.evidence, null, 2)}
              </Code>
            ) : null}
          </Timeline.Item>
        ))}
      </Timeline>
    </Stack>
  );
}
