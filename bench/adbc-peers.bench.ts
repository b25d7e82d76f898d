/**
 * Part of `npm run bench:adbc`: arrow-device/adbc against what a JavaScript
 * user picks instead, per database, and against the driver's own floor.
 *
 * The same table in each database, 1M rows x 4 columns (int8 `i8`, int4
 * `i4`, float8 `f8`, text `t`), made here once; a run fetches every row and
 * sums `f8`, and checks the sum.
 *
 * - PostgreSQL (a server started here on loopback): ours (the ADBC
 *   PostgreSQL driver) against `pg` with `rowMode: 'array'`.
 * - DuckDB (a database file, read-only): ours (DuckDB's ADBC driver in the
 *   libduckdb.so of @duckdb/node-bindings, the library @duckdb/node-api
 *   itself loads) against `@duckdb/node-api`: `runAndReadAll` + `getColumnsJS`.
 * - SQLite (the same database file): ours (the ADBC SQLite driver) against
 *   `node:sqlite`: `prepare(sql).all()`.
 * - Flight SQL (arrow-go's example server, test/adbc/flightsql.ts): ours
 *   against the floor only; no JavaScript Flight SQL client is a
 *   devDependency (none was found on the npm registry reachable here).
 *
 * Ours: `conn.query` (an arrow-js Table), then the sum over each batch's
 * Float64Array. Floor: the driver's stream drained by hand through the raw
 * ADBC calls (bench/adbc-raw.ts), each array released as read, nothing
 * imported, no sum.
 *
 * Time: one child process per database runs ours, the peer and the floor
 * round-robin, one warm-up round then `BENCH_PEER_REPS` (5) rounds; medians.
 * Memory: a fresh child process per side, which opens its connection, then
 * runs the query once and holds the result while its peak is read: the peak
 * resident size over the resident size just before the run (VmHWM after a
 * reset through /proc/self/clear_refs), and the process's whole max RSS
 * (`process.resourceUsage().maxRSS`, libraries and setup included).
 *
 * The flechette target (arrow-device/flechette/adbc, issue 52) beside
 * arrow-js, per driver, in the same round-robin: the same fetch
 * (`conn.query`, a flechette Table), then the sum of `f8` each library's
 * fast way, `getChild('f8').toArray()` (one typed array: the batches copied
 * into one where there are several) and a loop over it, and, printed too,
 * its iterator (`for (const v of column)`). Both sums run after the fetch on
 * the same result, each timed on its own and checked; a line's figure is
 * the fetch plus that sum, median of the rounds: `adbc <driver> flechette vs
 * arrow-js, fetch + sum of f8 (toArray() then a loop): flechette X ms,
 * arrow-js Y ms, ratio R` (goal <= 1.00). No peak-memory child for it.
 *
 * A pair whose peer or driver is missing is skipped with the reason.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Table } from 'apache-arrow';
import type { AdbcConnection, ConnectOptions } from '../src/adbc/index.js';
import { AdbcDatabase as FlechetteDatabase } from '../src/flechette/adbc.js';
import { DUCKDB, FLIGHTSQL, POSTGRESQL, SQLITE, type DriverName, type DriverSpec } from '../test/adbc/drivers.js';
import { flightSqlServerMissing, startFlightSql } from '../test/adbc/flightsql.js';
import { postgresMissing, startPostgres } from '../test/adbc/postgres.js';
import { benchDb, drain, open, peakOf, rawConnection, type BenchDb } from './adbc-raw.js';

const ROWS = Number(process.env.BENCH_PEER_ROWS ?? 1_000_000);
const REPS = Number(process.env.BENCH_PEER_REPS ?? 5);
const SELECT = 'SELECT i8, i4, f8, t FROM bench4';
/** The sum of f8 = i8 / 2 over i8 = 0..ROWS-1: every route's result is checked against it. */
const EXPECTED = (ROWS * (ROWS - 1)) / 4;
const require = createRequire(import.meta.url);

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (n: number): string => `${(n / 2 ** 20).toFixed(1)} MiB`;
const f1 = (x: number): string => x.toFixed(1);
const f2 = (x: number): string => x.toFixed(2);

/** How a child reaches the peer's copy of the table. */
type PeerArgs = { name: 'pg'; uri: string } | { name: '@duckdb/node-api'; path: string } | { name: 'node:sqlite'; path: string };

type Side = 'ours' | 'flechette' | 'peer' | 'floor';

interface ChildArgs {
  driver: DriverName;
  ours: BenchDb;
  peer: PeerArgs | undefined;
  task: { kind: 'time' } | { kind: 'memory'; side: Side };
}

interface ChildResult {
  /** Wall times by side (time task); a library side's fetch and sums under `<side>:fetch`, `<side>:toArray`, `<side>:iterator`. */
  ms?: Partial<Record<Side | `${Side}:${SumWay | 'fetch'}`, number[]>>;
  /** Peak resident size over the size just before the run, and the process's max RSS (memory task). */
  peak?: number;
  maxRss?: number;
  exact?: boolean;
}

/**
 * One side, opened: a run fetches everything and sums f8; `drop` releases the result. The library
 * sides (ours: arrow-js, and flechette) also give the fetch's own time and other ways to sum the same
 * result (`sums`: `toArray`, `iterator`), which the child times after the run, each on its own.
 */
interface Opened {
  run(): Promise<{ sum: number | undefined; drop: () => void; fetch?: number; sums?: Record<SumWay, () => number> }>;
  close(): Promise<void>;
}

/** The ways of summing a column the flechette lines compare: each library's `toArray()` and a loop, and its iterator. */
type SumWay = 'toArray' | 'iterator';
const SUM_WAYS: readonly SumWay[] = ['toArray', 'iterator'];

/** The sum of a column through `toArray()` (one typed array) and a loop: arrow-js's Vector and flechette's Column alike. */
function sumToArray(column: { toArray(): ArrayLike<unknown> }): number {
  const v = column.toArray() as Float64Array;
  let s = 0;
  for (let k = 0; k < v.length; k++) s += v[k]!;
  return s;
}

/** The sum of a column through its iterator (`for...of`). */
function sumIterator(column: Iterable<unknown>): number {
  let s = 0;
  for (const x of column) s += x as number;
  return s;
}

// ---------------------------------------------------------------------------------------------
// The sides

/** The sum of a Float64 column of an arrow-js Table, over each batch's values. */
function sumColumn(t: Table, name: string): number {
  let s = 0;
  for (const d of t.getChild(name)!.data) {
    const v = d.values as Float64Array;
    for (let k = 0; k < d.length; k++) s += v[k]!;
  }
  return s;
}

async function openOurs(options: BenchDb): Promise<Opened> {
  const db = open(options);
  const conn: AdbcConnection = await db.connect();
  return {
    run: async () => {
      const t0 = performance.now();
      const t = await conn.query(SELECT);
      const fetch = performance.now() - t0;
      const f8 = t.getChild('f8')!;
      return {
        sum: sumColumn(t, 'f8'),
        drop: () => (t as Table & { release?: () => void }).release?.(),
        fetch,
        sums: { toArray: () => sumToArray(f8), iterator: () => sumIterator(f8) },
      };
    },
    close: async () => {
      await conn.close();
      await db.close();
    },
  };
}

/** The flechette target: `conn.query` of arrow-device/flechette/adbc (a flechette Table), summed through `toArray()`. */
async function openFlechette(options: BenchDb): Promise<Opened> {
  const db = new FlechetteDatabase(options as ConnectOptions);
  const conn = await db.connect();
  return {
    run: async () => {
      const t0 = performance.now();
      const t = await conn.query(SELECT);
      const fetch = performance.now() - t0;
      const f8 = t.getChild('f8');
      return { sum: sumToArray(f8), drop: () => t.release(), fetch, sums: { toArray: () => sumToArray(f8), iterator: () => sumIterator(f8) } };
    },
    close: async () => {
      await conn.close();
      await db.close();
    },
  };
}

async function openFloor(options: BenchDb): Promise<Opened> {
  const raw = await rawConnection(options);
  return {
    run: async () => {
      await drain(raw.d, raw.conn, SELECT, { keep: false, sync: false });
      return { sum: undefined, drop: () => undefined };
    },
    close: async () => raw.close(),
  };
}

/** The subset of node:sqlite used here (@types/node 20 has no types for it). */
interface SqliteDatabase {
  prepare(sql: string): { all(): Record<string, unknown>[] };
  close(): void;
}

async function openPeer(p: PeerArgs): Promise<Opened> {
  switch (p.name) {
    case 'pg': {
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: p.uri });
      await client.connect();
      return {
        run: async () => {
          const r = await client.query<unknown[]>({ text: SELECT, rowMode: 'array' });
          let s = 0;
          for (const row of r.rows) s += row[2] as number;
          return { sum: s, drop: () => undefined };
        },
        close: () => client.end(),
      };
    }
    case '@duckdb/node-api': {
      const { DuckDBInstance } = await import('@duckdb/node-api');
      const instance = await DuckDBInstance.create(p.path, { access_mode: 'READ_ONLY' });
      const conn = await instance.connect();
      return {
        run: async () => {
          const reader = await conn.runAndReadAll(SELECT);
          const f8 = reader.getColumnsJS()[2] as number[];
          let s = 0;
          for (const x of f8) s += x;
          return { sum: s, drop: () => undefined };
        },
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
        run: async () => {
          const rows = db.prepare(SELECT).all();
          let s = 0;
          for (const row of rows) s += row.f8 as number;
          return { sum: s, drop: () => undefined };
        },
        close: async () => db.close(),
      };
    }
  }
}

function openSide(a: ChildArgs, side: Side): Promise<Opened> {
  if (side === 'ours') return openOurs(a.ours);
  if (side === 'flechette') return openFlechette(a.ours);
  if (side === 'floor') return openFloor(a.ours);
  return openPeer(a.peer!);
}

function check(driver: string, side: Side, sum: number | undefined): void {
  if (sum !== undefined && sum !== EXPECTED) throw new Error(`${driver} ${side}: the sum of f8 is ${sum}, expected ${EXPECTED}`);
}

// ---------------------------------------------------------------------------------------------
// A child: the times of every side, round-robin, or one side's memory

async function child(a: ChildArgs): Promise<ChildResult> {
  if (a.task.kind === 'memory') {
    const side = a.task.side;
    const o = await openSide(a, side);
    try {
      const first = await peakOf(() => o.run());
      check(a.driver, side, first.value.sum);
      const maxRss = process.resourceUsage().maxRSS * 1024;
      first.value.drop();
      return { peak: first.peak, exact: first.exact, maxRss };
    } finally {
      await o.close();
    }
  }
  const sides: Side[] = a.peer ? ['ours', 'flechette', 'peer', 'floor'] : ['ours', 'flechette', 'floor'];
  const opened = new Map<Side, Opened>();
  for (const s of sides) opened.set(s, await openSide(a, s));
  const ms: NonNullable<ChildResult['ms']> = {};
  try {
    for (let r = -1; r < REPS; r++) {
      for (const s of sides) {
        const t0 = performance.now();
        const { sum, drop, fetch, sums } = await opened.get(s)!.run();
        const t = performance.now() - t0;
        check(a.driver, s, sum);
        if (r >= 0) (ms[s] ??= []).push(t);
        // The other ways to sum the same result, off the side's own time, each timed alone and checked.
        if (fetch !== undefined && r >= 0) (ms[`${s}:fetch`] ??= []).push(fetch);
        for (const way of sums ? SUM_WAYS : []) {
          const w0 = performance.now();
          const ws = sums![way]();
          const wt = performance.now() - w0;
          check(a.driver, s, ws);
          if (r >= 0) (ms[`${s}:${way}`] ??= []).push(wt);
        }
        drop();
      }
    }
    return { ms };
  } finally {
    for (const o of opened.values()) await o.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The parent: makes each database's table, runs the children, prints

function runChild(args: ChildArgs): ChildResult {
  const r = spawnSync(process.execPath, ['--expose-gc', '--disable-warning=ExperimentalWarning', fileURLToPath(import.meta.url), '--child', JSON.stringify(args)], {
    encoding: 'utf8',
    maxBuffer: 1 << 24,
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`bench child ${args.driver} ${JSON.stringify(args.task)} failed (status ${r.status}): ${r.stderr || r.stdout}`);
  return JSON.parse(line) as ChildResult;
}

/** The table: i8 = 0..ROWS-1, i4 = i8, f8 = i8 / 2, t = 'text ' || i8; the column types in each dialect. */
function createSql(spec: DriverSpec): string[] {
  const types: Record<DriverName, string> = {
    postgresql: 'i8 BIGINT, i4 INTEGER, f8 DOUBLE PRECISION, t TEXT',
    duckdb: 'i8 BIGINT, i4 INTEGER, f8 DOUBLE, t VARCHAR',
    sqlite: 'i8 INTEGER, i4 INTEGER, f8 REAL, t TEXT',
    flightsql: 'i8 INTEGER, i4 INTEGER, f8 REAL, t TEXT',
  };
  return [
    `CREATE TABLE bench4 (${types[spec.name]})`,
    `INSERT INTO bench4 SELECT i, CAST(i AS INTEGER), CAST(i AS DOUBLE PRECISION) / 2, 'text ' || i FROM (${spec.series(ROWS)}) AS s`,
  ];
}

async function createTable(spec: DriverSpec, options: BenchDb): Promise<void> {
  const db = open(options);
  const conn = await db.connect();
  try {
    await conn.execute('DROP TABLE IF EXISTS bench4');
    for (const sql of createSql(spec)) await conn.execute(sql);
  } finally {
    await conn.close();
    await db.close();
  }
}

/** Why the peer cannot be loaded here, or undefined. */
async function peerMissing(name: PeerArgs['name']): Promise<string | undefined> {
  try {
    await import(name === 'node:sqlite' ? 'node:sqlite' : name);
    return undefined;
  } catch (e) {
    return `${name} cannot be loaded here (${(e as Error).message.split('\n')[0]})${name === 'node:sqlite' ? '' : ': run `npm ci`'}`;
  }
}

/** The libduckdb.so that @duckdb/node-api loads, so that ours runs the same library; undefined where it is not installed. */
function nodeApiDuckdb(): string | undefined {
  try {
    const p = join(dirname(require.resolve(`@duckdb/node-bindings-${process.platform}-${process.arch}/package.json`)), 'libduckdb.so');
    return existsSync(p) ? p : undefined;
  } catch {
    return undefined;
  }
}

const load = (): string => loadavg().map((x) => x.toFixed(2)).join(' ');

function report(driver: DriverName, peerName: string | undefined, args: Omit<ChildArgs, 'task'>, why: string | undefined): void {
  const times = runChild({ ...args, task: { kind: 'time' } }).ms!;
  const memory = (side: Side): ChildResult => runChild({ ...args, task: { kind: 'memory', side } });
  const ours = median(times.ours!);
  const floor = median(times.floor!);
  const mOurs = memory('ours');
  const mFloor = memory('floor');
  const inexact = (...rs: ChildResult[]): string => (rs.some((r) => !r.exact) ? ' (the peak could not be reset here: growth over the peak before)' : '');
  if (peerName && times.peer) {
    const peer = median(times.peer);
    const mPeer = memory('peer');
    console.log(`adbc ${driver} vs ${peerName}: ours ${f1(ours)} ms, ${peerName} ${f1(peer)} ms, ratio ${f2(ours / peer)}`);
    console.log(
      `adbc ${driver} vs ${peerName} peak memory, a fresh process per side, the result held${inexact(mOurs, mPeer)}: ` +
        `over the resident size before the query: ours ${mib(mOurs.peak!)}, ${peerName} ${mib(mPeer.peak!)}, ratio ${f2(mOurs.peak! / mPeer.peak!)}; ` +
        `the process's max RSS: ours ${mib(mOurs.maxRss!)}, ${peerName} ${mib(mPeer.maxRss!)}`,
    );
  } else {
    console.log(`adbc ${driver} vs a JavaScript peer: skipped (${why})`);
  }
  console.log(
    `adbc ${driver} vs its floor (the driver's stream drained by hand, nothing imported): ours ${f1(ours)} ms, floor ${f1(floor)} ms, ` +
      `ratio ${f2(ours / floor)}; peak memory over the resident size before${inexact(mOurs, mFloor)}: ours ${mib(mOurs.peak!)}, floor ${mib(mFloor.peak!)} (arrays released as read)`,
  );
  flechetteLines(driver, times);
  const spread = (s: Side): string => (times[s] ? `${s} ${f1(Math.min(...times[s]))}/${f1(median(times[s]))}/${f1(Math.max(...times[s]))}` : '');
  console.log(`adbc ${driver} times in ms, min/median/max of ${REPS} rounds: ${(['ours', 'peer', 'floor'] as const).map(spread).filter(Boolean).join(', ')} (load average ${load()})`);
}

/**
 * The flechette target against arrow-js (both arrow-device, the same driver and round-robin): the fetch
 * plus each way of summing f8, medians of the rounds (a round's fetch plus its sum), and the parts.
 */
function flechetteLines(driver: DriverName, times: NonNullable<ChildResult['ms']>): void {
  const m = (k: keyof typeof times): number => median(times[k]!);
  // A round's figure: its fetch plus its sum that way; the median over the rounds.
  const total = (side: 'ours' | 'flechette', way: SumWay): number => median(times[`${side}:fetch`]!.map((f, i) => f + times[`${side}:${way}`]![i]!));
  const fast = [total('flechette', 'toArray'), total('ours', 'toArray')] as const;
  const iter = [total('flechette', 'iterator'), total('ours', 'iterator')] as const;
  const goal = fast[0] / fast[1] <= 1 ? 'met' : 'not met';
  console.log(`adbc ${driver} flechette vs arrow-js, fetch + sum of f8 (toArray() then a loop): flechette ${f1(fast[0])} ms, arrow-js ${f1(fast[1])} ms, ratio ${f2(fast[0] / fast[1])} (goal <= 1.00: ${goal})`);
  console.log(`adbc ${driver} flechette vs arrow-js, fetch + sum of f8 (for...of over the column): flechette ${f1(iter[0])} ms, arrow-js ${f1(iter[1])} ms, ratio ${f2(iter[0] / iter[1])}`);
  console.log(
    `adbc ${driver} flechette vs arrow-js, the parts (medians): fetch (conn.query) flechette ${f1(m('flechette:fetch'))} ms, arrow-js ${f1(m('ours:fetch'))} ms, ` +
      `ratio ${f2(m('flechette:fetch') / m('ours:fetch'))}; toArray() + loop flechette ${f1(m('flechette:toArray'))} ms, arrow-js ${f1(m('ours:toArray'))} ms; ` +
      `for...of flechette ${f1(m('flechette:iterator'))} ms, arrow-js ${f1(m('ours:iterator'))} ms`,
  );
}

async function main(): Promise<void> {
  console.log(
    `adbc peers bench: node ${process.version}, ${ROWS.toLocaleString('en')} rows x 4 columns (int8, int4, float8, text), fetch all and sum the float8 column; ` +
      `time: ours, the peer and the floor round-robin in one process per database, medians of ${REPS} after a warm-up; memory: a fresh process per side; load average ${load()}`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'arrow-device-bench-peers-'));
  try {
    // PostgreSQL against pg.
    {
      const why = POSTGRESQL.missing ?? postgresMissing();
      if (why) console.log(`adbc postgresql: skipped (${why})`);
      else {
        const server = await startPostgres();
        try {
          const ours = benchDb(POSTGRESQL, server.uri);
          await createTable(POSTGRESQL, ours);
          const missing = await peerMissing('pg');
          report('postgresql', 'pg', { driver: 'postgresql', ours, peer: missing ? undefined : { name: 'pg', uri: server.uri } }, missing);
        } finally {
          server.stop();
        }
      }
    }
    // DuckDB against @duckdb/node-api, on the same file and the same libduckdb where it is installed.
    {
      const library = nodeApiDuckdb();
      const why = library ? undefined : DUCKDB.missing;
      if (why) console.log(`adbc duckdb: skipped (${why})`);
      else {
        const path = join(dir, 'bench4.duckdb');
        const writable = benchDb(DUCKDB, undefined, { path });
        if (library) writable.driver = library;
        await createTable(DUCKDB, writable);
        const ours = { ...writable, databaseOptions: { path, access_mode: 'READ_ONLY' } };
        const missing = library ? await peerMissing('@duckdb/node-api') : '@duckdb/node-api has no bindings for this platform';
        report('duckdb', '@duckdb/node-api', { driver: 'duckdb', ours, peer: missing ? undefined : { name: '@duckdb/node-api', path } }, missing);
      }
    }
    // SQLite against node:sqlite, on the same file.
    if (SQLITE.missing) console.log(`adbc sqlite: skipped (${SQLITE.missing})`);
    else {
      const path = join(dir, 'bench4.sqlite');
      const ours = benchDb(SQLITE, undefined, { uri: path });
      await createTable(SQLITE, ours);
      const missing = await peerMissing('node:sqlite');
      report('sqlite', 'node:sqlite', { driver: 'sqlite', ours, peer: missing ? undefined : { name: 'node:sqlite', path } }, missing);
    }
    // Flight SQL: the floor only.
    {
      const why = FLIGHTSQL.missing ?? flightSqlServerMissing();
      if (why) console.log(`adbc flightsql: skipped (${why})`);
      else {
        const server = await startFlightSql();
        try {
          const ours = benchDb(FLIGHTSQL, server.uri);
          await createTable(FLIGHTSQL, ours);
          report('flightsql', undefined, { driver: 'flightsql', ours, peer: undefined }, 'no JavaScript Flight SQL client is a devDependency: none was found on the npm registry reachable here');
        } finally {
          await server.stop();
        }
      }
    }
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
