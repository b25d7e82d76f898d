/**
 * The four real ADBC drivers arrow-device/adbc is tested, benchmarked and
 * demonstrated against, where their libraries are, and how each is opened:
 *
 * - DuckDB's, part of libduckdb.so (`duckdb_adbc_init`), from the npm
 *   package @duckdb/node-bindings-linux-x64 (`npm run setup:duckdb`);
 *   an in-memory database.
 * - SQLite's and PostgreSQL's, of the Apache Arrow ADBC project, from the
 *   adbc-driver-sqlite and adbc-driver-postgresql wheels (`npm run
 *   setup:adbc`); SQLite in memory, PostgreSQL against a real server
 *   (test/adbc/postgres.ts) whose URI the caller passes.
 * - Flight SQL's, of the same project, from the adbc-driver-flightsql wheel,
 *   against a real Flight SQL server (arrow-go's example server over SQLite,
 *   test/adbc/flightsql.ts) whose URI the caller passes: its SQL is SQLite's.
 *
 * `DUCKDB_LIBRARY_PATH`, `ADBC_SQLITE_DRIVER`, `ADBC_POSTGRESQL_DRIVER` and
 * `ADBC_FLIGHTSQL_DRIVER` override the places.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConnectOptions } from '../../src/adbc/index.js';

export type DriverName = 'duckdb' | 'sqlite' | 'postgresql' | 'flightsql';

export interface DriverSpec {
  name: DriverName;
  /** The shared library. */
  library: string;
  /** Why it cannot be used here (the library is missing), or undefined. */
  missing: string | undefined;
  /** Options of a fresh database (PostgreSQL, Flight SQL: the server's URI). */
  options(uri?: string): ConnectOptions;
  /** SQL for one BIGINT column `i` of the integers 0..n-1 (the dialects differ). */
  series(n: number): string;
  /** The placeholder of parameter `i` (1-based). */
  param(i: number): string;
}

/** `rel` under .build/ of this module's directory or an ancestor (it also runs compiled, from .build/run). */
export function findBuilt(rel: string): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const p = join(dir, '.build', rel);
    if (existsSync(p)) return p;
    if (dirname(dir) === dir) break;
  }
  return join(process.cwd(), '.build', rel);
}

const duckdbPath = process.env.DUCKDB_LIBRARY_PATH || findBuilt('duckdb/node_modules/@duckdb/node-bindings-linux-x64/libduckdb.so');
const sqlitePath = process.env.ADBC_SQLITE_DRIVER || findBuilt('adbc-sqlite/libadbc_driver_sqlite.so');
const postgresqlPath = process.env.ADBC_POSTGRESQL_DRIVER || findBuilt('adbc-postgresql/libadbc_driver_postgresql.so');
const flightsqlPath = process.env.ADBC_FLIGHTSQL_DRIVER || findBuilt('adbc-flightsql/libadbc_driver_flightsql.so');

/**
 * Why a driver cannot be used: its library is missing, or (on Windows and
 * macOS) it is the Linux library the setup scripts install, where no
 * variable names one for this OS (tools/windows.mjs sets ADBC_SQLITE_DRIVER
 * to the win_amd64 wheel's DLL).
 */
const missing = (path: string, what: string, how: string, variable: string): string | undefined => {
  if (!existsSync(path)) return `${what} not found at ${path}: run \`${how}\``;
  if (process.platform !== 'linux' && !process.env[variable]) return `${what} at ${path} is Linux's (the setup scripts install that one); set ${variable} to a ${process.platform} build`;
  return undefined;
};

export const DUCKDB: DriverSpec = {
  name: 'duckdb',
  library: duckdbPath,
  missing: missing(duckdbPath, "DuckDB's ADBC driver (libduckdb.so)", 'npm run setup:duckdb` (Linux x64) or set `DUCKDB_LIBRARY_PATH', 'DUCKDB_LIBRARY_PATH'),
  options: () => ({ driver: duckdbPath, entrypoint: 'duckdb_adbc_init', databaseOptions: { path: ':memory:' } }),
  series: (n) => `SELECT range AS i FROM range(${n})`,
  param: () => '?',
};

export const SQLITE: DriverSpec = {
  name: 'sqlite',
  library: sqlitePath,
  missing: missing(sqlitePath, 'the SQLite ADBC driver (libadbc_driver_sqlite.so)', 'npm run setup:adbc', 'ADBC_SQLITE_DRIVER'),
  options: () => ({ driver: sqlitePath, databaseOptions: { uri: ':memory:' } }),
  series: (n) => `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ${n - 1}) SELECT i FROM s`,
  param: () => '?',
};

export const POSTGRESQL: DriverSpec = {
  name: 'postgresql',
  library: postgresqlPath,
  missing: missing(postgresqlPath, 'the PostgreSQL ADBC driver (libadbc_driver_postgresql.so)', 'npm run setup:adbc', 'ADBC_POSTGRESQL_DRIVER'),
  options: (uri) => ({ driver: postgresqlPath, databaseOptions: { uri: uri ?? 'postgresql://127.0.0.1/postgres' } }),
  series: (n) => `SELECT i::BIGINT AS i FROM generate_series(0, ${n - 1}) AS g(i)`,
  param: (i) => `$${i}`,
};

export const FLIGHTSQL: DriverSpec = {
  name: 'flightsql',
  library: flightsqlPath,
  missing: missing(flightsqlPath, 'the Flight SQL ADBC driver (libadbc_driver_flightsql.so)', 'npm run setup:adbc', 'ADBC_FLIGHTSQL_DRIVER'),
  options: (uri) => ({ driver: flightsqlPath, databaseOptions: { uri: uri ?? 'grpc://127.0.0.1:32010' } }),
  series: SQLITE.series, // the test server runs SQLite
  param: () => '?',
};

export const DRIVERS: readonly DriverSpec[] = [DUCKDB, SQLITE, POSTGRESQL, FLIGHTSQL];
