/**
 * A profiling driver, not a benchmark: the export loop and the import loop
 * of bench/overhead.bench.ts's 1-row, 4-column shape (i32, f64, utf8, f64),
 * each in its own named function so a CPU profile can be cut by phase:
 *
 *   npm run profile:overhead
 *
 * that is: node --cpu-prof .build/run/bench/overhead.profile.js (10 s; run
 * it by hand with --seconds S for another length), then
 * tools/profile-summary.ts over the profile, with --under exportPhase and
 * --under importPhase. The profile is written under .build/profiles
 * (git-ignored); it is not to be committed.
 *
 * exportPhase exports a chunk of batches (exportArray, the library
 * allocating each struct); importPhase imports them with an arrow-js Schema
 * (importRecordBatch, so the schema is not decoded per batch) and frees the
 * moved-from structs, as the benchmark's round trip does. Between chunks the
 * loop yields to the event loop, so the FinalizationRegistry callbacks that
 * release collected imports run, at the top level of the profile (outside
 * both phases), where the summary reports them.
 */
import { Float64, RecordBatch, Table, Utf8, vectorFromArray, type Schema } from 'apache-arrow';
import { accounting, exportArray, freeArrowArray, importRecordBatch, type Ptr } from '../src/index.js';

const args = process.argv.slice(2);
const seconds = args.includes('--seconds') ? Number(args[args.indexOf('--seconds') + 1]) : 10;
const CHUNK = 500;

function fourColumns(): RecordBatch {
  return new Table({
    i: vectorFromArray(Int32Array.from([0])),
    f: vectorFromArray(Float64Array.from([0])),
    s: vectorFromArray(['v0'], new Utf8()),
    d: vectorFromArray([0], new Float64()),
  }).batches[0]!;
}

let sink = 0;

function exportPhase(batch: RecordBatch, out: Ptr[]): void {
  for (let i = 0; i < out.length; i++) out[i] = exportArray(batch);
}

function importPhase(ptrs: readonly Ptr[], schema: Schema): void {
  for (let i = 0; i < ptrs.length; i++) {
    const b = importRecordBatch(ptrs[i]!, schema);
    freeArrowArray(ptrs[i]!);
    sink += b.numRows;
    b.release(); // deterministic, as PyArrow's refcount drop is
  }
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

const batch = fourColumns();
const ptrs = new Array<Ptr>(CHUNK).fill(0n);
const end = performance.now() + seconds * 1000;
let chunks = 0;
while (performance.now() < end) {
  exportPhase(batch, ptrs);
  importPhase(ptrs, batch.schema);
  chunks++;
  await tick();
}
console.log(`overhead profile: ${chunks * CHUNK} batches exported and imported in ${seconds} s; accounting ${JSON.stringify(accounting())} (sink ${sink})`);
