import {
  Anchor,
  Badge,
  Button,
  Group,
  Loader,
  Paper,
  Table,
  Text,
  Title,
  VisuallyHidden,
} from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { customerStateText, displayAmount, formatTime, stateColor } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useCustomerBalances } from './Balances.tsx';

const PAGE_SIZE = 20;

/** The account's withdrawals, newest first, every state in plain words; pages by cursor. */
export function History() {
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const balances = useCustomerBalances();
  const page = useQuery({
    queryKey: ['customer', 'withdrawals', cursor ?? null],
    queryFn: () => api.customer.withdrawals.query({ limit: PAGE_SIZE, ...(cursor ? { cursor } : {}) }),
  });
  const assets = balances.data?.assets ?? [];
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="history-title">
      <Title order={2} id="history-title" size="h3" mb="sm">
        Withdrawal history
      </Title>
      {page.isPending ? <Loader aria-label="Loading history" /> : null}
      <ProblemAlert error={page.error} />
      {page.data && page.data.items.length === 0 ? <Text>No withdrawals yet.</Text> : null}
      {page.data && page.data.items.length > 0 ? (
        <Table data-testid="history">
          <Table.Thead>
            <Table.Tr>
              <Table.Th scope="col">When</Table.Th>
              <Table.Th scope="col">Amount</Table.Th>
              <Table.Th scope="col">Status</Table.Th>
              <Table.Th scope="col">
                <VisuallyHidden>Details</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {page.data.items.map((item) => (
              <Table.Tr key={item.operationId} data-testid="history-row">
                <Table.Td>{formatTime(item.createdAt)}</Table.Td>
                <Table.Td ff="monospace">{displayAmount(item.amountMinor, item.asset, assets)}</Table.Td>
                <Table.Td>
                  <Badge color={stateColor(item.state)} variant="filled" tt="none" size="lg" radius="sm">
                    {customerStateText(item.state, item.rejectionCode)}
                  </Badge>
                </Table.Td>
                <Table.Td>
                  <Anchor component={Link} href={`/withdrawals/${item.operationId}`}>
                    Details
                  </Anchor>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      ) : null}
      <Group mt="sm">
        <Button
          variant="default"
          disabled={cursors.length === 0}
          onClick={() => setCursors(cursors.slice(0, -1))}
        >
          Newer
        </Button>
        <Button
          variant="default"
          disabled={!page.data?.nextCursor}
          onClick={() => page.data?.nextCursor && setCursors([...cursors, page.data.nextCursor])}
        >
          Older
        </Button>
      </Group>
    </Paper>
  );
}
