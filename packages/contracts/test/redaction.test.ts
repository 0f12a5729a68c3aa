import { describe, expect, it } from 'vitest';
import { scrubbedError, scrubMessage } from '../src/redaction.ts';

describe('redaction', () => {
  it('I11-F9 drops provider key paths, connection passwords, SQL parameters and quoted input', () => {
    const cases: [string, string[]][] = [
      [
        'HTTP request failed.\nURL: https://eth.example/v2/SECRETKEY123\nRequest body: {"params":["0xabc"]}',
        ['SECRETKEY123', '0xabc'],
      ],
      ['connect ECONNREFUSED postgres://idem_app:hunter2@db.internal:5432/idem', ['hunter2', 'idem_app']],
      ['wss://mainnet.example/ws/v3/abcdef0123456789?token=PRIVATE', ['abcdef0123456789', 'PRIVATE']],
      ['Failed query: select $1::uuid\nparams: customer-secret', ['customer-secret']],
      ['invalid input syntax for type uuid: "customer-secret"', ['customer-secret']],
      ['Key (tenant_id, key)=(t-1, customer-secret) already exists.', ['customer-secret']],
      [`signing with 0x${'ab'.repeat(32)} failed`, ['ab'.repeat(32)]],
    ];
    for (const [message, secrets] of cases) {
      const scrubbed = scrubMessage(message);
      for (const secret of secrets) expect(scrubbed, message).not.toContain(secret);
    }
    // What helps a person stays: the host, the statement, the kind of failure.
    expect(scrubMessage('HTTP request failed.\nURL: https://eth.example/v2/SECRETKEY123')).toContain(
      'https://eth.example/[redacted]',
    );
    expect(scrubMessage('Failed query: select $1::uuid\nparams: x')).toBe('Failed query: select $1::uuid');
    expect(scrubbedError(new Error('x'.repeat(900)), 300)).toHaveLength(300);
  });
});
