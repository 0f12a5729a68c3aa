import type { StaffNotificationView } from '@idem/contracts';
import { Anchor, Badge, Paper, Stack, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { Link } from 'wouter';
import { api } from '../api.ts';
import { formatTime } from '../ui/format.ts';
import { ProblemAlert } from '../ui/ProblemAlert.tsx';

/** How many of the member's notices the card lists (the newest). */
export const NOTICES_SHOWN = 10;

const TOPIC_LABELS: Record<string, { label: string; color: string }> = {
  control_change_proposed: { label: 'Proposed', color: 'blue.8' },
  control_change_approved: { label: 'Approved', color: 'yellow.9' },
  control_change_applied: { label: 'In force', color: 'teal.9' },
  control_change_refused: { label: 'Not applied', color: 'gray.7' },
  freeze_tripped: { label: 'Frozen', color: 'red.8' },
};

/**
 * The signed-in admin's control-change notices, newest first (I31-NOTICE): every admin is told when
 * a control change is proposed, approved (with when it takes effect), applied or refused, here and
 * by e-mail, so a change nobody expected is seen while it still waits. Each links to its proposal.
 */
export function NoticesCard({ refreshMs }: { refreshMs: number }) {
  const notices = useQuery({
    queryKey: ['staff', 'notifications'],
    queryFn: () => api.staffOverview.notifications.query(),
    refetchInterval: refreshMs,
  });
  const items: StaffNotificationView[] = (notices.data ?? []).slice(0, NOTICES_SHOWN);
  return (
    <Paper
      withBorder
      p="sm"
      component="section"
      aria-label="Control-change notices"
      data-testid="overview-notices"
    >
      <Stack gap="xs">
        <Title order={2} size="h4">
          Control-change notices
        </Title>
        <ProblemAlert error={notices.error} />
        {notices.data && items.length === 0 ? <Text size="sm">No control change so far.</Text> : null}
        {items.length > 0 ? (
          <Table.ScrollContainer minWidth={560}>
            <Table fz="sm">
              <Table.Tbody>
                {items.map((notice) => (
                  <NoticeRow key={notice.notificationId} notice={notice} />
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        ) : null}
      </Stack>
    </Paper>
  );
}

function NoticeRow({ notice }: { notice: StaffNotificationView }) {
  const topic = TOPIC_LABELS[notice.topic] ?? { label: notice.topic, color: 'gray.7' };
  return (
    <Table.Tr data-topic={notice.topic} data-proposal-id={notice.proposalId ?? ''}>
      <Table.Td style={{ whiteSpace: 'nowrap' }}>{formatTime(notice.createdAt)}</Table.Td>
      <Table.Td>
        <Badge color={topic.color} variant="filled" tt="none">
          {topic.label}
        </Badge>
      </Table.Td>
      <Table.Td>{notice.message}</Table.Td>
      <Table.Td>
        {notice.proposalId ? (
          <Anchor component={Link} href={`/proposals/${notice.proposalId}`}>
            Proposal {notice.proposalId.slice(0, 8)}
          </Anchor>
        ) : null}
      </Table.Td>
    </Table.Tr>
  );
}
