/**
 * Stream benchmark, against the compiled library (run `npm run build` first):
 *
 * 1. Batches per second through exportArrayStream + importArrayStream on
 *    the same thread (every get_next a C call into a JS callback and back),
 *    for 1-row batches (the per-batch overhead; goal >= 50,000/s) and
 *    64K-row batches (should be about the same: O(buffers), not O(bytes)).
 * 2. DuckDB (4 threads) summing 10M int32 rows from a JS stream of 64K-row
 *    batches (duckdb_arrow_scan, get_next called from DuckDB's workers and
 *    queued by koffi to the JS thread) against DuckDB summing the same rows
 *    from its own table.
 *
 *   npm run bench:stream [-- --quick] [-- --memory]
 *
 * 3. Memory over a long stream read and dropped (see `memory()`).
 * 4. The off-thread reader (`offThread: true`, see `offThread()`): its cost per
 *    batch against the plain call, and the event loop's responsiveness (the
 *    longest a 1 ms timer waited) while SQLite's ADBC driver reads 1M rows.
 *
 *   npm run bench:stream -- --offthread     # only section 4
 *
 * `copy` rows import with `{ copy: true }`: the producer is released at once
 * instead of when the garbage collector finds the batch unreachable.
 */
// The DuckDB peer first: it raises koffi's async stack before any library loads.
import { DUCKDB_MISSING, DuckDB, duckdbAvailable } from '../test/peers/duckdb/duckdb.js';
import { Field, Float64, Int32, makeData, RecordBatch, Schema, Struct, Table, Utf8, vectorFromArray } from 'apache-arrow';
import { accounting, createAsyncDeviceStreamReader, exportArrayStream, freeArrowArrayStream, importArrayStream } from '../src/index.js';
import { counting, countingMissing } from '../test/ownership/counting.js';
import { asyncPeer, peerMissing } from '../test/async/peer.js';
import { AdbcDatabase } from '../src/adbc/index.js';
import { SQLITE } from '../test/adbc/drivers.js';

const quick = process.argv.includes('--quick');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

const schema = new Schema([new Field('x', new Int32(), false)]);

function int32Batch(rows: number, start = 0): RecordBatch {
  const values = new Int32Array(rows);
  for (let i = 0; i < rows; i++) values[i] = start + i;
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: rows, children: [makeData({ type: new Int32(), length: rows, data: values })] }));
}

/** Seconds to pass `batches` through export + import, reading every batch. */
function roundTrip(batches: RecordBatch[], copy = false): number {
  const t0 = performance.now();
  const ptr = exportArrayStream(batches);
  const reader = importArrayStream(ptr, { copy });
  let rows = 0;
  for (const b of reader) rows += b.numRows;
  freeArrowArrayStream(ptr);
  const s = (performance.now() - t0) / 1000;
  if (rows !== batches.reduce((n, b) => n + b.numRows, 0)) throw new Error('row count mismatch');
  return s;
}

function sameThread(label: string, batch: RecordBatch, count: number, reps: number, copy = false): void {
  const batches = new Array<RecordBatch>(count).fill(batch);
  roundTrip(batches.slice(0, Math.min(count, 2000)), copy); // warm up
  const times: number[] = [];
  for (let r = 0; r < reps; r++) times.push(roundTrip(batches, copy));
  const s = median(times);
  console.log(
    `${(label + (copy ? ', copy' : '')).padEnd(40)} ${String(count).padStart(6)} batches  ${(count / s).toFixed(0).padStart(8)} batches/s  ` +
      `${((s / count) * 1e6).toFixed(2).padStart(7)} us/batch  ${((count * batch.numRows) / s / 1e6).toFixed(1).padStart(8)} M rows/s`,
  );
}

async function duck(): Promise<void> {
  if (!duckdbAvailable()) {
    console.log(`DuckDB skipped: ${DUCKDB_MISSING}`);
    return;
  }
  const rows = 10_000_000;
  const batchRows = 64 * 1024;
  const batches: RecordBatch[] = [];
  for (let start = 0; start < rows; start += batchRows) batches.push(int32Batch(Math.min(batchRows, rows - start), start));
  const expected = String((BigInt(rows) * BigInt(rows - 1)) / 2n);
  const db = await DuckDB.open({ threads: 4 });
  try {
    await db.run(`CREATE TABLE t AS SELECT range::INTEGER AS x FROM range(${rows})`);
    const reps = quick ? 3 : 7;
    const own: number[] = [];
    const js: number[] = [];
    let n = 0;
    for (let r = 0; r < reps; r++) {
      let t0 = performance.now();
      const [[a]] = (await db.queryText('SELECT sum(x) FROM t')) as string[][];
      own.push(performance.now() - t0);
      if (a !== expected) throw new Error(`own table sum ${a}`);
      t0 = performance.now();
      const stream = exportArrayStream(batches);
      const view = `v${n++}`;
      await db.arrowScan(view, stream);
      const [[b]] = (await db.queryText(`SELECT sum(x) FROM ${view}`)) as string[][];
      js.push(performance.now() - t0);
      freeArrowArrayStream(stream);
      if (b !== expected) throw new Error(`stream sum ${b}`);
    }
    const o = median(own);
    const j = median(js);
    console.log(`DuckDB sum of 10M int32, threads=4 (${batches.length} batches of 64K rows):`);
    console.log(`  from its own table        ${o.toFixed(1).padStart(8)} ms`);
    console.log(`  from a JS ArrowArrayStream ${j.toFixed(1).padStart(7)} ms  (${(batches.length / (j / 1000)).toFixed(0)} batches/s through worker threads; ratio stream/own ${(j / o).toFixed(2)})`);
  } finally {
    db.close();
  }
}

/**
 * Memory over a long stream read and dropped
 * (docs/architecture.md#a-stream-bounds-its-own-memory): a C producer (test/ownership/counting.c) hands out batches of
 * 8 MiB and counts those outstanding (handed out, not released). Read the way
 * the README shows (`for (const b of reader) use(b)`, nothing kept), a reader
 * must keep that count small by itself. Peak outstanding batches and peak
 * RSS are printed for `for...of`, `for await...of` and the async reader; the
 * `keep: true` row is what every reader did before readers released batches
 * themselves (only the garbage collector, which never runs its finalizers
 * inside a synchronous loop), on fewer batches so that it ends.
 */
async function memory(): Promise<void> {
  if (countingMissing) {
    console.log(`memory: ${countingMissing}, skipped`);
    return;
  }
  const c = counting();
  const n = quick ? 200 : 2000;
  const rows = 2 * 1024 * 1024; // 8 MiB of int32
  const mb = (x: number): string => `${(x / 2 ** 20).toFixed(0)} MB`;
  const report = (label: string, count: number, peakRss: number, rss0: number, t0: number): void => {
    const s = (performance.now() - t0) / 1000;
    console.log(
      `${label.padEnd(44)} ${String(count).padStart(5)} batches of 8 MiB: peak outstanding ${String(c.peak()).padStart(4)}, ` +
        `peak RSS ${mb(peakRss).padStart(7)} (start ${mb(rss0)}), ${(count / s).toFixed(0)} batches/s`,
    );
  };
  const use = (b: RecordBatch): number => (b.getChild('x')!.get(rows - 1) as number);
  for (const kind of ['for...of', 'for await...of'] as const) {
    c.resetPeak();
    const rss0 = process.memoryUsage.rss();
    let peak = rss0;
    const t0 = performance.now();
    const s = c.stream(n, rows);
    const reader = importArrayStream(s);
    freeArrowArrayStream(s);
    let k = 0;
    if (kind === 'for...of') {
      for (const b of reader) {
        use(b);
        if (++k % 16 === 0) peak = Math.max(peak, process.memoryUsage.rss());
      }
    } else {
      for await (const b of reader) {
        use(b);
        if (++k % 16 === 0) peak = Math.max(peak, process.memoryUsage.rss());
      }
    }
    report(`ArrowArrayStream, ${kind}`, k, peak, rss0, t0);
  }
  if (!peerMissing) {
    const p = asyncPeer();
    c.resetPeak();
    const rss0 = process.memoryUsage.rss();
    let peak = rss0;
    let peakLive = 0;
    const t0 = performance.now();
    const reader = createAsyncDeviceStreamReader({ queueSize: 4 });
    const prod = p.produce(reader.handler, n, rows, -1);
    let k = 0;
    for await (const b of reader) {
      if (b instanceof RecordBatch) use(b);
      peakLive = Math.max(peakLive, p.liveBatches());
      if (++k % 16 === 0) peak = Math.max(peak, process.memoryUsage.rss());
    }
    await p.produceWait(prod);
    await reader.released;
    const s = (performance.now() - t0) / 1000;
    console.log(
      `${'async reader (native producer thread)'.padEnd(44)} ${String(k).padStart(5)} batches of 8 MiB: peak live batches ${String(peakLive).padStart(4)}, ` +
        `peak RSS ${mb(peak).padStart(7)} (start ${mb(rss0)}), ${(k / s).toFixed(0)} batches/s`,
    );
  } else {
    console.log(`async reader: ${peerMissing}, skipped`);
  }
  // The behaviour before: nothing released inside the loop.
  {
    const m = quick ? 50 : 150;
    c.resetPeak();
    const rss0 = process.memoryUsage.rss();
    let peak = rss0;
    const t0 = performance.now();
    const s = c.stream(m, rows);
    const reader = importArrayStream(s, { keep: true });
    freeArrowArrayStream(s);
    let k = 0;
    for (const b of reader) {
      use(b);
      if (++k % 16 === 0) peak = Math.max(peak, process.memoryUsage.rss());
    }
    peak = Math.max(peak, process.memoryUsage.rss());
    report('keep: true, nothing held (the GC alone)', k, peak, rss0, t0);
  }
}

/**
 * The off-thread reader. (a) Cost per batch: a C producer (counting.c) of
 * 1-row batches whose get_next does no work, read with `for...of`, with
 * `for await` (plain: get_next on the JS thread), and with `for await` and
 * `offThread: true` (get_next on a koffi worker thread, the result back
 * through the event loop): the difference is what the thread hand-off costs
 * a batch. (b) Responsiveness: SQLite's ADBC driver streams 1M rows (its
 * get_next steps SQLite through a batch's rows) while a 1 ms interval timer
 * records the longest gap between its ticks: plain `for await` holds the JS
 * thread for the whole read (its steps resolve as microtasks), off-thread
 * reading lets the timer run during every get_next.
 */
async function offThread(): Promise<void> {
  if (countingMissing) {
    console.log(`off-thread reader: ${countingMissing}, skipped`);
  } else {
    const c = counting();
    const n = quick ? 5_000 : 20_000;
    const reps = quick ? 3 : 5;
    const read = async (mode: 'for...of' | 'for await' | 'for await, offThread'): Promise<number> => {
      const ptr = c.slowStream(n, 1);
      const reader = importArrayStream(ptr, { offThread: mode === 'for await, offThread' });
      freeArrowArrayStream(ptr);
      let rows = 0;
      const t0 = performance.now();
      if (mode === 'for...of') for (const b of reader) rows += b.numRows;
      else for await (const b of reader) rows += b.numRows;
      const us = ((performance.now() - t0) * 1000) / n;
      if (rows !== n) throw new Error('row count mismatch');
      return us;
    };
    console.log(`off-thread reader, cost per batch (a C producer of ${n} 1-row batches, get_next does no work; median of ${reps}):`);
    const base = new Map<string, number>();
    for (const mode of ['for...of', 'for await', 'for await, offThread'] as const) {
      await read(mode); // warm up
      const times: number[] = [];
      for (let r = 0; r < reps; r++) times.push(await read(mode));
      const us = median(times);
      base.set(mode, us);
      const extra = mode === 'for...of' ? '' : `  (+${(us - base.get('for...of')!).toFixed(2)} us over for...of)`;
      console.log(`  ${mode.padEnd(22)} ${us.toFixed(2).padStart(7)} us/batch  ${(1e6 / us).toFixed(0).padStart(8)} batches/s${extra}`);
    }
  }
  if (SQLITE.missing) {
    console.log(`off-thread reader with SQLite: ${SQLITE.missing}, skipped`);
    return;
  }
  const rows = 1_000_000;
  const db = new AdbcDatabase(SQLITE.options());
  const conn = await db.connect();
  try {
    console.log(`event loop while SQLite's ADBC driver streams ${rows.toLocaleString('en')} rows (i, i*i, 'row ' || i), a 1 ms timer's longest wait:`);
    for (const batchRows of [1024, 100_000]) {
      for (const off of [false, true]) {
        await using stmt = await conn.createStatement();
        await stmt.setSqlQuery(`WITH s AS (${SQLITE.series(rows)}) SELECT i, i * i AS square, 'row ' || i AS label FROM s ORDER BY i`);
        stmt.setOption('adbc.sqlite.query.batch_rows', String(batchRows));
        const reader = await stmt.executeQuery({ offThread: off });
        let maxGap = 0;
        let ticks = 0;
        let last = performance.now();
        const timer = setInterval(() => {
          const now = performance.now();
          maxGap = Math.max(maxGap, now - last);
          last = now;
          ticks++;
        }, 1);
        const t0 = performance.now();
        let n = 0;
        let batches = 0;
        last = t0;
        for await (const b of reader) {
          n += b.numRows;
          batches++;
        }
        const ms = performance.now() - t0;
        // The wait still running when the read ended counts too.
        maxGap = Math.max(maxGap, performance.now() - last);
        clearInterval(timer);
        if (n !== rows) throw new Error('row count mismatch');
        console.log(
          `  batch_rows ${String(batchRows).padStart(6)}, ${(off ? 'for await, offThread' : 'for await').padEnd(20)} ${ms.toFixed(0).padStart(6)} ms for ${String(batches).padStart(4)} batches ` +
            `(${((ms * 1000) / batches).toFixed(0).padStart(6)} us/batch); longest timer wait ${maxGap.toFixed(1).padStart(7)} ms, ${String(ticks).padStart(4)} ticks`,
        );
      }
    }
  } finally {
    await conn.close();
    await db.close();
  }
}

async function main(): Promise<void> {
  console.log(`stream bench: node ${process.version}, compiled library (.build/run)`);
  if (process.argv.includes('--memory')) {
    await memory();
    return;
  }
  if (process.argv.includes('--offthread')) {
    await offThread();
    return;
  }
  const reps = quick ? 3 : 7;
  const n1 = quick ? 20_000 : 100_000;
  sameThread('1 row, 1 int32 column', int32Batch(1), n1, reps);
  sameThread('1 row, 1 int32 column', int32Batch(1), n1, reps, true);
  sameThread('64K rows, 1 int32 column', int32Batch(65536), quick ? 2000 : 20_000, reps);
  const wide = new Table({
    i: vectorFromArray(Int32Array.from([1])),
    f: vectorFromArray(Float64Array.from([0.5])),
    s: vectorFromArray(['a'], new Utf8()),
    d: vectorFromArray([1.5], new Float64()),
  }).batches[0]!;
  sameThread('1 row, 4 columns (i32,f64,utf8,f64)', wide, quick ? 20_000 : 50_000, reps);
  await duck();
  await offThread();
  await memory();
  console.log(`accounting after: ${JSON.stringify(accounting())}`);
}

main().catch((e: unknown) => {
  console.error((e as Error).stack ?? String(e));
  process.exitCode = 1;
});
