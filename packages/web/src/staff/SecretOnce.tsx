import { Alert, Button, Code, CopyButton, Group, Text } from '@mantine/core';
import { Link } from 'wouter';

/**
 * A secret the server returned once (an API key, a webhook secret): shown here with a copy button
 * and never again; the server keeps only what it needs to check or sign.
 */
export function SecretOnce({
  title,
  secret,
  proposalId = null,
  onDone,
}: {
  title: string;
  secret: string;
  /** The control change another admin approves before what the secret belongs to is active. */
  proposalId?: string | null;
  onDone(): void;
}) {
  return (
    <Alert color="blue.9" variant="outline" title={title} role="status">
      <Text size="sm">Copy it now: it is shown only this once.</Text>
      {proposalId ? (
        <Text size="sm">
          It is active once another admin approves{' '}
          <Link href={`/proposals/${proposalId}`} data-testid="awaiting-approval">
            the proposal
          </Link>{' '}
          and the waiting time has passed.
        </Text>
      ) : null}
      <Code block data-testid="shown-secret" my="xs" style={{ wordBreak: 'break-all' }}>
        {secret}
      </Code>
      <Group gap="xs">
        <CopyButton value={secret}>
          {({ copied, copy }) => (
            <Button size="xs" color={copied ? 'teal' : 'blue'} onClick={copy}>
              {copied ? 'Copied' : 'Copy'}
            </Button>
          )}
        </CopyButton>
        <Button size="xs" variant="default" onClick={onDone}>
          I have stored it
        </Button>
      </Group>
    </Alert>
  );
}
