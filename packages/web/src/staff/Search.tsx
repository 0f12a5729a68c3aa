import { Button, Group, Loader, Stack, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { OperationTable } from './shared.tsx';

/** Exact search by withdrawal id, operation id, account or transaction hash. */
export function Search() {
  const [text, setText] = useState('');
  const [query, setQuery] = useState('');
  const results = useQuery({
    queryKey: ['staff', 'search', query],
    queryFn: () => api.staff.search.query({ query }),
    enabled: query !== '',
  });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    setQuery(text.trim());
  };
  return (
    <Stack>
      <Title order={1} size="h2">
        Search
      </Title>
      <search>
        <form onSubmit={onSubmit}>
          <Group align="end">
            <TextInput
              label="Withdrawal id, operation id, account or transaction hash"
              value={text}
              onChange={(event) => setText(event.currentTarget.value)}
              w={{ base: '100%', sm: 480 }}
              required
            />
            <Button type="submit">Search</Button>
          </Group>
        </form>
      </search>
      {results.isFetching ? <Loader aria-label="Searching" /> : null}
      <ProblemAlert error={results.error} />
      {results.data?.items.length === 0 ? <Text>Nothing matches exactly.</Text> : null}
      {results.data && results.data.items.length > 0 ? (
        <OperationTable items={results.data.items} caption={`Matches for ${query} (at most 50)`} />
      ) : null}
    </Stack>
  );
}
