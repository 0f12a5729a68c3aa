import type { OperationState } from '@idem/contracts';
import { Anchor, Code, Loader, Paper, Stack, Table, Text, Timeline, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { customerStateText, displayAmount, formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useCustomerBalances } from './Balances.tsx';

/** One of the account's withdrawals with its timeline; anything else is "not found". */
export function WithdrawalDetail({ operationId }: { operationId: string }) {
  const detail = useQuery({
    queryKey: ['customer', 'withdrawal', operationId],
    queryFn: () => api.customer.withdrawal.query({ operationId }),
    refetchInterval: 5_000,
  });
  const balances = useCustomerBalances();
  const assets = balances.data?.assets ?? [];
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="detail-title">
      <Stack>
        <Title order={2} id="detail-title" size="h3">
          Withdrawal
        </Title>
        {detail.isPending ? <Loader aria-label="Loading withdrawal" /> : null}
        <ProblemAlert error={detail.error} />
        {detail.data ? (
          <>
            <Text fw={700} data-testid="detail-state">
              {customerStateText(detail.data.withdrawal.state, detail.data.withdrawal.rejectionCode)}
            </Text>
            <Table variant="vertical" layout="fixed" withTableBorder>
              <Table.Tbody>
                <Table.Tr>
                  <Table.Th w={140}>Amount</Table.Th>
                  <Table.Td ff="monospace">
                    {displayAmount(detail.data.withdrawal.amountMinor, detail.data.withdrawal.asset, assets)}
                  </Table.Td>
                </Table.Tr>
                <Table.Tr>
                  <Table.Th>Destination</Table.Th>
                  <Table.Td>
                    <Code style={{ wordBreak: 'break-all' }}>{detail.data.withdrawal.destination}</Code>
                  </Table.Td>
                </Table.Tr>
                <Table.Tr>
                  <Table.Th>Network</Table.Th>
                  <Table.Td>{detail.data.withdrawal.network}</Table.Td>
                </Table.Tr>
                {detail.data.withdrawal.txHash ? (
                  <Table.Tr>
                    <Table.Th>Transaction</Table.Th>
                    <Table.Td>
                      <Code style={{ wordBreak: 'break-all' }}>{detail.data.withdrawal.txHash}</Code>
                    </Table.Td>
                  </Table.Tr>
                ) : null}
                <Table.Tr>
                  <Table.Th>Reference</Table.Th>
                  <Table.Td>
                    <Code style={{ wordBreak: 'break-all' }}>{detail.data.withdrawal.reference}</Code>
                  </Table.Td>
                </Table.Tr>
              </Table.Tbody>
            </Table>
            <Title order={3} size="h4">
              Timeline
            </Title>
            <Timeline
              active={stateChanges(detail.data.timeline).length - 1}
              bulletSize={18}
              lineWidth={2}
              data-testid="timeline"
            >
              {stateChanges(detail.data.timeline).map((entry) => (
                <Timeline.Item
                  key={entry.seq}
                  title={customerStateText(
                    entry.toState as OperationState,
                    detail.data.withdrawal.rejectionCode,
                  )}
                >
                  <Text size="xs" c="dimmed">
                    {formatTime(entry.createdAt)}
                  </Text>
                </Timeline.Item>
              ))}
            </Timeline>
          </>
        ) : null}
        <Anchor component={Link} href="/history">
          Back to history
        </Anchor>
      </Stack>
    </Paper>
  );
}

/** A customer sees changes of state; internal steps that keep the state (a risk review) are left out. */
function stateChanges<T extends { toState: string }>(timeline: T[]): T[] {
  return timeline.filter((entry, index) => index === 0 || timeline[index - 1]?.toState !== entry.toState);
}
