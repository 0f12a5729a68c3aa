import { Badge, Button, Code, Group, Loader, SegmentedControl, Table, Text, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { useSearch } from 'wouter';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { Pager, useCursorPages } from './shared.tsx';

type Status = 'pending' | 'done' | 'dead';

/**
 * Outbound webhook deliveries, one line per notification and endpoint: status, attempts, the last
 * answer and the next attempt; a dead-lettered (or lost) delivery is sent again by hand.
 */
export function Deliveries() {
  // The endpoints screen links here with ?endpoint=<id>: that destination's deliveries, any status.
  const endpointId = new URLSearchParams(useSearch()).get('endpoint');
  const [status, setStatus] = useState<Status | 'all'>(endpointId ? 'all' : 'dead');
  const queryClient = useQueryClient();
  const pages = useCursorPages();
  const log = useQuery({
    queryKey: ['staff', 'deliveries', status, endpointId, pages.cursor],
    queryFn: () =>
      api.staffConsole.deliveries.query({
        limit: 50,
        ...(status === 'all' ? {} : { status }),
        ...(endpointId ? { endpointId } : {}),
        ...(pages.cursor ? { cursor: pages.cursor } : {}),
      }),
  });
  const redeliver = useMutation({
    mutationFn: (input: { workId: string; endpointId: string }) => api.staffConsole.redeliver.mutate(input),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['staff', 'deliveries'] }),
  });
  const deliveries = log.data?.items ?? [];
  return (
    <>
      <Title order={1} size="h2">
        Outbound webhooks
      </Title>
      {endpointId ? (
        <Text size="sm">
          Deliveries to endpoint <Code>{endpointId}</Code>
        </Text>
      ) : null}
      <SegmentedControl
        aria-label="Delivery status"
        value={status}
        onChange={(value) => {
          setStatus(value as Status | 'all');
          pages.reset();
        }}
        data={[
          { value: 'dead', label: 'Dead-lettered' },
          { value: 'pending', label: 'Retrying' },
          { value: 'done', label: 'Delivered' },
          { value: 'all', label: 'All' },
        ]}
      />
      <ProblemAlert error={log.error} />
      <ProblemAlert error={redeliver.error} title="Redelivery refused" />
      {log.isPending ? <Loader aria-label="Loading deliveries" /> : null}
      {log.data && deliveries.length === 0 ? <Text>No deliveries here.</Text> : null}
      {deliveries.length > 0 ? (
        <Table.ScrollContainer minWidth={720}>
          <Table striped data-testid="deliveries">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Raised</Table.Th>
                <Table.Th>Event</Table.Th>
                <Table.Th>Endpoint</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Attempts</Table.Th>
                <Table.Th>Last answer</Table.Th>
                <Table.Th>Next attempt</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {deliveries.map((d) => (
                <Table.Tr key={`${d.workId}:${d.endpointId}`}>
                  <Table.Td>{formatTime(d.createdAt)}</Table.Td>
                  <Table.Td>
                    {d.event.reference ?? d.operationId ?? '–'}: {d.event.from ?? '–'} → {d.event.to ?? '–'}
                  </Table.Td>
                  <Table.Td>
                    <Code>{d.endpointId.slice(0, 8)}</Code>
                  </Table.Td>
                  <Table.Td>
                    {/* Filled, dark shades: white text on them reads at AA contrast. */}
                    <Badge
                      variant="filled"
                      color={d.status === 'dead' ? 'red.9' : d.status === 'done' ? 'teal.9' : 'blue.8'}
                    >
                      {d.status}
                    </Badge>
                  </Table.Td>
                  <Table.Td>{d.attempts}</Table.Td>
                  <Table.Td>{d.lastResponseStatus ?? d.lastError ?? '–'}</Table.Td>
                  <Table.Td>{d.nextAttemptAt ? formatTime(d.nextAttemptAt) : '–'}</Table.Td>
                  <Table.Td>
                    {/* A pending delivery waiting out its backoff is retried now; a done or dead one is sent again. */}
                    {d.status === 'pending' && d.attempts === 0 ? null : (
                      <Group gap="xs">
                        <Button
                          size="xs"
                          variant="light"
                          loading={redeliver.isPending}
                          onClick={() => redeliver.mutate({ workId: d.workId, endpointId: d.endpointId })}
                        >
                          {d.status === 'pending' ? 'Retry now' : 'Redeliver'}
                        </Button>
                      </Group>
                    )}
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
