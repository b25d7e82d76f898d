/**
 * The child process of test/adbc/faults.test.ts: starts its own Flight SQL
 * server, streams a result too large to sit in the socket buffers, kills the
 * server (SIGKILL) after the first batch, reads on, and prints one JSON line
 * (what the reader threw, how long after the kill, what was left live). It
 * ends by returning, never with `process.exit`: that it exits at all is what
 * the parent checks (no native thread or handle keeps it alive).
 */
import { AdbcDatabase, AdbcError } from '../../src/adbc/index.js';
import { accounting, StreamProducerError } from '../../src/index.js';
import { FLIGHTSQL } from './drivers.js';
import { startFlightSql } from './flightsql.js';

const server = await startFlightSql();
const db = new AdbcDatabase(FLIGHTSQL.options(server.uri));
const conn = await db.connect();
// About 40 MB of rows: far more than gRPC's flow-control windows and the socket buffers hold, so the
// server is still sending when it is killed.
const reader = await conn.queryStream(`WITH s AS (${FLIGHTSQL.series(1_000_000)}) SELECT i, 'row number ' || i || ' of a long result' AS label FROM s`);
let rows = 0;
let killedAt = 0;
let error: unknown;
try {
  for await (const batch of reader) {
    rows += batch.numRows;
    if (killedAt === 0) {
      await server.kill();
      killedAt = performance.now();
    }
  }
} catch (e) {
  error = e;
}
const errorAfterMs = performance.now() - killedAt;
const released = reader.released;
await conn.close();
await db.close();
process.stdout.write(
  `${JSON.stringify({
    rows,
    errorAfterMs,
    released,
    kind: error instanceof AdbcError ? 'AdbcError' : error instanceof StreamProducerError ? 'StreamProducerError' : error === undefined ? 'none' : String(error),
    status: error instanceof AdbcError ? error.status : undefined,
    operation: error instanceof AdbcError ? error.operation : undefined,
    message: error instanceof Error ? error.message : undefined,
    liveImports: accounting().liveImports,
    liveExports: accounting().liveExports,
  })}\n`,
);
