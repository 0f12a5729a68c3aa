/**
 * Speaking to the real server as a signed-in staff member, the way the staff screens do: tRPC over
 * HTTP with the session cookie, the CSRF header and our own origin. One place for every server test
 * that drives the staff procedures.
 */
/** The password the staff members of these tests sign in with. */
export const PASSWORD = 'a long enough test password';

export interface StaffSession {
  cookie: string;
  csrf: string;
}

export interface TrpcAnswer {
  status: number;
  body: { result?: { data: unknown }; error?: { data: { code: string; detail: string } } };
  setCookie: string[];
}

export interface StaffHttp {
  /** A query (GET, input in the URL) or, with `mutation`, a POST. */
  call(
    path: string,
    options?: { input?: unknown; session?: StaffSession; mutation?: boolean },
  ): Promise<TrpcAnswer>;
  /** Signs in and returns the session; refuses loudly when sign-in fails. */
  signIn(input: { tenantId: string; email: string; password: string }): Promise<StaffSession>;
}

/** `baseUrl` is read on each call: servers in these tests start in `beforeAll`. */
/** `origin`: the browser's origin when the server has IDEM_PUBLIC_URL set (the server's own address otherwise). */
export function staffHttp(baseUrl: () => string, settings: { origin?: string } = {}): StaffHttp {
  const call: StaffHttp['call'] = async (path, options = {}) => {
    const base = baseUrl();
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      origin: settings.origin ?? base,
    };
    if (options.session) {
      headers.cookie = options.session.cookie;
      headers['x-csrf-token'] = options.session.csrf;
    }
    const query =
      options.input === undefined ? '' : `?input=${encodeURIComponent(JSON.stringify(options.input))}`;
    const response = options.mutation
      ? await fetch(`${base}/trpc/${path}`, {
          method: 'POST',
          headers,
          body: JSON.stringify(options.input ?? null),
        })
      : await fetch(`${base}/trpc/${path}${query}`, { headers });
    return {
      status: response.status,
      body: (await response.json()) as TrpcAnswer['body'],
      setCookie: response.headers.getSetCookie(),
    };
  };
  const signIn: StaffHttp['signIn'] = async (input) => {
    const answer = await call('staffAuth.signIn', { mutation: true, input });
    const cookie = answer.setCookie[0]?.split(';')[0];
    if (answer.status !== 200 || !cookie) throw new Error(`sign-in failed: ${JSON.stringify(answer.body)}`);
    return { cookie, csrf: dataOf<{ csrfToken: string }>(answer).csrfToken };
  };
  return { call, signIn };
}

export function dataOf<T>(answer: Pick<TrpcAnswer, 'status' | 'body'>): T {
  if (!answer.body.result) throw new Error(`no result (${answer.status}): ${JSON.stringify(answer.body)}`);
  return answer.body.result.data as T;
}
