/**
 * arrow-device/adbc for services: the pool (`db.pool`), `AbortSignal` on
 * every call that may wait, where driver calls run (the driver's call log),
 * and the drop-in behaviours the official manager's users rely on (readers
 * that are arrow-js `RecordBatchReader`s, batches kept with
 * `queryOptions: { keep: true }`). Against real drivers: DuckDB, SQLite,
 * PostgreSQL (a server on loopback, restarted under load) and Flight SQL
 * (arrow-go's example server: a slow query aborted).
 *
 * Bounds here are correctness bounds (an abort rejects before the query it
 * stopped would have ended), not speed: they are seconds apart.
 *
 * Skips with the reason where a driver or server is missing;
 * ADBC_REQUIRED=1 makes that a failure.
 */
import assert from 'node:assert/strict';
import { closeSync, constants as fsConstants, mkdtempSync, openSync, rmSync } from 'node:fs';
import { open as openAsync, readFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { RecordBatchReader, tableFromArrays, type RecordBatch } from 'apache-arrow';
import { accounting } from '../../src/index.js';
import {
  AdbcDatabase, AdbcError, AdbcRecordBatchReader, AdbcStatus, IngestMode, type AdbcConnection,
} from '../../src/adbc/index.js';
import { logDriverCalls, type CallThread } from '../../src/adbc/driver.js';
import { queryRun, queryRunMissing } from '../../src/adbc/run.js';
import { nativeWorkers } from '../../src/memory/native.js';
import { nativeWorkersMissing } from '../../src/memory/workers.js';
import { collectUntil } from '../helpers/gc.js';
import { childSkip, childValue } from '../helpers/child.js';
import { DUCKDB, FLIGHTSQL, POSTGRESQL, SQLITE, type DriverSpec } from './drivers.js';
import { flightSqlServerMissing, startFlightSql, type FlightSqlServer } from './flightsql.js';
import { postgresMissing, startPostgres, type PostgresServer } from './postgres.js';

const required = process.env.ADBC_REQUIRED === '1';
const pgMissing = POSTGRESQL.missing ?? postgresMissing();
const flightMissing = FLIGHTSQL.missing ?? flightSqlServerMissing();
for (const why of [DUCKDB.missing, SQLITE.missing, pgMissing, flightMissing]) if (why && required) throw new Error(`ADBC_REQUIRED=1: ${why}`);

/** How long a slow query would run: an abort must reject well before it (a correctness bound, not a speed one). */
const SLOW_S = 8;

async function nothingLive(): Promise<void> {
  await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  assert.deepEqual([accounting().liveImports, accounting().liveExports], [0, 0], 'nothing left live');
}

/** The rejection of `p`, which must reject. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
}

const isAbort = (e: unknown): boolean => e instanceof DOMException && e.name === 'AbortError';

/** A promise and its resolver, to hold a step until the test says so. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe('the pool: order, max, timeouts, readers, close (DuckDB)', { skip: DUCKDB.missing }, () => {
  let db: AdbcDatabase;
  before(() => {
    db = new AdbcDatabase(DUCKDB.options());
  });
  after(async () => {
    await db.close();
    assert.equal(db.released, true, 'the database released after every pool connection');
    await nothingLive();
  });

  test('queries through the pool give the right rows; connections are opened on demand up to max and reused', async () => {
    const pool = db.pool({ max: 3 });
    try {
      let peak = 0;
      const sums = await Promise.all(Array.from({ length: 12 }, async (_, k) => {
        const t = await pool.query(`SELECT sum(range)::BIGINT AS s FROM range(${k * 10})`);
        peak = Math.max(peak, pool.totalCount);
        try {
          return Number(t.getChild('s')!.get(0) ?? 0);
        } finally {
          t.release();
        }
      }));
      const want = Array.from({ length: 12 }, (_, k) => {
        let s = 0;
        for (let i = 0; i < k * 10; i++) s += i;
        return s;
      });
      assert.deepEqual(sums, want);
      assert.ok(peak <= 3, `at most max (3) connections, saw ${peak}`);
      assert.ok(pool.totalCount >= 1 && pool.totalCount <= 3);
      assert.equal(pool.idleCount, pool.totalCount, 'every connection idle after the calls');
      assert.equal(pool.inUseCount, 0);
      assert.equal(pool.waitingCount, 0);
    } finally {
      await pool.close();
    }
    assert.equal(pool.totalCount, 0, 'close() closed every connection');
  });

  test('waiters are served in the order they asked; a released connection is reused, not reopened', async () => {
    const pool = db.pool({ max: 1 });
    try {
      const first = await pool.connect();
      const order: number[] = [];
      const waits = [1, 2, 3].map((k) => pool.connect().then((c) => {
        order.push(k);
        return c;
      }));
      await new Promise((r) => setImmediate(r));
      assert.equal(pool.waitingCount, 3);
      first.release();
      for (const w of waits) (await w).release();
      assert.deepEqual(order, [1, 2, 3]);
      assert.equal(pool.totalCount, 1, 'one connection served all four leases');
      // The same object comes back: it was given back, not closed.
      const again = await pool.connect();
      assert.equal(again, first);
      again.release();
    } finally {
      await pool.close();
    }
  });

  test('a connection given back refuses calls until the pool hands it out again', async () => {
    const pool = db.pool({ max: 1 });
    try {
      const conn = await pool.connect();
      await conn.close(); // close() of a pooled connection gives it back
      await assert.rejects(conn.query('SELECT 1'), (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.INVALID_STATE && /given back to its pool/.test(e.message));
      assert.equal(conn.released, false, 'given back, not released');
      assert.equal(pool.idleCount, 1);
    } finally {
      await pool.close();
    }
  });

  test('acquireTimeoutMillis: a waiter rejects with TIMEOUT, and the queue forgets it', async () => {
    const pool = db.pool({ max: 1, acquireTimeoutMillis: 30 });
    try {
      const held = await pool.connect();
      const e = await rejection(pool.connect());
      assert.ok(e instanceof AdbcError && e.status === AdbcStatus.TIMEOUT, `got ${String(e)}`);
      assert.match((e as AdbcError).message, /no connection of the pool within 30 ms/);
      assert.equal(pool.waitingCount, 0);
      held.release();
      (await pool.connect()).release();
    } finally {
      await pool.close();
    }
  });

  test('an abort while waiting for a connection rejects with the reason; an aborted signal never queues', async () => {
    const pool = db.pool({ max: 1 });
    try {
      const held = await pool.connect();
      const ac = new AbortController();
      const waiting = pool.connect({ signal: ac.signal });
      await new Promise((r) => setImmediate(r));
      assert.equal(pool.waitingCount, 1);
      ac.abort();
      assert.ok(isAbort(await rejection(waiting)));
      assert.equal(pool.waitingCount, 0);
      const reason = new Error('the request went away');
      assert.equal(await rejection(pool.query('SELECT 1', undefined, { signal: AbortSignal.abort(reason) })), reason);
      assert.equal(pool.waitingCount, 0);
      held.release();
    } finally {
      await pool.close();
    }
  });

  test('a queryStream holds its connection until the reader is released', async () => {
    const pool = db.pool({ max: 1 });
    try {
      const reader = await pool.queryStream('SELECT range AS i FROM range(300000)');
      assert.equal(pool.inUseCount, 1, 'the reader keeps its connection');
      let served = false;
      const next = pool.query('SELECT 7 AS x').then((t) => {
        served = true;
        return t;
      });
      let rows = 0;
      for await (const b of reader) {
        rows += b.numRows;
        assert.equal(served, false, 'no other lease while the reader is open');
      }
      assert.equal(rows, 300000);
      const t = await next;
      assert.equal(t.getChild('x')!.get(0), 7);
      t.release();
    } finally {
      await pool.close();
    }
  });

  test('close() waits for connections in use, refuses new requests, and closes everything', async () => {
    const pool = db.pool({ max: 2 });
    const conn = await pool.connect();
    const idle = await pool.connect();
    idle.release();
    let closed = false;
    const closing = pool.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(closed, false, 'close() waits for the connection in use');
    assert.equal(pool.idleCount, 0, 'idle connections closed at once');
    await assert.rejects(pool.connect(), (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.INVALID_STATE);
    assert.equal(Number((await conn.query('SELECT 1 AS one')).getChild('one')!.get(0)), 1, 'a connection in use still works');
    conn.release();
    await closing;
    assert.equal(pool.totalCount, 0);
    assert.equal(conn.released, true);
  });

  test('idleTimeoutMillis: idle connections are closed', async () => {
    const pool = db.pool({ max: 2, idleTimeoutMillis: 20 });
    try {
      const c = await pool.connect();
      c.release();
      assert.equal(pool.idleCount, 1);
      const deadline = Date.now() + 10_000;
      while (pool.totalCount > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.equal(pool.totalCount, 0, 'the idle connection was closed');
      assert.equal(c.released, true);
    } finally {
      await pool.close();
    }
  });

  test('options are checked', () => {
    assert.throws(() => db.pool({ max: 0 }), /options.max must be an integer from 1/);
    assert.throws(() => db.pool({ idleTimeoutMillis: -1 }), /idleTimeoutMillis must be a finite number from 0/);
  });
});

describe('the pool over SQLite (a database file shared by its connections)', { skip: SQLITE.missing }, () => {
  test('writes on one lease are seen by the next; ingest and execute through the pool', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arrow-device-pool-'));
    const db = new AdbcDatabase({ driver: SQLITE.library, databaseOptions: { uri: `file:${join(dir, 'db.sqlite')}` } });
    const pool = db.pool({ max: 4 });
    try {
      assert.equal(await pool.ingest('t', tableFromArrays({ id: Int32Array.of(1, 2, 3) })), 3);
      // One writer at a time (SQLite locks the file for a write; a concurrent one gets "database is locked").
      for (const v of [4, 5, 6]) assert.equal(await pool.execute(`INSERT INTO t VALUES (${v})`), 1);
      // Readers at once, each on a connection of its own.
      const tables = await Promise.all([0, 1, 2, 3].map(() => pool.query('SELECT sum(id) AS s, count(*) AS n FROM t')));
      for (const t of tables) {
        assert.deepEqual([Number(t.getChild('s')!.get(0)), Number(t.getChild('n')!.get(0))], [21, 6]);
        t.release();
      }
    } finally {
      await pool.close();
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    }
    await nothingLive();
  });
});

describe('PostgreSQL: the pool across a server restart, aborts of running queries', { skip: pgMissing }, () => {
  let server: PostgresServer;
  before(async () => {
    server = await startPostgres();
  });
  after(() => server?.stop());

  test('the driver\'s builtin type table (adbc.postgresql.type_resolver_mode) gives the same results as the server\'s catalog for the common types', async () => {
    // docs/adbc.md, "Opening the database": the option a service can set to skip the catalog read at open.
    const sql = `SELECT 1::int2 AS a, 2::int4 AS b, 3::int8 AS c, 1.5::float4 AS d, 2.5::float8 AS e, 'x'::text AS f, 'y'::varchar AS g,
      true AS h, '2024-05-06'::date AS i, '2024-05-06 07:08:09.123456'::timestamp AS j, '2024-05-06 07:08:09+00'::timestamptz AS k,
      '12.345'::numeric AS l, '\\x0102'::bytea AS m, '{1,2,3}'::int4[] AS n, '1 day 2 hours'::interval AS o, NULL::int4 AS p`;
    const results: { types: string[]; rows: string }[] = [];
    for (const mode of [undefined, 'builtin']) {
      const base = POSTGRESQL.options(server.uri);
      const options = (mode === undefined ? base : { ...base, databaseOptions: { ...base.databaseOptions, 'adbc.postgresql.type_resolver_mode': mode } }) as typeof base;
      await using db = await AdbcDatabase.open(options);
      await using conn = await db.connect();
      const t = await conn.query(sql);
      results.push({ types: t.schema.fields.map((f) => `${f.name}: ${f.type}`), rows: JSON.stringify(t.toArray(), (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)) });
      t.release();
    }
    assert.deepEqual(results[1], results[0], 'the same schema and values either way');
    assert.equal(results[0]!.types.length, 16, String(results[0]!.types));
    assert.match(results[0]!.rows, /"p":null/, 'a NULL read as null');
  });

  test('statementOptions: adbc.postgresql.use_copy false on every statement, set once as it is made, the same results as with COPY', async () => {
    const sql = `SELECT 1::int2 AS a, 3::int8 AS c, 2.5::float8 AS e, 'x'::text AS f, true AS h, '2024-05-06'::date AS i,
      '2024-05-06 07:08:09.123456'::timestamp AS j, '12.345'::numeric AS l, '{1,2,3}'::int4[] AS n, NULL::int4 AS p`;
    const results: string[] = [];
    for (const statementOptions of [undefined, { 'adbc.postgresql.use_copy': 'false' }]) {
      await using db = await AdbcDatabase.open({ ...POSTGRESQL.options(server.uri), statementOptions });
      await using conn = await db.connect();
      const calls: string[] = [];
      logDriverCalls((f) => calls.push(f));
      try {
        for (let i = 0; i < 2; i++) {
          const t = await conn.query(sql);
          results.push(JSON.stringify([t.schema.fields.map(String), t.toArray()], (_, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)));
          t.release();
        }
      } finally {
        logDriverCalls(undefined);
      }
      // Once per statement made: the second query reuses the cached statement, options and all.
      assert.equal(calls.filter((f) => f === 'StatementSetOption').length, statementOptions ? 1 : 0, calls.join(' '));
    }
    assert.equal(new Set(results).size, 1, 'the same schema and values with and without COPY');
  });

  test('restarted under load: the loops get typed errors, broken connections are discarded, every loop recovers', async () => {
    const db = new AdbcDatabase(POSTGRESQL.options(server.uri));
    const pool = db.pool({ max: 4 });
    const errors: unknown[] = [];
    let ok = 0;
    let stop = false;
    let restarted = false;
    let okAfterRestart = 0;
    const loop = async (k: number): Promise<void> => {
      while (!stop) {
        try {
          const t = await pool.query(`SELECT ${k} + i AS v FROM generate_series(1, 100) AS g(i)`);
          const v = t.getChild('v')!;
          assert.equal(t.numRows, 100);
          assert.equal(Number(v.get(99)), k + 100);
          t.release();
          ok++;
          if (restarted) okAfterRestart++;
        } catch (e) {
          errors.push(e);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    };
    try {
      const loops = Array.from({ length: 8 }, (_, k) => loop(k));
      const warm = Date.now() + 30_000;
      while (ok < 40 && Date.now() < warm) await new Promise((r) => setTimeout(r, 10));
      assert.ok(ok >= 40, `the loops ran before the restart (${ok} queries; errors: ${errors.slice(0, 3).map(String).join('; ')})`);
      server.restart();
      restarted = true;
      const deadline = Date.now() + 30_000;
      while (okAfterRestart < 80 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      stop = true;
      await Promise.all(loops);
      assert.ok(okAfterRestart >= 80, `the loops recovered after the restart (${okAfterRestart} queries since)`);
      assert.ok(errors.length > 0, 'the restart was seen');
      for (const e of errors) assert.ok(e instanceof AdbcError, `a typed error, got ${String(e)}`);
      assert.ok(pool.totalCount <= 4);
      // Every connection the pool has now answers: the broken ones were not handed out again.
      const conns: AdbcConnection[] = [];
      for (let i = 0; i < pool.totalCount; i++) conns.push(await pool.connect());
      for (const c of conns) assert.equal(Number((await c.query('SELECT 1 AS one')).getChild('one')!.get(0)), 1);
      for (const c of conns) c.release();
    } finally {
      stop = true;
      await pool.close();
      await db.close();
    }
    assert.equal(db.released, true);
    await nothingLive();
  });

  test('the call log: connect, queries, a prepared query, a commit, metadata: every blocking call off the JS thread', async () => {
    await assertBlockingCallsOffThread(POSTGRESQL, server.uri);
  });

  test('the statement cache and a schema changed by another connection: at most one failure, then the new shape', async () => {
    const db = new AdbcDatabase(POSTGRESQL.options(server.uri));
    const a = await db.connect();
    const b = await db.connect();
    try {
      await a.execute('CREATE TABLE shape (x INTEGER)');
      await a.execute('INSERT INTO shape VALUES (1)');
      const cols = async (): Promise<string[]> => {
        const t = await a.query('SELECT * FROM shape WHERE x > $1', tableFromArrays({ p: Int32Array.of(0) }));
        const names = t.schema.fields.map((f) => f.name);
        t.release();
        return names;
      };
      assert.deepEqual(await cols(), ['x']);
      assert.deepEqual(await cols(), ['x']); // from the cache
      await b.execute('ALTER TABLE shape ADD COLUMN y INTEGER');
      let failures = 0;
      let got: string[] = [];
      for (let i = 0; i < 2 && got.length !== 2; i++) {
        try {
          got = await cols();
        } catch (e) {
          assert.ok(e instanceof AdbcError, `a typed error, got ${String(e)}`);
          failures++;
        }
      }
      assert.deepEqual(got, ['x', 'y'], 'the new column within two calls');
      assert.ok(failures <= 1);
    } finally {
      await a.close();
      await b.close();
      await db.close();
    }
  });

  test('an abort of a running query (pg_sleep) cancels it on the server and rejects at once; the connection serves the next query', async () => {
    const db = new AdbcDatabase(POSTGRESQL.options(server.uri));
    const pool = db.pool({ max: 1 });
    try {
      for (const run of [
        (signal: AbortSignal) => pool.query(`SELECT pg_sleep(${SLOW_S})`, undefined, { signal }),
        (signal: AbortSignal) => pool.execute(`SELECT pg_sleep(${SLOW_S})`, undefined, { signal }),
        (signal: AbortSignal) => pool.queryStream(`SELECT pg_sleep(${SLOW_S})`, undefined, { signal }),
      ]) {
        const start = Date.now();
        const e = await rejection(run(AbortSignal.timeout(200)));
        const took = Date.now() - start;
        assert.ok(e instanceof DOMException && e.name === 'TimeoutError', `the signal's reason, got ${String(e)}`);
        assert.ok(took < (SLOW_S * 1000) / 2, `rejected after ${took} ms, before the query would end`);
        // The cancelled statement is released once the driver returns; the connection then serves this one.
        const t = await pool.query('SELECT 42 AS answer');
        assert.equal(Number(t.getChild('answer')!.get(0)), 42);
        assert.ok(Date.now() - start < (SLOW_S * 1000) / 2, 'the server stopped the sleep: the next query did not wait for it');
        t.release();
      }
    } finally {
      await pool.close();
      await db.close();
    }
    await nothingLive();
  });

  test('driver calls run on the package\'s own threads, as many as the calls in flight: eight sleeping queries leave libuv\'s pool to node:fs', { skip: workersSkip() }, async () => {
    // docs/adbc.md, "What runs where". On koffi's async form (libuv's pool, 4 threads) only four of the
    // eight would run at once, and a file read would wait behind them.
    const pool8 = nativeWorkers()!;
    const db = new AdbcDatabase(POSTGRESQL.options(server.uri));
    const pool = db.pool({ max: 8 });
    try {
      const leases = await Promise.all(Array.from({ length: 8 }, () => pool.connect()));
      for (const c of leases) c.release();
      let slept = 0;
      const sleeps = Array.from({ length: 8 }, () => pool.query(`SELECT pg_sleep(${SLOW_S / 2}) AS s`).then((t) => {
        t.release();
        slept++;
      }));
      const busy = (): number => pool8.stats().threads - pool8.stats().idle;
      const deadline = Date.now() + (SLOW_S * 1000) / 4;
      while (busy() < 8 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.ok(busy() >= 8, `eight threads in the driver at once (${busy()} busy: ${JSON.stringify(pool8.stats())})`);
      // libuv's threads are free meanwhile: reads on them finish while every query still sleeps.
      const files = await Promise.all(Array.from({ length: 8 }, () => readFile(new URL(import.meta.url))));
      assert.equal(slept, 0, 'the reads finished before any sleep ended');
      assert.ok(files.every((f) => f.byteLength > 0));
      await Promise.all(sleeps);
      assert.equal(slept, 8);
    } finally {
      await pool.close();
      await db.close();
    }
    await nothingLive();
  });
});

describe('aborts: readers, ingestion, statements, and an aborted signal starts nothing (DuckDB)', { skip: DUCKDB.missing }, () => {
  test('an abort in the middle of a for await ends the loop with the reason and releases the stream', async () => {
    const db = new AdbcDatabase(DUCKDB.options());
    const conn = await db.connect();
    try {
      const ac = new AbortController();
      const reader = await conn.queryStream('SELECT range AS i FROM range(1000000)', undefined, { signal: ac.signal });
      let batches = 0;
      const e = await rejection((async () => {
        for await (const b of reader) {
          assert.ok(b.numRows > 0);
          if (++batches === 2) ac.abort();
        }
      })());
      assert.ok(isAbort(e), `got ${String(e)}`);
      assert.equal(batches, 2);
      assert.equal(reader.released, true);
      assert.ok(isAbort(await rejection(reader.toTableAsync())), 'an aborted reader gives the reason');
      // The connection is free again.
      assert.equal(Number((await conn.query('SELECT 3 AS x')).getChild('x')!.get(0)), 3);
    } finally {
      await conn.close();
      await db.close();
    }
    await nothingLive();
  });

  test('an abort of a running query interrupts it (AdbcStatementCancel): the connection serves the next query at once', async () => {
    const db = new AdbcDatabase(DUCKDB.options());
    const conn = await db.connect();
    try {
      // 10^10 products: minutes of work, far past the bound.
      const start = Date.now();
      const e = await rejection(conn.query('SELECT sum(a.range * b.range) FROM range(100000) a, range(100000) b', undefined, { signal: AbortSignal.timeout(200) }));
      assert.ok(e instanceof DOMException && e.name === 'TimeoutError', `got ${String(e)}`);
      const t = await conn.query('SELECT 5 AS five');
      assert.equal(Number(t.getChild('five')!.get(0)), 5);
      t.release();
      assert.ok(Date.now() - start < (SLOW_S * 1000) / 2, 'the interrupted query did not hold the connection');
    } finally {
      await conn.close();
      await db.close();
    }
    await nothingLive();
  });

  test('an aborted signal starts nothing: no driver call is made', async () => {
    const db = new AdbcDatabase(DUCKDB.options());
    const conn = await db.connect();
    const calls: string[] = [];
    try {
      const signal = AbortSignal.abort();
      logDriverCalls((f) => calls.push(f));
      for (const p of [
        conn.query('SELECT 1', undefined, { signal }),
        conn.queryStream('SELECT 1', undefined, { signal }),
        conn.execute('CREATE TABLE never (x INTEGER)', undefined, { signal }),
        conn.ingest('never2', tableFromArrays({ x: Int32Array.of(1) }), { signal }),
        conn.executePartitions('SELECT 1', undefined, { signal }),
        conn.readPartition(new Uint8Array(1), { signal }),
        conn.readPartitions([new Uint8Array(1)], { signal }),
      ]) assert.ok(isAbort(await rejection(p)));
      logDriverCalls(undefined);
      assert.deepEqual(calls, []);
      const t = await conn.query("SELECT count(*) AS n FROM information_schema.tables WHERE table_name IN ('never', 'never2')");
      assert.equal(Number(t.getChild('n')!.get(0)), 0, 'nothing was created');
      t.release();
      await assert.rejects(conn.query('SELECT 1', undefined, { signal: 'nope' as unknown as AbortSignal }), /options.signal must be an AbortSignal/);
    } finally {
      logDriverCalls(undefined);
      await conn.close();
      await db.close();
    }
  });

  test('statement execution takes a signal too', async () => {
    const db = new AdbcDatabase(DUCKDB.options());
    const conn = await db.connect();
    try {
      await using stmt = await conn.createStatement();
      await stmt.setSqlQuery('SELECT 1 AS one');
      assert.ok(isAbort(await rejection(stmt.executeQuery({ signal: AbortSignal.abort() }))));
      assert.ok(isAbort(await rejection(stmt.executeUpdate({ signal: AbortSignal.abort() }))));
      const reader = await stmt.executeQuery({ signal: new AbortController().signal });
      assert.equal(Number(reader.toTable().getChild('one')!.get(0)), 1);
    } finally {
      await conn.close();
      await db.close();
    }
  });
});

describe('Flight SQL: an abort of a slow query on a remote server', { skip: flightMissing }, () => {
  let server: FlightSqlServer;
  before(async () => {
    server = await startFlightSql();
  });
  after(async () => {
    await server?.kill();
  });

  test('a query the server takes long over is rejected at once; nothing stays live', async () => {
    const db = new AdbcDatabase(FLIGHTSQL.options(server.uri));
    const conn = await db.connect();
    try {
      // SQLite counts to 10^9 one row at a time: far longer than the bound below.
      const slow = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000000) SELECT count(*) AS n FROM c';
      const start = Date.now();
      const e = await rejection(conn.query(slow, undefined, { signal: AbortSignal.timeout(300) }));
      assert.ok(e instanceof DOMException && e.name === 'TimeoutError', `got ${String(e)}`);
      assert.ok(Date.now() - start < (SLOW_S * 1000) / 2, 'rejected before the query could end');
    } finally {
      await conn.close();
      await db.close();
    }
    // The driver's call returns once its cancel reaches it; then the statement and the connection go.
    await collectUntil(() => db.released);
    assert.equal(db.released, true, 'everything released once the cancelled call returned');
    await nothingLive();
  });
});

/**
 * Every driver call of a connection's life (connect, a query, a prepared query, a transaction, metadata),
 * by name through the call log: those that may block (parse and plan, I/O, locks the driver's threads hold)
 * never run on the JS thread.
 */
async function assertBlockingCallsOffThread(spec: DriverSpec, uri?: string): Promise<void> {
  const log: [string, CallThread][] = [];
  logDriverCalls((f, thread) => log.push([f, thread]));
  const db = await AdbcDatabase.open(spec.options(uri));
  const conn = await db.connect();
  try {
    (await conn.query('SELECT 1 AS i UNION ALL SELECT 2')).release();
    (await conn.query(`SELECT CAST(${spec.param(1)} AS INTEGER) + 1 AS x`, tableFromArrays({ p: Int32Array.of(1) }))).release();
    conn.setAutoCommit(false);
    await conn.execute('CREATE TABLE calls_log (x INTEGER)');
    await conn.commit();
    (await conn.getInfo()).release();
    logDriverCalls(undefined);
    const names = new Set(log.map(([f]) => f));
    for (const f of ['DatabaseInit', 'ConnectionInit', 'StatementSetSqlQuery', 'StatementPrepare', 'StatementExecuteQuery', 'ConnectionCommit', 'ConnectionGetInfo']) {
      assert.ok(names.has(f), `${f} was called`);
    }
    const mustBeOff = new Set(['DatabaseInit', 'StatementSetSqlQuery', 'StatementSetSubstraitPlan', 'StatementPrepare', 'StatementExecuteQuery', 'StatementExecutePartitions',
      'ConnectionInit', 'ConnectionCommit', 'ConnectionRollback', 'ConnectionReadPartition', 'ConnectionGetObjects', 'ConnectionGetInfo']);
    const onJs = log.filter(([f, thread]) => thread === 'js' && mustBeOff.has(f)).map(([f]) => f);
    assert.deepEqual(onJs, [], 'no blocking call on the JS thread');
  } finally {
    logDriverCalls(undefined);
    await conn.close();
    await db.close();
  }
}

/** Why the package's worker threads are not under test here, or false. */
function workersSkip(): string | false {
  if (process.platform === 'win32') return 'no FIFOs and no prebuilt worker threads on Windows';
  return nativeWorkers() === null ? `the package's worker threads are not used here: ${nativeWorkersMissing()}` : false;
}

describe('the package\'s own worker threads (DuckDB)', { skip: DUCKDB.missing ?? workersSkip() }, () => {
  test('every thread of libuv\'s pool blocked in node:fs: queries still run', async () => {
    // Each of libuv's threads is held in open(2) of a FIFO that has no writer yet, so nothing that runs
    // on that pool can start. Queries run on the package's threads, and so finish.
    const dir = mkdtempSync(join(tmpdir(), 'arrow-device-fifo-'));
    const fifo = join(dir, 'hold');
    execFileSync('mkfifo', [fifo]);
    const size = Number(process.env.UV_THREADPOOL_SIZE ?? 4) || 4;
    const held = Array.from({ length: size }, () => openAsync(fifo, 'r'));
    const db = await AdbcDatabase.open(DUCKDB.options());
    try {
      const calls = nativeWorkers()!.stats().calls;
      const conn = await db.connect();
      const results = await Promise.all(Array.from({ length: 4 }, async (_, k) => {
        const t = await conn.query(`SELECT sum(range)::BIGINT AS s FROM range(${(k + 1) * 1000})`);
        const v = Number(t.getChild('s')!.get(0));
        t.release();
        return v;
      }));
      assert.deepEqual(results, [1, 2, 3, 4].map((k) => (k * 1000 * (k * 1000 - 1)) / 2));
      assert.ok(nativeWorkers()!.stats().calls > calls, 'the calls ran on the package\'s threads');
      await conn.close();
    } finally {
      // A writer's open wakes every blocked reader (the FIFO then has both ends).
      const w = openSync(fifo, fsConstants.O_WRONLY | fsConstants.O_NONBLOCK);
      for (const h of await Promise.all(held)) await h.close();
      closeSync(w);
      rmSync(dir, { recursive: true, force: true });
      await db.close();
    }
    await nothingLive();
  });
});

describe('where driver calls run (the call log)', { skip: DUCKDB.missing }, () => {
  test('DuckDB: connect, queries, a prepared query, a commit, metadata: every blocking call off the JS thread', async () => {
    await assertBlockingCallsOffThread(DUCKDB);
  });
});

describe('AdbcDatabase.open: the database\'s init on a worker thread', { skip: DUCKDB.missing ?? SQLITE.missing }, () => {
  test('the same database as the constructor, its init off the JS thread; the constructor keeps its init on the JS thread', async () => {
    for (const spec of [DUCKDB, SQLITE]) {
      const log: [string, CallThread][] = [];
      logDriverCalls((f, thread) => log.push([f, thread]));
      let opened: AdbcDatabase | undefined;
      let made: AdbcDatabase | undefined;
      try {
        opened = await AdbcDatabase.open(spec.options());
        const afterOpen = log.splice(0);
        made = new AdbcDatabase(spec.options());
        const afterNew = log.splice(0);
        logDriverCalls(undefined);
        assert.deepEqual(afterOpen.filter(([f]) => f === 'DatabaseInit'), [['DatabaseInit', 'worker']], `${spec.name}: open's init`);
        assert.deepEqual(afterNew.filter(([f]) => f === 'DatabaseInit'), [['DatabaseInit', 'js']], `${spec.name}: the constructor's init`);
        assert.deepEqual(afterOpen.map(([f]) => f), afterNew.map(([f]) => f), `${spec.name}: the same driver calls`);
        const sums: number[] = [];
        for (const db of [opened, made]) {
          await using conn = await db.connect();
          const t = await conn.query('SELECT 20 + 22 AS answer');
          sums.push(Number(t.getChild('answer')!.get(0)));
          t.release();
        }
        assert.deepEqual(sums, [42, 42]);
        assert.equal(opened.driverInfo.library, made.driverInfo.library);
      } finally {
        logDriverCalls(undefined);
        await opened?.close();
        await made?.close();
      }
      assert.equal(opened.released, true);
    }
    await nothingLive();
  });

  test('a failed init rejects with the constructor\'s AdbcError and releases the database; an aborted signal loads nothing', async () => {
    // SQLite's init opens its file: a directory that does not exist fails there, on both paths.
    const options = { ...SQLITE.options(), databaseOptions: { uri: 'file:/nonexistent-dir-of-arrow-device/x.db?mode=rw' } };
    const thrown = (() => {
      try {
        new AdbcDatabase(options);
      } catch (e) {
        return e;
      }
      assert.fail('the constructor should throw');
    })();
    const calls: string[] = [];
    logDriverCalls((f) => calls.push(f));
    try {
      const rejected = await rejection(AdbcDatabase.open(options));
      assert.ok(rejected instanceof AdbcError && thrown instanceof AdbcError, String(rejected));
      assert.equal(rejected.status, thrown.status);
      assert.equal(rejected.message, thrown.message);
      assert.deepEqual(calls.filter((f) => f.startsWith('Database')), ['DatabaseNew', 'DatabaseSetOption', 'DatabaseInit', 'DatabaseRelease']);
      calls.length = 0;
      assert.ok(isAbort(await rejection(AdbcDatabase.open(SQLITE.options(), { signal: AbortSignal.abort() }))));
      assert.deepEqual(calls, [], 'an aborted signal makes no driver call');
      await assert.rejects(AdbcDatabase.open(SQLITE.options(), { signal: 'nope' as unknown as AbortSignal }), /options.signal must be an AbortSignal/);
    } finally {
      logDriverCalls(undefined);
    }
  });

  test('a statement\'s close() and await using release it on a worker thread, after the call its connection runs; closeSync(), using and a query\'s statement not kept on the JS thread', async () => {
    const log: [string, CallThread][] = [];
    const releases = (): [string, CallThread][] => log.filter(([f]) => f === 'StatementRelease');
    await using db = await AdbcDatabase.open({ ...SQLITE.options(), statementCacheSize: 0 });
    await using conn = await db.connect();
    logDriverCalls((f, thread) => log.push([f, thread]));
    try {
      const s1 = await conn.createStatement();
      await s1.close();
      assert.equal(s1.released, true);
      {
        await using _s2 = await conn.createStatement();
      }
      (await conn.createStatement()).closeSync();
      {
        using _s4 = await conn.createStatement();
      }
      assert.deepEqual(releases(), [['StatementRelease', 'worker'], ['StatementRelease', 'worker'], ['StatementRelease', 'js'], ['StatementRelease', 'js']]);
      // The release waits for the call its connection runs (ADBC connections are not thread-safe): SQLite's
      // driver steps this aggregate to its one row inside ExecuteQuery.
      const other = await conn.createStatement();
      const slow = await conn.createStatement();
      await slow.setSqlQuery('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT sum(x) AS s FROM c');
      const order: string[] = [];
      const executing = slow.executeQuery().then((r) => {
        order.push('executeQuery');
        return r;
      });
      assert.ok(await collectUntil(() => log.some(([f]) => f === 'StatementExecuteQuery')), 'the execution started');
      await other.close().then(() => order.push('release'));
      assert.deepEqual(order, ['executeQuery', 'release']);
      const reader = await executing;
      assert.equal((await reader.toTableAsync()).getChild('s')?.get(0), 4500001500000n);
      reader.release();
      await slow.close();
      // Without the cache: a query's statement is let go, and released by the connection's next run on its
      // worker thread, before that run's query (every small query's path: a release of its own off the
      // thread would cost a wake-up of the JS thread); an ingestion's and a partitioned execution's off it.
      log.length = 0;
      (await conn.query('SELECT 1 AS one')).release();
      // Where there are no runs (no native library, ARROW_DEVICE_ADBC_RUN=0), on the JS thread at once.
      const viaRun = queryRun() !== null;
      assert.deepEqual(releases(), viaRun ? [] : [['StatementRelease', 'js']], 'let go, not released yet');
      await conn.execute('CREATE TABLE released_off (x INTEGER)');
      const calls = (): string[] => log.map(([f, thread]) => `${f} ${thread}`).filter((f) => /^Statement(Release|ExecuteQuery)/.test(f));
      assert.deepEqual(calls(), viaRun
        ? ['StatementExecuteQuery worker', 'StatementRelease worker', 'StatementExecuteQuery worker']
        : ['StatementExecuteQuery worker', 'StatementRelease js', 'StatementExecuteQuery worker', 'StatementRelease js']);
      log.length = 0;
      assert.equal(await conn.ingest('released_off', tableFromArrays({ x: Int32Array.of(1, 2) }), { mode: IngestMode.Append }), 2);
      assert.deepEqual(releases(), viaRun ? [['StatementRelease', 'worker'], ['StatementRelease', 'worker']] : [['StatementRelease', 'worker']],
        'the CREATE TABLE\'s (by the ingestion\'s run), then the ingestion\'s own');
      // A database's close() waits for a connection's release that is running.
      const db2 = await AdbcDatabase.open(SQLITE.options());
      const c2 = await db2.connect();
      const closingC2 = c2.close();
      await db2.close();
      assert.equal(db2.released, true, 'released after its connection\'s release returned');
      await closingC2;
    } finally {
      logDriverCalls(undefined);
    }
  });

  test('a statement closed before its reader, its connection open: released on the JS thread when the reader is, so a synchronous call right after runs; a close while a call waits its turn waits for that call', async () => {
    const log: [string, CallThread][] = [];
    const releases = (): [string, CallThread][] => log.filter(([f]) => f === 'StatementRelease' || f === 'ConnectionRelease');
    await using db = await AdbcDatabase.open(SQLITE.options());
    const conn = await db.connect();
    logDriverCalls((f, thread) => log.push([f, thread]));
    try {
      const stmt = await conn.createStatement();
      await stmt.setSqlQuery('SELECT 1 AS one');
      const reader = await stmt.executeQuery();
      await stmt.close(); // resolves at once: the reader keeps it
      assert.equal(stmt.released, false);
      reader.release();
      assert.equal(stmt.released, true);
      conn.setAutoCommit(true); // a synchronous call: nothing of this connection runs on a worker thread
      assert.deepEqual(releases(), [['StatementRelease', 'js']]);
      // Queued, not yet running: the close waits for the call (the release must not free what it uses).
      log.length = 0;
      const s2 = await conn.createStatement();
      await s2.setSqlQuery('CREATE TABLE queued_close (x INTEGER)');
      const updating = s2.executeUpdate();
      s2.closeSync();
      assert.equal(s2.released, false, 'waits for the queued call');
      await updating;
      assert.equal(s2.released, true);
      const s3 = await conn.createStatement();
      const setting = s3.setOptions({ 'adbc.sqlite.query.batch_rows': '10' });
      s3.closeSync();
      assert.equal(s3.released, false, 'waits for the queued option');
      await setting;
      assert.equal(s3.released, true);
      conn.setAutoCommit(false);
      const committing = conn.commit();
      const closing = conn.close();
      await committing;
      await closing;
      assert.equal(conn.released, true);
      assert.deepEqual(log.filter(([f]) => f === 'StatementExecuteQuery' || f === 'StatementSetOption' || f === 'ConnectionCommit' || f === 'StatementRelease' || f === 'ConnectionRelease').map(([f]) => f),
        ['StatementExecuteQuery', 'StatementRelease', 'StatementSetOption', 'StatementRelease', 'ConnectionCommit', 'ConnectionRelease']);
    } finally {
      logDriverCalls(undefined);
      conn.closeSync();
    }
  });

  test('closeSync(), a reader\'s release() and a query\'s statement while another call of the connection runs on a worker thread: released after that call returns, in the connection\'s order; a released result lets its statement execute again at once', async () => {
    // SQLite's connections are not thread-safe: a statement finalized beside another one's step is a data race.
    const log: [string, CallThread][] = [];
    const releases = (): [string, CallThread][] => log.filter(([f]) => f === 'StatementRelease');
    await using db = await AdbcDatabase.open({ ...SQLITE.options(), statementCacheSize: 0 });
    await using conn = await db.connect();
    const idle = await conn.createStatement();
    const open = await conn.createStatement();
    await open.setSqlQuery('SELECT 1 AS one');
    const reader = await open.executeQuery();
    open.closeSync(); // kept by its reader
    const again = await conn.createStatement();
    await again.setSqlQuery('SELECT 2 AS two');
    const first = await again.executeQuery();
    logDriverCalls((f, thread) => log.push([f, thread]));
    try {
      let returned = false;
      const slow = conn.query('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10000000) SELECT sum(x) AS s FROM c').then((t) => {
        returned = true;
        return t;
      });
      assert.ok(await collectUntil(() => log.some(([f]) => f === 'StatementExecuteQuery')), 'the execution started');
      idle.closeSync();
      reader.release();
      // The result counts as released at once: the statement executes again, after the stream's release.
      first.release();
      const rerun = again.executeQuery();
      assert.equal(returned, false, 'the slow query still runs');
      assert.deepEqual(releases(), [], 'nothing released beside the running call');
      assert.equal(reader.released, false, 'the stream waits too');
      const t = await slow;
      assert.equal(t.getChild('s')?.get(0), 50000005000000n);
      t.release();
      const second = await rerun;
      assert.equal((await second.toTableAsync()).getChild('two')?.get(0), 2n);
      second.release();
      again.closeSync();
      assert.equal(reader.released, true);
      assert.equal(first.released, true);
      // The two waiting statements after the slow one's execution, then the execution queued behind them,
      // then the last one closed: on the JS thread. The slow query's own statement was let go: the next
      // query's run releases it, on its worker thread (or, without runs, it went on the JS thread too).
      const viaRun = queryRun() !== null;
      assert.deepEqual(releases(), Array(viaRun ? 3 : 4).fill(['StatementRelease', 'js']));
      const order = log.map(([f]) => f).filter((f) => f === 'StatementExecuteQuery' || f === 'StatementRelease');
      assert.deepEqual(order.slice(0, 4), ['StatementExecuteQuery', 'StatementRelease', 'StatementRelease', 'StatementExecuteQuery']);
      if (viaRun) {
        (await conn.query('SELECT 3 AS three')).release();
        assert.deepEqual(releases().at(-1), ['StatementRelease', 'worker']);
      }
    } finally {
      logDriverCalls(undefined);
    }
  });

  test('a statement let go behind its reader is released after the reader\'s stream, even with a run queued before that release (found in review)', async () => {
    await using db = await AdbcDatabase.open(SQLITE.options());
    await using conn = await db.connect();
    (await conn.query('SELECT 2 AS b')).release(); // cached: its next query queues its run at once
    const first = await conn.queryStream('SELECT 1 AS a'); // cached, its result open
    const second = await conn.queryStream('SELECT 1 AS a'); // a statement of its own, let go behind its reader
    const log: string[] = [];
    let streamReleasedFirst = true;
    logDriverCalls((f) => {
      log.push(f);
      if (f === 'StatementRelease' && !second.released) streamReleasedFirst = false;
    });
    try {
      const slow = conn.query('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT sum(x) AS s FROM c');
      assert.ok(await collectUntil(() => log.includes('StatementExecuteQuery')), 'the slow execution started');
      const queued = conn.query('SELECT 2 AS b'); // its run waits behind the slow one
      await new Promise((resolve) => setImmediate(resolve)); // long enough for it to be queued
      second.release(); // the stream's release waits behind that run
      (await slow).release();
      (await queued).release();
      first.release();
      (await conn.query('SELECT 3 AS c')).release(); // a later run takes what was let go
      assert.equal(second.released, true);
      assert.equal(streamReleasedFirst, true, 'no statement released while the reader\'s stream was live');
    } finally {
      logDriverCalls(undefined);
    }
  });

  test('ARROW_DEVICE_WORKERS unreadable: the database is refused before any handle exists (INVALID_ARGUMENT naming it)', { skip: childSkip }, () => {
    const out = childValue<string[]>(`
      import { AdbcDatabase } from '@/src/adbc/index.js';
      import { SQLITE } from '@/test/adbc/drivers.js';
    `, `
      const out = [];
      try {
        new AdbcDatabase(SQLITE.options());
        out.push('made');
      } catch (e) {
        out.push(e.name + ' ' + e.status + ' ' + e.message);
      }
      out.push(await AdbcDatabase.open(SQLITE.options()).then(() => 'opened', (e) => e.name + ' ' + e.status + ' ' + e.message));
      return out;
    `, 60_000, { ARROW_DEVICE_WORKERS: 'four' });
    assert.equal(out.length, 2);
    for (const line of out) assert.match(line, new RegExp(`^AdbcError ${AdbcStatus.INVALID_ARGUMENT} AdbcDatabase: ARROW_DEVICE_WORKERS: "four": expected 0`));
  });

  test('close() releases the database on a worker thread, after its connections and before its driver; closeSync() on the JS thread', async () => {
    // SQLite's driver has a release function (DuckDB's has none), so the driver's release is in the log.
    const log: [string, CallThread][] = [];
    const releases = (): [string, CallThread][] => log.filter(([f]) => f === 'DatabaseRelease' || f === 'ConnectionRelease' || f === 'release');
    logDriverCalls((f, thread) => log.push([f, thread]));
    try {
      const db = await AdbcDatabase.open(SQLITE.options());
      const conn = await db.connect();
      // A connection open: close() resolves at once, and the connection's release starts the database's.
      await db.close();
      assert.deepEqual(releases(), []);
      assert.equal(db.released, false);
      await conn.close();
      await collectUntil(() => log.some(([f]) => f === 'release'));
      assert.deepEqual(releases(), [['ConnectionRelease', 'worker'], ['DatabaseRelease', 'worker'], ['release', 'js']]);
      assert.equal(db.released, true);
      log.length = 0;
      // Nothing under it: close() resolves once the release has returned.
      const db2 = await AdbcDatabase.open(SQLITE.options());
      await db2.close();
      assert.deepEqual(releases(), [['DatabaseRelease', 'worker'], ['release', 'js']]);
      await db2.close(); // idempotent
      log.length = 0;
      const db3 = await AdbcDatabase.open(SQLITE.options());
      db3.closeSync();
      assert.deepEqual(releases(), [['DatabaseRelease', 'js'], ['release', 'js']]);
      log.length = 0;
      {
        await using db4 = await AdbcDatabase.open(SQLITE.options());
        assert.equal(db4.released, false);
      }
      assert.deepEqual(releases(), [['DatabaseRelease', 'worker'], ['release', 'js']]);
    } finally {
      logDriverCalls(undefined);
    }
  });

  test('a connection\'s close() releases it and its cached statements on a worker thread, the statements first; closeSync() and using on the JS thread; a pool\'s close waits for its releases', async () => {
    const log: [string, CallThread][] = [];
    const releases = (): [string, CallThread][] => log.filter(([f]) => f === 'ConnectionRelease' || f === 'StatementRelease');
    await using db = await AdbcDatabase.open(SQLITE.options());
    logDriverCalls((f, thread) => log.push([f, thread]));
    try {
      // A query leaves its statement in the connection's cache: released first, then the connection, both off the thread.
      const conn = await db.connect();
      (await conn.query('SELECT 1 AS one')).release();
      log.length = 0;
      await conn.close();
      assert.deepEqual(releases(), [['StatementRelease', 'worker'], ['ConnectionRelease', 'worker']]);
      assert.equal(conn.released, true);
      await conn.close(); // idempotent
      assert.deepEqual(releases(), [['StatementRelease', 'worker'], ['ConnectionRelease', 'worker']]);
      // A reader open: close() resolves at once, and the reader's release starts the connection's, off the thread.
      log.length = 0;
      const c2 = await db.connect();
      const reader = await c2.queryStream('SELECT 2 AS two');
      await c2.close();
      assert.deepEqual(releases(), []);
      reader.release();
      assert.ok(await collectUntil(() => releases().some(([f]) => f === 'ConnectionRelease')));
      assert.deepEqual(releases(), [['StatementRelease', 'worker'], ['ConnectionRelease', 'worker']]);
      // closeSync() while a statement's release runs off the thread: the connection's follows it.
      log.length = 0;
      const c3 = await db.connect();
      const s3 = await c3.createStatement();
      const closingS3 = s3.close();
      c3.closeSync();
      assert.equal(c3.released, false, 'kept by its statement\'s release');
      await closingS3;
      assert.equal(c3.released, true);
      assert.deepEqual(releases(), [['StatementRelease', 'worker'], ['ConnectionRelease', 'js']]);
      // closeSync() and using: on the JS thread; await using: off it.
      log.length = 0;
      (await db.connect()).closeSync();
      {
        using _c = await db.connect();
      }
      {
        await using _c = await db.connect();
      }
      assert.deepEqual(releases(), [['ConnectionRelease', 'js'], ['ConnectionRelease', 'js'], ['ConnectionRelease', 'worker']]);
      // A pool: a pooled connection's close() gives it back (no release); the pool's close releases each
      // connection off the thread and resolves once every release has returned.
      log.length = 0;
      const pool = db.pool({ max: 2 });
      const [a, b] = await Promise.all([pool.connect(), pool.connect()]);
      await a.close();
      b.release();
      assert.deepEqual(releases(), [], 'given back, not released');
      await pool.close();
      assert.deepEqual(releases(), [['ConnectionRelease', 'worker'], ['ConnectionRelease', 'worker']]);
      assert.equal(a.released && b.released, true);
    } finally {
      logDriverCalls(undefined);
    }
  });

  test('an abort while the init runs rejects at once with the reason; the database is released when the init returns', async () => {
    const calls: string[] = [];
    logDriverCalls((f) => calls.push(f));
    try {
      const controller = new AbortController();
      const opening = AdbcDatabase.open(DUCKDB.options(), { signal: controller.signal });
      controller.abort();
      assert.ok(isAbort(await rejection(opening)));
      await collectUntil(() => calls.includes('DatabaseRelease'));
      assert.deepEqual(calls.filter((f) => f.startsWith('Database')), ['DatabaseNew', 'DatabaseSetOption', 'DatabaseInit', 'DatabaseRelease']);
    } finally {
      logDriverCalls(undefined);
    }
  });
});

/** The driver calls `f` makes, by name. */
async function callsOf(f: () => Promise<void>): Promise<string[]> {
  const calls: string[] = [];
  logDriverCalls((name) => calls.push(name));
  try {
    await f();
  } finally {
    logDriverCalls(undefined);
  }
  return calls;
}

const sumOf = (t: { getChild(n: string): { get(i: number): unknown } | null }): number => Number(t.getChild('s')!.get(0));

describe('the statement cache (DuckDB, SQLite)', { skip: DUCKDB.missing ?? SQLITE.missing }, () => {
  for (const spec of [DUCKDB, SQLITE]) {
    test(`${spec.name}: a repeated text reuses its statement (no New, SetSqlQuery, Prepare); same results as uncached; off with statementCacheSize: 0`, async () => {
      const run = async (size: number | undefined): Promise<{ sums: number[]; second: string[] }> => {
        const db = new AdbcDatabase({ ...spec.options(), statementCacheSize: size });
        const conn = await db.connect();
        try {
          await conn.execute('CREATE TABLE t (x INTEGER)');
          await conn.execute('INSERT INTO t VALUES (1), (2), (3), (4)');
          const sums: number[] = [];
          const q = async (k: number): Promise<void> => {
            const t = await conn.query(`SELECT sum(x) AS s FROM t WHERE x > ${spec.param(1)}`, tableFromArrays({ k: Int32Array.of(k) }));
            sums.push(sumOf(t));
            t.release();
            const u = await conn.query('SELECT sum(x) AS s FROM t');
            sums.push(sumOf(u));
            u.release();
          };
          await q(0);
          const second = await callsOf(() => q(2));
          await q(3);
          return { sums, second };
        } finally {
          await conn.close();
          await db.close();
        }
      };
      const cached = await run(undefined);
      const uncached = await run(0);
      assert.deepEqual(cached.sums, [10, 10, 7, 10, 4, 10]);
      assert.deepEqual(uncached.sums, cached.sums, 'the same results cached and uncached');
      for (const f of ['StatementNew', 'StatementSetSqlQuery', 'StatementPrepare']) {
        assert.ok(!cached.second.includes(f), `cached: no ${f} the second time (${cached.second.join(', ')})`);
        assert.ok(uncached.second.includes(f), `uncached: ${f} every time`);
      }
      assert.ok(cached.second.includes('StatementBind') && cached.second.includes('StatementExecuteQuery'), 'one batch of parameters bound as an array');
    });

    test(`${spec.name}: parameters of one batch (AdbcStatementBind) and of several (AdbcStatementBindStream) give the same rows`, async () => {
      const db = new AdbcDatabase(spec.options());
      const conn = await db.connect();
      try {
        await conn.execute('CREATE TABLE b (k INTEGER, v TEXT)');
        const rows = tableFromArrays({ k: Int32Array.of(1, 2, 3, 4), v: ['a', 'b', 'c', 'd'] });
        const insert = `INSERT INTO b VALUES (${spec.param(1)}, ${spec.param(2)})`;
        const one = (i: number): ReturnType<typeof rows.slice> => rows.slice(i, i + 1);
        // DuckDB's driver binds one row per execution: one row each time, as a Table of one batch (bound as an
        // array) and as an iterable of that batch (bound as a stream).
        const asArray = await callsOf(async () => {
          for (const i of [0, 1]) assert.equal(await conn.execute(insert, one(i)), 1);
        });
        const asStream = await callsOf(async () => {
          for (const i of [2, 3]) await conn.execute(insert, [...one(i).batches]);
        });
        assert.ok(asArray.includes('StatementBind') && !asArray.includes('StatementBindStream'), asArray.join(', '));
        assert.ok(asStream.includes('StatementBindStream') && !asStream.includes('StatementBind'), asStream.join(', '));
        const t = await conn.query('SELECT k, v FROM b ORDER BY k');
        assert.deepEqual([...t.getChild('k')!].map(Number), [1, 2, 3, 4]);
        assert.deepEqual([...t.getChild('v')!], ['a', 'b', 'c', 'd']);
        t.release();
      } finally {
        await conn.close();
        await db.close();
      }
      await nothingLive();
    });
  }

  test('what a cached statement holds (its bound parameters) is released by close(), without the collector', async () => {
    for (const spec of [DUCKDB, SQLITE]) {
      const db = new AdbcDatabase(spec.options());
      const conn = await db.connect();
      const before = accounting().liveExports;
      const t = await conn.query(`SELECT CAST(${spec.param(1)} AS INTEGER) + 1 AS x`, tableFromArrays({ p: Int32Array.of(1) }));
      t.release();
      const held = accounting().liveExports - before;
      // DuckDB's driver keeps the array bound last until the next bind or the statement's release; SQLite's
      // releases it after the execution.
      if (spec === DUCKDB) assert.ok(held > 0, `duckdb: the driver holds the parameters bound last (${held} export(s))`);
      else assert.equal(held, 0, 'sqlite: the driver released the parameters after the execution');
      await conn.close();
      await db.close();
      // No collection in between: the release is close()'s, not the garbage collector's.
      assert.equal(accounting().liveExports - before, 0, `${spec.name}: the ${held} export(s) the cached statement held are released by close()`);
      assert.equal(db.released, true);
    }
  });

  test('a schema-changing statement empties the cache: the next query sees the new column', async () => {
    const db = new AdbcDatabase(DUCKDB.options());
    const conn = await db.connect();
    try {
      await conn.execute('CREATE TABLE w (a INTEGER)');
      await conn.execute('INSERT INTO w VALUES (1)');
      const cols = async (): Promise<string[]> => {
        const t = await conn.query('SELECT * FROM w');
        const names = t.schema.fields.map((f) => f.name);
        t.release();
        return names;
      };
      assert.deepEqual(await cols(), ['a']);
      const again = await callsOf(async () => void (await cols()));
      assert.ok(!again.includes('StatementNew'), 'cached before the DDL');
      await conn.execute('ALTER TABLE w ADD COLUMN b INTEGER');
      const after = await callsOf(async () => assert.deepEqual(await cols(), ['a', 'b']));
      assert.ok(after.includes('StatementNew') && after.includes('StatementSetSqlQuery'), 'prepared anew after the DDL');
      assert.throws(() => new AdbcDatabase({ ...DUCKDB.options(), statementCacheSize: -1 }), /statementCacheSize must be an integer from 0/);
      assert.throws(() => new AdbcDatabase({ ...DUCKDB.options(), statementOptions: { k: 1 as unknown as string } }), /statementOptions\["k"\] must be a string, got number/);
    } finally {
      await conn.close();
      await db.close();
    }
    await nothingLive();
  });

  test('statements a query lets go (the cache full, emptied before a DDL statement, a failed call) are released by the connection\'s next run on its worker thread, before its query; what no run took by close(), or on the JS thread by closeSync() and the collector', { skip: queryRun() === null ? `no native runs here: ${queryRunMissing}` : false }, async () => {
    const log: [string, CallThread][] = [];
    const calls = (): string[] => log.map(([f, thread]) => `${f} ${thread}`).filter((f) => /^Statement(Release|ExecuteQuery)/.test(f));
    for (const spec of [DUCKDB, SQLITE]) {
      const db = await AdbcDatabase.open({ ...spec.options(), statementCacheSize: 2 });
      const conn = await db.connect();
      logDriverCalls((f, thread) => log.push([f, thread]));
      try {
        for (const n of [1, 2]) (await conn.query(`SELECT ${n} AS n`)).release();
        assert.deepEqual(calls(), ['StatementExecuteQuery worker', 'StatementExecuteQuery worker'], `${spec.name}: both kept`);
        // A third text pushes the first out; the fourth query's run releases it, first.
        log.length = 0;
        (await conn.query('SELECT 3 AS n')).release();
        (await conn.query('SELECT 4 AS n')).release();
        assert.deepEqual(calls(), ['StatementExecuteQuery worker', 'StatementRelease worker', 'StatementExecuteQuery worker'], `${spec.name}: the one pushed out, by the next run`);
        // The fourth pushed the second out. A DDL statement empties the cache (3 and 4) and is not kept itself:
        // its own run releases the three; the next run, the DDL's statement. A failed query's goes the same way.
        log.length = 0;
        await conn.execute('CREATE TABLE let_go (x INTEGER)');
        assert.deepEqual(calls(), [...Array(3).fill('StatementRelease worker'), 'StatementExecuteQuery worker'], `${spec.name}: the cache, by the DDL's own run`);
        log.length = 0;
        await assert.rejects(conn.query('SELECT * FROM no_such_table_here'), AdbcError);
        assert.deepEqual(calls(), ['StatementRelease worker', 'StatementExecuteQuery worker'], `${spec.name}: the DDL's statement, by the failed query's run`);
        // Nothing runs after: close() releases the failed query's statement on a worker thread, before the connection.
        log.length = 0;
        await conn.close();
        assert.deepEqual(log.filter(([f]) => /Release$/.test(f)), [['StatementRelease', 'worker'], ['ConnectionRelease', 'worker']], `${spec.name}: close()`);
        // closeSync(): on the JS thread, before the connection.
        const c2 = await db.connect();
        await c2.execute('CREATE TABLE let_go_2 (x INTEGER)');
        log.length = 0;
        c2.closeSync();
        assert.deepEqual(log.filter(([f]) => /Release$/.test(f)), [['StatementRelease', 'js'], ['ConnectionRelease', 'js']], `${spec.name}: closeSync()`);
        // The collector: a connection dropped with a statement let go is released, the statement first.
        log.length = 0;
        await (async () => {
          const c3 = await db.connect();
          await c3.execute('CREATE TABLE let_go_3 (x INTEGER)');
        })();
        assert.ok(await collectUntil(() => log.some(([f]) => f === 'ConnectionRelease')), `${spec.name}: collected`);
        assert.deepEqual(log.filter(([f]) => /Release$/.test(f)).map(([f]) => f), ['StatementRelease', 'ConnectionRelease'], `${spec.name}: the collector`);
      } finally {
        logDriverCalls(undefined);
        log.length = 0;
        conn.closeSync();
        await db.close();
      }
    }
    await nothingLive();
  });

  test('a failed call drops its statement; a statement whose result is open is not shared', async () => {
    const db = new AdbcDatabase(DUCKDB.options());
    const conn = await db.connect();
    try {
      await conn.execute('CREATE TABLE f (x INTEGER)');
      await conn.execute('INSERT INTO f VALUES (1), (0)');
      // DuckDB's error() raises at execution, on the row x = 0: the statement prepared fine.
      const sql = "SELECT CASE WHEN x = 0 THEN error('boom') ELSE x END AS y FROM f";
      await assert.rejects(conn.query(sql));
      const retry = await callsOf(async () => void (await rejection(conn.query(sql))));
      assert.ok(retry.includes('StatementNew'), 'the failed statement was dropped, not reused');
      // Two readers of one text at once: each its own statement, both read to the end.
      const r1 = await conn.queryStream('SELECT range AS i FROM range(5)');
      const r2 = await conn.queryStream('SELECT range AS i FROM range(5)');
      let n = 0;
      for await (const b of r1) n += b.numRows;
      for await (const b of r2) n += b.numRows;
      assert.equal(n, 10);
    } finally {
      await conn.close();
      await db.close();
    }
    await nothingLive();
  });
});

describe('statementOptions a driver refuses (SQLite)', { skip: SQLITE.missing }, () => {
  test('the call that made the statement rejects with the driver\'s AdbcError for that option, and nothing is left live', async () => {
    await using db = await AdbcDatabase.open({ ...SQLITE.options(), statementOptions: { 'adbc.no_such_option': 'x' } });
    await using conn = await db.connect();
    for (const call of [() => conn.query('SELECT 1 AS s'), () => conn.createStatement(), () => conn.execute('CREATE TABLE t (x INTEGER)')]) {
      await assert.rejects(call(), (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.NOT_IMPLEMENTED && /adbc\.no_such_option/.test(e.message));
    }
    await conn.close();
    await db.close();
    await nothingLive();
  });
});

describe('drop-in: readers are arrow-js readers, and collected batches stay valid with queryOptions { keep: true }', { skip: SQLITE.missing }, () => {
  test('AdbcRecordBatchReader is an arrow-js RecordBatchReader, in types and at run time', async () => {
    const db = new AdbcDatabase(SQLITE.options());
    const conn = await db.connect();
    try {
      // Type level: code written for the official manager takes an arrow-js reader (tsc checks this line).
      const asArrow = async (r: RecordBatchReader): Promise<number> => {
        let n = 0;
        for await (const b of r) n += b.numRows;
        return n;
      };
      const reader: RecordBatchReader = await conn.queryStream('WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT x FROM c');
      assert.ok(reader instanceof RecordBatchReader);
      assert.ok(reader instanceof AdbcRecordBatchReader);
      assert.equal(reader.isSync(), true);
      assert.equal(reader.isStream(), true);
      assert.equal(reader.schema.fields[0]!.name, 'x');
      assert.equal(await asArrow(reader), 5);
      assert.equal(reader.closed, true);
      // arrow-js's own helpers read it: RecordBatchReader.from returns it as it is; toNodeStream streams its batches.
      const again = await conn.queryStream('SELECT 1 AS a UNION ALL SELECT 2');
      assert.equal(RecordBatchReader.from(again), again);
      let rows = 0;
      for await (const b of again.toNodeStream()) rows += (b as RecordBatch).numRows;
      assert.equal(rows, 2);
    } finally {
      await conn.close();
      await db.close();
    }
  });

  test('batches collected from a reader: released by the next step by default, readable after the loop with keep: true', async () => {
    const sql = 'WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5000) SELECT x FROM c';
    const collect = async (db: AdbcDatabase): Promise<RecordBatch[]> => {
      const conn = await db.connect();
      try {
        // A small batch size: several batches.
        const batches: RecordBatch[] = [];
        await using stmt = await conn.createStatement();
        stmt.setOption('adbc.sqlite.query.batch_rows', '1000');
        await stmt.setSqlQuery(sql);
        for await (const b of await stmt.executeQuery()) batches.push(b);
        const viaConn: RecordBatch[] = [];
        for await (const b of await conn.queryStream(sql)) viaConn.push(b);
        return [...batches, ...viaConn];
      } finally {
        await conn.close();
      }
    };
    const bounded = new AdbcDatabase(SQLITE.options());
    const kept = new AdbcDatabase({ ...SQLITE.options(), queryOptions: { keep: true } });
    try {
      const a = await collect(bounded);
      assert.ok(a.length > 2, `several batches (${a.length})`);
      assert.throws(() => a[0]!.getChild('x')!.get(0), /released/, 'the default keeps one batch at a time');
      const b = await collect(kept);
      let sum = 0;
      for (const batch of b) for (const v of batch.getChild('x')!) sum += Number(v);
      assert.equal(sum, 2 * (5000 * 5001) / 2, 'every collected batch readable after the loop');
      for (const batch of b) (batch as { release?: () => void }).release?.();
    } finally {
      await bounded.close();
      await kept.close();
    }
    await nothingLive();
  });
});
