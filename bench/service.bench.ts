/**
 * `npm run bench:service`: arrow-device/adbc as a Node service uses a
 * database client — small queries one at a time, and many at once — against
 * what such a service runs today, and against the driver's own floor.
 *
 * The databases: PostgreSQL (the suite's server, test/adbc/postgres.ts,
 * started here on loopback), DuckDB (a file, opened read-only by every
 * side, through the libduckdb.so of @duckdb/node-bindings that
 * @duckdb/node-api itself loads) and SQLite (a file). In each, the table
 * `svc` of 100,000 rows with its primary key on `id` (bench/service-sides.ts
 * says what the rows are and how every result is checked: each answer's
 * row count and its sum of id, on every side, inside the timed region; a
 * wrong answer throws and the bench exits non-zero).
 *
 * (a) Latency, one query at a time, warm: 1 row (`id = lo`), 1,000 and
 * 10,000 rows (`id >= lo AND id < hi`), each with literal SQL and with
 * bound parameters (`$1` / `?`), lo moved on at every query. Sides, in one
 * child process per database, the order rotated at every round so that no
 * side always runs first or after another: ours (`conn.query(sql)` /
 * `conn.query(sql, table)`, the arrow-js Table summed and released); the
 * peer (`pg` Client, @duckdb/node-api, node:sqlite: bench/service-sides.ts,
 * openPeer, says which forms); `floor` (the fewest raw ADBC calls that give
 * the same result, bench/service-sides.ts, floorQuery: no prepare, the
 * parameters by `StatementBind` of one array, nothing imported; the execute
 * and each `get_next` on a worker thread as ours makes them); `floor-sync`
 * (the same calls, all on the JS thread: what the thread hops cost is the
 * difference). Medians of `--reps` (300) after `--warmup` (30) untimed
 * rounds. Then `python:adbc_driver_manager`, a second floor: the same
 * driver library, database and queries through Python's driver manager and
 * PyArrow (bench/service_python.py, the .venv's Python, made by `npm run
 * setup:arrow-cpp` and bench/setup-adbc-python.sh), in its own process
 * right after, with the same reps; skipped, with the reason, where it is
 * not installed. Ratio = ours / the other side's median (below 1: ours is
 * faster). Then, for every shape, the JS thread's time per query on each
 * side (`performance.eventLoopUtilization`: what was not idle in the event
 * loop while the query ran, the thread a service's other requests share;
 * a synchronous peer holds it for the whole query). Then, for the 1-row shapes, where ours' time goes (its statement
 * API step by step) and the floor's (each driver call's wall time, and how
 * much of it held the JS thread: all of a synchronous call, the
 * marshalling of an async one until it returns; and the JS thread's CPU
 * time in that part, `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`); the second is the
 * event-loop blocking per call, and held far above its CPU is a wait (a
 * lock, or the CPU taken by the driver's threads), not work.
 *
 * (b) Many at once: C concurrent request loops (`--concurrency`, 1, 4,
 * 16, 64), each a 1,000-row parameterised query summed and checked, for
 * `--seconds` (5) after a warm-up of a fifth of that (at most 1 s), on
 * PostgreSQL against `pg.Pool({ max: C })` and on DuckDB against
 * @duckdb/node-api (one connection per loop). Ours: `db.pool({ max: C })`
 * and its `query` where the library has a pool, else one connection per
 * loop (the header line says which; `--no-pool` forces the second; the
 * choice is made in one place, oursUnderLoad). Each side of each point in
 * a fresh child process (so that its RSS and its event loop are its own),
 * the two sides' order alternating from point to point. Printed:
 * requests/s, p50 and p99 of the requests' latency, the event loop's delay
 * during the measured run (`perf_hooks.monitorEventLoopDelay({ resolution:
 * 1 })`'s p99 and max, as it reports them: the interval of a 1 ms timer,
 * so an idle loop reads about 1.1 ms), and the process's RSS at a third of
 * the run and at its end. Ratio = ours' requests/s / the peer's (above 1:
 * ours serves more).
 *
 * `--short` (what CI runs): 20 reps after 5, 0.5 s per point. `--reps`,
 * `--warmup`, `--seconds`, `--concurrency 1,4` (`none`: latency only), `--drivers postgresql,duckdb`
 * or the variables BENCH_SERVICE_REPS, _WARMUP, _SECONDS, _CONCURRENCY,
 * _DRIVERS set them. `--require`: a missing driver, server, peer or Python
 * floor fails instead of skipping.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { monitorEventLoopDelay, performance as perf } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { DuckDBConnection } from '@duckdb/node-api';
import { AdbcDatabase, defaultEntrypoint, type AdbcConnection } from '../src/adbc/index.js';
import { queryRun, queryRunMissing } from '../src/adbc/run.js';
import { nativeWorkers } from '../src/memory/native.js';
import { nativeWorkersMissing } from '../src/memory/workers.js';
import { DUCKDB, POSTGRESQL, SQLITE, type DriverName } from '../test/adbc/drivers.js';
import { postgresMissing, startPostgres } from '../test/adbc/postgres.js';
import { benchDb, open, type BenchDb } from './adbc-raw.js';
import {
  answerOf, check, createTable, duckdbRun, expected, nodeApiDuckdb, openFloor, openOurs, openPeer, oursOn, paramsTable, pgRun, queryOf, shapeKey, SHAPES, specOf, startOf,
  templates, TABLE_ROWS, type Answer, type CallTimes, type Client, type PeerArgs, type Query, type Shape,
} from './service-sides.js';

// ---------------------------------------------------------------------------------------------
// Settings

const argv = process.argv.slice(2);
const flag = (name: string): boolean => argv.includes(name);
const value = (name: string): string | undefined => {
  const at = argv.indexOf(name);
  return at >= 0 ? argv[at + 1] : undefined;
};
const SHORT = flag('--short');
const REPS = Number(value('--reps') ?? process.env.BENCH_SERVICE_REPS ?? (SHORT ? 20 : 300));
const WARMUP = Number(value('--warmup') ?? process.env.BENCH_SERVICE_WARMUP ?? (SHORT ? 5 : 30));
const SECONDS = Number(value('--seconds') ?? process.env.BENCH_SERVICE_SECONDS ?? (SHORT ? 0.5 : 5));
/** The load points; `none`: the latency part only. */
const CONCURRENCY = (value('--concurrency') ?? process.env.BENCH_SERVICE_CONCURRENCY ?? '1,4,16,64')
  .split(',')
  .filter((x) => x !== '' && x !== 'none')
  .map(Number);
const DRIVERS = (value('--drivers') ?? process.env.BENCH_SERVICE_DRIVERS ?? 'postgresql,duckdb,sqlite').split(',') as DriverName[];
const REQUIRE = flag('--require');
const NO_POOL = flag('--no-pool');
/** The rows of each request under load. */
const LOAD_ROWS = 1_000;

/** The repository: the first directory above this module with a package.json (it runs compiled, from .build/run/bench, or through tsx). */
const repoRoot = ((): string => {
  for (let dir = dirname(fileURLToPath(import.meta.url)); dirname(dir) !== dir; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'bench', 'service_python.py'))) return dir;
  }
  return process.cwd();
})();

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const quantile = (sorted: number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
const ms = (x: number): string => (x < 1 ? x.toFixed(3) : x < 10 ? x.toFixed(2) : x.toFixed(1));
const f2 = (x: number): string => x.toFixed(2);
const mib = (n: number): string => `${(n / 2 ** 20).toFixed(0)} MiB`;
const load = (): string => loadavg().map((x) => x.toFixed(2)).join(' ');

// ---------------------------------------------------------------------------------------------
// Ours under load: the one place that picks the pool or a connection per loop

/** The pool's surface used here (`db.pool({ max })`, issue 51), typed here until the library's own lands. */
interface PoolLike {
  query: Parameters<typeof oursOn>[0]['query'];
  close(): Promise<void>;
}

/** Whether this build of the library has `db.pool(...)`. */
const libraryHasPool = (): boolean => typeof (AdbcDatabase.prototype as unknown as { pool?: unknown }).pool === 'function';

const oursMode = (usePool: boolean): string => (usePool ? 'db.pool({ max: C }) and its query' : 'one connection per loop (conn.query)');

/** Ours for C loops: a query function per loop, and how to close them all. */
async function oursUnderLoad(options: BenchDb, c: number, usePool: boolean): Promise<{ loops: ((q: Query) => Promise<Answer>)[]; close(): Promise<void> }> {
  const db = open(options);
  if (usePool) {
    const pool = await (db as unknown as { pool(o: { max: number }): PoolLike | Promise<PoolLike> }).pool({ max: c });
    const run = oursOn(pool);
    return {
      loops: Array.from({ length: c }, () => run),
      close: async () => {
        await pool.close();
        await db.close();
      },
    };
  }
  const conns: AdbcConnection[] = [];
  for (let i = 0; i < c; i++) conns.push(await db.connect());
  return {
    loops: conns.map((conn) => oursOn(conn)),
    close: async () => {
      for (const conn of conns) await conn.close();
      await db.close();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The children

type LatencySide = 'ours' | 'peer' | 'floor' | 'floor-sync';

interface LatencyArgs {
  kind: 'latency';
  driver: DriverName;
  ours: BenchDb;
  peer: PeerArgs | undefined;
  reps: number;
  warmup: number;
}

interface LatencyResult {
  /** By shape key, by side: the median in ms. */
  ms: Record<string, Partial<Record<LatencySide, number>>>;
  /** By shape key, by side: the median of the JS thread's active time per query in ms (`eventLoopUtilization`). */
  held: Record<string, Partial<Record<LatencySide, number>>>;
  /** By 1-row shape key: ours' statement API steps, medians in µs. */
  steps: Record<string, Record<string, number>>;
  /** By 1-row shape key: the floor's driver calls, medians in µs (wall, JS thread held, its CPU), and calls per query. */
  calls: Record<string, Record<string, { wall: number; held: number; cpu: number; calls: number }>>;
}

interface LoadArgs {
  kind: 'load';
  driver: DriverName;
  side: 'ours' | 'peer';
  c: number;
  seconds: number;
  ours: BenchDb;
  peer: PeerArgs;
  usePool: boolean;
}

interface LoadResult {
  requests: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** monitorEventLoopDelay's p99 and max, ms. */
  loopP99: number;
  loopMax: number;
  rssThird: number;
  rssEnd: number;
}

/** Ours' statement API, step by step, for one query: each step's µs added to `steps`. */
async function oursBySteps(client: Awaited<ReturnType<typeof openOurs>>, q: Query, steps: Record<string, number[]>): Promise<Answer> {
  const at: [string, number][] = [];
  let t = performance.now();
  const mark = (name: string): void => {
    const now = performance.now();
    at.push([name, (now - t) * 1000]);
    t = now;
  };
  const stmt = await client.conn.createStatement();
  mark('createStatement');
  let answer: Answer;
  try {
    await stmt.setSqlQuery(q.sql);
    mark('setSqlQuery');
    if (q.params) {
      await stmt.prepare();
      mark('prepare');
      await stmt.bind(paramsTable(q.params));
      mark('bind');
    }
    const reader = await stmt.executeQuery();
    mark('executeQuery');
    try {
      const table = await reader.toTableAsync();
      answer = answerOf(table);
      table.release();
      mark('read (toTableAsync, sum)');
    } finally {
      reader.release();
    }
  } finally {
    stmt.closeSync();
  }
  mark('close');
  for (const [name, us] of at) (steps[name] ??= []).push(us);
  return answer;
}

async function latencyChild(a: LatencyArgs): Promise<LatencyResult> {
  const spec = specOf(a.driver);
  const ours = await openOurs(a.ours);
  const clients: [LatencySide, Client][] = [['ours', ours]];
  if (a.peer) clients.push(['peer', await openPeer(a.peer)]);
  const floor = await openFloor(a.ours, a.driver, false);
  clients.push(['floor', floor], ['floor-sync', await openFloor(a.ours, a.driver, true)]);
  const result: LatencyResult = { ms: {}, held: {}, steps: {}, calls: {} };
  try {
    for (const shape of SHAPES) {
      const times: Partial<Record<LatencySide, number[]>> = {};
      const held: Partial<Record<LatencySide, number[]>> = {};
      for (let r = 0; r < a.warmup + a.reps; r++) {
        const lo = startOf(r, shape.rows);
        const q = queryOf(spec, shape, lo);
        const want = expected(lo, shape.rows);
        for (let k = 0; k < clients.length; k++) {
          const [side, client] = clients[(r + k) % clients.length]!;
          const e0 = perf.eventLoopUtilization();
          const t0 = performance.now();
          const got = await client.run(q);
          const dt = performance.now() - t0;
          // The JS thread's time not idle in the event loop while this query ran (one query at a time here).
          const active = perf.eventLoopUtilization(e0).active;
          check(`${a.driver} ${shapeKey(shape)} ${side}`, q, got, want);
          if (r >= a.warmup) {
            (times[side] ??= []).push(dt);
            (held[side] ??= []).push(active);
          }
        }
      }
      result.ms[shapeKey(shape)] = Object.fromEntries(Object.entries(times).map(([s, xs]) => [s, median(xs)]));
      result.held[shapeKey(shape)] = Object.fromEntries(Object.entries(held).map(([s, xs]) => [s, median(xs)]));
    }
    // Where the time goes, for one row: ours step by step, then the floor call by call (alternating).
    for (const shape of SHAPES.filter((s) => s.rows === 1)) {
      const steps: Record<string, number[]> = {};
      const calls: Record<string, { wall: number[]; held: number[]; cpu: number[]; calls: number }> = {};
      for (let r = 0; r < a.warmup + a.reps; r++) {
        const lo = startOf(r + 1, shape.rows);
        const q = queryOf(spec, shape, lo);
        const want = expected(lo, shape.rows);
        check(`${a.driver} ${shapeKey(shape)} ours by step`, q, await oursBySteps(ours, q, r >= a.warmup ? steps : {}), want);
        const t: CallTimes = {};
        check(`${a.driver} ${shapeKey(shape)} floor by call`, q, await floor.times(q, t), want);
        if (r < a.warmup) continue;
        for (const [name, e] of Object.entries(t)) {
          const c = (calls[name] ??= { wall: [], held: [], cpu: [], calls: e.calls });
          c.wall.push(e.wall);
          c.held.push(e.held);
          c.cpu.push(e.cpu);
        }
      }
      result.steps[shapeKey(shape)] = Object.fromEntries(Object.entries(steps).map(([n, xs]) => [n, median(xs)]));
      result.calls[shapeKey(shape)] = Object.fromEntries(Object.entries(calls).map(([n, c]) => [n, { wall: median(c.wall), held: median(c.held), cpu: median(c.cpu), calls: c.calls }]));
    }
    return result;
  } finally {
    for (const [, client] of clients) await client.close();
  }
}

/** The peer for C loops: pg.Pool({ max: C }), or @duckdb/node-api with a connection per loop. */
async function peerUnderLoad(p: PeerArgs, c: number): Promise<{ loops: ((q: Query) => Promise<Answer>)[]; close(): Promise<void> }> {
  if (p.name === 'pg') {
    const { default: pg } = await import('pg');
    const pool = new pg.Pool({ connectionString: p.uri, max: c });
    const run = pgRun((q) => pool.query(q));
    return { loops: Array.from({ length: c }, () => run), close: () => pool.end() };
  }
  if (p.name === '@duckdb/node-api') {
    const { DuckDBInstance } = await import('@duckdb/node-api');
    const instance = await DuckDBInstance.create(p.path, { access_mode: 'READ_ONLY' });
    const conns: DuckDBConnection[] = [];
    for (let i = 0; i < c; i++) conns.push(await instance.connect());
    return {
      loops: conns.map((conn) => duckdbRun(conn)),
      close: async () => {
        for (const conn of conns) conn.closeSync();
        instance.closeSync();
      },
    };
  }
  throw new Error(`no load peer ${p.name}`);
}

async function loadChild(a: LoadArgs): Promise<LoadResult> {
  const spec = specOf(a.driver);
  const shape: Shape = { rows: LOAD_ROWS, mode: 'params' };
  const side = a.side === 'ours' ? await oursUnderLoad(a.ours, a.c, a.usePool) : await peerUnderLoad(a.peer, a.c);
  let next = 0;
  /** Every loop, until `end`: a query, checked; the latency of each recorded when `lat` is given. */
  const run = async (end: number, lat: number[] | undefined): Promise<number> => {
    let n = 0;
    await Promise.all(
      side.loops.map(async (query) => {
        while (performance.now() < end) {
          const lo = startOf(next++, shape.rows);
          const q = queryOf(spec, shape, lo);
          const t0 = performance.now();
          const got = await query(q);
          const dt = performance.now() - t0;
          check(`${a.driver} concurrency ${a.c} ${a.side}`, q, got, expected(lo, shape.rows));
          lat?.push(dt);
          n++;
        }
      }),
    );
    return n;
  };
  try {
    await run(performance.now() + 1000 * Math.max(0.2, Math.min(1, a.seconds / 5)), undefined);
    const lat: number[] = [];
    const h = monitorEventLoopDelay({ resolution: 1 });
    let rssThird = 0;
    const third = setTimeout(() => (rssThird = process.memoryUsage.rss()), (1000 * a.seconds) / 3);
    h.enable();
    const t0 = performance.now();
    const n = await run(t0 + 1000 * a.seconds, lat);
    const elapsed = (performance.now() - t0) / 1000;
    h.disable();
    clearTimeout(third);
    const rssEnd = process.memoryUsage.rss();
    lat.sort((x, y) => x - y);
    return {
      requests: n,
      perSecond: n / elapsed,
      p50: quantile(lat, 0.5),
      p99: quantile(lat, 0.99),
      loopP99: h.percentile(99) / 1e6,
      loopMax: h.max / 1e6,
      rssThird: rssThird || rssEnd,
      rssEnd,
    };
  } finally {
    await side.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The parent

function runChild<T>(args: LatencyArgs | LoadArgs): T {
  const r = spawnSync(process.execPath, [...process.execArgv, '--expose-gc', '--disable-warning=ExperimentalWarning', fileURLToPath(import.meta.url), '--child', JSON.stringify(args)], {
    encoding: 'utf8',
    maxBuffer: 1 << 26,
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`bench:service child (${args.kind} ${args.driver}${args.kind === 'load' ? ` ${args.side} C=${args.c}` : ''}) failed (status ${r.status}):\n${r.stderr || r.stdout}`);
  return JSON.parse(line) as T;
}

/** Why something is missing: printed as skipped, or (with --require) fatal. */
function skipped(what: string, why: string): void {
  if (REQUIRE) throw new Error(`${what}: ${why} (--require)`);
  console.log(`${what}: skipped (${why})`);
}

const PYTHON_PEER = 'python:adbc_driver_manager';

interface PythonResult {
  ms: Record<string, number>;
  python: string;
  pyarrow: string;
  adbc_driver_manager: string;
}

/** The Python floor (bench/service_python.py) for every shape, or why it cannot run. */
function pythonFloor(driver: DriverName, ours: BenchDb): PythonResult | string {
  const python = process.env.ARROW_CPP_PYTHON ?? join(repoRoot, '.venv', 'bin', 'python');
  if (!existsSync(python)) return `no Python at ${python}: run \`npm run setup:arrow-cpp\` and \`bash bench/setup-adbc-python.sh\`, or set ARROW_CPP_PYTHON`;
  const probe = spawnSync(python, ['-c', 'import adbc_driver_manager, pyarrow'], { encoding: 'utf8' });
  if (probe.status !== 0) return `${python} has no adbc_driver_manager or pyarrow (run \`bash bench/setup-adbc-python.sh\`): ${probe.stderr.trim().split('\n').pop()}`;
  const spec = specOf(driver);
  const shapes = SHAPES.map((s) => {
    const t = templates(spec, s.rows);
    return { rows: s.rows, mode: s.mode, sql: s.mode === 'literal' ? t.literal : t.params, nparams: t.nparams };
  });
  const arg = {
    driver: ours.driver,
    entrypoint: ours.entrypoint ?? defaultEntrypoint(ours.driver),
    databaseOptions: ours.databaseOptions,
    shapes,
    reps: REPS,
    warmup: WARMUP,
    tableRows: TABLE_ROWS,
  };
  const r = spawnSync(python, [join(repoRoot, 'bench', 'service_python.py'), JSON.stringify(arg)], { encoding: 'utf8', maxBuffer: 1 << 24 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`bench/service_python.py (${python}) failed (status ${r.status}):\n${r.stderr || r.stdout}`);
  return JSON.parse(line) as PythonResult;
}

function printLatency(driver: DriverName, peerName: string | undefined, res: LatencyResult, py: PythonResult | string): void {
  const vs = (key: string, other: string, o: number | undefined): void => {
    const ours = res.ms[key]!.ours!;
    if (o !== undefined) console.log(`service ${driver} ${key} vs ${other}: ours ${ms(ours)} ms, ${other} ${ms(o)} ms, ratio ${f2(ours / o)}`);
  };
  for (const shape of SHAPES) {
    const key = shapeKey(shape);
    if (peerName) vs(key, peerName, res.ms[key]!.peer);
    vs(key, 'floor', res.ms[key]!.floor);
    vs(key, 'floor-sync', res.ms[key]!['floor-sync']);
    if (typeof py !== 'string') vs(key, PYTHON_PEER, py.ms[key]);
  }
  for (const shape of SHAPES) {
    const key = shapeKey(shape);
    const h = res.held[key]!;
    const sides = (['ours', 'peer', 'floor', 'floor-sync'] as const).filter((x) => h[x] !== undefined);
    const label = (x: LatencySide): string => (x === 'peer' ? peerName ?? 'peer' : x);
    console.log(`service ${driver} ${key}, the JS thread per query (not idle in the event loop, medians, ms): ${sides.map((x) => `${label(x)} ${ms(h[x]!)}`).join(', ')}`);
  }
  if (typeof py === 'string') skipped(`service ${driver} vs ${PYTHON_PEER}`, py);
  else console.log(`service ${driver} ${PYTHON_PEER}: Python ${py.python}, adbc_driver_manager ${py.adbc_driver_manager}, pyarrow ${py.pyarrow}, its own process after the Node sides`);
  const us = (x: number): string => x.toFixed(0);
  for (const [key, steps] of Object.entries(res.steps)) {
    const total = Object.values(steps).reduce((s, x) => s + x, 0);
    console.log(`service ${driver} ${key}, ours by step (the statement API, medians of ${REPS}, µs): ${Object.entries(steps).map(([n, x]) => `${n} ${us(x)}`).join(', ')}; sum ${us(total)}`);
  }
  for (const [key, calls] of Object.entries(res.calls)) {
    const list = Object.entries(calls).map(([n, c]) => `${n}${c.calls > 1 ? ` x${c.calls}` : ''} ${us(c.wall)}/${us(c.held)}/${Number.isNaN(c.cpu) ? '-' : us(c.cpu)}`);
    console.log(
      `service ${driver} ${key}, the floor by driver call (medians of ${REPS}, µs: wall / of which the JS thread held / the JS thread's CPU in that part): ${list.join(', ')}`,
    );
  }
}

function runLoad(driver: DriverName, peerName: string, ours: BenchDb, peer: PeerArgs, usePool: boolean): void {
  CONCURRENCY.forEach((c, i) => {
    const one = (side: 'ours' | 'peer'): LoadResult => runChild<LoadResult>({ kind: 'load', driver, side, c, seconds: SECONDS, ours, peer, usePool });
    let o: LoadResult;
    let p: LoadResult;
    if (i % 2 === 0) {
      o = one('ours');
      p = one('peer');
    } else {
      p = one('peer');
      o = one('ours');
    }
    const rps = (x: number): string => x.toFixed(0);
    console.log(`service ${driver} concurrency ${c} vs ${peerName}: ours ${rps(o.perSecond)} req/s p99 ${ms(o.p99)} ms, ${peerName} ${rps(p.perSecond)} req/s p99 ${ms(p.p99)} ms, ratio ${f2(o.perSecond / p.perSecond)}`);
    console.log(`service ${driver} concurrency ${c} latency p50: ours ${ms(o.p50)} ms, ${peerName} ${ms(p.p50)} ms (${o.requests} and ${p.requests} requests in ${SECONDS} s)`);
    console.log(`service ${driver} concurrency ${c} event-loop delay: ours p99 ${ms(o.loopP99)} ms max ${ms(o.loopMax)} ms, ${peerName} p99 ${ms(p.loopP99)} ms max ${ms(p.loopMax)} ms`);
    console.log(`service ${driver} concurrency ${c} RSS at a third / at the end: ours ${mib(o.rssThird)} / ${mib(o.rssEnd)}, ${peerName} ${mib(p.rssThird)} / ${mib(p.rssEnd)}`);
  });
}

/** Why a JavaScript peer cannot be loaded here, or undefined. */
async function peerMissing(name: PeerArgs['name']): Promise<string | undefined> {
  try {
    await import(name);
    return undefined;
  } catch (e) {
    return `${name} cannot be loaded here (${(e as Error).message.split('\n')[0]})${name === 'node:sqlite' ? '' : ': run `npm ci`'}`;
  }
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const usePool = libraryHasPool() && !NO_POOL;
  console.log(
    `service bench: node ${process.version}, table of ${TABLE_ROWS.toLocaleString('en')} rows (index on id); latency: medians of ${REPS} after ${WARMUP}, sides round-robin in one process per database, ` +
      `ratio ours / other; load: ${SECONDS} s per point after a warm-up, C = ${CONCURRENCY.join(', ')}, ${LOAD_ROWS.toLocaleString('en')}-row parameterised queries, a fresh process per side and point, ratio ours / peer in req/s; ` +
      `ours under load: ${oursMode(usePool)}${libraryHasPool() ? '' : ' (the library has no db.pool yet)'}; ` +
      `a query's driver calls: ${queryRun() !== null ? 'one native run per query (src/adbc/run.ts)' : `one hop each (${queryRunMissing})`}, ` +
      `on ${nativeWorkers() !== null ? "the package's worker threads (src/memory/workers.ts)" : `koffi's async form on libuv's pool (${nativeWorkersMissing()}; UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? 'unset (4)'})`}; load average ${load()}`,
  );
  const dir = mkdtempSync(join(tmpdir(), 'arrow-device-bench-service-'));
  try {
    for (const driver of DRIVERS) {
      if (driver === 'postgresql') {
        const why = POSTGRESQL.missing ?? postgresMissing();
        if (why) {
          skipped('service postgresql', why);
          continue;
        }
        const server = await startPostgres();
        try {
          const ours = benchDb(POSTGRESQL, server.uri);
          await createTable(POSTGRESQL, ours);
          const missing = await peerMissing('pg');
          if (missing) skipped('service postgresql vs pg', missing);
          const peer: PeerArgs | undefined = missing ? undefined : { name: 'pg', uri: server.uri };
          printLatency('postgresql', peer && 'pg', runChild<LatencyResult>({ kind: 'latency', driver, ours, peer, reps: REPS, warmup: WARMUP }), pythonFloor(driver, ours));
          if (peer) runLoad('postgresql', 'pg.Pool', ours, peer, usePool);
        } finally {
          server.stop();
        }
      } else if (driver === 'duckdb') {
        const library = nodeApiDuckdb();
        const why = library ? undefined : DUCKDB.missing;
        if (why) {
          skipped('service duckdb', why);
          continue;
        }
        const path = join(dir, 'svc.duckdb');
        const writable = benchDb(DUCKDB, undefined, { path });
        if (library) writable.driver = library;
        await createTable(DUCKDB, writable);
        const ours: BenchDb = { ...writable, databaseOptions: { path, access_mode: 'READ_ONLY' } };
        const missing = library ? await peerMissing('@duckdb/node-api') : '@duckdb/node-api has no bindings for this platform';
        if (missing) skipped('service duckdb vs @duckdb/node-api', missing);
        const peer: PeerArgs | undefined = missing ? undefined : { name: '@duckdb/node-api', path };
        printLatency('duckdb', peer && '@duckdb/node-api', runChild<LatencyResult>({ kind: 'latency', driver, ours, peer, reps: REPS, warmup: WARMUP }), pythonFloor(driver, ours));
        if (peer) runLoad('duckdb', '@duckdb/node-api', ours, peer, usePool);
      } else if (driver === 'sqlite') {
        if (SQLITE.missing) {
          skipped('service sqlite', SQLITE.missing);
          continue;
        }
        const path = join(dir, 'svc.sqlite');
        const ours = benchDb(SQLITE, undefined, { uri: path });
        await createTable(SQLITE, ours);
        const missing = await peerMissing('node:sqlite');
        if (missing) skipped('service sqlite vs node:sqlite', missing);
        const peer: PeerArgs | undefined = missing ? undefined : { name: 'node:sqlite', path };
        printLatency('sqlite', peer && 'node:sqlite', runChild<LatencyResult>({ kind: 'latency', driver, ours, peer, reps: REPS, warmup: WARMUP }), pythonFloor(driver, ours));
      } else {
        throw new Error(`--drivers: unknown driver ${driver} (postgresql, duckdb, sqlite)`);
      }
      console.log(`service ${driver}: done at ${((performance.now() - t0) / 1000).toFixed(0)} s, load average ${load()}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`service bench: every result checked; ${((performance.now() - t0) / 1000).toFixed(0)} s in all, load average ${load()}`);
}

void (async () => {
  try {
    const at = process.argv.indexOf('--child');
    if (at >= 0) {
      const args = JSON.parse(process.argv[at + 1]!) as LatencyArgs | LoadArgs;
      console.log(JSON.stringify(args.kind === 'latency' ? await latencyChild(args) : await loadChild(args)));
    } else await main();
  } catch (e) {
    console.error(e);
    process.exitCode = 1;
  }
})();
