import {
  type ExplorerFilter,
  type ExplorerSort,
  type OperationState,
  operationStates,
  parseDisplayAmount,
} from '@idem/contracts';
import { Button, Group, Loader, Select, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { download } from './AuditLog.tsx';
import { OperationTable, Pager, useCursorPages, useStaffAssets } from './shared.tsx';

interface Draft {
  state: string | null;
  asset: string | null;
  accountId: string;
  destination: string;
  amountMin: string;
  amountMax: string;
  fromDate: string;
  toDate: string;
  sort: ExplorerSort;
}

const EMPTY: Draft = {
  state: null,
  asset: null,
  accountId: '',
  destination: '',
  amountMin: '',
  amountMax: '',
  fromDate: '',
  toDate: '',
  sort: 'created_desc',
};

const SORTS: { value: ExplorerSort; label: string }[] = [
  { value: 'created_desc', label: 'Newest first' },
  { value: 'created_asc', label: 'Oldest first' },
  { value: 'amount_desc', label: 'Largest amount first' },
  { value: 'amount_asc', label: 'Smallest amount first' },
];

const DAY_MS = 24 * 3600_000;

/**
 * The form as the server's filter. Amounts are typed in the chosen asset's display units and
 * converted exactly (never through a float); dates are whole UTC days, the "to" day included.
 */
function filterOf(draft: Draft, decimals: number | null): ExplorerFilter | string {
  const filter: ExplorerFilter = { sort: draft.sort };
  if (draft.state) filter.state = draft.state as OperationState;
  if (draft.asset) filter.asset = draft.asset;
  if (draft.accountId.trim()) filter.accountId = draft.accountId.trim();
  if (draft.destination.trim()) filter.destination = draft.destination.trim();
  for (const [key, text] of [
    ['amountMinMinor', draft.amountMin],
    ['amountMaxMinor', draft.amountMax],
  ] as const) {
    if (!text.trim()) continue;
    if (decimals === null) return 'Choose an asset to filter by amount.';
    const minor = parseDisplayAmount(text, decimals);
    if (minor === null) return `“${text}” is not an amount of this asset (at most ${decimals} decimals).`;
    filter[key] = minor;
  }
  if (draft.fromDate) filter.from = new Date(`${draft.fromDate}T00:00:00Z`).toISOString();
  if (draft.toDate)
    filter.to = new Date(new Date(`${draft.toDate}T00:00:00Z`).getTime() + DAY_MS).toISOString();
  return filter;
}

/**
 * Every withdrawal of the tenant: filters, sort, cursor pages, and a CSV export of what
 * the filter selects (audited). A row opens the withdrawal's page with its full history.
 */
export function Withdrawals() {
  const assets = useStaffAssets().data ?? [];
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [filter, setFilter] = useState<ExplorerFilter>({ sort: 'created_desc' });
  const [formError, setFormError] = useState<string | null>(null);
  const pages = useCursorPages();
  const list = useQuery({
    queryKey: ['staff', 'explorer', filter, pages.cursor],
    queryFn: () =>
      api.staffOverview.withdrawals.query({
        ...filter,
        limit: 25,
        ...(pages.cursor ? { cursor: pages.cursor } : {}),
      }),
  });
  const exportCsv = useMutation({
    mutationFn: () => api.staffOverview.exportWithdrawals.mutate(filter),
    onSuccess: (result) => download('idem-withdrawals.csv', result.csv, 'text/csv'),
  });
  const decimals = assets.find((asset) => asset.code === draft.asset)?.decimals ?? null;
  const apply = (event: FormEvent) => {
    event.preventDefault();
    const next = filterOf(draft, decimals);
    if (typeof next === 'string') {
      setFormError(next);
      return;
    }
    setFormError(null);
    setFilter(next);
    pages.reset();
  };
  const set = <K extends keyof Draft>(key: K, value: Draft[K]) => setDraft({ ...draft, [key]: value });
  const items = list.data?.items ?? [];
  return (
    <>
      <Title order={1} size="h2">
        Withdrawals
      </Title>
      <form onSubmit={apply} aria-label="Filter withdrawals">
        <Group align="end" gap="sm">
          <Select
            label="State"
            placeholder="Any"
            data={[...operationStates]}
            value={draft.state}
            onChange={(value) => set('state', value)}
            clearable
            w={190}
          />
          <Select
            label="Asset"
            placeholder="Any"
            data={assets.map((asset) => asset.code)}
            value={draft.asset}
            onChange={(value) => set('asset', value)}
            clearable
            w={120}
          />
          <TextInput
            label="Account"
            value={draft.accountId}
            onChange={(e) => set('accountId', e.currentTarget.value)}
            w={150}
          />
          <TextInput
            label="Destination (exact)"
            value={draft.destination}
            onChange={(e) => set('destination', e.currentTarget.value)}
            w={260}
          />
          <TextInput
            label="Amount from"
            placeholder={draft.asset ?? 'asset first'}
            value={draft.amountMin}
            onChange={(e) => set('amountMin', e.currentTarget.value)}
            w={130}
          />
          <TextInput
            label="Amount to"
            placeholder={draft.asset ?? 'asset first'}
            value={draft.amountMax}
            onChange={(e) => set('amountMax', e.currentTarget.value)}
            w={130}
          />
          <TextInput
            type="date"
            label="Created from (UTC)"
            value={draft.fromDate}
            onChange={(e) => set('fromDate', e.currentTarget.value)}
          />
          <TextInput
            type="date"
            label="Created to (UTC, included)"
            value={draft.toDate}
            onChange={(e) => set('toDate', e.currentTarget.value)}
          />
          <Select
            label="Sort"
            data={SORTS}
            value={draft.sort}
            onChange={(value) => set('sort', (value as ExplorerSort | null) ?? 'created_desc')}
            allowDeselect={false}
            w={200}
          />
          <Button type="submit" variant="light">
            Filter
          </Button>
          <Button
            variant="default"
            onClick={() => {
              setDraft(EMPTY);
              setFilter({ sort: 'created_desc' });
              pages.reset();
            }}
          >
            Clear
          </Button>
          <Button variant="default" loading={exportCsv.isPending} onClick={() => exportCsv.mutate()}>
            Export CSV
          </Button>
        </Group>
      </form>
      {formError ? (
        <Text c="red.8" role="alert">
          {formError}
        </Text>
      ) : null}
      {exportCsv.data ? (
        <Text size="sm" data-testid="export-result">
          Exported {exportCsv.data.rows} withdrawals
          {exportCsv.data.truncated ? ' (the first 10,000 only: narrow the filter for the rest)' : ''}.
        </Text>
      ) : null}
      <ProblemAlert error={list.error ?? exportCsv.error} />
      {list.isPending ? <Loader aria-label="Loading withdrawals" /> : null}
      {list.data && items.length === 0 ? <Text>No withdrawal matches.</Text> : null}
      {items.length > 0 ? (
        <OperationTable
          items={items}
          caption="Withdrawals matching the filter"
          columns={['withdrawal', 'created', 'account', 'amount', 'destination', 'state']}
          testId="explorer-table"
          minWidth={820}
        />
      ) : null}
      <Pager pages={pages} nextCursor={list.data?.nextCursor} />
    </>
  );
}
