import type { WalletNonces as WalletNoncesView } from '@idem/contracts';
import { Alert, Badge, Code, Loader, Paper, Stack, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/**
 * Each hot wallet's nonces: what the chain has mined and holds in its pool beside the
 * operations Idem signed, by nonce. Every later nonce waits for the one the chain expects next, so
 * that operation is highlighted with a link to its page, where "Bump fee" and "Propose cancel" are.
 */
export function WalletNonces() {
  const nonces = useQuery({
    queryKey: ['staff', 'nonces'],
    queryFn: () => api.staff.nonces.query(),
  });
  return (
    <Stack>
      <Title order={1} size="h2">
        Wallet nonces
      </Title>
      <Text size="sm">
        A hot wallet’s transactions are mined in nonce order: one that is never mined (fee too low, dropped,
        never broadcast) holds back every later one. Bump its fee or propose a cancel on its page; both reuse
        its nonce, so at most one of them is mined.
      </Text>
      {nonces.isPending ? <Loader aria-label="Loading wallet nonces" /> : null}
      <ProblemAlert error={nonces.error} />
      {nonces.data?.length === 0 ? <Text>This tenant has no hot wallet.</Text> : null}
      {nonces.data?.map((wallet) => (
        <Wallet key={wallet.network} wallet={wallet} />
      ))}
    </Stack>
  );
}

function Wallet({ wallet }: { wallet: WalletNoncesView }) {
  const blockingId = wallet.blocking?.operationId ?? null;
  const blockingRef = wallet.operations.find((o) => o.operationId === blockingId)?.reference ?? blockingId;
  return (
    <Paper withBorder p="sm" component="section" aria-label={`Hot wallet ${wallet.network}`}>
      <Stack gap="xs">
        <Title order={2} size="h4">
          {wallet.network} <Code style={{ wordBreak: 'break-all' }}>{wallet.address}</Code>
        </Title>
        <Table variant="vertical" fz="sm" w="auto">
          <Table.Tbody>
            <Table.Tr>
              <Table.Th w={260}>Chain: mined (next nonce it expects)</Table.Th>
              <Table.Td ff="monospace" data-testid="chain-mined">
                {wallet.chainLatest ?? 'the node did not answer'}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Chain: mined and in its pool</Table.Th>
              <Table.Td ff="monospace" data-testid="chain-pending">
                {wallet.chainPending ?? 'the node did not answer'}
              </Table.Td>
            </Table.Tr>
            <Table.Tr>
              <Table.Th>Idem: next nonce it allocates</Table.Th>
              <Table.Td ff="monospace">{wallet.nextNonce}</Table.Td>
            </Table.Tr>
          </Table.Tbody>
        </Table>
        {wallet.blocking ? (
          <Alert color="red.9" variant="outline" title="Blocking nonce" data-testid="blocking">
            Nonce {wallet.blocking.nonce} blocks every later nonce:{' '}
            {blockingId ? (
              <>
                <Link href={`/operations/${blockingId}`}>{blockingRef}</Link> ({wallet.blocking.state}). Open
                it to bump the fee or propose a cancel.
              </>
            ) : (
              'no operation of Idem holds it (a gap). Nothing of ours can fill it from this screen; see the runbook.'
            )}
          </Alert>
        ) : wallet.chainLatest !== null ? (
          <Text size="sm" data-testid="not-blocked">
            Nothing waits: the chain has mined every nonce Idem allocated.
          </Text>
        ) : null}
        {wallet.missing.length > 0 ? (
          <Alert color="red.9" variant="outline" title="Nonces no operation holds">
            {wallet.missing.join(', ')}
          </Alert>
        ) : null}
        {wallet.operations.length > 0 ? (
          <Table.ScrollContainer minWidth={560}>
            <Table fz="sm" data-testid="nonce-operations">
              <Table.Caption>Operations by nonce, from the lowest not yet settled</Table.Caption>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th scope="col">Nonce</Table.Th>
                  <Table.Th scope="col">Withdrawal</Table.Th>
                  <Table.Th scope="col">State</Table.Th>
                  <Table.Th scope="col">Signed attempts</Table.Th>
                  <Table.Th scope="col">Last attempt</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {wallet.operations.map((o) => {
                  const blocks = o.operationId === blockingId;
                  return (
                    <Table.Tr
                      key={o.nonce}
                      data-blocking={blocks}
                      bg={blocks ? 'var(--mantine-color-red-light)' : undefined}
                    >
                      <Table.Td ff="monospace">{o.nonce}</Table.Td>
                      <Table.Td>
                        <Link href={`/operations/${o.operationId}`}>
                          <Code>{o.reference}</Code>
                        </Link>
                        {blocks ? (
                          <Badge ml="xs" color="red.9" variant="filled" tt="none">
                            blocking
                          </Badge>
                        ) : null}
                      </Table.Td>
                      <Table.Td>{o.state}</Table.Td>
                      <Table.Td>{o.attempts}</Table.Td>
                      <Table.Td>{o.lastAttemptKind ?? 'none'}</Table.Td>
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        ) : null}
      </Stack>
    </Paper>
  );
}
