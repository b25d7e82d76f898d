/**
 * `npm run example:adbc`: the ADBC examples against every driver found here
 * (DuckDB's, in libduckdb.so, and SQLite's, from the adbc-driver-sqlite
 * wheel; `npm run setup:duckdb` and `npm run setup:adbc` install them).
 */
import { accounting } from '../../src/index.js';
import { AdbcDriver, AdbcStatusError } from './adbc.js';
import { DRIVERS } from './drivers.js';
import { ingestAndReadBack, sampleTable } from './ingest.js';
import { streamSquares } from './query.js';

let ran = 0;
for (const spec of DRIVERS) {
  console.log(`\n== ${spec.name} (${spec.path})`);
  if (spec.missing) {
    console.log(`skipped: ${spec.missing}`);
    continue;
  }
  const driver = AdbcDriver.load(spec.path, spec.entrypoint);
  try {
    using db = driver.open(spec.memoryOptions);
    using conn = db.connect();

    const s = await streamSquares(spec, conn, 1_000_000);
    console.log(`query: ${s.rows} rows in ${s.batches} batches, sum of squares ${s.sumOfSquares}, last row ${JSON.stringify(s.last)}; ` +
      `a 1 ms timer ticked ${s.timerTicks} times during the read (get_next ran off the JS thread)`);

    const { ingested, back } = await ingestAndReadBack(conn, sampleTable(), 'people');
    console.log(`ingest: ${ingested} rows in, read back as ${back.schema.fields.map((f) => `${f.name}: ${f.type}`).join(', ')}`);
    for (const row of back) console.log(`  ${JSON.stringify(row.toJSON(), (_k, v: unknown) => (typeof v === 'bigint' ? Number(v) : v))}`);
    back.release();
    console.log(`table schema (AdbcConnectionGetTableSchema): ${conn.tableSchema('people').fields.map((f) => f.name).join(', ')}`);

    try {
      await conn.query('SELECT * FROM no_such_table');
    } catch (e) {
      if (!(e instanceof AdbcStatusError)) throw e;
      console.log(`a SQL error: ${e.message.split('\n')[0]}`);
    }
    console.log(`AdbcErrorFromArrayStream: ${driver.hasErrorFromArrayStream ? 'provided' : 'not provided'} by this driver`);
    ran++;
  } finally {
    driver.release();
  }
}
const { liveImports, liveExports } = accounting();
console.log(`\n${ran} driver(s) ran; live imports ${liveImports}, live exports ${liveExports}`);
