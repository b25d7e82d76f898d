/**
 * `npm run bench:adbc`: arrow-device/adbc against the IPC route the official
 * JavaScript driver manager takes, per driver (DuckDB, SQLite, PostgreSQL
 * against a server started here), beside each driver's own floor.
 *
 * Peak memory: each route in a fresh child process of its own (this file
 * with `--child`), so that the peak is the route's own: the child sets up,
 * resets its peak resident size (`/proc/self/clear_refs`, 5), runs the
 * route once, and reports the peak (`VmHWM`) over its resident size just
 * before. Time: one child per driver runs every query route (then one runs
 * every ingest route) round-robin, `BENCH_REPS` rounds after a warm-up, so
 * that each route sees the same machine (routes timed in separate processes
 * at separate moments differed by up to 1.9x on a loaded machine), with no
 * forced collection between runs; medians printed, then the one-row query
 * the same way, 200 rounds.
 *
 * - query: `SELECT *` of 1M rows (int64, float64, text) into an arrow-js
 *   Table, from a table in a database file (DuckDB, SQLite) or on the server
 *   (PostgreSQL) that the parent made before. Ours: the driver's stream
 *   imported zero-copy (`conn.query`). IPC route: the same stream, each
 *   batch serialised to Arrow IPC and read back with arrow-js (what the
 *   official package does, in Rust and JS). Floor: the driver's stream
 *   drained by hand through the raw ADBC calls, `get_next` on a worker
 *   thread as ours, each array released as it comes, nothing imported; and
 *   the same floor with every array kept to the end, as a Table keeps them.
 *   Also ours with `{ offThread: false }` (get_next on the JS thread: no
 *   thread hop per batch) against the floor drained the same way.
 * - ingest: the same 1M rows as a JS-owned arrow-js Table of 16 batches into
 *   a new table (in memory for DuckDB and SQLite; dropped after, off the clock). Ours: `conn.ingest`, a
 *   zero-copy `exportArrayStream` the driver reads. IPC route: `tableToIPC`,
 *   read back by arrow-js, then ingested (the official package decodes the
 *   IPC in Rust and binds a native stream: modelled here by arrow-js and our
 *   export). Floor: the driver fed a C stream (bench/adbc-replay.c) of the
 *   same batches exported before the clock starts: the driver's own insert
 *   work, no JavaScript while it runs.
 *
 * Goals (issue 31): a query within 1.1x of the floor; a query's peak at most
 * the result's bytes + 20%; ingest at least 1.5x the IPC route. Printed
 * with the figures, met or not, with the machine's load average.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import { Float64, Int64, makeData, RecordBatch, Schema, Field, Struct, Table, tableFromIPC, tableToIPC, Utf8, type Data } from 'apache-arrow';
import { allocArrowArrayStream, exportArray, exportSchema, freeArrowArray, freeArrowArrayStream, freeArrowSchema, nativeMemory, NULL, type Ptr } from '../src/index.js';
import { IngestMode, type AdbcConnection } from '../src/adbc/index.js';
import type { Driver } from '../src/adbc/driver.js';
import { DRIVERS, type DriverName, type DriverSpec } from '../test/adbc/drivers.js';
import { postgresMissing, startPostgres, type PostgresServer } from '../test/adbc/postgres.js';
import { run, which } from '../test/helpers/tools.js';
import { benchDb, drain, open, peakOf, rawConnection, withStatement, type BenchDb } from './adbc-raw.js';
import { benchPartitions } from './adbc-partitions.js';

const ROWS = 1_000_000;
const INGEST_BATCH = 65_536;
const REPS = Number(process.env.BENCH_REPS ?? 9);
const LATENCY_REPS = 200;
const mem = nativeMemory();
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (n: number): string => `${(n / 2 ** 20).toFixed(1)} MiB`;

/** The routes whose peak memory is measured, each in a fresh process. */
const MEMORY_ROUTES = ['query-floor', 'query-floor-kept', 'query-ours', 'query-ipc', 'ingest-floor', 'ingest-ours', 'ingest-ipc'] as const;
type MemoryRoute = (typeof MEMORY_ROUTES)[number];

/** What a child does: one route's memory, or the times of every query route, or of every ingest route. */
type Task = { kind: 'memory'; route: MemoryRoute } | { kind: 'time-query' } | { kind: 'time-ingest' };

interface ChildArgs {
  driver: DriverName;
  task: Task;
  /** The database the queries read (DuckDB, SQLite: a file; PostgreSQL: the server). */
  queryOptions: BenchDb;
  /** Where ingestion writes (an in-memory database, or the server). */
  ingestOptions: BenchDb;
  replay?: string;
}

interface ChildResult {
  /** Times by route (time tasks): wall under the route's name, CPU under `cpu-<route>`, `latency-<route>` for the one-row query. */
  ms?: Record<string, number[]>;
  /** Peak resident size over the baseline (memory tasks). */
  peak: number;
  /** Whether the peak could be reset before the route (else: growth over the peak before). */
  exact: boolean;
  /** The bytes of the result's buffers (query), or of the ingested table's (ingest). */
  bytes: number;
  batches: number;
}

/** The bytes of a table's buffers. */
function tableBytes(t: Table): number {
  let n = 0;
  const add = (d: Data): void => {
    for (const b of [d.values, d.valueOffsets, d.nullBitmap] as (ArrayBufferView | undefined)[]) n += b?.byteLength ?? 0;
    for (const c of d.children) add(c);
  };
  for (const b of t.batches) add(b.data);
  return n;
}


/** The IPC route of a query: every batch of the driver's stream serialised to IPC and read back by arrow-js. */
async function queryViaIpc(conn: AdbcConnection, sql: string): Promise<Table> {
  const batches: RecordBatch[] = [];
  const reader = await conn.queryStream(sql);
  for await (const b of reader) batches.push(...tableFromIPC(tableToIPC(new Table([b]), 'stream')).batches);
  return new Table(batches);
}

/** The ingested rows, JS-owned: i int64, x = i / 2 float64, s = 'text ' + i, in batches of INGEST_BATCH rows. */
function ingestData(): Table {
  const schema = new Schema([new Field('i', new Int64()), new Field('x', new Float64()), new Field('s', new Utf8())]);
  const enc = new TextEncoder();
  const batches: RecordBatch[] = [];
  for (let start = 0; start < ROWS; start += INGEST_BATCH) {
    const n = Math.min(INGEST_BATCH, ROWS - start);
    const i = new BigInt64Array(n);
    const x = new Float64Array(n);
    const parts: Uint8Array[] = [];
    const offsets = new Int32Array(n + 1);
    let bytes = 0;
    for (let k = 0; k < n; k++) {
      i[k] = BigInt(start + k);
      x[k] = (start + k) * 0.5;
      const s = enc.encode(`text ${start + k}`);
      parts.push(s);
      bytes += s.byteLength;
      offsets[k + 1] = bytes;
    }
    const data = new Uint8Array(bytes);
    for (let k = 0; k < n; k++) data.set(parts[k]!, offsets[k]!);
    const children = [
      makeData({ type: new Int64(), length: n, data: i }),
      makeData({ type: new Float64(), length: n, data: x }),
      makeData({ type: new Utf8(), length: n, valueOffsets: offsets, data }),
    ];
    batches.push(new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: n, children })));
  }
  return new Table(batches);
}

type MakeReplay = (out: Ptr, schema: Ptr, arrays: Ptr, n: number) => number;
const replays = new Map<string, MakeReplay>();

/**
 * The ingest floor: the driver ingests a C stream (bench/adbc-replay.c) of
 * `data`'s batches, exported before `f`'s clock starts and released after.
 */
async function withReplay<T>(replay: string, data: Table, f: (stream: Ptr) => Promise<T>): Promise<T> {
  let make = replays.get(replay);
  if (!make) {
    make = koffi.load(replay).func('int rp_make_stream(uintptr_t out, uintptr_t schema, uintptr_t arrays, int64_t n)') as MakeReplay;
    replays.set(replay, make);
  }
  const schema = exportSchema(data.schema);
  const arrays = data.batches.map((b) => exportArray(b));
  const table = mem.alloc(arrays.length * 8);
  arrays.forEach((p, k) => mem.writePtr(table + BigInt(k * 8), p));
  const stream = allocArrowArrayStream();
  try {
    if (make(stream, schema, table, arrays.length) !== 0) throw new Error('rp_make_stream failed');
    return await f(stream);
  } finally {
    freeArrowArrayStream(stream);
    mem.free(table);
    for (const p of arrays) freeArrowArray(p);
    freeArrowSchema(schema);
  }
}

/** `adbc.ingest.*` of `stream` into a new table `table` through the raw calls: what `conn.ingest` does. */
async function rawIngest(d: Driver, conn: Ptr, table: string, stream: Ptr): Promise<void> {
  await withStatement(d, conn, async (stmt) => {
    d.call('StatementSetOption', stmt, 'adbc.ingest.target_table', table);
    d.call('StatementSetOption', stmt, 'adbc.ingest.mode', IngestMode.Create);
    d.call('StatementBindStream', stmt, stream);
    await d.callAsync('StatementExecuteQuery', stmt, NULL, NULL);
  });
}

/** A statement that returns no rows, through the raw calls. */
async function rawExecute(d: Driver, conn: Ptr, sql: string): Promise<void> {
  await withStatement(d, conn, async (stmt) => {
    d.call('StatementSetSqlQuery', stmt, sql);
    await d.callAsync('StatementExecuteQuery', stmt, NULL, NULL);
  });
}

const SELECT = 'SELECT * FROM bench';
const ONE_ROW = 'SELECT 1 AS x';
const releaseTable = (t: Table): void => (t as Table & { release?: () => void }).release?.();

/** What a child needs open: the module's connection and a raw one (to the same database), and the ingested data. */
interface Opened {
  conn: AdbcConnection;
  raw: Awaited<ReturnType<typeof rawConnection>>;
  close(): Promise<void>;
}

async function openBoth(options: BenchDb): Promise<Opened> {
  const db = open(options);
  const conn = await db.connect();
  const raw = await rawConnection(options);
  return {
    conn,
    raw,
    close: async () => {
      raw.close();
      await conn.close();
      await db.close();
    },
  };
}

/** A route of a query: runs `sql` once, everything it made released before it resolves; the batch count. */
type QueryRoute = (o: Opened, sql: string) => Promise<number>;

const QUERY_ROUTES = {
  'floor': (o, sql) => drain(o.raw.d, o.raw.conn, sql, { keep: false, sync: false }),
  'floor-kept': (o, sql) => drain(o.raw.d, o.raw.conn, sql, { keep: true, sync: false }),
  'floor-sync-kept': (o, sql) => drain(o.raw.d, o.raw.conn, sql, { keep: true, sync: true }),
  'ours': async (o, sql) => {
    const t = await o.conn.query(sql);
    releaseTable(t);
    return t.batches.length;
  },
  'ours-sync': async (o, sql) => {
    const t = await o.conn.query(sql, undefined, { offThread: false });
    releaseTable(t);
    return t.batches.length;
  },
  'ipc': async (o, sql) => (await queryViaIpc(o.conn, sql)).batches.length,
} satisfies Record<string, QueryRoute>;
type QueryRouteName = keyof typeof QUERY_ROUTES;

/** The wall time of a run, and the CPU time of the whole process (every thread) during it, in ms. */
interface Timing {
  wall: number;
  cpu: number;
}

/** A route of an ingestion of `data` into a new table `table`; times the ingestion alone. */
type IngestRoute = (o: Opened, data: Table, table: string, replay: string | undefined) => Promise<Timing>;

const clock = async (f: () => Promise<unknown>): Promise<Timing> => {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await f();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { wall, cpu: (c.user + c.system) / 1000 };
};

const INGEST_ROUTES = {
  // The export before and the release after are not the driver's work: outside the clock.
  'floor': (o, data, table, replay) => withReplay(replay!, data, (s) => clock(() => rawIngest(o.raw.d, o.raw.conn, table, s))),
  'ours': (o, data, table) => clock(() => o.conn.ingest(table, data, { mode: IngestMode.Create })),
  'ipc': (o, data, table) => clock(() => o.conn.ingest(table, tableFromIPC(tableToIPC(data, 'stream')), { mode: IngestMode.Create })),
} satisfies Record<string, IngestRoute>;
type IngestRouteName = keyof typeof INGEST_ROUTES;

/**
 * A child's work. `memory`: one route's first run in this fresh process, its
 * peak over the baseline. `time`: every route of the driver, round-robin
 * (so that each sees the same machine), after a warm-up, then the one-row
 * latency the same way.
 */
async function child(a: ChildArgs): Promise<ChildResult> {
  if (a.task.kind === 'memory') {
    const route = a.task.route;
    if (route.startsWith('query-')) {
      const name = route.slice(6) as QueryRouteName;
      const o = await openBoth(a.queryOptions);
      try {
        if (name === 'ours' || name === 'ipc') {
          // The result itself is measured too: held while the peak is read.
          const first = await peakOf(() => (name === 'ours' ? o.conn.query(SELECT) : queryViaIpc(o.conn, SELECT)));
          const r = { peak: first.peak, exact: first.exact, bytes: tableBytes(first.value), batches: first.value.batches.length };
          releaseTable(first.value);
          return r;
        }
        const first = await peakOf(() => QUERY_ROUTES[name](o, SELECT));
        return { peak: first.peak, exact: first.exact, bytes: 0, batches: first.value };
      } finally {
        await o.close();
      }
    }
    const name = route.slice(7) as IngestRouteName;
    const data = ingestData();
    const o = await openBoth(a.ingestOptions);
    const table = `bench_in_${name}`;
    try {
      const first = await peakOf(() => INGEST_ROUTES[name](o, data, table, a.replay));
      // Off the measure; on a server the table would outlive this process.
      if (name === 'floor') await rawExecute(o.raw.d, o.raw.conn, `DROP TABLE ${table}`);
      else await o.conn.execute(`DROP TABLE ${table}`);
      return { peak: first.peak, exact: first.exact, bytes: tableBytes(data), batches: data.batches.length };
    } finally {
      await o.close();
    }
  }
  const ms: Record<string, number[]> = {};
  // Wall time under the route's name, CPU time under `cpu-<route>`.
  const add = (k: string, t: Timing): void => {
    (ms[k] ??= []).push(t.wall);
    (ms[`cpu-${k}`] ??= []).push(t.cpu);
  };
  if (a.task.kind === 'time-query') {
    const o = await openBoth(a.queryOptions);
    try {
      const names = Object.keys(QUERY_ROUTES) as QueryRouteName[];
      for (const n of names) await QUERY_ROUTES[n](o, SELECT);
      // No forced collection between runs: a full collection discards V8's optimised code of the
      // import (its weak-object deoptimisation, see bench:wasm), and an application's queries do not run after one.
      for (let r = 0; r < REPS; r++) {
        for (const n of names) {
          add(n, await clock(() => QUERY_ROUTES[n](o, SELECT)));
        }
      }
      const one = ['floor', 'ours', 'ipc'] as const;
      for (let r = 0; r < LATENCY_REPS + 20; r++) {
        for (const n of one) {
          const t = await clock(() => QUERY_ROUTES[n](o, ONE_ROW));
          if (r >= 20) add(`latency-${n}`, t);
        }
      }
      return { ms, peak: 0, exact: true, bytes: 0, batches: 0 };
    } finally {
      await o.close();
    }
  }
  const data = ingestData();
  const o = await openBoth(a.ingestOptions);
  try {
    const names = (Object.keys(INGEST_ROUTES) as IngestRouteName[]).filter((n) => n !== 'floor' || a.replay);
    let k = 0;
    for (let r = -1; r < REPS; r++) {
      for (const n of names) {
        const table = `bench_in_${k++}`;
        const t = await INGEST_ROUTES[n](o, data, table, a.replay);
        if (r >= 0) add(n, t);
        // Through the connection that ingested: in memory, the raw one and the module's are two databases.
        if (n === 'floor') await rawExecute(o.raw.d, o.raw.conn, `DROP TABLE ${table}`);
        else await o.conn.execute(`DROP TABLE ${table}`);
      }
    }
    return { ms, peak: 0, exact: true, bytes: tableBytes(data), batches: data.batches.length };
  } finally {
    await o.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The parent: prepares each driver's database, runs one child per route, prints

function createSql(spec: DriverSpec): string {
  return `CREATE TABLE bench AS WITH s AS (${spec.series(ROWS)}) SELECT i, i * 0.5 AS x, 'text ' || i AS s FROM s`;
}

/** Builds bench/adbc-replay.c into `dir`; undefined (with the reason printed) where there is no C compiler. */
function buildReplay(dir: string): string | undefined {
  const near = fileURLToPath(new URL('.', import.meta.url));
  const src = [join(near, 'adbc-replay.c'), join(process.cwd(), 'bench', 'adbc-replay.c')].find((p) => existsSync(p));
  const cc = which('cc') ?? which('gcc');
  if (!src || !cc) {
    console.log(`adbc bench: no ingest floor (${!cc ? 'no C compiler' : 'bench/adbc-replay.c not found'})`);
    return undefined;
  }
  const out = join(dir, 'libadbc-replay.so');
  run(cc, ['-O2', '-shared', '-fPIC', '-o', out, src]);
  return out;
}

function runChild(args: ChildArgs): ChildResult {
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--child', JSON.stringify(args)], {
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`bench child ${args.driver} ${JSON.stringify(args.task)} failed (status ${r.status}): ${r.stderr || r.stdout}`);
  return JSON.parse(line) as ChildResult;
}

const load = (): string => loadavg().map((x) => x.toFixed(2)).join(' ');
const f1 = (x: number): string => x.toFixed(1);
const f2 = (x: number): string => x.toFixed(2);
const goal = (ok: boolean): string => (ok ? 'met' : 'not met');

async function benchDriver(spec: DriverSpec, dir: string, replay: string | undefined, server: PostgresServer | undefined): Promise<void> {
  const n = spec.name;
  const ingestOptions = benchDb(spec, server?.uri);
  // The queried table lives in a file (DuckDB, SQLite) or on the server, made here once; children read it.
  const file: Record<string, string> | undefined =
    n === 'duckdb' ? { path: join(dir, 'bench.duckdb') } : n === 'sqlite' ? { uri: join(dir, 'bench.sqlite') } : undefined;
  const writable = file ? benchDb(spec, undefined, file) : ingestOptions;
  {
    const db = open(writable);
    const conn = await db.connect();
    try {
      if (n === 'postgresql') await conn.execute('DROP TABLE IF EXISTS bench');
      await conn.execute(createSql(spec));
    } finally {
      await conn.close();
      await db.close();
    }
  }
  // A child opens the file twice (the module and the raw calls): DuckDB allows that read-only.
  const queryOptions = n === 'duckdb' ? benchDb(spec, undefined, { ...file!, access_mode: 'READ_ONLY' }) : writable;
  const args = { driver: n, queryOptions, ingestOptions, replay };

  const memory = new Map<MemoryRoute, ChildResult>();
  for (const route of MEMORY_ROUTES) {
    if (route === 'ingest-floor' && !replay) continue;
    memory.set(route, runChild({ ...args, task: { kind: 'memory', route } }));
  }
  const tq = runChild({ ...args, task: { kind: 'time-query' } }).ms!;
  const ti = runChild({ ...args, task: { kind: 'time-ingest' } });
  const q = (k: string): number => median(tq[k]!);
  const i = (k: string): number => median(ti.ms![k]!);

  const ours = q('ours');
  const ipc = q('ipc');
  const floor = q('floor');
  const kept = q('floor-kept');
  const batches = memory.get('query-ours')!.batches;
  console.log(`adbc ${n} query: ours ${f1(ours)} ms, ipc route ${f1(ipc)} ms, ratio ${f2(ipc / ours)}`);
  console.log(
    `adbc ${n} query floor, the driver's stream drained by hand (get_next on a worker thread as ours, nothing imported): ` +
      `${f1(floor)} ms arrays released as read, ${f1(kept)} ms kept to the end (as a Table keeps them); ` +
      `ours/floor ${f2(ours / floor)} (goal <= 1.10: ${goal(ours / floor <= 1.1)}), ours/kept floor ${f2(ours / kept)}`,
  );
  const cpu = (k: string): number => q(`cpu-${k}`);
  console.log(
    `adbc ${n} query CPU time of the process, every thread (steadier than wall time on a loaded machine), medians: ` +
      `ours ${f1(cpu('ours'))} ms, floor ${f1(cpu('floor'))} ms released, ${f1(cpu('floor-kept'))} ms kept, ipc route ${f1(cpu('ipc'))} ms; ` +
      `ours/floor ${f2(cpu('ours') / cpu('floor'))}, ours/kept floor ${f2(cpu('ours') / cpu('floor-kept'))}`,
  );
  const sync = q('ours-sync');
  const syncFloor = q('floor-sync-kept');
  console.log(
    `adbc ${n} query on the JS thread ({ offThread: false }: no thread hop per batch, the event loop waits): ours ${f1(sync)} ms ` +
      `(CPU ${f1(cpu('ours-sync'))}), floor ${f1(syncFloor)} ms (CPU ${f1(cpu('floor-sync-kept'))}; get_next on the JS thread, kept); ` +
      `ratio ${f2(sync / syncFloor)} (CPU ${f2(cpu('ours-sync') / cpu('floor-sync-kept'))})`,
  );
  const perBatch = (a: number, b: number): string => `${f1(((a - b) / batches) * 1000)} us`;
  console.log(
    `adbc ${n} query per batch (${batches} batches), in CPU time: ours beyond the kept floor ${perBatch(cpu('ours'), cpu('floor-kept'))} ` +
      `(the import of the batch, the Table, the release), on the JS thread ${perBatch(cpu('ours-sync'), cpu('floor-sync-kept'))}; ` +
      `a thread hop (the kept floor's worker-thread get_next against its JS-thread one) ${perBatch(cpu('floor-kept'), cpu('floor-sync-kept'))}`,
  );
  const peak = (r: MemoryRoute): number => memory.get(r)?.peak ?? NaN;
  const bytes = memory.get('query-ours')!.bytes;
  const inexact = [...memory.values()].some((r) => !r.exact) ? ' (the peak could not be reset here: growth over the peak before)' : '';
  console.log(
    `adbc ${n} query peak memory, a fresh process per route, over its baseline${inexact}: ours ${mib(peak('query-ours'))}, ` +
      `ipc route ${mib(peak('query-ipc'))}, floor ${mib(peak('query-floor'))} released as read, ${mib(peak('query-floor-kept'))} kept; ` +
      `result ${mib(bytes)}; ours/result ${f2(peak('query-ours') / bytes)} (goal <= 1.20: ${goal(peak('query-ours') <= bytes * 1.2)}), ` +
      `kept floor/result ${f2(peak('query-floor-kept') / bytes)}, ipc/result ${f2(peak('query-ipc') / bytes)}; ` +
      `ours beyond the kept floor ${mib(peak('query-ours') - peak('query-floor-kept'))}`,
  );

  const io = i('ours');
  const ii = i('ipc');
  console.log(`adbc ${n} ingest: ours ${f1(io)} ms, ipc route ${f1(ii)} ms, ratio ${f2(ii / io)} (goal >= 1.50: ${goal(ii / io >= 1.5)})`);
  const icpu = (k: string): number => i(`cpu-${k}`);
  if (ti.ms!.floor) {
    const fl = i('floor');
    console.log(
      `adbc ${n} ingest floor, the driver fed a C stream of batches exported before the clock (no JS while it reads): ${f1(fl)} ms; ` +
        `ours/floor ${f2(io / fl)}, ipc route/floor ${f2(ii / fl)}: with ours at the floor, ipc/ours could reach ${f2(ii / fl)} at most`,
    );
  }
  console.log(
    `adbc ${n} ingest CPU time of the process, every thread, medians: ours ${f1(icpu('ours'))} ms, ipc route ${f1(icpu('ipc'))} ms` +
      `${ti.ms!.floor ? `, floor ${f1(icpu('floor'))} ms` : ''}; ipc/ours ${f2(icpu('ipc') / icpu('ours'))}` +
      `${ti.ms!.floor ? `, ours/floor ${f2(icpu('ours') / icpu('floor'))}` : ''}`,
  );
  console.log(
    `adbc ${n} ingest peak memory, a fresh process per route: ours ${mib(peak('ingest-ours'))}, ipc route ${mib(peak('ingest-ipc'))}` +
      `${memory.has('ingest-floor') ? `, floor ${mib(peak('ingest-floor'))}` : ''}; the data ${mib(memory.get('ingest-ours')!.bytes)} (JS-owned, ` +
      `${memory.get('ingest-ours')!.batches} batches)`,
  );
  const spread = (ms: Record<string, number[]>, keys: readonly string[]): string =>
    keys
      .filter((k) => ms[k])
      .map((k) => `${k} ${f1(Math.min(...ms[k]!))}/${f1(median(ms[k]!))}/${f1(Math.max(...ms[k]!))}`)
      .join(', ');
  console.log(`adbc ${n} times in ms, min/median/max of ${REPS} rounds (the spread is the machine's noise): query ${spread(tq, Object.keys(QUERY_ROUTES))}; ingest ${spread(ti.ms!, Object.keys(INGEST_ROUTES))}`);
  const us = (k: string): string => `${(q(`latency-${k}`) * 1000).toFixed(0)} us`;
  console.log(`adbc ${n} 1-row query latency (median of ${LATENCY_REPS}): ours ${us('ours')}, ipc route ${us('ipc')}, floor ${us('floor')}`);
}

async function main(): Promise<void> {
  // `--partitions`: only the partitions line (Ballista), without the drivers' routes.
  if (process.argv.includes('--partitions')) return benchPartitions(REPS);
  console.log(
    `adbc bench: node ${process.version}, ${ROWS.toLocaleString('en')} rows (int64, float64, text), medians of ${REPS}, ` +
      `time: every route in one process per driver, round-robin; memory: a fresh process per route; load average ${load()}`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'arrow-device-bench-adbc-'));
  try {
    const replay = buildReplay(dir);
    for (const spec of DRIVERS) {
      if (spec.name === 'flightsql') {
        // Its server is the tests' (test/adbc/flightsql.ts); the bench's routes (the official package's IPC route, the floor) are not written for it yet.
        console.log('adbc flightsql: skipped here (these routes are not written for it); bench/adbc-peers.bench.ts gives its floor');
        continue;
      }
      if (spec.missing) {
        console.log(`adbc ${spec.name}: skipped (${spec.missing})`);
        continue;
      }
      let server: PostgresServer | undefined;
      if (spec.name === 'postgresql') {
        const why = postgresMissing();
        if (why) {
          console.log(`adbc postgresql: skipped (${why})`);
          continue;
        }
        server = await startPostgres();
      }
      try {
        await benchDriver(spec, dir, replay, server);
      } finally {
        server?.stop();
      }
      console.log(`(load average ${load()})`);
    }
    // A distributed engine's partitions read at once against one by one (bench/adbc-partitions.ts).
    await benchPartitions(REPS);
    console.log(`(load average ${load()})`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

void (async () => {
  try {
    const at = process.argv.indexOf('--child');
    if (at >= 0) console.log(JSON.stringify(await child(JSON.parse(process.argv[at + 1]!) as ChildArgs)));
    else await main();
  } catch (e) {
    console.error(e);
    process.exitCode = 1;
  }
})();
