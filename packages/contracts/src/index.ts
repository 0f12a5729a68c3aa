export * from './amount.ts';
export * from './api.ts';
export * from './errors.ts';
export * from './key.ts';
export * from './network.ts';
export * from './operation.ts';
export * from './web.ts';
export * from './webhooks.ts';
