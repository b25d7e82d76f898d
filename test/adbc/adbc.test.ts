/**
 * arrow-device/adbc against four real drivers: DuckDB's, SQLite's,
 * PostgreSQL's and Flight SQL's (the last two against real servers started
 * on the loopback interface: test/adbc/postgres.ts, and arrow-go's example
 * Flight SQL server over SQLite, test/adbc/flightsql.ts). For each: every value of a query, a
 * streamed query read off the JS thread, bound parameters, ingestion of an
 * arrow-js table read back (the types each driver gives, asserted per
 * driver), ingestion from sync and async readers, metadata, transactions,
 * errors with the driver's status, SQLSTATE and details (at execute and in
 * mid-stream), the release order ADBC requires whatever order the caller
 * closes in, cancellation, parameters that bind the same on every driver,
 * partitioned results (Flight SQL; NOT_IMPLEMENTED elsewhere), the ADBC
 * 1.1 option getters, statistics and parameter schemas (NOT_IMPLEMENTED
 * where a driver lacks them); and after
 * every test, failing ones included, nothing left: no import or export
 * live, every database released. What the example Flight SQL server cannot
 * do (bulk ingestion) skips with the reason.
 *
 * A driver that is not installed, or a server that cannot be started (no
 * PostgreSQL, no Flight SQL server built), skips with the reason; `npm run
 * test:adbc` (CI) sets ADBC_REQUIRED=1, which makes that a failure.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, test } from 'node:test';
import { Bool, Float64, Int32, RecordBatchReader, Table, tableFromArrays, tableToIPC, Utf8, vectorFromArray, type Vector } from 'apache-arrow';
import { accounting, isImportReleased, StreamProducerError, type ImportedRecordBatch } from '../../src/index.js';
import { AdbcConnection, AdbcDatabase, AdbcRecordBatchReader, AdbcError, AdbcStatus, InfoCode, IngestMode, ObjectDepth, StatisticKey } from '../../src/adbc/index.js';
import { collectUntil } from '../helpers/gc.js';
import { runtimeArgs } from '../helpers/child.js';
import { DRIVERS, type DriverName, type DriverSpec } from './drivers.js';
import { postgresMissing } from './postgres.js';
import { flightSqlServerMissing } from './flightsql.js';
import { serveDuringSuite } from './servers.js';

const required = process.env.ADBC_REQUIRED === '1';
for (const d of DRIVERS) if (d.missing && required) throw new Error(`ADBC_REQUIRED=1: ${d.missing}`);
const pgMissing = postgresMissing();
if (pgMissing && required) throw new Error(`ADBC_REQUIRED=1: ${pgMissing}`);
const flightMissing = flightSqlServerMissing();
if (flightMissing && required) throw new Error(`ADBC_REQUIRED=1: ${flightMissing}`);
/** Why a test of bulk ingestion cannot run on a driver's test server, or undefined. */
const NO_INGEST: Partial<Record<DriverName, string>> = {
  flightsql: "arrow-go's example Flight SQL server does not implement bulk ingestion (DoPutCommandStatementIngest); the errors test checks its NOT_IMPLEMENTED",
};

/** A column's values as plain JS: integers as numbers, booleans as 0/1 where asked. */
function values(v: Vector | null, bool01 = false): unknown[] {
  assert.ok(v, 'the column exists');
  const out: unknown[] = [];
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v.get(i);
    out.push(typeof x === 'bigint' ? Number(x) : bool01 && typeof x === 'boolean' ? Number(x) : x);
  }
  return out;
}

function sampleTable(): Table {
  return new Table({
    id: vectorFromArray([1, 2, 3, 4, 5], new Int32()),
    name: vectorFromArray(['ada', 'grace', null, 'edsger', 'barbara'], new Utf8()),
    score: vectorFromArray([9.5, null, 7.25, 8, -1.5], new Float64()),
    active: vectorFromArray([true, false, true, null, false], new Bool()),
  });
}

/** The types each driver gives the sample table back: DuckDB and PostgreSQL keep them; SQLite stores integers and booleans as int64. */
const SAMPLE_TYPES: Record<DriverName, string[]> = {
  duckdb: ['id: Int32', 'name: Utf8', 'score: Float64', 'active: Bool'],
  sqlite: ['id: Int64', 'name: Utf8', 'score: Float64', 'active: Int64'],
  postgresql: ['id: Int32', 'name: Utf8', 'score: Float64', 'active: Bool'],
  flightsql: [], // not ingested: NO_INGEST
};

/** A query that fails after rows have streamed. */
const MID_STREAM_ERROR: Record<DriverName, string> = {
  duckdb: "SELECT CASE WHEN range < 500000 THEN range ELSE error('boom at ' || range) END AS x FROM range(1000000)",
  sqlite: 'WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 9999) SELECT CASE WHEN i < 5000 THEN i ELSE abs(-9223372036854775807 - 1) END AS x FROM c',
  postgresql: 'SELECT CASE WHEN i < 50000 THEN i ELSE 1 / (i - i) END AS x FROM generate_series(0, 100000) AS g(i)',
  flightsql: 'WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 9999) SELECT CASE WHEN i < 5000 THEN i ELSE abs(-9223372036854775807 - 1) END AS x FROM c',
};

/** Rejects or throws an AdbcError with `status` from `operation`; returns it. */
async function adbcFailure(f: () => unknown, status: number, operation: string): Promise<AdbcError> {
  const err = await (async () => f())().then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof AdbcError, `${operation}: ${String(err)}`);
  assert.equal(err.operation, operation);
  assert.equal(err.status, status, `${operation}: ${err.message}`);
  assert.ok(err.message.length > 0, `${operation}: a message`);
  return err;
}

/** What each driver's `getParameterSchema` says of `x = <param 1> AND y = <param 2>` after prepare, or undefined: NOT_IMPLEMENTED. */
const PARAMETER_SCHEMA: Record<DriverName, string[] | undefined> = {
  duckdb: ['0: Null', '1: Null'], // positional, types unknown before binding
  sqlite: ['0: Null', '1: Null'],
  postgresql: ['$1: Int32', '$2: Utf8'], // the server's inferred types
  flightsql: undefined, // arrow-go's example server sends no parameter schema with its prepared statement
};

/** Which drivers have statistics (DuckDB's: the row count; PostgreSQL's: pg_stats, approximate only, one schema per call). */
const STATISTICS: Record<DriverName, { dbSchema?: string; exact: boolean } | undefined> = {
  duckdb: { exact: true },
  sqlite: undefined,
  postgresql: { dbSchema: 'public', exact: false },
  flightsql: undefined,
};

let serial = 0;
const unique = (base: string): string => `${base}_${process.pid}_${serial++}`;

for (const spec of DRIVERS) {
  const skip = spec.missing ?? (spec.name === 'postgresql' ? pgMissing : spec.name === 'flightsql' ? flightMissing : undefined);
  describe(`arrow-device/adbc: ${spec.name}`, { skip }, () => {
    const uri = serveDuringSuite(spec);
    const opened: AdbcDatabase[] = [];
    afterEach(async () => {
      // Whatever a test did, failing or not: every database it opened released, nothing live.
      for (const db of opened.splice(0)) await db.close();
      await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
      assert.deepEqual({ imports: accounting().liveImports, exports: accounting().liveExports }, { imports: 0, exports: 0 }, 'nothing left live');
    });

    /** A fresh database and connection of `spec`, closed by afterEach (and checked released by the test that asks). */
    async function open(): Promise<{ db: AdbcDatabase; conn: AdbcConnection }> {
      const db = new AdbcDatabase(spec.options(uri()));
      opened.push(db);
      return { db, conn: await db.connect() };
    }

    /** A streamed query in several batches: PostgreSQL's driver makes 16 MB batches by default, so its hint is made small. */
    async function streamOf(conn: AdbcConnection, sql: string): Promise<AdbcRecordBatchReader> {
      if (spec.name !== 'postgresql') return conn.queryStream(sql);
      const stmt = await conn.createStatement();
      try {
        stmt.setOption('adbc.postgresql.batch_size_hint_bytes', '65536');
        await stmt.setSqlQuery(sql);
        return await stmt.executeQuery();
      } finally {
        await stmt.close(); // released after the reader
      }
    }

    test('a query: every value of a 5,000-row result, zero-copy into an arrow-js Table', async () => {
      const { db, conn } = await open();
      const n = 5000;
      const table = await conn.query(`WITH s AS (${spec.series(n)}) SELECT i, i * i AS square, 'row ' || i AS label FROM s ORDER BY i`);
      try {
        assert.equal(table.numRows, n);
        assert.deepEqual(table.schema.fields.map((f) => `${f.name}: ${f.type}`), ['i: Int64', 'square: Int64', 'label: Utf8']);
        const is = Array.from({ length: n }, (_, i) => i);
        assert.deepEqual(values(table.getChild('i')), is);
        assert.deepEqual(values(table.getChild('square')), is.map((i) => i * i));
        assert.deepEqual(values(table.getChild('label')), is.map((i) => `row ${i}`));
      } finally {
        table.release();
      }
      await conn.close();
      await db.close();
      assert.equal(conn.released, true);
      assert.equal(db.released, true, 'database and driver released');
    });

    test('queryStream: batches read on a worker thread while timers run, one batch alive at a time', async () => {
      const { conn } = await open();
      const n = 200_000;
      const reader = await streamOf(conn, `WITH s AS (${spec.series(n)}) SELECT i FROM s ORDER BY i`);
      let ticks = 0;
      const timer = setInterval(() => ticks++, 1);
      let rows = 0;
      let sum = 0n;
      let batches = 0;
      let previous: ImportedRecordBatch | undefined;
      try {
        for await (const batch of reader) {
          if (previous) assert.equal(isImportReleased(previous), true, 'the batch before was released when this one came');
          for (const v of batch.getChild('i')!) sum += BigInt(v as bigint);
          rows += batch.numRows;
          batches++;
          previous = batch;
        }
      } finally {
        clearInterval(timer);
      }
      assert.equal(rows, n);
      assert.equal(sum, (BigInt(n - 1) * BigInt(n)) / 2n);
      assert.ok(batches > 1, `${batches} batches`);
      assert.ok(ticks > 0, `the timer ticked ${ticks} times while the driver worked`);
      assert.equal(reader.released, true, 'the stream is released at its end');
    });

    test('{ offThread: false }: every get_next on the JS thread (no timer runs during the read), the same values', async () => {
      const { conn } = await open();
      const n = 50_000;
      const reader = await conn.queryStream(`WITH s AS (${spec.series(n)}) SELECT i FROM s ORDER BY i`, undefined, { offThread: false });
      let ticks = 0;
      const timer = setInterval(() => ticks++, 0);
      let table;
      try {
        table = await reader.toTableAsync();
      } finally {
        clearInterval(timer);
      }
      try {
        assert.equal(ticks, 0, 'the event loop did not turn while the stream was read');
        assert.equal(table.numRows, n);
        assert.deepEqual(values(table.getChild('i')), Array.from({ length: n }, (_, i) => i));
      } finally {
        table.release();
      }
      assert.equal(reader.released, true);
    });

    test('bound parameters: a Table of parameters with query and execute', async () => {
      const { conn } = await open();
      const t = unique('params');
      await conn.execute(`CREATE TABLE ${t} (id INTEGER, name TEXT)`);
      const insert = `INSERT INTO ${t} VALUES (${spec.param(1)}, ${spec.param(2)})`;
      const rows = tableFromArrays({ id: Int32Array.of(1, 2, 3), name: ['a', 'b', 'c'] });
      if (spec.name === 'duckdb') {
        // DuckDB's driver (1.5) binds one row at a time: several rows are its NOT_IMPLEMENTED-style error.
        await assert.rejects(conn.execute(insert, rows), (e: unknown) => e instanceof AdbcError && /multiple rows/.test(e.message));
        for (const b of [0, 1, 2]) await conn.execute(insert, rows.slice(b, b + 1));
      } else {
        const inserted = await conn.execute(insert, rows);
        assert.ok(inserted === 3 || inserted === -1, `rows affected: ${inserted}`);
      }
      const back = await conn.query(`SELECT name FROM ${t} WHERE id = ${spec.param(1)}`, tableFromArrays({ id: Int32Array.of(2) }));
      try {
        assert.deepEqual(values(back.getChild('name')), ['b']);
      } finally {
        back.release();
      }
    });

    test('ingest an arrow-js table zero-copy, read it back: every value, the driver types', { skip: NO_INGEST[spec.name] }, async () => {
      const { conn } = await open();
      const t = unique('people');
      const table = sampleTable();
      assert.equal(await conn.ingest(t, table), table.numRows);
      const back = await conn.query(`SELECT * FROM ${t} ORDER BY id`);
      try {
        assert.deepEqual(back.schema.fields.map((f) => `${f.name}: ${f.type}`), SAMPLE_TYPES[spec.name]);
        for (const f of table.schema.fields) assert.deepEqual(values(back.getChild(f.name), true), values(table.getChild(f.name), true), f.name);
      } finally {
        back.release();
      }
      const schema = await conn.getTableSchema({ tableName: t });
      assert.deepEqual(schema.fields.map((f) => f.name), ['id', 'name', 'score', 'active']);
      await conn.ingest(t, table, { mode: IngestMode.Append });
      const twice = await conn.query(`SELECT id FROM ${t} ORDER BY id`);
      try {
        assert.deepEqual(values(twice.getChild('id')), [1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
      } finally {
        twice.release();
      }
      const err = await conn.ingest(t, table).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AdbcError, `create mode on an existing table: ${String(err)}`);
      assert.match(err.message, /exist/i);
    });

    test('ingestStream from a synchronous arrow-js reader (one execution) and from an async source (batch by batch)', { skip: NO_INGEST[spec.name] }, async () => {
      const { conn } = await open();
      const t = unique('stream');
      const data = new Table([1, 2, 3].map((k) => tableFromArrays({ k: Int32Array.from({ length: 100 }, () => k) }).batches[0]!));
      assert.equal(await conn.ingestStream(t, RecordBatchReader.from(tableToIPC(data, 'stream'))), 300);
      async function* later() {
        for (const b of data.batches) {
          await new Promise((r) => setTimeout(r, 1));
          yield b;
        }
      }
      assert.equal(await conn.ingestStream(t, later(), { mode: IngestMode.Append }), 300);
      const counts = await conn.query(`SELECT k, COUNT(*) AS n FROM ${t} GROUP BY k ORDER BY k`);
      try {
        assert.deepEqual(values(counts.getChild('k')), [1, 2, 3]);
        assert.deepEqual(values(counts.getChild('n')), [200, 200, 200]);
      } finally {
        counts.release();
      }
    });

    test('metadata: getInfo, getTableTypes, getObjects', async () => {
      const { conn } = await open();
      const t = unique('meta');
      await conn.execute(`CREATE TABLE ${t} (x INTEGER)`);
      const info = await conn.getInfo([InfoCode.VendorName, InfoCode.DriverName]);
      try {
        assert.deepEqual(values(info.getChild('info_name')).sort(), [0, 100]);
        const vendor = String(info.getChild('info_value')!.get(values(info.getChild('info_name')).indexOf(0)));
        // arrow-go's example Flight SQL server calls itself `db_name` (its SqlInfo FLIGHT_SQL_SERVER_NAME).
        assert.match(vendor, { duckdb: /duckdb/i, sqlite: /sqlite/i, postgresql: /postgres/i, flightsql: /^db_name$/ }[spec.name]);
      } finally {
        info.release();
      }
      const types = await conn.getTableTypes();
      try {
        assert.ok(types.numRows > 0 && types.schema.fields[0]!.name === 'table_type');
      } finally {
        types.release();
      }
      const objects = await conn.getObjects({ depth: ObjectDepth.Tables, tableName: t });
      try {
        const names: string[] = [];
        for (const cat of objects) for (const s of cat.toJSON().catalog_db_schemas ?? []) for (const tb of (s as { db_schema_tables?: Iterable<{ table_name: string }> }).db_schema_tables ?? []) names.push(tb.table_name);
        assert.deepEqual(names, [t]);
      } finally {
        objects.release();
      }
    });

    test('transactions: rollback drops what commit keeps', async () => {
      const { conn } = await open();
      const t = unique('tx');
      await conn.execute(`CREATE TABLE ${t} (x INTEGER)`);
      conn.setAutoCommit(false);
      await conn.execute(`INSERT INTO ${t} VALUES (1)`);
      await conn.rollback();
      await conn.execute(`INSERT INTO ${t} VALUES (2)`);
      await conn.commit();
      conn.setAutoCommit(true);
      const back = await conn.query(`SELECT x FROM ${t}`);
      try {
        assert.deepEqual(values(back.getChild('x')), [2]);
      } finally {
        back.release();
      }
    });

    test('errors at execute: an AdbcError with the status, SQLSTATE and message the driver gave', async () => {
      const { conn } = await open();
      const err = await conn.query('SELECT * FROM no_such_table').then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof AdbcError, String(err));
      assert.match(err.message, /no_such_table/);
      // DuckDB prepares when the SQL is set; the others when it runs.
      assert.equal(err.operation, spec.name === 'duckdb' ? 'AdbcStatementSetSqlQuery' : 'AdbcStatementExecuteQuery');
      if (spec.name === 'postgresql') {
        assert.equal(err.code, 'NotFound');
        assert.equal(err.sqlState, '42P01', 'undefined_table');
        assert.equal(err.detail('PG_DIAG_SQLSTATE'), '42P01');
      } else if (spec.name === 'duckdb') {
        assert.equal(err.status, AdbcStatus.INTERNAL);
      } else if (spec.name === 'flightsql') {
        // The server's gRPC status (UNKNOWN: it passes SQLite's error through) and its trailer, as an error detail.
        assert.equal(err.status, AdbcStatus.UNKNOWN);
        assert.equal(err.detail('afsql-sqlite-query'), 'SELECT * FROM no_such_table');
      } else {
        assert.equal(err.code, 'InvalidArguments');
      }
      const syntax = await conn.execute('SELEC 1').then(() => undefined, (e: unknown) => e);
      assert.ok(syntax instanceof AdbcError && /syntax/i.test(syntax.message), String(syntax));
      if (spec.name === 'postgresql') assert.equal(syntax.sqlState, '42601');
      if (spec.name === 'flightsql') {
        // A server without bulk ingestion refuses it, in a child process: the driver (1.13.0) passes the
        // server's gRPC UNIMPLEMENTED on as NOT_IMPLEMENTED, but when the refusal arrives while it is still
        // writing the stream it reports the broken write instead (UNKNOWN, "failure writing ...: EOF") and
        // never releases the batch it had taken from the stream: a leak of the driver's, which would fail
        // this process's accounting for every later test. The child's exit ends it.
        const here = fileURLToPath(import.meta.url);
        const r = spawnSync(process.execPath, [...runtimeArgs(), join(dirname(here), `ingest-refused-child${extname(here)}`)], {
          encoding: 'utf8',
          timeout: 60_000,
          env: { ...process.env, FLIGHT_URI: uri()! },
        });
        assert.equal(r.status, 0, r.stderr);
        const ingest = JSON.parse(r.stdout.trim().split('\n').pop()!) as { name: string; status: number; message: string };
        assert.equal(ingest.name, 'AdbcError', r.stdout);
        if (ingest.status === AdbcStatus.NOT_IMPLEMENTED) assert.match(ingest.message, /DoPutCommandStatementIngest/);
        else assert.deepEqual([ingest.status, /failure writing .*EOF/.test(ingest.message)], [AdbcStatus.UNKNOWN, true], ingest.message);
      }
    });

    test('an error in mid-stream: the rows before it, then the driver\'s error; everything released', async () => {
      const { conn } = await open();
      if (spec.name === 'duckdb') await conn.execute('SET threads TO 1'); // one thread raises, none reports "Interrupted" first
      const reader = await conn.queryStream(MID_STREAM_ERROR[spec.name]);
      let rows = 0;
      const err = await (async () => {
        for await (const b of reader) rows += b.numRows;
      })().then(() => undefined, (e: unknown) => e);
      assert.equal(reader.released, true, 'the failed stream is released');
      if (spec.name === 'sqlite') {
        // SQLite's driver (1.13.0) has no AdbcErrorFromArrayStream: the stream error with its get_last_error text.
        assert.ok(err instanceof StreamProducerError, String(err));
        assert.equal(err.producerMessage, 'integer overflow');
        assert.equal(rows, 5000 - (5000 % 1024));
        return;
      }
      assert.ok(err instanceof AdbcError, String(err));
      assert.equal(err.operation, 'AdbcErrorFromArrayStream');
      assert.ok(err.cause instanceof StreamProducerError, 'the stream error is its cause');
      if (spec.name === 'duckdb') {
        assert.ok(rows > 0, `${rows} rows streamed before the error`);
        assert.equal(err.message, 'Invalid Input Error: boom at 500000');
        assert.equal(err.detail('duckdb:error_type'), 'InvalidInput');
      } else if (spec.name === 'flightsql') {
        // SQLite's error on the server, sent as the DoGet stream's gRPC status.
        assert.match(err.message, /integer overflow/);
        assert.equal(err.status, AdbcStatus.UNKNOWN);
        assert.ok(rows < 5000, `${rows} rows before the error`);
      } else {
        assert.match(err.message, /division by zero/);
        assert.equal(err.sqlState, '22012');
        assert.equal(err.code, 'InvalidData');
      }
    });

    test('release order: a statement closed before its reader is released after it; a database closed first waits for its connection', async () => {
      const { db, conn } = await open();
      const stmt = await conn.createStatement();
      await stmt.setSqlQuery(`WITH s AS (${spec.series(3000)}) SELECT i FROM s`);
      const reader = await stmt.executeQuery();
      const again = await stmt.executeQuery().then(() => undefined, (e: unknown) => e);
      assert.ok(again instanceof AdbcError && again.status === AdbcStatus.INVALID_STATE, `a second result while one is open: ${String(again)}`);
      await stmt.close();
      await conn.close();
      await db.close();
      assert.equal(stmt.released, false, 'the statement waits for its reader (ADBC: stream first)');
      assert.equal(db.released, false);
      const table = reader.toTable(); // still readable: nothing under it was released
      try {
        assert.equal(table.numRows, 3000);
      } finally {
        table.release();
      }
      assert.equal(reader.released, true);
      assert.equal(stmt.released, true, 'its release started once its stream was released (close() makes it on a worker thread)');
      // The connection goes once the statement's release has returned, the database once the connection's has.
      assert.ok(await collectUntil(() => conn.released), 'the connection released after its statement');
      assert.ok(await collectUntil(() => db.released), 'the database released after its connection');
      await assert.rejects(conn.query('SELECT 1'), (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.INVALID_STATE && /closed/.test(e.message));
      await assert.rejects(db.connect(), (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.INVALID_STATE);
    });

    test('cancel in mid-read: the stream, the statement and the connection released in order, nothing leaks', async () => {
      const { db, conn } = await open();
      const reader = await streamOf(conn, `WITH s AS (${spec.series(300_000)}) SELECT i FROM s`);
      let batches = 0;
      for await (const _ of reader) {
        if (++batches === 2) reader.cancel();
      }
      assert.equal(reader.released, true);
      assert.equal(batches, 2, 'no batch after the cancel');
      await conn.close();
      await db.close();
      assert.equal(db.released, true);
    });

    test('an abandoned reader is released by the garbage collector, then its statement', async () => {
      const { conn } = await open();
      await (async () => {
        const reader = await conn.queryStream(`WITH s AS (${spec.series(1000)}) SELECT i FROM s`);
        void reader.schema;
      })();
      await conn.close();
      assert.equal(conn.released, false, 'the abandoned reader holds its statement and connection');
      await collectUntil(() => conn.released);
      assert.equal(conn.released, true, 'collected: stream, statement, connection released in order');
    });

    test('a synchronous call while an async one runs on the connection is refused, not run beside it', async () => {
      const { conn } = await open();
      const running = conn.query(`WITH s AS (${spec.series(10)}) SELECT i FROM s`);
      assert.throws(() => conn.setOption('adbc.connection.autocommit', 'true'), (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.INVALID_STATE);
      (await running).release();
      conn.setAutoCommit(true);
    });

    test('portable parameters: execute, query and queryStream with params give the same rows on every driver', async () => {
      // The caller neither prepares nor sets options: query/execute prepare before binding (Flight SQL's driver
      // would take an unprepared bind as rows to ingest and fail with "must set IngestTargetTable").
      const { conn } = await open();
      const t = unique('portable');
      await conn.execute(`CREATE TABLE ${t} (id INTEGER, name TEXT)`);
      const rows = [{ id: 7, name: 'seven' }, { id: 8, name: 'eight' }, { id: 9, name: 'nine' }];
      const insert = `INSERT INTO ${t} (id, name) VALUES (${spec.param(1)}, ${spec.param(2)})`;
      for (const r of rows) {
        // One row per execution: DuckDB's driver binds one row at a time (the bound-parameters test shows it).
        const n = await conn.execute(insert, tableFromArrays({ id: Int32Array.of(r.id), name: [r.name] }));
        assert.ok(n === 1 || n === -1, `rows affected: ${n}`);
      }
      const select = `SELECT id, name FROM ${t} WHERE id >= ${spec.param(1)} ORDER BY id`;
      const from = rows[1]!.id;
      const want = rows.filter((r) => r.id >= from);
      const table = await conn.query(select, tableFromArrays({ id: Int32Array.of(from) }));
      try {
        assert.deepEqual(values(table.getChild('id')), want.map((r) => r.id));
        assert.deepEqual(values(table.getChild('name')), want.map((r) => r.name));
      } finally {
        table.release();
      }
      const names: unknown[] = [];
      for await (const batch of await conn.queryStream(select, tableFromArrays({ id: Int32Array.of(from) }))) names.push(...values(batch.getChild('name')));
      assert.deepEqual(names, want.map((r) => r.name));
      const all = await conn.query(`SELECT id, name FROM ${t} ORDER BY id`);
      try {
        assert.deepEqual(values(all.getChild('id')), rows.map((r) => r.id), 'every parameterised insert landed, once');
      } finally {
        all.release();
      }
    });

    test('option getters: autocommit read back as set, every typed getter NOT_FOUND for an unknown key, a typed option round trip', async () => {
      const { db, conn } = await open();
      assert.equal(conn.getOption('adbc.connection.autocommit'), 'true');
      conn.setAutoCommit(false);
      assert.equal(conn.getOption('adbc.connection.autocommit'), 'false');
      conn.setAutoCommit(true);
      await using stmt = await conn.createStatement();
      for (const [what, h] of [['Database', db], ['Connection', conn], ['Statement', stmt]] as const) {
        await adbcFailure(() => h.getOption('arrow_device.no.such.option'), AdbcStatus.NOT_FOUND, `Adbc${what}GetOption`);
        await adbcFailure(() => h.getOptionBytes('arrow_device.no.such.option'), AdbcStatus.NOT_FOUND, `Adbc${what}GetOptionBytes`);
        await adbcFailure(() => h.getOptionInt('arrow_device.no.such.option'), AdbcStatus.NOT_FOUND, `Adbc${what}GetOptionInt`);
        await adbcFailure(() => h.getOptionDouble('arrow_device.no.such.option'), AdbcStatus.NOT_FOUND, `Adbc${what}GetOptionDouble`);
      }
      await adbcFailure(() => stmt.setOptionInt('x', 2 ** 60), AdbcStatus.INVALID_ARGUMENT, 'AdbcStatementSetOptionInt');
      if (spec.name === 'duckdb' || spec.name === 'postgresql') {
        // A value longer than the first buffer offered (256 bytes): the driver says the length, the getter asks again.
        const long = `t_${'x'.repeat(600)}`;
        stmt.setOption('adbc.ingest.target_table', long);
        assert.equal(stmt.getOption('adbc.ingest.target_table'), long);
        stmt.setOption('adbc.ingest.target_table', 'short');
        assert.equal(stmt.getOption('adbc.ingest.target_table'), 'short');
      }
      if (spec.name === 'postgresql') {
        stmt.setOptionInt('adbc.postgresql.batch_size_hint_bytes', 65536n);
        assert.equal(stmt.getOptionInt('adbc.postgresql.batch_size_hint_bytes'), 65536n);
      } else if (spec.name === 'sqlite') {
        stmt.setOptionInt('adbc.sqlite.query.batch_rows', 100);
        assert.equal(stmt.getOptionInt('adbc.sqlite.query.batch_rows'), 100n);
        assert.equal(stmt.getOption('adbc.sqlite.query.batch_rows'), '100', 'the same option as a string');
        assert.equal(db.getOption('uri'), ':memory:');
        assert.deepEqual(db.getOptionBytes('uri'), new TextEncoder().encode(':memory:'), 'the bytes getter: the bytes, as many as the driver says');
      } else if (spec.name === 'flightsql') {
        conn.setOptionDouble('adbc.flight.sql.rpc.timeout_seconds.fetch', 12.5);
        assert.equal(conn.getOptionDouble('adbc.flight.sql.rpc.timeout_seconds.fetch'), 12.5);
        assert.equal(conn.getOption('adbc.flight.sql.rpc.timeout_seconds.fetch'), '12.5s');
        assert.equal(stmt.getOptionDouble('adbc.statement.exec.progress'), 0);
      } else {
        assert.equal(db.getOption('path'), ':memory:');
        assert.equal(conn.getOption('adbc.connection.db_schema'), 'main');
      }
    });

    test(STATISTICS[spec.name] ? 'getStatistics: the row count of a table; getStatisticNames: the driver\'s own names (none)' : 'getStatistics and getStatisticNames: an AdbcError with status NOT_IMPLEMENTED', async () => {
      const { conn } = await open();
      const t = unique('stats');
      await conn.execute(`CREATE TABLE ${t} (x INTEGER, y TEXT)`);
      await conn.execute(`INSERT INTO ${t} VALUES (1, 'a'), (2, NULL), (3, 'c')`);
      const how = STATISTICS[spec.name];
      if (!how) {
        await adbcFailure(() => conn.getStatistics({ tableName: t }), AdbcStatus.NOT_IMPLEMENTED, 'AdbcConnectionGetStatistics');
        await adbcFailure(() => conn.getStatisticNames(), AdbcStatus.NOT_IMPLEMENTED, 'AdbcConnectionGetStatisticNames');
        (await conn.query('SELECT 1 AS one')).release(); // the connection is still usable
        return;
      }
      if (spec.name === 'postgresql') await conn.execute(`ANALYZE ${t}`);
      const stats = await conn.getStatistics({ dbSchema: how.dbSchema, tableName: t });
      try {
        assert.deepEqual(stats.schema.fields.map((f) => f.name), ['catalog_name', 'catalog_db_schemas']);
        const rows: { table_name: string; column_name: string | null; statistic_key: number; statistic_value: unknown }[] = [];
        for (const cat of stats) for (const s of cat.toJSON().catalog_db_schemas ?? []) for (const r of (s as { db_schema_statistics: Iterable<{ toJSON(): typeof rows[number] }> }).db_schema_statistics) rows.push(r.toJSON());
        assert.ok(rows.length > 0 && rows.every((r) => r.table_name === t), JSON.stringify(rows));
        const count = rows.find((r) => r.column_name === null && r.statistic_key === StatisticKey.RowCount);
        assert.ok(count, `a row count among ${JSON.stringify(rows, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
        assert.equal(Number(count.statistic_value), 3);
      } finally {
        stats.release();
      }
      if (!how.exact) {
        await adbcFailure(() => conn.getStatistics({ dbSchema: how.dbSchema, tableName: t, approximate: false }), AdbcStatus.NOT_IMPLEMENTED, 'AdbcConnectionGetStatistics');
      }
      const names = await conn.getStatisticNames();
      try {
        assert.deepEqual(names.schema.fields.map((f) => `${f.name}: ${f.type}`), ['statistic_name: Utf8', 'statistic_key: Int16']);
        assert.equal(names.numRows, 0);
      } finally {
        names.release();
      }
    });

    test(PARAMETER_SCHEMA[spec.name] ? 'getParameterSchema after prepare: one field per parameter' : 'getParameterSchema: an AdbcError with status NOT_IMPLEMENTED', async () => {
      const { conn } = await open();
      const t = unique('pschema');
      await conn.execute(`CREATE TABLE ${t} (x INTEGER, y TEXT)`);
      await using stmt = await conn.createStatement();
      await stmt.setSqlQuery(`SELECT * FROM ${t} WHERE x = ${spec.param(1)} AND y = ${spec.param(2)}`);
      await stmt.prepare();
      const want = PARAMETER_SCHEMA[spec.name];
      if (!want) {
        const err = await adbcFailure(() => stmt.getParameterSchema(), AdbcStatus.NOT_IMPLEMENTED, 'AdbcStatementGetParameterSchema');
        assert.equal(err.message, 'AdbcStatementGetParameterSchema: NotImplemented', 'the driver gave no text: the operation and status say it');
        return;
      }
      const schema = await stmt.getParameterSchema();
      assert.deepEqual(schema.fields.map((f) => `${f.name}: ${f.type}`), want);
    });

    test('setSubstraitPlan: NOT_IMPLEMENTED on every driver tested (Flight SQL\'s: the server\'s, at execution); the statement still takes SQL', async () => {
      const { conn } = await open();
      await using stmt = await conn.createStatement();
      const plan = Uint8Array.of(0x0a, 0x00);
      if (spec.name === 'flightsql') {
        // Flight SQL's driver sends the plan to the server at execution; arrow-go's example server has no Substrait.
        await stmt.setSubstraitPlan(plan);
        const err = await adbcFailure(() => stmt.executeQuery(), AdbcStatus.NOT_IMPLEMENTED, 'AdbcStatementExecuteQuery');
        assert.match(err.message, /SubstraitPlan not implemented/);
      } else {
        // DuckDB's and PostgreSQL's drivers leave the entry NULL; SQLite's returns NOT_IMPLEMENTED.
        await adbcFailure(() => stmt.setSubstraitPlan(plan), AdbcStatus.NOT_IMPLEMENTED, 'AdbcStatementSetSubstraitPlan');
      }
      await stmt.setSqlQuery('SELECT 1 AS one');
      const t = await (await stmt.executeQuery()).toTableAsync();
      assert.equal(t.numRows, 1);
      t.release();
    });

    if (spec.name !== 'flightsql') {
      test('executePartitions and readPartition: an AdbcError with status NOT_IMPLEMENTED (the driver has no partitioned results)', async () => {
        const { conn } = await open();
        const err = await conn.executePartitions(`WITH s AS (${spec.series(10)}) SELECT i FROM s`).then(() => undefined, (e: unknown) => e);
        assert.ok(err instanceof AdbcError, String(err));
        assert.equal(err.status, AdbcStatus.NOT_IMPLEMENTED);
        assert.equal(err.operation, 'AdbcStatementExecutePartitions');
        const read = await conn.readPartition(Uint8Array.of(1, 2, 3)).then(() => undefined, (e: unknown) => e);
        assert.ok(read instanceof AdbcError, String(read));
        assert.equal(read.status, AdbcStatus.NOT_IMPLEMENTED);
        assert.equal(read.operation, 'AdbcConnectionReadPartition');
        // The connection is still usable.
        const one = await conn.query(`WITH s AS (${spec.series(3)}) SELECT i FROM s`);
        one.release();
      });
    } else {
      test('executePartitions: the descriptors, read back on this and another connection, give the rows of the plain query', async () => {
        const { db, conn } = await open();
        const n = 20_000;
        const sql = `WITH s AS (${spec.series(n)}) SELECT i, 'row ' || i AS label FROM s ORDER BY i`;
        const plain = await conn.query(sql);
        const { schema, partitions, rowsAffected } = await conn.executePartitions(sql);
        assert.ok(partitions.length >= 1, `${partitions.length} partitions`);
        assert.ok(partitions.every((d) => d instanceof Uint8Array && d.byteLength > 0), 'each descriptor is bytes');
        assert.equal(rowsAffected, -1, 'a query: rows affected unknown');
        // arrow-go's example server sends no schema in its FlightInfo: the driver leaves it unfilled.
        assert.equal(schema, undefined);
        const other = await db.connect();
        try {
          for (const reader of [conn, other]) {
            const ids: unknown[] = [];
            const labels: unknown[] = [];
            for (const d of partitions) {
              const r = await reader.readPartition(d);
              assert.deepEqual(r.schema.fields.map((f) => `${f.name}: ${f.type}`), plain.schema.fields.map((f) => `${f.name}: ${f.type}`));
              for await (const b of r) {
                ids.push(...values(b.getChild('i')));
                labels.push(...values(b.getChild('label')));
              }
              assert.equal(r.released, true);
            }
            assert.deepEqual(ids, values(plain.getChild('i')));
            assert.deepEqual(labels, values(plain.getChild('label')));
          }
        } finally {
          plain.release();
          await other.close();
        }
        // The statement form, with parameters bound as query binds them.
        await using stmt = await conn.createStatement();
        await stmt.setSqlQuery(`WITH s AS (${spec.series(n)}) SELECT i FROM s WHERE i < ${spec.param(1)} ORDER BY i`);
        await stmt.prepare();
        await stmt.bind(tableFromArrays({ below: Int32Array.of(5) }));
        const again = await stmt.executePartitions();
        let got: unknown[] = [];
        for (const d of again.partitions) {
          const t = await (await conn.readPartition(d)).toTableAsync();
          got = got.concat(values(t.getChild('i')));
          t.release();
        }
        assert.deepEqual(got, [0, 1, 2, 3, 4]);
      });

      test('readPartition: a descriptor the driver cannot parse is its INVALID_ARGUMENT; the connection stays usable', async () => {
        const { conn } = await open();
        const err = await conn.readPartition(Uint8Array.of(1, 2, 3)).then(() => undefined, (e: unknown) => e);
        assert.ok(err instanceof AdbcError, String(err));
        assert.equal(err.status, AdbcStatus.INVALID_ARGUMENT);
        assert.match(err.message, /partition/);
        const one = await conn.query(`WITH s AS (${spec.series(3)}) SELECT i FROM s`);
        assert.equal(one.numRows, 3);
        one.release();
      });
    }
  });
}
