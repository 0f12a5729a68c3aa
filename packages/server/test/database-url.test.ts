/**
 * The server reads an HA formation's connection string: several hosts and
 * target_session_attrs=read-write (docs/OPERATIONS.md). The WHATWG URL parser refuses a host list,
 * so a plain URL check would refuse the production topology at startup.
 */
import { describe, expect, it } from 'vitest';
import { readEnv } from '../src/env.ts';

const multiHost = 'postgres://idem_app@db-a:5432,db-b:5432/idem?target_session_attrs=read-write';

describe('DATABASE_URL for a high-availability formation', () => {
  it('I16 C25 accepts a multi-host connection string for DATABASE_URL and MIGRATION_DATABASE_URL', () => {
    const env = readEnv({
      DATABASE_URL: multiHost,
      MIGRATION_DATABASE_URL: multiHost.replace('idem_app', 'idem_owner'),
    });
    expect(env.DATABASE_URL).toBe(multiHost);
  });

  it('I16 still refuses what is not a PostgreSQL connection string', () => {
    expect(() => readEnv({ DATABASE_URL: 'http://db-a/idem' })).toThrow(/DATABASE_URL/);
    expect(() => readEnv({ DATABASE_URL: 'postgres://db-a:x/idem' })).toThrow(/DATABASE_URL/);
  });
});
