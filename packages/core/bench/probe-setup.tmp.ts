import postgres from 'postgres';
import { fundedTenant } from '../bench/workload.ts';
import { openDatabase } from '../src/index.ts';

const admin = postgres('postgres://postgres@127.0.0.1:5432/postgres');
await admin.unsafe('drop database if exists idem_probe');
await admin.unsafe('create database idem_probe');
await admin.end();
const h = await openDatabase({ url: 'postgres://postgres@127.0.0.1:5432/idem_probe', maxConnections: 8 });
await h.migrate();
const t = await fundedTenant(h.db, 'probe', 1000, 8);
console.log(t.tenantId);
await h.close();
