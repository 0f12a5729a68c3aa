import { primaryColorSchema, roleAllows } from '@idem/contracts';
import { Alert, Button, ColorSwatch, Group, Loader, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useState } from 'react';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { ExplorerSettings } from './ExplorerSettings.tsx';
import { useStaff } from './session.tsx';

/** The tenant's brand on the customer screens: applied to every customer page from its next load. */
export function BrandingSettings() {
  const me = useStaff();
  const queryClient = useQueryClient();
  const current = useQuery({ queryKey: ['staff', 'branding'], queryFn: () => api.branding.get.query() });
  const [displayName, setDisplayName] = useState('');
  const [logoUrl, setLogoUrl] = useState('');
  const [primaryColor, setPrimaryColor] = useState('');
  useEffect(() => {
    if (current.data) {
      setDisplayName(current.data.displayName);
      setLogoUrl(current.data.logoUrl ?? '');
      setPrimaryColor(current.data.primaryColor);
    }
  }, [current.data]);
  const save = useMutation({
    mutationFn: () =>
      api.branding.set.mutate({ displayName, logoUrl: logoUrl.trim() ? logoUrl.trim() : null, primaryColor }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['staff', 'branding'] }),
  });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    save.mutate();
  };
  if (current.isPending) return <Loader aria-label="Loading branding" />;
  return (
    <Stack maw={520}>
      <Title order={1} size="h2">
        Branding
      </Title>
      <Text size="sm">Your customers see this name, logo and colour. Only admins can change it.</Text>
      <ProblemAlert error={current.error} />
      <form onSubmit={onSubmit}>
        <Stack>
          <TextInput
            label="Name shown to customers"
            value={displayName}
            onChange={(event) => setDisplayName(event.currentTarget.value)}
            required
            maxLength={80}
          />
          <TextInput
            label="Logo URL (https, optional)"
            value={logoUrl}
            onChange={(event) => setLogoUrl(event.currentTarget.value)}
            placeholder="https://example.com/logo.svg"
          />
          <Group align="end">
            <TextInput
              label="Primary colour (hex)"
              value={primaryColor}
              onChange={(event) => setPrimaryColor(event.currentTarget.value)}
              required
              placeholder="#1c7ed6"
            />
            {primaryColorSchema.safeParse(primaryColor).success ? (
              <ColorSwatch color={primaryColor} role="img" aria-label={`Preview of ${primaryColor}`} />
            ) : null}
          </Group>
          <ProblemAlert error={save.error} title="Not saved" />
          {save.isSuccess ? (
            <Alert color="green" role="status">
              Saved. Customer screens show it from their next page load.
            </Alert>
          ) : null}
          <Button type="submit" loading={save.isPending} disabled={!roleAllows(me.role, 'administer')}>
            Save branding
          </Button>
        </Stack>
      </form>
      <ExplorerSettings canEdit={roleAllows(me.role, 'administer')} />
    </Stack>
  );
}
