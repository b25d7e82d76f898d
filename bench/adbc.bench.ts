/**
 * `npm run bench:adbc`: arrow-device/adbc against the IPC route the official
 * JavaScript driver manager takes, per driver (DuckDB, SQLite, PostgreSQL
 * against a server started here), in one run:
 *
 * - query: 1M rows (int64, float64, text) into an arrow-js Table. Ours: the
 *   driver's stream imported zero-copy. IPC route: the same stream, each
 *   batch serialised to Arrow IPC and read back with arrow-js (what the
 *   official package does in Rust and JS). Floor: the driver's stream
 *   drained by hand, every array released, nothing imported.
 * - ingest: the same 1M rows from an arrow-js Table. Ours: a zero-copy
 *   `exportArrayStream`. IPC route: `tableToIPC`, read back, then ingested.
 * - peak memory of each query route over the process's resident size
 *   before it, beside the result's own bytes;
 * - the latency of a one-row query.
 *
 * Goals (issue 31): a query within 1.1x of the floor; a query's peak at most
 * the result's bytes + 20%; ingest at least 1.5x the IPC route. Printed
 * with the figures, met or not.
 */
import { RecordBatch, Table, tableFromIPC, tableToIPC, type Data } from 'apache-arrow';
import { allocArrowArrayStream, freeArrowArrayStream, nativeMemory, NULL, type Signature } from '../src/index.js';
import { AdbcDatabase, IngestMode, type AdbcConnection } from '../src/adbc/index.js';
import { allocHandle, Driver, freeNative, loadLibrary } from '../src/adbc/driver.js';
import { DRIVERS, type DriverSpec } from '../test/adbc/drivers.js';
import { postgresMissing, startPostgres, type PostgresServer } from '../test/adbc/postgres.js';

const ROWS = 1_000_000;
const REPS = Number(process.env.BENCH_REPS ?? 5);
const mem = nativeMemory();
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

function createSql(spec: DriverSpec): string {
  return `CREATE TABLE bench AS WITH s AS (${spec.series(ROWS)}) SELECT i, i * 0.5 AS x, 'text ' || i AS s FROM s`;
}

/** The bytes of a table's buffers (what the result itself holds). */
function tableBytes(t: Table): number {
  let n = 0;
  const add = (d: Data): void => {
    for (const b of [d.values, d.valueOffsets, d.nullBitmap] as (ArrayBufferView | undefined)[]) n += b?.byteLength ?? 0;
    for (const c of d.children) add(c);
  };
  for (const b of t.batches) add(b.data);
  return n;
}

/** Runs `f`, sampling the resident size every millisecond: its time and peak growth over the size before. */
async function measure<T>(f: () => Promise<T>): Promise<{ ms: number; peak: number; value: T }> {
  gc();
  const base = process.memoryUsage.rss();
  let peak = base;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 1);
  const t0 = performance.now();
  const value = await f();
  const ms = performance.now() - t0;
  clearInterval(timer);
  peak = Math.max(peak, process.memoryUsage.rss());
  return { ms, peak: peak - base, value };
}

const GET_NEXT: Signature = { name: 'get_next', result: 'int32', params: ['pointer', 'pointer'] };
const RELEASE: Signature = { name: 'release', result: 'void', params: ['pointer'] };

/** The floor: the driver's stream drained by hand through the raw ADBC calls, each array released, nothing imported. */
async function floor(spec: DriverSpec, options: ReturnType<DriverSpec['options']>): Promise<number[]> {
  const entry = spec.name === 'duckdb' ? 'duckdb_adbc_init' : spec.name === 'sqlite' ? 'AdbcDriverSqliteInit' : 'AdbcDriverPostgresqlInit';
  const d = Driver.init(loadLibrary(spec.library), entry, 'bench floor');
  const db = allocHandle();
  const conn = allocHandle();
  d.call('DatabaseNew', db);
  for (const [k, v] of Object.entries(options.databaseOptions ?? {})) d.call('DatabaseSetOption', db, k, v);
  d.call('DatabaseInit', db);
  d.call('ConnectionNew', conn);
  d.call('ConnectionInit', conn, db);
  const lay = mem.layouts.ArrowArrayStream.offsets;
  const arr = mem.layouts.ArrowArray;
  const times: number[] = [];
  const run = async (sql: string, drain: boolean): Promise<void> => {
    const stmt = allocHandle();
    d.call('StatementNew', conn, stmt);
    d.call('StatementSetSqlQuery', stmt, sql);
    const stream = allocArrowArrayStream();
    const out = mem.alloc(arr.size);
    try {
      await d.callAsync('StatementExecuteQuery', stmt, drain ? stream : NULL, NULL);
      if (!drain) return;
      const getNext = mem.readPtr(stream + BigInt(lay.get_next!));
      for (;;) {
        const rc = (await mem.callAsync(getNext, GET_NEXT, stream, out)) as number;
        if (rc !== 0) throw new Error(`get_next: ${rc}`);
        const release = mem.readPtr(out + BigInt(arr.offsets.release!));
        if (release === NULL) break;
        mem.call(release, RELEASE, out);
      }
    } finally {
      mem.free(out);
      freeArrowArrayStream(stream);
      d.call('StatementRelease', stmt);
      freeNative(stmt);
    }
  };
  try {
    if (spec.name === 'postgresql') await run('DROP TABLE IF EXISTS bench', false);
    await run(createSql(spec), false);
    for (let r = 0; r <= REPS; r++) {
      const t0 = performance.now();
      await run('SELECT * FROM bench', true);
      if (r > 0) times.push(performance.now() - t0);
    }
    if (spec.name === 'postgresql') await run('DROP TABLE bench', false);
  } finally {
    d.call('ConnectionRelease', conn);
    d.call('DatabaseRelease', db);
    freeNative(conn);
    freeNative(db);
    d.release();
  }
  return times;
}

/** The IPC route of a query: every batch of the driver's stream serialised to IPC and read back by arrow-js. */
async function queryViaIpc(conn: AdbcConnection): Promise<Table> {
  const batches: RecordBatch[] = [];
  for await (const b of await conn.queryStream('SELECT * FROM bench')) {
    batches.push(...tableFromIPC(tableToIPC(new Table([b]), 'stream')).batches);
  }
  return new Table(batches);
}

async function benchDriver(spec: DriverSpec, server: PostgresServer | undefined): Promise<void> {
  const options = spec.options(server?.uri);
  const floorMs = median(await floor(spec, options));
  const db = new AdbcDatabase(options);
  const conn = await db.connect();
  try {
    await conn.execute(createSql(spec));
    // Warm both routes once.
    (await conn.query('SELECT * FROM bench')).release();
    await queryViaIpc(conn);
    const ours: number[] = [];
    const ipc: number[] = [];
    let oursPeak = 0;
    let ipcPeak = 0;
    let bytes = 0;
    for (let r = 0; r < REPS; r++) {
      const a = await measure(() => conn.query('SELECT * FROM bench'));
      ours.push(a.ms);
      oursPeak = Math.max(oursPeak, a.peak);
      bytes = tableBytes(a.value);
      a.value.release();
      const b = await measure(() => queryViaIpc(conn));
      ipc.push(b.ms);
      ipcPeak = Math.max(ipcPeak, b.peak);
    }
    const q = median(ours);
    const qi = median(ipc);
    console.log(`adbc ${spec.name} query: ours ${q.toFixed(1)} ms, ipc route ${qi.toFixed(1)} ms, ratio ${(qi / q).toFixed(2)}`);
    console.log(`adbc ${spec.name} query floor (driver stream drained by hand): ${floorMs.toFixed(1)} ms; ours/floor ${(q / floorMs).toFixed(2)} (goal <= 1.10: ${q / floorMs <= 1.1 ? 'met' : 'not met'})`);
    const mb = (n: number): string => `${(n / 2 ** 20).toFixed(1)} MiB`;
    console.log(`adbc ${spec.name} query peak memory: ours ${mb(oursPeak)}, ipc route ${mb(ipcPeak)}, result ${mb(bytes)}; ours/result ${(oursPeak / bytes).toFixed(2)} (goal <= 1.20: ${oursPeak <= bytes * 1.2 ? 'met' : 'not met'})`);

    const source = await conn.query('SELECT * FROM bench');
    const data = new Table(source.batches.map((b) => tableFromIPC(tableToIPC(new Table([b]), 'stream')).batches[0]!)); // JS-owned
    source.release();
    const ingOurs: number[] = [];
    const ingIpc: number[] = [];
    for (let r = 0; r < REPS; r++) {
      let t0 = performance.now();
      await conn.ingest('bench_in', data, { mode: IngestMode.Replace });
      ingOurs.push(performance.now() - t0);
      t0 = performance.now();
      await conn.ingest('bench_in', tableFromIPC(tableToIPC(data, 'stream')), { mode: IngestMode.Replace });
      ingIpc.push(performance.now() - t0);
    }
    const i = median(ingOurs);
    const ii = median(ingIpc);
    console.log(`adbc ${spec.name} ingest: ours ${i.toFixed(1)} ms, ipc route ${ii.toFixed(1)} ms, ratio ${(ii / i).toFixed(2)} (goal >= 1.50: ${ii / i >= 1.5 ? 'met' : 'not met'})`);

    const lat: number[] = [];
    for (let r = 0; r < 200; r++) {
      const t0 = performance.now();
      (await conn.query('SELECT 1 AS x')).release();
      lat.push(performance.now() - t0);
    }
    console.log(`adbc ${spec.name} 1-row query latency: ${(median(lat) * 1000).toFixed(0)} us (median of 200)`);
    await conn.execute('DROP TABLE bench');
    await conn.execute('DROP TABLE bench_in');
  } finally {
    await conn.close();
    await db.close();
  }
}

async function main(): Promise<void> {
  console.log(`adbc bench: node ${process.version}, ${ROWS.toLocaleString('en')} rows (int64, float64, text), medians of ${REPS}`);
  for (const spec of DRIVERS) {
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
      await benchDriver(spec, server);
    } finally {
      server?.stop();
    }
  }
}

void (async () => {
  try {
    await main();
  } catch (e) {
    console.error(e);
    process.exitCode = 1;
  }
})();
