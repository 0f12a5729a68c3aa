import { problemSchema } from '@idem/contracts';
import type { AppRouter } from '@idem/server';
import { createTRPCClient, httpLink, TRPCClientError } from '@trpc/client';

/**
 * The session's CSRF token, learnt from sign-in, the link exchange or `me`, and sent on every call
 * (the server checks it on mutations). Kept in memory only: a reload asks `me` again.
 */
let csrfToken = '';
export function setCsrfToken(token: string): void {
  csrfToken = token;
}

/**
 * Step-up: the staff screens register a prompt that asks for a fresh TOTP code and
 * verifies it (true), or is cancelled (false). A mutation the server refuses with
 * STEP_UP_REQUIRED is then sent once more, unchanged, so no screen handles step-up itself.
 */
let stepUpPrompt: (() => Promise<boolean>) | null = null;
export function setStepUpPrompt(prompt: (() => Promise<boolean>) | null): void {
  stepUpPrompt = prompt;
}

async function fetchWithStepUp(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
  const response = await fetch(input, init);
  if (response.status !== 403 || init?.method !== 'POST' || !stepUpPrompt) return response;
  const body = (await response
    .clone()
    .json()
    .catch(() => null)) as { error?: { data?: { code?: string } } } | null;
  if (body?.error?.data?.code !== 'STEP_UP_REQUIRED') return response;
  if (!(await stepUpPrompt())) return response;
  return fetch(input, init);
}

/** One request per call (no batching), so each answer has its own request id. */
export const api = createTRPCClient<AppRouter>({
  links: [
    httpLink({
      url: '/trpc',
      headers: () => (csrfToken ? { 'x-csrf-token': csrfToken } : {}),
      fetch: fetchWithStepUp,
    }),
  ],
});

export interface ShownProblem {
  code: string;
  title: string;
  detail: string;
  requestId: string | null;
  /** On POSSIBLE_DUPLICATE: the account's in-progress withdrawal the refused one would repeat. */
  duplicateOf?: { operationId: string; state: string; createdAt: string };
}

/** Any failure as something a person can read, with the request id support will ask for. */
export function problemOf(error: unknown): ShownProblem {
  if (error instanceof TRPCClientError) {
    const parsed = problemSchema.safeParse(error.data);
    if (parsed.success) {
      return {
        code: parsed.data.code,
        title: parsed.data.title,
        detail: parsed.data.detail,
        requestId: parsed.data.requestId,
        ...(parsed.data.duplicateOf ? { duplicateOf: parsed.data.duplicateOf } : {}),
      };
    }
    return { code: 'NETWORK', title: 'No answer from the server', detail: error.message, requestId: null };
  }
  return {
    code: 'NETWORK',
    title: 'No answer from the server',
    detail: error instanceof Error ? error.message : String(error),
    requestId: null,
  };
}

export function isSignedOut(error: unknown): boolean {
  return problemOf(error).code === 'UNAUTHORIZED';
}
