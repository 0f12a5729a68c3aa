import { Button, Code, Group, Loader, Table, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { Pager, useCursorPages } from './shared.tsx';

interface Filter {
  actor?: string;
  action?: string;
  outcome?: string;
}

/** Hands a text to the browser as a file download, without a round trip. */
export function download(name: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.click();
  URL.revokeObjectURL(url);
}

/** The staff audit log (administrators): who did what, when, from where; filter and export as CSV. */
export function AuditLog() {
  const [draft, setDraft] = useState<Filter>({});
  const [filter, setFilter] = useState<Filter>({});
  const pages = useCursorPages();
  const log = useQuery({
    queryKey: ['staff', 'audit', filter, pages.cursor],
    queryFn: () =>
      api.staffAudit.list.query({ ...filter, limit: 50, ...(pages.cursor ? { cursor: pages.cursor } : {}) }),
  });
  const exportCsv = useMutation({
    mutationFn: () => api.staffAudit.export.mutate(filter),
    onSuccess: (result) => download('idem-audit-log.csv', result.csv, 'text/csv'),
  });
  const apply = (event: FormEvent) => {
    event.preventDefault();
    setFilter(
      Object.fromEntries(Object.entries(draft).filter(([, value]) => value && value.trim() !== '')) as Filter,
    );
    pages.reset();
  };
  const entries = log.data?.items ?? [];
  return (
    <>
      <Title order={1} size="h2">
        Audit log
      </Title>
      <form onSubmit={apply}>
        <Group align="end">
          <TextInput
            label="Actor"
            placeholder="staff:…"
            value={draft.actor ?? ''}
            onChange={(e) => setDraft({ ...draft, actor: e.currentTarget.value })}
          />
          <TextInput
            label="Action"
            placeholder="staffProposals.decide"
            value={draft.action ?? ''}
            onChange={(e) => setDraft({ ...draft, action: e.currentTarget.value })}
          />
          <TextInput
            label="Outcome"
            placeholder="ok, FORBIDDEN…"
            value={draft.outcome ?? ''}
            onChange={(e) => setDraft({ ...draft, outcome: e.currentTarget.value })}
          />
          <Button type="submit" variant="light">
            Filter
          </Button>
          <Button variant="default" loading={exportCsv.isPending} onClick={() => exportCsv.mutate()}>
            Export CSV
          </Button>
        </Group>
      </form>
      <ProblemAlert error={log.error ?? exportCsv.error} />
      {log.isPending ? <Loader aria-label="Loading audit log" /> : null}
      {log.data && entries.length === 0 ? <Text>Nothing recorded matches.</Text> : null}
      {entries.length > 0 ? (
        <Table.ScrollContainer minWidth={720}>
          <Table striped data-testid="audit-log">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>When</Table.Th>
                <Table.Th>Who</Table.Th>
                <Table.Th>Action</Table.Th>
                <Table.Th>Outcome</Table.Th>
                <Table.Th>From</Table.Th>
                <Table.Th>What was asked</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {entries.map((entry) => (
                <Table.Tr key={entry.entryId}>
                  <Table.Td>{formatTime(entry.at)}</Table.Td>
                  <Table.Td>
                    <Code>{entry.actor}</Code>
                  </Table.Td>
                  <Table.Td>{entry.action}</Table.Td>
                  <Table.Td>{entry.outcome}</Table.Td>
                  <Table.Td>{entry.sourceAddress ?? '–'}</Table.Td>
                  <Table.Td>
                    <Code block>{JSON.stringify(entry.details)}</Code>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      ) : null}
      <Pager pages={pages} nextCursor={log.data?.nextCursor} />
    </>
  );
}
