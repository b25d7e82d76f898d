/**
 * Import of `ArrowArrayStream` and (CPU) `ArrowDeviceArrayStream`: a
 * foreign stream becomes a `RecordBatchStreamImport`, a synchronous
 * iterable of arrow-js `RecordBatch` whose schema is read first.
 *
 * Ownership: import moves the stream struct into memory we own (bitwise
 * copy, then the caller's struct is marked released, as for arrays), so the
 * caller may free its struct at once. The producer's `release` runs exactly
 * once: at the end of the stream, on the first error, when the loop is left
 * early (`break`, `return` or a throw in a `for...of` body call
 * `return()`), on `release()`, or, as a safety net, when the import object
 * is garbage collected.
 *
 * Batches are imported through the one import path (array/importer.ts) and
 * live independently of the stream (CStreamInterface.rst, "Result
 * lifetimes"), but a reader bounds memory by itself
 * (docs/architecture.md#a-stream-bounds-its-own-memory): it keeps one batch alive at a time, releasing the batch it
 * handed out when it hands out the next one or when the reading ends,
 * unless that batch was kept (`reader.keep(batch)`, the `keep` option,
 * `readAll()`, `toTable()`). A kept batch is the caller's: released by its
 * `release()`, `using`, or the garbage collector.
 */
import type { Schema } from 'apache-arrow';
import { DeviceType, deviceTypeName, errnoName } from '../abi/constants.js';
import {
  ArrowSymbols, hasArrowMethod, isArrowExportable,
  type ArrowDeviceExportOptions, type ArrowDeviceStreamExportable, type ArrowSchemaExportable, type ArrowStreamExportable,
} from '../abi/protocol.js';
import {
  checkDeviceExportOptions, checkRequestedSchema, exchangeOptions, importFromHandle, schemaHandle, setStreamTableImporter,
  type ExchangeImportOptions,
} from '../array/exchange.js';
import { ExportHandle } from '../memory/handle.js';
import { importWith, PlanOf } from '../array/importer.js';
import { planOfNode, type Plan } from '../array/plan.js';
import { validationLevel } from '../array/read.js';
import type { ImportRead } from '../array/record.js';
import { viewOf, type ArrayView } from '../array/view.js';
import type { DeviceImportOptions } from '../device/import.js';
import type { DeviceArray } from '../device/device-array.js';
import type { ImportedRecordBatch, ImportedTable } from '../array/build.js';
import { releaseObject } from '../array/owned.js';
import { ImportOwner } from '../array/owner.js';
import { isReleased, markReleased, moveToNew, releaseStruct } from '../memory/cstruct.js';
import { streamPtrArg } from '../args.js';
import { ArrowDeviceError, invalid, prefixPath, unsupported } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { access } from '../abi/accessors.js';
import { readField } from '../memory/raw.js';
import { readSharedSchema, type SchemaNode } from '../schema/node.js';
import {
  ARRAY_STREAM, DEVICE_STREAM, GET_LAST_ERROR_SIG, GET_NEXT_SIG, GET_SCHEMA_SIG, isStreamReleased, readStreamField,
  releaseStreamStruct, type StreamStruct,
} from './struct.js';

/**
 * What a device stream uses of the device layer, given by src/stream/device.ts when it loads: a
 * plain stream (and `arrow-device/adbc`, which reads only plain streams) then loads no device code.
 * Only `importDeviceArrayStream` makes a device stream, and it is public only through
 * src/stream/device.ts, so every device stream finds these set; before it loads no `DeviceArray`
 * exists, so a plain stream's checks for one need no class.
 */
export interface DeviceStreamImports {
  DeviceArray: typeof import('../device/device-array.js').DeviceArray;
  readsAsync: typeof import('../device/backend.js').readsAsync;
  importDeviceArrayLater: typeof import('../device/import.js').importDeviceArrayLater;
  importDeviceWith: typeof import('../device/import.js').importDeviceWith;
  readDeviceFields: typeof import('../device/import.js').readDeviceFields;
  settleDeviceWith: typeof import('../device/import.js').settleDeviceWith;
}

let deviceLayer: DeviceStreamImports | undefined;

/** Called once by src/stream/device.ts. */
export function setDeviceStreamImports(d: DeviceStreamImports): void {
  deviceLayer = d;
}

function device(): DeviceStreamImports {
  if (deviceLayer === undefined) throw new Error('arrow-device internal error: a device stream read before src/stream/device.ts was loaded');
  return deviceLayer;
}

/**
 * What a stream of arrow-js batches uses of the arrow-js target, given by src/stream/arrowjs.ts when it
 * loads (every entry that hands out arrow-js readers imports it): a reader of `ArrayView`s, which the
 * flechette target reads, then loads no arrow-js code and no apache-arrow.
 */
export interface StreamArrowJs {
  buildBatch: typeof import('../array/build.js').buildBatch;
  importedTable: typeof import('../array/build.js').importedTable;
  batchSchemaOf: typeof import('../array/plan-arrowjs.js').batchSchemaOf;
  nodeToSchema: typeof import('../schema/arrowjs.js').nodeToSchema;
}

let arrowLayer: StreamArrowJs | undefined;

/** Called once by src/stream/arrowjs.ts. */
export function setStreamArrowJs(a: StreamArrowJs): void {
  arrowLayer = a;
}

function arrowjs(path: string): StreamArrowJs {
  if (arrowLayer === undefined) {
    throw new ArrowDeviceError('unsupported', path, 'arrow-js batches come from the "arrow-device" entry (which needs the apache-arrow package); read ArrayViews with { view: true }');
  }
  return arrowLayer;
}

/**
 * What another target (flechette: src/flechette/) builds a reader's items with, given as `opts.target`
 * (internal): its item over each array the reader imports (recorded as owned by the import's owner, as
 * any item), the table of items `toTable` gives, and the schema `schema` gives. Without one, a reader
 * gives arrow-js batches, or `ArrayView`s with `view`.
 */
export interface StreamTarget<T extends object = object, TT = unknown, S = unknown> {
  item(read: ImportRead, plan: Plan): T;
  /** The items (kept: the caller's) as one table, which releases them all. */
  table(items: T[], node: SchemaNode, path: string): TT;
  schema(node: SchemaNode): S;
}

function isDeviceArray(x: unknown): x is DeviceArray {
  return deviceLayer !== undefined && x instanceof deviceLayer.DeviceArray;
}

/**
 * Options of the stream readers: those of `importRecordBatch` (and, for
 * device streams, of `importDeviceRecordBatch`: `toHost`, `stream`), applied
 * to every item.
 */
export interface StreamImportOptions extends DeviceImportOptions {
  /**
   * Yield `ArrayView`s (every type of the spec, list views and run-end
   * encoded included, buffers as byte views) instead of arrow-js record
   * batches. Ownership is the same: release one with `releaseImport(view)`.
   */
  view?: boolean;
  /** @internal Another target's items (see `StreamTarget`); not with `view`. */
  target?: StreamTarget;
  /**
   * Keep every batch read: the reader then never releases a batch it
   * handed out (each is released by its own `release()`, `using`, or the
   * garbage collector). By default a reader keeps one batch alive at a time.
   */
  keep?: boolean;
  /**
   * Called when the producer's `get_schema` or `get_next` returns an error,
   * with the stream while it is still live (before it is released), and the
   * `StreamProducerError` made of it (the `get_last_error` text already
   * copied). This is where a producer's own error API can be asked about the
   * live stream: ADBC's `AdbcErrorFromArrayStream(stream, &status)` gives the
   * driver's status, SQLSTATE, vendor code and details, which the C stream
   * interface alone cannot carry.
   *
   * `stream` is the address of the stream struct the reader owns (import
   * moved the producer's struct there: same callbacks, same `private_data`).
   * It is valid during the call only: do not release it or keep it.
   *
   * Return an `Error` to throw it instead of `error` (give it `{ cause:
   * error }` to keep the original), or nothing to throw `error`. What the hook
   * throws is thrown. Either way the stream is released (exactly once) right
   * after the hook, and the reader is done.
   *
   * @example
   * const reader = importArrayStream(ptr, {
   *   onProducerError: (stream, error) => {
   *     const detail = driver.errorFromArrayStream(stream); // the producer's own API, on the live stream
   *     return detail ? new Error(detail.message, { cause: error }) : undefined;
   *   },
   * });
   */
  onProducerError?: (stream: Ptr, error: StreamProducerError) => Error | void;
  /**
   * Make `for await` (the reader's async iterator) call each `get_next` on a
   * worker thread (koffi's async call form), so that a producer that blocks
   * in `get_next` (a database driver running a query) leaves the event loop
   * free: timers, I/O and other promises run while the batch is produced.
   * Each batch costs a thread hand-off more (see `npm run bench:stream`).
   *
   * Ownership is the same as for `for...of`: one batch alive at a time
   * unless kept, the stream released exactly once, `break` / `return` / a
   * throw release it. Calls are never concurrent: while a `get_next` runs
   * off-thread, a synchronous `next()` (and `readAll()`, `toTable()`) throws,
   * and `release()` takes effect when that `get_next` returns (what it
   * produced is released then). `get_schema` runs at import, on the JS
   * thread. A stream whose `get_next` is our own JS callback (an
   * `exportArrayStream` of this process) is called on the JS thread directly:
   * it needs that thread anyway. A foreign `get_next` that calls JS callbacks
   * works off-thread too (koffi queues those calls to the JS thread, which is
   * free meanwhile). Memories without threads (wasm32) call on the JS thread.
   */
  offThread?: boolean;
}

/** What a stream reader yields: record batches, ArrayViews (`view: true`), or device arrays the CPU cannot read. */
export type StreamItem = ImportedRecordBatch | ArrayView | DeviceArray;

/** The longest `get_last_error` text we copy; the rest is cut. */
const MAX_ERROR_BYTES = 64 * 1024;
const lenientUtf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/**
 * A stream callback (`get_schema` or `get_next`) returned a non-zero code.
 * `errno` is that code, `code` its errno name (`EINVAL`), and
 * `producerMessage` the `get_last_error` text, copied at once (NULL, a NULL
 * callback or an unreadable string give `null`; invalid UTF-8 is replaced
 * by U+FFFD).
 *
 * @example
 * try {
 *   for (const batch of importArrayStream(streamPtr)) use(batch);
 * } catch (e) {
 *   if (e instanceof StreamProducerError) console.log(e.operation, e.code, e.producerMessage); // 'get_next' 'EIO' '...'
 * }
 */
export class StreamProducerError extends ArrowDeviceError {
  /** `'StreamProducerError'`. */
  override name = 'StreamProducerError';
  /** Made by the stream reader; `errno` is the producer's code. */
  constructor(
    path: string,
    detail: string,
    errno: number,
    /** The callback that failed. */
    readonly operation: 'get_schema' | 'get_next',
    /** The producer's `get_last_error()` text, copied at once; null where it gave none. */
    readonly producerMessage: string | null,
  ) {
    super('producer', path, detail, { errno });
  }
}

/**
 * @internal The stream struct we own, of one import.
 * Never refers to the import object (the FinalizationRegistry holds it).
 */
export class StreamHandle {
  released = false;
  /** Why the stream is released, for the error a later use gets. */
  why = '';
  /**
   * `get_next` results read ahead before the import (`StreamPrefetch`), oldest first: the reader's
   * next steps take them instead of calling the producer. Ours to release and free until taken.
   */
  pending: Pending[] = [];

  constructor(
    readonly mem: Memory,
    readonly s: StreamStruct,
    /** Our copy of the stream struct. */
    readonly ptr: Ptr,
  ) {
    liveCounters.liveImports++;
  }

  release(why: string): void {
    if (this.released) return;
    this.released = true;
    this.why = why;
    registry.unregister(this);
    try {
      // Batches read ahead and never handed out go back before their stream (any order is allowed).
      for (const it of this.pending.splice(0)) {
        try {
          if (it.live) {
            liveCounters.liveImports--;
            liveCounters.releasedImports++;
            releaseStruct(this.mem, this.#itemKind(), it.out);
          }
        } finally {
          this.mem.free(it.out);
        }
      }
    } finally {
      this.#releaseStream();
    }
  }

  #itemKind(): 'ArrowDeviceArray' | 'ArrowArray' {
    return this.s.kind === 'device' ? 'ArrowDeviceArray' : 'ArrowArray';
  }

  /**
   * Takes the results read ahead (`StreamPrefetch`): each that holds a batch (not a failure, not the
   * end) counts as a live import until taken or released.
   */
  setPending(items: readonly PrefetchedItem[]): void {
    this.pending = items.map((it) => ({ ...it, live: it.rc === 0 && !isReleased(this.mem, this.#itemKind(), it.out) }));
    for (const it of this.pending) if (it.live) liveCounters.liveImports++;
  }

  /** The oldest result read ahead, no longer counted: its batch's owner counts it from here. */
  takePending(): PrefetchedItem | undefined {
    const it = this.pending.shift();
    if (it?.live) liveCounters.liveImports--;
    return it;
  }

  #releaseStream(): void {
    try {
      releaseStreamStruct(this.mem, this.s, this.ptr);
    } finally {
      this.mem.free(this.ptr);
      liveCounters.liveImports--;
      liveCounters.releasedImports++;
    }
  }

  /**
   * Moves the stream struct, unchanged, into `into` (a struct of the same
   * kind the next consumer owns): the producer's `release` is theirs to call
   * now, not ours (CStreamInterface.rst: a stream can be moved like an array).
   */
  moveTo(into: Ptr): void {
    if (this.released) throw new ArrowDeviceError('released', this.s.path, `the stream is released (${this.why})`);
    if (this.pending.length > 0) {
      // Never the case for a reader a user holds: only arrow-device/adbc's query() reads ahead, into a Table.
      throw invalid(this.s.path, `${this.pending.length} batches were read ahead of this reader: read them before handing the stream on`);
    }
    this.mem.copyIn(into, this.mem.read(this.ptr, this.s.layout(this.mem).size));
    markReleased(this.mem, this.s.name, this.ptr);
    this.released = true;
    this.why = 'it was moved to another consumer';
    registry.unregister(this);
    this.mem.free(this.ptr);
    liveCounters.liveImports--;
  }
}

/** The safety net: a stream import dropped without being consumed or released is released when collected. */
const registry = new FinalizationRegistry<StreamHandle>((h) => {
  try {
    h.release('collected');
  } catch {
    // Nothing to report to: a finalizer has no caller.
  }
});

/**
 * A foreign `ArrowArrayStream` (or CPU `ArrowDeviceArrayStream`) as an
 * iterator of arrow-js `RecordBatch`, synchronous and asynchronous, usable
 * where arrow-js code takes a `RecordBatchReader` or any
 * `Iterable<RecordBatch>`: `for (const b of reader)`, `for await (const b of
 * reader)`, `reader.toTable()`, `reader.readAll()`, `reader.schema`. It can
 * be iterated once.
 *
 * Memory is bounded by default: the reader keeps one batch alive at a time.
 * The batch a `next()` returned is released when the next `next()` runs or
 * when the reading ends (end of stream, `break`, an error, `release()`),
 * unless it was kept: `reader.keep(batch)` for one batch, the `keep: true`
 * option for all, `readAll()` / `toTable()` for the rest of the stream.
 * Reading a batch the reader released throws an `ArrowDeviceError` of kind
 * `released` that says so.
 *
 * Every `next()` calls the producer's `get_next` on the calling thread and
 * blocks until it returns (also under `for await`, whose steps then resolve
 * as microtasks: timers wait for the whole loop). With `offThread: true`,
 * `for await` calls `get_next` on a worker thread instead and the event loop
 * runs meanwhile. Errors are typed: a non-zero code from the
 * producer is a `StreamProducerError` (the `onProducerError` option sees the
 * live stream first); a batch that fails validation is an
 * `ArrowDeviceError` whose path starts `stream.batches[i]`. After an error,
 * the end of the stream, `return()`/`throw()` or `release()`, the producer
 * has been released (exactly once) and any further `next()` throws an
 * `ArrowDeviceError` of kind `released`, with one exception: the step right
 * after a `release()` that came while reading (after a batch was handed
 * out) ends the iteration, so a loop that releases its own reader (a
 * cancel button, a row limit) simply ends.
 *
 * @example
 * const reader = importArrayStream(streamPtr);
 * console.log(reader.schema.fields.map((f) => f.name));
 * for (const batch of reader) {
 *   use(batch);                     // released when the loop moves on
 *   if (wanted(batch)) reader.keep(batch);
 * }
 * const table = importArrayStream(otherPtr).toTable(); // keeps every batch
 */
export class RecordBatchStreamImport<T extends StreamItem | object = ImportedRecordBatch, TT = ImportedTable, S = Schema> implements IterableIterator<T>, AsyncIterable<T>, ArrowSchemaExportable {
  /**
   * Exchange protocol (PROTOCOL.md): hands the stream on to another
   * consumer without a copy. Present on a reader of an `ArrowArrayStream`
   * (`importArrayStream`); a device stream's reader has
   * `[ArrowSymbols.deviceStream]` instead. The stream struct is moved into
   * the handle: the reader is released (reason: moved) whether or not the
   * consumer takes it, and the consumer reads the batches this reader has
   * not read. Batches read before stay as they are: kept ones stay valid,
   * the last one not kept is released, as when a reading ends.
   */
  declare readonly [ArrowSymbols.stream]?: (requestedSchema?: ArrowSchemaExportable | null) => ExportHandle;
  /** As `[ArrowSymbols.stream]`, on a reader of an `ArrowDeviceArrayStream` (`importDeviceArrayStream`). */
  declare readonly [ArrowSymbols.deviceStream]?: (requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions) => ExportHandle;
  #schema: S | undefined;
  /**
   * The schema of every batch, read from `get_schema` at import, as arrow-js
   * `Schema` (converted on first access for a reader of ArrayViews; throws
   * `unsupported` there for types arrow-js lacks unless `expand`).
   */
  get schema(): S {
    const t = this.#opts.target;
    return (this.#schema ??= (t !== undefined ? t.schema(this.schemaNode) : arrowjs('schema').nodeToSchema(this.schemaNode, 'schema', this.#opts)) as S);
  }
  /** The same schema as read, with every type of the spec (arrow-js lacks a few). */
  readonly schemaNode: SchemaNode;
  /**
   * For a device stream, its `device_type` (`DeviceType.CPU`, `DeviceType.CUDA`, ...); undefined for a
   * plain stream. A stream of memory the CPU cannot read in place yields `DeviceArray`s.
   */
  readonly deviceType: number | undefined;
  readonly #h: StreamHandle;
  readonly #opts: StreamImportOptions;
  readonly #level: number;
  /** The plan of the schema (its arrow-js form made, unless the reader gives ArrayViews). */
  readonly #plan: Plan;
  readonly #getNext: Ptr;
  #keepAll: boolean;
  /** The batch handed out last and not kept: released when the reader moves on. */
  #current: T | null = null;
  #count = 0;
  /** An off-thread `get_next` is running (`offThread`): nothing else may touch the stream. */
  #inFlight = false;
  /** Why to release the stream when the running off-thread `get_next` returns (a `release()` came meanwhile). */
  #closeWhenDone: string | null = null;
  /**
   * `release()` came after a step handed out a batch: the one step after it
   * ends the iteration (so a loop that releases its reader inside ends)
   * instead of throwing; every later step throws.
   */
  #endNextStep = false;
  /** The off-thread `next()` calls, one after the other. */
  #queue: Promise<unknown> = Promise.resolve();

  /** @internal Use `importArrayStream` / `importDeviceArrayStream`. */
  constructor(h: StreamHandle, node: SchemaNode, plan: Plan, deviceType: number | undefined, opts: StreamImportOptions, targetSchema?: unknown) {
    this.#h = h;
    this.#plan = plan;
    this.schemaNode = node;
    // A reader of ArrayViews converts its schema only when asked (types arrow-js lacks stay possible).
    if (opts.target !== undefined) this.#schema = targetSchema as S | undefined;
    else if (!opts.view) this.#schema = arrowjs('schema').batchSchemaOf(plan) as S;
    this.deviceType = deviceType;
    this.#opts = opts;
    this.#keepAll = opts.keep ?? false;
    this.#level = validationLevel(opts.validate);
    this.#getNext = readStreamField(h.mem, h.s, h.ptr, 'get_next');
    registry.register(this, h, h);
    // Only the method of the struct this reader holds: a consumer that finds a protocol method can call it.
    const device = h.s.kind === 'device';
    Object.defineProperty(this, device ? ArrowSymbols.deviceStream : ArrowSymbols.stream, {
      value: (requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ExportHandle =>
        this.#handOn(requestedSchema, options, device),
      configurable: true,
    });
  }

  /** Exchange protocol: the stream's schema as an owned `ArrowSchema` handle (the reader is unchanged). */
  [ArrowSymbols.schema](): ExportHandle {
    return schemaHandle(this.#h.mem, this.schemaNode);
  }

  #handOn(requested: unknown, options: unknown, device: boolean): ExportHandle {
    const h = this.#h;
    const path = `reader[arrow.c_${device ? 'device_' : ''}stream]`;
    if (device) checkDeviceExportOptions(options, path);
    checkRequestedSchema(requested, this.schemaNode, path);
    if (h.released) throw new ArrowDeviceError('released', h.s.path, `the stream is released (${h.why})`);
    if (this.#inFlight) {
      // The producer is inside get_next on another thread: the struct must not move under it.
      throw invalid(h.s.path, 'a get_next is running off the JS thread (offThread): await the pending next() before handing the stream on');
    }
    this.#drop('stream-ended');
    const m = h.mem;
    const into = m.alloc(h.s.layout(m).size);
    try {
      h.moveTo(into);
    } catch (e) {
      m.free(into);
      throw e;
    }
    return ExportHandle.adopt(m, h.s.name, into);
  }

  /** Whether the producer's stream has been released (ended, failed, closed or released). */
  get released(): boolean {
    return this.#h.released;
  }

  /**
   * arrow-js `RecordBatchReader` spelling of `released` (kept for code written
   * against arrow-js readers; this library's own name is `released`).
   */
  get closed(): boolean {
    return this.#h.released;
  }

  /** How many batches `next()` has returned. */
  get batchesRead(): number {
    return this.#count;
  }

  /** arrow-js `RecordBatchReader`: true, the reader can be read synchronously (`next()`, `for...of`). */
  isSync(): true {
    return true;
  }

  /** arrow-js `RecordBatchReader`: false, it is not an async-only reader (`for await` works all the same). */
  isAsync(): false {
    return false;
  }

  /** arrow-js `RecordBatchReader`: true, a stream of batches. */
  isStream(): true {
    return true;
  }

  /** arrow-js `RecordBatchReader`: false, not an IPC file. */
  isFile(): false {
    return false;
  }

  /** The reader is its own iterator: `for (const batch of reader)` calls `next()`. */
  [Symbol.iterator](): this {
    return this;
  }

  /**
   * The same batches as an async iterator (`for await`). Each `next()`
   * calls `get_next` on the JS thread, unless the reader was made with
   * `offThread: true`: then on a worker thread, and the event loop runs
   * while the producer works. Leaving the loop early releases the stream,
   * as `for...of` does.
   */
  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    const off = this.#opts.offThread === true;
    const next = off
      ? (): Promise<IteratorResult<T, undefined>> => this.#enqueue(async () => this.#settle(await this.#nextOffThread()))
      : async (): Promise<IteratorResult<T, undefined>> => this.#settle(this.#step(true));
    const end = off
      ? (): Promise<IteratorResult<T, undefined>> => this.#enqueue(async () => this.return())
      : async (): Promise<IteratorResult<T, undefined>> => this.return();
    return {
      next,
      return: end,
      throw: end,
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /**
   * Keeps `batch` (one this reader returned) alive past the reader's next
   * step: it is the caller's from now on, released by its `release()`,
   * `using`, or the garbage collector. Returns it.
   */
  keep<U extends T>(batch: U): U {
    if (batch === this.#current) this.#current = null;
    return batch;
  }

  /** Releases the batch handed out last unless it was kept. */
  #drop(reason: 'stream-advanced' | 'stream-ended'): void {
    const b = this.#current;
    if (!b) return;
    this.#current = null;
    if (isDeviceArray(b)) b.release();
    else releaseObject(b, reason);
  }

  /**
   * Calls the producer's `get_next` and imports the batch. Returns
   * `{ done: true }` at the end of the stream, after releasing it. The
   * batch returned before is released first unless it was kept.
   */
  next(): IteratorResult<T, undefined> {
    return this.#step(false);
  }

  /**
   * A step of `next()`. `later`: a step of the async iterator, where an item
   * of a device read asynchronously (WebGPU) is taken now and checked by
   * `#settle`; the synchronous `next()` refuses a level that must read one.
   */
  #step(later: boolean): IteratorResult<T, undefined> {
    if (this.#inFlight) {
      throw invalid(this.#h.s.path, 'a get_next is running off the JS thread (offThread): await the pending next() of the async iterator first');
    }
    if (this.#endNextStep) return this.#endedByRelease();
    const pre = this.#takePending();
    if (pre !== undefined) return this.#finish(pre.out, pre.rc, later);
    const out = this.#begin();
    const h = this.#h;
    let rc: number;
    try {
      rc = h.mem.call(this.#getNext, GET_NEXT_SIG, h.ptr, out) as number;
    } catch (e) {
      h.mem.free(out);
      h.release('it failed');
      throw e;
    }
    return this.#finish(out, rc, later);
  }

  /**
   * The asynchronous end of an async iterator's step: an item taken for
   * later (`#step(true)`) gets its level's device reads, awaited, and with
   * `toHost` becomes its host copy. On failure the item and the stream are
   * released.
   */
  #settle(r: IteratorResult<T, undefined>): IteratorResult<T, undefined> | Promise<IteratorResult<T, undefined>> {
    const b = r.value;
    // Only a stream of a device read asynchronously takes its items for later (#importItem).
    if (r.done || !isDeviceArray(b) || this.deviceType === undefined || !device().readsAsync(this.deviceType)) return r;
    return this.#settleDevice(b);
  }

  async #settleDevice(b: DeviceArray): Promise<IteratorResult<T, undefined>> {
    let value: T;
    try {
      value = (await device().settleDeviceWith(b, this.#opts, this.#build(this.#h.s.path))) as T;
    } catch (e) {
      if (this.#current === b) this.#current = null;
      this.#h.release('it failed');
      throw e;
    }
    if (this.#current === b) this.#current = value;
    return { done: false, value };
  }

  /** Runs `op` after every off-thread step queued before it (calls on a stream are never concurrent). */
  #enqueue<R>(op: () => Promise<R>): Promise<R> {
    const p = this.#queue.then(op);
    this.#queue = p.catch(() => undefined);
    return p;
  }

  /**
   * `next()` with `get_next` on a worker thread (`offThread`). The JS thread
   * is free meanwhile; `#inFlight` keeps every other use of the stream out
   * until the call returns.
   */
  async #nextOffThread(): Promise<IteratorResult<T, undefined>> {
    if (this.#endNextStep) return this.#endedByRelease();
    const pre = this.#takePending();
    if (pre !== undefined) return this.#finish(pre.out, pre.rc, true);
    const out = this.#begin();
    const h = this.#h;
    const m = h.mem;
    let rc: number;
    this.#inFlight = true;
    try {
      // Our own JS get_next needs the JS thread anyway: call it there, without the thread hop.
      rc = (m.isOwnCallback?.(this.#getNext) ? m.call(this.#getNext, GET_NEXT_SIG, h.ptr, out) : await m.callAsync(this.#getNext, GET_NEXT_SIG, h.ptr, out)) as number;
    } catch (e) {
      this.#inFlight = false;
      m.free(out);
      h.release('it failed');
      throw e;
    }
    this.#inFlight = false;
    const why = this.#closeWhenDone;
    if (why !== null) {
      // release() came while the producer worked: what it produced goes back, then the stream.
      this.#closeWhenDone = null;
      try {
        if (rc === 0) releaseStruct(m, h.s.kind === 'device' ? 'ArrowDeviceArray' : 'ArrowArray', out);
      } finally {
        m.free(out);
        h.release(why);
      }
      return { done: true, value: undefined };
    }
    return this.#finish(out, rc, true);
  }

  #endedByRelease(): IteratorResult<T, undefined> {
    this.#endNextStep = false;
    return { done: true, value: undefined };
  }

  /** The start of a step: the stream must be live; the batch handed out before is released; a zeroed struct for `get_next`. */
  #begin(): Ptr {
    const h = this.#h;
    if (h.released) throw new ArrowDeviceError('released', h.s.path, `the stream is released (${h.why})`);
    this.#drop('stream-advanced');
    // A fresh zeroed struct per call: on success the batch's owner adopts it as it is (no move, no copy).
    return h.mem.alloc(h.s.out(h.mem).size);
  }

  /** The start of a step served by a result read ahead (`StreamPrefetch`), if one is left: as `#begin`, without a call. */
  #takePending(): PrefetchedItem | undefined {
    const h = this.#h;
    if (h.pending.length === 0 || h.released) return undefined;
    this.#drop('stream-advanced');
    return h.takePending();
  }

  /** The end of a step: what `get_next` returned (`rc`) and put in `out` becomes the next item, the end, or an error. */
  #finish(out: Ptr, rc: number, later: boolean): IteratorResult<T, undefined> {
    const h = this.#h;
    const s = h.s;
    const m = h.mem;
    const i = this.#count;
    const kind = s.kind === 'device' ? 'ArrowDeviceArray' : 'ArrowArray';
    if (rc !== 0) {
      m.free(out);
      throw failed(h, producerError(h, 'get_next', rc, ` for batch ${i}`), this.#opts.onProducerError);
    }
    if (isReleased(m, kind, out)) {
      m.free(out);
      h.release('it ended');
      return { done: true, value: undefined };
    }
    const path = `${s.path}.batches[${i}]`;
    try {
      if (s.kind === 'device') checkDeviceHeader(m, out, this.deviceType!, path);
    } catch (e) {
      releaseStruct(m, kind, out);
      m.free(out);
      h.release('it failed');
      throw e;
    }
    let batch: T;
    try {
      batch = this.#importItem(m, out, kind, path, later);
    } catch (e) {
      h.release('it failed');
      throw e;
    }
    this.#count++;
    if (!this.#keepAll) this.#current = batch;
    return { done: false, value: batch };
  }

  /**
   * One item from `out` (our allocation, filled by get_next), through the one
   * import path: a CPU array is adopted as it is (no move); device memory goes
   * through the device importers (host-readable kinds after their event,
   * others as a `DeviceArray`), which move it out of `out`. On failure the
   * array has been released and `out` freed.
   */
  #importItem(m: Memory, out: Ptr, kind: 'ArrowArray' | 'ArrowDeviceArray', path: string, later: boolean): T {
    const opts = this.#opts;
    if (this.deviceType === undefined || this.deviceType === DeviceType.CPU) {
      const owner = new ImportOwner(m, out, kind);
      return importWith(owner, this.#plan, opts, this.#level, path, this.#build(path)) as T;
    }
    try {
      const d = device();
      if (later && d.readsAsync(this.deviceType)) {
        return d.importDeviceArrayLater(out, this.schemaNode, opts) as T;
      }
      // An arrow-js batch refuses a type arrow-js lacks before the struct is taken (as importDeviceRecordBatch).
      const form = opts.target !== undefined || opts.view ? PlanOf.Array : PlanOf.Batch;
      return d.importDeviceWith(out, this.schemaNode, opts, form, this.#build(path)) as T;
    } catch (e) {
      throw prefixPath(e, path);
    } finally {
      m.free(out);
    }
  }

  /** What an item is built as over its record: the target's, an `ArrayView` (`view`), or an arrow-js record batch. */
  #build(path: string): (read: ImportRead) => object {
    const t = this.#opts.target;
    const plan = this.#plan;
    if (t !== undefined) return (read) => t.item(read, plan);
    if (this.#opts.view) return (read) => viewOf(read, plan.root, 0);
    return arrowjs(path).buildBatch;
  }

  /** Leaves the iteration early: releases the stream. Called by `for...of` on `break`, `return` and throw. */
  return(): IteratorResult<T, undefined> {
    this.#end('it was closed');
    return { done: true, value: undefined };
  }

  /** As `return()`: releases the stream (arrow-js readers do the same). */
  throw(): IteratorResult<T, undefined> {
    return this.return();
  }

  /** arrow-js `RecordBatchReader.cancel()`: releases the stream. */
  cancel(): void {
    this.release();
  }

  /**
   * Releases the producer's stream now, and the batch handed out last unless
   * it was kept; kept batches stay valid. Idempotent. After a batch was
   * handed out, the next step returns `{ done: true }` (a loop releasing
   * its own reader ends); steps after that throw.
   */
  release(): void {
    if (this.#count > 0 && !this.#h.released && !this.#inFlight) this.#endNextStep = true;
    this.#end('it was released');
  }

  #end(why: string): void {
    if (this.#inFlight) {
      // The producer is inside get_next on another thread: release when it returns (never concurrently).
      this.#closeWhenDone ??= why;
      return;
    }
    try {
      this.#drop('stream-ended');
    } finally {
      this.#h.release(why);
    }
  }

  /** `release()`: what the end of a `using` scope calls. */
  [Symbol.dispose](): void {
    this.release();
  }

  /** Reads every remaining batch and keeps them all (the stream is released at its end). */
  readAll(): T[] {
    this.#current = null;
    this.#keepAll = true;
    const out: T[] = [];
    for (let r = this.next(); !r.done; r = this.next()) out.push(r.value);
    return out;
  }

  /**
   * Reads every remaining batch into a `Table` (of this schema when the
   * stream is empty) that keeps them: `table.release()` releases them all.
   */
  toTable(): TT {
    if (this.#opts.view) throw invalid('toTable', 'a reader of ArrayViews ({ view: true }) has no Table form: use readAll()');
    return this.#tableOf(this.readAll(), 'toTable');
  }

  /**
   * `readAll()` through the async iterator: with `offThread`, every
   * `get_next` runs on a worker thread and the event loop runs meanwhile.
   * On an error, the batches read so far are released before it is thrown.
   */
  async readAllAsync(): Promise<T[]> {
    this.#current = null;
    this.#keepAll = true;
    const out: T[] = [];
    try {
      for await (const b of this) out.push(b);
    } catch (e) {
      for (const b of out) {
        if (isDeviceArray(b)) b.release();
        else releaseObject(b, 'stream-ended');
      }
      throw e;
    }
    return out;
  }

  /** `toTable()` through the async iterator (see `readAllAsync`): off the JS thread with `offThread`. */
  async toTableAsync(): Promise<TT> {
    if (this.#opts.view) throw invalid('toTableAsync', 'a reader of ArrayViews ({ view: true }) has no Table form: use readAllAsync()');
    return this.#tableOf(await this.readAllAsync(), 'toTableAsync');
  }

  #tableOf(items: T[], what: string): TT {
    for (const b of items) {
      if (isDeviceArray(b)) {
        for (const i of items) if (isDeviceArray(i)) i.release();
        throw unsupported(what, `a stream of ${b.deviceTypeName} memory yields DeviceArrays: copy each to the host (toHostRecordBatch())`);
      }
    }
    const t = this.#opts.target;
    if (t !== undefined) return t.table(items, this.schemaNode, what) as TT;
    return arrowjs(what).importedTable(items as ImportedRecordBatch[], this.schema as Schema) as TT;
  }
}

/** Copies the producer's `get_last_error` text at once; null when there is none. */
function lastErrorText(h: StreamHandle): string | null {
  const m = h.mem;
  const fn = readStreamField(m, h.s, h.ptr, 'get_last_error');
  if (fn === 0n) return null;
  let p: Ptr;
  try {
    p = m.call(fn, GET_LAST_ERROR_SIG, h.ptr) as Ptr;
  } catch {
    return null;
  }
  if (p === 0n) return null;
  try {
    return lenientUtf8.decode(m.readCStringBytes(p, MAX_ERROR_BYTES));
  } catch {
    return null;
  }
}

function producerError(h: StreamHandle, op: 'get_schema' | 'get_next', rc: number, where = ''): StreamProducerError {
  const text = lastErrorText(h);
  const detail = `the producer returned ${errnoName(rc)} (${rc})${where}${text !== null ? `: ${text}` : ', with no error message'}`;
  return new StreamProducerError(`${h.s.path}.${op}`, detail, rc, op, text);
}

/**
 * A failed stream: the `onProducerError` hook sees it while it is live, then
 * it is released (exactly once, whatever the hook does). Returns the error
 * to throw: the hook's if it returned or threw one, else `err`.
 */
function failed(h: StreamHandle, err: StreamProducerError, hook: StreamImportOptions['onProducerError']): unknown {
  let out: unknown = err;
  try {
    if (hook) {
      const r = hook(h.ptr, err);
      if (r instanceof Error) out = r;
      else if (r !== undefined) out = invalid('onProducerError', `returned ${typeof r}: expected an Error or nothing`);
    }
  } catch (e) {
    out = e;
  } finally {
    h.release('it failed');
  }
  return out;
}

/** Moves the stream struct at `src` into our memory, checks it, reads the schema. Consumes the stream on failure. */
function importStream<T extends StreamItem>(src: Ptr, s: StreamStruct, opts: StreamImportOptions, prefetch?: StreamPrefetch): RecordBatchStreamImport<T> {
  const m = opts.memory ?? nativeMemory();
  streamPtrArg(src, 'ptr', m, s === DEVICE_STREAM);
  if (src === 0n) throw invalid(s.path, 'NULL pointer');
  if (isStreamReleased(m, s, src)) throw new ArrowDeviceError('released', s.path, 'the struct is released (release is NULL)');
  const h = new StreamHandle(m, s, moveToNew(m, s.name, src));
  if (prefetch !== undefined) h.setPending(prefetch.items);
  let schemaSlot = prefetch?.schema;
  try {
    for (const f of ['get_schema', 'get_next'] as const) {
      if (readStreamField(m, s, h.ptr, f) === 0n) throw invalid(`${s.path}.${f}`, 'NULL callback');
    }
    // Its callbacks (and, in practice, its items' release) are called later, maybe after the
    // producer's library handle is gone.
    for (const f of ['get_next', 'release'] as const) m.keepLoaded?.(Number(readStreamField(m, s, h.ptr, f)));
    let deviceType: number | undefined;
    if (s.kind === 'device') {
      deviceType = readField(m, access(m.target).ArrowDeviceArrayStream.device_type, h.ptr);
      if (deviceTypeName(deviceType) === undefined) throw invalid(`${s.path}.device_type`, `unknown device type ${deviceType}`);
    }
    validationLevel(opts.validate);
    if (opts.onProducerError !== undefined && typeof opts.onProducerError !== 'function') {
      throw invalid('onProducerError', `expected a function, got ${typeof opts.onProducerError}`);
    }
    const read = schemaSlot;
    schemaSlot = undefined; // readStreamSchema releases and frees it, whatever happens
    const node = readStreamSchema(h, opts.onProducerError, read);
    let plan: Plan;
    let schema: unknown;
    try {
      plan = planOfNode(node, opts);
      // The target's schema made now, as the arrow-js one: a schema the target cannot read fails the import.
      if (opts.target !== undefined) schema = opts.target.schema(node);
      else if (!opts.view) plan.batch();
    } catch (e) {
      throw prefixPath(e, s.path);
    }
    return new RecordBatchStreamImport<T>(h, node, plan, deviceType, opts, schema);
  } catch (e) {
    if (schemaSlot !== undefined) {
      try {
        if (schemaSlot.rc === 0) releaseStruct(m, 'ArrowSchema', schemaSlot.slot);
      } finally {
        m.free(schemaSlot.slot);
      }
    }
    h.release('it failed');
    throw e;
  }
}

/** One `get_next` result read ahead: the status it returned, and the struct it filled (our allocation). */
export interface PrefetchedItem {
  readonly out: Ptr;
  readonly rc: number;
}

/** A result read ahead as the stream holds it: whether it holds a batch to release, found once. */
interface Pending extends PrefetchedItem {
  readonly live: boolean;
}

/**
 * @internal What a native run (src/adbc/run.ts) read of a stream before the stream was imported, in
 * the order of the calls: `get_schema`'s status and the `ArrowSchema` it filled, then `get_next`'s
 * results (the last may be the end or a failure; nothing is read after either). Every struct is our
 * allocation; the import owns them all from the call on, whether it succeeds or not.
 */
export interface StreamPrefetch {
  readonly schema: { readonly slot: Ptr; readonly rc: number };
  readonly items: PrefetchedItem[];
}

/**
 * @internal `importArrayStream` of a stream whose schema, and maybe first batches, were read already
 * (`StreamPrefetch`): the reader's first steps hand those out, then it calls `get_next` itself. Only
 * for a stream of our native memory whose reader nobody hands on (arrow-device/adbc's `query`).
 */
export function importArrayStreamPrefetched(ptr: Ptr, opts: StreamImportOptions, prefetch: StreamPrefetch): RecordBatchStreamImport<StreamItem> {
  return importStream(ptr, ARRAY_STREAM, opts, prefetch);
}

function readStreamSchema(h: StreamHandle, hook: StreamImportOptions['onProducerError'], read?: StreamPrefetch['schema']): SchemaNode {
  const m = h.mem;
  const s = h.s;
  const slot = read?.slot ?? m.alloc(m.layouts.ArrowSchema.size);
  try {
    const rc = read !== undefined ? read.rc : (m.call(readStreamField(m, s, h.ptr, 'get_schema'), GET_SCHEMA_SIG, h.ptr, slot) as number);
    if (rc !== 0) throw failed(h, producerError(h, 'get_schema', rc), hook);
    if (isReleased(m, 'ArrowSchema', slot)) {
      throw invalid(`${s.path}.get_schema`, 'returned 0 but left the schema released');
    }
    try {
      const node = readSharedSchema(m, slot, 'schema');
      if (node.type.id !== 'struct') {
        throw unsupported('schema.format', `a stream of "${node.format}" arrays is not a stream of record batches (struct "+s")`);
      }
      return node;
    } catch (e) {
      throw prefixPath(e, s.path);
    }
  } finally {
    // A conforming release sets release to NULL itself; releaseStruct makes sure of it, so never twice.
    releaseStruct(m, 'ArrowSchema', slot);
    m.free(slot);
  }
}

/**
 * Imports an `ArrowArrayStream` (CStreamInterface.rst) as a
 * `RecordBatchStreamImport`: moves the struct out of `ptr` (the caller may
 * free it at once), reads the schema with `get_schema`, and pulls batches
 * on demand with `get_next`. On failure the stream has been released.
 * Options apply to each batch as in `importRecordBatch` (`validate`,
 * `copy`, `expand`).
 *
 * Threads: `get_next` runs on the calling (JS) thread and blocks it until
 * the producer returns. A producer that needs the JS thread meanwhile (a
 * JS-backed stream exported on another thread's behalf) would deadlock.
 * With `offThread: true`, `for await` runs each `get_next` on a worker
 * thread and the event loop stays free (`get_schema` still runs here, at
 * import).
 *
 * `ptr` may be an object of the exchange protocol (PROTOCOL.md) implementing
 * `arrow.c_stream` (then `opts` may add `requestedSchema`): its handle's
 * stream is moved into the reader and the handle disposed.
 *
 * @example
 * const stream = allocArrowArrayStream();
 * nativeLib.make_stream(stream);            // the producer fills it
 * const reader = importArrayStream(stream);
 * freeArrowArrayStream(stream);             // moved out: only frees the memory
 * const table = reader.toTable();
 *
 * @example
 * const reader = importArrayStream(arrowExportable(table)); // any arrow.c_stream object
 */
export function importArrayStream(ptr: Ptr | ArrowStreamExportable, opts: StreamExchangeOptions & { view: true }): RecordBatchStreamImport<ArrayView> & StreamHandOn;
export function importArrayStream(ptr: Ptr | ArrowStreamExportable, opts?: StreamExchangeOptions): RecordBatchStreamImport<ImportedRecordBatch> & StreamHandOn;
export function importArrayStream(ptr: Ptr | ArrowStreamExportable, opts: StreamExchangeOptions = {}): RecordBatchStreamImport<ImportedRecordBatch | ArrayView> & StreamHandOn {
  if (isArrowExportable(ptr)) return viaStream(ptr, ArrowSymbols.stream, ARRAY_STREAM, opts, 'importArrayStream') as RecordBatchStreamImport<ImportedRecordBatch> & StreamHandOn;
  return importStream(ptr, ARRAY_STREAM, opts) as RecordBatchStreamImport<ImportedRecordBatch> & StreamHandOn;
}

/** The hand-on method of a reader of an `ArrowArrayStream` (exchange protocol; see `RecordBatchStreamImport`). */
export interface StreamHandOn {
  /** `arrow.c_stream`: hands the rest of the stream on as an owned `ArrowArrayStream` handle (moved: the reader is released). */
  [ArrowSymbols.stream](requestedSchema?: ArrowSchemaExportable | null): ExportHandle;
}

/** The hand-on method of a reader of an `ArrowDeviceArrayStream` (exchange protocol; see `RecordBatchStreamImport`). */
export interface DeviceStreamHandOn {
  /** `arrow.c_device_stream`: hands the rest of the stream on as an owned `ArrowDeviceArrayStream` handle (moved: the reader is released). */
  [ArrowSymbols.deviceStream](requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ExportHandle;
}

/** Options of a stream import from a protocol object: the reader's, and `requestedSchema`. */
export type StreamExchangeOptions = StreamImportOptions & ExchangeImportOptions;

/** A stream import from a protocol object: the handle's stream is moved into the reader, then the handle disposed. */
function viaStream<T extends StreamItem>(
  source: object,
  sym: typeof ArrowSymbols.stream | typeof ArrowSymbols.deviceStream,
  s: StreamStruct,
  optsArg: unknown,
  fn: string,
): RecordBatchStreamImport<T> {
  const o = exchangeOptions<StreamImportOptions>(optsArg, fn);
  return importFromHandle(source, sym, o, (p, m) => importStream<T>(p, s, { ...o, memory: m }), (r) => r.release());
}

// `importTable(source)` of a stream (array/api.ts) reads it here.
setStreamTableImporter((source, opts) => viaStream<ImportedRecordBatch>(source, ArrowSymbols.stream, ARRAY_STREAM, opts, 'importTable').toTable());

/**
 * Imports an `ArrowDeviceArrayStream` (CDeviceDataInterface.rst) as a
 * `RecordBatchStreamImport`, like `importArrayStream`, under the same
 * ownership rules. Every array's `device_type` is checked against the
 * stream's (Arrow C++ does not check it), and its device fields as for a
 * single device array (`reserved` zero, a CPU array without an event, a
 * CUDA array naming a device). What each item is follows the stream's
 * device, as for `importDeviceRecordBatch`: CPU arrays are zero-copy
 * record batches; CUDA_HOST and CUDA_MANAGED arrays too, after waiting on
 * their `sync_event`; anything else (CUDA device memory, OpenCL, ...) a
 * `DeviceArray` handle exposing its `syncEvent` (copy it with
 * `toHostRecordBatch()`, pass it on with `exportTo`, or release it), or,
 * with `toHost: true`, a host copy of it (then every item is a record batch).
 *
 * `ptr` may be an object of the exchange protocol (PROTOCOL.md) implementing
 * `arrow.c_device_stream`, or only `arrow.c_stream` (a producer without device
 * methods has CPU data: its plain stream is read as such, and the reader then
 * hands it on as `arrow.c_stream`).
 *
 * @example
 * const reader = importDeviceArrayStream(deviceStreamPtr);
 * for (const item of reader) {
 *   if (item instanceof DeviceArray) use(item.toHostRecordBatch()); // device memory
 *   else use(item);                                                 // a RecordBatch
 * }
 */
export function importDeviceArrayStream(ptr: Ptr | DeviceStreamSource, opts: StreamExchangeOptions & { view: true; toHost: true }): RecordBatchStreamImport<ArrayView> & AnyStreamHandOn;
export function importDeviceArrayStream(ptr: Ptr | DeviceStreamSource, opts: StreamExchangeOptions & { view: true }): RecordBatchStreamImport<ArrayView | DeviceArray> & AnyStreamHandOn;
export function importDeviceArrayStream(ptr: Ptr | DeviceStreamSource, opts: StreamExchangeOptions & { toHost: true }): RecordBatchStreamImport<ImportedRecordBatch> & AnyStreamHandOn;
export function importDeviceArrayStream(ptr: Ptr | DeviceStreamSource, opts?: StreamExchangeOptions): RecordBatchStreamImport<ImportedRecordBatch | DeviceArray> & AnyStreamHandOn;
export function importDeviceArrayStream(ptr: Ptr | DeviceStreamSource, opts: StreamExchangeOptions = {}): RecordBatchStreamImport<ImportedRecordBatch | ArrayView | DeviceArray> & AnyStreamHandOn {
  device(); // set by src/stream/device.ts, the module that makes this function public: checked before a struct is touched
  if (isArrowExportable(ptr)) {
    // A producer without the device method has CPU data (PyCapsuleInterface.rst, "Device Support"):
    // its plain stream is read as it is.
    if (!hasArrowMethod(ptr, ArrowSymbols.deviceStream) && hasArrowMethod(ptr, ArrowSymbols.stream)) {
      return viaStream(ptr, ArrowSymbols.stream, ARRAY_STREAM, opts, 'importDeviceArrayStream') as RecordBatchStreamImport<ImportedRecordBatch> & AnyStreamHandOn;
    }
    return viaStream(ptr, ArrowSymbols.deviceStream, DEVICE_STREAM, opts, 'importDeviceArrayStream') as RecordBatchStreamImport<ImportedRecordBatch> & AnyStreamHandOn;
  }
  return importStream(ptr, DEVICE_STREAM, opts) as RecordBatchStreamImport<ImportedRecordBatch> & AnyStreamHandOn;
}

/**
 * The hand-on method of a device stream import's reader: `arrow.c_device_stream`,
 * or `arrow.c_stream` when it read a producer's plain stream (a producer with no device method).
 */
export type AnyStreamHandOn = StreamHandOn | DeviceStreamHandOn;

/** What `importDeviceArrayStream` takes besides a pointer: an object implementing `arrow.c_device_stream` (or, for CPU data, `arrow.c_stream`). */
export type DeviceStreamSource = ArrowDeviceStreamExportable | ArrowStreamExportable;

/** A device type code as a name for messages: `CUDA (2)`, or `unknown (99)`. */
function deviceLabel(code: number): string {
  return `${deviceTypeName(code) ?? 'unknown'} (${code})`;
}

/**
 * Checks the `ArrowDeviceArray` header of a stream's array: its
 * `device_type` must be the stream's (Arrow C++ does not check this; we do),
 * then the device layer's checks (reserved zero, a CPU array without an
 * event, a sane `device_id`).
 */
function checkDeviceHeader(m: Memory, ptr: Ptr, streamDeviceType: number, path: string): void {
  const deviceType = readField(m, access(m.target).ArrowDeviceArray.device_type, ptr);
  if (deviceType !== streamDeviceType) {
    throw invalid(`${path}.device_type`, `the array is on ${deviceLabel(deviceType)} but the stream's device_type is ${deviceLabel(streamDeviceType)}`);
  }
  device().readDeviceFields(m, ptr, path);
}
