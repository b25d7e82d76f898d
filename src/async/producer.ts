/**
 * The producer side of the async device stream interface: we push data to
 * a native consumer's `ArrowAsyncDeviceStreamHandler`.
 *
 * - The `ArrowAsyncProducer` is ours, filled (and set in the handler) before
 *   `on_schema` is called; we free it after calling the handler's `release`.
 * - `request(n)` adds credit and never calls `on_next_task` itself (the
 *   production loop runs on the event loop, after the callback returns);
 *   `n <= 0` ends the stream with `on_error(EINVAL)`.
 * - Each `on_next_task` gets a task whose `extract_data` moves the batch out
 *   (exported zero-copy as a CPU `ArrowDeviceArray`, or a `DeviceArray` moved
 *   on); a NULL out discards it and still cleans up.
 * - `cancel` stops production at the next batch and then calls `release`,
 *   with no `on_error`. An error in the source: `on_error`, then `release`. A
 *   non-zero return from `on_schema` or `on_next_task` stops production and
 *   releases without `on_error`.
 * - A native consumer's handler is called by the package's native pump
 *   where it loads (native/async-ring.c, "The pump"): a thread of its own
 *   calls the handler, one call at a time, and request, cancel,
 *   extract_data and the batches' releases are answered in C, so none of
 *   the consumer's threads ever waits for the JS thread; JS exports each
 *   batch when it hands the task over and is woken (a byte in a pipe) only
 *   when it waits for credit. Without it (`{ nativeRing: false }`, no
 *   prebuilt library, a wasm memory), the handler's callbacks are called
 *   with the memory's asynchronous call (a koffi worker thread), one at a
 *   time: a native consumer may call `request` from its own threads, which
 *   koffi queues to the JS thread, so the JS thread must never wait in a
 *   synchronous call into the consumer.
 * - Our own reader's handler is called directly in JS: its callbacks are
 *   ours and never wait on another thread (no koffi hop, no pump; see
 *   `readerCallbacks`), with the same order and rules.
 */
import { RecordBatch, Schema, type Struct } from 'apache-arrow';
import { DeviceType, Errno } from '../abi/constants.js';
import { exportSchema, releaseArrowSchema } from '../array/api.js';
import { exportDeviceArray } from '../device/api.js';
import { DeviceArray } from '../device/device-array.js';
import { ArrowDeviceError, toErrno } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { CValue, Memory, Ptr, Signature } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { defineCallback, HandleTable } from '../memory/registry.js';
import { access } from '../abi/accessors.js';
import { readField, readFieldBig, writeFieldBig, writeStruct } from '../memory/raw.js';
import { encodeMetadata, type Metadata } from '../schema/metadata.js';
import type { SchemaNode } from '../schema/node.js';
import type { ArrayView } from '../array/view.js';
import { callRelease } from '../memory/registry.js';
import { isNativeMemory } from '../memory/native.js';
import { closeSync } from '../platform/node.js';
import { Doorbell } from './doorbell.js';
import { asyncRing, asyncRingMissing, CMD_END, CMD_ERROR, CMD_RELEASE, CMD_SCHEMA, CMD_TASK, PUMP_STATE_LENGTH, PumpState, type PumpLib } from './ring.js';
import {
  CANCEL, DIRECT_YIELD_EVERY, EXTRACT_DATA, HANDLER_RELEASE, KeepAlive, ON_ERROR, ON_NEXT_TASK, ON_SCHEMA, REQUEST, Signal, yieldToEventLoop,
} from './common.js';
import { readerCallbacks } from './consumer.js';

/**
 * What a task carries: an arrow-js record batch, a struct `ArrayView` (any type of the spec), or a `DeviceArray`.
 *
 * @inline
 */
type Item = RecordBatch | DeviceArray | ArrayView;
/** What can be produced from: async or sync iterables of batches, a ReadableStream, an arrow-js async reader. */
export type AsyncBatchSource = AsyncIterable<Item> | Iterable<Item> | ReadableStream<Item>;

/** Options of `produceAsyncDeviceStream`. */
export interface AsyncProducerOptions {
  /** The memory the consumer's handler and our structs live in; the process's own (native) by default. */
  memory?: Memory;
  /** The stream's schema (an arrow-js `Schema` or a `SchemaNode`); else the first item's (a source with no item then needs it). */
  schema?: Schema | SchemaNode;
  /** `ArrowAsyncProducer.additional_metadata`, valid for the producer's lifetime. */
  additionalMetadata?: Metadata;
  /** Per-task metadata for `on_next_task`. */
  taskMetadata?: (batch: Item, index: number) => Metadata | null;
  /** The device type the producer announces (default CPU; DeviceArray items must match it). */
  deviceType?: number;
  /**
   * Use the prebuilt native pump for a native consumer where it loads (the
   * default): the consumer's calls are answered in C, never waiting for the
   * JS thread. `false`: JS callbacks, a koffi hop per call of the consumer.
   * See `AsyncProduceResult.nativeRing`.
   */
  nativeRing?: boolean;
}

/** How a `produceAsyncDeviceStream` went, once the consumer has released its handler. */
export interface AsyncProduceResult {
  /** Tasks handed to the consumer. */
  readonly batches: number;
  /** Whether the consumer cancelled. */
  readonly cancelled: boolean;
  /** How the stream ended. */
  readonly end: 'complete' | 'cancelled' | 'error' | 'consumer-stopped';
  /** The error reported through on_error, or the consumer's non-zero code. */
  readonly error?: ArrowDeviceError;
  /**
   * Whether the native pump served the consumer (src/async/ring.ts; false
   * for our own reader, for `{ nativeRing: false }`, and where the library
   * is not available: `asyncRingMissing` says why).
   */
  readonly nativeRing: boolean;
  /**
   * Why `nativeRing` is false (undefined when it is true): our own reader's
   * handler, turned off, a wasm memory, or the library's own reason (see
   * `AsyncDeviceStreamReader.nativeRingMissing`).
   */
  readonly nativeRingMissing: string | undefined;
  /** Wake-ups of the JS thread the native pump rang over the stream (0 without it): for tests and benchmarks. */
  readonly doorbells: number;
}

interface ProducerState {
  credit: number;
  cancelled: boolean;
  badRequest: number | null;
  /** A task's extract_data failed (the spec: only on_error may follow), the first such error. */
  extractError: unknown;
  changed: Signal;
  /** Tasks handed out and not extracted yet. */
  outstanding: number;
  /** Set once the handler is released: frees the ArrowAsyncProducer when nothing can use it any more. */
  retire: (() => void) | undefined;
}

/**
 * How long the `ArrowAsyncProducer` outlives the handler's release and its
 * last task's extraction. The spec lets a producer free it after `release`,
 * but Arrow C++ 26's consumer still calls `request` from its thread pool
 * after extracting a task, even after the release: freeing at once crashed
 * the process (found by the arrow-cpp peer, `--via async`, zero-length
 * batches). After the release our `request` and `cancel` are no-ops; the
 * memory is freed after this grace period.
 */
const PRODUCER_GRACE_MS = 1000;

interface TaskRecord {
  item: Item;
  deviceType: number;
  state: ProducerState;
  /** Our ArrowAsyncTask struct, freed when the task is extracted (see produceAsyncDeviceStream). */
  struct: Ptr;
}

const producers = new HandleTable<ProducerState>();
const tasks = new HandleTable<TaskRecord>();

function stateOf(mem: Memory, p: bigint): ProducerState | undefined {
  return producers.get(readField(mem, access(mem.target).ArrowAsyncProducer.private_data, p));
}

// request and cancel may come from the consumer's threads (queued by koffi to the JS thread), or
// synchronously from inside on_schema / on_next_task: both only update state and wake the loop.
// Defined at load: see CallbackCache.
const requestCb = defineCallback('async.request', REQUEST, (mem, p, n) => {
  const s = stateOf(mem, p as bigint);
  if (!s || s.cancelled) return; // after cancel: a NOP, but allowed
  const k = BigInt(n as bigint);
  if (k <= 0n) s.badRequest = Number(k);
  else s.credit += k > 1_000_000_000n ? 1_000_000_000 : Number(k);
  s.changed.wake();
});

const cancelCb = defineCallback('async.cancel', CANCEL, (mem, p) => {
  const s = stateOf(mem, p as bigint);
  if (!s || s.cancelled) return; // idempotent
  s.cancelled = true;
  s.changed.wake();
});

const extractCb = defineCallback('async.extract_data', EXTRACT_DATA, (mem, t, out) => {
  const rec = tasks.take(readField(mem, access(mem.target).ArrowAsyncTask.private_data, t as bigint));
  if (!rec) return Errno.EINVAL; // extracted twice, or not ours
  liveCounters.liveExports--;
  mem.free(rec.struct);
  if (--rec.state.outstanding === 0) rec.state.retire?.();
  if ((out as bigint) === 0n) {
    if (rec.item instanceof DeviceArray) rec.item.release();
    return 0; // the consumer does not want the data: cleaned up
  }
  try {
    exportDeviceArray(rec.item, { memory: mem, into: out as bigint });
    return 0;
  } catch (e) {
    // CDeviceDataInterface.rst, extract_data: a non-zero return "should be followed only by the producer
    // calling the on_error callback": production stops at its next step and reports it.
    rec.state.extractError ??= e;
    rec.state.changed.wake();
    return toErrno(e).errno;
  }
});

function isReadableStream(s: AsyncBatchSource): s is ReadableStream<Item> {
  return typeof (s as { getReader?: unknown }).getReader === 'function';
}

/** Iterates any of the sources; `return()` ends it early. */
function iterate(source: AsyncBatchSource): AsyncIterator<Item> {
  if (isReadableStream(source) && !(Symbol.asyncIterator in source)) {
    // Node's ReadableStream type is async-iterable, so without the DOM lib TypeScript
    // narrows `source` to never here; a browser's stream may still lack the iterator.
    const reader = (source as ReadableStream<Item>).getReader();
    return {
      next: async () => {
        const r = await reader.read();
        return r.done ? { done: true, value: undefined } : { done: false, value: r.value };
      },
      return: async () => {
        await reader.cancel();
        return { done: true, value: undefined };
      },
    };
  }
  if (Symbol.asyncIterator in source) return (source as AsyncIterable<Item>)[Symbol.asyncIterator]();
  const it = (source as Iterable<Item>)[Symbol.iterator]();
  return {
    next: async () => it.next(),
    return: async () => it.return?.() ?? { done: true, value: undefined },
  };
}

function schemaOf(item: Item): Schema | SchemaNode {
  if (item instanceof RecordBatch) return new Schema((item.data.type as Struct).children, item.schema.metadata);
  if (item instanceof DeviceArray) throw new ArrowDeviceError('invalid', 'options.schema', 'a stream of DeviceArray needs options.schema');
  return item.schema;
}

/** What stopped production, other than the end of the source. */
type Stop =
  | { readonly end: 'cancelled' }
  | { readonly end: 'bad-request'; readonly n: number }
  | { readonly end: 'consumer-stopped'; readonly rc: number }
  | { readonly end: 'extract-failed'; readonly error: unknown };

/**
 * How production reaches the handler: JS calls (`JsChannel`: our reader's
 * callbacks directly, a foreign handler's on a koffi worker) or the native
 * pump (`PumpChannel`). The production loop is the same for both.
 */
interface Channel {
  readonly nativeRing: boolean;
  /** on_schema with the exported schema (the consumer moves it, or we release it after); its return. */
  schema(s: Ptr): Promise<number>;
  /** Waits for a credit and takes it; or what stopped production instead. */
  credit(): Promise<Stop | null>;
  /** What stopped production meanwhile, if anything (checked after the source's next item). */
  stopped(): Stop | null;
  /** Hands a task over; the consumer's non-zero return when known now (the pump learns it later: `credit`). */
  task(item: Item, metadata: Uint8Array | null): Promise<number>;
  /** on_next_task(NULL): the end of the stream; the consumer's return when known now. */
  end(): Promise<number>;
  error(errno: number, message: string): Promise<void>;
  /** Calls the handler's release (last); what is ours is cleaned up as the consumer gives it back. */
  release(): Promise<void>;
  /** Tasks handed to the consumer (after `release`: all of them). */
  batches(): number;
  /** Wake-ups of the JS thread (the pump's doorbells). */
  doorbells(): number;
}

/** The handler called from JS: our reader's callbacks directly, a foreign handler's with the async form. */
class JsChannel implements Channel {
  readonly nativeRing = false;
  private readonly state: ProducerState = {
    credit: 0, cancelled: false, badRequest: null, extractError: undefined, changed: new Signal(), outstanding: 0, retire: undefined,
  };
  private readonly id: number;
  private readonly producer: Ptr;
  private readonly mdPtr: Ptr;
  private readonly direct: boolean;
  private readonly fns: Record<'on_schema' | 'on_next_task' | 'on_error' | 'release', Ptr>;
  private handed = 0;

  constructor(
    private readonly mem: Memory,
    private readonly handler: Ptr,
    ours: ReturnType<typeof readerCallbacks>,
    private readonly deviceType: number,
    md: Uint8Array | null,
  ) {
    const H = access(mem.target).ArrowAsyncDeviceStreamHandler;
    const P = access(mem.target).ArrowAsyncProducer;
    this.direct = ours !== null;
    this.fns = {
      on_schema: ours?.on_schema ?? readFieldBig(mem, H.on_schema, handler),
      on_next_task: ours?.on_next_task ?? readFieldBig(mem, H.on_next_task, handler),
      on_error: ours?.on_error ?? readFieldBig(mem, H.on_error, handler),
      release: ours?.release ?? readFieldBig(mem, H.release, handler),
    };
    this.id = producers.add(this.state);
    this.mdPtr = md ? mem.alloc(md.length) : 0n;
    if (md) mem.copyIn(this.mdPtr, md);
    const producer = (this.producer = mem.alloc(P.$size));
    const id = this.id;
    const mdPtr = this.mdPtr;
    writeStruct(mem, producer, P.$size, (dv, at) => {
      P.device_type.set(dv, at, deviceType);
      P.request.setBig(dv, at, requestCb(mem));
      P.cancel.setBig(dv, at, cancelCb(mem));
      P.additional_metadata.setBig(dv, at, mdPtr);
      P.private_data.set(dv, at, id);
    });
    // The producer member must be populated before on_schema.
    writeFieldBig(mem, H.producer, handler, producer);
  }

  private call(f: Ptr, sig: Signature, ...args: CValue[]): CValue | undefined | Promise<CValue | undefined> {
    return this.direct ? this.mem.call(f, sig, ...args) : this.mem.callAsync(f, sig, ...args);
  }

  async schema(s: Ptr): Promise<number> {
    return (await this.call(this.fns.on_schema, ON_SCHEMA, this.handler, s)) as number;
  }

  stopped(): Stop | null {
    const s = this.state;
    if (s.cancelled) return { end: 'cancelled' };
    if (s.badRequest !== null) return { end: 'bad-request', n: s.badRequest };
    if (s.extractError !== undefined) return { end: 'extract-failed', error: s.extractError };
    return null;
  }

  async credit(): Promise<Stop | null> {
    const s = this.state;
    // A direct stream never leaves the microtask queue by itself: let timers and I/O in now and then.
    if (this.direct && yieldToEventLoop && this.handed > 0 && this.handed % DIRECT_YIELD_EVERY === 0) await yieldToEventLoop();
    while (s.credit === 0 && this.stopped() === null) await s.changed.wait();
    const stop = this.stopped();
    if (stop === null) s.credit--;
    return stop;
  }

  async task(item: Item, metadata: Uint8Array | null): Promise<number> {
    const mem = this.mem;
    const T = access(mem.target).ArrowAsyncTask;
    const task = mem.alloc(T.$size);
    const taskId = tasks.add({ item, deviceType: this.deviceType, state: this.state, struct: task });
    this.state.outstanding++;
    liveCounters.liveExports++;
    writeStruct(mem, task, T.$size, (dv, at) => {
      T.extract_data.setBig(dv, at, extractCb(mem));
      T.private_data.set(dv, at, taskId);
    });
    const tmdPtr = metadata ? mem.alloc(metadata.length) : 0n;
    if (metadata) mem.copyIn(tmdPtr, metadata);
    try {
      // The spec makes the task valid only during this call (the consumer moves its contents out),
      // but Arrow C++'s consumer keeps the pointer and extracts later: so the struct lives until its
      // extract_data runs, which frees it.
      return (await this.call(this.fns.on_next_task, ON_NEXT_TASK, this.handler, task, tmdPtr)) as number;
    } finally {
      if (tmdPtr) mem.free(tmdPtr);
      this.handed++;
    }
  }

  async end(): Promise<number> {
    return (await this.call(this.fns.on_next_task, ON_NEXT_TASK, this.handler, 0n, 0n)) as number;
  }

  async error(errno: number, message: string): Promise<void> {
    const msg = new TextEncoder().encode(message + '\0');
    const m = this.mem.alloc(msg.length);
    this.mem.copyIn(m, msg);
    try {
      await this.call(this.fns.on_error, ON_ERROR, this.handler, errno, m, 0n);
    } finally {
      this.mem.free(m);
    }
  }

  async release(): Promise<void> {
    try {
      await this.call(this.fns.release, HANDLER_RELEASE, this.handler);
    } finally {
      // Ours to clean up after the handler's release (the spec's ArrowAsyncProducer lifetime):
      // request and cancel become no-ops now; the memory goes once no task can lead to a call
      // (see PRODUCER_GRACE_MS).
      const { mem, producer, mdPtr, state } = this;
      producers.take(this.id);
      state.retire = () => {
        state.retire = undefined;
        setTimeout(() => {
          mem.free(producer);
          if (mdPtr) mem.free(mdPtr);
        }, PRODUCER_GRACE_MS).unref();
      };
      if (state.outstanding === 0) state.retire();
    }
  }

  batches(): number {
    return this.handed;
  }

  doorbells(): number {
    return 0;
  }
}

/** How many given-back arrays one `takeFreed` call moves. */
const FREED_BATCH = 64;

/**
 * The handler called by the native pump (native/async-ring.c, "The pump"):
 * JS queues each call with one plain FFI call and waits only for credit,
 * woken by a byte in the pump's pipe. The arrays the consumer releases come
 * back to JS, which runs its own release on them, here on its thread.
 */
class PumpChannel implements Channel {
  readonly nativeRing = true;
  private readonly st = new BigInt64Array(PUMP_STATE_LENGTH);
  /** The watchdog's reads of the state (src/async/doorbell.ts), apart from production's. */
  private readonly watched = new BigInt64Array(PUMP_STATE_LENGTH);
  private bell!: Doorbell;
  private rung = false;
  private waiter: (() => void) | null = null;
  /** Where the exported batch is written before the pump moves it into a task. */
  private readonly out: Ptr;
  /** Where given-back arrays are taken into. */
  private readonly freedBuf: Ptr;
  private lingering = false;
  private freed = false;

  /**
   * A channel through the pump, or why there is none (JS callbacks then):
   * the library is missing, or the pump cannot start.
   */
  static open(mem: Memory, handler: Ptr, deviceType: number, md: Uint8Array | null): PumpChannel | string {
    const lib = asyncRing()?.pump;
    if (!lib) return asyncRingMissing ?? 'no native pump';
    const pump = lib.pumpNew(handler, deviceType, md);
    if (pump === 0n) return 'pump_new failed (out of memory, pipes or threads)';
    const fd = lib.bellFd(pump);
    const channel = new PumpChannel(mem, lib, pump);
    try {
      channel.watch(fd);
    } catch (e) {
      // The pump cannot wake us. Nothing was queued; it ends with its release.
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
      const message = (e as Error).message;
      lib.push(pump, CMD_ERROR, Errno.EIO, 0n, null, new TextEncoder().encode(message + '\0'));
      lib.push(pump, CMD_RELEASE, 0, 0n, null, null);
      mem.free(channel.out);
      mem.free(channel.freedBuf);
      throw new ArrowDeviceError('io', 'async producer', message, { errno: Errno.EIO });
    }
    return channel;
  }

  private constructor(
    private readonly mem: Memory,
    private readonly lib: PumpLib,
    private readonly pump: Ptr,
  ) {
    this.out = mem.alloc(access(mem.target).ArrowDeviceArray.$size);
    this.freedBuf = mem.alloc(lib.arraySize * FREED_BATCH);
  }

  /**
   * The doorbell owns (and closes) the read end; it does not keep the process alive (KeepAlive
   * does while the stream runs; after it, the arrays the consumer still holds must not keep a
   * process alive: see `release`).
   */
  private watch(fd: number): void {
    const { lib, pump, watched } = this;
    this.bell = new Doorbell({
      fd,
      what: 'the native pump',
      onRing: () => this.onBell(),
      rung: () => {
        lib.state(pump, 0, 0, watched);
        return Number(watched[PumpState.Doorbells]);
      },
    });
  }

  private onBell(): void {
    this.rung = true;
    const w = this.waiter;
    this.waiter = null;
    w?.();
    if (this.lingering) this.reap();
  }

  private async rang(): Promise<void> {
    if (!this.rung) await new Promise<void>((r) => (this.waiter = r));
    this.rung = false;
  }

  /** Runs JS's release on every array the consumer gave back (bitwise moved into our buffer). */
  private drainFreed(): void {
    const { lib, mem } = this;
    const release = access(mem.target).ArrowArray.release;
    for (;;) {
      const n = lib.takeFreed(this.pump, this.freedBuf, FREED_BATCH);
      for (let i = 0; i < n; i++) {
        const a = Number(this.freedBuf) + i * lib.arraySize;
        const fn = readFieldBig(mem, release, a);
        if (fn !== 0n) callRelease(mem, Number(fn), a);
      }
      if (n < FREED_BATCH) return;
    }
  }

  /** Reads the state (taking `take` credits if there), arming the doorbell at `arm`. */
  private read(take: number, arm: number): boolean {
    return this.lib.state(this.pump, take, arm, this.st);
  }

  /** Waits until `done()` holds for a fresh state, arming the doorbell (for anything) before each wait. */
  private async until(done: () => boolean): Promise<void> {
    for (;;) {
      this.drainFreed();
      this.read(0, 2);
      // Still armed when done: a change may ring once more, and the next wait then only looks again.
      if (done()) return;
      if (this.st[PumpState.Freed]! > 0n) continue;
      await this.rang();
    }
  }

  stopped(): Stop | null {
    this.read(0, 0);
    return this.stopOf();
  }

  /** What stopped production, by the state read last. */
  private stopOf(): Stop | null {
    const st = this.st;
    if (st[PumpState.Cancelled] !== 0n) return { end: 'cancelled' };
    if (st[PumpState.ConsumerRc] !== 0n) return { end: 'consumer-stopped', rc: Number(st[PumpState.ConsumerRc]) };
    const bad = st[PumpState.BadRequest]!;
    if (bad !== 0n) return { end: 'bad-request', n: bad === -(1n << 63n) ? 0 : Number(bad) };
    return null;
  }

  async schema(s: Ptr): Promise<number> {
    this.push(CMD_SCHEMA, 0, s, null, null);
    await this.until(() => this.st[PumpState.Handled]! >= 1n);
    return Number(this.st[PumpState.ConsumerRc]);
  }

  async credit(): Promise<Stop | null> {
    for (;;) {
      this.drainFreed();
      const took = this.read(1, 0);
      const stop = this.stopOf();
      if (stop !== null) return stop;
      if (took) return null;
      this.read(0, 1); // about to wait for credit: arm, and look once more (a change may have come between)
      if (this.st[PumpState.Credit]! > 0n || this.stopOf() !== null) continue;
      await this.rang();
    }
  }

  private push(kind: number, code: number, ptr: Ptr, metadata: Uint8Array | null, message: Uint8Array | null): void {
    if (this.lib.push(this.pump, kind, code, ptr, metadata, message) !== 0) {
      throw new ArrowDeviceError('io', 'async producer', 'out of memory queuing a call of the handler', { errno: Errno.ENOMEM });
    }
  }

  async task(item: Item, metadata: Uint8Array | null): Promise<number> {
    const { lib, mem, out } = this;
    // Exported now (the JS-callback channel exports in extract_data): extract_data runs in C.
    exportDeviceArray(item, { memory: mem, into: out });
    const task = lib.task(this.pump, out);
    if (task === 0n) {
      const release = readFieldBig(mem, access(mem.target).ArrowArray.release, out);
      if (release !== 0n) callRelease(mem, Number(release), Number(out));
      throw new ArrowDeviceError('io', 'async producer', 'out of memory making a task', { errno: Errno.ENOMEM });
    }
    try {
      this.push(CMD_TASK, 0, task, metadata, null);
    } catch (e) {
      lib.dropTask(task); // its array comes back through takeFreed
      this.drainFreed();
      throw e;
    }
    return 0;
  }

  async end(): Promise<number> {
    this.push(CMD_END, 0, 0n, null, null);
    return 0;
  }

  async error(errno: number, message: string): Promise<void> {
    this.push(CMD_ERROR, errno, 0n, null, new TextEncoder().encode(message + '\0'));
  }

  async release(): Promise<void> {
    this.push(CMD_RELEASE, 0, 0n, null, null);
    await this.until(() => this.st[PumpState.Released] !== 0n);
    // The consumer may hold tasks and arrays long after the stream (a table built from it): the pump
    // lives until they come back, woken by them, without keeping the process alive.
    this.lingering = true;
    this.bell.release();
    this.reap();
  }

  /** After the release: releases what came back; once nothing is out, frees the pump after the grace period. */
  private reap(): void {
    if (this.freed) return;
    this.drainFreed();
    this.read(0, 2);
    if (this.st[PumpState.Tasks] !== 0n || this.st[PumpState.Lent] !== 0n || this.st[PumpState.Freed] !== 0n) {
      if (this.st[PumpState.Freed] !== 0n) queueMicrotask(() => this.reap());
      return;
    }
    this.freed = true;
    this.read(0, 0);
    this.bell.close(); // closes the pipe's read end; pump_free closes the write end
    const { mem, lib, pump, out, freedBuf } = this;
    mem.free(out);
    mem.free(freedBuf);
    // Arrow C++'s consumer calls request after the release (see PRODUCER_GRACE_MS): the pump counts
    // and ignores such calls, and its memory goes after the grace period.
    setTimeout(() => lib.free(pump), PRODUCER_GRACE_MS).unref();
  }

  batches(): number {
    return Number(this.st[PumpState.Delivered]);
  }

  doorbells(): number {
    return Number(this.st[PumpState.Doorbells]);
  }
}

/**
 * Produces `source` into the native consumer's handler at `handler` and
 * resolves when the handler has been released (the stream is over).
 *
 * @example
 * const handler = nativeLib.make_handler();
 * const result = await produceAsyncDeviceStream(table.batches, handler);
 * console.log(result.end, result.batches);
 */
export async function produceAsyncDeviceStream(
  source: AsyncBatchSource,
  handler: Ptr,
  opts: AsyncProducerOptions = {},
): Promise<AsyncProduceResult> {
  const mem = opts.memory ?? nativeMemory();
  if (handler === 0n) throw new ArrowDeviceError('invalid', 'handler', 'NULL pointer');
  const H = access(mem.target).ArrowAsyncDeviceStreamHandler;
  for (const name of ['on_schema', 'on_next_task', 'on_error', 'release'] as const) {
    if (readFieldBig(mem, H[name], handler) === 0n) {
      throw new ArrowDeviceError('invalid', `handler.${name}`, 'NULL: the handler is released or incomplete');
    }
  }
  // Our own reader's handler: our JS callbacks run directly (they never block, and request and cancel,
  // ours too, only update state: no reentrancy), also when its handler is the native ring (which is for
  // producers on other threads). A foreign handler: the native pump, or JS callbacks on koffi workers.
  const ours = readerCallbacks(mem, handler);
  const deviceType = opts.deviceType ?? DeviceType.CPU;
  const md = encodeMetadata(opts.additionalMetadata ?? null);
  // Before anything is set up: a source that is not one throws here, leaving nothing running.
  const it = iterate(source);
  let pumped: PumpChannel | string;
  if (ours !== null) pumped = "our own reader's handler (its callbacks are called directly)";
  else if (opts.nativeRing === false) pumped = 'turned off ({ nativeRing: false })';
  else if (!isNativeMemory(mem)) pumped = "not the native memory (a wasm module's consumer is called on the JS thread)";
  else pumped = PumpChannel.open(mem, handler, deviceType, md);
  const channel: Channel = typeof pumped === 'string' ? new JsChannel(mem, handler, ours, deviceType, md) : pumped;
  const nativeRingMissing = typeof pumped === 'string' ? pumped : undefined;
  const keepAlive = new KeepAlive();
  let end: AsyncProduceResult['end'] = 'complete';
  let error: ArrowDeviceError | undefined;
  let cancelled = false;

  const reportError = async (e: unknown): Promise<void> => {
    const { errno, message } = toErrno(e);
    error = e instanceof ArrowDeviceError ? e : new ArrowDeviceError('io', 'source', message, { errno });
    end = 'error';
    await channel.error(errno, message);
  };
  /** Ends production for `stop`: a cancel ends without on_error (the spec), a bad request with it. */
  const stopFor = async (stop: Stop): Promise<void> => {
    if (stop.end === 'cancelled') {
      end = 'cancelled';
      cancelled = true;
    } else if (stop.end === 'bad-request') {
      await reportError(new ArrowDeviceError('invalid', 'request', `n must be > 0, got ${stop.n}`));
    } else if (stop.end === 'extract-failed') {
      await reportError(stop.error);
    } else {
      end = 'consumer-stopped';
      error = new ArrowDeviceError('producer', 'on_next_task', `the consumer returned ${stop.rc}`, { errno: stop.rc });
    }
  };
  /** Production, up to the handler's release. */
  const run = async (): Promise<void> => {
    let first: IteratorResult<Item> | undefined;
    let schema = opts.schema;
    if (!schema) {
      try {
        first = await it.next();
      } catch (e) {
        await reportError(e);
        return;
      }
      if (first.done) {
        await reportError(new ArrowDeviceError('invalid', 'source', 'the source has no batch to take the schema from: pass options.schema'));
        return;
      }
      schema = schemaOf(first.value);
    }
    const s = exportSchema(schema, { memory: mem });
    let rc: number;
    try {
      rc = await channel.schema(s);
    } finally {
      // The consumer moves the schema out; release it if it did not.
      releaseArrowSchema(s, { memory: mem });
      mem.free(s);
    }
    if (rc !== 0) {
      end = 'consumer-stopped';
      error = new ArrowDeviceError('producer', 'on_schema', `the consumer returned ${rc}`, { errno: rc });
      return;
    }
    for (let index = 0; ; index++) {
      const stop = await channel.credit();
      if (stop !== null) {
        await stopFor(stop);
        break;
      }
      let next: IteratorResult<Item>;
      try {
        next = first ?? (await it.next());
        first = undefined;
      } catch (e) {
        await reportError(e);
        break;
      }
      // A cancel while the source worked: nothing more goes out (a successful cancel: no on_error).
      if (channel.stopped()?.end === 'cancelled') {
        await stopFor({ end: 'cancelled' });
        break;
      }
      if (next.done) {
        rc = await channel.end();
        if (rc !== 0) await stopFor({ end: 'consumer-stopped', rc });
        break;
      }
      const item = next.value;
      if (item instanceof DeviceArray && item.deviceType !== deviceType) {
        await reportError(new ArrowDeviceError('invalid', `batch ${index}`, `a ${item.deviceTypeName} array in a stream of device type ${deviceType}`));
        break;
      }
      try {
        rc = await channel.task(item, encodeMetadata(opts.taskMetadata?.(item, index) ?? null));
      } catch (e) {
        await reportError(e);
        break;
      }
      if (rc !== 0) {
        await stopFor({ end: 'consumer-stopped', rc });
        break;
      }
    }
    if (end !== 'complete') await it.return?.();
  };

  try {
    await run();
  } finally {
    try {
      await channel.release();
    } finally {
      keepAlive.stop();
    }
  }
  // The pump hands calls over ahead of the consumer: a non-zero return it met after JS had queued the
  // end is known now (the pump then gave the consumer nothing more but the release).
  if (end === 'complete') {
    const late = channel.stopped();
    if (late?.end === 'consumer-stopped') await stopFor(late);
    // A task extracted after the end went out failed: too late for on_error (the handler is released),
    // but the result says so.
    if (late?.end === 'extract-failed') {
      end = 'error';
      const { errno, message } = toErrno(late.error);
      error = late.error instanceof ArrowDeviceError ? late.error : new ArrowDeviceError('io', 'extract_data', message, { errno });
    }
  }
  return { batches: channel.batches(), cancelled, end, error, nativeRing: channel.nativeRing, nativeRingMissing, doorbells: channel.doorbells() };
}
