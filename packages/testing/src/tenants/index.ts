/** Tenants and the ledger states tests start from, made through core's real operations. */

export * from './ledger.ts';
