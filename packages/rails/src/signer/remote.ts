/**
 * The worker's side of the signer service (docs/SIGNING.md, "The signer as its own service"): a
 * `DigestSigner` that holds no key and no PIN. It sends the signer service, over loopback HTTP
 * with this worker's own bearer credential, the operation a transaction is for, the kind of
 * signature and the UNSIGNED serialised transaction; the service reads the approval from the
 * database itself, decodes the transaction, and signs only what the approval covers. It never
 * signs a bare digest, so `signDigest` is refused here.
 */
import { IdemError } from '@idem/contracts';
import type { Address, Hex } from 'viem';
import { z } from 'zod';
import type { DigestSignature, DigestSigner, SigningContext } from './signer.ts';

const hex = z.string().regex(/^0x[0-9a-fA-F]*$/);

/** What a worker asks the signer service to sign. */
export const signRequestSchema = z.object({
  tenantId: z.uuid(),
  operationId: z.string().min(1).max(200),
  kind: z.enum(['payment', 'replacement', 'cancel']),
  /** The unsigned EIP-1559 transaction as viem serialises it (0x02 || rlp(fields)). */
  transaction: hex.max(20_000),
});
export type SignRequest = z.infer<typeof signRequestSchema>;

export const signResponseSchema = z.object({
  signature: z.object({
    r: hex.length(66),
    s: hex.length(66),
    yParity: z.union([z.literal(0), z.literal(1)]),
  }),
});

const errorBodySchema = z.object({ error: z.object({ code: z.string(), message: z.string() }) });

export interface RemoteSignerOptions {
  /** The service's base URL, e.g. http://127.0.0.1:8787 (loopback). */
  url: string;
  /** This worker's bearer credential; the service stores only its SHA-256. */
  token: string;
  /** The hot wallet's registered address; the signature is checked to recover to it. */
  address: Address;
}

export function remoteSigner(options: RemoteSignerOptions): DigestSigner {
  const endpoint = new URL('/v1/sign', options.url).toString();
  return {
    address: options.address,
    location: `signer service at ${new URL(options.url).host}`,
    signDigest(): Promise<DigestSignature> {
      return Promise.reject(
        new IdemError(
          'VALIDATION',
          'the signer service signs transactions it can check, never a bare digest',
        ),
      );
    },
    async signTransaction(transaction: Hex, context: SigningContext): Promise<DigestSignature> {
      const body: SignRequest = { ...context, transaction };
      let response: Response;
      try {
        response = await fetch(endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${options.token}` },
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(60_000),
        });
      } catch (error) {
        throw new IdemError(
          'SIGNER_UNAVAILABLE',
          `signer service unreachable: ${String(error).slice(0, 200)}`,
        );
      }
      const text = await response.text();
      let json: unknown = null;
      try {
        json = JSON.parse(text);
      } catch {
        // reported below
      }
      if (response.ok) {
        const parsed = signResponseSchema.safeParse(json);
        if (!parsed.success)
          throw new IdemError('SIGNER_UNAVAILABLE', 'the signer service answered malformed');
        return parsed.data.signature as DigestSignature;
      }
      const refusal = errorBodySchema.safeParse(json);
      if (!refusal.success || response.status >= 500) {
        throw new IdemError('SIGNER_UNAVAILABLE', `signer service answered HTTP ${response.status}`);
      }
      const { code, message } = refusal.data.error;
      // The stored payload no longer hashes to its approval: the worker hands it to a person.
      if (code === 'PAYLOAD_MISMATCH') throw new IdemError('PAYLOAD_MISMATCH', `signer service: ${message}`);
      // Any other refusal (UNAUTHORIZED, CONFLICT over a nonce, a state that is not approved, FROZEN
      // under a freeze in force): nothing is signed, the withdrawal stays where it is, and the
      // worker alerts, unless a freeze it can see explains a FROZEN (steps/dispatch.ts).
      throw new IdemError('VALIDATION', `signer service refused (${code}): ${message}`, {
        signerRefusal: code,
      });
    },
  };
}
