import {
  type OperationState,
  type Overview as OverviewData,
  type ProposalView,
  roleAllows,
} from '@idem/contracts';
import { BarChart, LineChart } from '@mantine/charts';
import {
  Anchor,
  Badge,
  Code,
  Group,
  Loader,
  Paper,
  SimpleGrid,
  Stack,
  Table,
  Text,
  Title,
} from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { displayAmount, formatAge, formatTime, stateColor } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { NoticesCard } from './NoticesCard.tsx';
import { KIND_LABELS } from './ProposalReview.tsx';
import { useStaff } from './session.tsx';
import { useStaffAssets } from './shared.tsx';

/** How often the Overview reads again by itself; one cheap procedure (every statement is an index read). */
export const OVERVIEW_REFRESH_MS = 5_000;

const STATE_COLORS: Record<OperationState, string> = {
  REQUESTED: 'blue.7',
  APPROVED: 'cyan.8',
  SIGNING: 'violet.7',
  SIGNED: 'grape.7',
  BROADCAST: 'indigo.7',
  UNKNOWN: 'yellow.7',
  FAILED_TERMINAL: 'red.8',
  CONFIRMED: 'teal.8',
  REJECTED: 'gray.6',
  VERIFIED_NOT_SENT: 'gray.8',
  REVERSED: 'orange.8',
};

const QUEUE_LABEL: Record<OverviewData['oldest'][number]['queue'], { label: string; href: string }> = {
  AWAITING_APPROVAL: { label: 'Awaiting approval (REQUESTED)', href: '/approvals' },
  UNKNOWN: { label: 'UNKNOWN', href: '/unknown' },
  BROADCAST: { label: 'BROADCAST', href: '/broadcast' },
};

function Card({ title, children, testId }: { title: string; children: ReactNode; testId: string }) {
  return (
    <Paper withBorder p="sm" component="section" aria-label={title} data-testid={testId}>
      <Stack gap="xs">
        <Title order={2} size="h4">
          {title}
        </Title>
        {children}
      </Stack>
    </Paper>
  );
}

/** The last 24 hours, oldest first, as the server writes an hour (UTC, on the hour). */
function lastHours(generatedAt: string): string[] {
  const end = new Date(generatedAt);
  end.setUTCMinutes(0, 0, 0);
  return Array.from({ length: 24 }, (_, i) =>
    new Date(end.getTime() - (23 - i) * 3600_000).toISOString().replace('.000Z', 'Z'),
  );
}

const hourLabel = (hour: string) => `${hour.slice(11, 16)} UTC`;

/**
 * What an operator looks at first: withdrawals by state now and per hour, what they
 * hold, the oldest of each watched queue, submit-to-confirmed latency, open breaks, hot wallets
 * against what may still leave them, dead letters. It reads again every few seconds by itself.
 */
export function Overview() {
  const overview = useQuery({
    queryKey: ['staff', 'overview'],
    queryFn: () => api.staffOverview.overview.query(),
    refetchInterval: OVERVIEW_REFRESH_MS,
  });
  const assetsQuery = useStaffAssets();
  const assets = assetsQuery.data ?? [];
  // Admins are the ones told of control changes (I31-NOTICE).
  const admin = roleAllows(useStaff().role, 'administer');
  // Amounts wait for the assets' decimals: without them they read as raw minor units (exact, but
  // "500000000000000000 minor units of ETH" flashed before "0.5 ETH" when the assets came second).
  if (overview.isPending || assetsQuery.isPending) return <Loader aria-label="Loading overview" />;
  if (overview.error) {
    return (
      <Stack>
        <Title order={1} size="h2">
          Overview
        </Title>
        <ProblemAlert error={overview.error} />
      </Stack>
    );
  }
  const data = overview.data;
  return (
    <Stack>
      <Group justify="space-between">
        <Title order={1} size="h2">
          Overview
        </Title>
        <Text size="xs" c="dimmed" data-testid="overview-generated">
          As of {formatTime(data.generatedAt)}; refreshes every {OVERVIEW_REFRESH_MS / 1000} s
        </Text>
      </Group>
      <AwaitingMeCard />
      {admin ? <NoticesCard refreshMs={OVERVIEW_REFRESH_MS} /> : null}
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <OpenByStateCard data={data} />
        <HeldCard data={data} assets={assets} />
      </SimpleGrid>
      <HourlyCard data={data} />
      <SimpleGrid cols={{ base: 1, md: 2 }}>
        <OldestCard data={data} />
        <AttentionCard data={data} />
      </SimpleGrid>
      <LatencyCard data={data} />
      <HotWalletsCard data={data} assets={assets} />
    </Stack>
  );
}

/**
 * The proposals waiting for this member's decision: pending, not theirs, not yet decided by them,
 * of a kind their role may approve (the server applies the same rule as the decision itself).
 */
function AwaitingMeCard() {
  const awaiting = useQuery({
    queryKey: ['staff', 'proposals', 'awaiting-me'],
    queryFn: () => api.staffProposals.awaitingMe.query(),
    refetchInterval: OVERVIEW_REFRESH_MS,
  });
  const items: ProposalView[] = awaiting.data ?? [];
  return (
    <Card title="Waiting for your decision" testId="awaiting-me">
      {awaiting.isPending ? <Loader size="sm" aria-label="Loading proposals waiting for you" /> : null}
      <ProblemAlert error={awaiting.error} />
      {awaiting.data && items.length === 0 ? (
        <Text size="sm">Nothing is waiting for your decision.</Text>
      ) : null}
      {items.length > 0 ? (
        <Table fz="sm">
          <Table.Tbody>
            {items.map((proposal) => (
              <Table.Tr key={proposal.proposalId} data-proposal-id={proposal.proposalId}>
                <Table.Th scope="row">
                  <Anchor component={Link} href={`/proposals/${proposal.proposalId}`}>
                    {KIND_LABELS[proposal.kind]} {proposal.proposalId.slice(0, 8)}
                  </Anchor>
                </Table.Th>
                <Table.Td>by {proposal.proposedBy}</Table.Td>
                <Table.Td>
                  {proposal.approvalsGiven} of {proposal.approvalsRequired} approvals
                </Table.Td>
                <Table.Td>expires {formatTime(proposal.expiresAt)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      ) : null}
    </Card>
  );
}

/** The staff's asset list, for amounts in whole units. */
type StaffAssets = NonNullable<ReturnType<typeof useStaffAssets>['data']>;

function OpenByStateCard({ data }: { data: OverviewData }) {
  return (
    <Card title="Open withdrawals by state" testId="overview-open">
      {data.openByState.length === 0 ? <Text size="sm">No withdrawal is open.</Text> : null}
      <Group gap="xs">
        {data.openByState.map((row) => (
          <Badge
            key={row.state}
            color={stateColor(row.state)}
            variant="filled"
            tt="none"
            size="lg"
            data-testid={`open-${row.state}`}
          >
            {row.state}: {row.count}
          </Badge>
        ))}
      </Group>
    </Card>
  );
}

function HeldCard({ data, assets }: { data: OverviewData; assets: StaffAssets }) {
  return (
    <Card title="Held per asset" testId="overview-held">
      {data.held.length === 0 ? <Text size="sm">Nothing is held.</Text> : null}
      <Table fz="sm">
        <Table.Tbody>
          {data.held.map((row) => (
            <Table.Tr key={row.asset}>
              <Table.Th scope="row">{row.asset}</Table.Th>
              <Table.Td ff="monospace" data-testid={`held-${row.asset}`}>
                {displayAmount(row.heldMinor, row.asset, assets)}
              </Table.Td>
              <Table.Td>
                {row.withdrawals} {row.withdrawals === 1 ? 'withdrawal' : 'withdrawals'}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Card>
  );
}

/** Withdrawals created per hour over the last day, stacked by the state each is in now. */
function HourlyCard({ data }: { data: OverviewData }) {
  const hourlyStates = [...new Set(data.hourly.map((row) => row.state))];
  const hourly = lastHours(data.generatedAt).map((hour) => ({
    hour: hourLabel(hour),
    ...Object.fromEntries(
      hourlyStates.map((state) => [
        state,
        data.hourly.find((row) => row.hour === hour && row.state === state)?.count ?? 0,
      ]),
    ),
  }));
  return (
    <Card title="Withdrawals created per hour, last 24 hours, by state now" testId="overview-hourly">
      <BarChart
        h={220}
        data={hourly}
        dataKey="hour"
        type="stacked"
        withLegend
        series={hourlyStates.map((state) => ({ name: state, color: STATE_COLORS[state] }))}
      />
    </Card>
  );
}

function OldestCard({ data }: { data: OverviewData }) {
  return (
    <Card title="Oldest in each queue" testId="overview-oldest">
      <Table fz="sm">
        <Table.Tbody>
          {data.oldest.map((row) => (
            <Table.Tr key={row.queue} data-testid={`oldest-${row.queue}`}>
              <Table.Th scope="row">
                <Anchor component={Link} href={QUEUE_LABEL[row.queue].href}>
                  {QUEUE_LABEL[row.queue].label}
                </Anchor>
              </Table.Th>
              <Table.Td>
                {row.operationId ? (
                  <Anchor component={Link} href={`/operations/${row.operationId}`}>
                    <Code>{row.reference}</Code>
                  </Anchor>
                ) : (
                  'none'
                )}
              </Table.Td>
              <Table.Td>{row.ageSeconds === null ? '' : formatAge(row.ageSeconds)}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Card>
  );
}

function AttentionCard({ data }: { data: OverviewData }) {
  return (
    <Card title="Needs a person" testId="overview-attention">
      <Table fz="sm">
        <Table.Tbody>
          <Table.Tr>
            <Table.Th scope="row">
              <Anchor component={Link} href="/breaks">
                Open reconciliation breaks
              </Anchor>
            </Table.Th>
            <Table.Td data-testid="open-breaks">{data.openBreaks}</Table.Td>
          </Table.Tr>
          <Table.Tr>
            <Table.Th scope="row">Dead-lettered work items</Table.Th>
            <Table.Td data-testid="dead-work-items">{data.deadLettered.workItems}</Table.Td>
          </Table.Tr>
          <Table.Tr>
            <Table.Th scope="row">
              <Anchor component={Link} href="/deliveries">
                Dead-lettered webhook deliveries
              </Anchor>
            </Table.Th>
            <Table.Td data-testid="dead-deliveries">{data.deadLettered.deliveries}</Table.Td>
          </Table.Tr>
        </Table.Tbody>
      </Table>
    </Card>
  );
}

function LatencyCard({ data }: { data: OverviewData }) {
  const latency = data.latency.hourly.map((row) => ({
    hour: hourLabel(row.hour),
    p50: Math.round(row.p50Seconds),
    p95: Math.round(row.p95Seconds),
  }));
  return (
    <Card title="Submit to confirmed, last 24 hours" testId="overview-latency">
      <Text size="sm" data-testid="latency-day">
        {data.latency.confirmed === 0 || data.latency.p50Seconds === null || data.latency.p95Seconds === null
          ? 'No withdrawal confirmed in the last 24 hours.'
          : `${data.latency.confirmed} confirmed: p50 ${formatAge(Math.round(data.latency.p50Seconds))}, p95 ${formatAge(Math.round(data.latency.p95Seconds))}`}
      </Text>
      {latency.length > 0 ? (
        <LineChart
          h={200}
          data={latency}
          dataKey="hour"
          withLegend
          unit=" s"
          series={[
            { name: 'p50', label: 'p50 (seconds)', color: 'indigo.7' },
            { name: 'p95', label: 'p95 (seconds)', color: 'red.8' },
          ]}
          yAxisProps={{ width: 80 }}
        />
      ) : null}
    </Card>
  );
}

function HotWalletsCard({ data, assets }: { data: OverviewData; assets: StaffAssets }) {
  return (
    <Card title="Hot wallets against pending outflows" testId="overview-hot-wallets">
      <Text size="xs" c="dimmed">
        Pending outflow: withdrawals approved and not settled (APPROVED to BROADCAST, and UNKNOWN). On chain:
        the hot wallet and deposit addresses as the last finished balance reconciliation read them; Idem does
        not read a live balance here.
      </Text>
      <Table.ScrollContainer minWidth={560}>
        <Table fz="sm">
          <Table.Thead>
            <Table.Tr>
              <Table.Th scope="col">Asset</Table.Th>
              <Table.Th scope="col">Pending outflow</Table.Th>
              <Table.Th scope="col">On chain</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {data.hotWallets.map((row) => (
              <Table.Tr key={row.asset} data-testid={`hot-${row.asset}`}>
                <Table.Td>
                  {row.asset} ({row.network})
                </Table.Td>
                <Table.Td ff="monospace">
                  {displayAmount(row.pendingOutflowMinor, row.asset, assets)}
                </Table.Td>
                <Table.Td>
                  {row.observedMinor !== null && row.observedAt ? (
                    <>
                      <Text span ff="monospace">
                        {displayAmount(row.observedMinor, row.asset, assets)}
                      </Text>{' '}
                      <Text span size="xs" c="dimmed">
                        at {row.observedBlock === null ? '' : `block ${row.observedBlock}, `}
                        {formatTime(row.observedAt)}
                      </Text>
                    </>
                  ) : (
                    <Text span size="sm">
                      {row.walletConfigured
                        ? 'Not observed: no finished balance reconciliation has read it'
                        : 'No hot wallet configured on this network'}
                    </Text>
                  )}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
    </Card>
  );
}
