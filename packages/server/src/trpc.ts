import { type ApiKeyScope, IdemError } from '@idem/contracts';
import {
  apiKeyActor,
  authenticateApiKey,
  type Database,
  type EgressPolicy,
  type Tx,
  withTenant,
} from '@idem/core';
import { initTRPC } from '@trpc/server';
import { TRPC_ERROR_CODES_BY_KEY } from '@trpc/server/rpc';
import type { Logger } from 'pino';
import type { ApiKeyCache } from './auth/api-key-cache.ts';
import type { PasswordCheckCap } from './auth/sign-in-throttle.ts';
import type { MfaKeyRing } from './auth/totp-secrets.ts';
import type { WebRequest } from './auth/web-request.ts';
import { asIdemError, toProblem, trpcCodeFor } from './errors.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { BalanceReconciler } from './reconciler.ts';
import type { SettlementWitness } from './settlement-witness.ts';

/** What the HTTP layer learns back from a call, for its access log and metrics. */
export interface RequestState {
  tenantId?: string;
  errorCode?: string;
  /** The procedure a REST route ran (a tRPC route names it in its path already). */
  procedure?: string;
  /** A submission's outcome (CREATED, REPLAYED), so support can trace a replay (C23: never the key). */
  outcome?: string;
  /** The operation the call created, replayed or read. */
  operationId?: string;
  /** A bulk submission's items per outcome (CREATED, REPLAYED, a refusal's code): counts only. */
  outcomes?: Record<string, number>;
}

/**
 * The request-independent part of the context (usable from tests through createCaller) plus what
 * the HTTP layer extracted from one request. The tenant is never here: it comes from the credential.
 */
export interface Context {
  db: Database;
  log: Logger;
  rateLimiter: RateLimiter;
  /** Bounds concurrent argon2id verifications in this process (staff sign-in). */
  passwordChecks: PasswordCheckCap;
  /** The keys that seal and open staff TOTP secrets (null or absent: TOTP is MFA_KEY_UNAVAILABLE). */
  mfaKeys?: MfaKeyRing | null;
  /** IDEM_MFA_FRESH_SECONDS_MAX: a step-up window no tenant's exceeds on this server (absent: none). */
  mfaFreshSecondsMax?: number;
  /** The client address the sign-in budget per address counts against (http/client-address.ts). */
  clientAddress: string;
  /** Recently authenticated API keys (absent: every request looks its key up). */
  apiKeyCache?: ApiKeyCache;
  requestId: string;
  /** The bearer credential, as sent. */
  apiKey: string | null;
  /** The `Idempotency-Key` header, as sent. */
  idempotencyKeyHeader: string | null;
  /** The REST face requires the header (the IETF draft); the tRPC face also takes the key in the body. */
  idempotencyKeyHeaderRequired?: boolean;
  state: RequestState;
  exposeStacks: boolean;
  /** Cookies, origin and CSRF header of a browser request (the web screens); absent in createCaller tests. */
  web?: WebRequest;
  /** Asks the chain or custodian about a withdrawal a person resolves (absent: nothing is proven). */
  witness?: SettlementWitness;
  /** Runs a balance reconciliation now (absent: this server has no rail to observe with). */
  reconciler?: BalanceReconciler;
  /**
   * Per network, the BROADCAST age past which the workers alert (IDEM_BROADCAST_ALERT_AFTER_MS
   * over the workers' defaults), shown in the staff queue. It is this server's setting: workers
   * started with another value alert at theirs.
   */
  broadcastAlertAfterMs?: Partial<Record<string, number>>;
  /** Where outbound webhook endpoints may point (env.ts egressPolicyFrom; absent: the strictest). */
  egress?: EgressPolicy;
  /** The signer service, whose own key signs reconciliation reports (absent: the tenant's webhook secret does). */
  signerService?: { url: string; token: string };
}

const t = initTRPC.context<Context>().create({
  /**
   * Every error leaves as one typed problem in `error.data`: our code, the RFC 9457 fields, the
   * request id, and `httpStatus` (which tRPC uses as the response status) from the one table.
   */
  errorFormatter({ shape, error, ctx }) {
    const idemError = asIdemError(error);
    const requestId = ctx?.requestId ?? 'unknown';
    if (ctx) ctx.state.errorCode = idemError.code;
    const problem = toProblem(idemError, requestId);
    return {
      code: TRPC_ERROR_CODES_BY_KEY[trpcCodeFor(idemError.code)],
      message: problem.detail,
      data: {
        ...problem,
        httpStatus: problem.status,
        path: shape.data.path,
        ...(ctx?.exposeStacks && error.stack ? { stack: error.stack } : {}),
      },
    };
  },
});

export const router = t.router;
export const publicProcedure = t.procedure;
export const createCallerFactory = t.createCallerFactory;

/**
 * Authenticates the API key and narrows the context to its tenant, with `inTenant` running work
 * in one transaction under the restricted role with `app.tenant_id` bound (C22). A procedure never
 * uses this alone: `apiProcedure(scope)` adds the scope the call needs.
 */
const tenantProcedure = t.procedure.use(async ({ ctx, next }) => {
  if (!ctx.apiKey) throw new IdemError('UNAUTHORIZED', 'an API key is required (Authorization: Bearer ...)');
  const cached = ctx.apiKeyCache?.get(ctx.apiKey);
  const key = cached ?? (await authenticateApiKey(ctx.db, ctx.apiKey));
  if (!cached) ctx.apiKeyCache?.set(ctx.apiKey, key);
  const { tenantId, keyId } = key;
  ctx.state.tenantId = tenantId;
  const waitMs = ctx.rateLimiter.take(tenantId);
  if (waitMs > 0) {
    throw new IdemError('RATE_LIMITED', 'too many requests for this tenant', { retryAfterMs: waitMs });
  }
  const db = ctx.db;
  return next({
    ctx: {
      tenantId,
      keyId,
      scopes: key.scopes,
      /** Recorded as the requester of what this key submits, so four eyes knows who stands behind it. */
      actor: apiKeyActor(keyId),
      inTenant: <T>(work: (tx: Tx) => Promise<T>) => withTenant(db, tenantId, work),
    },
  });
});

/**
 * An API procedure that needs `scope` on the calling key. A key without it is FORBIDDEN, naming
 * the missing scope, before the procedure reads or writes anything: the refusal carries no data.
 */
export function apiProcedure(scope: ApiKeyScope) {
  return tenantProcedure.use(({ ctx, next }) => {
    if (!ctx.scopes.includes(scope)) {
      throw new IdemError('FORBIDDEN', `this API key lacks the '${scope}' scope this call needs`, {
        missingScope: scope,
      });
    }
    return next();
  });
}
