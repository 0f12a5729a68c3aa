import type { StaffOperationView } from '@idem/contracts';
import { Button, Code, Group, Loader, Paper, Select, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
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

/** Escalate (name an owner) and resolve (with evidence), each saying what it records. */
export function RunbookActions({ item }: { item: StaffOperationView }) {
  const queryClient = useQueryClient();
  const [owner, setOwner] = useState('');
  const [ownerReason, setOwnerReason] = useState('');
  const [toState, setToState] = useState<string | null>(null);
  const [summary, setSummary] = useState('');
  const [txHash, setTxHash] = useState('');
  const [custodianRecord, setCustodianRecord] = useState('');
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff'] });
  const escalate = useMutation({
    mutationFn: () =>
      api.staff.escalate.mutate({ operationId: item.operationId, owner, reason: ownerReason }),
    onSuccess: refresh,
  });
  const resolve = useMutation({
    mutationFn: () =>
      api.staff.resolve.mutate({
        operationId: item.operationId,
        toState: toState === 'CONFIRMED' ? 'CONFIRMED' : 'VERIFIED_NOT_SENT',
        evidence: {
          summary,
          ...(txHash.trim() ? { txHash: txHash.trim() } : {}),
          ...(custodianRecord.trim() ? { custodianRecord: custodianRecord.trim() } : {}),
        },
      }),
    onSuccess: refresh,
  });
  const resolutions = item.allowedNext.filter((next) => next === 'CONFIRMED' || next === 'VERIFIED_NOT_SENT');
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
        <form
          onSubmit={(event: FormEvent) => {
            event.preventDefault();
            resolve.mutate();
          }}
        >
          <Stack gap="xs">
            <Select
              label="Resolve as"
              data={resolutions.map((next) => ({
                value: next,
                label:
                  next === 'CONFIRMED'
                    ? 'CONFIRMED: it left, found on chain'
                    : 'VERIFIED_NOT_SENT: release the hold',
              }))}
              value={toState}
              onChange={setToState}
              required
            />
            <TextInput
              label="Evidence: what you checked"
              value={summary}
              onChange={(e) => setSummary(e.currentTarget.value)}
              required
            />
            <TextInput
              label="Transaction hash found"
              value={txHash}
              onChange={(e) => setTxHash(e.currentTarget.value)}
            />
            <TextInput
              label="Custodian record"
              value={custodianRecord}
              onChange={(e) => setCustodianRecord(e.currentTarget.value)}
            />
            <Text size="xs" c="dimmed">
              Records in the history: the new state, your evidence (summary, transaction hash, custodian
              record), the state it came from, and you as the actor. Confirming needs the transaction hash.
            </Text>
            <Group>
              <Button type="submit" loading={resolve.isPending} disabled={!toState}>
                Resolve with evidence
              </Button>
            </Group>
          </Stack>
        </form>
        <ProblemAlert error={resolve.error} title="Resolution refused" />
      </Stack>
    </Paper>
  );
}
