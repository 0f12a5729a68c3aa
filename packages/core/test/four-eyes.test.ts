import { isIdemError } from '@idem/contracts';
import { describe, expect, it } from 'vitest';
import { assertFirstDecision, assertFourEyes } from '../src/approvals/four-eyes.ts';

/**
 * The one four-eyes rule both staff decisions use (withdrawals and proposals): these prove the
 * same refusal, with the same code, whichever kind is decided on, without a database.
 */
const hash = 'b'.repeat(64);
const codeOf = (run: () => void): string | undefined => {
  try {
    run();
  } catch (error) {
    if (isIdemError(error)) return error.code;
    throw error;
  }
  return undefined;
};

describe('four eyes', () => {
  for (const [kind, requestedByRole] of [
    ['withdrawal', 'requester'],
    ['proposal', 'proposer'],
  ] as const) {
    const subject = { kind, requestedBy: 'staff:olga', requestedByRole, payloadHash: hash };

    it(`C24 the ${requestedByRole} of a ${kind} is refused FORBIDDEN; another staff member passes`, () => {
      expect(codeOf(() => assertFourEyes(subject, { staffId: 'staff:olga', payloadHash: hash }))).toBe(
        'FORBIDDEN',
      );
      expect(
        codeOf(() => assertFourEyes(subject, { staffId: 'staff:petra', payloadHash: hash })),
      ).toBeUndefined();
    });

    it(`C02 a ${kind} decision on another hash is PAYLOAD_MISMATCH, checked before who decides`, () => {
      const other = 'a'.repeat(64);
      expect(codeOf(() => assertFourEyes(subject, { staffId: 'staff:olga', payloadHash: other }))).toBe(
        'PAYLOAD_MISMATCH',
      );
    });

    it(`a second decision by one person on a ${kind} is IDEMPOTENCY_CONFLICT`, () => {
      expect(codeOf(() => assertFirstDecision([], kind))).toBe('IDEMPOTENCY_CONFLICT');
      expect(codeOf(() => assertFirstDecision([{}], kind))).toBeUndefined();
    });
  }
});
