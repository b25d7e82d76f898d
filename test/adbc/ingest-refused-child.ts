/**
 * The child process of test/adbc/adbc.test.ts's Flight SQL error test: asks
 * the server at FLIGHT_URI (arrow-go's example server, without bulk
 * ingestion) to ingest a table and prints one JSON line with the error. A
 * child, because Flight SQL's driver (1.13.0) can leak the batch it took from
 * the bound stream when the server's refusal arrives mid-write (see the
 * test): its exit ends the leak, the parent's accounting stays exact.
 */
import { tableFromArrays } from 'apache-arrow';
import { AdbcDatabase, AdbcError } from '../../src/adbc/index.js';
import { FLIGHTSQL } from './drivers.js';

const db = new AdbcDatabase(FLIGHTSQL.options(process.env.FLIGHT_URI));
const conn = await db.connect();
const e = await conn.ingest('refused', tableFromArrays({ a: Int32Array.from([1, 2, 3]) })).then(
  () => undefined,
  (e: unknown) => e,
);
console.log(JSON.stringify(e instanceof AdbcError ? { name: e.name, status: e.status, message: e.message } : { name: String(e) }));
process.exit(0);
