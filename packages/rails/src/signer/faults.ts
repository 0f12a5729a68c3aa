/**
 * A signer that misbehaves on purpose, for the chaos run, as the custodian simulator
 * does: while the control file says so, the token signs and then its answer is held for `holdMs`,
 * past the rail's deadline, so the caller sees a timeout after the key was used (a lost answer).
 * The control file is JSON `{ "holdUntil": <epoch ms>, "holdMs": <ms> }`, rewritten by the run;
 * read on every call so separate worker processes follow one schedule. Never set in production.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import type { DigestSigner } from './signer.ts';

const controlSchema = z.object({
  holdUntil: z.number().int().min(0),
  holdMs: z.number().int().min(0).max(60_000),
});

function readControl(path: string): z.infer<typeof controlSchema> | null {
  try {
    return controlSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
  } catch {
    return null;
  }
}

export function lateAnsweringSigner(signer: DigestSigner, controlPath: string): DigestSigner {
  const hold = async <T>(signature: T): Promise<T> => {
    const control = readControl(controlPath);
    if (control && Date.now() < control.holdUntil) {
      await new Promise((resolve) => setTimeout(resolve, control.holdMs));
    }
    return signature;
  };
  const { signTransaction } = signer;
  return {
    address: signer.address,
    location: signer.location,
    signDigest: async (digest) => hold(await signer.signDigest(digest)),
    ...(signTransaction
      ? {
          signTransaction: async (unsigned, context) =>
            hold(await signTransaction.call(signer, unsigned, context)),
        }
      : {}),
  };
}
