import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { verifyWebhook } from '../src/index.ts';

const secret = `whsec_${Buffer.from('a-test-secret-of-32-bytes-length!').toString('base64')}`;
const body = JSON.stringify({
  type: 'operation.state_changed',
  timestamp: new Date().toISOString(),
  data: {
    operationId: 'op-1',
    kind: 'withdrawal',
    reference: '42',
    accountId: 'cust-7',
    asset: 'ETH',
    amountMinor: '1',
    from: 'BROADCAST',
    to: 'CONFIRMED',
    version: 6,
    owner: null,
    txHash: null,
    custodianTransferId: null,
    custodianTxHash: null,
  },
});

function signed(payload: string, signingSecret = secret) {
  const at = new Date();
  return {
    'webhook-id': 'msg_1',
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': new Webhook(signingSecret).sign('msg_1', at, payload),
  };
}

describe('verifyWebhook', () => {
  it('accepts a delivery signed with the endpoint secret and parses it', () => {
    expect(verifyWebhook(body, signed(body), secret).data.to).toBe('CONFIRMED');
  });

  it('refuses a changed body, another secret, or missing headers', () => {
    expect(() => verifyWebhook(body.replace('CONFIRMED', 'REJECTED'), signed(body), secret)).toThrow();
    const other = `whsec_${Buffer.from('another-secret-of-32-bytes-long!!').toString('base64')}`;
    expect(() => verifyWebhook(body, signed(body, other), secret)).toThrow();
    expect(() => verifyWebhook(body, {}, secret)).toThrow();
  });
});
