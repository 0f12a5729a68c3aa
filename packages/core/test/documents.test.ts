import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const root = new URL('../../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');

describe('the serialization limits are written down', () => {
  it('C25 docs/SERIALIZATION.md states the single-writer scope, failover behaviour and multi-node rules, linked from the README', () => {
    const doc = read('docs/SERIALIZATION.md').toLowerCase();
    expect(read('README.md')).toContain('docs/SERIALIZATION.md');
    for (const topic of ['primary', 'failover', 'synchronous', 'tenant_id', 'unknown', 'pglite']) {
      expect(doc).toContain(topic);
    }
  });
});
