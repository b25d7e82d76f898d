/**
 * What a query pays: the first import of its result in a fresh process,
 * beside PyArrow doing the same in a fresh Python process (issue 29).
 *
 *   npm run bench:cold [-- --processes N]
 *
 * The result: 977 record batches of 2,048 rows x 4 columns (int64, int32,
 * float64, utf8), held as C structs by a small C producer (bench/cold.c,
 * built here with cc), imported into one table: ours `importTable(ptrs,
 * schemaPtr)`, PyArrow `pa.Schema._import_from_c`, `pa.RecordBatch._import_from_c`
 * per batch and `pa.Table.from_batches` (bench/pyarrow_cold.py, with the
 * Python of the Arrow C++ peer's venv: `npm run setup:arrow-cpp`, or
 * ARROW_CPP_PYTHON). Each process imports the result eight times (the
 * producer makes it anew each time, untimed; the table is released between
 * passes, untimed); the first, second and eighth passes are taken, each the
 * median over N processes per side (default 5), the sides' processes run in
 * turn. One line per pass: `cold <pass>: ours X ms, pyarrow Y ms, ratio R`,
 * with the floor beside them: the same arrow-js objects (a Data per column,
 * the struct Data, a RecordBatch per batch, the Table) made by arrow-js's
 * own constructors over typed arrays already in JS memory, in fresh processes
 * too: what any import into arrow-js pays before reading a byte.
 *
 * Then a full read of the imported table beside the same table rebuilt by
 * arrow-js (`tableFromIPC(tableToIPC(t))`), each in fresh processes: the sum
 * of the float64 column through every chunk's `values`, and through
 * `get(i)` for every row; the first read (the import's views are made on
 * first touch) and the eighth. One line per read: `read <how> <pass>: ours X
 * ms, arrow-js Y ms, ratio R`. The first read is taken twice: at once after
 * the table is made, and after the process has been idle for 200 ms
 * (`settled`), so that what the runtime still does in the background for the
 * work before the read (compiling the import's hot code, concurrent
 * collection) stays out of it: on a machine with few cores that work competes
 * with the read (the arrow-js side made its table by more work, earlier).
 *
 * Last, the view floor of that first read (one view per buffer it touches, in fresh processes: `views`)
 * and the settled first read of values against arrow-js's plus that floor (issue 40's goal: at most 1).
 *
 * The machine's load average is printed first: figures taken under load
 * are noisier (ratios are measured in one run, their sides in turn).
 *
 * `--ab <ref>[,<ref>]` compares two builds instead: that commit's (checked out
 * and compiled under .build/ab, bench/ab.ts) and the second one's or the working tree's, each
 * running its own import child in fresh processes, in turn, the first of
 * each pair alternating (default 10 each); per pass, the medians and the
 * median of the pair ratios A / B: `ab cold <pass>: A X ms, B Y ms, ratio R`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { abBuilds, pairRatio, type Build } from './ab.js';
import { Data, Field, Float64 as Float64Type, Int32, Int64, RecordBatch, Schema, Struct, Table as ArrowTable, tableFromIPC, tableToIPC, Utf8, type Float64, type Table, type Vector } from 'apache-arrow';
import koffi from 'koffi';
import { allocArrowSchema, freeArrowSchema, importTable, nativeMemory } from '../src/index.js';

const N = 977;
const ROWS = 2048;
const ARRAY_SIZE = 80;
const PASSES = 8;

/** The repository root: this file runs from bench/ (tsx) or .build/run/bench/ (compiled). */
const here = dirname(fileURLToPath(import.meta.url));
const root = existsSync(join(here, '..', 'package.json')) ? join(here, '..') : join(here, '..', '..', '..');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** The producer's library, built when missing or older than its source. */
function producerLibrary(): string {
  const src = join(root, 'bench', 'cold.c');
  const out = join(root, '.build', 'bench', 'libcold.so');
  if (!existsSync(out) || statSync(out).mtimeMs < statSync(src).mtimeMs) {
    mkdirSync(dirname(out), { recursive: true });
    execFileSync('cc', ['-O2', '-shared', '-fPIC', '-I', join(root, 'test', 'include'), '-o', out, src]);
  }
  return out;
}

interface Producer {
  make(n: number, rows: number): bigint;
  fillSchema(out: bigint): void;
  free(all: bigint, n: number): void;
  /** Nothing: a use of the library that keeps it from being collected (and unloaded) before here. */
  keepLoaded(): void;
}

function producer(path: string): Producer {
  const lib = koffi.load(path);
  const make = lib.func('uintptr_t cold_make(int64_t n, int64_t rows)');
  const fill = lib.func('void cold_fill_schema(uintptr_t out)');
  const free = lib.func('void cold_free(uintptr_t all, int64_t n)');
  return { make: (n, rows) => BigInt(make(n, rows)), fillSchema: (p) => fill(p), free: (p, n) => free(p, n), keepLoaded: () => void lib };
}

/** One import of the producer's result into a table (`timed`: the import alone). */
function importResult(p: Producer, timed: (fn: () => Table) => Table): Table {
  const base = p.make(N, ROWS);
  const schema = allocArrowSchema();
  p.fillSchema(schema);
  const ptrs = Array.from({ length: N }, (_, i) => base + BigInt(i * ARRAY_SIZE));
  try {
    const t = timed(() => importTable(ptrs, schema));
    if (t.numRows !== N * ROWS) throw new Error(`imported ${t.numRows} rows`);
    return t;
  } finally {
    freeArrowSchema(schema);
    // Every batch was moved out of the block: freeing it releases nothing of the table's.
    p.free(base, N);
  }
}

// --- children: one measurement in a fresh process -------------------------------------------

function childImport(lib: string): void {
  const p = producer(lib);
  const passes: number[] = [];
  for (let i = 0; i < PASSES; i++) {
    const t = importResult(p, (fn) => {
      const t0 = performance.now();
      const table = fn();
      passes.push(performance.now() - t0);
      return table;
    });
    (t as unknown as { release(): void }).release();
  }
  console.log(JSON.stringify({ passes }));
}

/**
 * The floor: the arrow-js objects an import must make (a Data per column, the struct Data, a
 * RecordBatch per batch, the Table), made by arrow-js's own constructors over typed arrays already
 * in JS memory (made untimed), in a fresh process, as many passes as the import's.
 */
function childFloor(): void {
  const a = new BigInt64Array(N * ROWS);
  const b = new Int32Array(N * ROWS);
  const c = new Float64Array(N * ROWS);
  const offsets = new Int32Array(N * (ROWS + 1));
  const chars = new Uint8Array(N * ROWS * 4);
  const fields = [new Field('a', new Int64(), true), new Field('b', new Int32(), true), new Field('c', new Float64Type(), true), new Field('d', new Utf8(), true)];
  const schema = new Schema(fields);
  const struct = new Struct(fields);
  const passes: number[] = [];
  for (let pass = 0; pass < PASSES; pass++) {
    const t0 = performance.now();
    const batches: RecordBatch[] = [];
    for (let i = 0; i < N; i++) {
      const at = i * ROWS;
      // new Data(type, offset, length, nullCount, [valueOffsets, values, nullBitmap]): arrow-js's
      // constructor with nothing to infer (makeData adds a visitor on top of it).
      const children: Data[] = [
        new Data(fields[0]!.type, 0, ROWS, 0, [undefined, a.subarray(at, at + ROWS)] as never),
        new Data(fields[1]!.type, 0, ROWS, 0, [undefined, b.subarray(at, at + ROWS)] as never),
        new Data(fields[2]!.type, 0, ROWS, 0, [undefined, c.subarray(at, at + ROWS)] as never),
        new Data(fields[3]!.type, 0, ROWS, 0, [offsets.subarray(i * (ROWS + 1), (i + 1) * (ROWS + 1)), chars.subarray(at * 4, (at + ROWS) * 4)] as never),
      ];
      batches.push(new RecordBatch(schema, new Data(struct, 0, ROWS, 0, [] as never, children) as Data<Struct>));
    }
    const table = new ArrowTable(batches);
    passes.push(performance.now() - t0);
    if (table.numRows !== N * ROWS) throw new Error(`made ${table.numRows} rows`);
  }
  console.log(JSON.stringify({ passes }));
}

function sumValues(col: Vector<Float64>): number {
  let s = 0;
  for (const d of col.data) {
    const v = d.values;
    for (let i = 0; i < d.length; i++) s += v[i]!;
  }
  return s;
}

function sumGet(col: Vector<Float64>): number {
  let s = 0;
  for (let i = 0, n = col.length; i < n; i++) s += col.get(i)!;
  return s;
}

function childRead(lib: string, side: 'ours' | 'arrow-js', how: 'values' | 'get', settle: boolean): void {
  const p = producer(lib);
  const ours = importResult(p, (fn) => fn());
  let table = ours;
  if (side === 'arrow-js') {
    table = tableFromIPC(tableToIPC(ours));
    (ours as unknown as { release(): void }).release();
  }
  // The main thread idle (blocked), the runtime's background threads not.
  if (settle) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
  const read = how === 'values' ? sumValues : sumGet;
  const passes: number[] = [];
  let check = 0;
  for (let i = 0; i < PASSES; i++) {
    const col = table.getChild('c') as Vector<Float64>;
    const t0 = performance.now();
    const s = read(col);
    passes.push(performance.now() - t0);
    if (i === 0) check = s;
    else if (s !== check) throw new Error('the sums differ');
  }
  // Released while the producer's library is loaded (koffi unloads a library it collects).
  if (side === 'ours') (table as unknown as { release(): void }).release();
  p.keepLoaded();
  console.log(JSON.stringify({ passes }));
}

// --- the parent -------------------------------------------------------------------------------

function child(args: string[]): number[] {
  const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--child', ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`child ${args.join(' ')} exited with ${r.status}:\n${r.stderr}`);
  return (JSON.parse(r.stdout.trim().split('\n').pop()!) as { passes: number[] }).passes;
}

function pyarrow(lib: string): { version: string; passes: number[] } | string {
  const python = process.env.ARROW_CPP_PYTHON ?? join(root, '.venv', 'bin', 'python');
  if (!existsSync(python)) return `no Python at ${python} (run \`npm run setup:arrow-cpp\`, or set ARROW_CPP_PYTHON to a Python with pyarrow)`;
  const r = spawnSync(python, [join(root, 'bench', 'pyarrow_cold.py'), lib, String(N), String(ROWS)], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`bench/pyarrow_cold.py exited with ${r.status}:\n${r.stderr}`);
  const out = JSON.parse(r.stdout) as { pyarrow: string; passes: number[] };
  return { version: out.pyarrow, passes: out.passes };
}

/**
 * The view floor of a first read (issue 40): one view per buffer the read touches, what any zero-copy
 * import that views nothing at import pays on first read. As many float64 buffers as the result's column
 * `c` (N of ROWS values), allocated untimed in native memory; after the same 200 ms idle as a settled
 * read, each viewed once (`Memory.view`, then the Float64Array over it) and its first value read.
 */
function childViews(): void {
  const mem = nativeMemory();
  const bufs = Array.from({ length: N }, () => mem.alloc(ROWS * 8));
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
  let s = 0;
  const t0 = performance.now();
  for (const b of bufs) {
    const u8 = mem.view(b, ROWS * 8);
    s += new Float64Array(u8.buffer, u8.byteOffset, ROWS)[0]!;
  }
  const t = performance.now() - t0;
  for (const b of bufs) mem.free(b);
  console.log(JSON.stringify({ passes: [t], s }));
}

/** The import child of a build: its own compiled bench/cold.bench.js, so each side runs its own code. */
function childOf(build: Build, lib: string): number[] {
  const script = join(build.run, 'bench', 'cold.bench.js');
  const r = spawnSync(process.execPath, [...process.execArgv, script, '--child', 'import', lib], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${build.name}: import child exited with ${r.status}:\n${r.stderr}`);
  return (JSON.parse(r.stdout.trim().split('\n').pop()!) as { passes: number[] }).passes;
}

/** `--ab <ref>`: the import children of two builds in alternating fresh processes, pair-ratio medians per pass. */
function abParent(ref: string, processes: number, lib: string): void {
  const [a, b] = abBuilds(root, ref);
  const [l1, l5] = loadavg();
  console.log(
    `# bench:cold --ab: ${N} batches x ${ROWS} rows x 4 columns, ${processes} fresh processes per build, in turn, the first of each pair alternating; ` +
      `A = ${a.name}, B = ${b.name}; ratio = median of the pair ratios A / B (below 1: A faster); node ${process.version}; load average ${l1!.toFixed(2)} (1 min), ${l5!.toFixed(2)} (5 min)`,
  );
  const ra: number[][] = [];
  const rb: number[][] = [];
  for (let i = 0; i < processes; i++) {
    if (i % 2 === 0) {
      ra.push(childOf(a, lib));
      rb.push(childOf(b, lib));
    } else {
      rb.push(childOf(b, lib));
      ra.push(childOf(a, lib));
    }
  }
  for (const [name, k] of TAKEN) {
    const xa = ra.map((p) => p[k]!);
    const xb = rb.map((p) => p[k]!);
    console.log(`ab cold ${name}: A ${fmt(median(xa))} ms, B ${fmt(median(xb))} ms, ratio ${pairRatio(xa, xb).toFixed(2)}`);
  }
}

const fmt = (x: number): string => x.toFixed(2);
const TAKEN: [string, number][] = [['first', 0], ['second', 1], ['eighth', 7]];

function parent(): void {
  const at = process.argv.indexOf('--processes');
  const abAt = process.argv.indexOf('--ab');
  const processes = at > 0 ? Number(process.argv[at + 1]) : abAt > 0 ? 10 : 5;
  const lib = producerLibrary();
  if (abAt > 0) return abParent(process.argv[abAt + 1]!, processes, lib);
  const [l1, l5] = loadavg();
  console.log(`# bench:cold: ${N} batches x ${ROWS} rows x 4 columns, medians of ${processes} fresh processes per side; node ${process.version}; load average ${l1!.toFixed(2)} (1 min), ${l5!.toFixed(2)} (5 min)`);

  const ours: number[][] = [];
  const floor: number[][] = [];
  const theirs: number[][] = [];
  let skipped: string | undefined;
  let version = '';
  for (let i = 0; i < processes; i++) {
    ours.push(child(['import', lib]));
    floor.push(child(['floor', lib]));
    if (skipped === undefined) {
      const r = pyarrow(lib);
      if (typeof r === 'string') skipped = r;
      else {
        version = r.version;
        theirs.push(r.passes);
      }
    }
  }
  if (skipped !== undefined) console.log(`# pyarrow: skipped, ${skipped}`);
  else console.log(`# pyarrow ${version}`);
  for (const [name, k] of TAKEN) {
    const o = median(ours.map((p) => p[k]!));
    const f = median(floor.map((p) => p[k]!));
    const floorText = `floor (arrow-js objects alone) ${fmt(f)} ms, ours/floor ${(o / f).toFixed(2)}`;
    if (skipped !== undefined) console.log(`cold ${name}: ours ${fmt(o)} ms, pyarrow skipped; ${floorText}`);
    else {
      const y = median(theirs.map((p) => p[k]!));
      console.log(`cold ${name}: ours ${fmt(o)} ms, pyarrow ${fmt(y)} ms, ratio ${(o / y).toFixed(2)}; ${floorText}, floor/pyarrow ${(f / y).toFixed(2)}`);
    }
  }

  const views = median(Array.from({ length: processes }, () => child(['views', lib])[0]!));
  let settledValues = { ours: 0, arrowJs: 0 };
  for (const how of ['values', 'get'] as const) {
    for (const settle of ['now', 'settled'] as const) {
      const runs: Record<'ours' | 'arrow-js', number[][]> = { ours: [], 'arrow-js': [] };
      for (let i = 0; i < processes; i++) {
        runs.ours.push(child(['read', lib, 'ours', how, settle]));
        runs['arrow-js'].push(child(['read', lib, 'arrow-js', how, settle]));
      }
      for (const [name, k] of [['first', 0], ['eighth', 7]] as const) {
        if (settle === 'settled' && k !== 0) continue;
        const o = median(runs.ours.map((p) => p[k]!));
        const a = median(runs['arrow-js'].map((p) => p[k]!));
        const label = settle === 'settled' ? `${name}, settled` : name;
        console.log(`read ${how} ${label}: ours ${fmt(o)} ms, arrow-js ${fmt(a)} ms, ratio ${(o / a).toFixed(2)}`);
        if (how === 'values' && settle === 'settled') settledValues = { ours: o, arrowJs: a };
      }
    }
  }
  // Issue 40's goal for the first read: settled, at most arrow-js's own plus the view floor.
  const bound = settledValues.arrowJs + views;
  console.log(`read values first, settled, against arrow-js + views: view floor ${fmt(views)} ms (one view per buffer, ${N} buffers), ours ${fmt(settledValues.ours)} ms, arrow-js + views ${fmt(bound)} ms, ratio ${(settledValues.ours / bound).toFixed(2)}`);
}

const c = process.argv.indexOf('--child');
if (c > 0) {
  const [mode, lib, side, how, settle] = process.argv.slice(c + 1);
  if (mode === 'import') childImport(lib!);
  else if (mode === 'floor') childFloor();
  else if (mode === 'views') childViews();
  else childRead(lib!, side as 'ours' | 'arrow-js', how as 'values' | 'get', settle === 'settled');
} else {
  parent();
}
