import { Badge, Code, Loader, Stack, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/** Deliveries that need a person: quarantined (never acted on) and unhandled event types. */
export function Inbox() {
  const inbox = useQuery({ queryKey: ['staff', 'inbox'], queryFn: () => api.staffConsole.inbox.query() });
  return (
    <Stack>
      <Title order={1} size="h2">
        Webhook inbox
      </Title>
      <Text size="sm">
        Quarantined deliveries were never acted on: the same event id came with a different body, or a body
        did not parse. Unhandled events have a type Idem does not know; they are stored, not guessed at.
      </Text>
      {inbox.isPending ? <Loader aria-label="Loading inbox" /> : null}
      <ProblemAlert error={inbox.error} />
      {inbox.data?.length === 0 ? <Text>Nothing needs attention.</Text> : null}
      {inbox.data && inbox.data.length > 0 ? (
        <Table.ScrollContainer minWidth={640}>
          <Table>
            <Table.Thead>
              <Table.Tr>
                <Table.Th scope="col">Kind</Table.Th>
                <Table.Th scope="col">Source / event</Table.Th>
                <Table.Th scope="col">Why</Table.Th>
                <Table.Th scope="col">Received</Table.Th>
                <Table.Th scope="col">Body</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {inbox.data.map((item) => (
                <Table.Tr key={`${item.kind}:${item.source}:${item.eventId}:${item.receivedAt}`}>
                  <Table.Td>
                    <Badge color={item.kind === 'quarantined' ? 'red.9' : 'yellow'} variant="filled">
                      {item.kind}
                    </Badge>
                  </Table.Td>
                  <Table.Td>
                    {item.source} / <Code>{item.eventId}</Code>
                  </Table.Td>
                  <Table.Td>{item.detail}</Table.Td>
                  <Table.Td>{formatTime(item.receivedAt)}</Table.Td>
                  <Table.Td>
                    <Code block style={{ maxWidth: 360, whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>
                      {item.bodyExcerpt}
                    </Code>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      ) : null}
    </Stack>
  );
}
