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
import { accounting, exportTable, freeArrowArray, freeArrowSchema, importTable } from '../src/index.js';
import { DuckDB, freeStruct } from '../test/peers/duckdb/duckdb.js';
import { collectUntil } from '../test/helpers/gc.js';

const ROWS = 2_000_000;
const ms = (t0: number): string => `${(performance.now() - t0).toFixed(1)} ms`;

async function main(): Promise<void> {
  const db = await DuckDB.open({ threads: 2 });
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
  for (const p of arrays) freeStruct(p);
  freeStruct(schema);
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
  const out = exportTable(js);
  const exported = ms(t0);
  t0 = performance.now();
  await db.createTableFromArrow('payments', out.schema, out.arrays);
  const loaded = ms(t0);
  for (const p of out.arrays) freeArrowArray(p);
  freeArrowSchema(out.schema);
  t0 = performance.now();
  const rows = await db.queryText(
    'SELECT zone, count(*) AS n, round(sum(amount), 2) AS total, count(note) AS notes FROM payments GROUP BY zone ORDER BY total DESC LIMIT 3',
  );
  console.log(`2. arrow-js -> DuckDB: exported ${js.numRows.toLocaleString()} rows zero-copy in ${exported}; DuckDB loaded them in ${loaded}`);
  console.log(`   SELECT zone, count(*), sum(amount), count(note) ... GROUP BY zone (${ms(t0)}):`);
  for (const r of rows) console.log(`     zone ${r[0]}: ${r[1]} rows, total ${r[2]}, ${r[3]} notes`);
  t0 = performance.now();
  const bytes = tableToIPC(js, 'stream');
  console.log(`   serialising the same table to Arrow IPC alone takes ${ms(t0)} (${(bytes.byteLength / 1e6).toFixed(0)} MB copied)\n`);

  await collectUntil(() => accounting().liveExports === 0);
  const a = accounting();
  console.log(`accounting: ${a.liveExports} exports still pinned, ${a.copiedBytes} bytes copied by arrow-device`);
  db.close();
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
