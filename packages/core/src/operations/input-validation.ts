import { IdemError } from '@idem/contracts';
import type { z } from 'zod';

/**
 * The caller's input refused as VALIDATION, one issue per field: every operation parses its
 * input through these so that a refusal looks the same whichever operation made it.
 */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw new IdemError('VALIDATION', parsed.error.issues.map((issue) => issue.message).join('; '), {
    issues: parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })),
  });
}

export function validation(path: string, message: string): IdemError {
  return new IdemError('VALIDATION', message, { issues: [{ path, message }] });
}
