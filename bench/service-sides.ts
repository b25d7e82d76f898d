/**
 * What the parts of `npm run bench:service` (bench/service.bench.ts) share:
 * the table, the query shapes and their checks, and the sides that answer
 * them: ours (arrow-device/adbc), each database's JavaScript peer, and the
 * driver floor (the fewest raw ADBC calls that give the same result).
 *
 * The table `svc` (id INTEGER PRIMARY KEY, v DOUBLE, t TEXT), 100,000 rows,
 * id = 0..99,999, v = id / 2, t = 'name ' || id: the same in PostgreSQL,
 * DuckDB and SQLite. A query of n rows reads `id >= lo AND id < lo + n`
 * (`id = lo` for one row), lo moved on at every query, so that no side
 * answers a repeat; every result is checked by its row count and its sum
 * of id (n * lo + n (n - 1) / 2), on every side, inside the timed region.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { tableFromArrays, type Table } from 'apache-arrow';
import { allocArrowArrayStream, exportRecordBatch, freeArrowArray, freeArrowArrayStream, freeArrowSchema, nativeMemory, NULL, type Ptr, type Signature } from '../src/index.js';
import type { AdbcConnection, AdbcDatabase } from '../src/adbc/index.js';
import { allocHandle, freeNative, loadLibrary, type Driver } from '../src/adbc/driver.js';
import { defaultEntrypoint } from '../src/adbc/index.js';
import { DUCKDB, POSTGRESQL, SQLITE, type DriverName, type DriverSpec } from '../test/adbc/drivers.js';
import { open, rawConnection, type BenchDb } from './adbc-raw.js';

export const TABLE_ROWS = 100_000;
export const SHAPE_ROWS = [1, 1_000, 10_000] as const;
export type Mode = 'literal' | 'params';

/** One query shape: how many rows, literal SQL or bound parameters. */
export interface Shape {
  rows: number;
  mode: Mode;
}

export const SHAPES: Shape[] = SHAPE_ROWS.flatMap((rows) => (['literal', 'params'] as const).map((mode) => ({ rows, mode })));
export const shapeKey = (s: Shape): string => `${s.rows} ${s.mode}`;

/** The lower bound of the i-th query of `rows` rows: moved on by a prime, so that successive queries differ. */
export const startOf = (i: number, rows: number): number => (i * 7919) % (TABLE_ROWS - rows + 1);

/** The result every side must give for `lo`: its row count and the sum of id. */
export const expected = (lo: number, rows: number): { count: number; sum: number } => ({ count: rows, sum: rows * lo + (rows * (rows - 1)) / 2 });

/** A query: its SQL and, in `params` mode, the values bound to its placeholders (int32). */
export interface Query {
  sql: string;
  params: number[] | undefined;
}

const SELECT = 'SELECT id, v, t FROM svc WHERE ';

/** The SQL of a shape, as templates: the literal form with `{lo}` and `{hi}`, the parameterised form with the driver's placeholders, and how many parameters it takes ([lo] or [lo, hi]). */
export function templates(spec: DriverSpec, rows: number): { literal: string; params: string; nparams: 1 | 2 } {
  if (rows === 1) return { literal: `${SELECT}id = {lo}`, params: `${SELECT}id = ${spec.param(1)}`, nparams: 1 };
  return { literal: `${SELECT}id >= {lo} AND id < {hi}`, params: `${SELECT}id >= ${spec.param(1)} AND id < ${spec.param(2)}`, nparams: 2 };
}

export function queryOf(spec: DriverSpec, shape: Shape, lo: number): Query {
  const t = templates(spec, shape.rows);
  const hi = lo + shape.rows;
  if (shape.mode === 'literal') return { sql: t.literal.replace('{lo}', String(lo)).replace('{hi}', String(hi)), params: undefined };
  return { sql: t.params, params: t.nparams === 1 ? [lo] : [lo, hi] };
}

export function specOf(driver: DriverName): DriverSpec {
  const spec = { postgresql: POSTGRESQL, duckdb: DUCKDB, sqlite: SQLITE }[driver as 'postgresql' | 'duckdb' | 'sqlite'];
  if (!spec) throw new Error(`bench:service runs PostgreSQL, DuckDB and SQLite, not ${driver}`);
  return spec;
}

/** Makes the table through ours (`conn.execute`), with its primary key (the index on id). */
export async function createTable(spec: DriverSpec, options: BenchDb): Promise<void> {
  const types: Partial<Record<DriverName, string>> = {
    postgresql: 'id INTEGER PRIMARY KEY, v DOUBLE PRECISION, t TEXT',
    duckdb: 'id INTEGER PRIMARY KEY, v DOUBLE, t VARCHAR',
    sqlite: 'id INTEGER PRIMARY KEY, v REAL, t TEXT',
  };
  const db = open(options);
  const conn = await db.connect();
  try {
    await conn.execute('DROP TABLE IF EXISTS svc');
    await conn.execute(`CREATE TABLE svc (${types[spec.name]})`);
    await conn.execute(`INSERT INTO svc SELECT CAST(i AS INTEGER), CAST(i AS DOUBLE PRECISION) / 2, 'name ' || i FROM (${spec.series(TABLE_ROWS)}) AS s`);
    if (spec.name !== 'duckdb') await conn.execute('ANALYZE svc');
  } finally {
    await conn.close();
    await db.close();
  }
}

/** The libduckdb.so that @duckdb/node-api loads, so that ours runs the same library; undefined where it is not installed. */
export function nodeApiDuckdb(): string | undefined {
  try {
    const require = createRequire(import.meta.url);
    const p = join(dirname(require.resolve(`@duckdb/node-bindings-${process.platform}-${process.arch}/package.json`)), 'libduckdb.so');
    return existsSync(p) ? p : undefined;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// The sides

/** What a side gives back for one query: checked against `expected`. */
export interface Answer {
  count: number;
  sum: number;
}

/** A side, opened: `run` answers one query (fetch every row, count them, sum id). */
export interface Client {
  run(q: Query): Promise<Answer>;
  close(): Promise<void>;
}

/** How a process reaches the peer's copy of the table. */
export type PeerArgs = { name: 'pg'; uri: string } | { name: '@duckdb/node-api'; path: string } | { name: 'node:sqlite'; path: string };

export function check(what: string, q: Query, got: Answer, want: { count: number; sum: number }): void {
  if (got.count !== want.count || got.sum !== want.sum) {
    throw new Error(`${what}: ${q.sql} ${q.params ? JSON.stringify(q.params) : ''} gave ${got.count} rows summing to ${got.sum}, expected ${want.count} rows summing to ${want.sum}`);
  }
}

/** Ours' parameters: a one-row arrow-js Table of int32 columns, as a user binds them. */
export const paramsTable = (params: number[]): Table => tableFromArrays(Object.fromEntries(params.map((x, i) => [`p${i + 1}`, Int32Array.of(x)])));

/** The row count and the sum of column `id` of an arrow-js Table (int32 or int64). */
export function answerOf(t: Table): Answer {
  let sum = 0;
  for (const d of t.getChild('id')!.data) {
    const v = d.values as Int32Array | BigInt64Array;
    if (v instanceof BigInt64Array) for (let k = 0; k < d.length; k++) sum += Number(v[k]!);
    else for (let k = 0; k < d.length; k++) sum += v[k]!;
  }
  return { count: t.numRows, sum };
}

/** Ours on one connection: `conn.query(sql)`, or `conn.query(sql, params)`, the arrow-js Table released after the sum. */
export function oursOn(conn: Pick<AdbcConnection, 'query'>): (q: Query) => Promise<Answer> {
  return async (q) => {
    const t = await conn.query(q.sql, q.params && paramsTable(q.params));
    try {
      return answerOf(t);
    } finally {
      t.release();
    }
  };
}

export async function openOurs(options: BenchDb): Promise<Client & { db: AdbcDatabase; conn: AdbcConnection }> {
  const db = open(options);
  const conn = await db.connect();
  return {
    db,
    conn,
    run: oursOn(conn),
    close: async () => {
      await conn.close();
      await db.close();
    },
  };
}

/** The subset of node:sqlite used here (@types/node 20 has no types for it). */
interface SqliteDatabase {
  prepare(sql: string): { all(...params: number[]): Record<string, unknown>[] };
  close(): void;
}

/**
 * The peers, each in its fastest documented form for a whole result (the
 * forms bench:adbc's peers use): `pg` with `rowMode: 'array'` (literal SQL
 * goes as a simple query, values as Parse/Bind/Execute), @duckdb/node-api's
 * `runAndReadAll(sql, values)` + `getColumnsJS()`, node:sqlite's
 * `prepare(sql).all(...values)` (a statement per query, as ours makes one).
 */
export async function openPeer(p: PeerArgs): Promise<Client> {
  switch (p.name) {
    case 'pg': {
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: p.uri });
      await client.connect();
      return { run: pgRun((c) => client.query(c)), close: () => client.end() };
    }
    case '@duckdb/node-api': {
      const { DuckDBInstance } = await import('@duckdb/node-api');
      const instance = await DuckDBInstance.create(p.path, { access_mode: 'READ_ONLY' });
      const conn = await instance.connect();
      return {
        run: duckdbRun(conn),
        close: async () => {
          conn.closeSync();
          instance.closeSync();
        },
      };
    }
    case 'node:sqlite': {
      const { DatabaseSync } = (await import('node:sqlite' as string)) as { DatabaseSync: new (path: string, o?: { readOnly?: boolean }) => SqliteDatabase };
      const db = new DatabaseSync(p.path, { readOnly: true });
      return {
        run: async (q) => {
          const rows = db.prepare(q.sql).all(...(q.params ?? []));
          let sum = 0;
          for (const row of rows) sum += row.id as number;
          return { count: rows.length, sum };
        },
        close: async () => db.close(),
      };
    }
  }
}

type PgQuery = (c: { text: string; values?: number[]; rowMode: 'array' }) => Promise<{ rows: unknown[][] }>;

/** `pg`'s query (a Client's or a Pool's), the rows as arrays, id summed. */
export function pgRun(query: PgQuery): (q: Query) => Promise<Answer> {
  return async (q) => {
    const r = await query({ text: q.sql, values: q.params, rowMode: 'array' });
    let sum = 0;
    for (const row of r.rows) sum += row[0] as number;
    return { count: r.rows.length, sum };
  };
}

interface DuckdbConn {
  runAndReadAll(sql: string, values?: number[]): Promise<{ currentRowCount: number; getColumnsJS(): unknown[][] }>;
}

/** @duckdb/node-api's query on one connection, the columns as JS values, id summed. */
export function duckdbRun(conn: DuckdbConn): (q: Query) => Promise<Answer> {
  return async (q) => {
    const reader = await (q.params ? conn.runAndReadAll(q.sql, q.params) : conn.runAndReadAll(q.sql));
    const ids = reader.getColumnsJS()[0] ?? [];
    let sum = 0;
    for (const x of ids) sum += x as number;
    return { count: reader.currentRowCount, sum };
  };
}

// ---------------------------------------------------------------------------------------------
// The floor: the fewest raw driver calls that give the same result

const mem = nativeMemory();
const GET_NEXT: Signature = { name: 'get_next', result: 'int32', params: ['pointer', 'pointer'] };
const RELEASE: Signature = { name: 'release', result: 'void', params: ['pointer'] };
/** `AdbcStatusCode (*)(void*, void*, void*, struct AdbcError*)`: StatementBind; the status is a uint8_t (masked). */
const BIND: Signature = { name: 'AdbcStatementBind', result: 'int32', params: ['pointer', 'pointer', 'pointer', 'pointer'] };
const DRIVER_RELEASE: Signature = { name: 'AdbcDriver.release', result: 'int32', params: ['pointer', 'pointer'] };
/** adbc.h: `struct AdbcDriver`'s `release` and `StatementBind` (the 3rd and 19th pointers), `struct AdbcError` (48 bytes, `message` first, `release` at 24). */
const DRIVER_TABLE = { release: 16n, StatementBind: 144n, size: 512 } as const;
const ERROR = { message: 0n, release: 24n, size: 48 } as const;

/**
 * The driver's own `AdbcStatementBind` (one array and its schema, no
 * stream), which src/adbc/driver.ts declares no prototype for: read from a
 * second driver table that the entrypoint fills (ADBC 1.1.0), which is
 * released at once (its function pointers stay: the library is never unloaded).
 */
function statementBindOf(library: string, entrypoint: string): (stmt: Ptr, array: Ptr, schema: Ptr) => void {
  const init = loadLibrary(library).func(entrypoint, 'uint8_t', ['int', 'void *', 'void *']) as (version: number, table: Ptr, err: Ptr) => number;
  const table = mem.alloc(DRIVER_TABLE.size);
  const err = mem.alloc(ERROR.size);
  let bind: Ptr;
  try {
    mem.copyIn(table, new Uint8Array(DRIVER_TABLE.size));
    mem.copyIn(err, new Uint8Array(ERROR.size));
    const status = init(1_001_000, table, err) & 0xff;
    if (status !== 0) throw new Error(`${entrypoint}(1.1.0): status ${status}`);
    bind = mem.readPtr(table + DRIVER_TABLE.StatementBind);
    const release = mem.readPtr(table + DRIVER_TABLE.release);
    if (release !== NULL) mem.call(release, DRIVER_RELEASE, table, err);
  } finally {
    mem.free(table);
    mem.free(err);
  }
  if (bind === NULL) throw new Error(`the driver ${library} has no AdbcStatementBind`);
  return (stmt, array, schema) => {
    const e = mem.alloc(ERROR.size);
    try {
      mem.copyIn(e, new Uint8Array(ERROR.size));
      const status = Number(mem.call(bind, BIND, stmt, array, schema, e)) & 0xff;
      if (status !== 0) {
        const message = mem.readPtr(e + ERROR.message);
        const text = message === NULL ? '' : mem.readCString(message);
        const release = mem.readPtr(e + ERROR.release);
        if (release !== NULL) mem.call(release, RELEASE, e);
        throw new Error(`AdbcStatementBind: status ${status}: ${text}`);
      }
    } finally {
      mem.free(e);
    }
  };
}

/**
 * The calls of one floor query, in µs: wall time, the part of it that held
 * the JS thread (all of a synchronous call; the marshalling of an async one,
 * until it returns its promise), and the JS thread's CPU time in that part
 * (Linux; NaN elsewhere): held well
 * above its CPU is time the thread waited (a lock, or the CPU taken by the
 * driver's own threads), not work.
 */
export type CallTimes = Record<string, { wall: number; held: number; cpu: number; calls: number }>;

/**
 * The JS thread's CPU time in µs: `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`
 * through koffi (libc, Linux), exact at each call; NaN elsewhere.
 * (`process.threadCpuUsage` and /proc/thread-self/schedstat move in
 * scheduler ticks or at context switches here: too coarse for one call.)
 */
const threadCpu = ((): (() => number) => {
  if (process.platform !== 'linux') return () => NaN;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    const timespec = koffi.struct('bench_service_timespec', { sec: 'int64_t', nsec: 'int64_t' });
    const clockGettime = koffi.load('libc.so.6').func('clock_gettime', 'int', ['int', koffi.out(koffi.pointer(timespec))]);
    const CLOCK_THREAD_CPUTIME_ID = 3;
    const out: { sec?: number | bigint; nsec?: number | bigint } = {};
    return () => {
      if (clockGettime(CLOCK_THREAD_CPUTIME_ID, out) !== 0) return NaN;
      return Number(out.sec) * 1e6 + Number(out.nsec) / 1e3;
    };
  } catch {
    return () => NaN;
  }
})();

/**
 * The floor for a query: `StatementNew`, `StatementSetSqlQuery`, with
 * parameters `StatementBind` of one exported row (no `StatementPrepare`: the
 * three drivers take parameters bound to an unprepared statement, and
 * `StatementBind` of an array, unlike `StatementBindStream`, leaves the
 * driver no stream to pull from the JS thread), `StatementExecuteQuery`,
 * `get_next` to the end (each array's length and its id column summed from
 * the buffer, then released), `StatementRelease`. `sync: false` makes
 * `StatementExecuteQuery` and each `get_next` on a worker thread (koffi's
 * async calls, as ours makes them), `sync: true` on the JS thread. With
 * `times`, each call's time is added to it.
 */
export async function floorQuery(
  d: Driver,
  conn: Ptr,
  q: Query,
  { sync, idBytes, bind, times }: { sync: boolean; idBytes: 4 | 8; bind: ReturnType<typeof statementBindOf>; times?: CallTimes },
): Promise<Answer> {
  const lay = mem.layouts.ArrowArrayStream.offsets;
  const arr = mem.layouts.ArrowArray;
  const o = arr.offsets;
  const timed = <T>(name: string, f: () => T): T => {
    if (!times) return f();
    const c0 = threadCpu();
    const t0 = performance.now();
    const r = f();
    const dt = (performance.now() - t0) * 1000;
    const cpu = threadCpu() - c0;
    const e = (times[name] ??= { wall: 0, held: 0, cpu: 0, calls: 0 });
    e.wall += dt;
    e.held += dt;
    e.cpu += cpu;
    e.calls++;
    return r;
  };
  const timedAsync = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
    if (!times) return f();
    const c0 = threadCpu();
    const t0 = performance.now();
    const p = f();
    const held = (performance.now() - t0) * 1000;
    const cpu = threadCpu() - c0;
    const r = await p;
    const e = (times[name] ??= { wall: 0, held: 0, cpu: 0, calls: 0 });
    e.wall += (performance.now() - t0) * 1000;
    e.held += held;
    e.cpu += cpu;
    e.calls++;
    return r;
  };
  const stmt = allocHandle();
  timed('StatementNew', () => d.call('StatementNew', conn, stmt));
  const stream = allocArrowArrayStream();
  try {
    timed('StatementSetSqlQuery', () => d.call('StatementSetSqlQuery', stmt, q.sql));
    if (q.params) {
      // Not a driver call, but part of every query with parameters: timed too (the JS thread's).
      const { schema, array } = timed('params: tableFromArrays + exportRecordBatch', () => exportRecordBatch(paramsTable(q.params!).batches[0]!));
      try {
        timed('StatementBind', () => bind(stmt, array, schema));
      } finally {
        freeArrowArray(array); // moved out by the driver: frees our struct
        freeArrowSchema(schema);
      }
    }
    if (sync) timed('StatementExecuteQuery', () => d.call('StatementExecuteQuery', stmt, stream, NULL));
    else await timedAsync('StatementExecuteQuery', () => d.callAsync('StatementExecuteQuery', stmt, stream, NULL));
    const getNext = mem.readPtr(stream + BigInt(lay.get_next!));
    let count = 0;
    let sum = 0;
    const out = mem.alloc(arr.size);
    try {
      for (;;) {
        const rc = (sync ? timed('get_next', () => mem.call(getNext, GET_NEXT, stream, out)) : await timedAsync('get_next', () => mem.callAsync(getNext, GET_NEXT, stream, out))) as number;
        if (rc !== 0) throw new Error(`get_next: ${rc}`);
        const release = mem.readPtr(out + BigInt(o.release!));
        if (release === NULL) break;
        try {
          const n = Number(mem.readI64(out + BigInt(o.length!)));
          count += n;
          const id = mem.readPtr(mem.readPtr(out + BigInt(o.children!)));
          const values = mem.readPtr(mem.readPtr(id + BigInt(o.buffers!)) + 8n);
          const at = values + BigInt(Number(mem.readI64(id + BigInt(o.offset!))) * idBytes);
          if (n > 0) {
            const bytes = mem.view(at, n * idBytes);
            if (idBytes === 4) {
              const v = new Int32Array(bytes.buffer, bytes.byteOffset, n);
              for (let k = 0; k < n; k++) sum += v[k]!;
            } else {
              const v = new BigInt64Array(bytes.buffer, bytes.byteOffset, n);
              for (let k = 0; k < n; k++) sum += Number(v[k]!);
            }
          }
        } finally {
          mem.call(release, RELEASE, out);
        }
      }
    } finally {
      mem.free(out);
    }
    return { count, sum };
  } finally {
    freeArrowArrayStream(stream);
    timed('StatementRelease', () => d.call('StatementRelease', stmt));
    freeNative(stmt);
  }
}

/** The width of id in the driver's results: SQLite's driver gives every INTEGER as int64. */
export const idBytesOf = (driver: DriverName): 4 | 8 => (driver === 'sqlite' ? 8 : 4);

export async function openFloor(options: BenchDb, driver: DriverName, sync: boolean): Promise<Client & { times(q: Query, t: CallTimes): Promise<Answer> }> {
  const raw = await rawConnection(options);
  const idBytes = idBytesOf(driver);
  const bind = statementBindOf(options.driver, options.entrypoint ?? defaultEntrypoint(options.driver));
  return {
    run: (q) => floorQuery(raw.d, raw.conn, q, { sync, idBytes, bind }),
    times: (q, t) => floorQuery(raw.d, raw.conn, q, { sync, idBytes, bind, times: t }),
    close: async () => raw.close(),
  };
}
