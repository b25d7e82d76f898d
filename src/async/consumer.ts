/**
 * The consumer side of the async device stream interface: a native
 * producer pushes data to a handler whose callbacks are ours.
 *
 * - Back-pressure: `request(n)` is issued as the reader consumes, so at most
 *   `queueSize` batches are ever requested ahead of the reader; a fast
 *   producer cannot grow memory without bound.
 * - Tasks are moved out of `on_next_task` (a task is only valid during that
 *   call) and extracted when the reader pulls them, so the producer is not
 *   held up by the extraction.
 * - Leaving the loop early (`break`, `return()`, a ReadableStream's
 *   `cancel()`) calls the producer's `cancel`; tasks that still arrive, and
 *   those queued, are extracted with a NULL out so the producer can clean up.
 * - `on_error` makes the iteration reject with an `AsyncStreamError`
 *   carrying the code, message and metadata, copied at once (they are valid
 *   only during the call). Arrow C++ ends a successful cancel with
 *   `on_error(EINVAL)` where the spec says it must not call `on_error`; an
 *   error after our own cancel is therefore recorded but not thrown.
 * - Every callback may come from a producer's thread; koffi runs it on the
 *   JS thread, one at a time, and the handler callbacks are serialized as the
 *   spec requires. The event loop is kept alive until the producer calls the
 *   handler's `release`.
 * - Where the package's prebuilt native handler loads (src/async/ring.ts),
 *   the handler is that instead: the producer's calls (but on_schema) are
 *   queued in a ring on its own thread without waiting for JS, and JS takes
 *   them in bursts, woken once per burst, so a producer ahead of the reader
 *   costs no hop per batch. What the reader does with each call is the same.
 */
import type { Schema } from 'apache-arrow';
import { errnoName, Errno } from '../abi/constants.js';
import { arrowJsBuilds } from '../array/arrowjs-builds.js';
import { PlanOf, readSchemaPtr } from '../array/importer.js';
import { importDeviceArrayLater, importDeviceWith, settleDeviceWith, type DeviceImportOptions } from '../device/import.js';
import { readsAsync } from '../device/backend.js';
import type { ImportedRecordBatch } from '../array/build.js';
import type { ImportRead } from '../array/record.js';
import { viewOf, type ArrayView } from '../array/view.js';
import { DeviceArray } from '../device/device-array.js';
import { ArrowDeviceError, toErrno } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { CValue, Memory, Ptr } from '../memory/memory.js';
import { isNativeMemory, nativeMemory } from '../memory/native.js';
import { defineCallback, HandleTable } from '../memory/registry.js';
import { access } from '../abi/accessors.js';
import { rawOf, readField, readFieldBig, stage, staged, writeStruct } from '../memory/raw.js';
import { planOfNode } from '../array/plan.js';
import { ownersOf, releaseObject } from '../array/owned.js';
import { readMetadata, type Metadata } from '../schema/metadata.js';
import type { SchemaNode } from '../schema/node.js';
import type { StreamTarget } from '../stream/import.js';
import { CANCEL, EXTRACT_DATA, HANDLER_RELEASE, KeepAlive, ON_ERROR, ON_NEXT_TASK, ON_SCHEMA, REQUEST, Signal } from './common.js';
import { closeSync } from '../platform/node.js';
import { Doorbell, type DoorbellMechanism } from './doorbell.js';
import { asyncRing, asyncRingMissing, EV_END, EV_ERROR, EV_RELEASE, EV_TASK, RING_EVENT_BYTES, type RingLib } from './ring.js';

/**
 * An error the producer reported through `on_error`: its errno code (`errno`, `code`), its message and
 * its metadata, copied out at once (the producer may free them when `on_error` returns).
 *
 * @example
 * try {
 *   for await (const batch of reader) use(batch);
 * } catch (e) {
 *   if (e instanceof AsyncStreamError) console.log(e.code, e.detail, e.metadata?.get('reason'));
 * }
 */
export class AsyncStreamError extends ArrowDeviceError {
  /** `'AsyncStreamError'`. */
  override name = 'AsyncStreamError';
  /** Made by the reader from what `on_error` passed: the code, the message (null: none), the metadata. */
  constructor(
    errno: number,
    message: string | null,
    /** The error metadata the producer passed, decoded (null: none). */
    readonly metadata: Metadata | null,
  ) {
    super('producer', 'async stream', `${errnoName(errno)}: ${message ?? '(no message)'}`, { errno });
  }
}

/** What an async reader yields: record batches (ArrayViews with `view: true`), or device arrays the CPU cannot read. */
export type AsyncItem = ImportedRecordBatch | ArrayView | DeviceArray;

/** A batch and the metadata its producer sent with it (what `reader.next()` and `reader.tasks()` give). */
export interface AsyncTaskResult<T extends AsyncItem | object = ImportedRecordBatch | DeviceArray> {
  /** The batch, extracted from the producer's `ArrowAsyncTask`. */
  readonly data: T;
  /** The metadata of `on_next_task`, decoded (null: none). */
  readonly metadata: Metadata | null;
}

/** Options of `createAsyncDeviceStreamReader`: those of a device import, and the reader's own. */
export interface AsyncConsumerOptions extends DeviceImportOptions {
  /** Batches requested ahead of the reader at most (the queue bound). Default 4. */
  queueSize?: number;
  /**
   * Keep every batch read: the reader then never releases a batch it
   * handed out. By default it keeps one alive at a time (see `next()`).
   */
  keep?: boolean;
  /** Yield `ArrayView`s (every type of the spec) instead of record batches. */
  view?: boolean;
  /**
   * Use the prebuilt native handler where it loads (the default): a native
   * producer's calls are queued on its thread and taken in bursts, instead
   * of each waiting for the JS thread. `false`: JS callbacks, one hop per
   * call. See `AsyncDeviceStreamReader.nativeRing`.
   */
  nativeRing?: boolean;
  /**
   * @internal Another target's items (src/stream/import.ts `StreamTarget`: flechette's, src/flechette/async.ts);
   * not with `view`. Without one, arrow-js record batches (through src/array/arrowjs-builds.ts), or `ArrayView`s.
   */
  target?: StreamTarget;
}

interface QueuedTask {
  /** The ArrowAsyncTask's bytes, moved out of on_next_task. */
  bytes: Uint8Array;
  metadata: Metadata | null;
}

/** Any reader, whatever it yields. */
type AnyReader = AsyncDeviceStreamReader<object, unknown>;

const readers = new HandleTable<AnyReader>();

function readerOf(mem: Memory, handler: Ptr): AnyReader | undefined {
  const id = readField(mem, access(mem.target).ArrowAsyncDeviceStreamHandler.private_data, handler);
  return readers.get(id);
}

/** A callback must never throw into the producer: an exception becomes an errno (or nothing, for void). */
function guard(fn: () => CValue | void, fallback: number | undefined): CValue | void {
  try {
    return fn();
  } catch (e) {
    return fallback === undefined ? undefined : toErrno(e).errno;
  }
}

/** The four handler callbacks, shared by every reader (defined at load: see CallbackCache). */
const onSchemaCb = defineCallback('async.on_schema', ON_SCHEMA, (mem, h, s) =>
  guard(() => readerOf(mem, h as bigint)?.onSchema(s as bigint) ?? Errno.EINVAL, Errno.EIO),
);
const onNextTaskCb = defineCallback('async.on_next_task', ON_NEXT_TASK, (mem, h, t, md) =>
  guard(() => readerOf(mem, h as bigint)?.onNextTask(t as bigint, md as bigint) ?? Errno.EINVAL, Errno.EIO),
);
const onErrorCb = defineCallback('async.on_error', ON_ERROR, (mem, h, code, msg, md) =>
  guard(() => readerOf(mem, h as bigint)?.onError(code as number, msg as bigint, md as bigint), undefined),
);
const releaseCb = defineCallback('async.handler_release', HANDLER_RELEASE, (mem, h) =>
  guard(() => readerOf(mem, h as bigint)?.onRelease(), undefined),
);

/** The largest queue a native ring serves (its slots are allocated up front). */
const MAX_RING_QUEUE = 1 << 16;

/** The readers whose handler is a native ring, by the ring's address (see `readerCallbacks`). */
const ringReaders = new Map<Ptr, AnyReader>();

/** Our four JS handler callbacks on `mem`, for a producer of ours to call directly (see `readerCallbacks`). */
export interface HandlerCallbacks {
  readonly on_schema: Ptr;
  readonly on_next_task: Ptr;
  readonly on_error: Ptr;
  readonly release: Ptr;
}

/**
 * When `handler` is the handler of one of our live readers on `mem`, our
 * four JS callbacks, which `mem.call` runs directly in JS: our producer then
 * calls them on the JS thread, with no koffi hop and, for a reader whose
 * handler is a native ring, without going through the ring. Null for any
 * other handler.
 */
export function readerCallbacks(mem: Memory, handler: Ptr): HandlerCallbacks | null {
  const ours: HandlerCallbacks = { on_schema: onSchemaCb(mem), on_next_task: onNextTaskCb(mem), on_error: onErrorCb(mem), release: releaseCb(mem) };
  const ring = ringReaders.get(handler);
  if (ring !== undefined) return ring.memory === mem && readerOf(mem, handler) === ring ? ours : null;
  const H = access(mem.target).ArrowAsyncDeviceStreamHandler;
  const at = (f: 'on_schema' | 'on_next_task' | 'on_error' | 'release'): Ptr => readFieldBig(mem, H[f], handler);
  const same =
    at('on_schema') === ours.on_schema &&
    at('on_next_task') === ours.on_next_task &&
    at('on_error') === ours.on_error &&
    at('release') === ours.release &&
    readerOf(mem, handler) !== undefined;
  return same ? ours : null;
}

/**
 * A handler to give to a native producer, and the data it pushes as an
 * `AsyncIterable` (and a WHATWG `ReadableStream`).
 *
 * @example
 * const reader = createAsyncDeviceStreamReader({ toHost: true });
 * nativeLib.start_producing(reader.handler);   // the producer takes the handler
 * for await (const batch of reader) console.log(batch.numRows);
 */
export class AsyncDeviceStreamReader<T extends AsyncItem | object = ImportedRecordBatch | DeviceArray, S = Schema> implements AsyncIterable<T> {
  /** The `ArrowAsyncDeviceStreamHandler` to hand to the producer. Freed when the producer releases it. */
  readonly handler: Ptr;
  /**
   * Resolves when the producer has released the handler, the struct this
   * reader handed out: the stream is over, whatever the reason. The name
   * every export of this library uses for "the other side let go"
   * (`ExportHandle.released`); never rejects.
   */
  readonly released: Promise<void>;
  /**
   * `released`, under its name before 0.2.
   *
   * @deprecated The name before 0.2: `released`.
   */
  get closed(): Promise<void> {
    return this.released;
  }

  private readonly mem: Memory;
  /**
   * Whether the handler is the native ring (src/async/ring.ts): a native
   * producer's calls then wait for no hop. False where the prebuilt library
   * is not available (`asyncRingMissing` says why), for `{ nativeRing: false }`,
   * and for memories other than the native one; `nativeRingMissing` says why.
   */
  readonly nativeRing: boolean;
  /**
   * Why `nativeRing` is false (undefined when it is true): turned off, a
   * wasm memory, or the library's own reason (no prebuilt library for this
   * platform, one that does not load, a doorbell found dead earlier).
   */
  readonly nativeRingMissing: string | undefined;
  private readonly ring: RingLib | null;
  private bell: Doorbell | null = null;
  /** Where ring events are taken into (JS memory, handed to the library). */
  private ringBuf: Uint8Array | null = null;
  private readonly id: number;
  private readonly queueSize: number;
  /** Started last in the constructor: a constructor that throws leaves no timer behind. */
  private readonly keepAlive: KeepAlive;
  private readonly changed = new Signal();
  private readonly queue: QueuedTask[] = [];
  private node: SchemaNode | null = null;
  /** The target's schema of the stream (an arrow-js `Schema` by default), made once. */
  private targetSchema: S | null = null;
  private schemaWaiters: { resolve: (s: SchemaNode) => void; reject: (e: unknown) => void }[] = [];
  private producer: Ptr = 0n;
  /** What `next()` handed out last and was not kept: released when the reader moves on. */
  private current: T | null = null;
  private ended = false;
  private handlerReleased = false;
  private cancelled = false;
  private error: ArrowDeviceError | null = null;
  private errorAfterCancel: AsyncStreamError | null = null;
  private resolveClosed!: () => void;
  // Written by the reader alone; the public getters below read them.
  private producerMetadata: Metadata | null = null;
  private producerDeviceType: number | undefined;
  private queuedAtMost = 0;
  private discarded = 0;

  /** A reader and its handler; `createAsyncDeviceStreamReader` is the typed way to make one. */
  constructor(
    private readonly opts: AsyncConsumerOptions = {},
  ) {
    this.mem = opts.memory ?? nativeMemory();
    this.queueSize = opts.queueSize ?? 4;
    if (!Number.isInteger(this.queueSize) || this.queueSize < 1) {
      throw new ArrowDeviceError('invalid', 'options.queueSize', `must be a positive integer, got ${opts.queueSize}`);
    }
    this.released = new Promise((resolve) => (this.resolveClosed = resolve));
    const H = access(this.mem.target).ArrowAsyncDeviceStreamHandler;
    this.id = readers.add(this as AnyReader);
    // The ring holds a queue's worth of tasks (a larger queue than MAX_RING_QUEUE uses JS callbacks).
    let missing: string | undefined;
    let ring: RingLib | null = null;
    if (opts.nativeRing === false) missing = 'turned off ({ nativeRing: false })';
    else if (!isNativeMemory(this.mem)) missing = "not the native memory (a wasm module's producer calls the handler on the JS thread)";
    else if (this.queueSize > MAX_RING_QUEUE) missing = `queueSize ${this.queueSize} is above the ring's ${MAX_RING_QUEUE}`;
    else if ((ring = asyncRing()) === null) missing = asyncRingMissing;
    // The ring's handler member comes first: its address is the handler's, its private_data our id.
    // The ring rings through its pipe: the producer's thread never waits for ours.
    let ringHandler = ring ? ring.ringNew(onSchemaCb(this.mem), BigInt(this.id), this.queueSize) : 0n;
    if (ring && ringHandler === 0n) missing = 'ring_new failed (out of memory or pipes)';
    if (ring && ringHandler !== 0n) {
      const handler = ringHandler;
      const lib = ring;
      const fd = lib.bellFd(handler);
      try {
        // Each byte in the pipe is a doorbell. The doorbell owns (and closes) the descriptor; the
        // process is kept alive by KeepAlive until the release, not by it (src/async/doorbell.ts).
        this.bell = new Doorbell({ fd, what: 'the native ring', onRing: () => this.onDoorbell(), rung: () => lib.doorbells(handler) });
      } catch (e) {
        // No watcher for the pipe (out of descriptors, say): JS callbacks then. The read end is ours to close.
        missing = (e as Error).message;
        try {
          closeSync(fd);
        } catch {
          // already closed
        }
        ring.free(ringHandler);
        ringHandler = 0n;
      }
    }
    this.ring = ringHandler !== 0n ? ring : null;
    this.nativeRing = this.ring !== null;
    this.nativeRingMissing = this.nativeRing ? undefined : missing;
    if (this.ring) {
      this.handler = ringHandler;
      ringReaders.set(ringHandler, this as AnyReader);
    } else {
      this.handler = this.mem.alloc(H.$size);
      writeStruct(this.mem, this.handler, H.$size, (dv, at) => {
        H.on_schema.setBig(dv, at, onSchemaCb(this.mem));
        H.on_next_task.setBig(dv, at, onNextTaskCb(this.mem));
        H.on_error.setBig(dv, at, onErrorCb(this.mem));
        H.release.setBig(dv, at, releaseCb(this.mem));
        H.producer.set(dv, at, 0);
        H.private_data.set(dv, at, this.id);
      });
    }
    liveCounters.liveExports++;
    this.keepAlive = new KeepAlive();
  }

  /** @internal How the JS thread hears the ring's doorbell (null without the ring): for tests and benchmarks. */
  get doorbellMechanism(): DoorbellMechanism | null {
    return this.bell?.mechanism ?? null;
  }

  /** @internal The memory the handler lives in. */
  get memory(): Memory {
    return this.mem;
  }

  /** @internal Doorbells the producer rang (native ring only; each wakes the JS thread once): for tests and benchmarks. */
  get doorbells(): number {
    return this.ring && !this.handlerReleased ? this.ring.doorbells(this.handler) : this.finalDoorbells;
  }

  private finalDoorbells = 0;

  /** @internal The most batches ever queued at once (received, not yet read): for tests of the bound. */
  get maxQueued(): number {
    return this.queuedAtMost;
  }

  /** @internal Tasks extracted with a NULL out (after a cancel): for tests. */
  get discardedTasks(): number {
    return this.discarded;
  }

  /** The producer's `additional_metadata`, decoded (null: none). Known once the schema arrived. */
  get additionalMetadata(): Metadata | null {
    return this.producerMetadata;
  }

  /** The producer's device type. Known once the schema arrived. */
  get deviceType(): number | undefined {
    return this.producerDeviceType;
  }

  /**
   * The stream's schema as arrow-js `Schema`, once the producer sent it
   * (rejects with `unsupported` for types arrow-js lacks, unless `expand`);
   * a flechette reader's is flechette's.
   */
  get schema(): Promise<S> {
    return this.schemaNodeAsync.then((node) => (this.targetSchema ??= this.schemaOf(node)));
  }

  /** The target's schema of `node`: the target's own, else arrow-js's. */
  private schemaOf(node: SchemaNode): S {
    const t = this.opts.target;
    return (t !== undefined ? t.schema(node) : arrowJsBuilds('schema').batchSchemaOf(planOfNode(node, this.opts))) as S;
  }

  /** What an item is built as over its record: the target's, an `ArrayView` (`view`), or an arrow-js record batch. */
  private build(path: string): (read: ImportRead) => object {
    const t = this.opts.target;
    const plan = planOfNode(this.node!, this.opts);
    if (t !== undefined) return (read) => t.item(read, plan);
    if (this.opts.view) return (read) => viewOf(read, plan.root, 0);
    return arrowJsBuilds(path).buildBatch;
  }

  /** The stream's schema as sent (every type of the spec), once the producer sent it. */
  get schemaNodeAsync(): Promise<SchemaNode> {
    if (this.node) return Promise.resolve(this.node);
    if (this.error) return Promise.reject(this.error);
    return new Promise((resolve, reject) => this.schemaWaiters.push({ resolve, reject }));
  }

  /** The stream's schema as sent; null until the producer sent it. */
  get schemaNode(): SchemaNode | null {
    return this.node;
  }

  // --- handler callbacks (on the JS thread, one at a time) ---------------------------------

  /** @internal */
  onSchema(schemaPtr: Ptr): number {
    if (this.cancelled) return Errno.ECANCELED; // the producer then only calls release
    try {
      // Import consumes the schema (moved into our hands and released); the pointer is not kept.
      const node = readSchemaPtr(this.mem, schemaPtr);
      // The batches are imported against this node (planOfNode converts it once, `expand` included):
      // never against the converted arrow-js schema, which `expand` has changed. A reader of
      // ArrayViews converts it only when asked; another target's schema is made now, so that a
      // schema the target cannot read fails here.
      if (!this.opts.view || this.opts.target !== undefined) this.targetSchema = this.schemaOf(node);
      this.node = node;
      const A = access(this.mem.target);
      this.producer = readFieldBig(this.mem, A.ArrowAsyncDeviceStreamHandler.producer, this.handler);
      if (this.producer === 0n) throw new ArrowDeviceError('invalid', 'handler.producer', 'NULL: the producer must fill it before on_schema');
      // The producer struct staged once (src/memory/raw.ts), its fields read through the typed accessors.
      const P = A.ArrowAsyncProducer;
      const pat = stage(rawOf(this.mem), Number(this.producer), P.$size);
      const pdv = staged.dv;
      this.producerDeviceType = P.device_type.get(pdv, pat);
      const md = P.additional_metadata.big(pdv, pat);
      this.producerMetadata = readMetadata(this.mem, md, 'producer.additional_metadata');
    } catch (e) {
      this.fail(e instanceof ArrowDeviceError ? e : new ArrowDeviceError('io', 'on_schema', String(e)));
      return toErrno(e).errno;
    }
    for (const w of this.schemaWaiters) w.resolve(this.node!);
    this.schemaWaiters = [];
    this.request(this.queueSize);
    this.changed.wake();
    return 0;
  }

  /** @internal */
  onNextTask(task: Ptr, metadata: Ptr): number {
    if (task === 0n) {
      this.ended = true;
      this.changed.wake();
      return 0;
    }
    // The task is only valid during this call: move its contents out.
    const bytes = this.mem.read(task, this.mem.layouts.ArrowAsyncTask.size);
    if (this.cancelled) {
      this.discard(bytes);
      return 0;
    }
    this.queueTask(bytes, () => readMetadata(this.mem, metadata, 'on_next_task.metadata'));
    return 0;
  }

  /** A task moved out (of on_next_task, or of the ring), queued for the reader; discarded after a cancel. */
  private queueTask(bytes: Uint8Array, metadata: () => Metadata | null): void {
    if (this.cancelled) {
      this.discard(bytes);
      return;
    }
    let md: Metadata | null = null;
    try {
      md = metadata();
    } catch (e) {
      // Keep the data; a malformed per-task metadata is reported with the batch.
      md = new Map([['arrow-device:error', (e as Error).message]]);
    }
    this.queue.push({ bytes, metadata: md });
    this.queuedAtMost = Math.max(this.queuedAtMost, this.queue.length);
    this.changed.wake();
  }

  /** @internal */
  onError(code: number, message: Ptr, metadata: Ptr): void {
    // Both strings are valid only during this call: copy them now.
    let text: string | null = null;
    let md: Metadata | null = null;
    try {
      text = message === 0n ? null : this.mem.readCString(message);
    } catch {
      text = '(unreadable message)';
    }
    try {
      md = readMetadata(this.mem, metadata, 'on_error.metadata');
    } catch {
      md = null;
    }
    this.producerError(new AsyncStreamError(code, text, md));
  }

  private producerError(err: AsyncStreamError): void {
    if (this.cancelled) this.errorAfterCancel = err; // Arrow C++: on_error(EINVAL) after a cancel
    else this.fail(err);
  }

  /** @internal */
  onRelease(): void {
    if (this.handlerReleased) return;
    this.handlerReleased = true;
    this.keepAlive.stop();
    readers.take(this.id);
    if (this.ring) {
      // Every call of the producer is in our hands now: nothing calls the handler any more.
      this.finalDoorbells = this.ring.doorbells(this.handler);
      ringReaders.delete(this.handler);
      this.bell?.close(); // closes the pipe's read end; the ring closes the write end
      this.ring.free(this.handler);
    } else {
      this.mem.free(this.handler);
    }
    this.freeScratchIfDone();
    liveCounters.liveExports--;
    if (!this.node && !this.error) {
      this.fail(new ArrowDeviceError('producer', 'async stream', 'the producer released the handler before sending a schema'));
    }
    this.changed.wake();
    this.resolveClosed();
  }

  // --- the native ring ------------------------------------------------------------

  /** @internal The producer rang: something arrived while JS waited (a byte in the doorbell pipe, read by the event loop). */
  onDoorbell(): void {
    try {
      // Taken and armed again: what comes next (the end, the release, an error, tasks to discard after
      // a cancel) rings even if the reader does not read again. While the reader works through what it
      // has, its own takes come first: at most one more wake-up per burst.
      this.drainRing(true);
    } catch (e) {
      // From the event loop: nothing above to catch it.
      this.fail(e instanceof ArrowDeviceError ? e : new ArrowDeviceError('io', 'async stream', String(e)));
    }
    this.changed.wake();
  }

  /**
   * Takes every call the ring holds and handles each as its callback would
   * have been. With `arm`, the take that finds the ring empty arms the
   * doorbell (JS is about to wait); without, pushes until the next take
   * ring nothing. Returns how many calls were taken.
   */
  private drainRing(arm: boolean): number {
    const ring = this.ring;
    if (ring === null) return 0;
    const buf = (this.ringBuf ??= new Uint8Array(RING_EVENT_BYTES * 64));
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    const m = this.mem;
    let total = 0;
    while (!this.handlerReleased) {
      const n = ring.take(this.handler, buf, 64, arm ? 1 : 0);
      total += n;
      for (let i = 0; i < n; i++) {
        const o = i * RING_EVENT_BYTES;
        const kind = dv.getInt32(o, true);
        const code = dv.getInt32(o + 4, true);
        const md = dv.getBigUint64(o + 24, true);
        const msg = dv.getBigUint64(o + 32, true);
        // The copies are the ring's: decode, then free, whatever the decoding gave.
        const metadata = (): Metadata | null => {
          if (code === -1 && kind === EV_TASK) throw new ArrowDeviceError('invalid', 'on_next_task.metadata', 'malformed (its lengths run past 16 MiB) or at an invalid address');
          if (code === -2 && kind === EV_TASK) throw new ArrowDeviceError('memory', 'on_next_task.metadata', 'no memory to copy it');
          return readMetadata(m, md, `${kind === EV_TASK ? 'on_next_task' : 'on_error'}.metadata`);
        };
        try {
          if (kind === EV_TASK) {
            this.queueTask(buf.slice(o + 8, o + 24), metadata);
          } else if (kind === EV_END) {
            this.onNextTask(0n, 0n);
          } else if (kind === EV_ERROR) {
            let text: string | null = null;
            let mdv: Metadata | null = null;
            try {
              text = msg === 0n ? null : m.readCString(msg);
            } catch {
              text = '(unreadable message)';
            }
            try {
              mdv = metadata();
            } catch {
              mdv = null;
            }
            this.producerError(new AsyncStreamError(code, text, mdv));
          } else if (kind === EV_RELEASE) {
            // Last: the ring is freed by it, and nothing follows a release.
            this.onRelease();
          }
        } finally {
          if (md !== 0n) ring.freeCopy(md);
          if (msg !== 0n) ring.freeCopy(msg);
        }
      }
      // An armed take must find the ring empty (that take arms); an unarmed one stops at a short take.
      if (n === 0 || (!arm && n < 64)) break;
    }
    return total;
  }

  // --- reading -----------------------------------------------------------------------

  private fail(e: ArrowDeviceError): void {
    if (this.error) return;
    this.error = e;
    for (const w of this.schemaWaiters) w.reject(e);
    this.schemaWaiters = [];
    this.changed.wake();
  }

  private request(n: number): void {
    if (this.producer === 0n || this.handlerReleased || this.cancelled) return;
    if (this.ring) {
      // Through the ring, which knows whether the producer has released the handler (and may have freed
      // its ArrowAsyncProducer): its release only queued an event we may not have taken yet.
      this.ring.request(this.handler, n);
      return;
    }
    const fn = readFieldBig(this.mem, access(this.mem.target).ArrowAsyncProducer.request, this.producer);
    // Arrow C++ 26's producer (ExportAsyncRecordBatchReader) can tear its ArrowAsyncProducer down
    // before its release of our handler reaches the JS thread, though the spec keeps it valid until
    // just before that release: a NULL request then means "gone", and we stop asking.
    if (fn === 0n) return;
    // A synchronous call is safe: request MUST be callable from within on_next_task, that is while
    // the producer's own thread waits for us, and MUST NOT call on_next_task or on_error itself.
    this.mem.call(fn, REQUEST, this.producer, BigInt(n));
  }

  /** Tasks taken from the queue whose replacement was not requested yet (native ring only). */
  private owed = 0;

  /**
   * Asks for `n` more tasks. Through JS callbacks at once (each task is a
   * hop anyway). With the native ring, in bursts of half the queue: each
   * request wakes the producer's thread, and a producer woken for every
   * task falls behind a reader that then waits for it, a hop per batch; a
   * producer woken for several stays ahead, and the reader takes them in
   * one go. Still at most `queueSize` requested ahead of the reader;
   * whatever is owed is asked for before the reader waits.
   */
  private credit(n: number): void {
    if (this.ring === null) {
      this.request(n);
      return;
    }
    this.owed += n;
    if (this.owed >= Math.max(1, this.queueSize >> 1)) this.flushCredit();
  }

  private flushCredit(): void {
    if (this.owed === 0) return;
    const n = this.owed;
    this.owed = 0;
    if (!this.ended) this.request(n);
  }

  /**
   * One native block for an extraction: the task moved back into native
   * memory, and after it the ArrowDeviceArray the producer fills (zeroed each
   * time). Allocated once and reused: a block per task cost two allocations
   * and two frees per batch. Freed once the reader is done (released, nothing
   * queued); a use inside a use (a producer calling back into us from its
   * extract_data) gets a block of its own.
   */
  private scratch: Ptr = 0n;
  private scratchBusy = false;
  /** The block's image in JS: the task's bytes, then zeros; written with one copy. */
  private scratchImage: Uint8Array | null = null;

  private withTask<R>(bytes: Uint8Array, f: (task: Ptr, out: Ptr) => R): R {
    const m = this.mem;
    const outAt = (bytes.length + 7) & ~7;
    const size = outAt + m.layouts.ArrowDeviceArray.size;
    const nested = this.scratchBusy;
    let block: Ptr;
    if (nested) block = m.alloc(size);
    else block = this.scratch !== 0n ? this.scratch : (this.scratch = m.alloc(size));
    this.scratchBusy = true;
    try {
      const image = this.scratchImage ?? (this.scratchImage = new Uint8Array(size));
      image.set(bytes, 0);
      image.fill(0, bytes.length);
      m.copyIn(block, image);
      return f(block, block + BigInt(outAt));
    } finally {
      if (nested) m.free(block);
      else {
        this.scratchBusy = false;
        this.freeScratchIfDone();
      }
    }
  }

  private freeScratchIfDone(): void {
    if (this.scratch !== 0n && !this.scratchBusy && this.handlerReleased && this.queue.length === 0) {
      this.mem.free(this.scratch);
      this.scratch = 0n;
    }
  }

  /** The task's extract_data, from its bytes (a pointer at its offset, little-endian). */
  private extractFn(bytes: Uint8Array): Ptr {
    const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return access(this.mem.target).ArrowAsyncTask.extract_data.big(dv, 0);
  }

  /** Extracts a task with a NULL out: the producer cleans up, no data. */
  private discard(bytes: Uint8Array): void {
    this.withTask(bytes, (t) => this.mem.call(this.extractFn(bytes), EXTRACT_DATA, t, 0n));
    this.discarded++;
  }

  /** Extracts a task into an ArrowDeviceArray and imports it. */
  private extract(q: QueuedTask): AsyncTaskResult<T> {
    return this.withTask(q.bytes, (t, out) => {
      const rc = this.mem.call(this.extractFn(q.bytes), EXTRACT_DATA, t, out) as number;
      if (rc !== 0) {
        throw new ArrowDeviceError('producer', 'extract_data', `${errnoName(rc)} (the producer reports details through on_error)`, { errno: rc });
      }
      // The one import path, against the node the producer sent (never the converted schema, which `expand` changed).
      // A device read asynchronously (WebGPU) is taken now and checked, awaited, by `next` (settleDeviceWith).
      const later = this.deviceType !== undefined && readsAsync(this.deviceType);
      // An arrow-js batch refuses a type arrow-js lacks before the struct is taken (as importDeviceRecordBatch).
      const form = this.opts.target !== undefined || this.opts.view ? PlanOf.Array : PlanOf.Batch;
      const data = (
        later ? importDeviceArrayLater(out, this.node!, this.opts) : importDeviceWith(out, this.node!, this.opts, form, this.build('device_array'))
      ) as T;
      if (data instanceof DeviceArray && this.deviceType !== undefined && data.deviceType !== this.deviceType) {
        data.release();
        throw new ArrowDeviceError('invalid', 'device_array.device_type', `${data.deviceType}, but the producer said ${this.deviceType}`);
      }
      return { data, metadata: q.metadata };
    });
  }

  /**
   * Keeps `data` (a batch or device array this reader returned) alive past
   * the reader's next step: it is the caller's from now on, released by its
   * `release()`, `using`, or the garbage collector. Returns it.
   */
  keep<U extends T>(data: U): U {
    if (data === this.current) this.current = null;
    return data;
  }

  /** Releases what the reader handed out last, unless it was kept (a reader keeps one batch alive at a time). */
  private drop(reason: 'stream-advanced' | 'stream-ended'): void {
    const d = this.current;
    if (!d) return;
    this.current = null;
    if (d instanceof DeviceArray) d.release();
    else if (ownersOf(d) !== undefined) releaseObject(d, reason);
  }

  /**
   * The next batch with its metadata, or undefined at the end. The batch
   * returned before is released first, unless it was kept (`keep()`, or the
   * `keep` option).
   */
  async next(): Promise<AsyncTaskResult<T> | undefined> {
    this.drop('stream-advanced');
    for (;;) {
      const q = this.queue.shift();
      if (q) {
        // The task has left the queue: ask for the next one before extracting this one, so that a producer
        // on its own thread prepares it while we extract and import (with queueSize 1 the two would otherwise
        // take turns). Still at most queueSize tasks queued or requested: its on_next_task reaches this
        // thread only after this extraction.
        if (!this.ended) this.credit(1);
        let r = this.extract(q);
        if (r.data instanceof DeviceArray && readsAsync(r.data.deviceType)) {
          r = { data: (await settleDeviceWith(r.data, this.opts, this.build('device_array'))) as T, metadata: r.metadata };
        }
        if (!this.opts.keep) this.current = r.data;
        return r;
      }
      // The queue is empty: ask for what is owed, take what the ring holds (arming the doorbell if it
      // is empty too).
      this.flushCredit();
      if (this.ring !== null && !this.handlerReleased && this.drainRing(true) > 0) continue;
      if (this.error) throw this.error;
      if (this.ended || this.handlerReleased || this.cancelled) return undefined;
      await this.changed.wait();
    }
  }

  /**
   * Stops reading: calls the producer's `cancel` (the producer stops
   * eventually and releases the handler) and extracts every queued task with
   * a NULL out. Idempotent.
   */
  cancel(): void {
    // Queued tasks will never be read: each is extracted with a NULL out so that its producer cleans up,
    // also once the stream has ended or the handler is released (the tasks outlive both).
    this.drainRing(false); // the tasks still in the ring are queued ones too
    const queued = this.queue.splice(0);
    const stop = !this.cancelled && !this.handlerReleased;
    this.cancelled = true;
    for (const q of queued) this.discard(q.bytes);
    // After the release the ArrowAsyncProducer may be gone: nothing of it is called any more.
    if (stop && this.producer !== 0n && this.ring) {
      // Through the ring, for the reason `request` goes through it.
      this.ring.cancel(this.handler);
    } else if (stop && this.producer !== 0n) {
      try {
        const fn = readFieldBig(this.mem, access(this.mem.target).ArrowAsyncProducer.cancel, this.producer);
        // cancel is thread-safe and may only call on_error, which koffi runs re-entrantly on this thread.
        if (fn !== 0n) this.mem.call(fn, CANCEL, this.producer);
      } catch {
        // A producer whose cancel fails (or is gone) still ends with release; nothing else to do here.
      }
    }
    // What still arrives is discarded as it comes: be told of it.
    this.drainRing(true);
    this.changed.wake();
  }

  /**
   * Frees a handler no producer will use: one never handed out, or whose
   * producer failed before sending the schema. Ends the reader (and lets the
   * process exit: the reader keeps the event loop alive until its handler is
   * released). Refused once a producer has sent the schema: `cancel()` then.
   */
  dispose(): void {
    if (this.handlerReleased) return;
    if (this.producer !== 0n) {
      throw new ArrowDeviceError('invalid', 'dispose', 'a producer holds the handler: cancel() it and wait for `released`');
    }
    this.fail(new ArrowDeviceError('io', 'async stream', 'the handler was disposed before any producer used it'));
    this.onRelease();
  }

  /** The error the producer reported after our cancel, if any (Arrow C++ reports EINVAL there). */
  get errorAfterCancelled(): AsyncStreamError | null {
    return this.errorAfterCancel;
  }

  /** The reading is over: the batch handed out last goes unless it was kept; the producer stops. */
  private finishReading(): void {
    this.drop('stream-ended');
    // break, return() or a throw in the loop body: tell the producer to stop, and let it clean up
    // the tasks still queued (there may be some after the end of the stream too).
    if ((!this.ended && !this.handlerReleased) || this.queue.length > 0) this.cancel();
  }

  /** Batches with the metadata their producer sent. */
  async *tasks(): AsyncGenerator<AsyncTaskResult<T>> {
    try {
      for (;;) {
        const r = await this.next();
        if (!r) return;
        yield r;
      }
    } finally {
      this.finishReading();
    }
  }

  /**
   * The batches. An iterator over `next()` written out rather than a
   * generator over `tasks()`: two generator layers cost a few promises per
   * batch. The same ends: the end of the stream, `return()` (a `break`) and
   * an error all finish the reading.
   */
  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    let finished = false;
    const finish = (): IteratorReturnResult<undefined> => {
      if (!finished) {
        finished = true;
        this.finishReading();
      }
      return { done: true, value: undefined };
    };
    return {
      next: async (): Promise<IteratorResult<T, undefined>> => {
        if (finished) return { done: true, value: undefined };
        let r: AsyncTaskResult<T> | undefined;
        try {
          r = await this.next();
        } catch (e) {
          finish();
          throw e;
        }
        return r ? { done: false, value: r.data } : finish();
      },
      return: async (): Promise<IteratorResult<T, undefined>> => finish(),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** A WHATWG ReadableStream of the batches; its `cancel()` cancels the producer. */
  toReadableStream(): ReadableStream<T> {
    return new ReadableStream<T>(
      {
        pull: async (controller) => {
          try {
            const r = await this.next();
            if (r) controller.enqueue(r.data);
            else controller.close();
          } catch (e) {
            controller.error(e);
          }
        },
        cancel: () => this.cancel(),
      },
      // The queue bound is ours (queueSize); the stream buffers nothing more.
      { highWaterMark: 0 },
    );
  }
}

/**
 * Creates a handler for a native producer and the reader of what it pushes.
 *
 * @example
 * const reader = createAsyncDeviceStreamReader({ queueSize: 4, toHost: true });
 * nativeLib.start_producing(reader.handler);  // the producer pushes from its own thread
 * for await (const batch of reader) use(batch); // released when the loop moves on (keep() to keep one)
 */
export function createAsyncDeviceStreamReader(opts: AsyncConsumerOptions & { view: true; toHost: true }): AsyncDeviceStreamReader<ArrayView>;
export function createAsyncDeviceStreamReader(opts: AsyncConsumerOptions & { view: true }): AsyncDeviceStreamReader<ArrayView | DeviceArray>;
export function createAsyncDeviceStreamReader(opts: AsyncConsumerOptions & { toHost: true }): AsyncDeviceStreamReader<ImportedRecordBatch>;
export function createAsyncDeviceStreamReader(opts?: AsyncConsumerOptions): AsyncDeviceStreamReader<ImportedRecordBatch | DeviceArray>;
export function createAsyncDeviceStreamReader(opts: AsyncConsumerOptions = {}): AsyncDeviceStreamReader<AsyncItem> {
  return new AsyncDeviceStreamReader<AsyncItem>(opts);
}
