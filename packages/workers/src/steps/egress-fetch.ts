import type { LookupAddress, LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import { type EgressPolicy, EgressRefused, permittedAddresses } from '@idem/core';
import { Agent, fetch, type Response } from 'undici';

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * The socket's own DNS lookup, replaced by one that resolves through the egress policy and refuses
 * internal answers. Node connects to the addresses this returns, with no second lookup, so the
 * address checked is the address connected to: a DNS answer that changes after the check (rebinding)
 * cannot redirect the connection inside.
 */
function guardedLookup(policy: EgressPolicy) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    permittedAddresses(hostname, policy).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === 6 ? options.family : null;
        const usable = wanted ? addresses.filter((a) => a.family === wanted) : addresses;
        const [first] = usable;
        if (!first) {
          callback(
            Object.assign(new Error(`no IPv${wanted} address for ${hostname}`), { code: 'ENOTFOUND' }),
            '',
          );
          return;
        }
        if (options.all) callback(null, usable);
        else callback(null, first.address, first.family);
      },
      (error: unknown) => callback(error as NodeJS.ErrnoException, ''),
    );
  };
}

/** One connection pool per policy, for the life of the process (a worker holds one policy). */
const agents = new WeakMap<EgressPolicy, Agent>();

function agentFor(policy: EgressPolicy): Agent {
  let agent = agents.get(policy);
  if (!agent) {
    agent = new Agent({ connect: { lookup: guardedLookup(policy) } });
    agents.set(policy, agent);
  }
  return agent;
}

/**
 * A POST to an outbound endpoint under the egress policy. A host written as an address is checked
 * here, since the socket looks nothing up for it; a host name is checked by the socket's lookup, at
 * every new connection. Redirects are not followed (a 3xx is a failed delivery). Throws
 * EgressRefused (directly, or as the cause of fetch's error) when the target is refused.
 */
export async function egressPost(
  url: string,
  policy: EgressPolicy,
  init: { headers: Record<string, string>; body: string; signal: AbortSignal },
): Promise<Response> {
  const target = new URL(url);
  const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host)) await permittedAddresses(host, policy);
  return fetch(target, {
    method: 'POST',
    headers: init.headers,
    body: init.body,
    signal: init.signal,
    redirect: 'manual',
    dispatcher: agentFor(policy),
  });
}

/** The refusal behind a failed fetch, if the egress policy refused it. */
export function egressRefusalOf(error: unknown): EgressRefused | null {
  for (let current = error, depth = 0; current && depth < 5; depth += 1) {
    if (current instanceof EgressRefused) return current;
    current = (current as { cause?: unknown }).cause;
  }
  return null;
}
