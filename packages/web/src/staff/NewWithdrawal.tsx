import { Loader, Stack, Text, TextInput, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useCallback, useState } from 'react';
import { api } from '../api.ts';
import type { Intent } from '../ui/intent.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { WithdrawFlow } from '../ui/WithdrawFlow.tsx';
import { useStaff } from './session.tsx';
import { useStaffAssets } from './shared.tsx';

/**
 * A manual withdrawal, through the same creation, hold and review as the API (C24). You are its
 * requester, so you can never approve it yourself. With the account holder's request reference
 * one other person approves it; without, two (I11-F3).
 */
export function NewWithdrawal() {
  const me = useStaff();
  const assets = useStaffAssets();
  const queryClient = useQueryClient();
  const [customerRequestRef, setCustomerRequestRef] = useState('');
  const submit = useCallback(
    (intent: Intent) =>
      api.staff.withdraw.mutate({
        intentId: intent.intentId,
        accountId: intent.accountId ?? '',
        asset: intent.asset,
        destination: intent.destination,
        amountMinor: intent.amountMinor,
        ...(intent.memo ? { memo: intent.memo } : {}),
        ...(customerRequestRef.trim()
          ? { onBehalfOf: { customerRequestRef: customerRequestRef.trim() } }
          : {}),
      }),
    [customerRequestRef],
  );
  const onSubmitted = useCallback(
    () => void queryClient.invalidateQueries({ queryKey: ['staff'] }),
    [queryClient],
  );
  return (
    <Stack>
      <Title order={1} size="h2">
        New withdrawal
      </Title>
      <Text size="sm">
        Recorded with you as the requester; it goes through the same review and is never approved
        automatically. Another person must approve it when you act on the account holder's request (give its
        reference), two other people otherwise.
      </Text>
      <TextInput
        label="Customer request reference"
        description="The ticket or call of the customer's own request you act on; leave empty if they did not ask"
        value={customerRequestRef}
        onChange={(event) => setCustomerRequestRef(event.currentTarget.value)}
        maxLength={200}
      />
      <ProblemAlert error={assets.error} />
      {assets.data ? (
        <WithdrawFlow
          assets={assets.data}
          storageKey={`idem.withdraw.staff.${me.tenantId}.${me.userId}`}
          submit={submit}
          detailHref={(withdrawal) => `/operations/${withdrawal.operationId}`}
          onSubmitted={onSubmitted}
        />
      ) : (
        <Loader aria-label="Loading assets" />
      )}
    </Stack>
  );
}
