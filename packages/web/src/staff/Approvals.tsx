import type { StaffOperationView } from '@idem/contracts';
import {
  Alert,
  Badge,
  Button,
  Card,
  Code,
  Group,
  Loader,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { type PublicKeyCredentialRequestOptionsJSON, startAuthentication } from '@simplewebauthn/browser';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { displayAmount, formatAge } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useStaff } from './session.tsx';
import { Pager, useCursorPages, useStaffAssets } from './shared.tsx';

/**
 * Withdrawals waiting for a person: the exact payload, its hash, the risk flags and the four-eyes
 * status. Approving sends the hash shown here; the server refuses a stale hash and the requester.
 */
export function Approvals() {
  const pages = useCursorPages();
  // Shown above the queue: a completed approval leaves the queue, and its card with it.
  const [lastDecision, setLastDecision] = useState<string | null>(null);
  const queue = useQuery({
    queryKey: ['staff', 'approvals', pages.cursor ?? null],
    queryFn: () =>
      api.staff.approvals.query({ limit: 10, ...(pages.cursor ? { cursor: pages.cursor } : {}) }),
  });
  return (
    <Stack>
      <Title order={1} size="h2">
        Approval queue
      </Title>
      {lastDecision ? (
        <Alert color="green" role="status" data-testid="decision-result">
          {lastDecision}
        </Alert>
      ) : null}
      {queue.isPending ? <Loader aria-label="Loading approvals" /> : null}
      <ProblemAlert error={queue.error} />
      {queue.data?.items.length === 0 ? <Text>Nothing is waiting for approval.</Text> : null}
      {queue.data?.items.map((item) => (
        <ApprovalCard key={item.operationId} item={item} onDecided={setLastDecision} />
      ))}
      <Pager pages={pages} nextCursor={queue.data?.nextCursor} />
    </Stack>
  );
}

/** Decide one withdrawal: with an active passkey, this device signs the payload hash shown and the decision (I32-PASSKEY). */
function useDecision(item: StaffOperationView, reason: string, onDecided: (summary: string) => void) {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: async (decision: 'approve' | 'reject') => {
      const bound = { operationId: item.operationId, payloadHash: item.payloadHash, decision };
      const optionsJSON = (await api.staffPasskeys.approvalOptions.query(
        bound,
      )) as unknown as PublicKeyCredentialRequestOptionsJSON | null;
      const assertion = optionsJSON ? await startAuthentication({ optionsJSON }) : null;
      return api.staff.decide.mutate({
        ...bound,
        ...(reason.trim() ? { reason: reason.trim() } : {}),
        ...(assertion
          ? {
              assertion: assertion as NonNullable<Parameters<typeof api.staff.decide.mutate>[0]['assertion']>,
            }
          : {}),
      });
    },
    onSuccess: (result) => {
      onDecided(
        `Recorded on ${item.reference}: ${result.approvalsGiven} of ${result.approvalsRequired} approvals; the withdrawal is ${result.state}.`,
      );
      void queryClient.invalidateQueries({ queryKey: ['staff'] });
    },
  });
}

function ApprovalCard({ item, onDecided }: { item: StaffOperationView; onDecided(summary: string): void }) {
  const me = useStaff();
  const assets = useStaffAssets().data ?? [];
  const [reason, setReason] = useState('');
  const decide = useDecision(item, reason, onDecided);
  const approvalsGiven = item.approvals.filter(
    (entry) => entry.decision === 'approve' && entry.payloadHash === item.payloadHash,
  );
  const required = item.approvalsRequired ?? 1;
  const headingId = `approval-${item.operationId}`;
  return (
    <Card
      withBorder
      component="article"
      aria-labelledby={headingId}
      data-testid="approval-card"
      data-reference={item.reference}
    >
      <Stack gap="xs">
        <Group justify="space-between">
          <Title order={2} size="h4" id={headingId}>
            <Link href={`/operations/${item.operationId}`}>{item.reference}</Link>
          </Title>
          <Badge variant="filled" data-testid="four-eyes-status">
            {approvalsGiven.length} of {required} approval{required === 1 ? '' : 's'}
            {required > 1 ? ' (four eyes)' : ''}
          </Badge>
        </Group>
        <Table variant="vertical" withTableBorder fz="sm">
          <Table.Tbody>
            <Table.Tr>
              <Table.Th w={170}>Amount</Table.Th>
              <Table.Td ff="monospace">
                {displayAmount(item.amountMinor, item.asset, assets)} ({item.amountMinor} minor units)
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Account</Table.Th>
              <Table.Td>{item.accountId}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Network</Table.Th>
              <Table.Td>{item.network}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Destination</Table.Th>
              <Table.Td>
                <Code style={{ wordBreak: 'break-all' }}>{item.destination}</Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Memo</Table.Th>
              <Table.Td>{item.memo ?? 'none'}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Fee cap</Table.Th>
              <Table.Td>{item.feeCapMinor ?? 'none'}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Policy version</Table.Th>
              <Table.Td>{item.policyVersion}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Payload hash</Table.Th>
              <Table.Td>
                <Code style={{ wordBreak: 'break-all' }} data-testid="payload-hash">
                  {item.payloadHash}
                </Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Risk flags</Table.Th>
              <Table.Td>
                <Group gap={4}>
                  {(item.riskFlags ?? []).map((flag) => (
                    <Badge key={flag} color="yellow" variant="filled" tt="none">
                      {flag}
                    </Badge>
                  ))}
                </Group>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Requested by</Table.Th>
              <Table.Td>
                {item.requester}
                {item.requester === `staff:${me.userId}` ? ' (you: you cannot approve it)' : ''}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Approvals</Table.Th>
              <Table.Td>
                {item.approvals.length === 0
                  ? 'none yet'
                  : item.approvals.map((entry) => `${entry.decision} by ${entry.approver}`).join('; ')}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Waiting for</Table.Th>
              <Table.Td>{formatAge(item.ageSeconds)}</Table.Td>
            </Table.Tr>
          </Table.Tbody>
        </Table>
        <TextInput
          label="Reason (recorded with your decision)"
          value={reason}
          onChange={(event) => setReason(event.currentTarget.value)}
          maxLength={500}
        />
        <ProblemAlert error={decide.error} title="Decision refused" />
        <Group>
          <Button onClick={() => decide.mutate('approve')} loading={decide.isPending} data-testid="approve">
            Approve hash {item.payloadHash.slice(0, 8)}…
          </Button>
          <Button
            color="red"
            variant="light"
            onClick={() => decide.mutate('reject')}
            disabled={decide.isPending}
          >
            Reject
          </Button>
        </Group>
      </Stack>
    </Card>
  );
}
