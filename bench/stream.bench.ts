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
 * Memory over a long stream read and dropped (DESIGN.md, "GC cannot bound
 * memory"): a C producer (test/ownership/counting.c) hands out batches of
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

async function main(): Promise<void> {
  console.log(`stream bench: node ${process.version}, compiled library (.build/run)`);
  if (process.argv.includes('--memory')) {
    await memory();
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
  await memory();
  console.log(`accounting after: ${JSON.stringify(accounting())}`);
}

main().catch((e: unknown) => {
  console.error((e as Error).stack ?? String(e));
  process.exitCode = 1;
});
