import { roleAllows, type StaffOperationView } from '@idem/contracts';
import { Button, Group, Paper, Stack, Text, Textarea, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useStaff } from './session.tsx';

const REASON_MIN = 10;

/**
 * Stop before signing: an APPROVED withdrawal that no worker has leased is rejected and
 * its hold released. Stopping only lowers risk, so one staff member with the approver or operator
 * role may do it; the reason is recorded in the history. Once a worker has leased it the server
 * refuses: it is being signed.
 */
export function StopWithdrawal({ operation }: { operation: StaffOperationView }) {
  const me = useStaff();
  const queryClient = useQueryClient();
  const [reason, setReason] = useState('');
  const stop = useMutation({
    mutationFn: () => api.staff.stop.mutate({ operationId: operation.operationId, reason: reason.trim() }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['staff'] }),
  });
  if (operation.kind !== 'withdrawal' || operation.state !== 'APPROVED') return null;
  if (!roleAllows(me.role, 'decide') && !roleAllows(me.role, 'operate')) return null;
  return (
    <Paper withBorder p="sm" component="section" aria-label="Stop before signing">
      <form
        onSubmit={(event: FormEvent) => {
          event.preventDefault();
          stop.mutate();
        }}
      >
        <Stack gap="xs">
          <Title order={2} size="h4">
            Stop before signing
          </Title>
          <Text size="sm">
            No worker has signed this withdrawal yet. Stopping it rejects it and releases the customer’s held
            funds; it cannot be undone. If a worker claims it first, the stop is refused.
          </Text>
          <Textarea
            label="Why stop it"
            description={`At least ${REASON_MIN} characters; recorded in the history with your name.`}
            value={reason}
            onChange={(e) => setReason(e.currentTarget.value)}
            required
            minLength={REASON_MIN}
            maxLength={500}
          />
          <Group>
            <Button
              type="submit"
              color="red"
              loading={stop.isPending}
              disabled={reason.trim().length < REASON_MIN}
            >
              Stop withdrawal
            </Button>
          </Group>
          <ProblemAlert error={stop.error} title="Stop refused" />
        </Stack>
      </form>
    </Paper>
  );
}
