/** Tenants and the ledger states tests start from, made through core's real operations. */

export * from './api-tenant.ts';
export * from './hot-wallet.ts';
export * from './ledger.ts';
export * from './risk.ts';
export * from './staff.ts';
