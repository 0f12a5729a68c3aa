import { formatMinor } from '@idem/contracts';
import { Loader, Paper, Table, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

export function useCustomerBalances() {
  return useQuery({ queryKey: ['customer', 'balances'], queryFn: () => api.customer.balances.query() });
}

/** Available and held per asset, in display units converted exactly from minor units. */
export function Balances() {
  const balances = useCustomerBalances();
  return (
    <Paper withBorder p="md" component="section" aria-labelledby="balances-title">
      <Title order={2} id="balances-title" size="h3" mb="sm">
        Balances
      </Title>
      {balances.isPending ? <Loader aria-label="Loading balances" /> : null}
      <ProblemAlert error={balances.error} />
      {balances.data ? (
        // Fixed layout with amounts wrapping at any digit: an 18-decimal balance stays whole inside a
        // 390 px phone instead of pushing the Held column off the screen (I14-PHONE).
        <Table data-testid="balances" layout="fixed">
          <Table.Thead>
            <Table.Tr>
              <Table.Th scope="col" w={72}>
                Asset
              </Table.Th>
              <Table.Th scope="col" ta="right">
                Available
              </Table.Th>
              <Table.Th scope="col" ta="right">
                Held
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {balances.data.assets.map((asset) => {
              const balance = balances.data.balances.find((entry) => entry.asset === asset.code);
              return (
                <Table.Tr key={asset.code} data-asset={asset.code}>
                  <Table.Th scope="row">{asset.code}</Table.Th>
                  <Table.Td
                    ta="right"
                    ff="monospace"
                    style={{ overflowWrap: 'anywhere' }}
                    data-testid={`available-${asset.code}`}
                  >
                    {formatMinor(balance?.available ?? '0', asset.decimals)}
                  </Table.Td>
                  <Table.Td
                    ta="right"
                    ff="monospace"
                    style={{ overflowWrap: 'anywhere' }}
                    data-testid={`held-${asset.code}`}
                  >
                    {formatMinor(balance?.held ?? '0', asset.decimals)}
                  </Table.Td>
                </Table.Tr>
              );
            })}
          </Table.Tbody>
        </Table>
      ) : null}
    </Paper>
  );
}
