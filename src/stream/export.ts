/**
 * Export of arrow-js record batches as an `ArrowArrayStream` or a CPU
 * `ArrowDeviceArrayStream`: a pull-style C stream whose callbacks run JS.
 *
 * One C callback is registered per callback kind and stream struct (eight
 * in all, ever), dispatching on `private_data`, which holds the id of the
 * stream's record (src/memory/registry.ts). The record holds the JS source
 * until the consumer calls the stream's `release`.
 *
 * Errors never cross into C as exceptions: anything the JS source throws,
 * and anything that stops a batch from being exported, becomes an errno
 * code (toErrno) and a message that `get_last_error` returns. The string
 * lives in the stream's memory until the next callback or `release`. An
 * error is final: every later `get_next` returns it again.
 */
import type { RecordBatch, RecordBatchReader, Schema, Table } from 'apache-arrow';
import { DeviceType, Errno } from '../abi/constants.js';
import { streamPtrArg } from '../args.js';
import { memoryOf, type MemoryOption } from '../array/core.js';
import { writeArrayView } from '../array/export.js';
import { ArrowDeviceError, invalid, toErrno, unsupported } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import { checkOwned } from '../memory/cstruct.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { ExportHandle } from '../memory/handle.js';
import { defineCallback, HandleTable } from '../memory/registry.js';
import { access } from '../abi/accessors.js';
import { arena, rawOf, reserve, writeField } from '../memory/raw.js';
import { nodeOfSchemaLike, writeNodeCached } from '../schema/write.js';
import type { SchemaNode } from '../schema/node.js';
import type { DeviceArray } from '../device/device-array.js';
import type { ArrayView } from '../array/view.js';
import {
  ARRAY_STREAM, DEVICE_STREAM, GET_LAST_ERROR_SIG, GET_NEXT_SIG, GET_SCHEMA_SIG, RELEASE_SIG, readStreamField, streamField,
  isStreamReleased, releaseStreamStruct, type StreamStruct,
} from './struct.js';

/**
 * What a device stream uses of the device layer, given by src/stream/device.ts when it loads, so that
 * a plain stream (and `arrow-device/adbc`) loads no device code. Only `exportDeviceArrayStream` makes
 * a device stream, and it is public only through src/stream/device.ts; before that module loads no
 * `DeviceArray` exists for a plain stream to be given.
 */
export interface DeviceStreamExports {
  DeviceArray: typeof import('../device/device-array.js').DeviceArray;
  writeDeviceFields: typeof import('../device/export.js').writeDeviceFields;
}

let deviceLayer: DeviceStreamExports | undefined;

/** Called once by src/stream/device.ts. */
export function setDeviceStreamExports(d: DeviceStreamExports): void {
  deviceLayer = d;
}

function device(): DeviceStreamExports {
  if (deviceLayer === undefined) throw new Error('arrow-device internal error: a device stream exported before src/stream/device.ts was loaded');
  return deviceLayer;
}

/**
 * What a stream of arrow-js batches needs of the arrow-js target, given by src/stream/arrowjs.ts when it
 * loads: which sources and items are arrow-js objects, their schema nodes, and how a batch is written.
 * Before it loads no arrow-js object can have come from this library's arrow-js entry, and a stream
 * of `ArrayView`s (the flechette target's) needs none of it.
 */
export interface StreamArrowJsExports {
  /** An arrow-js `Table`'s or synchronous `RecordBatchReader`'s batches and schema; undefined for any other source. */
  open(source: object, path: string): { iterator: Iterator<StreamExportItem>; schema: Schema | SchemaNode | undefined } | undefined;
  isBatch(x: unknown): x is RecordBatch;
  batchNode(b: RecordBatch): SchemaNode;
  writeBatch(mem: Memory, b: RecordBatch, out: Ptr): void;
}

let arrowLayer: StreamArrowJsExports | undefined;

/** Called once by src/stream/arrowjs.ts. */
export function setStreamArrowJsExports(a: StreamArrowJsExports): void {
  arrowLayer = a;
}

function isBatch(x: unknown): x is RecordBatch {
  return arrowLayer !== undefined && arrowLayer.isBatch(x);
}

function isDeviceArray(x: unknown): x is DeviceArray {
  return deviceLayer !== undefined && x instanceof deviceLayer.DeviceArray;
}

/**
 * What a stream carries: arrow-js record batches, struct `ArrayView`s
 * (every type of the spec, with `options.schema` as a `SchemaNode` or
 * taken from the first view), or, on a device stream, `DeviceArray`s of
 * the stream's device (moved out with their `sync_event`).
 */
export type StreamExportItem = RecordBatch | ArrayView | DeviceArray;

/** What a stream can be exported from: everything that yields its items synchronously. */
export type RecordBatchSource = Table | RecordBatchReader | Iterable<StreamExportItem>;

/** Options of `exportArrayStream` and `exportDeviceArrayStream`. */
export interface StreamExportOptions extends MemoryOption {
  /** Write into this stream struct (the consumer's memory) instead of allocating one. */
  into?: Ptr;
  /** Return an owned `ExportHandle` instead of the bare address (see `ExportOptions.handle`). Not with `into`. */
  handle?: boolean;
  /**
   * The stream's schema. Needed for an empty iterable; otherwise taken from
   * the source (a Table's or reader's schema, else the first batch's).
   * Every batch must have the same layout (formats, children, dictionaries).
   */
  schema?: Schema | SchemaNode;
  /**
   * A device stream's `device_type` (and `device_id` of its arrays). By
   * default the device of the first `DeviceArray` the source yields (read
   * ahead at export), else CPU.
   */
  deviceType?: number;
}

interface StreamRecord {
  readonly mem: Memory;
  readonly s: StreamStruct;
  /** The source's iterator; null once it has ended, failed or been closed. */
  iterator: Iterator<StreamExportItem> | null;
  /** An item read ahead to learn the schema (or device) of a plain iterable. */
  peeked: StreamExportItem | undefined;
  /** A device stream's device type (CPU for record batches and views). */
  deviceType: number;
  node: SchemaNode | undefined;
  /** Struct types of batches already checked against `node`. */
  readonly verified: WeakSet<object>;
  batches: number;
  /** Set on the first error; returned by every later get_next. */
  failed: { errno: number; message: string } | undefined;
  /** The NUL-terminated message `get_last_error` returns, in `mem`; 0n when none. */
  lastError: Ptr;
}

const records = new HandleTable<StreamRecord>();
const encoder = new TextEncoder();

/** The record of the stream struct at `ptr` if it is one of ours and live. */
function recordOf(mem: Memory, s: StreamStruct, ptr: Ptr): StreamRecord | undefined {
  const id = readStreamField(mem, s, ptr, 'private_data');
  const rec = id > 0n && id < 0x80000000n ? records.get(Number(id)) : undefined;
  return rec && rec.s === s && rec.mem === mem ? rec : undefined;
}

function clearLastError(rec: StreamRecord): void {
  if (rec.lastError !== 0n) {
    rec.mem.free(rec.lastError);
    rec.lastError = 0n;
  }
}

/** Makes `message` what get_last_error returns and gives back `errno`. Never throws. */
function fail(rec: StreamRecord, errno: number, message: string): number {
  try {
    clearLastError(rec);
    const bytes = encoder.encode(message.replaceAll('\0', ' '));
    const p = rec.mem.alloc(bytes.byteLength + 1); // zeroed: the NUL is there
    rec.mem.copyIn(p, bytes);
    rec.lastError = p;
  } catch {
    // No memory for the message: get_last_error returns NULL, the code still says what happened.
  }
  return errno === 0 ? Errno.EIO : errno;
}

/** Ends the source: lets a generator run its `finally` blocks. Never throws. */
function closeIterator(rec: StreamRecord): void {
  const it = rec.iterator;
  rec.iterator = null;
  rec.peeked = undefined;
  try {
    it?.return?.();
  } catch {
    // The source's own cleanup failed; nothing in the C interface can report it.
  }
}

/** The next item of the source, or undefined at its end. */
function pull(rec: StreamRecord): StreamExportItem | undefined {
  if (rec.peeked) {
    const b = rec.peeked;
    rec.peeked = undefined;
    return b;
  }
  if (!rec.iterator) return undefined;
  const r = rec.iterator.next();
  if (r.done) {
    rec.iterator = null;
    return undefined;
  }
  const b = r.value as unknown;
  if (isBatch(b) || isDeviceArray(b)) return b;
  if (isArrayView(b)) return b;
  throw invalid('', `the source yielded ${describe(b)}, not an arrow-js RecordBatch, an ArrayView or a DeviceArray`);
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'object') return `a ${(v as object).constructor?.name ?? 'object'}`;
  return `a ${typeof v}`;
}

/** The stream's schema node, reading ahead one batch if nothing else gives it. */
function streamNode(rec: StreamRecord): SchemaNode {
  if (rec.node) return rec.node;
  const first = pull(rec);
  if (!first) throw invalid('', 'the source is empty and no schema was given (pass options.schema)');
  rec.peeked = first;
  rec.node = itemNode(first);
  if (isBatch(first)) rec.verified.add(first.data.type);
  return rec.node;
}

/** Where two schema nodes differ in layout (format, children, dictionary), or undefined. Names and metadata may differ. */
function layoutDiff(a: SchemaNode, b: SchemaNode, path: string): string | undefined {
  if (a.format !== b.format) return `${path}.format: "${b.format}" where the stream has "${a.format}"`;
  if (a.children.length !== b.children.length) {
    return `${path}: ${b.children.length} children where the stream has ${a.children.length}`;
  }
  for (let i = 0; i < a.children.length; i++) {
    const d = layoutDiff(a.children[i]!, b.children[i]!, `${path}.children[${i}]`);
    if (d) return d;
  }
  if (!!a.dictionary !== !!b.dictionary) return `${path}.dictionary: present on one side only`;
  return a.dictionary && b.dictionary ? layoutDiff(a.dictionary, b.dictionary, `${path}.dictionary`) : undefined;
}

function getSchema(mem: Memory, s: StreamStruct, ptr: Ptr, out: Ptr): number {
  let rec: StreamRecord | undefined;
  try {
    rec = recordOf(mem, s, ptr);
    if (!rec) return Errno.EINVAL; // released, or not ours
    clearLastError(rec);
    if (!rec.node && rec.failed) return fail(rec, rec.failed.errno, rec.failed.message);
    writeNodeCached(mem, streamNode(rec), out);
    return 0;
  } catch (e) {
    if (!rec) return Errno.EIO;
    const { errno, message } = toErrno(e);
    const msg = message;
    if (!rec.node) {
      // The source failed before giving a schema: the stream cannot go on.
      rec.failed = { errno, message: msg };
      closeIterator(rec);
    }
    return fail(rec, errno, msg);
  }
}

function getNext(mem: Memory, s: StreamStruct, ptr: Ptr, out: Ptr): number {
  let rec: StreamRecord | undefined;
  try {
    rec = recordOf(mem, s, ptr);
    if (!rec) return Errno.EINVAL;
    clearLastError(rec);
    if (rec.failed) return fail(rec, rec.failed.errno, rec.failed.message);
    const node = streamNode(rec);
    const item = pull(rec);
    if (!item) {
      writeEnd(mem, s, out, rec.deviceType);
      return 0;
    }
    const key = isBatch(item) ? item.data.type : item.schema;
    if (!rec.verified.has(key)) {
      const d = layoutDiff(node, itemNode(item), 'schema');
      if (d) throw invalid('', `the batch does not match the stream's schema: ${d}`);
      rec.verified.add(key);
    }
    if (isDeviceArray(item)) {
      if (s.kind !== 'device') throw invalid('', 'a DeviceArray can only go through a device stream (exportDeviceArrayStream)');
      if (item.deviceType !== rec.deviceType) {
        throw invalid('', `a ${item.deviceTypeName} DeviceArray in a stream of device type ${rec.deviceType}: every array of a device stream is on the stream's device`);
      }
      // Moved out unchanged, with its sync_event: the consumer waits on it (CDeviceDataInterface.rst).
      item.exportTo(out);
    } else {
      if (rec.deviceType !== DeviceType.CPU) {
        throw invalid('', 'host data in a stream of device memory: export DeviceArrays of the stream\'s device (or copy them there)');
      }
      // Its layout is the stream's (checked above): exported as it is.
      if (isBatch(item)) arrowLayer!.writeBatch(mem, item, out);
      else writeArrayView(mem, item, out, false);
      if (s.kind === 'device') device().writeDeviceFields(mem, out, DeviceType.CPU, -1, 0n);
    }
    rec.batches++;
    return 0;
  } catch (e) {
    if (!rec) return Errno.EIO;
    const { errno, message } = toErrno(e);
    rec.failed = { errno, message };
    closeIterator(rec);
    return fail(rec, rec.failed.errno, rec.failed.message);
  }
}

/** The end of the stream: a released array (and, on a device stream, a header of the stream's device). */
function writeEnd(mem: Memory, s: StreamStruct, out: Ptr, deviceType: number): void {
  mem.copyIn(out, new Uint8Array(mem.layouts.ArrowArray.size));
  if (s.kind === 'device') device().writeDeviceFields(mem, out, deviceType, deviceType === DeviceType.CPU ? -1 : 0, 0n);
}

/** An item's schema node: a batch's as its data says, a view's or a device array's own. */
function itemNode(item: StreamExportItem): SchemaNode {
  return isBatch(item) ? arrowLayer!.batchNode(item) : item.schema;
}

function isArrayView(v: unknown): v is ArrayView {
  if (v === null || typeof v !== 'object') return false;
  const o = v as Partial<ArrayView>;
  return typeof o.length === 'number' && typeof o.schema === 'object' && o.schema !== null && Array.isArray(o.children);
}

function getLastError(mem: Memory, s: StreamStruct, ptr: Ptr): Ptr {
  try {
    return recordOf(mem, s, ptr)?.lastError ?? 0n;
  } catch {
    return 0n;
  }
}

function releaseStream(mem: Memory, s: StreamStruct, ptr: Ptr): void {
  try {
    const id = readStreamField(mem, s, ptr, 'private_data');
    const rec = id > 0n && id < 0x80000000n && recordOf(mem, s, ptr) ? records.take(Number(id)) : undefined;
    if (!rec) return; // not ours, or released already: never twice
    clearLastError(rec);
    closeIterator(rec);
    rec.node = undefined;
    liveCounters.liveExports--;
    writeField(mem, streamField(mem, s, 'release'), ptr, 0);
  } catch {
    // A release callback cannot fail in C; the record is gone either way.
  }
}


/** The four callbacks of each stream struct, defined at load (see CallbackCache on why not lazily). */
const STREAM_CALLBACKS = new Map(
  [ARRAY_STREAM, DEVICE_STREAM].map((s) => {
    const k = s.kind;
    return [
      s,
      {
        getSchema: defineCallback(`${k}_stream.get_schema`, GET_SCHEMA_SIG, (mem, p, o) => getSchema(mem, s, p as bigint, o as bigint)),
        getNext: defineCallback(`${k}_stream.get_next`, GET_NEXT_SIG, (mem, p, o) => getNext(mem, s, p as bigint, o as bigint)),
        getLastError: defineCallback(`${k}_stream.get_last_error`, GET_LAST_ERROR_SIG, (mem, p) => getLastError(mem, s, p as bigint)),
        release: defineCallback(`${k}_stream.release`, RELEASE_SIG, (mem, p) => releaseStream(mem, s, p as bigint)),
      },
    ] as const;
  }),
);

/** The four callbacks of stream struct `s` on `mem`. */
function streamCallbacks(mem: Memory, s: StreamStruct): { getSchema: Ptr; getNext: Ptr; getLastError: Ptr; release: Ptr } {
  const c = STREAM_CALLBACKS.get(s)!;
  return { getSchema: c.getSchema(mem), getNext: c.getNext(mem), getLastError: c.getLastError(mem), release: c.release(mem) };
}

/** The source's iterator and, where the source knows it, its schema. */
function open(source: RecordBatchSource, path: string): { iterator: Iterator<StreamExportItem>; schema: Schema | SchemaNode | undefined; known?: true } {
  // A Table or reader of arrow-js: its schema is known before any batch (no read-ahead for a device type either).
  const known = arrowLayer !== undefined && typeof source === 'object' && source !== null ? arrowLayer.open(source, path) : undefined;
  if (known !== undefined) return { ...known, known: true };
  const o = source as unknown as Record<symbol, unknown> | null;
  if (o !== null && typeof o === 'object' && typeof o[Symbol.iterator] === 'function') {
    return { iterator: (source as Iterable<StreamExportItem>)[Symbol.iterator](), schema: undefined };
  }
  if (o !== null && typeof o === 'object' && typeof o[Symbol.asyncIterator] === 'function') {
    throw asyncError(path, 'an AsyncIterable');
  }
  throw invalid(path, `expected a Table, a RecordBatchReader or an Iterable<RecordBatch>, got ${describe(source)}`);
}

/** The error of an async source: the C stream's pull is blocking (src/stream/arrowjs.ts throws it too). */
export function asyncSourceError(path: string, what: string): ArrowDeviceError {
  return asyncError(path, what);
}

function asyncError(path: string, what: string): ArrowDeviceError {
  return unsupported(
    path,
    `${what} cannot answer the blocking get_next of a C stream: export it through the async interface ` +
      '(ArrowAsyncDeviceStreamHandler) instead, or collect its batches first',
  );
}

function exportStream(source: RecordBatchSource, s: StreamStruct, opts: StreamExportOptions): Ptr | ExportHandle {
  const m = memoryOf(opts);
  if (opts.handle) {
    if (opts.into !== undefined) throw invalid('opts.into', 'a handle owns its struct (dispose frees it): { handle: true } writes into an allocation of its own, not into');
    return ExportHandle.adopt(m, s.name, exportStream(source, s, { ...opts, handle: false }) as Ptr);
  }
  const opened = open(source, 'source');
  const { iterator, schema } = opened;
  const rec: StreamRecord = {
    mem: m,
    s,
    iterator,
    peeked: undefined,
    deviceType: DeviceType.CPU,
    node: undefined,
    verified: new WeakSet(),
    batches: 0,
    failed: undefined,
    lastError: 0n,
  };
  try {
    const given = opts.schema ?? schema;
    if (given) rec.node = nodeOfSchemaLike(given, 'opts.schema');
    if (s.kind === 'device') {
      if (opts.deviceType !== undefined) rec.deviceType = opts.deviceType;
      else if (opened.known !== true) {
        // The stream's device_type is in the struct before any get_next: read ahead one item to learn it.
        // A source that fails there fails the stream (its get_next), as it would have without the read-ahead.
        try {
          const first = pull(rec);
          rec.peeked = first;
          if (isDeviceArray(first)) rec.deviceType = first.deviceType;
        } catch (e) {
          rec.failed = toErrno(e);
          closeIterator(rec);
        }
      }
    }
    const cb = streamCallbacks(m, s);
    const into = opts.into ?? m.alloc(s.layout(m).size);
    const id = records.add(rec);
    // The struct in scratch space (fresh arena bytes are zero), through the typed accessors, then one copy.
    const size = s.layout(m).size;
    const off = reserve(size);
    const dv = arena.dv;
    streamField(m, s, 'get_schema').setBig(dv, off, cb.getSchema);
    streamField(m, s, 'get_next').setBig(dv, off, cb.getNext);
    streamField(m, s, 'get_last_error').setBig(dv, off, cb.getLastError);
    streamField(m, s, 'release').setBig(dv, off, cb.release);
    streamField(m, s, 'private_data').set(dv, off, id);
    if (s.kind === 'device') access(m.target).ArrowDeviceArrayStream.device_type.set(dv, off, rec.deviceType);
    rawOf(m).writeFrom(Number(into), arena, off, size);
    liveCounters.liveExports++;
    return into;
  } catch (e) {
    closeIterator(rec);
    throw e;
  }
}

/**
 * Exports record batches as an `ArrowArrayStream` (CStreamInterface.rst):
 * from an arrow-js `Table`, a synchronous `RecordBatchReader`, or any
 * `Iterable<RecordBatch>` (a generator is pulled lazily, one batch per
 * `get_next`). Returns the struct's address: `opts.into` (a struct the
 * consumer allocated) or a new allocation the caller frees with
 * `freeArrowArrayStream` once the consumer has moved or released it.
 *
 * The consumer owns the stream and must call its `release` once; the JS
 * source is held until then (and a generator is closed then). Each batch
 * is exported zero-copy as by `exportArray` and lives independently of
 * the stream. An exception in the source, or a batch whose layout differs
 * from the schema, makes `get_next` return an errno code (EINVAL for bad
 * input, ENOMEM, EIO for anything else) and `get_last_error` its message;
 * the stream then stays failed. An `AsyncIterable` (or async
 * `RecordBatchReader`) cannot answer a blocking pull: it is refused with
 * an `unsupported` error that points to the async interface.
 *
 * Threads: the rule for users. A native consumer may call `get_next` (and
 * `release`) from threads of its own. The JS callbacks still run on the JS
 * thread: koffi queues each such call to the JS event loop and blocks the
 * calling thread until it has run. So the JS thread must be free while the
 * consumer reads: call such a consumer with koffi's async form (`fn.async`,
 * awaited), never synchronously. A synchronous call into a consumer that
 * calls back from another thread deadlocks: the JS thread waits for the
 * consumer, and the consumer waits for the JS thread. (A consumer that
 * calls back only on the thread that called it, such as our own
 * `importArrayStream`, may be called synchronously.)
 *
 * @example
 * const stream = exportArrayStream(table);
 * await new Promise((resolve, reject) =>  // koffi's async form: DuckDB pulls from its threads
 *   duckdb_arrow_scan.async(con, 'my_view', stream, (err, rc) => (err ? reject(err) : resolve(rc))));
 * // ... query the view, then:
 * freeArrowArrayStream(stream);  // releases it (DuckDB never does) and frees the struct
 *
 * @example
 * using stream = exportArrayStream(table, { handle: true });  // an owned handle
 * await new Promise((resolve, reject) =>
 *   duckdb_arrow_scan.async(con, 'my_view', stream.address, (err, rc) => (err ? reject(err) : resolve(rc))));
 */
export function exportArrayStream(source: RecordBatchSource, opts: StreamExportOptions & { handle: true }): ExportHandle;
export function exportArrayStream(source: RecordBatchSource, opts?: StreamExportOptions): Ptr;
export function exportArrayStream(source: RecordBatchSource, opts: StreamExportOptions = {}): Ptr | ExportHandle {
  return exportStream(source, ARRAY_STREAM, opts);
}

/**
 * Exports an `ArrowDeviceArrayStream`, otherwise exactly like
 * `exportArrayStream`. Record batches and `ArrayView`s leave as CPU arrays
 * (`device_type` CPU, `device_id` -1, a NULL `sync_event`, zero
 * `reserved`). `DeviceArray`s of one device (CUDA memory, say) leave as
 * they are, moved out of their handle with their `sync_event` (the
 * consumer waits on it): the stream's `device_type` is theirs (read ahead
 * from the first, or `options.deviceType`), and an array of another device
 * fails the `get_next` that meets it.
 *
 * @example
 * const stream = exportDeviceArrayStream(table);
 * nativeLib.consume_device_stream(stream); // see exportArrayStream for the thread rule
 */
export function exportDeviceArrayStream(source: RecordBatchSource, opts: StreamExportOptions & { handle: true }): ExportHandle;
export function exportDeviceArrayStream(source: RecordBatchSource, opts?: StreamExportOptions): Ptr;
export function exportDeviceArrayStream(source: RecordBatchSource, opts: StreamExportOptions = {}): Ptr | ExportHandle {
  device(); // set by src/stream/device.ts, the module that makes this function public: checked before anything is made
  return exportStream(source, DEVICE_STREAM, opts);
}

// --- struct helpers --------------------------------------------------------------------

/**
 * Allocates a zeroed `ArrowArrayStream` for a producer to fill.
 *
 * @example
 * const stream = allocArrowArrayStream();
 * nativeLib.make_stream(stream);             // the producer fills it
 * const reader = importArrayStream(stream);  // moved out of our struct
 * freeArrowArrayStream(stream);              // only frees the memory
 */
export function allocArrowArrayStream(opts: MemoryOption = {}): Ptr {
  const m = memoryOf(opts);
  return m.alloc(m.layouts.ArrowArrayStream.size);
}

/**
 * Allocates a zeroed `ArrowDeviceArrayStream` for a producer to fill.
 *
 * @example
 * const stream = allocArrowDeviceArrayStream();
 * nativeLib.make_device_stream(stream);
 * const reader = importDeviceArrayStream(stream, { toHost: true });
 * freeArrowDeviceArrayStream(stream);
 */
export function allocArrowDeviceArrayStream(opts: MemoryOption = {}): Ptr {
  const m = memoryOf(opts);
  return m.alloc(m.layouts.ArrowDeviceArrayStream.size);
}

/**
 * Calls the `ArrowArrayStream`'s release if it is not released yet (then it is marked released), and
 * leaves the struct allocated.
 *
 * @example
 * const stream = allocArrowArrayStream();
 * nativeLib.make_stream(stream);
 * releaseArrowArrayStream(stream);  // not read after all: the producer's release, once
 * freeArrowArrayStream(stream);
 */
export function releaseArrowArrayStream(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseStreamStruct(memoryOf(opts), ARRAY_STREAM, streamPtrArg(ptr, 'ptr', memoryOf(opts), false));
}

/**
 * Calls the `ArrowDeviceArrayStream`'s release if it is not released yet, and leaves the struct allocated.
 *
 * @example
 * const stream = allocArrowDeviceArrayStream();
 * nativeLib.make_device_stream(stream);
 * releaseArrowDeviceArrayStream(stream);
 * freeArrowDeviceArrayStream(stream);
 */
export function releaseArrowDeviceArrayStream(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseStreamStruct(memoryOf(opts), DEVICE_STREAM, streamPtrArg(ptr, 'ptr', memoryOf(opts), true));
}

/**
 * Releases (if still live) and frees an `ArrowArrayStream` struct allocated by this library; a pointer
 * that is not ours, or freed already, is an `ArrowDeviceError`.
 *
 * @example
 * const stream = exportArrayStream(table);
 * nativeLib.consume_stream(stream);  // the consumer reads it, and releases it
 * freeArrowArrayStream(stream);
 */
export function freeArrowArrayStream(ptr: Ptr, opts: MemoryOption = {}): void {
  checkOwned(memoryOf(opts), ptr, 'freeArrowArrayStream');
  releaseArrowArrayStream(ptr, opts);
  memoryOf(opts).free(ptr);
}

/**
 * Releases (if still live) and frees an `ArrowDeviceArrayStream` struct allocated by this library.
 *
 * @example
 * const stream = exportDeviceArrayStream(table);  // CPU device arrays, zero-copy
 * nativeLib.consume_device_stream(stream);
 * freeArrowDeviceArrayStream(stream);
 */
export function freeArrowDeviceArrayStream(ptr: Ptr, opts: MemoryOption = {}): void {
  checkOwned(memoryOf(opts), ptr, 'freeArrowDeviceArrayStream');
  releaseArrowDeviceArrayStream(ptr, opts);
  memoryOf(opts).free(ptr);
}

/**
 * Whether the `ArrowArrayStream` at `ptr` is released (its `release` is NULL).
 *
 * @example
 * const stream = exportArrayStream(table);
 * nativeLib.consume_stream(stream);
 * isArrowArrayStreamReleased(stream); // true once the consumer released (or moved) it
 * freeArrowArrayStream(stream);
 */
export function isArrowArrayStreamReleased(ptr: Ptr, opts: MemoryOption = {}): boolean {
  return isStreamReleased(memoryOf(opts), ARRAY_STREAM, streamPtrArg(ptr, 'ptr', memoryOf(opts), false));
}
