import { formatMinor, limitMinorSchema, roleAllows } from '@idem/contracts';
import {
  Button,
  Code,
  Group,
  Loader,
  NumberInput,
  Select,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useWaitingRiskChanges, WaitingRiskChanges } from './RiskRuleChanges.tsx';
import { useStaff } from './session.tsx';

/** What a typed minor-unit amount is in the asset's units, exactly, or why it is not one. */
function inUnits(minor: string, decimals: number, asset: string): string {
  if (minor === '') return `In minor units (${decimals} decimals)`;
  if (!limitMinorSchema.safeParse(minor).success) return 'Whole minor units only, without sign or decimals';
  return `= ${formatMinor(minor, decimals)} ${asset}`;
}

/**
 * Risk rules per asset: the auto-approve limit, the four-eyes threshold and the velocity
 * limit, with every change, who made it and when. Amounts are exact minor-unit strings, shown in
 * the asset's units beside them. Administrators change; every staff member reads.
 */
export function RiskRules() {
  const me = useStaff();
  const admin = roleAllows(me.role, 'administer');
  const rules = useQuery({
    queryKey: ['staff', 'risk-rules'],
    queryFn: () => api.staffConfig.riskRules.query(),
  });
  const history = useQuery({
    queryKey: ['staff', 'risk-history'],
    queryFn: () => api.staffConfig.riskHistory.query(),
  });
  const waiting = useWaitingRiskChanges();
  const decimalsOf = (code: string) => rules.data?.assets.find((a) => a.code === code)?.decimals ?? 0;
  return (
    <>
      <Title order={1} size="h2">
        Risk rules
      </Title>
      <Text size="sm">
        Up to the auto-approve limit a withdrawal with no other flag is approved by the system; from the
        four-eyes threshold on it needs two approvals; more withdrawals from one account in an hour than the
        velocity limit is a flag.
      </Text>
      <ProblemAlert error={rules.error} />
      {rules.isPending ? <Loader aria-label="Loading rules" /> : null}
      {rules.data ? <RulesTable rules={rules.data.rules} /> : null}
      <WaitingRiskChanges waiting={waiting} decimalsOf={decimalsOf} />
      {admin && rules.data ? <RuleForm data={rules.data} /> : null}

      <Title order={2} size="h3">
        History of changes
      </Title>
      <ProblemAlert error={history.error} />
      {history.data && history.data.length === 0 ? <Text>No changes yet.</Text> : null}
      {history.data && history.data.length > 0 ? <HistoryTable history={history.data} /> : null}
    </>
  );
}

type RulesData = Awaited<ReturnType<typeof api.staffConfig.riskRules.query>>;
type History = Awaited<ReturnType<typeof api.staffConfig.riskHistory.query>>;

function RulesTable({ rules }: { rules: RulesData['rules'] }) {
  return (
    <Table.ScrollContainer minWidth={720}>
      <Table striped data-testid="risk-rules">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Asset</Table.Th>
            <Table.Th>Auto-approve up to</Table.Th>
            <Table.Th>Four eyes from</Table.Th>
            <Table.Th>Velocity per hour</Table.Th>
            <Table.Th>Changed</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rules.map((rule) => (
            <Table.Tr key={rule.assetCode} data-testid={`risk-rule-${rule.assetCode}`}>
              <Table.Td>{rule.assetCode}</Table.Td>
              <Table.Td>
                {formatMinor(rule.autoApproveMaxMinor, rule.decimals)} ({rule.autoApproveMaxMinor})
              </Table.Td>
              <Table.Td>
                {formatMinor(rule.fourEyesMinMinor, rule.decimals)} ({rule.fourEyesMinMinor})
              </Table.Td>
              <Table.Td>{rule.velocityMaxPerHour}</Table.Td>
              <Table.Td>{formatTime(rule.updatedAt)}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

/** An administrator's change of one asset's rule; picking an asset fills in its current values. */
function RuleForm({ data }: { data: RulesData }) {
  const queryClient = useQueryClient();
  const [assetCode, setAssetCode] = useState<string | null>(null);
  const [autoApprove, setAutoApprove] = useState('');
  const [fourEyes, setFourEyes] = useState('');
  const [velocity, setVelocity] = useState<number>(10);
  const save = useMutation({
    mutationFn: () =>
      api.staffConfig.setRiskRule.mutate({
        assetCode: assetCode ?? '',
        autoApproveMaxMinor: autoApprove,
        fourEyesMinMinor: fourEyes,
        velocityMaxPerHour: velocity,
      }),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ['staff'] }),
  });
  const decimals = data.assets.find((a) => a.code === assetCode)?.decimals ?? 0;
  const pick = (code: string | null) => {
    setAssetCode(code);
    const rule = data.rules.find((r) => r.assetCode === code);
    setAutoApprove(rule?.autoApproveMaxMinor ?? '');
    setFourEyes(rule?.fourEyesMinMinor ?? '');
    setVelocity(rule?.velocityMaxPerHour ?? 10);
    save.reset();
  };
  return (
    <>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          save.mutate();
        }}
      >
        <Title order={2} size="h3" mb="xs">
          Change a rule
        </Title>
        <Group align="start">
          <Select
            label="Asset"
            data={data.assets.map((a) => a.code)}
            value={assetCode}
            onChange={pick}
            required
          />
          <TextInput
            label="Auto-approve limit (minor units)"
            description={inUnits(autoApprove, decimals, assetCode ?? '')}
            value={autoApprove}
            onChange={(event) => setAutoApprove(event.currentTarget.value.trim())}
            inputMode="numeric"
            required
          />
          <TextInput
            label="Four-eyes threshold (minor units)"
            description={inUnits(fourEyes, decimals, assetCode ?? '')}
            value={fourEyes}
            onChange={(event) => setFourEyes(event.currentTarget.value.trim())}
            inputMode="numeric"
            required
          />
          <NumberInput
            label="Velocity limit (per account per hour)"
            min={0}
            allowDecimal={false}
            value={velocity}
            onChange={(value) => setVelocity(typeof value === 'number' ? value : Number.NaN)}
            required
          />
        </Group>
        <Button type="submit" mt="sm" loading={save.isPending} disabled={!assetCode}>
          Save rule
        </Button>
        {save.isSuccess ? (
          <Text role="status" mt="xs">
            {save.data.outcome === 'PROPOSED'
              ? `Proposed: raising a limit needs ${save.data.approvalsRequired} other admin approval(s) (Proposals), then takes effect after the tenant's delay.`
              : save.data.changed
                ? `Saved: policy version ${save.data.policyVersion}.`
                : 'Nothing changed.'}
          </Text>
        ) : null}
      </form>
      <ProblemAlert error={save.error} title="Rule not changed" />
    </>
  );
}

function HistoryTable({ history }: { history: History }) {
  return (
    <Table.ScrollContainer minWidth={720}>
      <Table striped data-testid="risk-history">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>When</Table.Th>
            <Table.Th>Who</Table.Th>
            <Table.Th>Asset</Table.Th>
            <Table.Th>Version</Table.Th>
            <Table.Th>Before</Table.Th>
            <Table.Th>After</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {[...history].reverse().map((change) => (
            <Table.Tr key={change.toVersion}>
              <Table.Td>{formatTime(change.changedAt)}</Table.Td>
              <Table.Td>{change.actorEmail ?? change.actor}</Table.Td>
              <Table.Td>{change.assetCode ?? '–'}</Table.Td>
              <Table.Td>
                {change.fromVersion} → {change.toVersion}
              </Table.Td>
              <Table.Td>
                <RuleValues values={change.before} />
              </Table.Td>
              <Table.Td>
                <RuleValues values={change.after} />
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

const SHOWN_FIELDS: [string, string][] = [
  ['auto_approve_max_minor', 'auto-approve'],
  ['four_eyes_min_minor', 'four eyes'],
  ['velocity_max_per_hour', 'velocity'],
];

function RuleValues({ values }: { values: Record<string, string> | null }) {
  if (!values) return <Text size="sm">–</Text>;
  return (
    <Text size="sm">
      {SHOWN_FIELDS.filter(([field]) => values[field] !== undefined).map(([field, name]) => (
        <span key={field}>
          {name} <Code>{values[field]}</Code>{' '}
        </span>
      ))}
    </Text>
  );
}
