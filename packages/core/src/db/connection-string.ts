import { z } from 'zod';

/**
 * PostgreSQL connection strings in URL form, with one host or several:
 * `postgres://user@db-a:5432,db-b:5432/idem?target_session_attrs=read-write` (libpq's multi-host
 * syntax, which postgres.js reads too). The WHATWG URL parser refuses a comma-separated host list,
 * so everything that reads or rewrites a connection string goes through here.
 */
export interface ConnectionString {
  protocol: 'postgres:' | 'postgresql:';
  /** `user` or `user:password`, percent-encoded as written; empty when absent. */
  userInfo: string;
  hosts: { host: string; port: number | null }[];
  database: string;
  params: URLSearchParams;
}

const pattern = /^(postgres(?:ql)?:)\/\/(?:([^@/]*)@)?([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?$/;

export function parseConnectionString(text: string): ConnectionString {
  const match = pattern.exec(text);
  if (!match) throw new Error('not a postgres:// connection string');
  const hosts = (match[3] ?? '').split(',').map((part) => {
    const hostPort = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(part);
    if (!hostPort) throw new Error('a host in the connection string is not host[:port]');
    return { host: hostPort[1] as string, port: hostPort[2] ? Number(hostPort[2]) : null };
  });
  return {
    protocol: match[1] as ConnectionString['protocol'],
    userInfo: match[2] ?? '',
    hosts,
    database: decodeURIComponent(match[4] ?? ''),
    params: new URLSearchParams(match[5] ?? ''),
  };
}

export function formatConnectionString(parts: ConnectionString): string {
  const hosts = parts.hosts.map((h) => (h.port === null ? h.host : `${h.host}:${h.port}`)).join(',');
  const query = parts.params.toString();
  return `${parts.protocol}//${parts.userInfo ? `${parts.userInfo}@` : ''}${hosts}/${encodeURIComponent(parts.database)}${query ? `?${query}` : ''}`;
}

/** The same servers and options, another database (throwaway test and chaos databases). */
export function withDatabase(text: string, database: string): string {
  return formatConnectionString({ ...parseConnectionString(text), database });
}

/** For environment schemas: one host or several, as above. */
export const connectionStringSchema = z.string().refine(
  (text) => {
    try {
      parseConnectionString(text);
      return true;
    } catch {
      return false;
    }
  },
  { error: 'a postgres:// connection string (several hosts: host-a:5432,host-b:5432)' },
);
