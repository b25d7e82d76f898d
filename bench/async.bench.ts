/**
 * Async device stream benchmark: the per-batch cost of each path through an
 * ArrowAsyncDeviceStreamHandler, the bare koffi hops under it, and where the
 * rest goes.
 *
 *   npm run bench:async [-- --batches 5000] [-- --repeats 3] [-- --against <git ref>[,<git ref>...]] [-- --only <text>]
 *                       [-- --runtimes node,bun,deno]
 *
 * `--only` measures the paths whose name contains the text (and the hops and export/import).
 * `--runtimes` measures on each runtime named (Bun and Deno from the npm
 * registry, tools/runtimes.mjs), every figure of a runtime in child processes
 * of that runtime, one section each; the default is the Node running it.
 *
 * Paths (batches of 8 int32 rows, so the fixed cost per batch is what shows):
 * - a native producer thread (test/async/peer.c) into our reader, queue 1 and
 *   8, through the native ring (src/async/ring.ts) and through JS callbacks;
 * - our producer into our reader on the JS thread, queue 1 and 8;
 * - our producer into a native consumer whose worker thread extracts each
 *   task, releases the batch and calls request(1) from its own thread,
 *   queue 1 and 8, through the native pump (native/async-ring.c: the
 *   handler called from a thread of the pump, the consumer's calls answered
 *   in C; its wake-ups of the JS thread are counted) and through JS
 *   callbacks (every call of the consumer a hop).
 *
 * Each line gives the median over the repeats (each the median of three
 * runs in a warmed-up child process) of the wall time per batch, batches
 * per second, and the CPU time per batch of the JS thread
 * (process.threadCpuUsage) and of the whole process (every thread: koffi's
 * workers, the C peer's threads). CPU time leaves out the time a thread
 * waits or is descheduled, so it is the steadier figure on a loaded machine;
 * the wall time is what a user sees.
 *
 * `--against <ref>` compiles that commit's src/ (git archive into
 * .build/bench-ref/) and measures it beside the working tree's, repeat by
 * repeat interleaved, so a before/after comparison shares the machine's
 * state of the moment (it is noisy: two cores, neighbours). Every
 * measurement runs in a child process of its own (two copies of the library
 * cannot share one koffi: its type names are global), warmed up first.
 *
 * The breakdown: the bare koffi hops (a native thread calling an empty JS
 * callback and waiting for it; a JS call of a no-op C function on a koffi
 * worker thread), the export and the import of one batch alone (what a task
 * extraction costs beside the async machinery), and for each path the JS
 * thread's CPU time left once its hops and its export/import are taken out:
 * the async machinery of our own (callbacks, promises, request accounting).
 */
import koffi from 'koffi';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Table, vectorFromArray, type RecordBatch } from 'apache-arrow';
import type * as Current from '../src/index.js';
import { asyncPeer, asyncPeerPath, peerMissing } from '../test/async/peer.js';
import { Doorbell } from '../src/async/doorbell.js';
import { runtimeName } from '../src/platform/node.js';

type Lib = typeof Current;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const N = Number(arg('batches') ?? 5000);
const R = Number(arg('repeats') ?? 3);
const only = arg('only');
const wanted = (p: { name: string }): boolean => only === undefined || p.name.includes(only);

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const f1 = (x: number): string => x.toFixed(1);

interface Timing {
  /** Wall microseconds per batch (or per hop). */
  us: number;
  /** The JS thread's CPU microseconds per batch. */
  js: number;
  /** The process's CPU microseconds per batch, every thread. */
  all: number;
  /** Wake-ups of the JS thread per batch (the native ring and pump). */
  hopsPerBatch?: number;
  /** The runtime a child ran on (`runtime`, the measurement of nothing). */
  runtime?: string;
}

// --- what a child measures ---------------------------------------------------------------

/** process.threadCpuUsage: newer than the @types/node the project pins. */
const threadCpuUsage = (process as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage?.bind(process);

/** The JS thread's CPU time in microseconds (where Node lacks threadCpuUsage, the event loop's busy time stands in). */
const jsCpu: () => number =
  threadCpuUsage !== undefined
    ? () => {
        const u = threadCpuUsage();
        return u.user + u.system;
      }
    : () => {
        const e = performance.eventLoopUtilization();
        return (performance.now() - e.idle) * 1000;
      };
const allCpu = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/**
 * The smallest step the JS thread's CPU clock takes (a runtime's clock may tick coarsely: Deno's in
 * 10 ms steps here): the CPU columns mean little below a few steps per run.
 */
function cpuClockStep(): number {
  let step = Infinity;
  for (let i = 0; i < 3; i++) {
    const a = jsCpu();
    let b = a;
    while (b === a) b = jsCpu();
    step = Math.min(step, b - a);
  }
  return step;
}

/** Wall time, JS thread CPU and process CPU per item (microseconds) of one run of `n` items. */
async function timed(n: number, run: () => Promise<void> | void): Promise<Timing> {
  const j0 = jsCpu();
  const a0 = allCpu();
  const t0 = performance.now();
  await run();
  const ms = performance.now() - t0;
  return { us: (ms * 1000) / n, js: (jsCpu() - j0) / n, all: (allCpu() - a0) / n };
}

const batch: RecordBatch = new Table({ x: vectorFromArray(Int32Array.from({ length: 8 }, (_, i) => i)) }).batches[0]!;
const batches = (n: number): RecordBatch[] => new Array<RecordBatch>(n).fill(batch);

interface Path {
  name: string;
  /** What crosses threads per batch: blocking native-to-JS callbacks, and async calls (JS to a worker and back). */
  hops: { blocking: number; async: number };
  /** Whether our side exports (producer) and imports (reader) each batch. */
  exports: boolean;
  imports: boolean;
  run(lib: Lib, n: number): Promise<void>;
}

/**
 * A native producer thread into our reader, through the native ring (the
 * default where its prebuilt library loads: the producer never waits for
 * JS, which is woken once per burst; its doorbells are counted) or through
 * JS callbacks (each on_next_task a blocking hop). A commit from before the
 * ring ignores the option: JS callbacks.
 */
const nativeToReader = (queueSize: number, nativeRing: boolean): Path => ({
  name: `native producer thread -> our reader (${nativeRing ? 'native ring' : 'JS callbacks'}), queue ${queueSize}`,
  // JS callbacks: on_next_task; request is a plain call from the JS thread. The ring: its doorbells, counted.
  hops: nativeRing ? { blocking: 0, async: 0 } : { blocking: 1, async: 0 },
  exports: false,
  imports: true,
  async run(lib, n) {
    const peer = asyncPeer();
    const reader = lib.createAsyncDeviceStreamReader({ queueSize, nativeRing } as Parameters<Lib['createAsyncDeviceStreamReader']>[0]);
    const p = peer.produce(reader.handler, n, 8, -1);
    let k = 0;
    for await (const _ of reader) k++;
    await peer.produceWait(p);
    if (k !== n) throw new Error(`read ${k} batches, not ${n}`);
    await reader.released;
    ringDoorbells = (reader as { doorbells?: number }).doorbells ?? 0;
  },
});

const jsToJs = (queueSize: number): Path => ({
  name: `our producer -> our reader (JS thread), queue ${queueSize}`,
  hops: { blocking: 0, async: 0 },
  exports: true,
  imports: true,
  async run(lib, n) {
    const reader = lib.createAsyncDeviceStreamReader({ queueSize });
    const done = lib.produceAsyncDeviceStream(batches(n), reader.handler);
    let k = 0;
    for await (const _ of reader) k++;
    await done;
    if (k !== n) throw new Error(`read ${k} batches, not ${n}`);
  },
});

/**
 * Our producer into a native consumer thread, through the native pump (the
 * default where the prebuilt library loads; a commit from before the pump
 * ignores the option: JS callbacks) or through JS callbacks.
 */
const jsToNative = (queueSize: number, nativeRing: boolean): Path => ({
  name: `our producer -> native consumer thread (${nativeRing ? 'native pump' : 'JS callbacks'}), queue ${queueSize}`,
  // JS callbacks: on_next_task (an async call); extract_data, the batch's release and request(1) from the
  // consumer's thread. The pump: its doorbells, counted.
  hops: nativeRing ? { blocking: 0, async: 0 } : { blocking: 3, async: 1 },
  exports: true,
  imports: false,
  async run(lib, n) {
    const peer = asyncPeer();
    const h = peer.consumer(queueSize, -1, false);
    const r = await lib.produceAsyncDeviceStream(batches(n), h, { nativeRing } as Parameters<Lib['produceAsyncDeviceStream']>[2]);
    const stats = await peer.consumerWait(h, 60_000);
    if (stats.batches !== n) throw new Error(`the consumer got ${stats.batches} batches, not ${n}`);
    ringDoorbells = (r as { doorbells?: number }).doorbells ?? 0;
  },
});

const paths = [
  nativeToReader(1, true), nativeToReader(8, true), nativeToReader(1, false), nativeToReader(8, false), jsToJs(1), jsToJs(8),
  jsToNative(1, true), jsToNative(8, true), jsToNative(1, false), jsToNative(8, false),
];
/** Doorbells (wake-ups of the JS thread) of the last run of a path that counts them, for `measure`. */
let ringDoorbells = 0;

type AsyncForm = { async: (...a: unknown[]) => void };

/** A native thread calls an empty JS callback n times, waiting for each (what every handler callback from a producer thread pays). */
let hopFns: { proto: ReturnType<typeof koffi.proto>; fromThread: AsyncForm; getpid: AsyncForm } | undefined;
const hop = (): NonNullable<typeof hopFns> =>
  (hopFns ??= {
    proto: koffi.proto('void arrow_device_bench_cb(int64_t)'),
    fromThread: koffi.load(asyncPeerPath()).func('void peer_call_from_thread(void *fn, int64_t n)') as unknown as AsyncForm,
    getpid: koffi.load(null).func('int getpid(void)') as unknown as AsyncForm,
  });

async function blockingHop(n: number): Promise<void> {
  const { proto, fromThread } = hop();
  let count = 0;
  const cb = koffi.register(() => void count++, koffi.pointer(proto));
  try {
    await new Promise<void>((res, rej) => fromThread.async(cb, n, (e: unknown) => (e ? rej(e) : res())));
  } finally {
    koffi.unregister(cb);
  }
  if (count !== n) throw new Error(`callback ran ${count} times, not ${n}`);
}

/**
 * n round trips through a doorbell pipe, the native ring's and pump's wake-up: JS signals a native
 * thread (a plain call), which writes a byte into a pipe that JS's event loop reads (the runtime's
 * mechanism: src/async/doorbell.ts), and JS signals again. One round trip is what a queue-1 batch costs
 * the ring or pump beyond its work.
 */
async function doorbellRoundTrip(n: number): Promise<void> {
  const peer = koffi.load(asyncPeerPath());
  const make = peer.func('void *peer_pingpong_new(void)');
  const fd = peer.func('int peer_pingpong_fd(void *p)');
  const ping = peer.func('void peer_pingpong_ping(void *p)');
  const free = peer.func('void peer_pingpong_free(void *p)');
  const p = make() as unknown;
  let pinged = 0;
  let heard = 0;
  let bell: Doorbell | undefined;
  // The doorbell never keeps the process alive (the library's streams do, while they run): this does.
  const keepAlive = setInterval(() => {}, 1 << 30);
  await new Promise<void>((resolve) => {
    const signal = (): void => {
      pinged++;
      ping(p);
    };
    bell = new Doorbell({
      fd: fd(p) as number,
      what: 'the benchmark',
      rung: () => pinged,
      onRing: () => {
        if (++heard >= n) resolve();
        else signal();
      },
    });
    signal();
  });
  clearInterval(keepAlive);
  bell!.close();
  free(p);
}

/** n sequential async calls of a no-op C function: JS to a koffi worker thread and back. */
async function asyncCall(n: number): Promise<void> {
  const { getpid } = hop();
  for (let i = 0; i < n; i++) await new Promise<void>((res, rej) => getpid.async((e: unknown) => (e ? rej(e) : res())));
}

const RELEASE = { name: 'release', result: 'void', params: ['pointer'] } as const;

/** The export of one batch alone (into a reused ArrowDeviceArray, released at once). */
function exportOnly(lib: Lib, n: number): void {
  const m = lib.nativeMemory();
  const out = lib.allocArrowDeviceArray();
  const rel = BigInt(m.layouts.ArrowArray.offsets.release!);
  for (let i = 0; i < n; i++) {
    lib.exportDeviceArray(batch, { into: out });
    m.call(m.readPtr(out + rel), RELEASE, out);
  }
  lib.freeArrowDeviceArray(out);
}

/** The export and import of one batch, and the release of the import. */
function exportImport(lib: Lib, n: number): void {
  const s = lib.exportSchema(batch.schema);
  const node = lib.importSchemaNode(s);
  lib.freeArrowSchema(s);
  const out = lib.allocArrowDeviceArray();
  for (let i = 0; i < n; i++) {
    lib.exportDeviceArray(batch, { into: out });
    lib.releaseImport(lib.importDeviceRecordBatch(out, node));
  }
  lib.freeArrowDeviceArray(out);
}

/**
 * One measurement in this (child) process: warmed up (a fresh process runs
 * cold code, several times slower until the JIT has optimised it), then the
 * median of three runs.
 */
async function measure(lib: Lib, what: string): Promise<Timing> {
  lib.nativeMemory(); // first: the library sets koffi's async stack size before any library is loaded
  if (what === 'runtime') {
    const ring = lib.createAsyncDeviceStreamReader();
    const how = ring.nativeRing ? 'native ring' : `no native ring: ${ring.nativeRingMissing}`;
    ring.dispose();
    return { us: 0, js: 0, all: 0, runtime: `${runtimeName} (${process.arch}; ${how}; JS CPU clock step ${f1(cpuClockStep())} us)` };
  }
  let run: (n: number) => Promise<void> | void;
  if (what === 'hop:blocking') run = blockingHop;
  else if (what === 'hop:async') run = asyncCall;
  else if (what === 'hop:doorbell') run = doorbellRoundTrip;
  else if (what === 'export') run = (n) => exportOnly(lib, n);
  else if (what === 'export+import') run = (n) => exportImport(lib, n);
  else {
    const p = paths.find((x) => x.name === what);
    if (!p) throw new Error(`unknown measurement ${what}`);
    run = (n) => p.run(lib, n);
  }
  const t0 = performance.now();
  do await run(N);
  while (performance.now() - t0 < 500);
  const ts: Timing[] = [];
  const bells: number[] = [];
  for (let i = 0; i < 3; i++) {
    ts.push(await timed(N, () => run(N)));
    bells.push(ringDoorbells / N);
  }
  return { us: median(ts.map((t) => t.us)), js: median(ts.map((t) => t.js)), all: median(ts.map((t) => t.all)), hopsPerBatch: median(bells) };
}

/** How a child of a runtime starts: `cmd args... <file> ...`. */
interface Runner {
  readonly runtime: string;
  readonly cmd: string;
  readonly args: readonly string[];
}

/** Each runtime's runner (tools/runtimes.mjs, installing Bun or Deno on first use), or why there is none. */
function runnerFor(runtime: string): Runner | string {
  if (runtime === 'node') return { runtime, cmd: process.execPath, args: [] };
  const r = spawnSync(process.execPath, [join(process.cwd(), 'tools', 'runtimes.mjs'), 'js', runtime], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const got = JSON.parse(r.stdout.trim() || '"tools/runtimes.mjs failed"') as { cmd: string; args: string[] } | string;
  return typeof got === 'string' ? got : { runtime, cmd: got.cmd, args: got.args };
}

// --- the parent: runs every measurement in a child, interleaved ----------------------

/** Compiles `ref`'s src/ once (cached by commit); returns the path of its index.js. */
function compileRef(ref: string): { name: string; index: string } {
  const root = process.cwd();
  const sha = spawnSync('git', ['rev-parse', '--short', ref], { cwd: root, encoding: 'utf8' }).stdout.trim();
  if (!sha) throw new Error(`--against ${ref}: not a commit`);
  const dir = resolve(root, '.build', 'bench-ref', sha);
  const index = join(dir, 'out', 'index.js');
  if (!existsSync(index)) {
    mkdirSync(dir, { recursive: true });
    const tar = spawnSync('sh', ['-c', `git archive ${sha} src | tar -x -C '${dir}'`], { cwd: root, stdio: 'inherit' });
    if (tar.status !== 0) throw new Error(`git archive ${sha} failed`);
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        extends: join(root, 'tsconfig.json'),
        compilerOptions: { rootDir: 'src', outDir: 'out', declaration: false, sourceMap: false },
        include: ['src'],
      }),
    );
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.json')], {
      stdio: 'inherit',
    });
    if (tsc.status !== 0) throw new Error(`compiling ${ref}'s src failed`);
  }
  return { name: `${ref} (${sha})`, index };
}

function measureIn(runner: Runner, index: string, what: string): Timing {
  const r = spawnSync(runner.cmd, [...runner.args, fileURLToPath(import.meta.url), '--child', index, what, '--batches', String(N)], {
    encoding: 'utf8',
    env: { ...process.env, ARROW_DEVICE_ASYNC_PEER: asyncPeerPath() },
  });
  const line = r.stdout.trim().split('\n').pop() ?? '';
  if (r.status !== 0 || !line.startsWith('{')) throw new Error(`measuring ${what} on ${runner.runtime} failed:\n${r.stdout}\n${r.stderr}`);
  return JSON.parse(line) as Timing;
}

async function parent(): Promise<void> {
  if (peerMissing) {
    console.log(`async bench skipped: ${peerMissing}`);
    return;
  }
  asyncPeer(); // built once; the children reuse it
  const against = arg('against');
  const variants = [
    ...(against ? against.split(',').map(compileRef) : []),
    { name: 'working tree', index: fileURLToPath(new URL('../src/index.js', import.meta.url)) },
  ];
  for (const runtime of (arg('runtimes') ?? 'node').split(',')) {
    const runner = runnerFor(runtime);
    if (typeof runner === 'string') {
      console.log(`\n===== ${runtime}: not measured: ${runner}`);
      continue;
    }
    await benchOn(runner, variants);
  }
}

async function benchOn(runner: Runner, variants: { name: string; index: string }[]): Promise<void> {
  const child = (index: string, what: string): Timing => measureIn(runner, index, what);
  const version = measureIn(runner, variants.at(-1)!.index, 'runtime').runtime;
  console.log(`\n===== ${version}`);
  console.log(`async device stream bench: ${N} batches of 8 int32 rows, ${R} repeats (medians), ${version}`);
  console.log(`variants: ${variants.map((v) => v.name).join(', ')}`);

  const results = new Map<string, Timing[]>();
  const put = (key: string, t: Timing): void => void results.set(key, [...(results.get(key) ?? []), t]);
  const med = (key: string): Timing => {
    const ts = results.get(key)!;
    return {
      us: median(ts.map((t) => t.us)),
      js: median(ts.map((t) => t.js)),
      all: median(ts.map((t) => t.all)),
      hopsPerBatch: median(ts.map((t) => t.hopsPerBatch ?? 0)),
    };
  };

  for (let r = 0; r < R; r++) {
    put('hop:blocking', child(variants.at(-1)!.index, 'hop:blocking'));
    put('hop:async', child(variants.at(-1)!.index, 'hop:async'));
    put('hop:doorbell', child(variants.at(-1)!.index, 'hop:doorbell'));
    for (const what of ['export', 'export+import', ...paths.filter(wanted).map((p) => p.name)]) {
      for (const v of variants) put(`${v.name}:${what}`, child(v.index, what));
    }
  }

  const hopB = med('hop:blocking');
  const hopA = med('hop:async');
  const hopD = med('hop:doorbell');
  const line = (name: string, m: Timing, width: number, tail: string): string =>
    `  ${name.padEnd(width)} ${f1(m.us).padStart(8)}  ${Math.round(1e6 / m.us).toString().padStart(9)}  ${f1(m.js).padStart(6)}  ${f1(m.all).padStart(7)} |${tail}`;
  console.log('\nbare koffi hops (us each: wall; CPU of the JS thread, of every thread):');
  console.log(`  native thread -> empty JS callback, waiting for it:   ${f1(hopB.us)}; ${f1(hopB.js)}, ${f1(hopB.all)}`);
  console.log(`  JS -> no-op C call on a koffi worker -> JS (async):  ${f1(hopA.us)}; ${f1(hopA.js)}, ${f1(hopA.all)}`);
  console.log(
    `  JS signals a native thread, which wakes JS through a pipe (the ring's and pump's wake-up; a queue-1 batch's floor): ` +
      `${f1(hopD.us)}; ${f1(hopD.js)}, ${f1(hopD.all)}`,
  );
  const head = (width: number, tail: string): string =>
    `  ${'path'.padEnd(width)} us/batch  batches/s  JS CPU  all CPU |${tail}   (us per batch; CPU: of the JS thread, of every thread)`;
  for (const v of variants) {
    const ex = med(`${v.name}:export`).js;
    const im = med(`${v.name}:export+import`).js - ex;
    console.log(`\n${v.name}: export of one batch ${f1(ex)} us, import (and its release) ${f1(im)} us (alone, JS CPU)`);
    console.log(head(66, '  hops  exp/imp  rest (ours)'));
    for (const p of paths.filter(wanted)) {
      const m = med(`${v.name}:${p.name}`);
      const hops = p.hops.blocking * hopB.js + p.hops.async * hopA.js;
      const xi = (p.exports ? ex : 0) + (p.imports ? im : 0);
      // The ring's wake-ups are pipe reads on the event loop, not koffi hops: counted, inside "rest".
      const bells = p.name.includes('native ring') || p.name.includes('native pump') ? `  (${(m.hopsPerBatch ?? 0).toFixed(2)} wake-ups of the JS thread per batch)` : '';
      console.log(line(p.name, m, 66, ` ${f1(hops).padStart(5)}  ${f1(xi).padStart(7)}  ${f1(m.js - hops - xi).padStart(11)}${bells}`));
    }
  }
  console.log(
    "\nhops: the bare hops' JS CPU times the hops each batch makes (native producer -> reader: on_next_task; our producer ->" +
      ' native consumer: the on_next_task async call, and extract_data, the release and request(1) from its thread; the' +
      " ring and the pump: none, their wake-ups counted apart). exp/imp: our export and/or import of the batch alone. rest: the JS thread's CPU left," +
      ' our callbacks, promises and request accounting.',
  );
}

const c = process.argv.indexOf('--child');
if (c >= 0) {
  const lib = (await import(pathToFileURL(process.argv[c + 1]!).href)) as Lib;
  console.log(JSON.stringify(await measure(lib, process.argv[c + 2]!)));
} else {
  await parent();
}
