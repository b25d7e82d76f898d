/**
 * Fixed per-batch overhead of export + import (independent of rows), against
 * the compiled library, with PyArrow measured in the same run on the same
 * shapes (issue 13):
 *
 *   npm run bench:overhead [-- --quick]
 *
 * Prints microseconds per batch (median of several runs, each a loop of many
 * batches, so garbage collection and the releases the FinalizationRegistry
 * triggers are part of the figure) for:
 * - exportArray into one ArrowArray allocated once + importRecordBatch
 *   (arrow-js Schema given, so the schema is made once) + release(), for a
 *   1-row batch of 1 int32 column, of 4 columns (i32, f64, utf8, f64), of
 *   100 int32 columns, and for 1M rows of the 4 columns: the form of
 *   PyArrow's loop, compared with it; beside it, exportArray allocating the
 *   struct (freed with freeArrowArray after the import), the batches left to
 *   the garbage collector instead of released, and exportArray +
 *   freeArrowArray alone (export, then release by the consumer);
 * - import + release of 1-row batches from a C producer
 *   (test/ownership/counting.c), memory no JS export laid out;
 * - the same shapes through PyArrow (`RecordBatch._export_to_c` then
 *   `RecordBatch._import_from_c` with a schema imported once;
 *   bench/pyarrow_overhead.py, run as a child process with the Python of the
 *   Arrow C++ peer's venv), one line per shape:
 *   `per-batch <shape>: ours <x> us, pyarrow <y> us, ratio <ours/pyarrow>`;
 * - the same round trip with the schema exported and imported with every
 *   batch (exportSchema into a second struct allocated once; PyArrow's
 *   `_export_to_c(array, schema)` / `_import_from_c(array, schema)`), one
 *   line per shape: `per-batch <shape>, schema with each batch: ours <x> us,
 *   pyarrow <y> us, ratio <r>`;
 * - exportArrayStream + importArrayStream of 1-row batches (batches/s);
 * - the flechette target (arrow-device/flechette, issue 52) beside arrow-js:
 *   the same shapes as flechette tables (`tableFromArrays`, one batch),
 *   export + import + release in the two forms above, each shape in a
 *   process of its own right after arrow-js's: the array alone into one
 *   struct with the flechette `Schema` given to `importRecordBatch` (the
 *   entry has no array-only export of a table, so the loop calls the
 *   function its `exportRecordBatch` writes the array with,
 *   `exportArrayView` over `viewsOfTable`'s batch), and the schema with
 *   every batch (`exportRecordBatch(t, { schemaInto, arrayInto })` +
 *   `importRecordBatch(array, schema)`); one line per shape and form:
 *   `per-batch <shape>, flechette vs arrow-js: flechette <x> us, arrow-js
 *   <y> us, ratio <flechette/arrow-js>`. A third form reads every column's
 *   value buffers before the release (`values`, and `valueOffsets` /
 *   `offsets`): the arrow-js import makes a buffer's view on its first read
 *   (lazy `Data`), flechette's makes them all at import, so the plain form
 *   compares unequal work and this one equal work (the arrow-js child runs
 *   it after its other loops, whose figures it leaves as they were).
 *
 * Each shape's loops run in a process of their own (`--shape KEY`, spawned
 * with this Node and its flags): in one process the JIT's code for the
 * shapes measured first is not the code the later ones run (the order
 * alone moved a shape's figure by 20%). Then every shape runs in one
 * process, their loops taken in turn, and a second line per shape gives
 * that figure (`all shapes in one process`): the state a program that
 * exchanges batches of several shapes runs in.
 *
 * The Python is `.venv/bin/python` at the repository root, which
 * `npm run setup:arrow-cpp` creates; ARROW_CPP_PYTHON names another one (an
 * existing venv with pyarrow). Without it the PyArrow side is skipped with a
 * message and the lines say so.
 *
 * Like for like: PyArrow's loop exports into one ArrowArray struct
 * allocated once (its import moves the contents out), so the ratio is taken
 * with ours doing the same (`exportArray(batch, { into })`); the form that
 * allocates a struct per export (and frees it) is printed beside it.
 */
import { spawnSync } from 'node:child_process';
import { collectGarbage, collectUntil } from '../test/helpers/gc.js';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Field, Float64, Int32, makeData, RecordBatch, Schema, Struct, Table, Utf8, vectorFromArray, type Vector } from 'apache-arrow';
import {
  accounting, allocArrowArray, allocArrowSchema, exportArray, exportArrayStream, exportSchema, freeArrowArray, freeArrowArrayStream,
  freeArrowSchema, importArrayStream, importRecordBatch, importSchema,
} from '../src/index.js';
import { counting, countingMissing } from '../test/ownership/counting.js';
import { tableFromArrays, utf8, type Table as FlechetteTable } from '@uwdata/flechette';
import * as flechette from '../src/flechette/index.js';
import { exportArrayView } from '../src/array/core.js';

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

/** i32, f64, utf8, f64 with the values bench/pyarrow_overhead.py gives its four_columns(rows). */
function fourColumns(rows: number): RecordBatch {
  const cols: Record<string, Vector> = {
    i: vectorFromArray(Int32Array.from({ length: rows }, (_, i) => i)),
    f: vectorFromArray(Float64Array.from({ length: rows }, (_, i) => i * 0.5)),
    s: vectorFromArray(Array.from({ length: rows }, (_, i) => `v${i % 1000}`), new Utf8()),
    d: vectorFromArray(Float64Array.from({ length: rows }, (_, i) => i * 1.5)),
  };
  const table = new Table(cols);
  // One batch, or the loop would measure a batch of part of the rows.
  if (table.batches.length !== 1) throw new Error(`fourColumns(${rows}) made ${table.batches.length} batches`);
  return table.batches[0]!;
}

/** The shapes as flechette tables (one batch each), with the values of their arrow-js twins. */
function flechetteShape(key: string): FlechetteTable {
  const ints = (rows: number, columns: number): FlechetteTable =>
    tableFromArrays(Object.fromEntries(Array.from({ length: columns }, (_, k) => [`c${k}`, Int32Array.from({ length: rows }, (_, i) => i + k)])));
  const four = (rows: number): FlechetteTable =>
    tableFromArrays(
      {
        i: Int32Array.from({ length: rows }, (_, i) => i),
        f: Float64Array.from({ length: rows }, (_, i) => i * 0.5),
        s: Array.from({ length: rows }, (_, i) => `v${i % 1000}`),
        d: Float64Array.from({ length: rows }, (_, i) => i * 1.5),
      },
      // utf8, not flechette's default dictionary for strings: the arrow-js batch's type.
      { types: { s: utf8() } },
    );
  const t = key === '1x1' ? ints(1, 1) : key === '1x4' ? four(1) : key === '1x100' ? ints(1, 100) : key === '1Mx4' ? four(1_000_000) : undefined;
  if (!t) throw new Error(`bench/overhead: no flechette shape ${key}`);
  const batches = flechette.viewsOfTable(t).batches.length;
  if (batches !== 1) throw new Error(`flechette shape ${key} made ${batches} batches`);
  return t;
}

const tick = (): Promise<void> => new Promise((r) => setImmediate(r));

/** Collects until every import left to the garbage collector has been released. */
async function drain(): Promise<void> {
  await collectUntil(() => accounting().liveImports === 0, 200);
}

/**
 * Median microseconds per iteration of `fn` run `n` times in a loop, after a
 * warm-up of min(n, 2000) iterations (bench/pyarrow_overhead.py follows the
 * same discipline). The loop yields to the event loop every 500 iterations,
 * as a program would, so the FinalizationRegistry callbacks (the producer
 * releases of collected imports) run, inside the timed region.
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

/**
 * Prints the export+import lines of `batch`; returns export+import in
 * microseconds in the form of PyArrow's loop (into one struct allocated
 * once), and in ours (exportArray allocating a struct, freed after).
 */
async function roundTrip(label: string, batch: RecordBatch, n: number): Promise<Ours> {
  const schema = batch.schema;
  // The batch is released when the iteration is done with it (release(), as `using` does): the
  // deterministic path, and what PyArrow's loop does when its reference count drops to zero.
  const rt = await perIter(() => {
    const p = exportArray(batch);
    const b = importRecordBatch(p, schema);
    freeArrowArray(p);
    sink += b.numRows;
    b.release();
  }, n);
  // PyArrow's form: export into one struct allocated once (the import moves the contents out and
  // marks it released, so it can be exported into again).
  const slot = allocArrowArray();
  const into = await perIter(() => {
    exportArray(batch, { into: slot });
    const b = importRecordBatch(slot, schema);
    sink += b.numRows;
    b.release();
  }, n);
  // The schema with every batch, into two structs allocated once (PyArrow's `_export_to_c(array,
  // schema)` then `_import_from_c(array, schema)`): a producer that hands an ArrowSchema with each
  // array, as the exchange protocol's c_array and many drivers do.
  const sslot = allocArrowSchema();
  const withSchema = await perIter(() => {
    exportArray(batch, { into: slot });
    exportSchema(schema, { into: sslot });
    const b = importRecordBatch(slot, sslot);
    sink += b.numRows;
    b.release();
  }, n);
  freeArrowSchema(sslot);
  freeArrowArray(slot);
  const ex = await perIter(() => {
    const p = exportArray(batch);
    freeArrowArray(p);
  }, n);
  // Left to the garbage collector instead (FinalizationRegistry), for comparison. Last, and followed
  // by a wait for the collector's backlog, so that it does not slow the measurements after it.
  const gc = await perIter(() => {
    const p = exportArray(batch);
    const b = importRecordBatch(p, schema);
    freeArrowArray(p);
    sink += b.numRows;
  }, n);
  await drain();
  // For the flechette comparison, after the loops above (whose figures it leaves as they were): the
  // `into` form reading every column's value buffers (`values`, `valueOffsets`), which the lazy arrow-js
  // import makes on first read and flechette's import makes up front.
  const slot2 = allocArrowArray();
  const touch = await perIter(() => {
    exportArray(batch, { into: slot2 });
    const b = importRecordBatch(slot2, schema);
    for (const c of b.data.children) sink += c.values.length + (c.valueOffsets?.length ?? 0);
    b.release();
  }, n);
  freeArrowArray(slot2);
  console.log(
    `${label.padEnd(38)} export+import+release ${into.toFixed(2).padStart(7)} us/batch (${(1e6 / into).toFixed(0).padStart(7)}/s) into one struct,` +
      ` ${rt.toFixed(2).padStart(7)} us allocating it   released by GC ${gc.toFixed(2).padStart(7)} us   export+free ${ex.toFixed(2).padStart(7)} us`,
  );
  return { into, alloc: rt, withSchema, touch };
}

/**
 * The flechette target's round trip of `table` (one record batch), in the two forms the arrow-js
 * loops have: the array alone into one struct, the schema given (`into`), and the schema with every
 * batch into a second struct (`withSchema`). Prints its line; returns microseconds per batch.
 */
async function flechetteRoundTrip(label: string, table: FlechetteTable, n: number): Promise<Flechette> {
  const schema = table.schema;
  // First, as in the arrow-js loops (whose first loop takes the JIT's warm-up too), the form that
  // allocates the struct per export and frees it after the import.
  const alloc = await perIter(() => {
    const p = exportArrayView(flechette.viewsOfTable(table).batches[0]!) as bigint;
    const b = flechette.importRecordBatch(p, schema);
    freeArrowArray(p);
    sink += b.numRows;
    b.release();
  }, n);
  const slot = allocArrowArray();
  // flechette's exportRecordBatch writes the array with exportArrayView over viewsOfTable's batch; here alone.
  const into = await perIter(() => {
    exportArrayView(flechette.viewsOfTable(table).batches[0]!, { into: slot });
    const b = flechette.importRecordBatch(slot, schema);
    sink += b.numRows;
    b.release();
  }, n);
  const sslot = allocArrowSchema();
  const withSchema = await perIter(() => {
    flechette.exportRecordBatch(table, { schemaInto: sslot, arrayInto: slot });
    const b = flechette.importRecordBatch(slot, sslot);
    sink += b.numRows;
    b.release();
  }, n);
  freeArrowSchema(sslot);
  // The `into` form reading every column's value buffers, as the arrow-js side's `touch` (made at import here).
  const touch = await perIter(() => {
    exportArrayView(flechette.viewsOfTable(table).batches[0]!, { into: slot });
    const b = flechette.importRecordBatch(slot, schema);
    for (const c of b.children) {
      const d = c.data[0] as unknown as { values: ArrayLike<unknown>; offsets?: ArrayLike<unknown> };
      sink += d.values.length + (d.offsets?.length ?? 0);
    }
    b.release();
  }, n);
  freeArrowArray(slot);
  console.log(
    `${label.padEnd(38)} flechette export+import+release ${into.toFixed(2).padStart(7)} us/batch (${(1e6 / into).toFixed(0).padStart(7)}/s) into one struct,` +
      ` ${alloc.toFixed(2).padStart(7)} us allocating it, ${withSchema.toFixed(2).padStart(7)} us with the schema, ${touch.toFixed(2).padStart(7)} us reading every column's buffers`,
  );
  return { into, alloc, withSchema, touch };
}

/**
 * Import + release of 1-row batches (struct<x: int32>) that a C producer
 * (test/ownership/counting.c) made, in chunks made before each timed loop:
 * the import of memory no JS export laid out (its own allocations, its own
 * pointer arrays), for comparison with the 1x1 round trip above.
 */
async function fromC(): Promise<void> {
  if (countingMissing) {
    console.log(`C producer: skipped, ${countingMissing}`);
    return;
  }
  const c = counting();
  const schema = importSchema(c.schema());
  const CHUNK = 1000;
  const chunks = quick ? 5 : 20;
  const times: number[] = [];
  for (let r = 0; r < REPS + 1; r++) {
    let t = 0;
    for (let k = 0; k < chunks; k++) {
      const ptrs = Array.from({ length: CHUNK }, (_, i) => c.batch(1, i));
      const t0 = performance.now();
      for (const p of ptrs) {
        const b = importRecordBatch(p, schema);
        sink += b.numRows;
        b.release();
      }
      t += performance.now() - t0;
      for (const p of ptrs) freeArrowArray(p);
      await tick();
    }
    if (r > 0) times.push((t * 1000) / (CHUNK * chunks));
  }
  console.log(`${'1 row x 1 int32 column, C producer'.padEnd(38)} import+release        ${median(times).toFixed(2).padStart(7)} us/batch (outstanding after: ${c.outstanding()})`);
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
  console.log(`${label.padEnd(38)} stream        ${((s / count) * 1e6).toFixed(2).padStart(7)} us/batch (${(count / s).toFixed(0).padStart(7)}/s)`);
}

// --- PyArrow side ---------------------------------------------------------------------

/** The repository root: the nearest directory up with this package's package.json (works from bench/ and .build/run/bench/). */
function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'arrow-device') return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error('bench/overhead: repository root not found');
    dir = up;
  }
}

interface Shape {
  /** The name bench/pyarrow_overhead.py builds the same batch by. */
  key: string;
  label: string;
  make: () => RecordBatch;
  iterations: number;
}

interface PyArrowRun {
  pyarrow: string;
  python: string;
  allocator: string;
  results: Record<string, number>;
}

/**
 * Runs bench/pyarrow_overhead.py on the shapes with the same repeats and
 * iterations; undefined (with the reason printed) when there is no Python.
 * A Python that is there but fails is an error: the comparison would
 * silently go missing otherwise.
 */
function runPyArrow(root: string, shapes: readonly Shape[]): PyArrowRun | undefined {
  const python = process.env.ARROW_CPP_PYTHON ?? join(root, '.venv', 'bin', 'python');
  if (!existsSync(python)) {
    console.log(`pyarrow: skipped, no Python at ${python} (run \`npm run setup:arrow-cpp\`, or set ARROW_CPP_PYTHON to a Python with pyarrow)`);
    return undefined;
  }
  const spec = { reps: REPS, shapes: shapes.map((s) => ({ shape: s.key, iterations: s.iterations })) };
  const r = spawnSync(python, [join(root, 'bench', 'pyarrow_overhead.py'), JSON.stringify(spec)], { encoding: 'utf8' });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`bench/pyarrow_overhead.py (${python}) exited with ${r.status}:\n${r.stderr}`);
  return JSON.parse(r.stdout) as PyArrowRun;
}

const n = quick ? 5000 : 20000;
const shapes: Shape[] = [
  { key: '1x1', label: '1 row x 1 int32 column', make: () => int32Batch(1, 1), iterations: n },
  { key: '1x4', label: '1 row x 4 columns (i32,f64,utf8,f64)', make: () => fourColumns(1), iterations: n },
  { key: '1x100', label: '1 row x 100 int32 columns', make: () => int32Batch(1, 100), iterations: Math.max(500, n / 20) },
  { key: '1Mx4', label: '1M rows x 4 columns (i32,f64,utf8,f64)', make: () => fourColumns(1_000_000), iterations: Math.max(500, n / 4) },
];

type Ours = { into: number; alloc: number; withSchema: number; touch: number };
/** The flechette target's figures of a shape (us per batch). */
type Flechette = { into: number; alloc: number; withSchema: number; touch: number };
const RESULT = 'overhead-result ';

/**
 * Child mode (`--shape KEY`): one shape's loops in a process of its own,
 * its lines printed, its figures on a last line for the parent.
 */
const shapeArg = process.argv.includes('--shape') ? process.argv[process.argv.indexOf('--shape') + 1] : undefined;
if (shapeArg !== undefined && process.argv.includes('--flechette')) {
  // The flechette target's loops of one shape (`--shape KEY --flechette`), in a process of their own.
  const s = shapes.find((x) => x.key === shapeArg);
  if (!s) throw new Error(`bench/overhead: no shape ${shapeArg}`);
  const table = flechetteShape(s.key);
  collectGarbage(); // the data's construction garbage (see below)
  const r = await flechetteRoundTrip(s.label, table, s.iterations);
  await tick();
  console.log(`${''.padEnd(38)} accounting after: ${JSON.stringify(accounting())}`);
  console.log(RESULT + JSON.stringify(r));
  process.exit(0);
}
if (shapeArg !== undefined) {
  const s = shapes.find((x) => x.key === shapeArg);
  if (!s) throw new Error(`bench/overhead: no shape ${shapeArg}`);
  const batch = s.make();
  // Building the data leaves its garbage (1M strings for the utf8 column) in the old generation,
  // where V8, having grown its limits for it, keeps it for the whole run: every minor collection
  // of the loops then cost about five times as much (1-row int32 batches: 2.24-2.31 us with it,
  // 1.88 us after one collection). That garbage is the benchmark's, not the library's: collect it.
  collectGarbage();
  const r = await roundTrip(s.label, batch, s.iterations);
  await tick();
  console.log(`${''.padEnd(38)} accounting after: ${JSON.stringify(accounting())}`);
  console.log(RESULT + JSON.stringify(r));
  process.exit(0);
}

/**
 * Runs one shape's loops in a fresh process (same Node, same flags): the
 * code the JIT made for one shape is not the code it made for four, and in
 * one process each shape was measured in whatever state the shapes before
 * it left (in an earlier run the 1M-row shape, measured last, took 4.41 us
 * after the others and 3.62 us first; the 1-row int32 one 1.79 us first and
 * 2.19 us last). PyArrow's figures, compiled code, have no such order.
 */
function isolated<R = Ours>(s: Shape, target: 'arrow-js' | 'flechette' = 'arrow-js'): R {
  const args = [...process.execArgv, fileURLToPath(import.meta.url), '--shape', s.key, ...(target === 'flechette' ? ['--flechette'] : []), ...(quick ? ['--quick'] : [])];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`bench/overhead --shape ${s.key} exited with ${r.status}:\n${r.stderr}`);
  const lines = r.stdout.trimEnd().split('\n');
  const last = lines.pop()!;
  if (!last.startsWith(RESULT)) throw new Error(`bench/overhead --shape ${s.key}: no result line:\n${r.stdout}\n${r.stderr}`);
  for (const l of lines) console.log(l);
  return JSON.parse(last.slice(RESULT.length)) as R;
}

/**
 * Every shape in one process, their loops taken in turn (after every shape
 * warmed up): each measured in the same JIT state, the one a program that
 * exchanges batches of several shapes runs in. Median per shape of the
 * `into` form (PyArrow's).
 */
async function mixed(): Promise<Map<string, number>> {
  const slot = allocArrowArray();
  const batches = shapes.map((s) => s.make());
  collectGarbage(); // the data's construction garbage (see the child mode)
  const loops = shapes.map((s, k) => {
    const batch = batches[k]!;
    const schema = batch.schema;
    return () => {
      exportArray(batch, { into: slot });
      const b = importRecordBatch(slot, schema);
      sink += b.numRows;
      b.release();
    };
  });
  for (let k = 0; k < shapes.length; k++) for (let i = 0; i < Math.min(shapes[k]!.iterations, 2000); i++) loops[k]!();
  await tick();
  const times: number[][] = shapes.map(() => []);
  for (let r = 0; r < REPS; r++) {
    for (let k = 0; k < shapes.length; k++) {
      const fn = loops[k]!;
      const iters = shapes[k]!.iterations;
      const t0 = performance.now();
      for (let i = 0; i < iters; i++) {
        fn();
        if (i % 500 === 499) await tick();
      }
      times[k]!.push(((performance.now() - t0) * 1000) / iters);
    }
  }
  freeArrowArray(slot);
  return new Map(shapes.map((s, k) => [s.key, median(times[k]!)]));
}

console.log(`overhead bench: node ${process.version}, compiled library; each shape in a process of its own, then all in one`);

// PyArrow first, in its own process, while this one is idle: neither side
// shares the cores with the other during its loops.
const py = runPyArrow(repoRoot(), shapes);
if (py) console.log(`pyarrow ${py.pyarrow} (Python ${py.python}, structs allocated with ${py.allocator})`);

const ours = new Map<string, Ours>();
const flech = new Map<string, Flechette>();
for (const s of shapes) {
  ours.set(s.key, isolated(s));
  // The flechette target right after arrow-js's, in a process of its own too: the same machine, moments apart.
  flech.set(s.key, isolated<Flechette>(s, 'flechette'));
}
const together = await mixed();
await fromC();
// Like for like: PyArrow's loop exports into one struct allocated once, so ours does too here;
// the form that allocates a struct per export is printed beside it.
for (const s of shapes) {
  const { into, alloc } = ours.get(s.key)!;
  const y = py?.results[s.key];
  const theirs = y === undefined ? 'pyarrow skipped' : `pyarrow ${y.toFixed(2)} us, ratio ${(into / y).toFixed(2)}`;
  console.log(`per-batch ${s.label}: ours ${into.toFixed(2)} us, ${theirs} (allocating the struct: ${alloc.toFixed(2)} us${y === undefined ? '' : `, ratio ${(alloc / y).toFixed(2)}`})`);
}
for (const s of shapes) {
  const mix = together.get(s.key)!;
  const y = py?.results[s.key];
  const theirs = y === undefined ? 'pyarrow skipped' : `pyarrow ${y.toFixed(2)} us, ratio ${(mix / y).toFixed(2)}`;
  console.log(`per-batch ${s.label}, all shapes in one process: ours ${mix.toFixed(2)} us, ${theirs}`);
}
for (const s of shapes) {
  const { withSchema } = ours.get(s.key)!;
  const y = py?.results[`${s.key}+schema`];
  const theirs = y === undefined ? 'pyarrow skipped' : `pyarrow ${y.toFixed(2)} us, ratio ${(withSchema / y).toFixed(2)}`;
  console.log(`per-batch ${s.label}, schema with each batch: ours ${withSchema.toFixed(2)} us, ${theirs}`);
}
// The flechette target against arrow-js, both through arrow-device, each shape's loops in processes of their own.
for (const s of shapes) {
  const a = ours.get(s.key)!;
  const f = flech.get(s.key)!;
  console.log(`per-batch ${s.label}, flechette vs arrow-js: flechette ${f.into.toFixed(2)} us, arrow-js ${a.into.toFixed(2)} us, ratio ${(f.into / a.into).toFixed(2)}`);
}
for (const s of shapes) {
  const a = ours.get(s.key)!;
  const f = flech.get(s.key)!;
  console.log(
    `per-batch ${s.label}, schema with each batch, flechette vs arrow-js: flechette ${f.withSchema.toFixed(2)} us, arrow-js ${a.withSchema.toFixed(2)} us, ` +
      `ratio ${(f.withSchema / a.withSchema).toFixed(2)}`,
  );
}
for (const s of shapes) {
  const a = ours.get(s.key)!;
  const f = flech.get(s.key)!;
  console.log(
    `per-batch ${s.label}, every column's buffers read, flechette vs arrow-js: flechette ${f.touch.toFixed(2)} us, arrow-js ${a.touch.toFixed(2)} us, ` +
      `ratio ${(f.touch / a.touch).toFixed(2)}`,
  );
}
await stream('1 row, 1 int32 column', int32Batch(1, 1), quick ? 20000 : 100000);
await stream('1 row, 4 columns', fourColumns(1), quick ? 20000 : 50000);
await tick();
console.log(`accounting after: ${JSON.stringify(accounting())} (sink ${sink})`);
