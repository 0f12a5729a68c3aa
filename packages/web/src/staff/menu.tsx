import { roleSeesScreen, type StaffRole, type StaffScreen } from '@idem/contracts';
import { Box, NavLink, Text } from '@mantine/core';
import { Link } from 'wouter';

/**
 * The menu, grouped by task. Each entry names its screen in the role table of @idem/contracts
 * (STAFF_SCREEN_PERMISSIONS), which alone says who may use it: a role sees only its own entries.
 */
const MENU: { group: string; items: { href: string; label: string; screen: StaffScreen }[] }[] = [
  {
    group: 'Queues',
    items: [
      { href: '/overview', label: 'Overview', screen: 'overview' },
      { href: '/withdrawals', label: 'Withdrawals', screen: 'withdrawals' },
      { href: '/approvals', label: 'Approval queue', screen: 'approvals' },
      { href: '/proposals', label: 'Proposals', screen: 'proposals' },
      { href: '/broadcast', label: 'BROADCAST queue', screen: 'broadcast' },
      { href: '/unknown', label: 'UNKNOWN queue', screen: 'unknown' },
      { href: '/failed', label: 'FAILED_TERMINAL queue', screen: 'failed' },
      { href: '/search', label: 'Search', screen: 'search' },
      { href: '/freeze', label: 'Freeze', screen: 'freeze' },
    ],
  },
  {
    group: 'Money movement',
    items: [
      { href: '/withdraw', label: 'New withdrawal', screen: 'withdraw' },
      { href: '/adjustments', label: 'Adjustments and credits', screen: 'adjustments' },
      { href: '/nonces', label: 'Wallet nonces', screen: 'nonces' },
    ],
  },
  {
    group: 'Reconciliation',
    items: [
      { href: '/breaks', label: 'Reconciliation breaks', screen: 'breaks' },
      { href: '/reconciliation', label: 'Balance reconciliation', screen: 'reconciliation' },
      { href: '/inbox', label: 'Webhook inbox', screen: 'inbox' },
      { href: '/deliveries', label: 'Outbound webhooks', screen: 'deliveries' },
    ],
  },
  {
    group: 'Configuration',
    items: [
      { href: '/branding', label: 'Branding', screen: 'branding' },
      { href: '/api-keys', label: 'API keys', screen: 'apiKeys' },
      { href: '/endpoints', label: 'Webhook endpoints', screen: 'endpoints' },
      { href: '/risk-rules', label: 'Risk rules', screen: 'riskRules' },
    ],
  },
  {
    group: 'Team and security',
    items: [
      { href: '/team', label: 'Team', screen: 'team' },
      { href: '/passkeys', label: 'Passkeys', screen: 'passkeys' },
      { href: '/audit', label: 'Audit log', screen: 'audit' },
    ],
  },
];

/** The menu's groups and entries this role may use; a group with none is left out. */
function menuFor(role: StaffRole) {
  return MENU.map((group) => ({
    ...group,
    items: group.items.filter((item) => roleSeesScreen(role, item.screen)),
  })).filter((group) => group.items.length > 0);
}

/** The role's menu entries under their group headings. */
export function StaffMenu({ role, location }: { role: StaffRole; location: string }) {
  return (
    <>
      {menuFor(role).map((group) => (
        <Box key={group.group} component="section" aria-label={group.group} mb="xs">
          <Text size="xs" fw={700} c="gray.7" tt="uppercase" px="xs" pt="xs">
            {group.group}
          </Text>
          {group.items.map((section) => (
            <NavLink
              key={section.href}
              component={Link}
              href={section.href}
              label={section.label}
              // Filled: white on the primary shade reads at AA contrast, hovered or not.
              variant="filled"
              active={location === section.href}
              aria-current={location === section.href ? 'page' : undefined}
            />
          ))}
        </Box>
      ))}
    </>
  );
}
