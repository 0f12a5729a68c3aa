export * from './access.ts';
export * from './balances.ts';
export * from './boundary.ts';
export * from './inbox.ts';
export * from './journal.ts';
export * from './operations.ts';
export * from './outbox.ts';
export * from './tenants.ts';
