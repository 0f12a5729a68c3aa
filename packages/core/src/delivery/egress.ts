import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { IdemError } from '@idem/contracts';
import ipaddr from 'ipaddr.js';

/**
 * Where outbound webhooks may connect. A tenant administrator chooses the URL, and the worker
 * connects from inside the deployment's network: without this check an administrator could aim a
 * webhook at the database, the metadata service or an internal admin page and read the answer's
 * status in the delivery log. So every address a webhook host resolves to must be public, unless
 * the deployment's allowlist names it; the check runs when the endpoint is saved and again at every
 * connection (workers/src/steps/egress-fetch.ts), on the very addresses the connection then uses.
 */
export interface EgressPolicy {
  /** Plain http to any permitted target (development only); otherwise https unless the allowlist names the host. */
  allowPlainHttp: boolean;
  /**
   * The deployment's internal targets: IP addresses, CIDR ranges (`10.20.0.0/16`, `fd00::/8`) or
   * exact host names. An address in a listed range, or any address a listed name resolves to, is
   * permitted although not public. Cloud metadata addresses stay refused whatever is listed.
   */
  allowInternal: readonly string[];
  /** Resolves a host name to all its addresses (the system resolver, as connections use, by default). */
  resolve?: HostResolver;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}
export type HostResolver = (hostname: string) => Promise<ResolvedAddress[]>;

/** The strictest policy: https only, to public addresses only. What a caller gets that states none. */
export const STRICT_EGRESS: EgressPolicy = { allowPlainHttp: false, allowInternal: [] };

/**
 * Addresses of cloud instance metadata services (AWS, GCP, Azure, ECS, Alibaba, Oracle): they hand
 * out credentials, so no allowlist range reopens them.
 */
const METADATA_ADDRESSES = new Set([
  '169.254.169.254',
  '169.254.170.2',
  '169.254.169.123',
  '100.100.100.200',
  '192.0.0.192',
  'fd00:ec2::254',
]);

/** Host names the allowlist names are compared lower-case and without a trailing dot. */
const HOST_NAME =
  /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

interface CompiledAllowlist {
  ranges: [ipaddr.IPv4 | ipaddr.IPv6, number][];
  hosts: Set<string>;
}

/**
 * Parses one allowlist entry, or says why it is not one (the environment is checked at start, so a
 * typo stops the process instead of silently allowing nothing).
 */
export function parseAllowEntry(
  entry: string,
): { range: [ipaddr.IPv4 | ipaddr.IPv6, number] } | { host: string } | { error: string } {
  const text = entry.trim().toLowerCase();
  if (text.includes('/')) {
    if (!ipaddr.isValidCIDR(text)) return { error: `"${entry}" is not a CIDR range` };
    const [address, bits] = ipaddr.parseCIDR(text);
    if (!isMapped(address)) return { range: [address, bits] };
    // An IPv4-mapped range is judged as the IPv4 range it maps (addresses are unmapped too).
    if (bits < 96) return { error: `"${entry}" spans more than the IPv4-mapped range` };
    return { range: [unmapped(address), bits - 96] };
  }
  if (isIP(text)) {
    const address = unmapped(ipaddr.parse(text));
    return { range: [address, address.kind() === 'ipv4' ? 32 : 128] };
  }
  const host = text.replace(/\.$/, '');
  if (!HOST_NAME.test(host))
    return { error: `"${entry}" is neither an address, a CIDR range nor a host name` };
  return { host };
}

const compiled = new WeakMap<readonly string[], CompiledAllowlist>();

function allowlistOf(policy: EgressPolicy): CompiledAllowlist {
  const known = compiled.get(policy.allowInternal);
  if (known) return known;
  const list: CompiledAllowlist = { ranges: [], hosts: new Set() };
  for (const entry of policy.allowInternal) {
    const parsed = parseAllowEntry(entry);
    if ('error' in parsed) throw new Error(`egress allowlist: ${parsed.error}`);
    if ('range' in parsed) list.ranges.push(parsed.range);
    else list.hosts.add(parsed.host);
  }
  compiled.set(policy.allowInternal, list);
  return list;
}

function isMapped(address: ipaddr.IPv4 | ipaddr.IPv6): address is ipaddr.IPv6 {
  return address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress();
}

/** `::ffff:10.0.0.5` is 10.0.0.5 to the kernel: judge it as that IPv4 address. */
function unmapped(address: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return isMapped(address) ? address.toIPv4Address() : address;
}

/** The URL's host without IPv6 brackets or a trailing dot, lower-case. */
export function hostOf(url: URL): string {
  return url.hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
}

/**
 * Why one address may not be connected to (its range: loopback, private, linkLocal, metadata, ...),
 * or null when it may. `viaAllowedHost`: the address came from resolving a host name the allowlist
 * names.
 */
export function addressRefusal(address: string, policy: EgressPolicy, viaAllowedHost = false): string | null {
  if (!ipaddr.isValid(address)) return 'not an address';
  const parsed = unmapped(ipaddr.parse(address));
  if (METADATA_ADDRESSES.has(parsed.toNormalizedString()) || METADATA_ADDRESSES.has(parsed.toString()))
    return 'metadata';
  const range = parsed.range();
  if (range === 'unicast') return null;
  if (viaAllowedHost) return null;
  const allowed = allowlistOf(policy).ranges.some(
    ([network, bits]) => network.kind() === parsed.kind() && parsed.match(network, bits),
  );
  return allowed ? null : range;
}

/** Whether the allowlist names this URL's host itself (a listed name, or a literal address in a listed range). */
export function hostIsAllowlisted(url: URL, policy: EgressPolicy): boolean {
  const host = hostOf(url);
  if (isIP(host)) {
    const parsed = unmapped(ipaddr.parse(host));
    return allowlistOf(policy).ranges.some(
      ([network, bits]) => network.kind() === parsed.kind() && parsed.match(network, bits),
    );
  }
  return allowlistOf(policy).hosts.has(host);
}

/**
 * The URL's own rules, before any address: absolute http(s), no user info (it would be shown to
 * every staff member who lists endpoints, and fetch refuses it), and https unless the policy allows
 * plain http or the allowlist names the host. Returns the parsed URL or why it is refused.
 */
export function urlRefusal(raw: string, policy: EgressPolicy): { url: URL } | { error: string } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { error: 'url must be an absolute http(s) URL' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return { error: 'url must use http or https' };
  if (url.username !== '' || url.password !== '')
    return { error: 'url must not carry a user name or password' };
  if (url.protocol === 'http:' && !policy.allowPlainHttp && !hostIsAllowlisted(url, policy))
    return { error: 'url must use https (plain http only to a host on the deployment allowlist)' };
  return { url };
}

const systemResolver: HostResolver = async (hostname) => {
  const answers = await lookup(hostname, { all: true, verbatim: true });
  return answers.map((answer) => ({ address: answer.address, family: answer.family === 6 ? 6 : 4 }));
};

/** An egress refusal, with the reason for the logs only (staff see a generic failure). */
export class EgressRefused extends Error {
  constructor(
    readonly host: string,
    readonly reason: string,
  ) {
    super(`egress refused: ${host} (${reason})`);
    this.name = 'EgressRefused';
  }
}

/**
 * Resolves `hostname` and returns its addresses only if every one may be connected to; otherwise
 * throws EgressRefused. One internal address among public ones refuses the name: the connection may
 * take any of them. The caller connects to exactly these addresses (no second lookup), so a DNS
 * answer cannot change between this check and the connection.
 */
export async function permittedAddresses(hostname: string, policy: EgressPolicy): Promise<ResolvedAddress[]> {
  const host = hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();
  if (isIP(host)) {
    const reason = addressRefusal(host, policy);
    if (reason) throw new EgressRefused(host, reason);
    return [{ address: host, family: isIP(host) === 6 ? 6 : 4 }];
  }
  let addresses: ResolvedAddress[];
  try {
    addresses = await (policy.resolve ?? systemResolver)(host);
  } catch (error) {
    throw new EgressRefused(host, `does not resolve: ${(error as { code?: string }).code ?? 'error'}`);
  }
  if (addresses.length === 0) throw new EgressRefused(host, 'does not resolve: no address');
  const viaAllowedHost = allowlistOf(policy).hosts.has(host);
  for (const { address } of addresses) {
    const reason = addressRefusal(address, policy, viaAllowedHost);
    if (reason) throw new EgressRefused(host, `${reason} address ${address}`);
  }
  return addresses;
}

/** What an administrator reads when a host is refused: the same whether it resolves inside or not at all. */
export const HOST_REFUSED_MESSAGE =
  'url must reach a public address: its host resolves to no address, or to one that is internal ' +
  '(loopback, private, link-local, metadata, ...); internal receivers need the deployment allowlist';

/**
 * The check when an endpoint is saved: the URL's rules, then every address its host resolves to.
 * Throws a VALIDATION IdemError; the message names neither the resolved address nor its range, so
 * saving endpoints cannot be used to map which internal names exist.
 */
export async function assertEgressAllowed(raw: string, policy: EgressPolicy): Promise<string> {
  const checked = urlRefusal(raw, policy);
  if ('error' in checked) throw new IdemError('VALIDATION', checked.error);
  try {
    await permittedAddresses(checked.url.hostname, policy);
  } catch (error) {
    if (error instanceof EgressRefused) throw new IdemError('VALIDATION', HOST_REFUSED_MESSAGE);
    throw error;
  }
  return raw;
}
