import type { OperationView } from '@idem/contracts';
import { Anchor, Button, Group, Loader, Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import {
  customerDepositText,
  customerStateText,
  displayAmount,
  formatTime,
  isSettled,
} from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { StatusBadge } from '../ui/StatusBadge.tsx';
import { useCustomerBalances } from './Balances.tsx';

const WITHDRAWALS_PAGE_SIZE = 20;
const DEPOSITS_PAGE_SIZE = 10;

/**
 * How often a history page asks again (I14-LIVE, polling rather than server-sent events: the
 * server stays stateless per request and React Query already owns the cache). Every 2 s while a
 * row on the page is still moving; every 15 s otherwise, so a withdrawal made on another device
 * still appears. React Query pauses polling while the tab is hidden.
 */
export function historyRefetchInterval(items: OperationView[] | undefined): number {
  return items?.some((item) => !isSettled(item.state)) ? 2_000 : 15_000;
}

/** The account's withdrawals and deposits side by side (one above the other on a phone). */
export function History() {
  return (
    <SimpleGrid cols={{ base: 1, md: 2 }} spacing="md">
      <WithdrawalHistory />
      <DepositHistory />
    </SimpleGrid>
  );
}

/** Cursor pages, newest first: the cursors seen so far, the last one is the current page. */
function useCursorTrail() {
  const [cursors, setCursors] = useState<string[]>([]);
  return {
    cursor: cursors.at(-1),
    atNewest: cursors.length === 0,
    newer: () => setCursors(cursors.slice(0, -1)),
    older: (next: string) => setCursors([...cursors, next]),
  };
}

function Pager({
  trail,
  nextCursor,
}: {
  trail: ReturnType<typeof useCursorTrail>;
  nextCursor: string | null | undefined;
}) {
  return (
    <Group mt="sm">
      <Button variant="default" disabled={trail.atNewest} onClick={trail.newer}>
        Newer
      </Button>
      <Button variant="default" disabled={!nextCursor} onClick={() => nextCursor && trail.older(nextCursor)}>
        Older
      </Button>
    </Group>
  );
}

/** The account's withdrawals, newest first, every state in plain words; follows moving ones. */
function WithdrawalHistory() {
  const trail = useCursorTrail();
  const balances = useCustomerBalances();
  const page = useQuery({
    queryKey: ['customer', 'withdrawals', trail.cursor ?? null],
    queryFn: () =>
      api.customer.withdrawals.query({
        limit: WITHDRAWALS_PAGE_SIZE,
        ...(trail.cursor ? { cursor: trail.cursor } : {}),
      }),
    refetchInterval: (query) => historyRefetchInterval(query.state.data?.items),
  });
  const assets = balances.data?.assets ?? [];
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="history-title" miw={0}>
      <Title order={2} id="history-title" size="h3" mb="sm">
        Withdrawal history
      </Title>
      {page.isPending ? <Loader aria-label="Loading history" /> : null}
      <ProblemAlert error={page.error} />
      {page.data && page.data.items.length === 0 ? <Text>No withdrawals yet.</Text> : null}
      {page.data && page.data.items.length > 0 ? (
        <Stack component="ul" gap="xs" p={0} m={0} style={{ listStyle: 'none' }} data-testid="history">
          {page.data.items.map((item) => (
            <HistoryRow
              key={item.operationId}
              testId="history-row"
              when={item.createdAt}
              amount={displayAmount(item.amountMinor, item.asset, assets)}
              state={item.state}
              words={customerStateText(item.state, item.rejectionCode)}
              href={`/withdrawals/${item.operationId}`}
            />
          ))}
        </Stack>
      ) : null}
      <Pager trail={trail} nextCursor={page.data?.nextCursor} />
    </Paper>
  );
}

/** The account's credited deposits, newest first (I14-DEPOSITS). */
function DepositHistory() {
  const trail = useCursorTrail();
  const balances = useCustomerBalances();
  const page = useQuery({
    queryKey: ['customer', 'deposits', trail.cursor ?? null],
    queryFn: () =>
      api.customer.deposits.query({
        limit: DEPOSITS_PAGE_SIZE,
        ...(trail.cursor ? { cursor: trail.cursor } : {}),
      }),
    refetchInterval: 15_000,
  });
  const assets = balances.data?.assets ?? [];
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="deposits-title" miw={0}>
      <Title order={2} id="deposits-title" size="h3" mb="sm">
        Deposit history
      </Title>
      {page.isPending ? <Loader aria-label="Loading deposits" /> : null}
      <ProblemAlert error={page.error} />
      {page.data && page.data.items.length === 0 ? <Text>No deposits yet.</Text> : null}
      {page.data && page.data.items.length > 0 ? (
        <Stack component="ul" gap="xs" p={0} m={0} style={{ listStyle: 'none' }} data-testid="deposits">
          {page.data.items.map((item) => (
            <HistoryRow
              key={item.operationId}
              testId="deposit-row"
              when={item.createdAt}
              amount={displayAmount(item.amountMinor, item.asset, assets)}
              state={item.state}
              words={customerDepositText(item.state)}
            />
          ))}
        </Stack>
      ) : null}
      <Pager trail={trail} nextCursor={page.data?.nextCursor} />
    </Paper>
  );
}

/** One line of a history: wraps on a phone rather than scrolling or cutting anything. */
function HistoryRow(props: {
  testId: string;
  when: string;
  amount: string;
  state: OperationView['state'];
  words: string;
  href?: string;
}) {
  return (
    <Paper component="li" withBorder p="xs" radius="sm" data-testid={props.testId} miw={0}>
      <Group justify="space-between" align="flex-start" gap="xs" wrap="wrap">
        <Stack gap={2} miw={0}>
          <Text ff="monospace" fw={700} data-testid="amount" style={{ overflowWrap: 'anywhere' }}>
            {props.amount}
          </Text>
          <Text size="sm" c="dimmed">
            {formatTime(props.when)}
          </Text>
        </Stack>
        <Stack gap={4} align="flex-end" miw={0} maw="100%">
          <StatusBadge state={props.state}>{props.words}</StatusBadge>
          {props.href ? (
            <Anchor component={Link} href={props.href} size="sm">
              Details
            </Anchor>
          ) : null}
        </Stack>
      </Group>
    </Paper>
  );
}
