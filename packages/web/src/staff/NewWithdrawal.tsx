import { Loader, Stack, Text, Title } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useCallback } from 'react';
import { api } from '../api.ts';
import type { Intent } from '../ui/intent.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { WithdrawFlow } from '../ui/WithdrawFlow.tsx';
import { useStaff } from './StaffApp.tsx';
import { useStaffAssets } from './shared.tsx';

/**
 * A manual withdrawal, through the same creation, hold and review as the API (C24). You are its
 * requester, so you can never approve it yourself.
 */
export function NewWithdrawal() {
  const me = useStaff();
  const assets = useStaffAssets();
  const queryClient = useQueryClient();
  const submit = useCallback(
    (intent: Intent) =>
      api.staff.withdraw.mutate({
        intentId: intent.intentId,
        accountId: intent.accountId ?? '',
        asset: intent.asset,
        destination: intent.destination,
        amountMinor: intent.amountMinor,
        ...(intent.memo ? { memo: intent.memo } : {}),
      }),
    [],
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
        Recorded with you as the requester; it goes through the same review, and another person must approve
        it.
      </Text>
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
