import { generate } from 'otplib';
import { vi } from 'vitest';

/**
 * An authenticator app for one enrolled secret. The server accepts the codes of the previous,
 * current and next 30-second step and never one of a step at or before the last it accepted, so
 * each code this hands out is for the step after the last one used, within that window.
 *
 * `fresh`: for callers that take seconds to send a code (a CLI process on a loaded machine), never
 * hand out the previous step's code, which may expire on the way; when no unused step is left in
 * the window, wait (polling the clock) for the next one, as a person waits for the app's next code.
 */
export function totpDevice(secret: string, options: { fresh?: boolean } = {}) {
  let lastStep = Math.floor(Date.now() / 30_000) - 2;
  const earliest = options.fresh ? 0 : -1;
  return {
    async next(): Promise<string> {
      const step = Math.max(lastStep + 1, Math.floor(Date.now() / 30_000) + earliest);
      if (Math.floor(Date.now() / 30_000) + 1 < step) {
        if (!options.fresh) throw new Error('test authenticator: no unused step left in the window');
        await vi.waitFor(
          () => {
            if (Math.floor(Date.now() / 30_000) + 1 < step) throw new Error('waiting for the next step');
          },
          { timeout: 35_000, interval: 250 },
        );
      }
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
