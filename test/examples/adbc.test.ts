/**
 * The ADBC examples (examples/adbc) as tests, against two real drivers:
 * DuckDB's (`duckdb_adbc_init` in libduckdb.so) and the SQLite driver of
 * the Apache Arrow ADBC project (the adbc-driver-sqlite wheel). For each:
 * a query read into arrow-js with every value compared, a streamed query
 * read off the JS thread, an arrow-js table ingested and read back with
 * every value compared, the table's schema through
 * `AdbcConnectionGetTableSchema` (`importSchemaFrom`), SQL errors as typed
 * errors carrying the driver's message (at execute, and in mid-stream through
 * `AdbcErrorFromArrayStream` where the driver has it), and nothing leaked.
 *
 * A driver that is not installed skips with the reason (`npm run
 * setup:duckdb`, `npm run setup:adbc`); `npm run test:adbc` (CI) sets
 * ADBC_REQUIRED=1, which makes that a failure.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Vector } from 'apache-arrow';
import { accounting, StreamProducerError } from '../../src/index.js';
import { AdbcDriver, AdbcStatus, AdbcStatusError, type Connection } from '../../examples/adbc/adbc.js';
import { DRIVERS, DUCKDB, SQLITE, type DriverSpec } from '../../examples/adbc/drivers.js';
import { ingestAndReadBack, sampleTable } from '../../examples/adbc/ingest.js';
import { squaresSql, streamSquares } from '../../examples/adbc/query.js';
import { collectUntil } from '../helpers/gc.js';

const required = process.env.ADBC_REQUIRED === '1';
for (const d of DRIVERS) if (d.missing && required) throw new Error(`ADBC_REQUIRED=1: ${d.missing}`);

/** Runs `body` with a fresh in-memory database of `spec`, then releases everything and proves nothing is left live. */
async function withConnection(spec: DriverSpec, body: (conn: Connection, driver: AdbcDriver) => Promise<void>, options: Record<string, string> = {}): Promise<void> {
  const driver = AdbcDriver.load(spec.path, spec.entrypoint);
  try {
    const db = driver.open({ ...spec.memoryOptions, ...options });
    try {
      const conn = db.connect();
      try {
        await body(conn, driver);
      } finally {
        conn.release();
      }
    } finally {
      db.release();
    }
  } finally {
    driver.release();
  }
  await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  assert.equal(accounting().liveImports, 0, 'no import left live');
  assert.equal(accounting().liveExports, 0, 'no export left live');
}

/** A column's values as plain JS: integers as numbers (SQLite's are int64), booleans as 0/1 where asked. */
function values(v: Vector | null, bool01 = false): unknown[] {
  assert.ok(v, 'the column exists');
  const out: unknown[] = [];
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v.get(i);
    out.push(typeof x === 'bigint' ? Number(x) : bool01 && typeof x === 'boolean' ? Number(x) : x);
  }
  return out;
}

const MID_STREAM_ERROR: Record<DriverSpec['name'], string> = {
  // DuckDB's error() raises in the middle of execution, after many rows have streamed.
  duckdb: "SELECT CASE WHEN range < 500000 THEN range ELSE error('boom at ' || range) END AS x FROM range(1000000)",
  // abs() of the smallest int64 overflows: SQLite raises when it reaches row 5000 (the driver reads 1024 rows a batch).
  sqlite: 'WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 9999) SELECT CASE WHEN i < 5000 THEN i ELSE abs(-9223372036854775807 - 1) END AS x FROM c',
};

for (const spec of DRIVERS) {
  describe(`ADBC examples: ${spec.name}`, { skip: spec.missing }, () => {
    test('the driver accepts ADBC 1.1.0 through its init function', () => {
      const driver = AdbcDriver.load(spec.path, spec.entrypoint);
      try {
        assert.equal(driver.version, 1_001_000);
      } finally {
        driver.release();
      }
    });

    test('query into arrow-js: every value of a 5,000-row result', async () => {
      await withConnection(spec, async (conn) => {
        const n = 5000;
        const table = await conn.query(squaresSql(spec, n));
        try {
          assert.equal(table.numRows, n);
          assert.deepEqual(table.schema.fields.map((f) => f.name), ['i', 'square', 'label']);
          const is = Array.from({ length: n }, (_, i) => i);
          assert.deepEqual(values(table.getChild('i')), is);
          assert.deepEqual(values(table.getChild('square')), is.map((i) => i * i));
          assert.deepEqual(values(table.getChild('label')), is.map((i) => `row ${i}`));
        } finally {
          table.release();
        }
      });
    });

    test('a streamed query read off the JS thread: one batch at a time, sums right, the event loop ran', async () => {
      await withConnection(spec, async (conn) => {
        const n = 200_000;
        // SQLite's driver reads 1024 rows a batch by default; larger batches make each get_next longer.
        const s = await streamSquares(spec, conn, n, spec === SQLITE ? { 'adbc.sqlite.query.batch_rows': '20000' } : {});
        assert.equal(s.rows, n);
        assert.ok(s.batches > 1, `${s.batches} batches`);
        assert.equal(s.sumOfSquares, (BigInt(n - 1) * BigInt(n) * BigInt(2 * n - 1)) / 6n);
        assert.deepEqual(s.first, { i: 0, square: 0, label: 'row 0' });
        assert.deepEqual(s.last, { i: n - 1, square: (n - 1) * (n - 1), label: `row ${n - 1}` });
        // A synchronous for-await never lets a timer run (test/stream/offthread.test.ts); here it did.
        assert.ok(s.timerTicks > 0, `the timer ticked ${s.timerTicks} times during the read`);
      });
    });

    test('ingest an arrow-js table, read it back: every value, the driver types', async () => {
      await withConnection(spec, async (conn) => {
        const table = sampleTable();
        const { ingested, back } = await ingestAndReadBack(conn, table, 'people');
        try {
          assert.equal(ingested, table.numRows);
          assert.equal(back.numRows, table.numRows);
          // DuckDB keeps the Arrow types; SQLite stores integers and booleans as INTEGER (int64).
          const types = back.schema.fields.map((f) => `${f.name}: ${f.type}`);
          assert.deepEqual(types, spec === DUCKDB
            ? ['id: Int32', 'name: Utf8', 'score: Float64', 'active: Bool']
            : ['id: Int64', 'name: Utf8', 'score: Float64', 'active: Int64']);
          for (const f of table.schema.fields) {
            assert.deepEqual(values(back.getChild(f.name), true), values(table.getChild(f.name), true), `column ${f.name}`);
          }
        } finally {
          back.release();
        }
        // AdbcConnectionGetTableSchema through importSchemaFrom.
        assert.deepEqual(conn.tableSchema('people').fields.map((f) => f.name), ['id', 'name', 'score', 'active']);
        // Append mode adds the rows again.
        const { back: twice } = await ingestAndReadBack(conn, table, 'people', 'append');
        try {
          assert.deepEqual(values(twice.getChild('id')), [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
        } finally {
          twice.release();
        }
      });
    });

    test('a SQL error at execute: a typed AdbcStatusError with the driver message; nothing leaked', async () => {
      await withConnection(spec, async (conn) => {
        for (const [sql, words] of [['SELECT * FROM no_such_table', /no_such_table/], ['SELEC 1', /syntax error/i]] as const) {
          const err = await conn.query(sql).then(() => undefined, (e: unknown) => e);
          assert.ok(err instanceof AdbcStatusError, `${sql}: ${String(err)}`);
          assert.match(err.driverMessage ?? '', words);
          assert.notEqual(err.status, AdbcStatus.OK);
        }
        // Ingesting into a table that exists, in create mode: ALREADY_EXISTS or the driver's own status, with its message.
        await conn.ingest(sampleTable(), 'twice');
        const err = await conn.ingest(sampleTable(), 'twice', 'create').then(() => undefined, (e: unknown) => e);
        assert.ok(err instanceof AdbcStatusError, String(err));
        assert.match(err.driverMessage ?? '', /twice|exists/i);
      });
    });

    test(`a driver error in mid-stream: ${spec === DUCKDB ? 'AdbcErrorFromArrayStream gives the driver status and details' : 'the stream error with get_last_error text (the driver has no AdbcErrorFromArrayStream)'}`, async () => {
      await withConnection(spec, async (conn, driver) => {
        // One thread: with several, the thread that raises interrupts the others, and one of them may
        // report DuckDB's "INTERRUPT Error: Interrupted!" first (seen once in CI on Node 26).
        if (spec === DUCKDB) await conn.execute('SET threads TO 1');
        using stmt = conn.statement(MID_STREAM_ERROR[spec.name]);
        const reader = await stmt.query();
        let rows = 0;
        const err = await (async () => {
          for await (const b of reader) rows += b.numRows;
        })().then(() => undefined, (e: unknown) => e);
        assert.ok(rows > 0, `${rows} rows streamed before the error: it came from get_next`);
        assert.equal(reader.released, true, 'the failed stream is released');
        if (spec === DUCKDB) {
          assert.equal(driver.hasErrorFromArrayStream, true);
          assert.ok(err instanceof AdbcStatusError, String(err));
          assert.equal(err.operation, 'AdbcErrorFromArrayStream');
          assert.equal(err.driverMessage, 'Invalid Input Error: boom at 500000');
          assert.equal(err.status, AdbcStatus.INTERNAL);
          assert.equal(err.detail('duckdb:error_type'), 'InvalidInput');
          assert.ok(err.cause instanceof StreamProducerError, 'the stream error is its cause');
          assert.match(err.cause.message, /boom at 500000/);
        } else {
          assert.equal(driver.hasErrorFromArrayStream, false);
          assert.ok(err instanceof StreamProducerError, String(err));
          assert.equal(err.producerMessage, 'integer overflow');
          assert.equal(rows, 5000 - (5000 % 1024), 'every full batch before the failing one');
        }
      });
    });
  });
}

describe('which thread reads a bound stream', () => {
  for (const spec of DRIVERS) {
    const what = spec === DUCKDB ? 'with 4 DuckDB threads ' : '';
    test(`${spec.name}: ingestion calls get_next on the calling thread (a synchronous ExecuteQuery ${what}completes)`, { skip: spec.missing }, () => {
      const child = fileURLToPath(new URL('./adbc-sync-ingest.child.ts', import.meta.url));
      const r = spawnSync(process.execPath, ['--import', 'tsx', child, spec.name], { encoding: 'utf8', timeout: 30_000 });
      assert.match(r.stdout, /ingesting/, r.stderr);
      assert.match(r.stdout, /done 4194304/, `no deadlock, every row in (stderr: ${r.stderr})`);
    });
  }
});
