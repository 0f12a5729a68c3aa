import { type StaffRole, staffRoles, type TeamMember } from '@idem/contracts';
import {
  Alert,
  Badge,
  Button,
  Group,
  Loader,
  Paper,
  Select,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useState } from 'react';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';
import { useStaff } from './session.tsx';

const roleOptions = staffRoles.map((role) => ({ value: role, label: role }));

/**
 * The Team screen (I14-TEAM), for admins: the staff list, invitations (the link goes to the
 * invitee's e-mail only, never to this screen; with two admins or more an invite is first approved
 * by another admin, I31-QUORUM), role changes and disabling. A member who joined or
 * changed role recently shows from when their approvals count (the cooling-off period). Every change asks for a fresh code when the last is older than
 * the step-up window, and is audited by the server.
 */
export function Team() {
  const queryClient = useQueryClient();
  const team = useQuery({ queryKey: ['staff', 'team'], queryFn: () => api.staffTeam.list.query() });
  const refresh = () => void queryClient.invalidateQueries({ queryKey: ['staff', 'team'] });
  return (
    <Stack>
      <Title order={1} size="h2">
        Team
      </Title>
      <Invite onInvited={refresh} />
      {team.isPending ? <Loader aria-label="Loading the team" /> : null}
      <ProblemAlert error={team.error} />
      {team.data ? (
        <Table.ScrollContainer minWidth={640}>
          <Table data-testid="team-table" striped>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>E-mail</Table.Th>
                <Table.Th>Role</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Authenticator</Table.Th>
                <Table.Th>Approvals</Table.Th>
                <Table.Th>Actions</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {team.data.staff.map((member) => (
                <MemberRow key={member.userId} member={member} onChanged={refresh} />
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      ) : null}
    </Stack>
  );
}

function Invite({ onInvited }: { onInvited(): void }) {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<StaffRole>('approver');
  const invite = useMutation({
    mutationFn: () => api.staffTeam.invite.mutate({ email: email.trim(), role }),
    onSuccess: () => {
      setEmail('');
      onInvited();
    },
  });
  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    invite.mutate();
  };
  return (
    <Paper withBorder p="md">
      <form onSubmit={onSubmit}>
        <Stack>
          <Title order={2} size="h4">
            Add a staff member
          </Title>
          <Group align="end">
            <TextInput
              label="E-mail"
              type="email"
              value={email}
              onChange={(event) => setEmail(event.currentTarget.value)}
              required
            />
            <Select
              label="Role"
              data={roleOptions}
              value={role}
              onChange={(value) => value && setRole(value as StaffRole)}
              allowDeselect={false}
            />
            <Button type="submit" loading={invite.isPending}>
              Invite
            </Button>
          </Group>
          <ProblemAlert error={invite.error} title="Not invited" />
          {invite.data?.outcome === 'PROPOSED' ? (
            <Alert
              color="blue"
              role="status"
              title="Sent to the other admins for approval"
              data-testid="invitation-proposed"
              data-proposal-id={invite.data.proposalId ?? ''}
            >
              <Text size="sm">
                Inviting {invite.data.email} needs {invite.data.approvalsRequired} other admin approval(s) in{' '}
                <Link href={`/proposals/${invite.data.proposalId ?? ''}`}>Proposals</Link>. Once approved, the
                invitation is e-mailed to them after the team's delay.
              </Text>
            </Alert>
          ) : invite.data?.expiresAt ? (
            <Alert color="green" role="status" title="Invitation e-mailed" data-testid="invitation-sent">
              <Text size="sm">
                The invitation link went to {invite.data.email} only; it works once, until{' '}
                {new Date(invite.data.expiresAt).toLocaleString()}. They choose their password through it.
                Their approvals count only after the team's cooling-off period.
              </Text>
            </Alert>
          ) : null}
        </Stack>
      </form>
    </Paper>
  );
}

function MemberRow({ member, onChanged }: { member: TeamMember; onChanged(): void }) {
  const me = useStaff();
  const setRole = useMutation({
    mutationFn: (role: StaffRole) => api.staffTeam.setRole.mutate({ userId: member.userId, role }),
    onSuccess: onChanged,
  });
  const disable = useMutation({
    mutationFn: () => api.staffTeam.disable.mutate({ userId: member.userId }),
    onSuccess: onChanged,
  });
  const disabled = member.status === 'disabled';
  return (
    <Table.Tr data-testid="team-member" data-email={member.email}>
      <Table.Td>{member.email}</Table.Td>
      <Table.Td>
        <Select
          aria-label={`Role of ${member.email}`}
          data={roleOptions}
          value={member.role}
          onChange={(value) => value && value !== member.role && setRole.mutate(value as StaffRole)}
          allowDeselect={false}
          disabled={disabled}
          size="xs"
          w={130}
        />
        <ProblemAlert error={setRole.error} title="Role not changed" />
        {setRole.data?.outcome === 'PROPOSED' ? (
          <Text role="status" size="xs" data-testid="role-proposed">
            Proposed: other admins approve it (Proposals); it takes effect after the tenant's delay.
          </Text>
        ) : null}
      </Table.Td>
      <Table.Td>
        <Badge
          color={disabled ? 'gray.7' : member.status === 'invited' ? 'yellow' : 'teal.9'}
          variant="filled"
          tt="none"
        >
          {member.status}
        </Badge>
      </Table.Td>
      <Table.Td>{member.mfaEnrolled ? 'set up' : 'not set up'}</Table.Td>
      <Table.Td data-testid="approvals-from">
        {member.approvalsFrom
          ? `can approve from ${new Date(member.approvalsFrom).toLocaleString()}`
          : member.status === 'active'
            ? 'count now'
            : '—'}
      </Table.Td>
      <Table.Td>
        {disabled || member.userId === me.userId ? null : (
          <Button
            size="xs"
            color="red"
            variant="light"
            loading={disable.isPending}
            onClick={() => disable.mutate()}
            aria-label={`Disable ${member.email}`}
          >
            Disable
          </Button>
        )}
        <ProblemAlert error={disable.error} title="Not disabled" />
      </Table.Td>
    </Table.Tr>
  );
}
