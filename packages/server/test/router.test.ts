import { PROCEDURES } from '@idem/sdk';
import { describe, expect, it } from 'vitest';
import { appRouter } from '../src/router.ts';

describe('router and SDK facade', () => {
  it('every procedure the SDK calls exists with the same kind (query or mutation)', () => {
    const procedures = appRouter._def.procedures as unknown as Record<string, { _def: { type: string } }>;
    for (const { path, type } of Object.values(PROCEDURES)) {
      expect(procedures[path]?._def.type, path).toBe(type);
    }
  });
});
