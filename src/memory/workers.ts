/**
 * The package's own worker threads (native/workers.c) for the foreign calls
 * that may wait: `callAsync` of the native memory and every off-thread ADBC
 * driver call go through them where the prebuilt library loads, instead of
 * koffi's async form, which runs on libuv's thread pool (4 threads by
 * default, shared with `node:fs`, `node:dns` and `node:zlib`).
 *
 * A call is written into a job of native memory (the function, its integer
 * arguments), queued with one plain call, and run on a thread of the pool;
 * the pool calls a koffi callback when JS waits (koffi queues it to the JS
 * thread, as it answers its own async calls), and JS takes the finished jobs'
 * tags in one plain call per wake-up. One call at a time costs what koffi's
 * async form costs; calls in flight together share wake-ups.
 *
 * Where the pool is not used, and why (`nativeWorkersMissing`): no prebuilt
 * library (Windows among them) or `ARROW_DEVICE_WORKERS=0`; koffi's async
 * calls serve there. `ARROW_DEVICE_WORKERS=<n>` caps the threads at n (the
 * default, 256, lets them follow the calls in flight): on a machine of few
 * cores that also runs the database, fewer threads at once leave the JS
 * thread more CPU (docs/performance.md), at the price of calls waiting for a
 * thread while n others wait on a server.
 */
import type { LibraryHandle } from 'koffi';
import { ArrowDeviceError } from '../errors.js';
import { envVar, runtimeName } from '../platform/node.js';
import { findPrebuilt } from '../platform/prebuilt.js';

type Koffi = typeof import('koffi');

/** `struct worker_job` (native/workers.c): fn, nargs, args[9], ret, tag, next; 8 bytes each. */
const JOB_WORDS = 14;
const JOB_BYTES = JOB_WORDS * 8;
const MAX_ARGS = 9;
const RET = 11;
const TAG = 12;
/** Jobs per slab: a slab is allocated when every job is in flight, and never freed (see `Slab`). */
const SLAB_JOBS = 64;
/** The most threads of the pool unless `ARROW_DEVICE_WORKERS` says fewer, and how long one waits for a call before it ends. */
const MAX_THREADS = 256;
const IDLE_MS = 10_000;
/** The most finished calls settled in one turn of the event loop (see `drain`). */
const TAKE_MAX = 16;

/** What a test or benchmark reads of the pool (`workers_stat`). */
export interface WorkerStats {
  /** Threads running now, and idle among them. */
  readonly threads: number;
  readonly idle: number;
  /** Threads ever started, calls ever run, wake-ups of the JS thread. */
  readonly started: number;
  readonly calls: number;
  readonly wakeups: number;
}

export interface NativeWorkers {
  /**
   * Calls the function at `fn` with `args` (integers: pointers, sizes, ints) on a thread of the pool.
   * Resolves to the low 32 bits of its result as a signed number (`wide`: all 64 bits, as a bigint).
   */
  call(fn: bigint, args: readonly (bigint | number)[], wide?: false): Promise<number>;
  call(fn: bigint, args: readonly (bigint | number)[], wide: true): Promise<bigint>;
  stats(): WorkerStats;
}

/** The process's allocator, for job memory that no JS thread frees (a thread of the pool may hold it). */
export interface JobMemory {
  allocProcess(size: number): bigint;
  view(addr: bigint, byteLength: number): Uint8Array;
}

/**
 * Jobs in native memory that lives as long as the process: a job may still be
 * inside a driver when the JS thread that made it ends, and its thread writes
 * the result into it afterwards.
 */
interface Slab {
  readonly base: bigint;
  readonly u64: BigUint64Array;
  readonly i32: Int32Array;
}

interface Pending {
  resolve: (v: never) => void;
  reject: (e: unknown) => void;
  wide: boolean;
}

let missing: string | undefined;

/** Why the pool is not used in this thread, when it is not (for tests and benchmarks to print). */
export function nativeWorkersMissing(): string | undefined {
  return missing;
}

/** Loads the pool, or returns null and says why (`nativeWorkersMissing`). */
export function loadWorkers(k: Koffi, mem: JobMemory): NativeWorkers | null {
  const maxThreads = workersSetting(envVar('ARROW_DEVICE_WORKERS'));
  if (maxThreads === 0) return none('turned off (ARROW_DEVICE_WORKERS=0)');
  if (process.platform === 'win32') return none('no prebuilt library for Windows');
  const found = findPrebuilt();
  if ('missing' in found) return none(found.missing);
  let l: LibraryHandle;
  try {
    l = k.load(found.path);
    const size = Number(l.func('int64_t workers_job_size(void)')() as number | bigint);
    if (size !== JOB_BYTES) return none(`${found.path} has ${size}-byte jobs; this package writes ${JOB_BYTES}`);
  } catch (e) {
    // An older library without the pool, one for another libc, or a Deno without --allow-ffi.
    return none(`${found.path} gives no worker threads on ${runtimeName}: ${(e as Error).message}`);
  }
  const create = l.func('uintptr_t workers_new(int64_t max_threads, int64_t idle_ms, uintptr_t notify)');
  const submit = l.func('int32_t workers_submit(uintptr_t w, uintptr_t job)');
  const take = l.func('int64_t workers_take(uintptr_t w, int64_t *out, int64_t max, int32_t arm)');
  const stat = l.func('int64_t workers_stat(uintptr_t w, int32_t which)');
  let pool: Pool | undefined;
  // One registration per JS thread (koffi allows 8192 in all), never unregistered: the pool outlives it.
  const notify = BigInt(k.register(() => pool?.drain(), k.pointer(k.proto('void', []))) as unknown as number | bigint);
  const w = BigInt(create(maxThreads, IDLE_MS, notify) as number | bigint);
  if (w === 0n) return none('workers_new failed (out of memory)');
  pool = new Pool(mem, {
    submit: (job) => submit(w, job) as number,
    take: (out, arm) => Number(take(w, out, TAKE_MAX, arm ? 1 : 0) as number | bigint),
    stat: (which) => Number(stat(w, which) as number | bigint),
  });
  return pool;
}

/** Runs `f` at the next turn of the event loop, after its I/O (`setImmediate` where the runtime has it). */
const later: (f: () => void) => void =
  typeof setImmediate === 'function' ? (f) => void setImmediate(f) : (f) => void setTimeout(f, 0);

/**
 * `ARROW_DEVICE_WORKERS`: unset or empty, the default cap; `0`, no pool; a whole number from 1 to 256,
 * that cap. Anything else is an error that names the variable (a typo must not pass for the default).
 */
export function workersSetting(value: string | undefined): number {
  if (value === undefined || value.trim() === '') return MAX_THREADS;
  const t = value.trim();
  const n = /^\d+$/.test(t) ? Number(t) : NaN;
  if (!(n >= 0 && n <= MAX_THREADS)) {
    throw new ArrowDeviceError('invalid', 'ARROW_DEVICE_WORKERS', `${JSON.stringify(value)}: expected 0 (no worker threads: koffi's async calls on libuv's pool) or the most threads, 1 to ${MAX_THREADS}`);
  }
  return n;
}

function none(why: string): null {
  missing = why;
  return null;
}

interface PoolLib {
  submit(job: bigint): number;
  take(out: BigInt64Array, arm: boolean): number;
  stat(which: number): number;
}

class Pool implements NativeWorkers {
  readonly #mem: JobMemory;
  readonly #lib: PoolLib;
  readonly #slabs: Slab[] = [];
  /** Free job numbers (slab * SLAB_JOBS + index). */
  readonly #free: number[] = [];
  readonly #pending: (Pending | undefined)[] = [];
  #inFlight = 0;
  readonly #out = new BigInt64Array(TAKE_MAX);
  /** Keeps the process alive while calls are in flight (koffi's callback does not): a timer that never fires. */
  #alive: ReturnType<typeof setInterval> | undefined;

  constructor(mem: JobMemory, lib: PoolLib) {
    this.#mem = mem;
    this.#lib = lib;
  }

  #job(): number {
    let n = this.#free.pop();
    if (n === undefined) {
      const base = this.#mem.allocProcess(SLAB_JOBS * JOB_BYTES);
      const bytes = this.#mem.view(base, SLAB_JOBS * JOB_BYTES);
      const s = this.#slabs.length;
      this.#slabs.push({ base, u64: new BigUint64Array(bytes.buffer, bytes.byteOffset, SLAB_JOBS * JOB_WORDS), i32: new Int32Array(bytes.buffer, bytes.byteOffset, SLAB_JOBS * JOB_WORDS * 2) });
      for (let i = SLAB_JOBS - 1; i > 0; i--) this.#free.push(s * SLAB_JOBS + i);
      n = s * SLAB_JOBS;
    }
    return n;
  }

  call(fn: bigint, args: readonly (bigint | number)[], wide?: false): Promise<number>;
  call(fn: bigint, args: readonly (bigint | number)[], wide: true): Promise<bigint>;
  call(fn: bigint, args: readonly (bigint | number)[], wide = false): Promise<number | bigint> {
    if (args.length > MAX_ARGS) return Promise.reject(new ArrowDeviceError('invalid', 'worker call', `${args.length} arguments; at most ${MAX_ARGS}`));
    const n = this.#job();
    const slab = this.#slabs[(n / SLAB_JOBS) | 0]!;
    const at = (n % SLAB_JOBS) * JOB_WORDS;
    const u64 = slab.u64;
    u64[at] = fn;
    u64[at + 1] = BigInt(args.length);
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      u64[at + 2 + i] = typeof a === 'bigint' ? BigInt.asUintN(64, a) : BigInt.asUintN(64, BigInt(a));
    }
    u64[at + TAG] = BigInt(n);
    return new Promise<number | bigint>((resolve, reject) => {
      const rc = this.#lib.submit(slab.base + BigInt(at * 8));
      if (rc !== 0) {
        this.#free.push(n);
        reject(new ArrowDeviceError('io', 'worker call', `no worker thread could start (errno ${rc})`));
        return;
      }
      this.#pending[n] = { resolve: resolve as (v: never) => void, reject, wide };
      if (this.#inFlight++ === 0) this.#alive = setInterval(() => {}, 1 << 30);
    });
  }

  /**
   * The notify callback: settles finished calls, at most `TAKE_MAX` a turn of the event loop. The runtime
   * delivers callbacks queued from other threads in a loop (Node's thread-safe functions, up to 1,000 a
   * turn), and each settled call runs its caller's continuation (the import of a result, the next query)
   * before the turn ends: calls answered as they finished, all of them in one turn, kept timers from
   * running for hundreds of milliseconds under sixteen loops of queries. So with calls still in flight,
   * or more finished than one take, the rest waits for the next turn (`#later`), where the pool is armed
   * again. With nothing else in flight the pool is armed at once: one call's latency is koffi's.
   */
  drain(): void {
    if (this.#settle(false) < TAKE_MAX && this.#inFlight === 0) this.#settle(true);
    else this.#defer();
  }

  #deferred = false;
  #defer(): void {
    if (this.#deferred) return;
    this.#deferred = true;
    later(this.#rearm);
  }

  readonly #rearm = (): void => {
    this.#deferred = false;
    // A full take leaves the pool unarmed (more may be waiting): the next turn takes again.
    if (this.#settle(true) === TAKE_MAX) this.#defer();
  };

  /**
   * Takes up to `TAKE_MAX` finished calls and settles their promises; with `arm`, and fewer taken, the
   * next call to finish notifies. Returns how many were taken.
   */
  #settle(arm: boolean): number {
    const out = this.#out;
    const got = this.#lib.take(out, arm);
    for (let i = 0; i < got; i++) {
      const n = Number(out[i]!);
      const p = this.#pending[n];
      if (p === undefined) continue; // not ours: never happens while tags are our job numbers
      this.#pending[n] = undefined;
      const slab = this.#slabs[(n / SLAB_JOBS) | 0]!;
      const at = (n % SLAB_JOBS) * JOB_WORDS;
      const v = p.wide ? slab.u64[at + RET]! : slab.i32[(at + RET) * 2]!; // little-endian: the low word first
      this.#free.push(n);
      if (--this.#inFlight === 0) clearInterval(this.#alive);
      (p.resolve as (v: number | bigint) => void)(v);
    }
    return got;
  }

  stats(): WorkerStats {
    const s = (i: number): number => this.#lib.stat(i);
    return { threads: s(0), idle: s(1), started: s(2), calls: s(3), wakeups: s(4) };
  }
}
