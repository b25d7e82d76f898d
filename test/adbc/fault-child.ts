/**
 * The child process of test/adbc/faults.test.ts: starts its own server (the
 * driver named by its argument: `flightsql`, the default, or `postgresql`),
 * streams a result too large to sit in the socket buffers, stops the server
 * hard after the first batch (Flight SQL: SIGKILL; PostgreSQL: `pg_ctl stop
 * -m immediate`, which ends every backend at once without a checkpoint),
 * reads on, and prints one JSON line (what the reader threw, how long after
 * the fault, what was left live). It ends by returning, never with
 * `process.exit`: that it exits at all is what the parent checks (no native
 * thread or handle keeps it alive). Each step is written to stderr with its
 * time as it starts, so a child the parent has to kill names the step it
 * hung in.
 */
import { AdbcDatabase, AdbcError, type AdbcRecordBatchReader } from '../../src/adbc/index.js';
import { accounting, StreamProducerError } from '../../src/index.js';
import { FLIGHTSQL, POSTGRESQL } from './drivers.js';
import { startFlightSql } from './flightsql.js';
import { startPostgres } from './postgres.js';

const t0 = performance.now();
const step = (what: string): void => {
  process.stderr.write(`[${(performance.now() - t0).toFixed(0)} ms] ${what}\n`);
};
const which = process.argv[2] ?? 'flightsql';
const spec = which === 'postgresql' ? POSTGRESQL : FLIGHTSQL;
let fault: () => Promise<void>;
let uri: string;
step(`starting the ${which} server`);
if (which === 'postgresql') {
  const server = await startPostgres();
  uri = server.uri;
  fault = async () => server.stop(); // pg_ctl stop -m immediate
} else {
  const server = await startFlightSql();
  uri = server.uri;
  fault = () => server.kill();
}
step(`connecting to ${uri}`);
const db = new AdbcDatabase(spec.options(uri));
const conn = await db.connect();
// About 40 MB of rows: far more than gRPC's flow-control windows, libpq's buffer and the socket buffers
// hold, so the server is still sending when it stops.
const sql = `WITH s AS (${spec.series(1_000_000)}) SELECT i, 'row number ' || i || ' of a long result' AS label FROM s`;
let reader: AdbcRecordBatchReader;
step('executing the query');
if (which === 'postgresql') {
  // Small batches (the driver's default is 16 MB): many come before the end.
  const stmt = await conn.createStatement();
  stmt.setOption('adbc.postgresql.batch_size_hint_bytes', '65536');
  await stmt.setSqlQuery(sql);
  reader = await stmt.executeQuery();
  await stmt.close(); // released after the reader
} else {
  reader = await conn.queryStream(sql);
}
let rows = 0;
let faultAt = 0;
let error: unknown;
try {
  for await (const batch of reader) {
    rows += batch.numRows;
    if (faultAt === 0) {
      step(`first batch (${batch.numRows} rows); stopping the server`);
      await fault();
      faultAt = performance.now();
      step('server stopped; reading on');
    }
  }
} catch (e) {
  error = e;
}
const errorAfterMs = performance.now() - faultAt;
step(`the read ended after ${rows} rows: ${error instanceof Error ? error.message : String(error)}; closing`);
const released = reader.released;
await conn.close();
await db.close();
step('closed');
process.stdout.write(
  `${JSON.stringify({
    rows,
    errorAfterMs,
    released,
    dbReleased: db.released,
    kind: error instanceof AdbcError ? 'AdbcError' : error instanceof StreamProducerError ? 'StreamProducerError' : error === undefined ? 'none' : String(error),
    status: error instanceof AdbcError ? error.status : undefined,
    operation: error instanceof AdbcError ? error.operation : undefined,
    message: error instanceof Error ? error.message : undefined,
    sqlState: error instanceof AdbcError ? error.sqlState : undefined,
    liveImports: accounting().liveImports,
    liveExports: accounting().liveExports,
  })}\n`,
);
