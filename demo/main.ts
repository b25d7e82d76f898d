/**
 * The main job: arrow-device moving data between DuckDB (its C API, in this
 * process) and arrow-js through the Arrow C Data Interface, without copying.
 *
 *   npm run demo
 *
 * 1. DuckDB runs a query; its result comes to JS as an arrow-js Table,
 *    zero-copy (the JS typed arrays point into DuckDB's result buffers).
 * 2. A table built in JS goes to DuckDB, zero-copy, and DuckDB aggregates it
 *    with SQL.
 * Each step is timed against what you would otherwise do: serialise through
 * Arrow IPC with arrow-js. DuckDB is reached through its ADBC driver with
 * arrow-device/adbc, this package's ADBC driver manager.
 */
import { Table, tableFromIPC, tableToIPC, Utf8, vectorFromArray } from 'apache-arrow';
import { accounting } from '../src/index.js';
import { AdbcDatabase } from '../src/adbc/index.js'; // in an application: from 'arrow-device/adbc'
import { DUCKDB } from '../test/adbc/drivers.js';

const ROWS = 2_000_000;
const ms = (t0: number): string => `${(performance.now() - t0).toFixed(1)} ms`;

async function main(): Promise<void> {
  if (DUCKDB.missing) throw new Error(DUCKDB.missing);
  // DuckDB through its ADBC driver (libduckdb.so), with arrow-device/adbc as the driver manager.
  const db = new AdbcDatabase({ driver: DUCKDB.library, entrypoint: 'duckdb_adbc_init', databaseOptions: { path: ':memory:', threads: '2' } });
  const conn = await db.connect();
  console.log(`DuckDB in-process through ADBC; ${ROWS.toLocaleString()} rows per table\n`);

  // 1. DuckDB -> arrow-js
  await conn.execute(
    `CREATE TABLE trips AS SELECT i AS id, (i % 97)::INTEGER AS zone, (i % 1000) / 10.0 AS fare, ` +
      `'driver-' || (i % 5000)::VARCHAR AS driver FROM range(${ROWS}) t(i)`,
  );
  let t0 = performance.now();
  // The driver's ArrowArrayStream, every get_next on a worker thread, each batch imported zero-copy.
  const trips = await conn.query('SELECT * FROM trips');
  const queried = ms(t0);
  const fare = trips.getChild('fare')!;
  let sum = 0;
  for (const chunk of fare.data) for (const v of chunk.values as Float64Array) sum += v;
  console.log(`1. DuckDB -> arrow-js: ${trips.numRows.toLocaleString()} rows in ${trips.batches.length} batches`);
  console.log(`   query and zero-copy import of DuckDB's result stream: ${queried}`);
  console.log(`   schema: ${trips.schema.fields.map((f) => `${f.name}: ${f.type}`).join(', ')}`);
  console.log(`   sum(fare) read in JS straight from DuckDB's buffers: ${sum.toFixed(1)}`);
  t0 = performance.now();
  const viaIpc = tableFromIPC(tableToIPC(trips, 'stream'));
  console.log(`   the same table through Arrow IPC (tableToIPC + tableFromIPC): ${ms(t0)} (${viaIpc.numRows.toLocaleString()} rows)\n`);
  trips.release();

  // 2. arrow-js -> DuckDB
  const js = new Table({
    zone: vectorFromArray(Int32Array.from({ length: ROWS }, (_, i) => i % 97)),
    amount: vectorFromArray(Float64Array.from({ length: ROWS }, (_, i) => (i % 250) / 4)),
    note: vectorFromArray(Array.from({ length: ROWS }, (_, i) => (i % 7 === 0 ? null : `n${i % 100}`)), new Utf8()),
  });
  t0 = performance.now();
  // ADBC bulk ingestion: the table leaves zero-copy as an ArrowArrayStream that DuckDB reads.
  const ingested = await conn.ingest('payments', js);
  const loaded = ms(t0);
  t0 = performance.now();
  const rows = await conn.query(
    'SELECT zone, count(*) AS n, round(sum(amount), 2) AS total, count(note) AS notes FROM payments GROUP BY zone ORDER BY total DESC LIMIT 3',
  );
  console.log(`2. arrow-js -> DuckDB: ${ingested.toLocaleString()} rows ingested zero-copy (ADBC bulk ingestion) in ${loaded}`);
  console.log(`   SELECT zone, count(*), sum(amount), count(note) ... GROUP BY zone (${ms(t0)}), back in arrow-js:`);
  for (const r of rows) console.log(`     zone ${r.zone}: ${r.n} rows, total ${r.total}, ${r.notes} notes`);
  rows.release();
  t0 = performance.now();
  const bytes = tableToIPC(js, 'stream');
  console.log(`   serialising the same table to Arrow IPC alone takes ${ms(t0)} (${(bytes.byteLength / 1e6).toFixed(0)} MB copied)\n`);

  await conn.close();
  await db.close();
  const a = accounting();
  console.log(`accounting: ${a.liveImports} imports and ${a.liveExports} exports live, ${a.copiedBytes} bytes copied by arrow-device; database released: ${db.released}`);
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
