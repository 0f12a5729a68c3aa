import { verifyAuthenticationResponse } from '@simplewebauthn/server';
import type { ExpectedRelyingParties, StoredAssertion } from './passkeys.ts';

/**
 * Checks a stored WebAuthn assertion against the public key the caller passes: the one place a
 * stored decision's signature is verified again. Core's re-checks pass the key of the approver's
 * registered passkey (passkeys.ts storedAssertionCheck); the signer service passes the key from its
 * own chain of trust (a pinned anchor, or the key an approved registration was bound to), so a key
 * swapped in the database does not verify there. Answers null when the assertion is valid, or why
 * not. User verification is required; the signature counter is not checked here (its order was
 * checked when the decision was made, and a later check only re-verifies the signature).
 */
export async function storedAssertionRefusal(
  stored: unknown,
  input: { challenge: string; publicKey: string; rp: ExpectedRelyingParties },
): Promise<string | null> {
  if (!isStoredAssertion(stored)) return 'no passkey assertion';
  try {
    const result = await verifyAuthenticationResponse({
      response: {
        id: stored.credentialId,
        rawId: stored.credentialId,
        type: 'public-key',
        response: {
          authenticatorData: stored.authenticatorData,
          clientDataJSON: stored.clientDataJSON,
          signature: stored.signature,
          ...(stored.userHandle ? { userHandle: stored.userHandle } : {}),
        },
        clientExtensionResults: {},
      },
      expectedChallenge: input.challenge,
      expectedOrigin: input.rp.origins,
      expectedRPID: input.rp.rpIds,
      credential: {
        id: stored.credentialId,
        publicKey: new Uint8Array(Buffer.from(input.publicKey, 'base64url')),
        counter: 0,
      },
      requireUserVerification: true,
    });
    return result.verified ? null : 'the assertion does not verify';
  } catch (error) {
    return `the assertion does not verify: ${(error as Error).message}`;
  }
}

export function isStoredAssertion(value: unknown): value is StoredAssertion {
  const v = value as Partial<StoredAssertion> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.credentialId === 'string' &&
    typeof v.authenticatorData === 'string' &&
    typeof v.clientDataJSON === 'string' &&
    typeof v.signature === 'string'
  );
}
