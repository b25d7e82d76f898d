/**
 * arrow-device/flechette/adbc (src/flechette/adbc.ts, issue 52): the driver manager with flechette as its
 * target, against four real drivers: DuckDB's and SQLite's in process, PostgreSQL's and Flight SQL's
 * against real servers on 127.0.0.1 (test/adbc/postgres.ts, test/adbc/flightsql.ts). The independent
 * side of every result is the same SQL through arrow-device/adbc (the arrow-js target) on a database of
 * the same driver, or the source data itself for what was ingested or bound. For each driver: a query's
 * every value; a streamed query batch by batch with one table alive at a time; a statement's
 * executeQuery and executeSchema; metadata (getInfo, getTableTypes, getObjects, getStatistics);
 * getTableSchema; ingestion of flechette tables (one, an iterable, an async iterable) read back, and
 * bound parameters; a pool; an AbortSignal (a running pg_sleep on PostgreSQL, an already aborted
 * signal and an abort in mid-read elsewhere); partitions where the driver has them (Flight SQL); and
 * after every test nothing live and every database released. Also arquero (`aq.fromArrow`) over a
 * DuckDB result, grouped and rolled up, against the same aggregate in SQL.
 *
 * A driver that is not installed, or a server that cannot be started, skips with the reason printed;
 * ADBC_REQUIRED=1 (npm run test:adbc) makes that a failure.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import * as aq from 'arquero';
import { Vector, type Table as ATable } from 'apache-arrow';
import { Column, Table, tableFromArrays, float64, int32, utf8, type Schema } from '@uwdata/flechette';
import {
  AdbcDatabase, AdbcError, AdbcStatus, InfoCode, IngestMode, ObjectDepth, type AdbcConnection as Connection, type AdbcTableReader, type FlechetteAdbc,
} from '../../src/flechette/adbc.js';
import { ImportedTable, isImportReleased } from '../../src/flechette/index.js';
import { AdbcDatabase as ArrowJsDatabase, type AdbcConnection as ArrowJsConnection } from '../../src/adbc/index.js';
import { accounting } from '../../src/index.js';
import { collectUntil } from '../helpers/gc.js';
import { DRIVERS, DUCKDB, type DriverName, type DriverSpec } from '../adbc/drivers.js';
import { flightSqlServerMissing } from '../adbc/flightsql.js';
import { postgresMissing } from '../adbc/postgres.js';
import { serveDuringSuite } from '../adbc/servers.js';

const required = process.env.ADBC_REQUIRED === '1';
const pgMissing = postgresMissing();
const flightMissing = flightSqlServerMissing();
for (const why of [...DRIVERS.map((d) => d.missing), pgMissing, flightMissing]) if (why && required) throw new Error(`ADBC_REQUIRED=1: ${why}`);

/** Why a test of bulk ingestion cannot run on a driver's test server (test/adbc/adbc.test.ts checks the refusal). */
const NO_INGEST: Partial<Record<DriverName, string>> = {
  flightsql: "arrow-go's example Flight SQL server does not implement bulk ingestion (DoPutCommandStatementIngest)",
};

/** Which drivers have statistics (test/adbc/adbc.test.ts: DuckDB exact, PostgreSQL approximate from pg_stats). */
const STATISTICS: Partial<Record<DriverName, { dbSchema?: string }>> = { duckdb: {}, postgresql: { dbSchema: 'public' } };

/** A value of either library in one plain form (the integers here are small: a bigint as a number). */
function canon(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') return v;
  if (ArrayBuffer.isView(v)) return Array.from(v as unknown as ArrayLike<unknown>, canon);
  if (Array.isArray(v)) return v.map(canon);
  if (v instanceof Vector) return Array.from({ length: v.length }, (_, i) => canon(v.get(i)));
  if (v instanceof Map) return [...v].map(([k, x]) => [canon(k), canon(x)]);
  const o = v as { toJSON?: () => unknown };
  if (typeof o.toJSON === 'function' && !(v instanceof Date)) return canon(o.toJSON());
  return Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, canon(x)]));
}

const cells = (c: Column<unknown>): unknown[] => Array.from({ length: c.length }, (_, i) => canon(c.at(i)));
const arrowCells = (v: Vector | null): unknown[] => {
  assert.ok(v, 'the arrow-js column exists');
  return Array.from({ length: v.length }, (_, i) => canon(v.get(i)));
};

/** Asserts a flechette result equals the arrow-js target's result of the same SQL: names, type ids, nullability, every value. */
function sameResult(ours: Table, theirs: ATable, what: string): void {
  assert.ok(ours instanceof ImportedTable && ours instanceof Table, `${what}: a flechette Table`);
  assert.deepEqual(
    ours.schema.fields.map((f) => [f.name, f.type.typeId]),
    theirs.schema.fields.map((f) => [f.name, f.type.typeId]),
    `${what}: the fields (Arrow's type ids, which both libraries use)`,
  );
  assert.equal(ours.numRows, theirs.numRows, `${what}: rows`);
  for (const f of theirs.schema.fields) assert.deepEqual(cells(ours.getChild(f.name)), arrowCells(theirs.getChild(f.name)), `${what}: column ${f.name}`);
}

const sameSchema = (ours: Schema, theirs: { fields: readonly { name: string; type: { typeId: number } }[] }, what: string): void =>
  assert.deepEqual(ours.fields.map((f) => [f.name, f.type.typeId]), theirs.fields.map((f) => [f.name, f.type.typeId]), what);

/** The flechette sample to ingest: source data of every check of what a driver read back. */
function sample(): Table {
  return tableFromArrays(
    { id: Int32Array.of(1, 2, 3, 4, 5), name: ['ada', 'grace', null, 'edsger', 'barbara'], score: [9.5, null, 7.25, 8, -1.5] },
    { types: { id: int32(), name: utf8(), score: float64() } },
  );
}

/** The rows of a flechette table as plain objects (canon). */
const rowsOf = (t: Table): unknown[] => t.toArray().map(canon);

/** The drivers whose databases are a server's, which both targets' connections share. */
const SHARED: ReadonlySet<DriverName> = new Set(['postgresql', 'flightsql']);

/** A connection of the flechette target. */
type AdbcConnection = Connection<FlechetteAdbc>;

let serial = 0;
const unique = (base: string): string => `${base}_${process.pid}_${serial++}`;

async function rejection(p: Promise<unknown>): Promise<unknown> {
  return p.then(() => assert.fail('expected a rejection'), (e: unknown) => e);
}

for (const spec of DRIVERS) {
  const skip = spec.missing ?? (spec.name === 'postgresql' ? pgMissing : spec.name === 'flightsql' ? flightMissing : undefined);
  if (skip) console.log(`# arrow-device/flechette/adbc ${spec.name} skipped: ${skip}`);

  describe(`arrow-device/flechette/adbc: ${spec.name}`, { skip }, () => {
    const uri = serveDuringSuite(spec);
    const opened: { close(): Promise<void>; readonly released: boolean }[] = [];
    const connections: { close(): Promise<void> }[] = [];
    afterEach(async () => {
      for (const c of connections.splice(0)) await c.close();
      for (const db of opened.splice(0)) {
        await db.close();
        assert.equal(db.released, true, 'the database released: every connection closed');
      }
      await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
      assert.deepEqual({ imports: accounting().liveImports, exports: accounting().liveExports }, { imports: 0, exports: 0 }, 'nothing left live');
    });

    /** A flechette-target database of `spec` and a connection (closed by afterEach). */
    async function open(): Promise<{ db: AdbcDatabase; conn: AdbcConnection }> {
      const db = new AdbcDatabase(spec.options(uri()));
      opened.push(db);
      const conn = await db.connect();
      connections.push(conn);
      return { db, conn };
    }

    /** The independent side: an arrow-js-target database of the same driver (its own in-memory database for DuckDB and SQLite). */
    async function openArrowJs(): Promise<ArrowJsConnection> {
      const db = new ArrowJsDatabase(spec.options(uri()));
      opened.push(db);
      const conn = await db.connect();
      connections.push(conn);
      return conn;
    }

    /** The result of `sql` through the arrow-js target, released after `use`. */
    async function arrowJs<R>(sql: string, use: (t: ATable) => R): Promise<R> {
      const conn = await openArrowJs();
      const t = await conn.query(sql);
      try {
        return use(t);
      } finally {
        t.release();
      }
    }

    /** A streamed query in several batches (PostgreSQL's driver makes 16 MB batches by default: its hint made small). */
    async function streamOf(conn: AdbcConnection, sql: string): Promise<AdbcTableReader> {
      if (spec.name !== 'postgresql') return conn.queryStream(sql);
      const stmt = await conn.createStatement();
      try {
        stmt.setOption('adbc.postgresql.batch_size_hint_bytes', '65536');
        await stmt.setSqlQuery(sql);
        return await stmt.executeQuery();
      } finally {
        await stmt.close(); // released after its reader
      }
    }

    /** The connections a table must be made on: both where each has its own in-memory database, one where they share a server. */
    const onEach = (conn: AdbcConnection, other: ArrowJsConnection): (AdbcConnection | ArrowJsConnection)[] => (SHARED.has(spec.name) ? [conn] : [conn, other]);

    const QUERY = `WITH s AS (${spec.series(5000)}) SELECT i, i * i AS square, 'row ' || i AS label, CAST(i AS DOUBLE PRECISION) / 4 AS quarter FROM s ORDER BY i`;

    test('query: every value of a 5,000-row result, a flechette Table, as the arrow-js target reads the same SQL', async () => {
      const { conn } = await open();
      const t = await conn.query(QUERY);
      await arrowJs(QUERY, (theirs) => sameResult(t, theirs, 'query'));
      const values = t.getChild('i').data[0]!.values as ArrayLike<unknown>;
      t.release();
      assert.equal(t.released, true);
      assert.equal(values.length, 0, 'released: the typed arrays flechette held are detached');
    });

    test('queryStream: batch by batch, the previous table released and detached when the next comes; the rows those of the arrow-js target', async () => {
      const { conn } = await open();
      const n = 100_000;
      const sql = `WITH s AS (${spec.series(n)}) SELECT i FROM s ORDER BY i`;
      const reader = await streamOf(conn, sql);
      const got: number[] = [];
      let previous: { table: Table; values: ArrayLike<unknown> } | undefined;
      let batches = 0;
      for await (const t of reader) {
        assert.ok(t instanceof ImportedTable);
        if (previous) {
          assert.equal(isImportReleased(previous.table), true, `batch ${batches - 1} released when batch ${batches} came`);
          assert.equal(previous.values.length, 0, `batch ${batches - 1}'s values detached`);
        }
        for (const v of t.getChild('i')) got.push(Number(v));
        previous = { table: t, values: t.getChild('i').data[0]!.values as ArrayLike<unknown> };
        batches++;
      }
      assert.ok(batches > 1, `${batches} batches`);
      assert.equal(reader.released, true, 'the stream released at its end');
      assert.equal(accounting().liveImports, 0, 'no batch left alive');
      const want = await arrowJs(sql, (theirs) => arrowCells(theirs.getChild('i')));
      assert.deepEqual(got, want);
    });

    test('executeQuery on a statement: toTableAsync keeps every batch; executeSchema is the result\'s schema (or NOT_IMPLEMENTED)', async () => {
      const { conn } = await open();
      await using stmt = await conn.createStatement();
      await stmt.setSqlQuery(QUERY);
      const schema = await stmt.executeSchema().then((s) => s, (e: unknown) => e);
      const t = await (await stmt.executeQuery()).toTableAsync();
      await arrowJs(QUERY, (theirs) => {
        sameResult(t, theirs, 'executeQuery');
        if (schema instanceof AdbcError) assert.equal(schema.status, AdbcStatus.NOT_IMPLEMENTED, schema.message);
        else sameSchema(schema as Schema, theirs.schema, 'executeSchema');
      });
      t.release();
    });

    test('metadata: getInfo, getTableTypes, getObjects (and getStatistics where the driver has them) as the arrow-js target gives them', async () => {
      const { conn } = await open();
      const other = await openArrowJs();
      const t = unique('meta');
      for (const c of onEach(conn, other)) {
        await c.execute(`CREATE TABLE ${t} (x INTEGER, y TEXT)`);
        await c.execute(`INSERT INTO ${t} VALUES (1, 'a'), (2, NULL), (3, 'c')`);
      }
      if (spec.name === 'postgresql') await conn.execute(`ANALYZE ${t}`);
      const pairs: [string, () => Promise<Table & { release(): void }>, () => Promise<ATable & { release(): void }>][] = [
        ['getInfo', () => conn.getInfo([InfoCode.VendorName, InfoCode.DriverName]), () => other.getInfo([InfoCode.VendorName, InfoCode.DriverName])],
        ['getTableTypes', () => conn.getTableTypes(), () => other.getTableTypes()],
        ['getObjects', () => conn.getObjects({ depth: ObjectDepth.All, tableName: t }), () => other.getObjects({ depth: ObjectDepth.All, tableName: t })],
      ];
      const stats = STATISTICS[spec.name];
      if (stats) pairs.push(['getStatistics', () => conn.getStatistics({ dbSchema: stats.dbSchema, tableName: t }), () => other.getStatistics({ dbSchema: stats.dbSchema, tableName: t })]);
      for (const [what, ours, theirs] of pairs) {
        const a = await ours();
        const b = await theirs();
        try {
          assert.ok(a.numRows > 0, `${what}: rows`);
          assert.deepEqual(a.schema.fields.map((f) => f.name), b.schema.fields.map((f) => f.name), `${what}: fields`);
          assert.deepEqual(rowsOf(a), b.toArray().map(canon), `${what}: every row`);
        } finally {
          a.release();
          b.release();
        }
      }
      if (!stats) {
        const e = await rejection(conn.getStatistics({ tableName: t }));
        assert.ok(e instanceof AdbcError && e.status === AdbcStatus.NOT_IMPLEMENTED, String(e));
      }
      // getObjects names the table and its columns (the arrow-js side could be wrong the same way: the source says it).
      const objects = await conn.getObjects({ depth: ObjectDepth.All, tableName: t });
      try {
        const columns: string[] = [];
        for (const cat of objects.toArray() as { catalog_db_schemas: { db_schema_tables: { table_name: string; table_columns: { column_name: string }[] }[] | null }[] | null }[]) {
          for (const s of cat.catalog_db_schemas ?? []) for (const tb of s.db_schema_tables ?? []) if (tb.table_name === t) columns.push(...tb.table_columns.map((c) => c.column_name));
        }
        assert.deepEqual(columns, ['x', 'y']);
      } finally {
        objects.release();
      }
    });

    test('getTableSchema: a flechette Schema with the names and types the arrow-js target reads', async () => {
      const { conn } = await open();
      const other = await openArrowJs();
      const t = unique('schema');
      for (const c of onEach(conn, other)) await c.execute(`CREATE TABLE ${t} (x INTEGER, y TEXT, z REAL)`);
      const ours = await conn.getTableSchema({ tableName: t });
      assert.deepEqual(ours.fields.map((f) => f.name), ['x', 'y', 'z']);
      sameSchema(ours, await other.getTableSchema({ tableName: t }), 'getTableSchema');
    });

    test('ingest a flechette table, an iterable and an async iterable of them; read back, every value is the source\'s', { skip: NO_INGEST[spec.name] }, async () => {
      const { conn } = await open();
      const t = unique('people');
      const source = sample();
      assert.equal(await conn.ingest(t, source), source.numRows);
      const back = await conn.query(`SELECT id, name, score FROM ${t} ORDER BY id`);
      try {
        assert.deepEqual(rowsOf(back), rowsOf(source));
      } finally {
        back.release();
      }
      if (spec.name === 'postgresql') {
        // One server: the arrow-js target reads what the flechette target wrote.
        const other = await openArrowJs();
        const theirs = await other.query(`SELECT id, name, score FROM ${t} ORDER BY id`);
        try {
          for (const name of source.names) assert.deepEqual(arrowCells(theirs.getChild(name)), cells(source.getChild(name)), `arrow-js reads ${name}`);
        } finally {
          theirs.release();
        }
      }
      const parts = [sample(), sample()];
      function* tables(): Generator<Table> {
        yield* parts;
      }
      async function* later(): AsyncGenerator<Table> {
        for (const p of parts) {
          await new Promise((r) => setTimeout(r, 1));
          yield p;
        }
      }
      assert.equal(await conn.ingest(t, tables(), { mode: IngestMode.Append }), 2 * source.numRows);
      assert.equal(await conn.ingestStream(t, later(), { mode: IngestMode.Append }), 2 * source.numRows);
      const counts = await conn.query(`SELECT id, COUNT(*) AS n FROM ${t} GROUP BY id ORDER BY id`);
      try {
        assert.deepEqual(cells(counts.getChild('id')), cells(source.getChild('id')));
        assert.deepEqual(cells(counts.getChild('n')), Array(source.numRows).fill(1 + 2 * parts.length), 'once, then each part from the iterable and from the async iterable');
      } finally {
        counts.release();
      }
    });

    test('bound parameters: flechette tables bound to an insert (bind) and as the params of query and queryStream', async () => {
      const { conn } = await open();
      const t = unique('params');
      await conn.execute(`CREATE TABLE ${t} (id INTEGER, name TEXT)`);
      const rows = tableFromArrays({ id: Int32Array.of(7, 8, 9), name: ['seven', 'eight', 'nine'] }, { types: { name: utf8() } });
      await using stmt = await conn.createStatement();
      await stmt.setSqlQuery(`INSERT INTO ${t} VALUES (${spec.param(1)}, ${spec.param(2)})`);
      await stmt.prepare();
      // DuckDB's driver binds one row at a time (test/adbc/adbc.test.ts): one execution per row everywhere.
      for (let r = 0; r < rows.numRows; r++) {
        await stmt.bind(tableFromArrays({ id: Int32Array.of(rows.getChild('id').at(r) as number), name: [rows.getChild('name').at(r)] }, { types: { name: utf8() } }));
        const n = await stmt.executeUpdate();
        assert.ok(n === 1 || n === -1, `rows affected: ${n}`);
      }
      const select = `SELECT id, name FROM ${t} WHERE id >= ${spec.param(1)} ORDER BY id`;
      const from = rows.getChild('id').at(1) as number;
      const want = rowsOf(rows).filter((r) => (r as { id: number }).id >= from);
      const back = await conn.query(select, tableFromArrays({ id: Int32Array.of(from) }));
      try {
        assert.deepEqual(rowsOf(back), want);
      } finally {
        back.release();
      }
      const streamed: unknown[] = [];
      for await (const b of await conn.queryStream(select, tableFromArrays({ id: Int32Array.of(from) }))) streamed.push(...rowsOf(b));
      assert.deepEqual(streamed, want);
      // An async iterable of parameter tables is read into memory, then bound.
      const asyncParams = (async function* () {
        await new Promise((r) => setTimeout(r, 1));
        yield tableFromArrays({ id: Int32Array.of(from) });
      })();
      const viaAsync = await conn.query(select, asyncParams);
      try {
        assert.deepEqual(rowsOf(viaAsync), want);
      } finally {
        viaAsync.release();
      }
      const err = await rejection(conn.query(select, 42 as never));
      assert.ok(err instanceof Error && /flechette Table/.test(err.message), `a bind of something else names what it takes: ${String(err)}`);
    });

    test('a pool: queries on up to 2 connections at once, each result a flechette Table of the right rows', async () => {
      const { db } = await open();
      const pool = db.pool({ max: 2 });
      try {
        const ks = [1, 2, 3, 4, 5];
        const results = await Promise.all(ks.map((k) => pool.query(`WITH s AS (${spec.series(k * 10)}) SELECT i FROM s ORDER BY i`)));
        assert.ok(pool.totalCount >= 1 && pool.totalCount <= 2, `${pool.totalCount} connections`);
        for (const [j, r] of results.entries()) {
          assert.ok(r instanceof ImportedTable);
          const want = await arrowJs(`WITH s AS (${spec.series(ks[j]! * 10)}) SELECT i FROM s ORDER BY i`, (theirs) => arrowCells(theirs.getChild('i')));
          assert.deepEqual(cells(r.getChild('i')), want);
          r.release();
        }
        assert.equal(pool.inUseCount, 0);
      } finally {
        await pool.close();
      }
    });

    test(spec.name === 'postgresql'
      ? 'abort: a running pg_sleep cancelled by its signal rejects at once; the next query runs; an aborted signal starts nothing'
      : 'abort: an aborted signal starts nothing; an abort in the middle of for await ends it with the reason and releases the stream', async () => {
      const { conn } = await open();
      await assert.rejects(conn.query('SELECT 1 AS one', undefined, { signal: AbortSignal.abort() }), (e: unknown) => e instanceof DOMException && e.name === 'AbortError');
      if (spec.name === 'postgresql') {
        const sleep = 8;
        const start = Date.now();
        const e = await rejection(conn.query(`SELECT pg_sleep(${sleep})`, undefined, { signal: AbortSignal.timeout(200) }));
        assert.ok(e instanceof DOMException && e.name === 'TimeoutError', `the signal's reason, got ${String(e)}`);
        const t = await conn.query('SELECT 42 AS answer');
        assert.equal(Number(t.getChild('answer').at(0)), 42);
        assert.ok(Date.now() - start < (sleep * 1000) / 2, 'the server stopped the sleep: the next query did not wait for it');
        t.release();
        return;
      }
      const reason = new Error('enough');
      const live = new AbortController();
      const third = await conn.queryStream(`WITH s AS (${spec.series(100_000)}) SELECT i FROM s`, undefined, { signal: live.signal });
      let seen = 0;
      const err = await (async () => {
        for await (const _ of third) if (++seen === 1) live.abort(reason);
      })().then(() => undefined, (x: unknown) => x);
      assert.equal(err, reason, 'an abort in mid-read ends the loop with the reason');
      assert.equal(seen, 1);
      assert.equal(third.released, true, 'and releases the stream');
    });

    if (spec.name === 'flightsql') {
      test('executePartitions, readPartition and readPartitions: the rows of the plain query, flechette tables', async () => {
        const { conn } = await open();
        const n = 5000;
        const sql = `WITH s AS (${spec.series(n)}) SELECT i, 'row ' || i AS label FROM s ORDER BY i`;
        const plain = await conn.query(sql);
        const { partitions } = await conn.executePartitions(sql);
        assert.ok(partitions.length >= 1);
        const one: unknown[] = [];
        for (const d of partitions) {
          const r = await conn.readPartition(d);
          sameSchema(r.schema, plain.schema, 'readPartition schema');
          for await (const b of r) {
            assert.ok(b instanceof ImportedTable);
            one.push(...rowsOf(b));
          }
          assert.equal(r.released, true);
        }
        const many: unknown[] = [];
        const reader = await conn.readPartitions([...partitions, ...partitions], { concurrency: 2, ordered: true });
        for await (const { batch } of reader) many.push(...rowsOf(batch));
        assert.equal(reader.released, true);
        try {
          assert.deepEqual(one, rowsOf(plain));
          assert.deepEqual(many, [...rowsOf(plain), ...rowsOf(plain)]);
          await arrowJs(sql, (theirs) => sameResult(plain, theirs, 'the plain query'));
        } finally {
          plain.release();
        }
      });
    } else {
      test('executePartitions and readPartition: an AdbcError with status NOT_IMPLEMENTED (no partitioned results); the connection stays usable', async () => {
        const { conn } = await open();
        const e = await rejection(conn.executePartitions(`WITH s AS (${spec.series(3)}) SELECT i FROM s`));
        assert.ok(e instanceof AdbcError && e.status === AdbcStatus.NOT_IMPLEMENTED && e.operation === 'AdbcStatementExecutePartitions', String(e));
        const r = await rejection(conn.readPartition(Uint8Array.of(1, 2, 3)));
        assert.ok(r instanceof AdbcError && r.status === AdbcStatus.NOT_IMPLEMENTED, String(r));
        const t = await conn.query(`WITH s AS (${spec.series(3)}) SELECT i FROM s`);
        assert.equal(t.numRows, 3);
        t.release();
      });
    }
  });
}

describe('arrow-device/flechette/adbc with arquero and flechette\'s read options (DuckDB)', { skip: DUCKDB.missing }, () => {
  const opened: AdbcDatabase[] = [];
  afterEach(async () => {
    for (const db of opened.splice(0)) await db.close();
    await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
    assert.deepEqual([accounting().liveImports, accounting().liveExports], [0, 0], 'nothing left live');
  });
  async function open(spec: DriverSpec = DUCKDB): Promise<AdbcConnection> {
    const db = new AdbcDatabase(spec.options());
    opened.push(db);
    return db.connect();
  }

  test('arquero: aq.fromArrow of a DuckDB result, grouped and rolled up, equals the same aggregate in SQL', async () => {
    const conn = await open();
    await conn.execute("CREATE TABLE sales AS SELECT range AS id, ['north', 'south', 'east'][range % 3 + 1] AS region, (range * 37) % 101 + 0.5 AS amount FROM range(3000)");
    const rows = await conn.query('SELECT id, region, amount FROM sales');
    const sql = await conn.query('SELECT region, COUNT(*)::INTEGER AS n, SUM(amount) AS total, MAX(amount) AS top FROM sales GROUP BY region ORDER BY region');
    try {
      // A cast: arquero 8's ArrowInput types schema.metadata as a Map (flechette 2.6 has null there); it reads flechette tables.
      const dt = aq.fromArrow(rows as never).groupby('region').rollup({ n: aq.op.count(), total: aq.op.sum('amount'), top: aq.op.max('amount') }).orderby('region');
      const ours = dt.objects() as { region: string; n: number; total: number; top: number }[];
      const theirs = sql.toArray() as { region: string; n: number; total: number; top: number }[];
      assert.equal(ours.length, 3);
      assert.deepEqual(ours.map((r) => [r.region, r.n, r.top]), theirs.map((r) => [r.region, r.n, r.top]));
      for (const [k, r] of ours.entries()) assert.ok(Math.abs(r.total - theirs[k]!.total) < 1e-6, `${r.region}: ${r.total} vs ${theirs[k]!.total}`);
    } finally {
      rows.release();
      sql.release();
    }
  });

  test('flechette\'s extraction options reach every result of a database: { extraction: { useBigInt: true } } reads a BIGINT beyond 2^53', async () => {
    const big = 2n ** 53n + 1n;
    const plain = await open();
    const t0 = await plain.query(`SELECT ${big}::BIGINT AS big`);
    try {
      // Without it flechette refuses the value rather than lose it: the option is what changes the reading.
      assert.throws(() => t0.getChild('big').at(0));
    } finally {
      t0.release();
    }
    const db = new AdbcDatabase({ ...DUCKDB.options(), extraction: { useBigInt: true } });
    opened.push(db);
    const conn = await db.connect();
    const t = await conn.query(`SELECT ${big}::BIGINT AS big`);
    try {
      assert.equal(t.getChild('big').at(0), big);
    } finally {
      t.release();
      await conn.close();
    }
  });

  test('AdbcDatabase.open (the init on a worker thread) gives flechette results and keeps the extraction options', async () => {
    const big = 2n ** 53n + 1n;
    const db = await AdbcDatabase.open({ ...DUCKDB.options(), extraction: { useBigInt: true } });
    opened.push(db);
    const conn = await db.connect();
    const t = await conn.query(`SELECT ${big}::BIGINT AS big`);
    try {
      assert.ok(t instanceof Table, 'a flechette Table');
      assert.equal(t.getChild('big').at(0), big);
    } finally {
      t.release();
      await conn.close();
    }
  });
});
