/**
 * What `share` buys a program that splits a scan across worker threads
 * (issue 45, docs/threads.md):
 *
 *   npm run bench:workers [-- --processes N --rows N --workers N]
 *
 * A table of ROWS rows (default 50,000,000) of struct<id: int64, v: float64>
 * in batches of 1M rows, made by the threads fixture's C producer
 * (test/threads/shared.c, `sp_make_batch`) and imported once from native
 * memory, untimed. The work is CPU-bound: the sum of `v` over the rows whose
 * `id` is not divisible by 3, the id's low 32-bit word read through an
 * Int32Array over the id buffer (no BigInt made per row; ids stay below 2^31).
 *
 * Each measurement runs in a fresh process (modes in turn, the order rotated
 * each round), and the figure is the median over N processes (default 3):
 *
 * - `one thread`: the scan of every batch on the main thread;
 * - then the batches split across W workers (default 2; worker k gets
 *   batches k, k + W, ...), each started and warmed (one untimed round of the
 *   same handoff and scan over W batches) before timing, three ways:
 *   - `share`: a handle per batch (`share(batch)`), posted; the worker
 *     `importShared`s, scans and releases (the main thread's import holds the
 *     batches, so no producer release runs in the timing);
 *   - `clone`: each batch's column buffers posted as a plain object
 *     `{ id, v }` of typed arrays (structured clone copies every byte: what
 *     users do today); the worker scans the typed arrays it receives. Not the
 *     imported `RecordBatch` itself: its `Data` keep their buffers behind
 *     accessors (`LazyData`, src/array/build.ts), which structured clone does
 *     not read, so a cloned imported batch arrives without its values;
 *   - `ipc`: `tableToIPC` per batch, its `ArrayBuffer` in the transfer list,
 *     `tableFromIPC` in the worker.
 *   The time runs from the first handoff (the `share` or `tableToIPC` calls
 *   included) to the last worker's sum back; every sum must equal the
 *   one-thread sum (the values are multiples of 0.5 far below 2^53, so every
 *   order of summing is exact).
 *
 * Lines: `workers <W> <rows>: share X ms, clone Y ms, ipc Z ms, one thread T
 * ms`, then the ratios: share / one thread (issue 45's goal with 2 workers
 * on 2 cores: at most 0.6), and the handoff alone of the same table (the
 * same post, import or receive and reply, no scan), `handoff <rows>: ...`,
 * with share / clone (goal at 50M rows: at most 0.01).
 *
 * Last, the handoff alone of one batch of 1K and of 10M rows to one warmed
 * worker, in fresh processes too, one per mode: there the two sizes are
 * handed off in turn (the process's state of the moment shared by both),
 * at least 7 pairs and up to 101 while they add up to under 200 ms, after
 * 20 handoffs of the 1K-row batch and one of the 10M-row batch, untimed (the
 * first handoffs in a fresh worker cost several times the settled ones, the
 * path is the same at every size, and a handoff of a tenth of a millisecond
 * needs many to settle on a loaded machine). `handoff <rows>: share X ms,
 * clone Y ms, ipc Z ms` (medians), and 10M / 1K, the median of each
 * process's own ratio (goal for share: flat, within 1.2x).
 *
 * Memory: the table is 16 bytes a row (800 MB at 50M rows) in the producer's
 * memory; `clone` and `ipc` make one more copy of it, spread over the workers,
 * in each of their processes. The machine's load average is printed first:
 * figures taken under load are noisier (its 2 cores are shared).
 */
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker } from 'node:worker_threads';
import { RecordBatch, Table, tableFromIPC, tableToIPC } from 'apache-arrow';
import { importShared, importTable, nativeMemory, share, type SharedHandle } from '../src/index.js';
import { sharedFixture } from '../test/threads/fixture.js';

const BATCH = 1_000_000;
/** The batch sizes of the handoff alone. */
const SMALL = 1_000;
const BIG = 10_000_000;
const HANDOFF_REPS = 7;
const HANDOFF_MAX_REPS = 101;
const HANDOFF_BUDGET_MS = 200;
/** Untimed handoffs of a 1K-row batch before a handoff is timed: the code is warm, not the data. */
const HANDOFF_WARM = 20;
type Mode = 'share' | 'clone' | 'ipc';
const MODES: Mode[] = ['share', 'clone', 'ipc'];

/** The filter + sum: v where the id's low word is not divisible by 3. */
function scan(ids: BigInt64Array, v: Float64Array): number {
  // Little-endian: the low word of id i is word 2i. Ids are below 2^31, so the word is the id.
  const lo = new Int32Array(ids.buffer, ids.byteOffset, ids.length * 2);
  let s = 0;
  for (let i = 0, n = v.length; i < n; i++) if (lo[2 * i]! % 3 !== 0) s += v[i]!;
  return s;
}

/** The id and v buffers of a batch. */
function columns(b: RecordBatch): [BigInt64Array, Float64Array] {
  const [id, v] = b.data.children;
  return [id!.values as BigInt64Array, v!.values as Float64Array];
}

// --- the worker ---------------------------------------------------------------------------------

interface Job {
  mode: Mode;
  scan: boolean;
  /** share: handles; clone: `{ id, v }` typed arrays, as cloned; ipc: IPC buffers. */
  items: unknown[];
}

function workerMain(): void {
  parentPort!.on('message', (job: Job) => {
    let sum = 0;
    for (const item of job.items) {
      if (job.mode === 'share') {
        const b = importShared(item as SharedHandle<'batch'>);
        if (job.scan) sum += scan(...columns(b));
        b.release();
      } else if (job.mode === 'clone') {
        const { id, v } = item as { id: BigInt64Array; v: Float64Array };
        if (job.scan) sum += scan(id, v);
      } else {
        const t = tableFromIPC(new Uint8Array(item as ArrayBuffer));
        if (job.scan) for (const b of t.batches) sum += scan(...columns(b));
      }
    }
    parentPort!.postMessage(sum);
  });
}

// --- a child: one measurement in a fresh process --------------------------------------------------

/** An imported table of `rows` rows in batches of at most `batch` rows (id = 0.., v = id * 0.5). */
function makeTable(rows: number, batch: number): Table {
  const fx = sharedFixture();
  const ptrs: bigint[] = [];
  for (let start = 0; start < rows; start += batch) ptrs.push(fx.batch(Math.min(batch, rows - start), start));
  const t = importTable(ptrs, fx.schema());
  const m = nativeMemory();
  for (const p of ptrs) m.free(p);
  // The views made once here, untimed: every mode then starts from a table that was read before.
  for (const b of t.batches) columns(b);
  return t;
}

function startWorker(): Promise<Worker> {
  const w = new Worker(fileURLToPath(import.meta.url));
  return new Promise((resolve, reject) => {
    w.once('online', () => resolve(w));
    w.once('error', reject);
  });
}

function ask(w: Worker, job: Job, transfer: ArrayBuffer[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error): void => reject(e);
    w.once('error', onError);
    w.once('message', (s: number) => {
      w.off('error', onError);
      resolve(s);
    });
    w.postMessage(job, transfer);
  });
}

/** Hands each worker its batches the way `mode` does, and waits for every sum. */
async function handoff(workers: Worker[], batches: readonly RecordBatch[], mode: Mode, doScan: boolean): Promise<number> {
  const replies: Promise<number>[] = [];
  workers.forEach((w, k) => {
    const mine = batches.filter((_, i) => i % workers.length === k);
    if (mine.length === 0) return;
    let items: unknown[];
    const transfer: ArrayBuffer[] = [];
    if (mode === 'share') items = mine.map((b) => share(b));
    else if (mode === 'clone') {
      items = mine.map((b) => {
        const [id, v] = columns(b);
        return { id, v };
      });
    }
    else {
      items = mine.map((b) => {
        const u8 = tableToIPC(new Table([b]));
        // tableToIPC's buffer is its own: transferred whole, never copied again.
        const buf = u8.byteOffset === 0 && u8.byteLength === u8.buffer.byteLength ? (u8.buffer as ArrayBuffer) : u8.slice().buffer;
        transfer.push(buf);
        return buf;
      });
    }
    replies.push(ask(w, { mode, scan: doScan, items }, transfer));
  });
  const sums = await Promise.all(replies);
  return sums.reduce((a, b) => a + b, 0);
}

function oneThread(batches: readonly RecordBatch[]): number {
  let s = 0;
  for (const b of batches) s += scan(...columns(b));
  return s;
}

interface ScanResult {
  ms: number;
  handoffMs: number;
  sum: number;
}

async function childScan(mode: Mode | 'one', rows: number, nWorkers: number): Promise<ScanResult> {
  const t = makeTable(rows, BATCH);
  const batches = t.batches;
  try {
    if (mode === 'one') {
      oneThread(batches.slice(0, 2)); // warmed, as the workers are
      const t0 = performance.now();
      const sum = oneThread(batches);
      return { ms: performance.now() - t0, handoffMs: 0, sum };
    }
    const workers = await Promise.all(Array.from({ length: nWorkers }, startWorker));
    try {
      // Warm: one round of the same handoff and scan, one batch a worker.
      await handoff(workers, batches.slice(0, nWorkers), mode, true);
      await handoff(workers, batches.slice(0, nWorkers), mode, false);
      let t0 = performance.now();
      await handoff(workers, batches, mode, false);
      const handoffMs = performance.now() - t0;
      t0 = performance.now();
      const sum = await handoff(workers, batches, mode, true);
      return { ms: performance.now() - t0, handoffMs, sum };
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
    }
  } finally {
    (t as unknown as { release(): void }).release();
  }
}

/**
 * One batch of SMALL rows and one of BIG rows to one warmed worker, no scan, handed off in turn (so
 * both sizes share the process's state of the moment): the median of each, over HANDOFF_REPS to
 * HANDOFF_MAX_REPS pairs after the warm-up.
 */
async function childHandoff(mode: Mode): Promise<{ small: number; big: number }> {
  const small = makeTable(SMALL, SMALL);
  const big = makeTable(BIG, BIG);
  const w = await startWorker();
  try {
    for (let i = 0; i < HANDOFF_WARM; i++) await handoff([w], small.batches, mode, false);
    await handoff([w], big.batches, mode, false);
    const times = { small: [] as number[], big: [] as number[] };
    let spent = 0;
    while (times.small.length < HANDOFF_REPS || (times.small.length < HANDOFF_MAX_REPS && spent < HANDOFF_BUDGET_MS)) {
      for (const [t, into] of [[small, times.small], [big, times.big]] as const) {
        const t0 = performance.now();
        await handoff([w], t.batches, mode, false);
        const ms = performance.now() - t0;
        into.push(ms);
        spent += ms;
      }
    }
    return { small: median(times.small), big: median(times.big) };
  } finally {
    await w.terminate();
    (small as unknown as { release(): void }).release();
    (big as unknown as { release(): void }).release();
  }
}

// --- the parent -----------------------------------------------------------------------------------

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function child<T>(args: string[]): T {
  const r = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--child', ...args], { encoding: 'utf8', maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`child ${args.join(' ')} exited with ${r.status}${r.signal ? ` (${r.signal})` : ''}:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as T;
}

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  if (at < 0) return fallback;
  const n = Number(process.argv[at + 1]);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} takes a positive integer, got ${process.argv[at + 1]}`);
  return n;
}

const fmt = (x: number): string => x.toFixed(2);
const ratio = (a: number, b: number): string => (a / b).toFixed(a / b < 0.1 ? 4 : 2);

function parent(): void {
  const processes = option('--processes', 3);
  const rows = option('--rows', 50_000_000);
  const nWorkers = option('--workers', 2);
  sharedFixture(); // built once here; the children load the same library (ARROW_DEVICE_SHARED_FIXTURE)
  const [l1, l5] = loadavg();
  console.log(
    `# bench:workers: ${rows} rows (int64 + float64) in batches of ${BATCH}, ${nWorkers} workers, medians of ${processes} fresh processes per mode, in turn; ` +
      `node ${process.version}; load average ${l1!.toFixed(2)} (1 min), ${l5!.toFixed(2)} (5 min)`,
  );

  const scanModes: (Mode | 'one')[] = ['one', ...MODES];
  const scans = new Map<Mode | 'one', ScanResult[]>(scanModes.map((m) => [m, []]));
  for (let i = 0; i < processes; i++) {
    const order = scanModes.map((_, k) => scanModes[(k + i) % scanModes.length]!);
    for (const m of order) scans.get(m)!.push(child<ScanResult>(['scan', m, String(rows), String(nWorkers)]));
  }
  const expected = scans.get('one')![0]!.sum;
  for (const [m, rs] of scans) {
    for (const r of rs) if (r.sum !== expected) throw new Error(`${m}: sum ${r.sum}, one thread ${expected}`);
  }
  const ms = (m: Mode | 'one'): number => median(scans.get(m)!.map((r) => r.ms));
  const hand = (m: Mode): number => median(scans.get(m)!.map((r) => r.handoffMs));
  console.log(`workers ${nWorkers} ${rows}: share ${fmt(ms('share'))} ms, clone ${fmt(ms('clone'))} ms, ipc ${fmt(ms('ipc'))} ms, one thread ${fmt(ms('one'))} ms`);
  console.log(`workers ${nWorkers} ${rows} ratios: share / one thread ${ratio(ms('share'), ms('one'))}, clone / one thread ${ratio(ms('clone'), ms('one'))}, ipc / one thread ${ratio(ms('ipc'), ms('one'))}`);
  console.log(`handoff ${rows} (${nWorkers} workers, no scan): share ${fmt(hand('share'))} ms, clone ${fmt(hand('clone'))} ms, ipc ${fmt(hand('ipc'))} ms; share / clone ${ratio(hand('share'), hand('clone'))}`);

  const handoffs = new Map<Mode, { small: number; big: number }[]>(MODES.map((m) => [m, []]));
  for (let i = 0; i < processes; i++) {
    const order = MODES.map((_, k) => MODES[(k + i) % MODES.length]!);
    for (const m of order) handoffs.get(m)!.push(child<{ small: number; big: number }>(['handoff', m]));
  }
  const h = (m: Mode, size: 'small' | 'big'): number => median(handoffs.get(m)!.map((r) => r[size]));
  // The growth with rows: the median of each process's own BIG / SMALL, both sizes taken in turn there.
  const growth = (m: Mode): string => ratio(median(handoffs.get(m)!.map((r) => r.big / r.small)), 1);
  for (const [size, rows] of [['small', SMALL], ['big', BIG]] as const) {
    console.log(`handoff ${rows}: share ${fmt(h('share', size))} ms, clone ${fmt(h('clone', size))} ms, ipc ${fmt(h('ipc', size))} ms`);
  }
  console.log(`handoff ${BIG} / ${SMALL} (median of each process's ratio): share ${growth('share')}, clone ${growth('clone')}, ipc ${growth('ipc')}`);
}

if (!isMainThread) {
  workerMain();
} else {
  const c = process.argv.indexOf('--child');
  if (c > 0) {
    const [what, mode, size, workers] = process.argv.slice(c + 1);
    const r = what === 'scan' ? await childScan(mode as Mode | 'one', Number(size), Number(workers)) : await childHandoff(mode as Mode);
    console.log(JSON.stringify(r));
  } else {
    parent();
  }
}
