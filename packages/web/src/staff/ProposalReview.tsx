import { type ProposalView, roleAllows } from '@idem/contracts';
import { Badge, Button, Card, Code, Group, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { type AssetInfo, displayAmount, formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { decideProposal } from './proposal-decision.ts';
import { useStaff } from './session.tsx';
import { useStaffAssets } from './shared.tsx';

export const KIND_LABELS: Record<ProposalView['kind'], string> = {
  adjustment: 'Adjustment',
  manual_credit: 'Manual credit',
  resolve_withdrawal: 'Withdrawal resolution',
  cancel_withdrawal: 'Withdrawal cancel',
  raise_fee_cap: 'Fee cap raise',
  control_change: 'Control change (admins)',
};

const STATE_COLORS: Record<ProposalView['state'], string> = {
  PENDING: 'blue.8',
  APPROVED: 'yellow.9',
  EXECUTED: 'teal.9',
  REJECTED: 'gray.7',
  CANCELLED: 'gray.7',
  EXPIRED: 'gray.7',
};

/**
 * One proposal as an approver must see it before deciding: what it does (amounts in exact display
 * units), the evidence the system gathered, the hash that binds both, who proposed it and who has
 * decided. Approve and Reject send the hash shown here (signed with the member's passkey when they
 * have one); the server refuses the proposer, a role without `decide`, and a hash that no longer
 * matches.
 */
export function ProposalReview({
  proposal,
  onDecided,
}: {
  proposal: ProposalView;
  onDecided?: (summary: string) => void;
}) {
  const me = useStaff();
  const assets = useStaffAssets().data ?? [];
  const queryClient = useQueryClient();
  const [reason, setReason] = useState('');
  const mine = proposal.proposedBy === `staff:${me.userId}`;
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff'] });
  const decide = useMutation({
    mutationFn: (decision: 'approve' | 'reject') => decideProposal(proposal, decision, reason),
    onSuccess: (result) => {
      onDecided?.(
        `${KIND_LABELS[proposal.kind]} ${proposal.proposalId.slice(0, 8)}: ${result.approvalsGiven} of ${result.approvalsRequired} approvals; the proposal is ${result.proposal.state}.`,
      );
      refresh();
    },
  });
  const cancel = useMutation({
    mutationFn: () => api.staffProposals.cancel.mutate({ proposalId: proposal.proposalId }),
    onSuccess: () => {
      onDecided?.(`${KIND_LABELS[proposal.kind]} ${proposal.proposalId.slice(0, 8)} cancelled.`);
      refresh();
    },
  });
  const pending = proposal.state === 'PENDING';
  const headingId = `proposal-${proposal.proposalId}`;
  const operationId = typeof proposal.result?.operationId === 'string' ? proposal.result.operationId : null;
  return (
    <Card
      withBorder
      component="article"
      aria-labelledby={headingId}
      data-testid="proposal-card"
      data-proposal-id={proposal.proposalId}
      data-kind={proposal.kind}
    >
      <Stack gap="xs">
        <Group justify="space-between">
          <Title order={2} size="h4" id={headingId}>
            {KIND_LABELS[proposal.kind]} <Code>{proposal.proposalId.slice(0, 8)}</Code>
          </Title>
          <Group gap="xs">
            <Badge
              color={STATE_COLORS[proposal.state]}
              variant="filled"
              tt="none"
              data-testid="proposal-state"
            >
              {proposal.state}
            </Badge>
            <Badge variant="outline" tt="none" data-testid="proposal-approvals">
              {proposal.approvalsGiven} of {proposal.approvalsRequired} approval
              {proposal.approvalsRequired === 1 ? '' : 's'}
            </Badge>
            {proposal.state === 'PENDING' ? (
              <Badge variant="outline" color="gray" tt="none" data-testid="proposal-expires">
                expires {new Date(proposal.expiresAt).toLocaleString()}
              </Badge>
            ) : null}
          </Group>
        </Group>
        <Table variant="vertical" withTableBorder fz="sm">
          <Table.Tbody>
            {payloadRows(proposal, assets).map(([label, value]) => (
              <Row key={label} label={label}>
                {value}
              </Row>
            ))}
            <Row label="Evidence gathered">{evidenceOf(proposal, assets)}</Row>
            <Row label="Payload hash">
              <Code style={{ wordBreak: 'break-all' }} data-testid="proposal-hash">
                {proposal.payloadHash}
              </Code>
            </Row>
            <Row label="Proposed by">
              {proposal.proposedBy}
              {mine ? ' (you: another person must approve it)' : ''} at {formatTime(proposal.proposedAt)}
            </Row>
            <Row label="Decisions">
              {proposal.decisions.length === 0
                ? `none yet; needs ${proposal.approvalsRequired} approval${proposal.approvalsRequired === 1 ? '' : 's'} from staff who may decide (approver or admin), not the proposer`
                : proposal.decisions.map((d) => (
                    <Text
                      key={d.approver}
                      fz="sm"
                      data-testid="proposal-decision"
                      data-signed-with={d.passkeyCredentialId ? 'passkey' : 'none'}
                    >
                      {`${d.decision} by ${d.approver} at ${formatTime(d.decidedAt)}${d.reason ? ` (${d.reason})` : ''}`}
                      {d.passkeyCredentialId ? ', signed with a passkey' : ''}
                    </Text>
                  ))}
            </Row>
            {proposal.targetOperationId ? (
              <Row label="Operation">
                <Link href={`/operations/${proposal.targetOperationId}`}>{proposal.targetOperationId}</Link>
              </Row>
            ) : null}
            {operationId ? (
              <Row label="Recorded as">
                <Link href={`/operations/${operationId}`} data-testid="proposal-operation">
                  operation {operationId}
                </Link>
              </Row>
            ) : null}
          </Table.Tbody>
        </Table>
        {pending && roleAllows(me.role, 'decide') && !mine ? (
          <>
            <TextInput
              label="Reason (recorded with your decision)"
              value={reason}
              onChange={(event) => setReason(event.currentTarget.value)}
              maxLength={500}
            />
            <ProblemAlert error={decide.error} title="Decision refused" />
            <Group>
              <Button
                onClick={() => decide.mutate('approve')}
                loading={decide.isPending}
                data-testid="proposal-approve"
              >
                Approve hash {proposal.payloadHash.slice(0, 8)}…
              </Button>
              <Button
                color="red"
                variant="light"
                onClick={() => decide.mutate('reject')}
                disabled={decide.isPending}
                data-testid="proposal-reject"
              >
                Reject
              </Button>
            </Group>
          </>
        ) : null}
        {pending && mine ? (
          <>
            <ProblemAlert error={cancel.error} title="Cancel refused" />
            <Group>
              <Button variant="default" onClick={() => cancel.mutate()} loading={cancel.isPending}>
                Cancel my proposal
              </Button>
            </Group>
          </>
        ) : null}
      </Stack>
    </Card>
  );
}

function Row({ label, children }: { label: string; children: ReactNode }) {
  return (
    <Table.Tr>
      <Table.Th w={170}>{label}</Table.Th>
      <Table.Td>{children}</Table.Td>
    </Table.Tr>
  );
}

const text = (value: unknown): string => (typeof value === 'string' ? value : JSON.stringify(value));

/** The payload in words, amounts in exact display units next to their minor units. */
function payloadRows(proposal: ProposalView, assets: AssetInfo[]): [string, ReactNode][] {
  const p = proposal.payload;
  const amount = (minor: unknown) => (
    <Text span ff="monospace" fz="sm" data-testid="proposal-amount">
      {displayAmount(text(minor), text(p.asset), assets)} ({text(minor)} minor units)
    </Text>
  );
  switch (proposal.kind) {
    case 'adjustment':
      return [
        ['Account', text(p.accountId)],
        [
          String(p.amountMinor).startsWith('-') ? 'Debit of available' : 'Credit to available',
          amount(p.amountMinor),
        ],
        ['Reason', text(p.reason)],
      ];
    case 'manual_credit':
      return [
        ['Account', text(p.accountId)],
        ['Credit', amount(p.amountMinor)],
        ['Where the money is seen', <Code key="reference">{text(p.reference)}</Code>],
        ['Reason', text(p.reason)],
      ];
    case 'resolve_withdrawal':
      return [
        [
          'Withdrawal',
          <Link key="op" href={`/operations/${text(p.operationId)}`}>
            {text(p.operationId)}
          </Link>,
        ],
        ['Resolve to', text(p.toState)],
        ...(p.txHash
          ? ([
              [
                'Transaction',
                <Code key="tx" style={{ wordBreak: 'break-all' }}>
                  {text(p.txHash)}
                </Code>,
              ],
            ] as [string, ReactNode][])
          : []),
        ['What was checked', text(p.summary)],
      ];
    case 'control_change':
      return [
        ['Change', <Code key="change">{text(p.change)}</Code>],
        ['In force now', <Code key="in-force">{text(proposal.evidence?.inForce ?? null)}</Code>],
        ...(proposal.effectiveAt
          ? ([['Takes effect', new Date(proposal.effectiveAt).toLocaleString()]] as [string, ReactNode][])
          : []),
      ];
    case 'cancel_withdrawal':
    case 'raise_fee_cap':
      return [
        [
          'Withdrawal',
          <Link key="op" href={`/operations/${text(p.operationId)}`}>
            {text(p.operationId)}
          </Link>,
        ],
        ...(proposal.kind === 'raise_fee_cap'
          ? ([['New fee cap (total, wei)', <Code key="cap">{text(p.feeCapMinor)}</Code>]] as [
              string,
              ReactNode,
            ][])
          : ([
              ['Action', text('a zero-value transaction to the hot wallet itself, same nonce, higher fee')],
            ] as [string, ReactNode][])),
        ['Reason', text(p.reason)],
      ];
  }
}

/** What the system found when the proposal was made: readable where known, else as recorded. */
function evidenceOf(proposal: ProposalView, assets: AssetInfo[]): ReactNode {
  const evidence = proposal.evidence;
  if (!evidence) return 'none needed for this kind';
  const balance = evidence.balanceAtProposal as { available?: string; held?: string } | undefined;
  if (proposal.kind === 'adjustment' && balance) {
    const asset = text(proposal.payload.asset);
    return `balance when proposed: ${displayAmount(balance.available ?? '0', asset, assets)} available, ${displayAmount(balance.held ?? '0', asset, assets)} held`;
  }
  return (
    <Code block style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>
      {JSON.stringify(evidence, null, 2)}
    </Code>
  );
}
