/**
 * `npm run example:adbc`: arrow-device/adbc, the ADBC driver manager of this
 * package, against DuckDB's and SQLite's drivers (`npm run setup:duckdb`,
 * `npm run setup:adbc` install them). Code written for the official
 * `@apache-arrow/adbc-driver-manager` runs with one import changed; what
 * changes underneath: results are the driver's `ArrowArrayStream` imported
 * zero-copy, ingested tables leave as a zero-copy `exportArrayStream`, and
 * every call that may block runs on a worker thread.
 */
import { tableFromArrays } from 'apache-arrow';
import { AdbcDatabase, AdbcError } from '../../src/adbc/index.js'; // in an application: from 'arrow-device/adbc'
import { accounting } from '../../src/index.js';
import { DUCKDB, SQLITE } from '../../test/adbc/drivers.js';

let ran = 0;
for (const spec of [DUCKDB, SQLITE]) {
  console.log(`\n== ${spec.name} (${spec.library})`);
  if (spec.missing) {
    console.log(`skipped: ${spec.missing}`);
    continue;
  }
  await using db = new AdbcDatabase(spec.options());
  await using conn = await db.connect();

  // A million rows streamed: one batch alive at a time, each get_next on a worker thread.
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  let rows = 0;
  let sum = 0n;
  for await (const batch of await conn.queryStream(`WITH s AS (${spec.series(1_000_000)}) SELECT i * i AS square FROM s`)) {
    for (const v of batch.getChild('square')!) sum += BigInt(v as bigint);
    rows += batch.numRows;
  }
  clearInterval(timer);
  console.log(`query: ${rows} rows, sum of squares ${sum}; a 1 ms timer ticked ${ticks} times meanwhile`);

  // An arrow-js table ingested zero-copy, read back into a zero-copy Table.
  const people = tableFromArrays({ id: Int32Array.of(1, 2, 3), name: ['ada', 'grace', 'edsger'] });
  console.log(`ingest: ${await conn.ingest('people', people)} rows in`);
  const back = await conn.query('SELECT name FROM people WHERE id >= ? ORDER BY id', tableFromArrays({ id: Int32Array.of(2) }));
  console.log(`read back: ${back.getChild('name')!.toArray().join(', ')} (${back.schema.fields.map((f) => `${f.name}: ${f.type}`).join(', ')})`);
  back.release();

  try {
    await conn.query('SELECT * FROM no_such_table');
  } catch (e) {
    if (!(e instanceof AdbcError)) throw e;
    console.log(`a SQL error: AdbcError ${e.code}: ${e.message.split('\n')[0]}`);
  }
  ran++;
}
const { liveImports, liveExports } = accounting();
console.log(`\n${ran} driver(s) ran; live imports ${liveImports}, live exports ${liveExports}`);
