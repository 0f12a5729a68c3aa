import { type ApiKeyScope, apiKeyScopes } from '@idem/contracts';
import { Button, Checkbox, Group, Stack, TextInput } from '@mantine/core';
import { useState } from 'react';

/** What each scope lets a key do, shown beside its box. */
export const scopeDescriptions: Record<ApiKeyScope, string> = {
  withdraw: 'submit withdrawals (alone or in bulk)',
  'customer-sessions': 'open customer screen links',
  read: 'read withdrawals, deposits, balances, assets',
  webhooks: 'manage webhook endpoints by API (reserved)',
};

export interface NewKey {
  label: string;
  scopes: ApiKeyScope[];
  /** Midnight UTC at the start of the chosen day, or null for no expiry. */
  expiresAt: string | null;
}

/** The first day an expiry may name: tomorrow (an expiry must lie in the future). */
function tomorrow(): string {
  return new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
}

/**
 * An admin names a key, chooses what it may do (every scope is ticked to start with; untick what
 * the backend does not need) and when it stops working. No expiry is allowed, and warned about.
 */
export function ApiKeyForm({ pending, onCreate }: { pending: boolean; onCreate: (key: NewKey) => void }) {
  const [label, setLabel] = useState('');
  const [scopes, setScopes] = useState<ApiKeyScope[]>([...apiKeyScopes]);
  const [expiresOn, setExpiresOn] = useState('');
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        onCreate({ label, scopes, expiresAt: expiresOn ? `${expiresOn}T00:00:00.000Z` : null });
        setLabel('');
      }}
    >
      <Stack gap="sm">
        <Group align="end">
          <TextInput
            label="Label"
            description="What the key is for, e.g. payouts backend"
            value={label}
            onChange={(event) => setLabel(event.currentTarget.value)}
            maxLength={120}
            required
          />
          <TextInput
            type="date"
            label="Expires on"
            description="At 00:00 UTC that day; empty: never (not advised)"
            min={tomorrow()}
            value={expiresOn}
            onChange={(event) => setExpiresOn(event.currentTarget.value)}
          />
        </Group>
        <Checkbox.Group
          label="Scopes"
          description="What the key may do; a key needs at least one"
          value={scopes}
          onChange={(value) => setScopes(apiKeyScopes.filter((scope) => value.includes(scope)))}
        >
          <Group mt="xs">
            {apiKeyScopes.map((scope) => (
              <Checkbox key={scope} value={scope} label={scope} description={scopeDescriptions[scope]} />
            ))}
          </Group>
        </Checkbox.Group>
        <Group>
          <Button type="submit" loading={pending} disabled={scopes.length === 0}>
            Create key
          </Button>
        </Group>
      </Stack>
    </form>
  );
}
