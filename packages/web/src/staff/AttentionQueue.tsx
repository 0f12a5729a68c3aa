import type { StaffOperationView } from '@idem/contracts';
import { Button, Code, Group, Loader, Paper, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { OperationTable, Pager, useCursorPages } from './shared.tsx';

const EXPLANATION = {
  UNKNOWN:
    'The outcome of a send is not known. Funds stay held. The worker reconciles against the custodian and the chain before anything is resent; a person resolves only with evidence.',
  FAILED_TERMINAL:
    'Stopped for a person: funds stay held. Investigate, then resolve with evidence or escalate to a named owner.',
} as const;

/** The UNKNOWN or FAILED_TERMINAL queue, oldest first, with age and owner and the runbook actions. */
export function AttentionQueue({ state }: { state: 'UNKNOWN' | 'FAILED_TERMINAL' }) {
  const pages = useCursorPages();
  const queue = useQuery({
    queryKey: ['staff', 'queue', state, pages.cursor ?? null],
    queryFn: () =>
      api.staff.queue.query({ state, limit: 25, ...(pages.cursor ? { cursor: pages.cursor } : {}) }),
  });
  return (
    <Stack>
      <Title order={1} size="h2">
        {state} queue
      </Title>
      <Text size="sm">{EXPLANATION[state]}</Text>
      {queue.isPending ? <Loader aria-label="Loading queue" /> : null}
      <ProblemAlert error={queue.error} />
      {queue.data?.items.length === 0 ? <Text>The queue is empty.</Text> : null}
      {queue.data && queue.data.items.length > 0 ? (
        <>
          <OperationTable items={queue.data.items} caption={`${state} withdrawals, oldest first`} />
          {queue.data.items.map((item) => (
            <RunbookActions key={item.operationId} item={item} />
          ))}
        </>
      ) : null}
      <Pager pages={pages} nextCursor={queue.data?.nextCursor} />
    </Stack>
  );
}

/** Escalate (name an owner), saying what it records; resolving is proposed on the operation's page. */
export function RunbookActions({ item }: { item: StaffOperationView }) {
  const queryClient = useQueryClient();
  const [owner, setOwner] = useState('');
  const [ownerReason, setOwnerReason] = useState('');
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff'] });
  const escalate = useMutation({
    mutationFn: () =>
      api.staff.escalate.mutate({ operationId: item.operationId, owner, reason: ownerReason }),
    onSuccess: refresh,
  });
  return (
    <Paper withBorder p="sm" component="section" aria-label={`Actions for ${item.reference}`}>
      <Stack gap="xs">
        <Text fw={600}>
          Actions for <Code>{item.reference}</Code> (owner: {item.owner ?? 'unassigned'})
        </Text>
        <form
          onSubmit={(event: FormEvent) => {
            event.preventDefault();
            escalate.mutate();
          }}
        >
          <Group align="end" wrap="wrap">
            <TextInput
              label="Escalate to owner"
              value={owner}
              onChange={(e) => setOwner(e.currentTarget.value)}
              required
            />
            <TextInput
              label="Why"
              value={ownerReason}
              onChange={(e) => setOwnerReason(e.currentTarget.value)}
              required
            />
            <Button type="submit" variant="light" loading={escalate.isPending}>
              Escalate
            </Button>
          </Group>
          <Text size="xs" c="dimmed">
            Records in the history: the new owner, the previous owner, your reason, and you as the actor.
          </Text>
        </form>
        <ProblemAlert error={escalate.error} title="Escalation refused" />
        <Text size="sm">
          To resolve it, open the operation:{' '}
          <Link href={`/operations/${item.operationId}`}>propose a resolution</Link>. One staff member
          proposes, another with the approver role approves, and the chain or custodian must prove it.
        </Text>
      </Stack>
    </Paper>
  );
}
