import { generate } from 'otplib';

/**
 * An authenticator app for one enrolled secret. The server accepts the codes of the previous,
 * current and next 30-second step and never one of a step at or before the last it accepted, so
 * each code this hands out is for the step after the last one used, within that window.
 */
export function totpDevice(secret: string) {
  let lastStep = Math.floor(Date.now() / 30_000) - 2;
  return {
    async next(): Promise<string> {
      const nowStep = Math.floor(Date.now() / 30_000);
      const step = Math.max(lastStep + 1, nowStep - 1);
      if (step > nowStep + 1) throw new Error('test authenticator: no unused step left in the window');
      lastStep = step;
      return generate({ secret, epoch: step * 30 + 15 });
    },
  };
}

/** A six-digit code that is none of the window's valid codes for `secret` (so surely wrong). */
export async function wrongCodeFor(secret: string): Promise<string> {
  const nowStep = Math.floor(Date.now() / 30_000);
  const valid = new Set<string>();
  for (let step = nowStep - 2; step <= nowStep + 2; step += 1) {
    valid.add(await generate({ secret, epoch: step * 30 + 15 }));
  }
  for (let candidate = 0; ; candidate += 1) {
    const code = String(candidate).padStart(6, '0');
    if (!valid.has(code)) return code;
  }
}
