import type { StaffOperationView, StaffRoleName } from '@idem/contracts';
import { Badge, Button, Code, Group, Table } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { displayAmount, formatAge, stateColor } from '../ui/format.ts';

/**
 * Whether a role may take an action, to show or hide its buttons; the server decides (core's
 * ROLE_PERMISSIONS, FORBIDDEN otherwise), this only follows it.
 */
export function staffMay(role: StaffRoleName, permission: 'decide' | 'operate'): boolean {
  return permission === 'decide'
    ? role === 'approver' || role === 'admin'
    : role === 'operator' || role === 'admin';
}

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

/** Operations as a table: reference, account, amount, state, age, owner, a link to the detail. */
export function OperationTable({ items, caption }: { items: StaffOperationView[]; caption: string }) {
  const assets = useStaffAssets().data ?? [];
  return (
    <Table.ScrollContainer minWidth={640}>
      <Table striped data-testid="operation-table">
        <Table.Caption>{caption}</Table.Caption>
        <Table.Thead>
          <Table.Tr>
            <Table.Th scope="col">Withdrawal</Table.Th>
            <Table.Th scope="col">Account</Table.Th>
            <Table.Th scope="col">Amount</Table.Th>
            <Table.Th scope="col">State</Table.Th>
            <Table.Th scope="col">Age</Table.Th>
            <Table.Th scope="col">Owner</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {items.map((item) => (
            <Table.Tr key={item.operationId}>
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
              <Table.Td>{formatAge(item.ageSeconds)}</Table.Td>
              <Table.Td>{item.owner ?? 'unassigned'}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
