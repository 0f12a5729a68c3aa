import { Loader } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { useCallback } from 'react';
import { api } from '../api.ts';
import type { Intent } from '../ui/intent.ts';
import { WithdrawFlow } from '../ui/WithdrawFlow.tsx';
import { useCustomerBalances } from './Balances.tsx';

export function Withdraw({ tenantId, accountId }: { tenantId: string; accountId: string }) {
  const balances = useCustomerBalances();
  const queryClient = useQueryClient();
  const submit = useCallback(
    (intent: Intent) =>
      api.customer.withdraw.mutate({
        intentId: intent.intentId,
        asset: intent.asset,
        destination: intent.destination,
        amountMinor: intent.amountMinor,
        ...(intent.memo ? { memo: intent.memo } : {}),
        ...(intent.confirmDuplicateOf ? { confirmDuplicateOf: intent.confirmDuplicateOf } : {}),
      }),
    [],
  );
  const onSubmitted = useCallback(() => {
    void queryClient.invalidateQueries({ queryKey: ['customer'] });
  }, [queryClient]);
  if (!balances.data) return <Loader aria-label="Loading" />;
  const assets = balances.data.assets.map((asset) => ({
    ...asset,
    availableMinor: balances.data.balances.find((entry) => entry.asset === asset.code)?.available ?? '0',
  }));
  return (
    <WithdrawFlow
      assets={assets}
      storageKey={`idem.withdraw.customer.${tenantId}.${accountId}`}
      fixedAccountId={accountId}
      submit={submit}
      detailHref={(withdrawal) => `/withdrawals/${withdrawal.operationId}`}
      duplicateHref={(operationId) => `/withdrawals/${operationId}`}
      onSubmitted={onSubmitted}
    />
  );
}
