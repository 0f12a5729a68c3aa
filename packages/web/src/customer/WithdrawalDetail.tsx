import type { OperationState } from '@idem/contracts';
import { Anchor, Code, Loader, Paper, Stack, Table, Text, Timeline, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { customerStateText, customerStepText, displayAmount, formatTime, isSettled } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useCustomerBalances } from './Balances.tsx';

/** Long values (addresses, hashes) wrap at any character: whole on a phone, never cut (I14-PHONE). */
const WRAP_ANYWHERE = { wordBreak: 'break-all', overflowWrap: 'anywhere', whiteSpace: 'pre-wrap' } as const;

/**
 * One of the account's withdrawals with its timeline; anything else is "not found". It follows the
 * withdrawal by itself (I14-LIVE): polled every 2 s until it settles, then no more.
 */
export function WithdrawalDetail({ operationId }: { operationId: string }) {
  const detail = useQuery({
    queryKey: ['customer', 'withdrawal', operationId],
    queryFn: () => api.customer.withdrawal.query({ operationId }),
    refetchInterval: (query) => {
      const state = query.state.data?.withdrawal.state;
      return state !== undefined && isSettled(state) ? false : 2_000;
    },
  });
  const balances = useCustomerBalances();
  const assets = balances.data?.assets ?? [];
  const withdrawal = detail.data?.withdrawal;
  const confirmations = assets.find((asset) => asset.code === withdrawal?.asset)?.confirmations ?? null;
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="detail-title" miw={0}>
      <Stack>
        <Title order={2} id="detail-title" size="h3">
          Withdrawal
        </Title>
        {detail.isPending ? <Loader aria-label="Loading withdrawal" /> : null}
        <ProblemAlert error={detail.error} />
        {detail.data && withdrawal ? (
          <>
            <Text fw={700} data-testid="detail-state" role="status">
              {customerStateText(withdrawal.state, withdrawal.rejectionCode)}
            </Text>
            <Table variant="vertical" layout="fixed" withTableBorder>
              <Table.Tbody>
                <Table.Tr>
                  <Table.Th w={110}>Amount</Table.Th>
                  <Table.Td ff="monospace" style={WRAP_ANYWHERE}>
                    {displayAmount(withdrawal.amountMinor, withdrawal.asset, assets)}
                  </Table.Td>
                </Table.Tr>
                <Table.Tr>
                  <Table.Th>Destination</Table.Th>
                  <Table.Td>
                    <Code block style={WRAP_ANYWHERE} data-testid="detail-destination">
                      {withdrawal.destination}
                    </Code>
                  </Table.Td>
                </Table.Tr>
                <Table.Tr>
                  <Table.Th>Network</Table.Th>
                  <Table.Td>{withdrawal.network}</Table.Td>
                </Table.Tr>
                {withdrawal.txHash ? (
                  <Table.Tr>
                    <Table.Th>Transaction</Table.Th>
                    <Table.Td>
                      <Code block style={WRAP_ANYWHERE} data-testid="detail-tx">
                        {detail.data.explorerUrl ? (
                          <Anchor
                            href={detail.data.explorerUrl}
                            target="_blank"
                            rel="noopener noreferrer"
                            fz="inherit"
                            ff="inherit"
                          >
                            {withdrawal.txHash}
                          </Anchor>
                        ) : (
                          withdrawal.txHash
                        )}
                      </Code>
                    </Table.Td>
                  </Table.Tr>
                ) : null}
                <Table.Tr>
                  <Table.Th>Reference</Table.Th>
                  <Table.Td>
                    <Code block style={WRAP_ANYWHERE}>
                      {withdrawal.reference}
                    </Code>
                  </Table.Td>
                </Table.Tr>
              </Table.Tbody>
            </Table>
            <Title order={3} size="h4">
              Timeline
            </Title>
            <CustomerTimeline
              timeline={detail.data.timeline}
              rejectionCode={withdrawal.rejectionCode}
              confirmations={confirmations}
            />
          </>
        ) : null}
        <Anchor component={Link} href="/history">
          Back to history
        </Anchor>
      </Stack>
    </Paper>
  );
}

function CustomerTimeline({
  timeline,
  rejectionCode,
  confirmations,
}: {
  timeline: { seq: number; toState: string; createdAt: string }[];
  rejectionCode: string | null;
  confirmations: number | null;
}) {
  const steps = customerSteps(timeline, (state) => customerStepText(state, rejectionCode, confirmations));
  return (
    <Timeline active={steps.length - 1} bulletSize={18} lineWidth={2} data-testid="timeline">
      {steps.map((step) => (
        <Timeline.Item key={step.seq} title={step.title}>
          <Text size="xs" c="dimmed">
            {formatTime(step.createdAt)}
          </Text>
        </Timeline.Item>
      ))}
    </Timeline>
  );
}

/**
 * The steps a customer sees: each change of what the step says, at the time it first said it.
 * Internal moves that keep the words (a risk review, SIGNING to SIGNED) are one step.
 */
function customerSteps<T extends { seq: number; toState: string; createdAt: string }>(
  timeline: T[],
  words: (state: OperationState) => string,
): { seq: number; title: string; createdAt: string }[] {
  const steps: { seq: number; title: string; createdAt: string }[] = [];
  for (const entry of timeline) {
    const title = words(entry.toState as OperationState);
    if (steps.at(-1)?.title !== title) steps.push({ seq: entry.seq, title, createdAt: entry.createdAt });
  }
  return steps;
}
