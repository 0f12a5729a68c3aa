import {
  Badge,
  Button,
  Code,
  Group,
  Loader,
  SegmentedControl,
  Stack,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/** Reconciliation breaks with class, owner and closure; closing needs evidence and never moves a balance. */
export function Breaks() {
  const [status, setStatus] = useState<'open' | 'closed'>('open');
  const breaks = useQuery({
    queryKey: ['staff', 'breaks', status],
    queryFn: () => api.staffConsole.breaks.query({ status }),
  });
  return (
    <Stack>
      <Title order={1} size="h2">
        Reconciliation breaks
      </Title>
      <SegmentedControl
        aria-label="Break status"
        value={status}
        onChange={(value) => setStatus(value === 'closed' ? 'closed' : 'open')}
        data={[
          { value: 'open', label: 'Open' },
          { value: 'closed', label: 'Closed' },
        ]}
      />
      {breaks.isPending ? <Loader aria-label="Loading breaks" /> : null}
      <ProblemAlert error={breaks.error} />
      {breaks.data?.length === 0 ? <Text>No {status} breaks.</Text> : null}
      {breaks.data?.map((row) => (
        <Stack
          key={row.breakId}
          gap={4}
          p="sm"
          style={{ border: '1px solid var(--mantine-color-gray-3)', borderRadius: 4 }}
        >
          <Group>
            <Badge variant="filled" tt="none">
              {row.breakClass}
            </Badge>
            <Code>{row.subject}</Code>
            <Text size="sm">owner: {row.owner}</Text>
            <Text size="sm">opened {formatTime(row.openedAt)}</Text>
          </Group>
          <Text size="sm">
            Ledger {row.ledgerAmountMinor ?? '–'} / observed {row.observedAmountMinor ?? '–'}{' '}
            {row.assetCode ?? ''} (minor units)
          </Text>
          {row.reason ? <Text size="sm">{row.reason}</Text> : null}
          {row.escalatedFrom ? (
            <Text size="sm">
              Escalated from timing break <Code>{row.escalatedFrom}</Code>
            </Text>
          ) : null}
          {row.status === 'closed' ? (
            <Text size="sm">
              Closed ({row.closedAs ?? 'resolved'}) by {row.closedBy} on{' '}
              {row.closedAt ? formatTime(row.closedAt) : '?'}: {JSON.stringify(row.closureEvidence)}
            </Text>
          ) : (
            <CloseBreak breakId={row.breakId} />
          )}
        </Stack>
      ))}
    </Stack>
  );
}

function CloseBreak({ breakId }: { breakId: string }) {
  const queryClient = useQueryClient();
  const [summary, setSummary] = useState('');
  const close = useMutation({
    mutationFn: () => api.staffConsole.closeBreak.mutate({ breakId, evidence: { summary } }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['staff', 'breaks'] }),
  });
  return (
    <form
      onSubmit={(event: FormEvent) => {
        event.preventDefault();
        close.mutate();
      }}
    >
      <Group align="end">
        <TextInput
          label="Closure evidence"
          value={summary}
          onChange={(e) => setSummary(e.currentTarget.value)}
          required
        />
        <Button type="submit" variant="light" loading={close.isPending}>
          Close break
        </Button>
      </Group>
      <Text size="xs" c="dimmed">
        Records: your evidence and you as the closer. No balance is adjusted.
      </Text>
      <ProblemAlert error={close.error} title="Close refused" />
    </form>
  );
}
