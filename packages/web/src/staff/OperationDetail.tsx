import {
  describeSettlementReason,
  type ProposalView,
  roleAllows,
  type StaffOperationView,
  type StaffRole,
} from '@idem/contracts';
import {
  Badge,
  Button,
  Code,
  Group,
  Loader,
  Paper,
  Select,
  Stack,
  Table,
  Text,
  TextInput,
  Timeline,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';
import { displayAmount, formatAge, formatTime, stateColor } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { Attempts } from './Attempts.tsx';
import { RunbookActions } from './AttentionQueue.tsx';
import { decideProposal } from './proposal-decision.ts';
import { StopWithdrawal } from './StopWithdrawal.tsx';
import { useStaff } from './session.tsx';
import { useStaffAssets } from './shared.tsx';

/** One operation as staff see it, with its full history: actor, reason and evidence of each step. */
export function OperationDetail({ operationId }: { operationId: string }) {
  const detail = useQuery({
    queryKey: ['staff', 'operation', operationId],
    queryFn: () => api.staff.get.query({ operationId }),
  });
  const assets = useStaffAssets().data ?? [];
  if (detail.isPending) return <Loader aria-label="Loading operation" />;
  if (detail.error) {
    return (
      <Stack>
        <Title order={1} size="h2">
          Operation
        </Title>
        <ProblemAlert error={detail.error} />
      </Stack>
    );
  }
  const { operation, timeline } = detail.data;
  return (
    <Stack>
      <Title order={1} size="h2">
        {operation.kind} <Code>{operation.reference}</Code>
      </Title>
      <Paper withBorder p="sm">
        <Table variant="vertical" fz="sm">
          <Table.Tbody>
            <Table.Tr>
              <Table.Th w={170}>State</Table.Th>
              <Table.Td>
                <Badge color={stateColor(operation.state)} variant="filled">
                  {operation.state}
                </Badge>{' '}
                for {formatAge(operation.ageSeconds)}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Amount</Table.Th>
              <Table.Td ff="monospace">
                {displayAmount(operation.amountMinor, operation.asset, assets)}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Account</Table.Th>
              <Table.Td>{operation.accountId}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Destination</Table.Th>
              <Table.Td>
                <Code style={{ wordBreak: 'break-all' }}>{operation.destination ?? 'none'}</Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Transaction hash</Table.Th>
              <Table.Td>
                <Code style={{ wordBreak: 'break-all' }}>{operation.txHash ?? 'none yet'}</Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Payload hash</Table.Th>
              <Table.Td>
                <Code style={{ wordBreak: 'break-all' }}>{operation.payloadHash}</Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Fee cap (wei of the network's native asset)</Table.Th>
              <Table.Td>{operation.feeCapMinor ?? 'none'}</Table.Td>
            </Table.Tr>
            {operation.waitingReason ? (
              <Table.Tr>
                <Table.Th>Waiting</Table.Th>
                <Table.Td>{operation.waitingReason}</Table.Td>
              </Table.Tr>
            ) : null}
            <Table.Tr>
              <Table.Th>Owner</Table.Th>
              <Table.Td>{operation.owner ?? 'unassigned'}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Requested by</Table.Th>
              <Table.Td>{operation.requester}</Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Approvals</Table.Th>
              <Table.Td data-testid="approvals-summary">
                {operation.approvals.filter((entry) => entry.decision === 'approve').length} given
                {operation.approvalsRequired === null
                  ? '; not reviewed yet'
                  : ` of ${operation.approvalsRequired} required`}
              </Table.Td>
            </Table.Tr>
          </Table.Tbody>
        </Table>
      </Paper>
      <Decisions operation={operation} />
      {operation.state === 'UNKNOWN' || operation.state === 'FAILED_TERMINAL' ? (
        <RunbookActions item={operation} />
      ) : null}
      <StopWithdrawal operation={operation} />
      <ManualResolution operation={operation} />
      {operation.kind === 'withdrawal' ? <Attempts operation={operation} /> : null}
      <Title order={2} size="h3">
        History
      </Title>
      <Timeline active={timeline.length - 1} bulletSize={18} lineWidth={2} data-testid="staff-timeline">
        {timeline.map((entry) => (
          <Timeline.Item key={entry.seq} title={`${entry.fromState ?? 'new'} → ${entry.toState}`}>
            <Text size="sm">{entry.reason}</Text>
            <Text size="xs" c="dimmed">
              {formatTime(entry.createdAt)} by {entry.actor}
            </Text>
            {entry.evidence ? (
              <Code block style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>
                {JSON.stringify(entry.evidence, null, 2)}
              </Code>
            ) : null}
          </Timeline.Item>
        ))}
      </Timeline>
    </Stack>
  );
}

/**
 * Every approval decision with who, when, why, and whether it was given for the payload the
 * withdrawal still carries (a decision binds the payload hash, C02/C24).
 */
function Decisions({ operation }: { operation: StaffOperationView }) {
  if (operation.approvals.length === 0) {
    return (
      <Text size="sm" data-testid="approvals-none">
        No approval decision recorded.
      </Text>
    );
  }
  return (
    <Paper withBorder p="sm" component="section" aria-label="Approval decisions">
      <Stack gap="xs">
        <Title order={2} size="h4">
          Approval decisions
        </Title>
        <Table.ScrollContainer minWidth={560}>
          <Table fz="sm" data-testid="approvals-table">
            <Table.Thead>
              <Table.Tr>
                <Table.Th scope="col">Decision</Table.Th>
                <Table.Th scope="col">By</Table.Th>
                <Table.Th scope="col">When</Table.Th>
                <Table.Th scope="col">Reason</Table.Th>
                <Table.Th scope="col">Signed with</Table.Th>
                <Table.Th scope="col">Payload hash</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {operation.approvals.map((entry) => (
                <Table.Tr key={`${entry.approver}-${entry.createdAt}`}>
                  <Table.Td>{entry.decision}</Table.Td>
                  <Table.Td>
                    <Code>{entry.approver}</Code>
                  </Table.Td>
                  <Table.Td>{formatTime(entry.createdAt)}</Table.Td>
                  <Table.Td>{entry.reason ?? ''}</Table.Td>
                  <Table.Td data-testid="approval-signed-with">
                    {entry.passkeyCredentialId ? 'passkey' : 'no passkey'}
                  </Table.Td>
                  <Table.Td>
                    {entry.payloadHash === operation.payloadHash
                      ? 'matches the payload'
                      : 'DIFFERS from the payload'}
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      </Stack>
    </Paper>
  );
}

const RAIL_MEANING: Record<string, string> = {
  PAID: 'the rail shows it paid with the approved terms, at the asset’s confirmation depth',
  NOT_SENT: 'the rail shows nothing of ours can still be paid',
  UNPROVEN: 'the rail does not prove it (yet); approving now will be refused',
};

/** The rail's reason code with its words, so the approver reads why (e.g. not final yet). */
function railReason(reason: string): string {
  const words = describeSettlementReason(reason);
  return words === reason ? reason : `${reason}: ${words}`;
}

/**
 * Manual resolution, four eyes (I11-F4): one staff member proposes, another with the approver
 * role approves, bound to the hash of the proposal and the evidence the system gathered. The
 * server asks the chain or the custodian again at the approval; without proof nothing moves.
 */
function ManualResolution({ operation }: { operation: StaffOperationView }) {
  const me = useStaff();
  const queryClient = useQueryClient();
  const proposals = useQuery({
    queryKey: ['staff', 'proposals', 'operation', operation.operationId],
    queryFn: () =>
      api.staffProposals.list.query({ targetOperationId: operation.operationId, state: 'PENDING', limit: 5 }),
  });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff'] });
  const pending = proposals.data?.items.find((p) => p.kind === 'resolve_withdrawal');
  const stuck = operation.state === 'UNKNOWN' || operation.state === 'FAILED_TERMINAL';
  if (proposals.isPending) return <Loader aria-label="Loading proposals" />;
  if (pending) {
    return (
      <ResolutionProposal proposal={pending} actor={`staff:${me.userId}`} role={me.role} onDone={refresh} />
    );
  }
  if (!stuck) return <ProblemAlert error={proposals.error} />;
  if (!roleAllows(me.role, 'operate')) {
    return (
      <Text size="sm" c="dimmed">
        No resolution is proposed. An operator proposes one; another staff member with the approver role
        approves it.
      </Text>
    );
  }
  return <ProposeResolution operation={operation} onDone={refresh} />;
}

function ProposeResolution({ operation, onDone }: { operation: StaffOperationView; onDone: () => void }) {
  const [idempotencyKey] = useState(() => `resolve-${crypto.randomUUID()}`);
  const [toState, setToState] = useState<string | null>(null);
  const [summary, setSummary] = useState('');
  const [txHash, setTxHash] = useState('');
  const proposeResolution = useMutation({
    mutationFn: () =>
      api.staffProposals.propose.mutate({
        kind: 'resolve_withdrawal',
        idempotencyKey,
        payload: {
          operationId: operation.operationId,
          toState: toState === 'CONFIRMED' ? 'CONFIRMED' : 'VERIFIED_NOT_SENT',
          summary,
          ...(toState === 'CONFIRMED' && txHash.trim() ? { txHash: txHash.trim() } : {}),
        },
      }),
    onSuccess: onDone,
  });
  return (
    <Paper withBorder p="sm" component="section" aria-label="Propose a resolution">
      <form
        onSubmit={(event: FormEvent) => {
          event.preventDefault();
          proposeResolution.mutate();
        }}
      >
        <Stack gap="xs">
          <Title order={2} size="h4">
            Propose a resolution
          </Title>
          <Select
            label="Resolve as"
            data={[
              { value: 'CONFIRMED', label: 'CONFIRMED: it left, found on chain or at the custodian' },
              {
                value: 'VERIFIED_NOT_SENT',
                label: 'VERIFIED_NOT_SENT: nothing can still be paid; release the hold',
              },
            ]}
            value={toState}
            onChange={setToState}
            required
          />
          <TextInput
            label="What you checked"
            value={summary}
            onChange={(e) => setSummary(e.currentTarget.value)}
            required
          />
          {toState === 'CONFIRMED' ? (
            <TextInput
              label="Transaction that paid (if not the stored one)"
              value={txHash}
              onChange={(e) => setTxHash(e.currentTarget.value)}
            />
          ) : null}
          <Text size="xs" c="dimmed">
            Nothing moves now. The system asks the chain or the custodian and shows its answer with your
            proposal; another staff member with the approver role must approve it, and the system asks again
            then: releasing needs the nonce consumed by another transaction at the asset’s depth and that
            transaction final (or the custodian’s “no record”), confirming needs the transaction found with
            the approved terms.
          </Text>
          <Group>
            <Button type="submit" loading={proposeResolution.isPending} disabled={!toState}>
              Propose resolution
            </Button>
          </Group>
        </Stack>
      </form>
      <ProblemAlert error={proposeResolution.error} title="Proposal refused" />
    </Paper>
  );
}

function ResolutionProposal({
  proposal,
  actor,
  role,
  onDone,
}: {
  proposal: ProposalView;
  actor: string;
  role: StaffRole;
  onDone: () => void;
}) {
  const payload = proposal.payload as { toState?: string; summary?: string; txHash?: string };
  const rail = (proposal.evidence?.rail ?? null) as {
    verdict?: string;
    source?: string;
    observedAt?: string;
    detail?: { reason?: string };
  } | null;
  const decide = useMutation({
    mutationFn: (decision: 'approve' | 'reject') => decideProposal(proposal, decision),
    onSuccess: onDone,
  });
  const mayDecide = roleAllows(role, 'decide') && actor !== proposal.proposedBy;
  return (
    <Paper
      withBorder
      p="sm"
      component="section"
      aria-label="Proposed resolution"
      data-testid="resolution-proposal"
    >
      <Stack gap="xs">
        <Title order={2} size="h4">
          Proposed resolution: {payload.toState}
        </Title>
        <Table variant="vertical" fz="sm">
          <Table.Tbody>
            <Table.Tr>
              <Table.Th w={170}>What was checked</Table.Th>
              <Table.Td>{payload.summary}</Table.Td>
            </Table.Tr>
            {payload.txHash ? (
              <Table.Tr>
                <Table.Th>Transaction named</Table.Th>
                <Table.Td>
                  <Code style={{ wordBreak: 'break-all' }}>{payload.txHash}</Code>
                </Table.Td>
              </Table.Tr>
            ) : null}
            <Table.Tr>
              <Table.Th>Proposed by</Table.Th>
              <Table.Td>
                {proposal.proposedBy} at {formatTime(proposal.proposedAt)}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Evidence gathered</Table.Th>
              <Table.Td data-testid="rail-evidence">
                {rail ? (
                  <>
                    <Badge variant="light">{rail.verdict}</Badge> from the {rail.source}
                    {rail.detail?.reason ? ` (${railReason(rail.detail.reason)})` : ''}:{' '}
                    {RAIL_MEANING[rail.verdict ?? ''] ?? ''}
                  </>
                ) : (
                  'none'
                )}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Hash you approve</Table.Th>
              <Table.Td>
                <Code data-testid="proposal-hash" style={{ wordBreak: 'break-all' }}>
                  {proposal.payloadHash}
                </Code>
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Approvals</Table.Th>
              <Table.Td data-testid="proposal-approvals">
                {proposal.approvalsGiven} of {proposal.approvalsRequired}; needs another staff member with the
                approver role (not the proposer)
              </Table.Td>
            </Table.Tr>
          </Table.Tbody>
        </Table>
        {proposal.evidence ? (
          <Code block style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>
            {JSON.stringify(proposal.evidence, null, 2)}
          </Code>
        ) : null}
        {mayDecide ? (
          <Group>
            <Button
              data-testid="proposal-approve"
              loading={decide.isPending}
              onClick={() => decide.mutate('approve')}
            >
              Approve resolution
            </Button>
            <Button
              variant="light"
              color="red"
              disabled={decide.isPending}
              onClick={() => decide.mutate('reject')}
            >
              Reject
            </Button>
          </Group>
        ) : (
          <Text size="sm" c="dimmed">
            {actor === proposal.proposedBy
              ? 'You proposed this; another staff member with the approver role must approve it.'
              : 'Only a staff member with the approver role may decide.'}
          </Text>
        )}
        <Text size="xs" c="dimmed">
          On approval the system asks the chain or the custodian again; if it does not prove this resolution,
          the approval is refused and nothing changes.
        </Text>
        <ProblemAlert error={decide.error} title="Approval refused" />
      </Stack>
    </Paper>
  );
}
