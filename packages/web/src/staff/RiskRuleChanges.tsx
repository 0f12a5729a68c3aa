import { controlChangeProposalSchema, formatMinor, type ProposalView } from '@idem/contracts';
import { Anchor, Table, Text, Title } from '@mantine/core';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/** How often the risk screen reads again while a change waits: it shows the change taking effect. */
export const WAITING_REFRESH_MS = 2_000;
/** With nothing waiting, still looked at now and then: another admin may propose a change meanwhile. */
export const IDLE_REFRESH_MS = 10_000;

/** A raised risk rule that is not in force yet: proposed (waiting for admins) or approved (waiting out the delay). */
export interface WaitingRiskChange {
  proposalId: string;
  state: 'PENDING' | 'APPROVED';
  assetCode: string;
  autoApproveMaxMinor: string;
  fourEyesMinMinor: string;
  velocityMaxPerHour: number;
  approvalsGiven: number;
  approvalsRequired: number;
  effectiveAt: string | null;
}

function riskChangeOf(proposal: ProposalView): WaitingRiskChange[] {
  if (proposal.kind !== 'control_change') return [];
  if (proposal.state !== 'PENDING' && proposal.state !== 'APPROVED') return [];
  const parsed = controlChangeProposalSchema.safeParse(proposal.payload);
  if (!parsed.success || parsed.data.change.control !== 'risk_rule') return [];
  const { rule } = parsed.data.change;
  return [
    {
      proposalId: proposal.proposalId,
      state: proposal.state,
      assetCode: rule.assetCode,
      autoApproveMaxMinor: rule.autoApproveMaxMinor,
      fourEyesMinMinor: rule.fourEyesMinMinor,
      velocityMaxPerHour: rule.velocityMaxPerHour,
      approvalsGiven: proposal.approvalsGiven,
      approvalsRequired: proposal.approvalsRequired,
      effectiveAt: proposal.effectiveAt,
    },
  ];
}

/**
 * The risk-rule changes proposed or approved and not yet in force (control changes, I31-QUORUM),
 * read again every few seconds while any waits. When one leaves the list (applied by the worker's
 * governance step, refused or expired) the rules and their history are read again, so the screen
 * shows the new limit as soon as it is in force.
 */
export function useWaitingRiskChanges() {
  const queryClient = useQueryClient();
  const waiting = useQuery({
    queryKey: ['staff', 'risk-waiting'],
    queryFn: async () => {
      const [approved, pending] = await Promise.all([
        api.staffProposals.list.query({ state: 'APPROVED', limit: 100 }),
        api.staffProposals.list.query({ state: 'PENDING', limit: 100 }),
      ]);
      return [...approved.items, ...pending.items].flatMap(riskChangeOf);
    },
    refetchInterval: (query) => ((query.state.data?.length ?? 0) > 0 ? WAITING_REFRESH_MS : IDLE_REFRESH_MS),
  });
  const ids = (waiting.data ?? []).map((change) => change.proposalId).join(',');
  const seen = useRef(ids);
  useEffect(() => {
    if (seen.current === ids) return;
    seen.current = ids;
    void queryClient.invalidateQueries({ queryKey: ['staff', 'risk-rules'] });
    void queryClient.invalidateQueries({ queryKey: ['staff', 'risk-history'] });
  }, [ids, queryClient]);
  return waiting;
}

/** The waiting changes: what each would set, and whether it waits for admins or for its time. */
export function WaitingRiskChanges({
  waiting,
  decimalsOf,
}: {
  waiting: ReturnType<typeof useWaitingRiskChanges>;
  decimalsOf: (assetCode: string) => number;
}) {
  const changes = waiting.data ?? [];
  return (
    <>
      <Title order={2} size="h3">
        Raised limits not yet in force
      </Title>
      <Text size="sm">
        Raising a limit is proposed to the other admins and takes effect only after the tenant's delay from
        their approval; until then the rule above is the one in force.
      </Text>
      <ProblemAlert error={waiting.error} />
      {waiting.data && changes.length === 0 ? <Text size="sm">None waiting.</Text> : null}
      {changes.length > 0 ? (
        <Table.ScrollContainer minWidth={720}>
          <Table striped data-testid="risk-waiting">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Asset</Table.Th>
                <Table.Th>Would set</Table.Th>
                <Table.Th>Waiting for</Table.Th>
                <Table.Th>Proposal</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {changes.map((change) => (
                <Table.Tr
                  key={change.proposalId}
                  data-proposal-id={change.proposalId}
                  data-state={change.state}
                  data-effective-at={change.effectiveAt ?? ''}
                >
                  <Table.Td>{change.assetCode}</Table.Td>
                  <Table.Td>
                    <ProposedValues change={change} decimals={decimalsOf(change.assetCode)} />
                  </Table.Td>
                  <Table.Td>
                    {change.state === 'APPROVED' && change.effectiveAt
                      ? `Approved; takes effect ${formatTime(change.effectiveAt)}`
                      : `Admin approval: ${change.approvalsGiven} of ${change.approvalsRequired}`}
                  </Table.Td>
                  <Table.Td>
                    <Anchor component={Link} href={`/proposals/${change.proposalId}`}>
                      {change.proposalId.slice(0, 8)}
                    </Anchor>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      ) : null}
    </>
  );
}

function ProposedValues({ change, decimals }: { change: WaitingRiskChange; decimals: number }) {
  return (
    <Text size="sm">
      auto-approve {formatMinor(change.autoApproveMaxMinor, decimals)} ({change.autoApproveMaxMinor}), four
      eyes {formatMinor(change.fourEyesMinMinor, decimals)} ({change.fourEyesMinMinor}), velocity{' '}
      {change.velocityMaxPerHour}/h
    </Text>
  );
}
