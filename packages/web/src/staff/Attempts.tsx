import { roleAllows, type StaffOperationView } from '@idem/contracts';
import {
  Badge,
  Button,
  Code,
  Group,
  Loader,
  Paper,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useStaff } from './session.tsx';

const GWEI = 1_000_000_000n;

/** Wei per gas as gwei with up to three decimals (exact integer arithmetic, no floats). */
function gwei(wei: string): string {
  const value = BigInt(wei);
  const whole = value / GWEI;
  const milli = ((value % GWEI) * 1000n) / GWEI;
  return milli === 0n
    ? `${whole} gwei`
    : `${whole}.${milli.toString().padStart(3, '0').replace(/0+$/, '')} gwei`;
}

const STATUS_COLORS: Record<string, string> = {
  mined: 'teal.9',
  latest: 'blue.8',
  superseded: 'gray.7',
  not_mined: 'gray.7',
};

/**
 * A chain withdrawal's signed attempts: the original and every fee bump or cancel, all
 * with one nonce, so at most one is ever mined. "Bump fee" asks the worker for a higher fee within
 * the approved cap (operate permission); "Propose cancel" is a four-eyes proposal.
 */
export function Attempts({ operation }: { operation: StaffOperationView }) {
  const me = useStaff();
  const queryClient = useQueryClient();
  const attempts = useQuery({
    queryKey: ['staff', 'attempts', operation.operationId],
    queryFn: () => api.staff.attempts.query({ operationId: operation.operationId }),
    // While it can still be replaced, the worker may sign a bump or cancel at any pass: keep it fresh.
    refetchInterval: (query) => (query.state.data?.replaceable ? 3_000 : false),
  });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff'] });
  if (attempts.isPending) return <Loader aria-label="Loading attempts" />;
  if (attempts.error) return <ProblemAlert error={attempts.error} />;
  const data = attempts.data;
  if (data.attempts.length === 0) {
    return (
      <Text size="sm" data-testid="attempts-none">
        No signed attempt yet.
      </Text>
    );
  }
  const mayOperate = roleAllows(me.role, 'operate');
  return (
    <Paper withBorder p="sm" component="section" aria-label="Signed attempts">
      <Stack gap="xs">
        <Title order={2} size="h4">
          Signed attempts (nonce {data.attempts[0]?.nonce})
        </Title>
        <Table fz="sm" data-testid="attempts">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>#</Table.Th>
              <Table.Th>Kind</Table.Th>
              <Table.Th>Status</Table.Th>
              <Table.Th>Max fee</Table.Th>
              <Table.Th>Priority fee</Table.Th>
              <Table.Th>Transaction</Table.Th>
              <Table.Th>Requested by</Table.Th>
              <Table.Th>When</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {data.attempts.map((a) => (
              <Table.Tr key={a.attemptNo}>
                <Table.Td>{a.attemptNo}</Table.Td>
                <Table.Td>{a.kind}</Table.Td>
                <Table.Td>
                  <Badge color={STATUS_COLORS[a.status] ?? 'gray.7'} variant="filled">
                    {a.status}
                  </Badge>
                </Table.Td>
                <Table.Td ff="monospace">{gwei(a.maxFeePerGas)}</Table.Td>
                <Table.Td ff="monospace">{gwei(a.maxPriorityFeePerGas)}</Table.Td>
                <Table.Td>
                  <Code style={{ wordBreak: 'break-all' }}>{a.txHash}</Code>
                </Table.Td>
                <Table.Td>{a.requestedBy ?? a.createdBy}</Table.Td>
                <Table.Td>{formatTime(a.createdAt)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
        <Text size="sm">
          Fee cap in force:{' '}
          {data.feeCap.capMinor === null
            ? 'none (the rail’s limit applies)'
            : `${data.feeCap.capMinor} wei total`}
          {data.feeCap.version > 0 ? ` (raised, version ${data.feeCap.version})` : ''}
          {data.cancelApproved ? '. A cancel is approved: the worker replaces the payment with it.' : ''}
        </Text>
        {data.replaceable && mayOperate && !data.cancelApproved ? (
          <Group align="flex-start">
            <BumpFee operationId={operation.operationId} onDone={refresh} />
            <ProposeCancel operationId={operation.operationId} onDone={refresh} />
          </Group>
        ) : null}
      </Stack>
    </Paper>
  );
}

function BumpFee({ operationId, onDone }: { operationId: string; onDone: () => void }) {
  const [reason, setReason] = useState('');
  const bump = useMutation({
    mutationFn: () => api.staff.bumpFee.mutate({ operationId, reason }),
    onSuccess: () => {
      setReason('');
      onDone();
    },
  });
  return (
    <form
      aria-label="Bump fee"
      onSubmit={(event: FormEvent) => {
        event.preventDefault();
        bump.mutate();
      }}
    >
      <Stack gap={4}>
        <TextInput
          label="Why bump the fee"
          value={reason}
          onChange={(e) => setReason(e.currentTarget.value)}
          required
        />
        <Button type="submit" loading={bump.isPending}>
          Bump fee
        </Button>
        {bump.isSuccess ? (
          <Text size="xs" role="status">
            Bump requested: the worker signs it within the fee cap on its next pass.
          </Text>
        ) : null}
        <ProblemAlert error={bump.error} title="Bump refused" />
      </Stack>
    </form>
  );
}

function ProposeCancel({ operationId, onDone }: { operationId: string; onDone: () => void }) {
  const [idempotencyKey] = useState(() => `cancel-${crypto.randomUUID()}`);
  const [reason, setReason] = useState('');
  const proposeCancel = useMutation({
    mutationFn: () =>
      api.staffProposals.propose.mutate({
        kind: 'cancel_withdrawal',
        idempotencyKey,
        payload: { operationId, reason },
      }),
    onSuccess: onDone,
  });
  return (
    <form
      aria-label="Propose cancel"
      onSubmit={(event: FormEvent) => {
        event.preventDefault();
        proposeCancel.mutate();
      }}
    >
      <Stack gap={4}>
        <TextInput
          label="Why cancel"
          value={reason}
          onChange={(e) => setReason(e.currentTarget.value)}
          required
        />
        <Button type="submit" color="red.8" loading={proposeCancel.isPending}>
          Propose cancel
        </Button>
        {proposeCancel.data ? (
          <Text size="xs" role="status">
            Cancel proposed; another staff member approves it in <Link href="/proposals">Proposals</Link>.
          </Text>
        ) : null}
        <ProblemAlert error={proposeCancel.error} title="Proposal refused" />
      </Stack>
    </form>
  );
}
