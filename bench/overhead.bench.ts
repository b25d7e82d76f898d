/**
 * Fixed per-batch overhead of export + import (independent of rows), against
 * the compiled library:
 *
 *   npx tsc -p tsconfig.run.json && node .build/run/bench/overhead.bench.js [--quick]
 *
 * Prints microseconds per batch (median of several runs, each a loop of many
 * batches, so garbage collection and the releases the FinalizationRegistry
 * triggers are part of the figure) for:
 * - exportArray + importRecordBatch (arrow-js Schema given) + freeArrowArray,
 *   for a 1-row batch of 1 int32 column, of 4 columns (i32, f64, utf8, f64)
 *   and of 100 int32 columns;
 * - exportArray + freeArrowArray alone (export, then release by the consumer);
 * - exportArrayStream + importArrayStream of 1-row batches (batches/s).
 */
import { Field, Float64, Int32, makeData, RecordBatch, Schema, Struct, Table, Utf8, vectorFromArray, type Vector } from 'apache-arrow';
import {
  accounting, exportArray, exportArrayStream, freeArrowArray, freeArrowArrayStream, importArrayStream, importRecordBatch,
} from '../src/index.js';

const quick = process.argv.includes('--quick');
const REPS = quick ? 3 : 9;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function int32Batch(rows: number, columns: number): RecordBatch {
  const fields = Array.from({ length: columns }, (_, k) => new Field(`c${k}`, new Int32(), false));
  const schema = new Schema(fields);
  const children = fields.map((_, k) => makeData({ type: new Int32(), length: rows, data: Int32Array.from({ length: rows }, (_, i) => i + k) }));
  return new RecordBatch(schema, makeData({ type: new Struct(fields), length: rows, children }));
}

function fourColumns(): RecordBatch {
  const cols: Record<string, Vector> = {
    i: vectorFromArray(Int32Array.from([1])),
    f: vectorFromArray(Float64Array.from([0.5])),
    s: vectorFromArray(['a'], new Utf8()),
    d: vectorFromArray([1.5], new Float64()),
  };
  return new Table(cols).batches[0]!;
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/**
 * Median microseconds per iteration of `fn` run `n` times in a loop. The loop
 * yields to the event loop every 500 iterations, as a program would, so the
 * FinalizationRegistry callbacks (the producer releases of collected imports)
 * run, inside the timed region.
 */
async function perIter(fn: () => void, n: number): Promise<number> {
  for (let i = 0; i < Math.min(n, 2000); i++) fn(); // warm up
  await tick();
  const t: number[] = [];
  for (let r = 0; r < REPS; r++) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      fn();
      if (i % 500 === 499) await tick();
    }
    t.push(((performance.now() - t0) * 1000) / n);
  }
  return median(t);
}

let sink = 0;

async function roundTrip(label: string, batch: RecordBatch, n: number): Promise<void> {
  const schema = batch.schema;
  const rt = await perIter(() => {
    const p = exportArray(batch);
    const b = importRecordBatch(p, schema);
    freeArrowArray(p);
    sink += b.numRows;
  }, n);
  const ex = await perIter(() => {
    const p = exportArray(batch);
    freeArrowArray(p);
  }, n);
  console.log(
    `${label.padEnd(34)} export+import ${rt.toFixed(2).padStart(7)} us/batch (${(1e6 / rt).toFixed(0).padStart(7)}/s)` +
      `   export+free ${ex.toFixed(2).padStart(7)} us`,
  );
}

async function stream(label: string, batch: RecordBatch, count: number): Promise<void> {
  const batches = new Array<RecordBatch>(count).fill(batch);
  const once = async (bs: RecordBatch[]): Promise<number> => {
    const t0 = performance.now();
    const ptr = exportArrayStream(bs);
    const reader = importArrayStream(ptr);
    let rows = 0;
    for (const b of reader) {
      rows += b.numRows;
      if (reader.batchesRead % 500 === 0) await tick();
    }
    freeArrowArrayStream(ptr);
    if (rows !== bs.length * batch.numRows) throw new Error('row count mismatch');
    return (performance.now() - t0) / 1000;
  };
  await once(batches.slice(0, 2000));
  const times: number[] = [];
  for (let r = 0; r < REPS; r++) times.push(await once(batches));
  const s = median(times);
  console.log(`${label.padEnd(34)} stream        ${((s / count) * 1e6).toFixed(2).padStart(7)} us/batch (${(count / s).toFixed(0).padStart(7)}/s)`);
}

console.log(`overhead bench: node ${process.version}, compiled library`);
const n = quick ? 5000 : 20000;
await roundTrip('1 row, 1 int32 column', int32Batch(1, 1), n);
await roundTrip('1 row, 4 columns (i32,f64,utf8,f64)', fourColumns(), n);
await roundTrip('1 row, 100 int32 columns', int32Batch(1, 100), Math.max(500, n / 20));
await stream('1 row, 1 int32 column', int32Batch(1, 1), quick ? 20000 : 100000);
await stream('1 row, 4 columns', fourColumns(), quick ? 20000 : 50000);
await tick();
console.log(`accounting after: ${JSON.stringify(accounting())} (sink ${sink})`);
