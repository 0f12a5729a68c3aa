import {
  formatMinor,
  isValidDestination,
  type Network,
  type OperationView,
  operationStateSchema,
  parseDisplayAmount,
  referenceSchema,
  type SubmitOutcome,
} from '@idem/contracts';
import {
  Alert,
  Anchor,
  Button,
  Code,
  Group,
  Paper,
  Select,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { type FormEvent, useCallback, useEffect, useRef, useState } from 'react';
import { Link } from 'wouter';
import { problemOf } from '../api.ts';
import { customerStateText, formatTime } from './format.ts';
import { clearIntent, type Intent, loadIntent, newIntentId, saveIntent } from './intent.ts';
import { ProblemAlert } from './ProblemAlert.tsx';

export interface WithdrawAsset {
  code: string;
  network: string;
  decimals: number;
  /** Minor units; undefined where the screen does not know (staff). */
  availableMinor?: string;
}

interface Props {
  assets: WithdrawAsset[];
  /** sessionStorage key of this screen's intent (per tenant and account or staff member). */
  storageKey: string;
  /** Staff enter the account; customers have theirs from the session. */
  fixedAccountId?: string;
  submit(intent: Intent): Promise<{ outcome: SubmitOutcome; withdrawal: OperationView }>;
  detailHref(withdrawal: OperationView): string;
  /** Where the in-progress withdrawal a POSSIBLE_DUPLICATE names is shown (customer screens). */
  duplicateHref?(operationId: string): string;
  onSubmitted?(): void;
}

type Result = { outcome: SubmitOutcome; withdrawal: OperationView };

/**
 * Withdraw in three steps: the form, a confirmation that shows exactly what will be submitted, and
 * the answer. The intent id is minted when the person reviews a payload and kept in sessionStorage
 * until an answer arrives, so a double-click, a reload mid-submit or a retry after a network error
 * all send the same id and reach the same operation; a replay is said in words.
 */
export function WithdrawFlow({
  assets,
  storageKey,
  fixedAccountId,
  submit,
  detailHref,
  duplicateHref,
  onSubmitted,
}: Props) {
  const flow = useIntentSubmission(storageKey, submit, onSubmitted);
  const { intent, result } = flow;
  if (result) {
    return <WithdrawResult result={result} detailHref={detailHref} onNew={() => flow.setResult(null)} />;
  }
  if (intent) {
    return (
      <ConfirmWithdrawal
        intent={intent}
        assets={assets}
        fixedAccountId={fixedAccountId}
        duplicateHref={duplicateHref}
        flow={flow}
      />
    );
  }
  return (
    <WithdrawForm
      assets={assets}
      fixedAccountId={fixedAccountId}
      onReview={(draft) => {
        const reviewed: Intent = { ...draft, intentId: newIntentId(), status: 'confirming' };
        saveIntent(storageKey, reviewed);
        flow.setIntent(reviewed);
      }}
    />
  );
}

/**
 * The intent kept in sessionStorage and its one submission at a time: `send` marks it submitting,
 * submits, and on an answer clears it; a definite refusal takes it back to confirming, no answer
 * leaves it submitting (a reload resends it, and the server replays it).
 */
function useIntentSubmission(storageKey: string, submit: Props['submit'], onSubmitted: Props['onSubmitted']) {
  const [intent, setIntent] = useState<Intent | null>(() => loadIntent(storageKey));
  const [result, setResult] = useState<Result | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [sending, setSending] = useState(false);
  const inFlight = useRef(false);

  const send = useCallback(
    async (toSend: Intent) => {
      // One request at a time from this screen; the server makes any second one a replay anyway.
      if (inFlight.current) return;
      inFlight.current = true;
      setSending(true);
      setError(null);
      const submitting: Intent = { ...toSend, status: 'submitting' };
      saveIntent(storageKey, submitting);
      setIntent(submitting);
      try {
        const answer = await submit(submitting);
        clearIntent(storageKey);
        setIntent(null);
        setResult(answer);
        onSubmitted?.();
      } catch (failure) {
        setError(failure);
        // A definite refusal wrote nothing: the person may change the payload. Without an answer the
        // outcome is unknown: the intent stays 'submitting', so a reload or "try again" resends it.
        if (problemOf(failure).requestId !== null) {
          const back: Intent = { ...submitting, status: 'confirming' };
          saveIntent(storageKey, back);
          setIntent(back);
        }
      } finally {
        inFlight.current = false;
        setSending(false);
      }
    },
    [storageKey, submit, onSubmitted],
  );

  // A reload while a submit was in flight: resend the same intent, which the server replays.
  const resumed = useRef(false);
  useEffect(() => {
    if (resumed.current) return;
    resumed.current = true;
    const stored = loadIntent(storageKey);
    if (stored?.status === 'submitting') void send(stored);
  }, [storageKey, send]);

  /** The person goes back to the form: the intent is dropped, with its error. */
  const discard = () => {
    clearIntent(storageKey);
    setIntent(null);
    setError(null);
  };
  return { intent, setIntent, result, setResult, error, sending, send, discard };
}

type IntentSubmission = ReturnType<typeof useIntentSubmission>;

function WithdrawResult({
  result,
  detailHref,
  onNew,
}: {
  result: Result;
  detailHref: Props['detailHref'];
  onNew: () => void;
}) {
  const replayed = result.outcome === 'REPLAYED';
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="withdraw-title">
      <Stack>
        <Title order={2} id="withdraw-title" size="h3">
          Withdraw
        </Title>
        <Alert
          color={replayed ? 'blue' : 'green'}
          title={replayed ? 'Already submitted' : 'Withdrawal submitted'}
          role="status"
          data-testid={replayed ? 'outcome-replayed' : 'outcome-created'}
        >
          {replayed
            ? 'This withdrawal had already reached us; this is the same withdrawal, not a new one. Nothing was sent twice.'
            : 'We have your withdrawal.'}{' '}
          Status:{' '}
          <strong>{customerStateText(result.withdrawal.state, result.withdrawal.rejectionCode)}</strong>.
        </Alert>
        <Group>
          <Anchor component={Link} href={detailHref(result.withdrawal)}>
            View this withdrawal
          </Anchor>
          <Button variant="default" onClick={onNew}>
            New withdrawal
          </Button>
        </Group>
      </Stack>
    </Paper>
  );
}

/** Exactly what will be submitted, with the answers a person may give (or a possible duplicate's two). */
function ConfirmWithdrawal({
  intent,
  assets,
  fixedAccountId,
  duplicateHref,
  flow,
}: {
  intent: Intent;
  assets: WithdrawAsset[];
  fixedAccountId: string | undefined;
  duplicateHref: Props['duplicateHref'];
  flow: IntentSubmission;
}) {
  const { error, sending, send, discard } = flow;
  const asset = assets.find((candidate) => candidate.code === intent.asset);
  const decimals = asset?.decimals ?? 0;
  const duplicate = error ? problemOf(error).duplicateOf : undefined;
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="withdraw-title">
      <Stack>
        <Title order={2} id="withdraw-title" size="h3">
          Confirm your withdrawal
        </Title>
        <Text>This is exactly what will be submitted. Check the destination character by character.</Text>
        <ConfirmationTable
          intent={intent}
          network={asset?.network}
          decimals={decimals}
          fixedAccountId={fixedAccountId}
        />
        {duplicate ? (
          <PossibleDuplicate
            duplicate={duplicate}
            amount={`${formatMinor(intent.amountMinor, decimals)} ${intent.asset}`}
            href={duplicateHref?.(duplicate.operationId) ?? null}
            sending={sending}
            onConfirm={() => void send({ ...intent, confirmDuplicateOf: duplicate.operationId })}
            onKeepFirst={discard}
          />
        ) : (
          <ProblemAlert error={error} />
        )}
        {error && problemOf(error).requestId === null ? (
          <Text size="sm">
            We did not get an answer. Trying again sends the same withdrawal: it cannot be made twice.
          </Text>
        ) : null}
        {/* While the person decides about a possible duplicate, only its two answers are offered. */}
        {duplicate ? null : (
          <Group>
            <Button onClick={() => void send(intent)} loading={sending} data-testid="confirm-submit">
              {error && problemOf(error).requestId === null ? 'Try again' : 'Confirm withdrawal'}
            </Button>
            <Button variant="default" disabled={sending || intent.status === 'submitting'} onClick={discard}>
              Change
            </Button>
          </Group>
        )}
      </Stack>
    </Paper>
  );
}

function ConfirmationTable({
  intent,
  network,
  decimals,
  fixedAccountId,
}: {
  intent: Intent;
  network: string | undefined;
  decimals: number;
  fixedAccountId: string | undefined;
}) {
  return (
    <Table data-testid="confirmation" variant="vertical" withTableBorder layout="fixed">
      <Table.Tbody>
        <Table.Tr>
          <Table.Th w={110}>Amount</Table.Th>
          <Table.Td>
            <Text fw={700} ff="monospace" data-testid="confirm-amount">
              {formatMinor(intent.amountMinor, decimals)} {intent.asset}
            </Text>
            <Text size="xs" c="dimmed">
              {intent.amountMinor} minor units
            </Text>
          </Table.Td>
        </Table.Tr>
        <Table.Tr>
          <Table.Th>Network</Table.Th>
          <Table.Td>{network ?? 'unknown'}</Table.Td>
        </Table.Tr>
        <Table.Tr>
          <Table.Th>Destination</Table.Th>
          <Table.Td>
            <Code
              block
              style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}
              data-testid="confirm-destination"
            >
              {intent.destination}
            </Code>
          </Table.Td>
        </Table.Tr>
        {intent.memo ? (
          <Table.Tr>
            <Table.Th>Memo</Table.Th>
            <Table.Td>{intent.memo}</Table.Td>
          </Table.Tr>
        ) : null}
        <Table.Tr>
          <Table.Th>From account</Table.Th>
          <Table.Td>{intent.accountId ?? fixedAccountId}</Table.Td>
        </Table.Tr>
      </Table.Tbody>
    </Table>
  );
}

/**
 * Seed 004's second device (I14-DEVICE): the server refused a withdrawal that repeats one still in
 * progress for the account. The person sees that one (link, state, time) and decides: another
 * withdrawal only on an explicit "yes", which names the first one back to the server.
 */
function PossibleDuplicate({
  duplicate,
  amount,
  href,
  sending,
  onConfirm,
  onKeepFirst,
}: {
  duplicate: { operationId: string; state: string; createdAt: string };
  amount: string;
  href: string | null;
  sending: boolean;
  onConfirm(): void;
  onKeepFirst(): void;
}) {
  const parsedState = operationStateSchema.safeParse(duplicate.state);
  return (
    <Paper
      withBorder
      p="md"
      role="alert"
      aria-labelledby="possible-duplicate-title"
      data-testid="possible-duplicate"
      style={{ borderColor: 'var(--mantine-color-orange-9)', borderWidth: 2 }}
    >
      <Stack gap="xs">
        <Text fw={700} id="possible-duplicate-title">
          Is this a second withdrawal?
        </Text>
        <Text size="sm">
          You already have a withdrawal of {amount} to this address in progress, made{' '}
          <span data-testid="duplicate-time">{formatTime(duplicate.createdAt)}</span> (perhaps on another
          device). Its status:{' '}
          <strong data-testid="duplicate-state">
            {parsedState.success ? customerStateText(parsedState.data, null) : duplicate.state}
          </strong>
          . Nothing new has been submitted.
        </Text>
        {href ? (
          <Anchor component={Link} href={href} underline="always">
            View the withdrawal in progress
          </Anchor>
        ) : null}
        <Group>
          <Button color="dark" onClick={onConfirm} loading={sending}>
            Yes, make a second withdrawal
          </Button>
          <Button variant="default" onClick={onKeepFirst} disabled={sending}>
            No, keep only the first
          </Button>
        </Group>
      </Stack>
    </Paper>
  );
}

function WithdrawForm({
  assets,
  fixedAccountId,
  onReview,
}: {
  assets: WithdrawAsset[];
  fixedAccountId: string | undefined;
  onReview(draft: Omit<Intent, 'intentId' | 'status'>): void;
}) {
  // Start on the first asset there is something to withdraw of.
  const funded = assets.find(
    (candidate) => candidate.availableMinor !== undefined && candidate.availableMinor !== '0',
  );
  const [assetCode, setAssetCode] = useState<string | null>((funded ?? assets[0])?.code ?? null);
  const [accountId, setAccountId] = useState('');
  const [destination, setDestination] = useState('');
  const [amount, setAmount] = useState('');
  const [memo, setMemo] = useState('');
  const [touched, setTouched] = useState(false);
  const asset = assets.find((candidate) => candidate.code === assetCode);

  const amountMinor = asset ? parseDisplayAmount(amount.trim(), asset.decimals) : null;
  const errors = {
    accountId:
      fixedAccountId || referenceSchema.safeParse(accountId).success ? null : 'Enter the account reference',
    destination:
      destination.trim() === ''
        ? 'Enter the destination address'
        : asset && !isValidDestination(asset.network as Network, destination.trim())
          ? `This is not a valid ${asset.network} address`
          : null,
    amount: !asset
      ? 'Choose an asset'
      : amountMinor === null
        ? `Enter an amount with at most ${asset.decimals} decimals, like 1.5`
        : BigInt(amountMinor) <= 0n
          ? 'The amount must be more than zero'
          : asset.availableMinor !== undefined && BigInt(amountMinor) > BigInt(asset.availableMinor)
            ? `More than your available ${formatMinor(asset.availableMinor, asset.decimals)} ${asset.code}`
            : null,
  };
  const valid = !errors.accountId && !errors.destination && !errors.amount;

  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    setTouched(true);
    if (!valid || !asset || amountMinor === null) return;
    onReview({
      ...(fixedAccountId ? {} : { accountId }),
      asset: asset.code,
      destination: destination.trim(),
      amountMinor,
      ...(memo.trim() ? { memo: memo.trim() } : {}),
    });
  };

  return (
    <Paper withBorder p="md" component="section" aria-labelledby="withdraw-title">
      <form onSubmit={onSubmit} noValidate>
        <Stack>
          <Title order={2} id="withdraw-title" size="h3">
            Withdraw
          </Title>
          {fixedAccountId ? null : (
            <TextInput
              label="Account"
              description="The customer account the funds leave from"
              value={accountId}
              onChange={(event) => setAccountId(event.currentTarget.value)}
              error={touched ? errors.accountId : null}
              required
            />
          )}
          <Select
            label="Asset"
            data={assets.map((candidate) => ({
              value: candidate.code,
              label: `${candidate.code} (${candidate.network})`,
            }))}
            value={assetCode}
            onChange={setAssetCode}
            allowDeselect={false}
            required
          />
          <TextInput
            label="Destination address"
            description={asset ? `A ${asset.network} address` : undefined}
            value={destination}
            onChange={(event) => setDestination(event.currentTarget.value)}
            error={touched ? errors.destination : null}
            autoComplete="off"
            spellCheck={false}
            required
          />
          <TextInput
            label={`Amount${asset ? ` in ${asset.code}` : ''}`}
            description={
              asset?.availableMinor !== undefined
                ? `Available: ${formatMinor(asset.availableMinor, asset.decimals)} ${asset.code}`
                : undefined
            }
            value={amount}
            onChange={(event) => setAmount(event.currentTarget.value)}
            error={touched ? errors.amount : null}
            inputMode="decimal"
            autoComplete="off"
            required
          />
          <TextInput
            label="Memo (optional)"
            value={memo}
            onChange={(event) => setMemo(event.currentTarget.value)}
            maxLength={128}
          />
          <Group>
            <Button type="submit">Review withdrawal</Button>
          </Group>
        </Stack>
      </form>
    </Paper>
  );
}
