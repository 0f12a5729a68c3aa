import { Alert, Code, Text } from '@mantine/core';
import { problemOf } from '../api.ts';

/** Every server error, shown the same way: what happened, in words, and its request id. */
export function ProblemAlert({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const problem = problemOf(error);
  return (
    <Alert color="red" title={title ?? problem.title} role="alert" variant="light">
      <Text size="sm">{problem.detail}</Text>
      {problem.requestId ? (
        <Text size="xs" mt={4}>
          Request id: <Code data-testid="request-id">{problem.requestId}</Code>
        </Text>
      ) : (
        <Text size="xs" mt={4}>
          The request may not have reached the server. Trying again is safe.
        </Text>
      )}
    </Alert>
  );
}
