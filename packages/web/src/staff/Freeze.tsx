import { type FreezeInput, type FreezeTripSettings, roleAllows } from '@idem/contracts';
import { Alert, Badge, Button, Group, Loader, Select, Table, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useStaff } from './session.tsx';

type FreezesData = Awaited<ReturnType<typeof api.staffFreeze.list.query>>;
type FreezeRow = FreezesData['freezes'][number];

/**
 * The freeze switch (docs/GOVERNANCE.md "Freeze"): a member with `operate` freezes the tenant, an
 * asset or an account at once; nothing under a freeze is signed or sent, and the withdrawals it holds
 * are listed here. Lifting is proposed by an admin and applies once another admin approves it.
 * Every staff member reads this screen.
 */
export function Freeze() {
  const me = useStaff();
  const freezes = useQuery({ queryKey: ['staff', 'freezes'], queryFn: () => api.staffFreeze.list.query() });
  const inForce = freezes.data?.freezes.filter((f) => f.liftedAt === null) ?? [];
  return (
    <>
      <Title order={1} size="h2">
        Freeze
      </Title>
      <Text size="sm">
        A freeze stops the signing and sending of every withdrawal under it, at once. Held withdrawals are
        kept and shown below; deposits, reconciliation and the settlement of what is already on chain go on.
        Lifting a freeze needs another admin's approval.
      </Text>
      <ProblemAlert error={freezes.error} />
      {freezes.isPending ? <Loader aria-label="Loading freezes" /> : null}
      {freezes.data && inForce.length === 0 ? (
        <Alert color="green" title="Nothing is frozen" data-testid="freeze-status" />
      ) : null}
      {inForce.length > 0 ? (
        <Alert color="red" title={`${inForce.length} freeze(s) in force`} data-testid="freeze-status" />
      ) : null}
      {roleAllows(me.role, 'operate') ? <FreezeForm /> : null}
      {freezes.data && freezes.data.freezes.length > 0 ? (
        <FreezesTable rows={freezes.data.freezes} admin={roleAllows(me.role, 'administer')} />
      ) : null}
      <Title order={2} size="h3">
        Withdrawals held by a freeze
      </Title>
      {freezes.data && freezes.data.held.length === 0 ? <Text>None held.</Text> : null}
      {freezes.data && freezes.data.held.length > 0 ? <HeldTable held={freezes.data.held} /> : null}
      <Trips admin={roleAllows(me.role, 'administer')} />
    </>
  );
}

type TripRow = Awaited<ReturnType<typeof api.staffFreeze.trips.query>>['trips'][number];

/**
 * The automatic trips (docs/GOVERNANCE.md "Automatic trips"): every member sees them; an admin sets
 * one row. Turning a trip on or making it stricter applies at once; off or looser goes to the other
 * admins, and the row shows the loosening waiting.
 */
function Trips({ admin }: { admin: boolean }) {
  const trips = useQuery({
    queryKey: ['staff', 'freeze-trips'],
    queryFn: () => api.staffFreeze.trips.query(),
  });
  return (
    <>
      <Title order={2} size="h3">
        Automatic trips
      </Title>
      <Text size="sm">
        A trip freezes by itself, once, when more withdrawals than allowed become UNKNOWN or FAILED_TERMINAL
        within its window (the whole tenant, or one asset), or when an asset's withdrawals sent within an hour
        exceed a share of its custody balance (that asset). Lifting its freeze needs another admin's approval,
        like any freeze.
      </Text>
      <ProblemAlert error={trips.error} />
      {trips.data && trips.data.trips.length === 0 ? <Text>No trips set.</Text> : null}
      {trips.data && trips.data.trips.length > 0 ? <TripsTable rows={trips.data.trips} /> : null}
      {admin ? <TripForm /> : null}
    </>
  );
}

function TripsTable({ rows }: { rows: TripRow[] }) {
  return (
    <Table striped data-testid="freeze-trips">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Applies to</Table.Th>
          <Table.Th>Failures</Table.Th>
          <Table.Th>Outflow in an hour</Table.Th>
          <Table.Th>Set by</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {rows.map((row) => (
          <Table.Tr key={row.assetCode ?? ''} data-testid={`trip-${row.assetCode ?? 'tenant'}`}>
            <Table.Td>{row.assetCode ?? 'Every asset'}</Table.Td>
            <Table.Td>
              {row.failuresMax === null
                ? 'off'
                : `more than ${row.failuresMax} within ${row.failuresWindowSeconds} s`}
            </Table.Td>
            <Table.Td>
              {row.outflowShareMaxPercent === null
                ? 'off'
                : `above ${row.outflowShareMaxPercent}% of custody`}
              {row.pendingLoosenProposalId ? (
                <Badge color="orange" ml="xs">
                  loosening awaiting approval
                </Badge>
              ) : null}
            </Table.Td>
            <Table.Td>
              {row.updatedBy} at {formatTime(row.updatedAt)}
            </Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

/** A whole number from a field, or null when it is left empty (that trip off). */
function wholeOrNull(value: string): number | null {
  const trimmed = value.trim();
  return trimmed === '' ? null : Number(trimmed);
}

function TripForm() {
  const queryClient = useQueryClient();
  const [assetCode, setAssetCode] = useState('');
  const [failuresMax, setFailuresMax] = useState('');
  const [windowSeconds, setWindowSeconds] = useState('');
  const [sharePercent, setSharePercent] = useState('');
  const settings = (): FreezeTripSettings => ({
    assetCode: assetCode.trim() === '' ? null : assetCode.trim(),
    failuresMax: wholeOrNull(failuresMax),
    failuresWindowSeconds: wholeOrNull(windowSeconds),
    outflowShareMaxPercent: wholeOrNull(sharePercent),
  });
  const set = useMutation({
    mutationFn: () => api.staffFreeze.setTrip.mutate(settings()),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['staff', 'freeze-trips'] }),
  });
  return (
    <form
      aria-label="Set trips"
      onSubmit={(event) => {
        event.preventDefault();
        set.mutate();
      }}
    >
      <Group align="end">
        <TextInput
          label="Asset code (empty: every asset)"
          value={assetCode}
          onChange={(event) => setAssetCode(event.currentTarget.value)}
        />
        <TextInput
          label="Failures allowed"
          inputMode="numeric"
          value={failuresMax}
          onChange={(event) => setFailuresMax(event.currentTarget.value)}
        />
        <TextInput
          label="Within (seconds)"
          inputMode="numeric"
          value={windowSeconds}
          onChange={(event) => setWindowSeconds(event.currentTarget.value)}
        />
        <TextInput
          label="Outflow share allowed (%)"
          inputMode="numeric"
          value={sharePercent}
          onChange={(event) => setSharePercent(event.currentTarget.value)}
        />
        <Button type="submit" loading={set.isPending}>
          Set trips
        </Button>
      </Group>
      <Text size="xs">An empty field turns that trip off, which another admin must approve.</Text>
      {set.data?.outcome === 'APPLIED' ? (
        <Alert color="green" title="Trips in force" data-testid="trip-outcome" />
      ) : null}
      {set.data?.outcome === 'PROPOSED' ? (
        <Alert color="orange" title="Proposed to the other admins" data-testid="trip-outcome">
          It loosens a trip: it applies once another admin approves it and the tenant's delay has passed.
        </Alert>
      ) : null}
      <ProblemAlert error={set.error} title="Trips not set" />
    </form>
  );
}

function FreezeForm() {
  const queryClient = useQueryClient();
  const [scope, setScope] = useState<FreezeInput['scope']>('tenant');
  const [target, setTarget] = useState('');
  const [reason, setReason] = useState('');
  const request = (): FreezeInput =>
    scope === 'tenant'
      ? { scope, reason }
      : scope === 'asset'
        ? { scope, assetCode: target.trim(), reason }
        : { scope, accountRef: target.trim(), reason };
  const freeze = useMutation({
    mutationFn: () => api.staffFreeze.freeze.mutate(request()),
    onSuccess: async () => {
      setReason('');
      await queryClient.invalidateQueries({ queryKey: ['staff', 'freezes'] });
    },
  });
  return (
    <form
      aria-label="Freeze"
      onSubmit={(event) => {
        event.preventDefault();
        freeze.mutate();
      }}
    >
      <Group align="end">
        <Select
          label="Scope"
          data={[
            { value: 'tenant', label: 'Whole tenant' },
            { value: 'asset', label: 'One asset' },
            { value: 'account', label: 'One account' },
          ]}
          value={scope}
          allowDeselect={false}
          onChange={(value) => setScope((value as FreezeInput['scope'] | null) ?? 'tenant')}
        />
        {scope !== 'tenant' ? (
          <TextInput
            label={scope === 'asset' ? 'Asset code' : 'Account'}
            value={target}
            onChange={(event) => setTarget(event.currentTarget.value)}
            required
          />
        ) : null}
        <TextInput
          label="Reason"
          value={reason}
          onChange={(event) => setReason(event.currentTarget.value)}
          required
        />
        <Button type="submit" color="red" loading={freeze.isPending}>
          Freeze now
        </Button>
      </Group>
      <ProblemAlert error={freeze.error} title="Not frozen" />
    </form>
  );
}

function FreezesTable({ rows, admin }: { rows: FreezeRow[]; admin: boolean }) {
  return (
    <Table.ScrollContainer minWidth={720}>
      <Table striped data-testid="freezes">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Scope</Table.Th>
            <Table.Th>Reason</Table.Th>
            <Table.Th>Frozen by</Table.Th>
            <Table.Th>State</Table.Th>
            <Table.Th />
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map((row) => (
            <Table.Tr key={row.freezeId} data-testid={`freeze-${row.freezeId}`}>
              <Table.Td>
                {row.scope === 'tenant' ? 'Whole tenant' : `${row.scope} ${row.assetCode ?? row.accountRef}`}
              </Table.Td>
              <Table.Td>{row.reason}</Table.Td>
              <Table.Td>
                {row.frozenBy} at {formatTime(row.frozenAt)}
              </Table.Td>
              <Table.Td>
                {row.liftedAt ? (
                  <Badge color="gray">lifted {formatTime(row.liftedAt)}</Badge>
                ) : row.pendingLiftProposalId ? (
                  <Badge color="orange">in force; lift awaiting approval</Badge>
                ) : (
                  <Badge color="red">in force</Badge>
                )}
              </Table.Td>
              <Table.Td>
                {admin && !row.liftedAt && !row.pendingLiftProposalId ? (
                  <ProposeLift freezeId={row.freezeId} />
                ) : null}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

function ProposeLift({ freezeId }: { freezeId: string }) {
  const queryClient = useQueryClient();
  const lift = useMutation({
    mutationFn: () => api.staffFreeze.proposeUnfreeze.mutate({ freezeId }),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['staff', 'freezes'] }),
  });
  return (
    <>
      <Button size="xs" variant="light" onClick={() => lift.mutate()} loading={lift.isPending}>
        Propose lift
      </Button>
      <ProblemAlert error={lift.error} title="Not proposed" />
    </>
  );
}

function HeldTable({ held }: { held: FreezesData['held'] }) {
  return (
    <Table striped data-testid="held-withdrawals">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Withdrawal</Table.Th>
          <Table.Th>Account</Table.Th>
          <Table.Th>Amount (minor units)</Table.Th>
          <Table.Th>State</Table.Th>
          <Table.Th>Requested</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {held.map((op) => (
          <Table.Tr key={op.operationId}>
            <Table.Td>
              <Link href={`/operations/${op.operationId}`}>{op.operationId}</Link>
            </Table.Td>
            <Table.Td>{op.accountRef}</Table.Td>
            <Table.Td>
              {op.amountMinor} {op.assetCode}
            </Table.Td>
            <Table.Td>
              <Badge color="red">{op.state}, held by a freeze</Badge>
            </Table.Td>
            <Table.Td>{formatTime(op.createdAt)}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}
