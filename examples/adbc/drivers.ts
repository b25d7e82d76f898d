/**
 * The two ADBC drivers the example runs against, where to find them, and
 * how to open an in-memory database with each.
 *
 * - DuckDB's driver is part of libduckdb.so (`duckdb_adbc_init`), from the
 *   npm package @duckdb/node-bindings-linux-x64 that `npm run setup:duckdb`
 *   installs into .build/duckdb. Database option `path` (`:memory:`); any
 *   other option goes to DuckDB's configuration (`threads`, ...).
 * - The SQLite driver is libadbc_driver_sqlite.so from the adbc-driver-sqlite
 *   wheel, which `npm run setup:adbc` unpacks into .build/adbc-sqlite
 *   (`AdbcDriverSqliteInit`). Database option `uri` (`:memory:`, a file name,
 *   or a `file:` URI).
 *
 * `DUCKDB_LIBRARY_PATH` and `ADBC_SQLITE_DRIVER` override the places.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface DriverSpec {
  /** A short name: `duckdb`, `sqlite`. */
  name: 'duckdb' | 'sqlite';
  /** The shared library. */
  path: string;
  /** Its `AdbcDriverInitFunc`. */
  entrypoint: string;
  /** Database options for an in-memory database. */
  memoryOptions: Record<string, string>;
  /** SQL for one column `i` of the integers 0..n-1 (the dialects differ: DuckDB has `range`). */
  series(n: number): string;
  /** Why it cannot be used here (the library is missing), or undefined. */
  missing: string | undefined;
}

/** `rel` under .build/ of this module's directory or an ancestor (the module also runs compiled, from .build/run). */
function findBuilt(rel: string): string {
  const tried: string[] = [];
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const p = join(dir, '.build', rel);
    if (existsSync(p)) return p;
    tried.push(p);
    if (dirname(dir) === dir) break;
  }
  return join(process.cwd(), '.build', rel);
}

const duckdbPath = process.env.DUCKDB_LIBRARY_PATH || findBuilt('duckdb/node_modules/@duckdb/node-bindings-linux-x64/libduckdb.so');
const sqlitePath = process.env.ADBC_SQLITE_DRIVER || findBuilt('adbc-sqlite/libadbc_driver_sqlite.so');

export const DUCKDB: DriverSpec = {
  name: 'duckdb',
  path: duckdbPath,
  entrypoint: 'duckdb_adbc_init',
  memoryOptions: { path: ':memory:' },
  series: (n) => `SELECT range AS i FROM range(${n})`,
  missing: existsSync(duckdbPath) ? undefined : `DuckDB's ADBC driver (libduckdb.so) not found at ${duckdbPath}: run \`npm run setup:duckdb\` (Linux x64) or set DUCKDB_LIBRARY_PATH`,
};

export const SQLITE: DriverSpec = {
  name: 'sqlite',
  path: sqlitePath,
  entrypoint: 'AdbcDriverSqliteInit',
  memoryOptions: { uri: ':memory:' },
  series: (n) => `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ${n - 1}) SELECT i FROM s`,
  missing: existsSync(sqlitePath) ? undefined : `the SQLite ADBC driver (libadbc_driver_sqlite.so) not found at ${sqlitePath}: run \`npm run setup:adbc\` or set ADBC_SQLITE_DRIVER`,
};

export const DRIVERS: readonly DriverSpec[] = [DUCKDB, SQLITE];
