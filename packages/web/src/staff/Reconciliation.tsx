import { type ReconciliationRunDetail, type RunHistoryPoint, roleAllows } from '@idem/contracts';
import { LineChart } from '@mantine/charts';
import { Badge, Button, Code, Group, Loader, Select, Stack, Table, Text, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useStaff } from './session.tsx';

const RESULT_COLOR: Record<string, string> = {
  balanced: 'green',
  explained: 'blue',
  variance: 'red',
  incomplete: 'orange',
};

/**
 * Balance-level reconciliation (docs/RECONCILIATION.md): the runs, a "Run now" button (operator,
 * admin), a run's figures per place and asset, its CSV and signed JSON exports, and a chart of the
 * ledger against what was observed per asset over time. Amounts stay in minor units.
 */
export function Reconciliation() {
  const me = useStaff();
  const queryClient = useQueryClient();
  const [selected, setSelected] = useState<string | null>(null);
  const runs = useQuery({
    queryKey: ['staff', 'reconciliation', 'runs'],
    queryFn: () => api.staffReconciliation.runs.query({ limit: 50 }),
  });
  const runNow = useMutation({
    mutationFn: () => api.staffReconciliation.runNow.mutate({}),
    onSuccess: (run) => {
      setSelected(run.runId);
      void queryClient.invalidateQueries({ queryKey: ['staff', 'reconciliation'] });
    },
  });
  const canRun = roleAllows(me.role, 'operate');
  return (
    <Stack>
      <Title order={1} size="h2">
        Balance reconciliation
      </Title>
      <Text size="sm">
        Ledger custody against each hot wallet and its deposit addresses at a pinned block, and against the
        custodian's reported balance. What in-flight items do not explain opens a break; no balance is ever
        adjusted.
      </Text>
      {canRun ? (
        <Group>
          <Button onClick={() => runNow.mutate()} loading={runNow.isPending}>
            Run now
          </Button>
        </Group>
      ) : null}
      <ProblemAlert error={runNow.error} title="Run refused" />
      <HistoryChart />
      {runs.isPending ? <Loader aria-label="Loading runs" /> : null}
      <ProblemAlert error={runs.error} />
      {runs.data?.length === 0 ? <Text>No runs yet.</Text> : null}
      {runs.data && runs.data.length > 0 ? (
        <Table data-testid="reconciliation-runs" striped>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Started</Table.Th>
              <Table.Th>Ran by</Table.Th>
              <Table.Th>Result</Table.Th>
              <Table.Th>Breaks opened</Table.Th>
              <Table.Th>Figures</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {runs.data.map((run) => (
              <Table.Tr key={run.runId} data-testid="reconciliation-run">
                <Table.Td>{formatTime(run.startedAt)}</Table.Td>
                <Table.Td>
                  <Code>{run.ranBy}</Code>
                </Table.Td>
                <Table.Td>
                  <Badge color={RESULT_COLOR[run.result ?? ''] ?? 'gray'} variant="filled" tt="none">
                    {run.result ?? run.status}
                  </Badge>
                </Table.Td>
                <Table.Td>{run.breaksOpened}</Table.Td>
                <Table.Td>
                  <Button
                    size="xs"
                    variant="light"
                    onClick={() => setSelected(run.runId)}
                    aria-label={`Show run of ${formatTime(run.startedAt)}`}
                  >
                    Show
                  </Button>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      ) : null}
      {selected ? <RunDetail runId={selected} /> : null}
    </Stack>
  );
}

function RunDetail({ runId }: { runId: string }) {
  const run = useQuery({
    queryKey: ['staff', 'reconciliation', 'run', runId],
    queryFn: () => api.staffReconciliation.run.query({ runId }),
  });
  if (run.isPending) return <Loader aria-label="Loading run" />;
  if (run.error) return <ProblemAlert error={run.error} />;
  const detail: ReconciliationRunDetail = run.data;
  return (
    <Stack data-testid="reconciliation-run-detail" gap="xs">
      <Title order={2} size="h3">
        Run of {formatTime(detail.startedAt)}
      </Title>
      <Text size="sm">
        Ran by <Code>{detail.ranBy}</Code> ({detail.trigger}); result{' '}
        <strong>{detail.result ?? detail.status}</strong>
        {detail.note ? `: ${detail.note}` : ''}
      </Text>
      <Group>
        <ExportCsv runId={runId} />
        <ExportSigned runId={runId} />
      </Group>
      <Table.ScrollContainer minWidth={900}>
        <Table data-testid="reconciliation-figures">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Place</Table.Th>
              <Table.Th>Asset</Table.Th>
              <Table.Th>Liabilities (available / held)</Table.Th>
              <Table.Th>Fee expense</Table.Th>
              <Table.Th>In flight</Table.Th>
              <Table.Th>Ledger</Table.Th>
              <Table.Th>Observed</Table.Th>
              <Table.Th>Explained</Table.Th>
              <Table.Th>Unexplained</Table.Th>
              <Table.Th>Pinned block / report time</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {detail.figures.map((figure) => (
              <Table.Tr key={`${figure.place}:${figure.assetCode}`} data-testid="reconciliation-figure">
                <Table.Td>
                  <Code>{figure.place}</Code>
                  {figure.accountTenants > 1 ? ` (${figure.accountTenants} tenants)` : ''}
                </Table.Td>
                <Table.Td>{figure.assetCode}</Table.Td>
                <Table.Td>
                  {figure.liabilitiesAvailableMinor} / {figure.liabilitiesHeldMinor}
                </Table.Td>
                <Table.Td>{figure.feeExpenseMinor}</Table.Td>
                <Table.Td>{figure.inFlightWithdrawalsMinor}</Table.Td>
                <Table.Td>{figure.expectedMinor}</Table.Td>
                <Table.Td>{figure.observedMinor ?? 'not observed'}</Table.Td>
                <Table.Td title={figure.explanations.map((e) => `${e.kind} ${e.amountMinor}`).join('\n')}>
                  {figure.explainedMinor}
                </Table.Td>
                <Table.Td>
                  {figure.unexplainedMinor === null || figure.unexplainedMinor === '0' ? (
                    (figure.unexplainedMinor ?? '–')
                  ) : (
                    <Badge color="red" variant="filled" tt="none">
                      {figure.unexplainedMinor}
                    </Badge>
                  )}
                </Table.Td>
                <Table.Td>
                  {figure.pinnedBlock !== null ? `block ${figure.pinnedBlock}` : ''}
                  {figure.reportedAt ? formatTime(figure.reportedAt) : ''}
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      <Text size="xs" c="dimmed">
        Amounts in minor units. Hover an explained amount for its items.
      </Text>
    </Stack>
  );
}

/** Saves text as a file the browser downloads. */
function download(filename: string, type: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  link.click();
  URL.revokeObjectURL(url);
}

function ExportCsv({ runId }: { runId: string }) {
  const csv = useMutation({
    mutationFn: () => api.staffReconciliation.exportCsv.query({ runId }),
    onSuccess: (file) => download(file.filename, 'text/csv', file.csv),
  });
  return (
    <>
      <Button size="xs" variant="default" onClick={() => csv.mutate()} loading={csv.isPending}>
        Download CSV
      </Button>
      <ProblemAlert error={csv.error} title="Export refused" />
    </>
  );
}

function ExportSigned({ runId }: { runId: string }) {
  const signed = useMutation({
    mutationFn: () => api.staffReconciliation.exportSigned.query({ runId }),
    onSuccess: (report) =>
      download(`reconciliation-${runId}.json`, 'application/json', `${JSON.stringify(report, null, 2)}\n`),
  });
  return (
    <>
      <Button size="xs" variant="default" onClick={() => signed.mutate()} loading={signed.isPending}>
        Download signed JSON
      </Button>
      <ProblemAlert error={signed.error} title="Export refused" />
    </>
  );
}

/**
 * Ledger against observed for one place and asset over the last runs. The chart plots numbers, so
 * very large minor-unit amounts lose digits there; the tables keep them exact.
 */
function HistoryChart() {
  const history = useQuery({
    queryKey: ['staff', 'reconciliation', 'history'],
    queryFn: () => api.staffReconciliation.history.query({ limit: 30 }),
  });
  const series = [...new Set((history.data ?? []).map((p) => `${p.place} ${p.assetCode}`))];
  const [chosen, setChosen] = useState<string | null>(null);
  const current = chosen && series.includes(chosen) ? chosen : (series[0] ?? null);
  if (history.error) return <ProblemAlert error={history.error} />;
  if (!current) return null;
  const points = (history.data ?? []).filter((p: RunHistoryPoint) => `${p.place} ${p.assetCode}` === current);
  const data = points.map((p) => ({
    run: formatTime(p.finishedAt),
    ledger: Number(p.expectedMinor),
    observed: p.observedMinor === null ? null : Number(p.observedMinor),
  }));
  return (
    <Stack gap="xs" data-testid="reconciliation-chart">
      <Select
        label="Ledger against observed, per asset"
        data={series}
        value={current}
        onChange={setChosen}
        allowDeselect={false}
        w={320}
      />
      <LineChart
        h={220}
        data={data}
        dataKey="run"
        series={[
          { name: 'ledger', label: 'Ledger (minor units)', color: 'indigo.7' },
          { name: 'observed', label: 'Observed (minor units)', color: 'teal.8' },
        ]}
        withLegend
        connectNulls={false}
        yAxisProps={{ width: 110 }}
      />
    </Stack>
  );
}
