import { Alert, Button, Code, CopyButton, Group, Text } from '@mantine/core';

/**
 * A secret the server returned once (an API key, a webhook secret): shown here with a copy button
 * and never again; the server keeps only what it needs to check or sign.
 */
export function SecretOnce({ title, secret, onDone }: { title: string; secret: string; onDone(): void }) {
  return (
    <Alert color="blue.9" variant="outline" title={title} role="status">
      <Text size="sm">Copy it now: it is shown only this once.</Text>
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
