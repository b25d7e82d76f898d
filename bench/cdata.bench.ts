/**
 * C Data Interface benchmark: export + import of one record batch through
 * ArrowSchema/ArrowArray, against serialising the same batch through Arrow
 * IPC with arrow-js (tableToIPC + tableFromIPC), measured in the same run.
 *
 *   npm run bench [-- --json FILE] [-- --quick]
 *
 * Prints medians, the ratio IPC / C Data, and how import time grows with
 * rows (import costs O(number of buffers), not O(bytes):
 * docs/architecture.md#import-one-plan-per-schema-one-reader).
 */
import { writeFileSync } from 'node:fs';
import { Int64, RecordBatch, Table, tableFromIPC, tableToIPC, Utf8, vectorFromArray, type Vector } from 'apache-arrow';
import { accounting, exportRecordBatch, freeArrowArray, freeArrowSchema, importRecordBatch, importSchema, type ImportedRecordBatch } from '../src/index.js';
import { collectUntil } from '../test/helpers/gc.js';

const args = process.argv.slice(2);
const jsonOut = args.includes('--json') ? args[args.indexOf('--json') + 1] : undefined;
const quick = args.includes('--quick');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Runs fn `reps` times after `warm` warm-up runs; returns the median in microseconds. */
function time(fn: () => void, reps: number, warm = 3): number {
  for (let i = 0; i < warm; i++) fn();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    fn();
    t.push((performance.now() - t0) * 1000);
  }
  return median(t);
}

function makeTable(rows: number, extraInt32Columns = 0): Table {
  const cols: Record<string, Vector> = {
    i32: vectorFromArray(Int32Array.from({ length: rows }, (_, i) => i)),
    f64: vectorFromArray(Float64Array.from({ length: rows }, (_, i) => i * 0.5)),
    i64: vectorFromArray(Array.from({ length: rows }, (_, i) => (i % 10 === 0 ? null : BigInt(i))), new Int64()),
    utf8: vectorFromArray(Array.from({ length: rows }, (_, i) => `v${i % 1000}`), new Utf8()),
  };
  for (let k = 0; k < extraInt32Columns; k++) cols[`c${k}`] = vectorFromArray(Int32Array.from({ length: rows }, (_, i) => i + k));
  return new Table(cols);
}

interface Row {
  case: string;
  rows: number;
  columns: number;
  exportUs: number;
  importUs: number;
  cdataUs: number;
  ipcUs: number;
  ipcOverCdata: number;
}

function bench(label: string, table: Table): Row {
  const batch = table.batches.length === 1 ? table.batches[0]! : new RecordBatch(table.schema, table.batches[0]!.data);
  const rows = batch.numRows;
  const reps = rows >= 5_000_000 ? 7 : rows >= 500_000 ? 21 : 101;
  // The schema is imported once (a stream would do that too); per batch: export + import of the array.
  const s = exportRecordBatch(batch);
  const schema = importSchema(s.schema);
  freeArrowSchema(s.schema);
  freeArrowArray(s.array);
  let exported = 0n;
  const exportUs = time(() => {
    const r = exportRecordBatch(batch);
    freeArrowSchema(r.schema);
    if (exported) freeArrowArray(exported);
    exported = r.array;
  }, reps);
  freeArrowArray(exported);
  const pending: bigint[] = [];
  for (let i = 0; i < reps + 3; i++) {
    const r = exportRecordBatch(batch);
    freeArrowSchema(r.schema);
    pending.push(r.array);
  }
  let k = 0;
  const sink: ImportedRecordBatch[] = [];
  const importUs = time(() => {
    sink.push(importRecordBatch(pending[k++]!, schema));
  }, reps);
  for (const p of pending) freeArrowArray(p);
  // Released, not left to the garbage collector: the 10M-row case would otherwise keep gigabytes
  // pinned while the IPC route is timed (and the accounting line below reported them).
  for (const b of sink) b.release();
  sink.length = 0;
  const cdataUs = time(() => {
    const r = exportRecordBatch(batch);
    const b = importRecordBatch(r.array, schema);
    freeArrowSchema(r.schema);
    freeArrowArray(r.array);
    if (b.numRows !== rows) throw new Error('bad round trip');
    b.release();
  }, reps);
  const single = new Table([batch]);
  const ipcUs = time(() => {
    const t = tableFromIPC(tableToIPC(single, 'stream'));
    if (t.numRows !== rows) throw new Error('bad IPC round trip');
  }, Math.max(3, Math.floor(reps / 4)), 1);
  return {
    case: label,
    rows,
    columns: batch.numCols,
    exportUs,
    importUs,
    cdataUs,
    ipcUs,
    ipcOverCdata: ipcUs / cdataUs,
  };
}

const sizes = quick ? [10_000, 1_000_000] : [10_000, 1_000_000, 10_000_000];
// A discarded first pass, so the first reported case is not the one that pays for the JIT warming up.
bench('warm-up', makeTable(10_000));
const results: Row[] = [];
for (const n of sizes) {
  const t = makeTable(n);
  results.push(bench(`4 columns`, t));
}
results.push(bench('100 columns', makeTable(10_000, 96)));

const fmt = (us: number): string => (us >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} us`);
console.log('case          rows        export      import      export+import  IPC route     IPC / C Data');
for (const r of results) {
  console.log(
    `${r.case.padEnd(13)} ${String(r.rows).padEnd(11)} ${fmt(r.exportUs).padEnd(11)} ${fmt(r.importUs).padEnd(11)} ${fmt(r.cdataUs).padEnd(14)} ${fmt(r.ipcUs).padEnd(13)} ${r.ipcOverCdata.toFixed(0)}x`,
  );
}
const four = results.filter((r) => r.case === '4 columns');
const growth = four[four.length - 1]!.importUs / four[0]!.importUs;
console.log(`import time at ${four[four.length - 1]!.rows} rows / at ${four[0]!.rows} rows: ${growth.toFixed(2)}x (O(buffers), not O(rows), if close to 1)`);
console.log(`accounting after the run: ${JSON.stringify(accounting())}`);
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ results, importGrowth: growth, node: process.version }, null, 2));
