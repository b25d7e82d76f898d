/**
 * The native query run (src/adbc/run.ts, native/adbc-run.c): a query's
 * SetSqlQuery, ExecuteQuery, get_schema and first batches in one worker
 * call. Held against the plain path (one hop per call, `useQueryRun(false)`)
 * on DuckDB, SQLite and PostgreSQL: the same tables, the same errors (a
 * syntax error, which fails a driver call, and a failure inside the result,
 * which fails a stream call), the same statements cached, and nothing left
 * live on either. The run counter tells the paths apart, so each check
 * fails if the run is not taken where it should be.
 *
 * Skips with the reason where a driver, the server or the native library is
 * missing (the library is not built for Windows); ADBC_REQUIRED=1 makes a
 * missing driver or server a failure.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import { after, before, describe, test } from 'node:test';
import { tableFromArrays, type Table } from 'apache-arrow';
import { accounting } from '../../src/index.js';
import { AdbcDatabase, AdbcError, type AdbcConnection } from '../../src/adbc/index.js';
import { queryRun, queryRunMissing, runCounters, useQueryRun } from '../../src/adbc/run.js';
import { logDriverCalls } from '../../src/adbc/driver.js';
import { collectUntil } from '../helpers/gc.js';
import { cCompiler, run, tempDir } from '../helpers/tools.js';
import { DUCKDB, POSTGRESQL, SQLITE, type DriverSpec } from './drivers.js';
import { postgresMissing, startPostgres, type PostgresServer } from './postgres.js';

const required = process.env.ADBC_REQUIRED === '1';
const pgMissing = POSTGRESQL.missing ?? postgresMissing();
for (const why of [DUCKDB.missing, SQLITE.missing, pgMissing]) if (why && required) throw new Error(`ADBC_REQUIRED=1: ${why}`);
const runMissing = queryRun() === null ? `no native query run: ${queryRunMissing}` : undefined;

async function nothingLive(): Promise<void> {
  await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  assert.deepEqual([accounting().liveImports, accounting().liveExports], [0, 0], 'nothing left live');
}

/** What a result is, for comparing the paths: its schema, its rows, and how many batches carried them. */
function shapeOf(t: Table): { schema: string; rows: unknown[]; batches: number } {
  const rows = t.toArray().map((r) => JSON.stringify(r, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)));
  return { schema: t.schema.fields.map((f) => `${f.name}:${String(f.type)}:${f.nullable}`).join(','), rows, batches: t.batches.length };
}

/** Runs `f` with the run on or off, and how many runs it made. */
async function onPath<R>(run: boolean, f: () => Promise<R>): Promise<{ value: R; runs: number }> {
  useQueryRun(run);
  const before = runCounters.runs;
  try {
    const value = await f();
    return { value, runs: runCounters.runs - before };
  } finally {
    useQueryRun(true);
  }
}

/** The error `p` rejects with, as the paths must agree on it. */
async function errorOf(p: Promise<unknown>): Promise<{ name: string; status: number | undefined; message: string; sqlState: string | undefined }> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof Error, `an Error, got ${String(e)}`);
    const a = e as AdbcError;
    return { name: e.constructor.name, status: a.status, message: e.message, sqlState: a.sqlState };
  }
  assert.fail('expected a rejection');
}

interface Case {
  spec: DriverSpec;
  missing: () => string | undefined;
  uri?: () => string;
  /** A query that fails inside its result, after rows were made (a stream call's failure on the drivers that stream). */
  failsLate: string;
}

let server: PostgresServer | undefined;
const cases: Case[] = [
  { spec: DUCKDB, missing: () => DUCKDB.missing, failsLate: "SELECT CASE WHEN i > 5000 THEN error('boom') ELSE i END AS x FROM range(10000) t(i)" },
  {
    spec: SQLITE,
    missing: () => SQLITE.missing,
    // The 64-bit overflow of abs() fails SQLite's step at row 5001, in a later batch of the driver's 1,024 rows.
    failsLate: 'WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < 9999) SELECT CASE WHEN i > 5000 THEN abs(-9223372036854775807 - 1) ELSE i END AS x FROM s',
  },
  { spec: POSTGRESQL, missing: () => pgMissing, uri: () => server!.uri, failsLate: 'SELECT CASE WHEN i > 5000 THEN 1 / (i - i) ELSE i END AS x FROM generate_series(0, 9999) AS g(i)' },
];

before(async () => {
  if (!pgMissing) server = await startPostgres();
});
after(async () => {
  await server?.stop();
});

for (const c of cases) {
  describe(`the query run on ${c.spec.name}`, { skip: c.missing() ?? runMissing ?? false }, () => {
    let db: AdbcDatabase;
    let conn: AdbcConnection;
    before(async () => {
      db = new AdbcDatabase(c.spec.options(c.uri?.()));
      conn = await db.connect();
    });
    after(async () => {
      await conn?.close();
      await db?.close();
    });

    // 0 rows, 1 row, one batch, and more batches than the run reads ahead (4): DuckDB's batches are
    // 2,048 rows, SQLite's 1,024.
    for (const n of [0, 1, 1_000, 20_000]) {
      test(`${n} rows: the same table as the plain path, in one run`, async () => {
        // A filter for the 0-row case: SQLite's series (a recursive CTE) always has its first row.
        const sql = `SELECT i FROM (${c.spec.series(Math.max(n, 1))}) AS s WHERE i < ${n} ORDER BY i`;
        const plain = await onPath(false, () => conn.query(sql));
        const run = await onPath(true, () => conn.query(sql));
        try {
          assert.equal(plain.runs, 0);
          assert.equal(run.runs, 1);
          assert.deepEqual(shapeOf(run.value), shapeOf(plain.value));
          assert.equal(run.value.numRows, n);
        } finally {
          plain.value.release();
          run.value.release();
        }
        await nothingLive();
      });
    }

    test('with parameters (a prepared, cached statement): the same rows as the plain path', async () => {
      // A connection of its own: DuckDB's cached statement holds the parameters bound last until the
      // connection closes (docs/adbc.md), and nothing must be live after this test.
      const conn = await db.connect();
      const sql = `SELECT i FROM (${c.spec.series(100)}) AS s WHERE i >= ${c.spec.param(1)} ORDER BY i`;
      const params = (lo: number) => tableFromArrays({ lo: BigInt64Array.of(BigInt(lo)) });
      for (const lo of [0, 42, 99]) {
        const plain = await onPath(false, () => conn.query(sql, params(lo)));
        const run = await onPath(true, () => conn.query(sql, params(lo)));
        try {
          assert.equal(run.runs, 1);
          assert.deepEqual(shapeOf(run.value), shapeOf(plain.value));
          assert.equal(run.value.numRows, 100 - lo);
        } finally {
          plain.value.release();
          run.value.release();
        }
      }
      await conn.close();
      await nothingLive();
    });

    test('a syntax error (SetSqlQuery or ExecuteQuery fails): the same AdbcError, and the next query runs', async () => {
      const plain = await onPath(false, () => errorOf(conn.query('SELEC 1')));
      const run = await onPath(true, () => errorOf(conn.query('SELEC 1')));
      assert.equal(run.runs, 1);
      assert.equal(run.value.name, 'AdbcError');
      assert.deepEqual(run.value, plain.value);
      const t = await conn.query(c.spec.series(3));
      assert.equal(t.numRows, 3);
      t.release();
      await nothingLive();
    });

    test('a failure inside the result: the same error as the plain path, with nothing live after', async () => {
      const plain = await onPath(false, () => errorOf(conn.query(c.failsLate)));
      const run = await onPath(true, () => errorOf(conn.query(c.failsLate)));
      assert.equal(run.runs, 1);
      assert.deepEqual(run.value, plain.value);
      await nothingLive();
    });

    test('execute (DDL, DML, a failure): the same rows affected and errors as the plain path, one run each', async () => {
      const counts = async (table: string): Promise<(number | string)[]> => [
        await conn.execute(`CREATE TABLE ${table} (x BIGINT)`),
        await conn.execute(`INSERT INTO ${table} SELECT i FROM (${c.spec.series(10)}) AS s`),
        await conn.execute(`DELETE FROM ${table} WHERE x < 4`),
        (await errorOf(conn.execute(`INSERT INTO ${table}_missing VALUES (1)`))).message.replaceAll(table, 'T'),
        await conn.execute(`DROP TABLE ${table}`),
      ];
      const plain = await onPath(false, () => counts('run_plain'));
      const run = await onPath(true, () => counts('run_native'));
      assert.equal(plain.runs, 0);
      assert.equal(run.runs, 5);
      assert.deepEqual(run.value, plain.value);
      // What the drivers say they changed (-1: unknown), on either path.
      assert.ok([4, -1].includes(run.value[2] as number), `DELETE affected ${String(run.value[2])}`);
      await nothingLive();
    });

    test('queryStream: the execution and the schema in one run, no batch read ahead; the same batches', async () => {
      const sql = `${c.spec.series(5_000)} ORDER BY 1`;
      const read = async () => {
        const reader = await conn.queryStream(sql);
        const sums: number[] = [];
        for await (const b of reader) sums.push(Number((b.getChildAt(0)!.toArray() as BigInt64Array).reduce((a, x) => a + x, 0n)));
        return sums;
      };
      const plain = await onPath(false, read);
      const run = await onPath(true, read);
      assert.equal(run.runs, 1);
      assert.deepEqual(run.value, plain.value);
      assert.equal(run.value.reduce((a, x) => a + x, 0), (5_000 * 4_999) / 2);
      await nothingLive();
    });

    test('a result dropped after the run read ahead: released with nothing handed out (the batches read ahead too)', async () => {
      // A reader of query() is internal; the statement's own reader with a read-ahead is the same mechanism.
      const stmt = await conn.createStatement();
      try {
        await stmt.setSqlQuery(`${c.spec.series(20_000)} ORDER BY 1`);
        const reader = await stmt.runQuery(undefined, 4);
        const first = await reader[Symbol.asyncIterator]().next();
        assert.equal(first.done, false);
        reader.release();
        await nothingLive();
      } finally {
        await stmt.close();
      }
    });
  });
}

/**
 * A malformed driver (test/adbc/fake-driver.c) whose streams break the C Stream Interface's rules: the
 * run must call nothing it should not (a NULL callback), and give what the plain path gives: the same
 * typed error naming the place, every struct released once (the driver counts them), nothing live.
 */
const cc = cCompiler();
const fakeMissing = cc === undefined ? 'no C compiler to build test/adbc/fake-driver.c' : undefined;
describe('the query run on a malformed driver', { skip: fakeMissing ?? runMissing ?? false }, () => {
  let db: AdbcDatabase;
  let conn: AdbcConnection;
  let live: () => number;
  before(async () => {
    const dir = tempDir('fake-adbc');
    const lib = join(dir, 'fake-driver.so');
    run(cc!, ['-std=c11', '-shared', '-fPIC', '-O1', '-o', lib, fileURLToPath(new URL('fake-driver.c', import.meta.url))]);
    db = new AdbcDatabase({ driver: lib, entrypoint: 'fake_adbc_init' });
    conn = await db.connect();
    const f = koffi.load(lib).func('int64_t fake_live(void)');
    live = () => Number(f() as number | bigint);
  });
  after(async () => {
    await conn?.close();
    await db?.close();
  });

  const both = async (sql: string, read: (t: Table) => unknown = (t) => shapeOf(t)): Promise<unknown[]> => {
    const out: unknown[] = [];
    for (const on of [false, true]) {
      const r = await onPath(on, async () => {
        try {
          const t = await conn.query(sql);
          try {
            return read(t);
          } finally {
            t.release();
          }
        } catch (e) {
          return { error: (e as Error).constructor.name, message: (e as Error).message };
        }
      });
      assert.equal(r.runs, on ? 1 : 0);
      await nothingLive();
      assert.equal(live(), 0, `the driver's structs are all released (run ${on ? 'on' : 'off'})`);
      out.push(r.value);
    }
    return out;
  };

  test('a result read to its end in the run: the driver\'s stream is released there, on the worker thread (the plain path releases it on the JS thread)', async () => {
    const lib = db.driverInfo.library;
    const where = koffi.load(lib).func('int fake_stream_released_on_init_thread(void)');
    const released = (): number => Number(where() as number | bigint);
    for (const on of [false, true]) {
      const r = await onPath(on, async () => {
        const t = await conn.query('ok 2');
        try {
          return { rows: t.numRows, onJsThread: released() };
        } finally {
          t.release();
        }
      });
      assert.deepEqual(r.value, { rows: 2, onJsThread: on ? 0 : 1 }, `run ${on ? 'on' : 'off'}`);
      await nothingLive();
      assert.equal(live(), 0);
    }
  });

  test('a good result of 7 batches (more than are read ahead): the same rows', async () => {
    const [plain, run] = await both('ok 7');
    assert.deepEqual(run, plain);
    assert.equal((run as { rows: unknown[] }).rows.length, 7);
  });

  test('a statement let go whose release fails: the run that releases it gives the driver\'s error back and runs its own query', async () => {
    await using uncached = new AdbcDatabase({ driver: db.driverInfo.library, entrypoint: 'fake_adbc_init', statementCacheSize: 0 });
    await using c = await uncached.connect();
    const calls: string[] = [];
    logDriverCalls((f, thread) => calls.push(`${f} ${thread}`));
    try {
      const r = await onPath(true, async () => {
        (await c.query('fail-release')).release();
        const t = await c.query('ok 1');
        try {
          return shapeOf(t);
        } finally {
          t.release();
        }
      });
      assert.equal(r.runs, 2);
      assert.equal((r.value as { rows: unknown[] }).rows.length, 1);
      assert.deepEqual(calls.filter((f) => f.startsWith('StatementRelease')), ['StatementRelease worker'], 'released by the second query\'s run');
    } finally {
      logDriverCalls(undefined);
    }
    await nothingLive();
    assert.equal(live(), 0, 'the release\'s error was given back');
  });

  for (const [sql, what] of [
    ['fail-next 2', /boom at 2/],
    ['fail-next 0', /boom at 0/],
    ['fail-schema', /get_schema.*no schema here/],
    ['null-schema', /get_schema.*NULL callback/],
    ['null-next', /get_next.*NULL callback/],
    ['unfilled', /unfilled/],
    ['fail-exec', /the execution failed/],
  ] as const) {
    test(`"${sql}": the same error on both paths, nothing live`, async () => {
      const [plain, run] = await both(sql);
      assert.deepEqual(run, plain);
      assert.match((run as { message: string }).message, what);
    });
  }
});
