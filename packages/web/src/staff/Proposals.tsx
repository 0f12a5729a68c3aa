import type { ProposalState, ProposalView } from '@idem/contracts';
import { Alert, Anchor, Loader, SegmentedControl, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { ProposalReview } from './ProposalReview.tsx';
import { Pager, useCursorPages } from './shared.tsx';

type Filter = ProposalState | 'ALL';
const FILTERS: { value: Filter; label: string }[] = [
  { value: 'PENDING', label: 'Pending' },
  { value: 'EXECUTED', label: 'Executed' },
  { value: 'REJECTED', label: 'Rejected' },
  { value: 'CANCELLED', label: 'Cancelled' },
  { value: 'ALL', label: 'All' },
];

/**
 * Proposals awaiting a second person (adjustments, manual credits, withdrawal resolutions), pending
 * first; each shows what it does, its evidence and hash, and lets an approver decide on it.
 */
export function Proposals() {
  const [filter, setFilter] = useState<Filter>('PENDING');
  const pages = useCursorPages();
  const [lastDecision, setLastDecision] = useState<string | null>(null);
  const list = useQuery({
    queryKey: ['staff', 'proposals', filter, pages.cursor ?? null],
    queryFn: () =>
      api.staffProposals.list.query({
        limit: 20,
        ...(filter === 'ALL' ? {} : { state: filter }),
        ...(pages.cursor ? { cursor: pages.cursor } : {}),
      }),
  });
  // Within a page, what still needs someone comes first; otherwise newest first, as listed.
  const items: ProposalView[] = [...(list.data?.items ?? [])].sort(
    (a, b) => Number(b.state === 'PENDING') - Number(a.state === 'PENDING'),
  );
  return (
    <Stack>
      <Title order={1} size="h2">
        Proposals
      </Title>
      <Text size="sm">
        Adjustments, manual credits and withdrawal resolutions move money only when someone other than the
        proposer approves the exact hash shown.
      </Text>
      <SegmentedControl
        aria-label="Proposal state"
        value={filter}
        onChange={(value) =>
          setFilter((FILTERS.find((f) => f.value === value)?.value ?? 'PENDING') as Filter)
        }
        data={FILTERS}
      />
      {lastDecision ? (
        <Alert color="green" role="status" data-testid="proposal-decision-result">
          {lastDecision}
        </Alert>
      ) : null}
      {list.isPending ? <Loader aria-label="Loading proposals" /> : null}
      <ProblemAlert error={list.error} />
      {list.data?.items.length === 0 ? <Text>No proposals here.</Text> : null}
      {items.map((proposal) => (
        <ProposalReview key={proposal.proposalId} proposal={proposal} onDecided={setLastDecision} />
      ))}
      <Pager pages={pages} nextCursor={list.data?.nextCursor} />
    </Stack>
  );
}

/** One proposal on its own page (the Overview links here for what waits for a decision). */
export function ProposalPage({ proposalId }: { proposalId: string }) {
  const [lastDecision, setLastDecision] = useState<string | null>(null);
  const proposal = useQuery({
    queryKey: ['staff', 'proposal', proposalId],
    queryFn: () => api.staffProposals.get.query({ proposalId }),
  });
  return (
    <Stack>
      <Title order={1} size="h2">
        Proposal {proposalId.slice(0, 8)}
      </Title>
      <Anchor component={Link} href="/proposals" size="sm">
        All proposals
      </Anchor>
      {lastDecision ? (
        <Alert color="green" role="status" data-testid="proposal-decision-result">
          {lastDecision}
        </Alert>
      ) : null}
      {proposal.isPending ? <Loader aria-label="Loading proposal" /> : null}
      <ProblemAlert error={proposal.error} />
      {proposal.data ? <ProposalReview proposal={proposal.data} onDecided={setLastDecision} /> : null}
    </Stack>
  );
}
