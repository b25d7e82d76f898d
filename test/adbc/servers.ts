/**
 * The server a driver's test suite needs (PostgreSQL, Flight SQL; none for
 * DuckDB and SQLite), started before its tests and stopped after them. Shared by test/adbc/adbc.test.ts and
 * load.test.ts.
 */
import { after, before } from 'node:test';
import type { DriverSpec } from './drivers.js';
import { startFlightSql, type FlightSqlServer } from './flightsql.js';
import { startPostgres, type PostgresServer } from './postgres.js';

/** Registers the suite's before/after hooks; the result gives the server's URI once started (undefined: none). */
export function serveDuringSuite(spec: DriverSpec): () => string | undefined {
  let server: PostgresServer | undefined;
  let flight: FlightSqlServer | undefined;
  before(async () => {
    if (spec.name === 'postgresql') server = await startPostgres();
    if (spec.name === 'flightsql') flight = await startFlightSql();
  });
  after(async () => {
    server?.stop();
    await flight?.stop();
  });
  return () => server?.uri ?? flight?.uri;
}
