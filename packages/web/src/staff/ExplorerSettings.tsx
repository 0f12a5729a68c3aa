import { type ExplorerSetting, explorerTemplateSchema } from '@idem/contracts';
import { Alert, Button, Group, Loader, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/**
 * The block explorer of each network (I14-LIVE): customers see their withdrawal's transaction hash
 * linked to it. An https URL template with {txHash}; empty means no link. Admins only.
 */
export function ExplorerSettings({ canEdit }: { canEdit: boolean }) {
  const explorers = useQuery({
    queryKey: ['staff', 'explorers'],
    queryFn: () => api.branding.explorers.query(),
  });
  return (
    <Stack component="section" aria-labelledby="explorers-title">
      <Title order={2} size="h3" id="explorers-title">
        Block explorers
      </Title>
      <Text size="sm">
        Each customer withdrawal links its transaction to this page, with {'{txHash}'} replaced by the hash,
        e.g. https://etherscan.io/tx/{'{txHash}'}. Leave empty for no link.
      </Text>
      {explorers.isPending ? <Loader aria-label="Loading block explorers" /> : null}
      <ProblemAlert error={explorers.error} />
      {explorers.data?.map((setting) => (
        <ExplorerForm key={setting.network} setting={setting} canEdit={canEdit} />
      ))}
    </Stack>
  );
}

function ExplorerForm({ setting, canEdit }: { setting: ExplorerSetting; canEdit: boolean }) {
  const queryClient = useQueryClient();
  const [template, setTemplate] = useState(setting.txUrlTemplate ?? '');
  const [invalid, setInvalid] = useState<string | null>(null);
  const save = useMutation({
    mutationFn: (txUrlTemplate: string | null) =>
      api.branding.setExplorer.mutate({ network: setting.network, txUrlTemplate }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['staff', 'explorers'] }),
  });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    const trimmed = template.trim();
    if (trimmed === '') {
      setInvalid(null);
      save.mutate(null);
      return;
    }
    // The same rule the server applies, said before the round trip.
    const parsed = explorerTemplateSchema.safeParse(trimmed);
    setInvalid(parsed.success ? null : (parsed.error.issues[0]?.message ?? 'invalid template'));
    if (parsed.success) save.mutate(parsed.data);
  };
  return (
    <form onSubmit={onSubmit}>
      <Stack gap="xs">
        <Group align="end" wrap="wrap">
          <TextInput
            label={`Block explorer for ${setting.network}`}
            value={template}
            onChange={(event) => setTemplate(event.currentTarget.value)}
            placeholder="https://etherscan.io/tx/{txHash}"
            error={invalid}
            style={{ flex: 1, minWidth: 260 }}
            disabled={!canEdit}
          />
          <Button type="submit" loading={save.isPending} disabled={!canEdit}>
            Save explorer for {setting.network}
          </Button>
        </Group>
        <ProblemAlert error={save.error} title="Not saved" />
        {save.isSuccess ? (
          <Alert color="green" role="status">
            Explorer for {setting.network} saved.
          </Alert>
        ) : null}
      </Stack>
    </form>
  );
}
