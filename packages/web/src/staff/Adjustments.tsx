import { type ProposalView, parseDisplayAmount, referenceSchema, roleAllows } from '@idem/contracts';
import {
  Button,
  Loader,
  Paper,
  SegmentedControl,
  Select,
  Stack,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { ProposalReview } from './ProposalReview.tsx';
import { useStaff } from './session.tsx';
import { useStaffAssets } from './shared.tsx';

/**
 * Proposing an adjustment or a manual credit (operators and admins). Nothing moves until another
 * staff member approves it on the Proposals screen; the proposal is shown here once made.
 */
export function Adjustments() {
  const me = useStaff();
  const [made, setMade] = useState<ProposalView | null>(null);
  return (
    <Stack>
      <Title order={1} size="h2">
        Adjustments and manual credits
      </Title>
      <Text size="sm">
        Each is a proposal: it is recorded with you as the proposer and changes no balance until another
        person who may decide approves it on the Proposals screen.
      </Text>
      {roleAllows(me.role, 'operate') ? (
        <>
          <ProposalForm kind="adjustment" onMade={setMade} />
          <ProposalForm kind="manual_credit" onMade={setMade} />
        </>
      ) : (
        <Text>Your role ({me.role}) may not propose these; operators and admins may.</Text>
      )}
      {made ? (
        <Stack gap="xs" data-testid="proposal-made">
          <Title order={2} size="h3">
            Your proposal
          </Title>
          <ProposalReview proposal={made} />
        </Stack>
      ) : null}
    </Stack>
  );
}

function ProposalForm({
  kind,
  onMade,
}: {
  kind: 'adjustment' | 'manual_credit';
  onMade(proposal: ProposalView): void;
}) {
  const assets = useStaffAssets();
  const queryClient = useQueryClient();
  // One key per proposal being made: a double click or a retry replays instead of proposing twice.
  const [idempotencyKey, setKey] = useState(() => `${kind}-${crypto.randomUUID()}`);
  const [accountId, setAccountId] = useState('');
  const [assetCode, setAssetCode] = useState<string | null>(null);
  const [direction, setDirection] = useState<'credit' | 'debit'>('credit');
  const [amount, setAmount] = useState('');
  const [reference, setReference] = useState('');
  const [reason, setReason] = useState('');
  const [touched, setTouched] = useState(false);
  const asset = assets.data?.find((candidate) => candidate.code === assetCode);
  const amountMinor = asset ? parseDisplayAmount(amount.trim(), asset.decimals) : null;
  const errors = {
    accountId: referenceSchema.safeParse(accountId).success ? null : 'Enter the account reference',
    amount: !asset
      ? 'Choose an asset'
      : amountMinor === null
        ? `Enter an amount with at most ${asset.decimals} decimals, like 1.5`
        : BigInt(amountMinor) <= 0n
          ? 'The amount must be more than zero'
          : null,
    reference:
      kind === 'adjustment' || referenceSchema.safeParse(reference).success
        ? null
        : 'Enter where the money is seen (letters, digits and . _ : -)',
    reason: reason.trim().length >= 10 ? null : 'Say why, in at least 10 characters',
  };
  const valid = Object.values(errors).every((error) => error === null);

  const submit = useMutation({
    mutationFn: () => {
      const minor = direction === 'debit' && kind === 'adjustment' ? `-${amountMinor}` : (amountMinor ?? '');
      const common = { accountId, asset: asset?.code ?? '', amountMinor: minor, reason: reason.trim() };
      return kind === 'adjustment'
        ? api.staffProposals.propose.mutate({ kind, idempotencyKey, payload: common })
        : api.staffProposals.propose.mutate({
            kind,
            idempotencyKey,
            payload: { ...common, reference: reference.trim() },
          });
    },
    onSuccess: (result) => {
      onMade(result.proposal);
      setKey(`${kind}-${crypto.randomUUID()}`);
      setAmount('');
      setReason('');
      setReference('');
      setTouched(false);
      void queryClient.invalidateQueries({ queryKey: ['staff', 'proposals'] });
    },
  });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    setTouched(true);
    if (valid && !submit.isPending) submit.mutate();
  };
  const title = kind === 'adjustment' ? 'Propose an adjustment' : 'Propose a manual credit';
  const titleId = `form-${kind}`;
  return (
    <Paper withBorder p="md" component="section" aria-labelledby={titleId} data-testid={`form-${kind}`}>
      <form onSubmit={onSubmit} noValidate>
        <Stack>
          <Title order={2} id={titleId} size="h3">
            {title}
          </Title>
          <Text size="sm">
            {kind === 'adjustment'
              ? 'Corrects an account’s available balance against the adjustments account; a debit never overdraws.'
              : 'Credits money that reached custody outside the watched paths; a reference is credited once.'}
          </Text>
          {assets.isPending ? <Loader aria-label="Loading assets" /> : null}
          <ProblemAlert error={assets.error} />
          <TextInput
            label="Account"
            value={accountId}
            onChange={(event) => setAccountId(event.currentTarget.value)}
            error={touched ? errors.accountId : null}
            required
          />
          <Select
            label="Asset"
            data={(assets.data ?? []).map((candidate) => ({
              value: candidate.code,
              label: `${candidate.code} (${candidate.network})`,
            }))}
            value={assetCode}
            onChange={setAssetCode}
            error={touched && !asset ? 'Choose an asset' : null}
            required
          />
          {kind === 'adjustment' ? (
            <SegmentedControl
              aria-label="Direction"
              value={direction}
              onChange={(value) => setDirection(value === 'debit' ? 'debit' : 'credit')}
              data={[
                { value: 'credit', label: 'Credit' },
                { value: 'debit', label: 'Debit' },
              ]}
            />
          ) : null}
          <TextInput
            label={`Amount${asset ? ` in ${asset.code}` : ''}`}
            value={amount}
            onChange={(event) => setAmount(event.currentTarget.value)}
            error={touched && asset ? errors.amount : null}
            inputMode="decimal"
            autoComplete="off"
            required
          />
          {kind === 'manual_credit' ? (
            <TextInput
              label="Where the money is seen"
              description="The chain transaction, the custodian's record or the bank reference"
              value={reference}
              onChange={(event) => setReference(event.currentTarget.value)}
              error={touched ? errors.reference : null}
              required
            />
          ) : null}
          <TextInput
            label="Reason"
            description="Kept in the operation's history for auditors: no personal data"
            value={reason}
            onChange={(event) => setReason(event.currentTarget.value)}
            error={touched ? errors.reason : null}
            maxLength={128}
            required
          />
          <ProblemAlert error={submit.error} title="Proposal refused" />
          <Button type="submit" loading={submit.isPending} data-testid={`propose-${kind}`}>
            {title}
          </Button>
        </Stack>
      </form>
    </Paper>
  );
}
