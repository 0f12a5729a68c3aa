import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

/** The server the bench runs against: DATABASE_URL, else the local PostgreSQL. */
export function serverUrl(): string {
  return process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
}

export interface ScratchDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

/** Creates an empty database on the server, named so a leftover one is recognisable. */
export async function createScratchDatabase(prefix: string): Promise<ScratchDatabase> {
  const base = serverUrl();
  const name = `${prefix}_${process.pid}_${randomBytes(3).toString('hex')}`;
  await onAdmin(base, (admin) => admin.unsafe(`create database "${name}"`));
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () => onAdmin(base, (admin) => admin.unsafe(`drop database if exists "${name}" with (force)`)),
  };
}

async function onAdmin(url: string, work: (admin: postgres.Sql) => Promise<unknown>): Promise<void> {
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await work(admin);
  } finally {
    await admin.end({ timeout: 5 });
  }
}
