// One file per concept, named after core's folder that owns it (access/, approvals/, attempts/, ...).
export * from './access.ts';
export * from './approvals.ts';
export * from './attempts.ts';
export * from './audit.ts';
export * from './branding.ts';
export * from './delivery.ts';
export * from './deposits.ts';
export * from './hot-wallets.ts';
export * from './inbox.ts';
export * from './journal.ts';
export * from './operations.ts';
export * from './outbox.ts';
export * from './proposals.ts';
export * from './reconciliation.ts';
export * from './risk.ts';
export * from './staff.ts';
export * from './tenants.ts';
