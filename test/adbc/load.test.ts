/**
 * arrow-device/adbc under load: eight connections of one `AdbcDatabase`
 * querying at once, on each of the four real drivers (DuckDB, SQLite, and
 * PostgreSQL and Flight SQL against their servers on the loopback
 * interface). Every result is checked value by value, and a timer on the
 * event loop must fire while they run: execution and every `get_next` go
 * through worker threads, so the JS thread stays free. After each run,
 * nothing is left live and the database is released.
 *
 * Skips with the reason where a driver or server is missing;
 * ADBC_REQUIRED=1 makes that a failure.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { accounting } from '../../src/index.js';
import { AdbcDatabase, type AdbcConnection } from '../../src/adbc/index.js';
import { collectUntil } from '../helpers/gc.js';
import { DRIVERS } from './drivers.js';
import { flightSqlServerMissing } from './flightsql.js';
import { serveDuringSuite } from './servers.js';
import { postgresMissing } from './postgres.js';

/** Connections querying at once. */
const CONNECTIONS = 8;
/** Rows each query returns (several batches on every driver). */
const ROWS = 100_000;

const required = process.env.ADBC_REQUIRED === '1';
const pgMissing = postgresMissing();
const flightMissing = flightSqlServerMissing();
for (const why of [...DRIVERS.map((d) => d.missing), pgMissing, flightMissing]) if (why && required) throw new Error(`ADBC_REQUIRED=1: ${why}`);

for (const spec of DRIVERS) {
  const skip = spec.missing ?? (spec.name === 'postgresql' ? pgMissing : spec.name === 'flightsql' ? flightMissing : undefined);
  describe(`arrow-device/adbc under load: ${spec.name}`, { skip }, () => {
    const uri = serveDuringSuite(spec);

    test(`${CONNECTIONS} connections of one database query at once: every result right, and the event loop's timer fires meanwhile`, async () => {
      const db = new AdbcDatabase(spec.options(uri()));
      const conns: AdbcConnection[] = [];
      let ticks = 0;
      let timer: NodeJS.Timeout | undefined;
      try {
        for (let k = 0; k < CONNECTIONS; k++) conns.push(await db.connect());
        timer = setInterval(() => ticks++, 1);
        // Connection k gets i * k + k for i in 0..ROWS-1: each result is its own, so a mix-up shows.
        const results = await Promise.all(
          conns.map(async (conn, k) => {
            const table = await conn.query(`WITH s AS (${spec.series(ROWS)}) SELECT i, i * ${k} + ${k} AS v FROM s ORDER BY i`);
            try {
              let sum = 0n;
              let expected = 0n;
              const v = table.getChild('v')!;
              for (let i = 0; i < table.numRows; i++) {
                const want = BigInt(i * k + k);
                const got = BigInt(v.get(i) as bigint | number);
                if (got !== want) assert.fail(`connection ${k}, row ${i}: ${got}, expected ${want}`);
                sum += got;
                expected += want;
              }
              return { k, rows: table.numRows, sum, expected };
            } finally {
              table.release();
            }
          }),
        );
        clearInterval(timer);
        for (const r of results) {
          assert.equal(r.rows, ROWS, `connection ${r.k}: rows`);
          assert.equal(r.sum, r.expected, `connection ${r.k}: sum`);
        }
        assert.ok(ticks > 0, `the timer fired ${ticks} times while the ${CONNECTIONS} queries ran`);
      } finally {
        clearInterval(timer);
        for (const c of conns) await c.close();
        await db.close();
      }
      assert.equal(db.released, true, 'the database, and every connection, released');
      await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
      assert.deepEqual([accounting().liveImports, accounting().liveExports], [0, 0], 'nothing left live');
    });
  });
}
