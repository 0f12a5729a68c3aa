import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { migrationsFolder, openDatabase, withDatabase } from '@idem/core';
import postgres, { type Sql } from 'postgres';

/**
 * One migrated template database per migrations folder, so each test database is a copy
 * (`CREATE DATABASE x TEMPLATE t`) instead of ~55 migrations run again. The name carries a hash of
 * the folder: a changed or added migration makes a new template, and worktrees with different
 * migrations sharing one server never use each other's. Test runs in parallel build it once: the
 * first takes an advisory lock, the others wait on it and find the template made.
 */

/** Any fixed number: the advisory lock every test process takes while it makes or finds the template. */
const templateLockKey = 7_302_026;

/** Per server (its connection string): a test may use two, such as the failover formation's. */
const templates = new Map<string, Promise<string>>();

/** The template's name on the server at `base`, made on first use in this process. */
export function migratedTemplate(base: string): Promise<string> {
  let template = templates.get(base);
  if (!template) {
    template = makeTemplate(base);
    templates.set(base, template);
  }
  return template;
}

async function makeTemplate(base: string): Promise<string> {
  const name = `idem_template_${await migrationsHash()}`;
  const admin = postgres(base, { max: 1, onnotice: () => {} });
  try {
    await admin`select pg_advisory_lock(${templateLockKey})`;
    const [found] = await admin`select 1 from pg_database where datname = ${name}`;
    if (!found) {
      // Built under another name and renamed when complete: a run killed halfway leaves no half template.
      const building = `${name}_building`;
      await admin.unsafe(`drop database if exists "${building}" with (force)`);
      await admin.unsafe(`create database "${building}"`);
      const handle = await openDatabase({ url: withDatabase(base, building), maxConnections: 1 });
      try {
        await handle.migrate();
      } finally {
        await handle.close();
      }
      await admin.unsafe(`alter database "${building}" rename to "${name}"`);
      await admin.unsafe(`alter database "${name}" is_template true`);
    }
  } finally {
    await admin`select pg_advisory_unlock(${templateLockKey})`.catch(() => {});
    await admin.end();
  }
  return name;
}

/**
 * Creates `name` as a copy of `template`. A copy has the template's objects and their grants, but
 * not the grants on the database itself (the migrations revoke TEMPORARY from PUBLIC and the app's
 * roles): those are applied again here from the template's list. Roles are the server's, shared.
 */
export async function copyTemplate(admin: Sql, template: string, name: string): Promise<void> {
  await admin.unsafe(`create database "${name}" template "${template}"`);
  const grants = await admin<{ grantee: string; privilege: string }[]>`
    select case when acl.grantee = 0 then 'public' else quote_ident(role.rolname) end as grantee,
           acl.privilege_type as privilege
      from pg_database database
     cross join lateral aclexplode(database.datacl) acl
      left join pg_roles role on role.oid = acl.grantee
     where database.datname = ${template}`;
  if (grants.length === 0) return; // The template kept the default grants, as does the copy.
  await admin.unsafe(`revoke all on database "${name}" from public`);
  for (const grant of grants) {
    await admin.unsafe(`grant ${grant.privilege} on database "${name}" to ${grant.grantee}`);
  }
}

/** A hash of every file in the migrations folder (SQL and drizzle's journal), names and contents. */
export async function migrationsHash(): Promise<string> {
  const hash = createHash('sha256');
  const files = (await readdir(migrationsFolder, { recursive: true, withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
  for (const file of files) {
    hash.update(file.slice(migrationsFolder.length));
    hash.update(await readFile(file));
  }
  return hash.digest('hex').slice(0, 16);
}
