import type { OperationView, StaffOperationView } from '@idem/contracts';
import { Badge, Button, Code, Group, Table } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { displayAmount, formatAge, formatTime, stateColor } from '../ui/format.ts';

export function useStaffAssets() {
  return useQuery({ queryKey: ['staff', 'assets'], queryFn: () => api.staffConsole.assets.query() });
}

/** A cursor stack: the first page has none; "next" pushes the page's nextCursor. */
export function useCursorPages() {
  const [cursors, setCursors] = useState<string[]>([]);
  return {
    cursor: cursors.at(-1),
    hasPrevious: cursors.length > 0,
    previous: () => setCursors(cursors.slice(0, -1)),
    next: (cursor: string) => setCursors([...cursors, cursor]),
    /** Back to the first page (the filter changed). */
    reset: () => setCursors([]),
  };
}

export function Pager({
  pages,
  nextCursor,
}: {
  pages: ReturnType<typeof useCursorPages>;
  nextCursor: string | null | undefined;
}) {
  return (
    <Group>
      <Button variant="default" size="xs" disabled={!pages.hasPrevious} onClick={pages.previous}>
        Previous page
      </Button>
      <Button
        variant="default"
        size="xs"
        disabled={!nextCursor}
        onClick={() => nextCursor && pages.next(nextCursor)}
      >
        Next page
      </Button>
    </Group>
  );
}

/** The columns an operation table can show, in the order given. */
export type OperationColumn =
  | 'withdrawal'
  | 'created'
  | 'account'
  | 'amount'
  | 'destination'
  | 'state'
  | 'age'
  | 'owner';

const HEADINGS: Record<OperationColumn, string> = {
  withdrawal: 'Withdrawal',
  created: 'Created',
  account: 'Account',
  amount: 'Amount',
  destination: 'Destination',
  state: 'State',
  age: 'Age',
  owner: 'Owner',
};

/** An operation as the lists show it; the staff queue's rows also carry their age and owner. */
type OperationRow = OperationView & Partial<Pick<StaffOperationView, 'ageSeconds' | 'owner'>>;

/**
 * Operations as a table, one row each, the reference linking to the detail: the staff search's
 * queue columns by default, or the explorer's.
 */
export function OperationTable({
  items,
  caption,
  columns = ['withdrawal', 'account', 'amount', 'state', 'age', 'owner'],
  testId = 'operation-table',
  minWidth = 640,
}: {
  items: OperationRow[];
  caption: string;
  columns?: readonly OperationColumn[];
  testId?: string;
  minWidth?: number;
}) {
  const assets = useStaffAssets().data ?? [];
  const cell = (item: OperationRow, column: OperationColumn) => {
    switch (column) {
      case 'withdrawal':
        return (
          <Link href={`/operations/${item.operationId}`}>
            <Code>{item.reference}</Code>
          </Link>
        );
      case 'created':
        return formatTime(item.createdAt);
      case 'account':
        return item.accountId;
      case 'amount':
        return displayAmount(item.amountMinor, item.asset, assets);
      case 'destination':
        return <Code style={{ wordBreak: 'break-all' }}>{item.destination ?? 'none'}</Code>;
      case 'state':
        return (
          <Badge color={stateColor(item.state)} variant="filled" tt="none">
            {item.state}
          </Badge>
        );
      case 'age':
        return item.ageSeconds === undefined ? '' : formatAge(item.ageSeconds);
      case 'owner':
        return item.owner ?? 'unassigned';
    }
  };
  return (
    <Table.ScrollContainer minWidth={minWidth}>
      <Table striped data-testid={testId}>
        <Table.Caption>{caption}</Table.Caption>
        <Table.Thead>
          <Table.Tr>
            {columns.map((column) => (
              <Table.Th key={column} scope="col">
                {HEADINGS[column]}
              </Table.Th>
            ))}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {items.map((item) => (
            <Table.Tr key={item.operationId}>
              {columns.map((column) => (
                <Table.Td key={column} {...(column === 'amount' ? { ff: 'monospace' } : {})}>
                  {cell(item, column)}
                </Table.Td>
              ))}
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
