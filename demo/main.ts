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
 * Arrow IPC with arrow-js.
 */
import { Table, tableFromIPC, tableToIPC, Utf8, vectorFromArray } from 'apache-arrow';
import { accounting, exportArrayStream, freeArrowArray, freeArrowArrayStream, freeArrowSchema, importTable } from '../src/index.js';
import { DuckDB } from './duckdb.js';

const ROWS = 2_000_000;
const ms = (t0: number): string => `${(performance.now() - t0).toFixed(1)} ms`;

async function main(): Promise<void> {
  const db = await DuckDB.open(2);
  console.log(`DuckDB in-process; ${ROWS.toLocaleString()} rows per table\n`);

  // 1. DuckDB -> arrow-js
  await db.run(
    `CREATE TABLE trips AS SELECT i AS id, (i % 97)::INTEGER AS zone, (i % 1000) / 10.0 AS fare, ` +
      `'driver-' || (i % 5000)::VARCHAR AS driver FROM range(${ROWS}) t(i)`,
  );
  let t0 = performance.now();
  const { schema, arrays } = await db.queryArrow('SELECT * FROM trips');
  const exportedBy = ms(t0);
  t0 = performance.now();
  const trips = importTable(arrays, schema);
  const imported = ms(t0);
  // The import moved the structs' contents out: this frees the struct memory only.
  for (const p of arrays) freeArrowArray(p);
  freeArrowSchema(schema);
  const fare = trips.getChild('fare')!;
  let sum = 0;
  for (const chunk of fare.data) for (const v of chunk.values as Float64Array) sum += v;
  console.log(`1. DuckDB -> arrow-js: ${trips.numRows.toLocaleString()} rows in ${trips.batches.length} batches`);
  console.log(`   DuckDB produced the Arrow structs in ${exportedBy}; arrow-device imported them zero-copy in ${imported}`);
  console.log(`   schema: ${trips.schema.fields.map((f) => `${f.name}: ${f.type}`).join(', ')}`);
  console.log(`   sum(fare) read in JS straight from DuckDB's buffers: ${sum.toFixed(1)}`);
  t0 = performance.now();
  const viaIpc = tableFromIPC(tableToIPC(trips, 'stream'));
  console.log(`   the same table through Arrow IPC (tableToIPC + tableFromIPC): ${ms(t0)} (${viaIpc.numRows.toLocaleString()} rows)\n`);

  // 2. arrow-js -> DuckDB
  const js = new Table({
    zone: vectorFromArray(Int32Array.from({ length: ROWS }, (_, i) => i % 97)),
    amount: vectorFromArray(Float64Array.from({ length: ROWS }, (_, i) => (i % 250) / 4)),
    note: vectorFromArray(Array.from({ length: ROWS }, (_, i) => (i % 7 === 0 ? null : `n${i % 100}`)), new Utf8()),
  });
  t0 = performance.now();
  const stream = exportArrayStream(js);
  const exported = ms(t0);
  t0 = performance.now();
  // DuckDB pulls the batches from its own threads while the CREATE TABLE runs.
  await db.arrowScan('payments_view', stream);
  await db.run('CREATE TABLE payments AS SELECT * FROM payments_view');
  const loaded = ms(t0);
  freeArrowArrayStream(stream);
  t0 = performance.now();
  const top = await db.queryArrow(
    'SELECT zone, count(*) AS n, round(sum(amount), 2) AS total, count(note) AS notes FROM payments GROUP BY zone ORDER BY total DESC LIMIT 3',
  );
  const rows = importTable(top.arrays, top.schema);
  for (const p of top.arrays) freeArrowArray(p);
  freeArrowSchema(top.schema);
  console.log(`2. arrow-js -> DuckDB: exported ${js.numRows.toLocaleString()} rows as a stream zero-copy in ${exported}; DuckDB loaded them in ${loaded}`);
  console.log(`   SELECT zone, count(*), sum(amount), count(note) ... GROUP BY zone (${ms(t0)}), back in arrow-js:`);
  for (const r of rows) console.log(`     zone ${r.zone}: ${r.n} rows, total ${r.total}, ${r.notes} notes`);
  t0 = performance.now();
  const bytes = tableToIPC(js, 'stream');
  console.log(`   serialising the same table to Arrow IPC alone takes ${ms(t0)} (${(bytes.byteLength / 1e6).toFixed(0)} MB copied)\n`);

  const a = accounting();
  // Live exports are those whose release DuckDB has not called yet (it never releases the
  // schema it gets from each get_schema call on a stream).
  console.log(`accounting: ${a.liveExports} exports still held by DuckDB, ${a.copiedBytes} bytes copied by arrow-device`);
  db.close();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
