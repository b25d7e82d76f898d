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
 * is garbage collected. Batches are imported like `importRecordBatch` does
 * and live independently of the stream (CStreamInterface.rst, "Result
 * lifetimes").
 */
import { Data, RecordBatch, Schema, Struct, Table } from 'apache-arrow';
import { DeviceType, deviceTypeName, errnoName } from '../abi/constants.js';
import { readArrayView, validationLevel } from '../array/import.js';
import { makeBatch, viewToData } from '../array/arrowjs.js';
import { ImportOwner } from '../array/owner.js';
import type { ArrayImportOptions } from '../array/api.js';
import { streamPtrArg } from '../args.js';
import { ArrowDeviceError, invalid, prefixPath, unsupported } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { nodeToSchema } from '../schema/arrowjs.js';
import { readSchemaNode, releaseSchemaStruct, type SchemaNode } from '../schema/node.js';
import { readDeviceFields } from '../device/api.js';
import {
  ARRAY_STREAM, DEVICE_STREAM, GET_LAST_ERROR_SIG, GET_NEXT_SIG, GET_SCHEMA_SIG, fieldAddr, isStreamReleased,
  releaseStreamStruct, type StreamStruct,
} from './struct.js';

/** Options of `importArrayStream`: those of `importRecordBatch`, applied to every batch. */
export type StreamImportOptions = ArrayImportOptions;

/** The longest `get_last_error` text we copy; the rest is cut. */
const MAX_ERROR_BYTES = 64 * 1024;
const lenientUtf8 = new TextDecoder('utf-8', { fatal: false });

/**
 * A stream callback (`get_schema` or `get_next`) returned a non-zero code.
 * `errno` is that code, `code` its errno name (`EINVAL`), and
 * `producerMessage` the `get_last_error` text, copied at once (NULL, a NULL
 * callback or an unreadable string give `null`; invalid UTF-8 is replaced
 * by U+FFFD).
 */
export class StreamProducerError extends ArrowDeviceError {
  override name = 'StreamProducerError';
  constructor(
    path: string,
    detail: string,
    errno: number,
    readonly operation: 'get_schema' | 'get_next',
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
      releaseStreamStruct(this.mem, this.s, this.ptr);
    } finally {
      this.mem.free(this.ptr);
      liveCounters.liveImports--;
      liveCounters.releasedImports++;
    }
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
 * A foreign `ArrowArrayStream` (or CPU `ArrowDeviceArrayStream`) as a
 * synchronous iterator of arrow-js `RecordBatch`, usable where arrow-js
 * code takes a `RecordBatchReader` or any `Iterable<RecordBatch>`:
 * `for (const b of reader)`, `new Table(reader)`, `reader.readAll()`,
 * `reader.schema`. It can be iterated once.
 *
 * Every `next()` calls the producer's `get_next` on the calling thread and
 * blocks until it returns. Errors are typed: a non-zero code from the
 * producer is a `StreamProducerError`; a batch that fails validation is an
 * `ArrowDeviceError` whose path starts `stream.batches[i]`. After an error,
 * the end of the stream, `return()`/`throw()` or `release()`, the producer
 * has been released (exactly once) and any further `next()` throws an
 * `ArrowDeviceError` of kind `released`.
 *
 * @example
 * const reader = importArrayStream(streamPtr);
 * console.log(reader.schema.fields.map((f) => f.name));
 * for (const batch of reader) {
 *   if (batch.numRows === 0) break; // releases the stream
 *   use(batch);
 * }
 * const table = new Table(importArrayStream(otherPtr)); // or .toTable()
 */
export class RecordBatchStreamImport implements IterableIterator<RecordBatch> {
  /** The schema of every batch, read from `get_schema` at import. */
  readonly schema: Schema;
  /** The same schema as read, with every type of the spec (arrow-js lacks a few). */
  readonly schemaNode: SchemaNode;
  /** For a device stream, its `device_type` (always `DeviceType.CPU` for now); undefined for a plain stream. */
  readonly deviceType: number | undefined;
  readonly #h: StreamHandle;
  readonly #opts: StreamImportOptions;
  readonly #level: number;
  readonly #type: Struct;
  readonly #getNext: Ptr;
  #count = 0;

  /** @internal Use `importArrayStream` / `importDeviceArrayStream`. */
  constructor(h: StreamHandle, schemaNode: SchemaNode, schema: Schema, deviceType: number | undefined, opts: StreamImportOptions) {
    this.#h = h;
    this.schemaNode = schemaNode;
    this.schema = schema;
    this.deviceType = deviceType;
    this.#opts = opts;
    this.#level = validationLevel(opts.validate);
    this.#type = new Struct(schema.fields);
    this.#getNext = h.mem.readPtr(fieldAddr(h.mem, h.s, h.ptr, 'get_next'));
    registry.register(this, h, h);
  }

  /** Whether the producer's stream has been released (ended, failed, closed or released). */
  get released(): boolean {
    return this.#h.released;
  }

  /** arrow-js `RecordBatchReader` spelling of `released`. */
  get closed(): boolean {
    return this.#h.released;
  }

  /** How many batches `next()` has returned. */
  get batchesRead(): number {
    return this.#count;
  }

  isSync(): true {
    return true;
  }

  isAsync(): false {
    return false;
  }

  isStream(): true {
    return true;
  }

  isFile(): false {
    return false;
  }

  [Symbol.iterator](): this {
    return this;
  }

  /**
   * Calls the producer's `get_next` and imports the batch. Returns
   * `{ done: true }` at the end of the stream, after releasing it.
   */
  next(): IteratorResult<RecordBatch, undefined> {
    const h = this.#h;
    const s = h.s;
    if (h.released) throw new ArrowDeviceError('released', s.path, `the stream is released (${h.why})`);
    const m = h.mem;
    const i = this.#count;
    // A fresh zeroed struct per call: on success the batch's owner takes it as it is (no move, no copy).
    const out = m.alloc(s.out(m).size);
    const releaseAt = out + BigInt(m.layouts.ArrowArray.offsets.release!);
    let rc: number;
    try {
      rc = m.call(this.#getNext, GET_NEXT_SIG, h.ptr, out) as number;
    } catch (e) {
      m.free(out);
      h.release('it failed');
      throw e;
    }
    if (rc !== 0) {
      m.free(out);
      const err = producerError(h, 'get_next', rc, ` for batch ${i}`);
      h.release('it failed');
      throw err;
    }
    if (m.readPtr(releaseAt) === 0n) {
      m.free(out);
      h.release('it ended');
      return { done: true, value: undefined };
    }
    const path = `${s.path}.batches[${i}]`;
    let batch: RecordBatch;
    try {
      if (s.kind === 'device') checkDeviceHeader(m, out, this.deviceType!, path);
    } catch (e) {
      releaseArrayIfLive(m, out);
      m.free(out);
      h.release('it failed');
      throw e;
    }
    try {
      batch = importBatch(m, out, this.schemaNode, this.schema, this.#type, this.#opts, this.#level, path);
    } catch (e) {
      h.release('it failed'); // importBatch has released the array and freed `out`
      throw e;
    }
    this.#count++;
    return { done: false, value: batch };
  }

  /** Leaves the iteration early: releases the stream. Called by `for...of` on `break`, `return` and throw. */
  return(): IteratorResult<RecordBatch, undefined> {
    this.#h.release('it was closed');
    return { done: true, value: undefined };
  }

  /** As `return()`: releases the stream (arrow-js readers do the same). */
  throw(): IteratorResult<RecordBatch, undefined> {
    return this.return();
  }

  /** arrow-js `RecordBatchReader.cancel()`: releases the stream. */
  cancel(): void {
    this.release();
  }

  /** Releases the producer's stream now; batches already read stay valid. Idempotent. */
  release(): void {
    this.#h.release('it was released');
  }

  [Symbol.dispose](): void {
    this.release();
  }

  /** Reads every remaining batch (the stream is released at its end). */
  readAll(): RecordBatch[] {
    const out: RecordBatch[] = [];
    for (let r = this.next(); !r.done; r = this.next()) out.push(r.value);
    return out;
  }

  /** Reads every remaining batch into a `Table` (of this schema when the stream is empty). */
  toTable(): Table {
    const batches = this.readAll();
    return batches.length > 0 ? new Table(batches) : new Table(this.schema);
  }
}

function releaseArrayIfLive(m: Memory, ptr: Ptr): void {
  const at = ptr + BigInt(m.layouts.ArrowArray.offsets.release!);
  const rel = m.readPtr(at);
  if (rel === 0n) return;
  try {
    m.call(rel, { name: 'release', result: 'void', params: ['pointer'] }, ptr);
  } finally {
    m.writePtr(at, 0n);
  }
}

/**
 * Imports the struct array at `ptr` as a batch (as `importRecordBatch` does,
 * with the stream's schema converted once). `ptr` is our own allocation:
 * the batch's owner takes it over (no move needed) and frees it, on failure at once.
 */
function importBatch(
  m: Memory,
  ptr: Ptr,
  node: SchemaNode,
  schema: Schema,
  type: Struct,
  opts: StreamImportOptions,
  level: number,
  path: string,
): RecordBatch {
  const owner = new ImportOwner(m, ptr);
  let data: Data;
  try {
    const view = readArrayView({ mem: m, owner, token: {}, copy: opts.copy ?? false, level }, owner.ptr, node, path);
    data = viewToData(view, type, path, opts);
  } catch (e) {
    owner.release();
    throw e;
  }
  owner.done();
  return makeBatch(schema, type, data as Data<Struct>);
}

/** Copies the producer's `get_last_error` text at once; null when there is none. */
function lastErrorText(h: StreamHandle): string | null {
  const m = h.mem;
  const fn = m.readPtr(fieldAddr(m, h.s, h.ptr, 'get_last_error'));
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

/** Moves the stream struct at `src` into our memory, checks it, reads the schema. Consumes the stream on failure. */
function importStream(src: Ptr, s: StreamStruct, opts: StreamImportOptions): RecordBatchStreamImport {
  const m = opts.memory ?? nativeMemory();
  streamPtrArg(src, 'ptr', m, s === DEVICE_STREAM);
  if (src === 0n) throw invalid(s.path, 'NULL pointer');
  if (isStreamReleased(m, s, src)) throw new ArrowDeviceError('released', s.path, 'the struct is released (release is NULL)');
  const L = s.layout(m);
  const ptr = m.alloc(L.size);
  m.copyIn(ptr, m.read(src, L.size));
  m.writePtr(fieldAddr(m, s, src, 'release'), 0n);
  const h = new StreamHandle(m, s, ptr);
  try {
    for (const f of ['get_schema', 'get_next'] as const) {
      if (m.readPtr(fieldAddr(m, s, ptr, f)) === 0n) throw invalid(`${s.path}.${f}`, 'NULL callback');
    }
    let deviceType: number | undefined;
    if (s.kind === 'device') {
      deviceType = m.readI32(fieldAddr(m, s, ptr, 'device_type'));
      if (deviceType !== DeviceType.CPU) {
        throw unsupported(
          `${s.path}.device_type`,
          `streams of ${deviceLabel(deviceType)} arrays are not supported yet: only CPU device streams import as record batches`,
        );
      }
    }
    const { node, schema } = readStreamSchema(h, opts);
    return new RecordBatchStreamImport(h, node, schema, deviceType, opts);
  } catch (e) {
    h.release('it failed');
    throw e;
  }
}

function readStreamSchema(h: StreamHandle, opts: StreamImportOptions): { node: SchemaNode; schema: Schema } {
  const m = h.mem;
  const s = h.s;
  const slot = m.alloc(m.layouts.ArrowSchema.size);
  try {
    const rc = m.call(m.readPtr(fieldAddr(m, s, h.ptr, 'get_schema')), GET_SCHEMA_SIG, h.ptr, slot) as number;
    if (rc !== 0) throw producerError(h, 'get_schema', rc);
    if (m.readPtr(slot + BigInt(m.layouts.ArrowSchema.offsets.release!)) === 0n) {
      throw invalid(`${s.path}.get_schema`, 'returned 0 but left the schema released');
    }
    try {
      const node = readSchemaNode(m, slot, 'schema');
      if (node.type.id !== 'struct') {
        throw unsupported('schema.format', `a stream of "${node.format}" arrays is not a stream of record batches (struct "+s")`);
      }
      return { node, schema: nodeToSchema(node, 'schema', opts) };
    } catch (e) {
      throw prefixPath(e, s.path);
    }
  } finally {
    releaseSchemaStruct(m, slot);
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
 *
 * @example
 * const stream = allocArrowArrayStream();
 * nativeLib.make_stream(stream);            // the producer fills it
 * const reader = importArrayStream(stream);
 * freeArrowArrayStream(stream);             // moved out: only frees the memory
 * const table = reader.toTable();
 */
export function importArrayStream(ptr: Ptr, opts: StreamImportOptions = {}): RecordBatchStreamImport {
  return importStream(ptr, ARRAY_STREAM, opts);
}

/**
 * Imports an `ArrowDeviceArrayStream` (CDeviceDataInterface.rst) of CPU
 * arrays as a `RecordBatchStreamImport`, like `importArrayStream`. Every
 * array's `device_type` is checked against the stream's (Arrow C++ does
 * not check it), its `sync_event` must be NULL and its `reserved` bytes
 * zero. Streams of other devices are refused with an `unsupported` error
 * (and released) until the device layer can import their arrays.
 *
 * @example
 * const reader = importDeviceArrayStream(deviceStreamPtr);
 * reader.deviceType === DeviceType.CPU;
 * for (const batch of reader) use(batch);
 */
export function importDeviceArrayStream(ptr: Ptr, opts: StreamImportOptions = {}): RecordBatchStreamImport {
  return importStream(ptr, DEVICE_STREAM, opts);
}

/** A device type code as a name for messages: `CUDA (2)`, or `unknown (99)`. */
export function deviceLabel(code: number): string {
  return `${deviceTypeName(code) ?? 'unknown'} (${code})`;
}

/**
 * Checks the `ArrowDeviceArray` header of a stream's array: its
 * `device_type` must be the stream's (Arrow C++ does not check this; we do),
 * then the device layer's checks (reserved zero, a CPU array without an
 * event, a sane `device_id`).
 */
function checkDeviceHeader(m: Memory, ptr: Ptr, streamDeviceType: number, path: string): void {
  const deviceType = m.readI32(ptr + BigInt(m.layouts.ArrowDeviceArray.offsets.device_type!));
  if (deviceType !== streamDeviceType) {
    throw invalid(`${path}.device_type`, `the array is on ${deviceLabel(deviceType)} but the stream's device_type is ${deviceLabel(streamDeviceType)}`);
  }
  readDeviceFields(m, ptr, path);
}
