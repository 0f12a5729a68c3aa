import { type EndpointDirection, roleAllows } from '@idem/contracts';
import {
  Anchor,
  Badge,
  Button,
  Code,
  Group,
  Loader,
  NumberInput,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { SecretOnce } from './SecretOnce.tsx';
import { useStaff } from './session.tsx';

const DAY_MINUTES = 24 * 60;

interface Lifecycle {
  endpointId: string;
  createdAt: string;
  rotatedAt: string | null;
  previousSecretUntil: string | null;
  disabledAt: string | null;
  /** Outbound only: null while it waits for another admin's approval. */
  activatedAt?: string | null;
}

/** A secret to show once, with what it belongs to. */
interface ShownSecret {
  title: string;
  secret: string;
  /** A new outbound destination waits for this control change. */
  proposalId?: string | null;
}

/**
 * Webhook endpoints: inbound sources whose signatures intake verifies, and outbound
 * destinations Idem signs for. Created, their secret rotated with an overlap (both secrets valid
 * until it ends), disabled; each outbound one links to its delivery log. Secrets are shown once.
 */
export function WebhookEndpoints() {
  const me = useStaff();
  const admin = roleAllows(me.role, 'administer');
  const [source, setSource] = useState('');
  const [url, setUrl] = useState('');
  const [overlapMinutes, setOverlapMinutes] = useState<number>(DAY_MINUTES);
  const [shown, setShown] = useState<ShownSecret | null>(null);
  const endpoints = useQuery({
    queryKey: ['staff', 'endpoints'],
    queryFn: () => api.staffConfig.endpoints.query(),
  });
  const { createInbound, createOutbound, rotate, disable } = useEndpointChanges(overlapMinutes, setShown);

  const actions = (direction: EndpointDirection, endpoint: Lifecycle, name: string) =>
    admin && !endpoint.disabledAt ? (
      <EndpointActions
        direction={direction}
        endpoint={endpoint}
        name={name}
        rotate={rotate}
        disable={disable}
      />
    ) : null;

  return (
    <>
      <Title order={1} size="h2">
        Webhook endpoints
      </Title>
      <ProblemAlert error={endpoints.error} />
      {[createInbound.error, createOutbound.error, rotate.error, disable.error].map((error, index) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: a fixed list of four mutations
        <ProblemAlert key={index} error={error} title="Not changed" />
      ))}
      {shown ? (
        <SecretOnce
          title={shown.title}
          secret={shown.secret}
          proposalId={shown.proposalId ?? null}
          onDone={() => setShown(null)}
        />
      ) : null}
      {admin ? (
        <NumberInput
          label="Overlap when rotating (minutes)"
          description="How long the old secret stays valid beside the new one; 0 ends it at once"
          min={0}
          max={7 * DAY_MINUTES}
          allowDecimal={false}
          allowNegative={false}
          value={overlapMinutes}
          onChange={(value) => setOverlapMinutes(typeof value === 'number' ? value : 0)}
          maw={360}
        />
      ) : null}
      {endpoints.isPending ? <Loader aria-label="Loading endpoints" /> : null}

      <Title order={2} size="h3">
        Inbound sources
      </Title>
      <Text size="sm">Custodians and chain watchers post here; Idem verifies their signature first.</Text>
      {admin ? (
        <CreateForm
          label="Source name"
          description="Lowercase, e.g. custodian"
          value={source}
          onChange={setSource}
          submit="Create inbound endpoint"
          loading={createInbound.isPending}
          onSubmit={() => createInbound.mutate(source, { onSuccess: () => setSource('') })}
        />
      ) : null}
      <EndpointTable
        testId="inbound-endpoints"
        first="Source"
        rows={(endpoints.data?.inbound ?? []).map((e) => ({
          endpoint: e,
          first: e.source,
          extra: <Code>/webhooks/{e.endpointId}</Code>,
          actions: actions('inbound', e, e.source),
        }))}
      />

      <Title order={2} size="h3">
        Outbound destinations
      </Title>
      <Text size="sm">
        Idem posts every state change here, signed with Standard Webhooks. A new destination receives nothing
        until another admin approves it and the waiting time has passed.
      </Text>
      {admin ? (
        <CreateForm
          label="Destination URL"
          type="url"
          miw={320}
          value={url}
          onChange={setUrl}
          submit="Create outbound endpoint"
          loading={createOutbound.isPending}
          onSubmit={() => createOutbound.mutate(url, { onSuccess: () => setUrl('') })}
        />
      ) : null}
      <EndpointTable
        testId="outbound-endpoints"
        first="URL"
        rows={(endpoints.data?.outbound ?? []).map((e) => ({
          endpoint: e,
          first: e.url,
          extra: (
            <Anchor component={Link} href={`/deliveries?endpoint=${e.endpointId}`}>
              Delivery log of {e.url}
            </Anchor>
          ),
          actions: actions('outbound', e, e.url),
        }))}
      />
    </>
  );
}

/** The four changes an administrator makes; each new secret is handed to `show`, once. */
function useEndpointChanges(overlapMinutes: number, show: (shown: ShownSecret) => void) {
  const queryClient = useQueryClient();
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff', 'endpoints'] });
  const createInbound = useMutation({
    mutationFn: (source: string) => api.staffConfig.createInboundEndpoint.mutate({ source }),
    onSuccess: (created, source) => {
      show({ title: `Secret of the new ${source} endpoint ${created.endpointId}`, secret: created.secret });
      refresh();
    },
  });
  const createOutbound = useMutation({
    mutationFn: (url: string) => api.staffConfig.createOutboundEndpoint.mutate({ url }),
    onSuccess: (created, url) => {
      const waits = created.outcome === 'PROPOSED' ? ': active once another admin approves' : '';
      show({
        title: `Signing secret of the new destination ${url}${waits}`,
        secret: created.secret,
        proposalId: created.proposalId,
      });
      refresh();
    },
  });
  const rotate = useMutation({
    mutationFn: (input: { direction: EndpointDirection; endpointId: string }) =>
      api.staffConfig.rotateEndpointSecret.mutate({ ...input, overlapMinutes }),
    onSuccess: (rotated) => {
      const until = rotated.previousSecretUntil
        ? `; the old one stays valid until ${formatTime(rotated.previousSecretUntil)}`
        : '; the old one is no longer valid';
      show({ title: `New secret of ${rotated.endpointId}${until}`, secret: rotated.secret });
      refresh();
    },
  });
  const disable = useMutation({
    mutationFn: (input: { direction: EndpointDirection; endpointId: string }) =>
      api.staffConfig.disableEndpoint.mutate(input),
    onSuccess: refresh,
  });
  return { createInbound, createOutbound, rotate, disable };
}

type EndpointChanges = ReturnType<typeof useEndpointChanges>;

function EndpointActions({
  direction,
  endpoint,
  name,
  rotate,
  disable,
}: {
  direction: EndpointDirection;
  endpoint: Lifecycle;
  name: string;
  rotate: EndpointChanges['rotate'];
  disable: EndpointChanges['disable'];
}) {
  return (
    <Group gap="xs" wrap="nowrap">
      <Button
        size="xs"
        variant="light"
        loading={rotate.isPending}
        onClick={() => rotate.mutate({ direction, endpointId: endpoint.endpointId })}
      >
        Rotate secret of {name}
      </Button>
      <Button
        size="xs"
        variant="light"
        color="red"
        loading={disable.isPending}
        onClick={() => disable.mutate({ direction, endpointId: endpoint.endpointId })}
      >
        Disable {name}
      </Button>
    </Group>
  );
}

/** One field and its create button (an inbound source's name, an outbound destination's URL). */
function CreateForm(props: {
  label: string;
  description?: string;
  type?: 'url';
  miw?: number;
  value: string;
  onChange: (value: string) => void;
  submit: string;
  loading: boolean;
  onSubmit: () => void;
}) {
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        props.onSubmit();
      }}
    >
      <Group align="end">
        <TextInput
          label={props.label}
          {...(props.description ? { description: props.description } : {})}
          {...(props.type ? { type: props.type } : {})}
          value={props.value}
          onChange={(event) => props.onChange(event.currentTarget.value)}
          required
          {...(props.miw ? { miw: props.miw } : {})}
        />
        <Button type="submit" loading={props.loading}>
          {props.submit}
        </Button>
      </Group>
    </form>
  );
}

function EndpointTable({
  testId,
  first,
  rows,
}: {
  testId: string;
  first: string;
  rows: { endpoint: Lifecycle; first: string; extra: ReactNode; actions: ReactNode }[];
}) {
  if (rows.length === 0) return <Text>None yet.</Text>;
  return (
    <Table.ScrollContainer minWidth={900}>
      <Table striped data-testid={testId}>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>{first}</Table.Th>
            <Table.Th>Endpoint</Table.Th>
            <Table.Th>Created</Table.Th>
            <Table.Th>Secret rotated</Table.Th>
            <Table.Th>Old secret valid until</Table.Th>
            <Table.Th>Status</Table.Th>
            <Table.Th />
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map(({ endpoint, first: name, extra, actions }) => (
            <Table.Tr key={endpoint.endpointId}>
              <Table.Td style={{ wordBreak: 'break-all' }}>{name}</Table.Td>
              <Table.Td>{extra}</Table.Td>
              <Table.Td>{formatTime(endpoint.createdAt)}</Table.Td>
              <Table.Td>{endpoint.rotatedAt ? formatTime(endpoint.rotatedAt) : 'never'}</Table.Td>
              <Table.Td>
                {endpoint.previousSecretUntil && Date.parse(endpoint.previousSecretUntil) > Date.now()
                  ? formatTime(endpoint.previousSecretUntil)
                  : '–'}
              </Table.Td>
              <Table.Td>
                <Badge
                  variant="filled"
                  color={
                    endpoint.disabledAt ? 'gray.7' : endpoint.activatedAt === null ? 'yellow.9' : 'teal.9'
                  }
                >
                  {endpoint.disabledAt
                    ? 'disabled'
                    : endpoint.activatedAt === null
                      ? 'awaiting approval'
                      : 'active'}
                </Badge>
              </Table.Td>
              <Table.Td>{actions}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}
