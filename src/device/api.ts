/**
 * The C Device Data Interface API: `ArrowDeviceArray` to and from arrow-js
 * objects and `DeviceArray` handles.
 *
 * Ownership is the C Data Interface's (src/array/api.ts), applied to the
 * `ArrowArray` embedded at offset 0 of the `ArrowDeviceArray` (its `release`
 * is the device array's release):
 * - Import consumes: the struct is moved out of the caller's memory (the
 *   caller's `array.release` is NULL afterwards, on success and on failure)
 *   and the producer's `release` is called exactly once. For arrow-js
 *   results, when no JS object can reach the memory any more (or at once
 *   with `copy` / `toHost`); for a `DeviceArray`, at its `release()` (or when
 *   it is collected), unless `exportTo` moved it on.
 * - Export pins (CPU) or copies (CUDA): see `exportDeviceArray`.
 *
 * Validation of the device fields, at every level: `reserved` must be zero
 * (the spec says MUST), the device type one the spec defines, `device_id`
 * -1 or a device number (a CPU array says -1; 0, DLPack's CPU id, is
 * accepted too), a CUDA or CUDA_MANAGED array names a device (>= 0), and a
 * CPU array has no `sync_event`. Errors name the place:
 * `device_array.reserved[1]: must be zero`.
 *
 * Synchronisation: for data the CPU reads in place (CUDA_HOST and
 * CUDA_MANAGED), the host waits on the event with `cudaEventSynchronize`
 * before the first byte is read. Copies from the device make the copying
 * stream wait on it with `cudaStreamWaitEvent` (the `stream` option names
 * that stream; otherwise the library's own).
 */
import { Data, RecordBatch, Schema, Vector } from 'apache-arrow';
import { deviceTypeName, DeviceType } from '../abi/constants.js';
import { ArrowSymbols, hasArrowMethod, isArrowExportable, type ArrowArrayExportable, type ArrowDeviceArrayExportable } from '../abi/protocol.js';
import { exchangeOptions, importFromArrayHandles, type ExchangeImportOptions } from '../array/exchange.js';
import { buildBatch, buildData, owned, releaseImport, type ImportedData, type ImportedRecordBatch } from '../array/build.js';
import { ArrayExportHandles, ExportHandle } from '../memory/handle.js';
import { exportSchema, memoryOf, releaseArrowSchema, toExportView, type ArrayImportOptions, type MemoryOption, type SchemaLike } from '../array/api.js';
import { writeArrayView } from '../array/export.js';
import { consume, importWith, PlanOf, quietly } from '../array/importer.js';
import { ImportOwner } from '../array/owner.js';
import type { Plan } from '../array/plan.js';
import { batchNodeOf } from '../schema/export.js';
import type { ImportRead } from '../array/record.js';
import { isReleased, moveStruct, releaseStruct, checkOwned } from '../memory/cstruct.js';
import { viewOf, type ArrayView } from '../array/view.js';
import { deviceArrayPtrArg } from '../args.js';
import { ArrowDeviceError, invalid, prefixPath, unsupported } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { access } from '../abi/accessors.js';
import { rawOf, stage, staged } from '../memory/raw.js';
import type { SchemaNode } from '../schema/node.js';
import { backendFor } from './backend.js';
import { hostTree, writeCudaCopy } from './copy.js';
import { adoptDeviceArray, DeviceArray } from './device-array.js';
import { writeDeviceFields } from './export.js';
import { writeWebGPUCopy, type WebGPUDevice } from './webgpu.js';

/** Options of the device importers' pointer form: those of the array importers, and the device's own. */
export interface DeviceImportOptions extends ArrayImportOptions {
  /**
   * CUDA: a `cudaStream_t` for copies from the device (`toHost`). It is made
   * to wait on the producer's event with `cudaStreamWaitEvent`.
   */
  stream?: Ptr;
  /**
   * For memory the CPU cannot read (CUDA device memory): copy it to the host
   * and return arrow-js objects, releasing the device array at once, instead
   * of a `DeviceArray`.
   */
  toHost?: boolean;
}

/** Options of `exportDeviceArray` and `exportDeviceRecordBatch`: where the data goes, and how. */
export interface DeviceExportOptions extends MemoryOption {
  /** Write into this `ArrowDeviceArray` (the consumer's) instead of allocating one. */
  into?: Ptr;
  /** Return an owned `ExportHandle` instead of the bare address (see `ExportOptions.handle`). Not with `into`. */
  handle?: boolean;
  /** Where the exported data lives: `DeviceType.CPU` (the default, zero-copy), or a CUDA kind (a copy). */
  deviceType?: number;
  /** The device number: -1 for CPU (the default there), 0 by default for CUDA kinds. */
  deviceId?: number;
  /**
   * CUDA: the `cudaStream_t` to copy on. An event is recorded on it after
   * the copies and exported as `sync_event` (a `cudaEvent_t*`, destroyed by
   * the release); the call returns without waiting. Without a stream the
   * copies are complete when the call returns and `sync_event` is NULL.
   */
  stream?: Ptr;
  /** WebGPU (`deviceType: DeviceType.WEBGPU`): the `GPUDevice` the buffers are made on (required there). */
  gpuDevice?: WebGPUDevice;
  /** WebGPU: usages added to `STORAGE | COPY_SRC | COPY_DST` (`BufferUsage.VERTEX`, ...). */
  gpuUsage?: number;
}

/** The fields an `ArrowDeviceArray` adds to its `ArrowArray`. */
export interface DeviceFields {
  /** `ArrowDeviceArray.device_type`: a `DeviceType` code. */
  readonly deviceType: number;
  /** `ArrowDeviceArray.device_id`: the device number; -1 where the type has none (CDeviceDataInterface.rst recommends -1 for the CPU). */
  readonly deviceId: number;
  /** `ArrowDeviceArray.sync_event`: a pointer to the device's event type (`cudaEvent_t*`), `0n` when the data is ready. */
  readonly syncEvent: Ptr;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const CUDA_NUMBERED = new Set<number>([DeviceType.CUDA, DeviceType.CUDA_MANAGED, DeviceType.WEBGPU]);

/**
 * Reads and validates the device fields of the `ArrowDeviceArray` at `ptr`,
 * without taking ownership. `path` prefixes error places.
 */
export function readDeviceFields(m: Memory, ptr: Ptr, path = 'device_array'): DeviceFields {
  if (ptr === 0n) throw invalid(path, 'NULL pointer');
  // The struct's bytes staged once (src/memory/raw.ts), its fields read through the typed accessors.
  const D = access(m.target).ArrowDeviceArray;
  const at = stage(rawOf(m), Number(ptr), D.$size);
  const dv = staged.dv;
  if (readRelease(m, ptr) === 0n) throw new ArrowDeviceError('released', path, 'the struct is released (array.release is NULL)');
  for (let k = 0; k < 3; k++) {
    if (D.reserved.big(dv, at, k) !== 0n) throw invalid(`${path}.reserved[${k}]`, 'must be zero');
  }
  const deviceType = D.device_type.get(dv, at);
  const deviceId64 = D.device_id.big(dv, at);
  const syncEvent = D.sync_event.big(dv, at);
  const name = deviceTypeName(deviceType);
  if (name === undefined) throw invalid(`${path}.device_type`, `unknown device type ${deviceType}`);
  if (deviceId64 < -1n || deviceId64 > MAX_SAFE) throw invalid(`${path}.device_id`, `must be -1 or a device number, got ${deviceId64}`);
  const deviceId = Number(deviceId64);
  if (deviceType === DeviceType.CPU) {
    if (deviceId > 0) throw invalid(`${path}.device_id`, `must be -1 for a CPU device, got ${deviceId}`);
    if (syncEvent !== 0n) throw invalid(`${path}.sync_event`, 'must be NULL for a CPU device');
  }
  if (CUDA_NUMBERED.has(deviceType) && deviceId < 0) {
    throw invalid(`${path}.device_id`, `a ${name} array must name a device (>= 0), got ${deviceId}`);
  }
  return { deviceType, deviceId, syncEvent };
}

function readRelease(m: Memory, ptr: Ptr): Ptr {
  return isReleased(m, 'ArrowDeviceArray', ptr) ? 0n : 1n;
}

/**
 * Step 1 of the one import path (array/importer.ts) for a device array:
 * the pointer, the struct, the plan of the schema, the options and the
 * device fields. Import consumes: on failure the array, and a schema given
 * as a pointer, are released.
 */
function begin(ptr: Ptr, schema: SchemaLike | Ptr, opts: DeviceImportOptions, form: PlanOf): { m: Memory; plan: Plan; fields: DeviceFields; level: number } {
  const m = memoryOf(opts);
  const c = consume(m, 'ArrowDeviceArray', ptr, schema, opts, 'device_array', form);
  const { plan, level } = c;
  let fields: DeviceFields;
  try {
    fields = readDeviceFields(m, ptr);
  } catch (e) {
    quietly(() => releaseStruct(m, 'ArrowDeviceArray', ptr));
    throw e;
  }
  return { m, plan: plan!, fields, level };
}

/** Whether the CPU can read the data in place (after the sync). */
function readsInPlace(fields: DeviceFields): boolean {
  return backendFor(fields.deviceType)?.hostReadable(fields.deviceType) ?? false;
}

/**
 * Imports a device array as `build` makes it from its record: zero-copy
 * where the CPU reads the memory in place (after waiting on the event),
 * else a `DeviceArray`, or with `toHost` a host copy (released at once).
 */
function importDevice<T extends object>(
  ptr: Ptr,
  schema: SchemaLike | Ptr,
  opts: DeviceImportOptions,
  form: PlanOf,
  build: (read: ImportRead) => T,
): T | DeviceArray {
  const { m, plan, fields, level } = begin(ptr, schema, opts, form);
  if (readsInPlace(fields)) {
    try {
      backendFor(fields.deviceType)!.syncForHost({ mem: m, ...fields });
    } catch (e) {
      releaseStruct(m, 'ArrowDeviceArray', ptr);
      throw e;
    }
    return importWith(ImportOwner.move(m, ptr, 'ArrowDeviceArray'), plan, opts, level, 'device_array.array', build);
  }
  const dev = adoptDeviceArray(m, ptr, plan, 'device_array', level);
  if (!opts.toHost) return dev;
  try {
    // A host copy: nothing to release (owned by no import), but releasable like every import.
    return owned(build(DeviceArray.hostCopy(dev, opts, plan)), []);
  } finally {
    dev.release();
  }
}

/**
 * Imports an `ArrowDeviceArray` of any device as a `DeviceArray` handle,
 * without copying its buffers. For pass-through, inspection, and explicit
 * control of copies. Release it with `release()` or `using`.
 *
 * Validation reads what its level checks on the device, in one batch (the
 * offsets and variadic sizes at `default`, the buffers it checks at `full`);
 * where the bytes cannot be read (a device this library has no backend for)
 * such a level is refused as `unsupported`: pass `{ validate: 'minimal' }`
 * to pass the array on unread.
 *
 * `source` may be an object of the exchange protocol (PROTOCOL.md) in place
 * of both pointers: `arrow.c_device_array`, or, from a producer without it
 * (CPU data), `arrow.c_array`; the same holds for `importDeviceData`,
 * `importDeviceRecordBatch` and `importDeviceArrayView`.
 *
 * @example
 * using dev = importDeviceArray(deviceArrayPtr, schemaPtr);
 * console.log(dev.deviceTypeName, dev.deviceId, dev.length);
 * dev.exportTo(nextConsumersStruct); // or dev.toHost(), dev.release()
 */
export function importDeviceArray(source: DeviceArraySource, opts?: DeviceExchangeOptions): DeviceArray;
export function importDeviceArray(ptr: Ptr, schema: SchemaLike | Ptr, opts?: DeviceImportOptions): DeviceArray;
export function importDeviceArray(ptr: Ptr | DeviceArraySource, schema?: SchemaLike | Ptr | DeviceExchangeOptions, opts: DeviceImportOptions = {}): DeviceArray {
  if (isArrowExportable(ptr)) return viaDeviceArray(ptr, schema, 'importDeviceArray', (p, s, o) => importDeviceArray(p, s, o));
  const { m, plan, level } = begin(ptr, schema as SchemaLike | Ptr, opts, PlanOf.Array);
  return adoptDeviceArray(m, ptr, plan, 'device_array', level);
}

/**
 * `importDeviceArray` for devices whose bytes are read asynchronously
 * (WebGPU's `mapAsync`), and for every other device: the struct is moved
 * at once (as by `importDeviceArray`: the call consumes it), then the reads
 * its validation level needs are done in one batch each and awaited. On a
 * failure of those reads the array is released and the promise rejects.
 *
 * @example
 * const dev = await importDeviceArrayAsync(ptr, schemaPtr); // WebGPU memory
 * const { buffer, offset } = dev.children[0].buffers[1].webgpu!;
 * const data = await dev.toHostAsync();
 * dev.release();
 */
export function importDeviceArrayAsync(source: DeviceArraySource, opts?: DeviceExchangeOptions): Promise<DeviceArray>;
export function importDeviceArrayAsync(ptr: Ptr, schema: SchemaLike | Ptr, opts?: DeviceImportOptions): Promise<DeviceArray>;
export async function importDeviceArrayAsync(
  ptr: Ptr | DeviceArraySource,
  schema?: SchemaLike | Ptr | DeviceExchangeOptions,
  opts: DeviceImportOptions = {},
): Promise<DeviceArray> {
  // Everything up to the first await runs now: the struct is consumed by this call, as by the synchronous import.
  const dev = isArrowExportable(ptr)
    ? viaDeviceArray(ptr, schema, 'importDeviceArrayAsync', importDeviceArrayLater)
    : importDeviceArrayLater(ptr, schema as SchemaLike | Ptr, opts);
  await dev.checkLevel();
  return dev;
}

/**
 * @internal The synchronous half of `importDeviceArrayAsync` (streams and the
 * async reader take their items with it, then await `checkLevel()`).
 */
export function importDeviceArrayLater(ptr: Ptr, schema: SchemaLike | Ptr, opts: DeviceImportOptions): DeviceArray {
  const { m, plan, level } = begin(ptr, schema, opts, PlanOf.Array);
  return adoptDeviceArray(m, ptr, plan, 'device_array', level, true);
}

/**
 * @internal Finishes an item imported with `importDeviceArrayLater`: the
 * level's device reads awaited, then, with `toHost`, the host copy (the
 * `DeviceArray` released) as a record batch or, with `view`, an `ArrayView`.
 */
export async function settleDeviceItem(dev: DeviceArray, opts: DeviceImportOptions & { view?: boolean }): Promise<DeviceArray | ImportedRecordBatch | ArrayView> {
  await dev.checkLevel();
  if (!opts.toHost) return dev;
  try {
    return opts.view ? await dev.toHostViewAsync(opts) : owned((await dev.toHostRecordBatchAsync(opts)) as ImportedRecordBatch, []);
  } finally {
    dev.release();
  }
}

/**
 * Imports an `ArrowDeviceArray` as arrow-js `Data` when the CPU can read it
 * (CPU: zero-copy; CUDA_HOST and CUDA_MANAGED: zero-copy after waiting on
 * the event), else as a `DeviceArray` (or, with `toHost`, a host copy).
 *
 * @example
 * const x = importDeviceData(ptr, new Int32());
 * const data = x instanceof DeviceArray ? (x.toHost()) : x;
 */
export function importDeviceData(source: DeviceArraySource, opts: DeviceExchangeOptions & { toHost: true }): ImportedData;
export function importDeviceData(source: DeviceArraySource, opts?: DeviceExchangeOptions): ImportedData | DeviceArray;
export function importDeviceData(ptr: Ptr, schema: SchemaLike | Ptr, opts: DeviceImportOptions & { toHost: true }): ImportedData;
export function importDeviceData(ptr: Ptr, schema: SchemaLike | Ptr, opts?: DeviceImportOptions): ImportedData | DeviceArray;
export function importDeviceData(ptr: Ptr | DeviceArraySource, schema?: SchemaLike | Ptr | DeviceExchangeOptions, opts: DeviceImportOptions = {}): ImportedData | DeviceArray {
  if (isArrowExportable(ptr)) return viaDeviceArray(ptr, schema, 'importDeviceData', (p, s, o) => importDeviceData(p, s, o));
  return importDevice(ptr, schema as SchemaLike | Ptr, opts, PlanOf.Data, buildData);
}

/**
 * Imports a struct `ArrowDeviceArray` as an arrow-js `RecordBatch` when the
 * CPU can read it (see `importDeviceData`), else as a `DeviceArray` (or,
 * with `toHost`, a host copy). As `importRecordBatch`, an arrow-js `Schema`
 * given to many calls is prepared once.
 *
 * @example
 * const batch = importDeviceRecordBatch(ptr, schemaPtr, { toHost: true });
 */
export function importDeviceRecordBatch(source: DeviceArraySource, opts: DeviceExchangeOptions & { toHost: true }): ImportedRecordBatch;
export function importDeviceRecordBatch(source: DeviceArraySource, opts?: DeviceExchangeOptions): ImportedRecordBatch | DeviceArray;
export function importDeviceRecordBatch(ptr: Ptr, schema: Schema | SchemaNode | Ptr, opts: DeviceImportOptions & { toHost: true }): ImportedRecordBatch;
export function importDeviceRecordBatch(ptr: Ptr, schema: Schema | SchemaNode | Ptr, opts?: DeviceImportOptions): ImportedRecordBatch | DeviceArray;
export function importDeviceRecordBatch(
  ptr: Ptr | DeviceArraySource,
  schema?: Schema | SchemaNode | Ptr | DeviceExchangeOptions,
  opts: DeviceImportOptions = {},
): ImportedRecordBatch | DeviceArray {
  if (isArrowExportable(ptr)) return viaDeviceArray(ptr, schema, 'importDeviceRecordBatch', (p, s, o) => importDeviceRecordBatch(p, s, o));
  return importDevice(ptr, schema as Schema | SchemaNode | Ptr, opts, PlanOf.Batch, buildBatch);
}

/**
 * Imports an `ArrowDeviceArray` as an `ArrayView` (every type of the spec)
 * when the CPU can read it, zero-copy; else a `DeviceArray` (or, with
 * `toHost`, a host copy). `source` may be a protocol object, as for `importDeviceData`.
 *
 * @example
 * const v = importDeviceArrayView(deviceArrayPtr, schemaPtr);
 * if (v instanceof DeviceArray) v.release();     // device memory: not read here
 * else console.log(v.length, v.buffers[1]);      // CPU-readable: the bytes, zero-copy
 */
export function importDeviceArrayView(source: DeviceArraySource, opts?: DeviceExchangeOptions): ArrayView | DeviceArray;
export function importDeviceArrayView(ptr: Ptr, schema: SchemaLike | Ptr, opts?: DeviceImportOptions): ArrayView | DeviceArray;
export function importDeviceArrayView(ptr: Ptr | DeviceArraySource, schema?: SchemaLike | Ptr | DeviceExchangeOptions, opts: DeviceImportOptions = {}): ArrayView | DeviceArray {
  if (isArrowExportable(ptr)) return viaDeviceArray(ptr, schema, 'importDeviceArrayView', (p, s, o) => importDeviceArrayView(p, s, o));
  return importDevice(ptr, schema as SchemaLike | Ptr, opts, PlanOf.Array, (read) => viewOf(read, read.plan.root, 0));
}

// --- export ------------------------------------------------------------------------------

/**
 * Exports arrow-js `Data`, a one-chunk `Vector`, a `RecordBatch`, an
 * `ArrayView` or a `DeviceArray` as an `ArrowDeviceArray`. Returns the
 * struct's address (`opts.into`, or a new allocation the caller frees with
 * `freeArrowDeviceArray` once the consumer has moved or released it).
 *
 * - CPU (the default): zero-copy, `device_id` -1, `sync_event` NULL,
 *   `reserved` zeroed; the JS buffers are pinned until the consumer's release.
 * - CUDA, CUDA_HOST, CUDA_MANAGED: the buffers are copied into one new
 *   allocation of that kind on `deviceId`; with `stream`, an event recorded
 *   on it after the copies is the `sync_event` (see `DeviceExportOptions`).
 * - WEBGPU: the buffers are uploaded into one new `GPUBuffer` of
 *   `gpuDevice` (usage `STORAGE | COPY_SRC | COPY_DST`, each Arrow buffer at a
 *   256-byte boundary), addressed through the realm's WebGPU registry; the
 *   `sync_event` is a handle to `queue.onSubmittedWorkDone()` after the
 *   upload; the release destroys the buffer (PROTOCOL.md, "WebGPU device arrays").
 * - A `DeviceArray` is moved on unchanged (`exportTo`); the handle is released.
 *
 * @example
 * const ptr = exportDeviceArray(batch);                                    // CPU
 * const gpu = exportDeviceArray(batch, { deviceType: DeviceType.CUDA, deviceId: 0, stream: cudaStream });
 * await new Promise((resolve, reject) =>
 *   nativeLib.consume_device.async(gpu, (err, rc) => (err ? reject(err) : resolve(rc))));
 * freeArrowDeviceArray(gpu);
 */
export function exportDeviceArray(x: Data | Vector | RecordBatch | ArrayView | DeviceArray, opts: DeviceExportOptions & { handle: true }): ExportHandle;
export function exportDeviceArray(x: Data | Vector | RecordBatch | ArrayView | DeviceArray, opts?: DeviceExportOptions): Ptr;
export function exportDeviceArray(x: Data | Vector | RecordBatch | ArrayView | DeviceArray, opts: DeviceExportOptions = {}): Ptr | ExportHandle {
  if (opts.handle) {
    if (opts.into !== undefined) throw invalid('opts.into', 'a handle owns its struct (dispose frees it): { handle: true } writes into an allocation of its own, not into');
    const m = memoryOf(opts);
    return ExportHandle.adopt(m, 'ArrowDeviceArray', exportDeviceArray(x, { ...opts, handle: false }));
  }
  const m = memoryOf(opts);
  const deviceType = opts.deviceType ?? (x instanceof DeviceArray ? x.deviceType : DeviceType.CPU);
  if (deviceTypeName(deviceType) === undefined) throw invalid('options.deviceType', `unknown device type ${deviceType}`);
  if (x instanceof DeviceArray) {
    if (deviceType !== x.deviceType || (opts.deviceId !== undefined && opts.deviceId !== x.deviceId)) {
      throw invalid('options.deviceType', `a DeviceArray is exported where it is (${x.deviceTypeName} ${x.deviceId}); copy it with copyTo first`);
    }
    const into = opts.into ?? m.alloc(m.layouts.ArrowDeviceArray.size);
    try {
      x.exportTo(into);
    } catch (e) {
      if (opts.into === undefined) m.free(into);
      throw e;
    }
    return into;
  }
  const view = toExportView(x);
  if (deviceType === DeviceType.CPU) {
    if (opts.stream !== undefined) throw invalid('options.stream', 'a CPU export has no stream');
    const id = opts.deviceId ?? -1;
    if (id !== -1 && id !== 0) throw invalid('options.deviceId', `must be -1 for a CPU device, got ${id}`);
    const into = opts.into ?? m.alloc(m.layouts.ArrowDeviceArray.size);
    try {
      writeArrayView(m, view, into + BigInt(access(m.target).ArrowDeviceArray.array.offset));
    } catch (e) {
      if (opts.into === undefined) m.free(into);
      throw e;
    }
    writeDeviceFields(m, into, DeviceType.CPU, id, 0n);
    return into;
  }
  if (deviceType === DeviceType.CUDA || deviceType === DeviceType.CUDA_HOST || deviceType === DeviceType.CUDA_MANAGED) {
    const into = opts.into ?? m.alloc(m.layouts.ArrowDeviceArray.size);
    try {
      writeCudaCopy(m, hostTree(m, view), into, {
        deviceType,
        deviceId: opts.deviceId ?? 0,
        stream: opts.stream,
        synchronize: opts.stream === undefined,
      });
    } catch (e) {
      if (opts.into === undefined) m.free(into);
      // An error that names no place (no CUDA runtime, a memory CUDA cannot read from) is the copy's that options.deviceType asked for.
      throw e instanceof ArrowDeviceError && e.path === '' ? prefixPath(e, 'options.deviceType') : e;
    }
    return into;
  }
  if (deviceType === DeviceType.WEBGPU) {
    if (opts.stream !== undefined) throw invalid('options.stream', 'a WebGPU export has no stream (its event is a promise: PROTOCOL.md)');
    if (opts.deviceId !== undefined) throw invalid('options.deviceId', "a WebGPU export's device_id is its gpuDevice's number in the realm's registry: pass gpuDevice");
    const into = opts.into ?? m.alloc(m.layouts.ArrowDeviceArray.size);
    try {
      writeWebGPUCopy(m, view, into, { gpuDevice: opts.gpuDevice!, usage: opts.gpuUsage });
    } catch (e) {
      if (opts.into === undefined) m.free(into);
      throw e instanceof ArrowDeviceError && e.path === '' ? prefixPath(e, 'options.gpuDevice') : e;
    }
    return into;
  }
  throw unsupported('options.deviceType', `exports to ${deviceTypeName(deviceType)} memory are not supported`);
}

/**
 * Exports a `RecordBatch` as an `ArrowSchema` and a struct `ArrowDeviceArray`
 * (see `exportDeviceArray` for the device options).
 *
 * @example
 * const { schema, array } = exportDeviceRecordBatch(batch, { deviceType: DeviceType.CUDA, stream: cudaStream });
 */
export function exportDeviceRecordBatch(batch: RecordBatch, opts: DeviceExportOptions & { handle: true }): ArrayExportHandles;
export function exportDeviceRecordBatch(batch: RecordBatch, opts?: DeviceExportOptions & { schemaInto?: Ptr }): {
  /** The `ArrowSchema`: a struct (`+s`) of the batch's fields. */
  schema: Ptr;
  /** The `ArrowDeviceArray` of the batch, on the device `opts` names. */
  array: Ptr;
};
export function exportDeviceRecordBatch(
  batch: RecordBatch,
  opts: DeviceExportOptions & { schemaInto?: Ptr } = {},
): { schema: Ptr; array: Ptr } | ArrayExportHandles {
  if (opts.handle) {
    if (opts.into !== undefined || opts.schemaInto !== undefined) {
      throw invalid(opts.into !== undefined ? 'opts.into' : 'opts.schemaInto', 'a handle owns its struct (dispose frees it): { handle: true } writes into an allocation of its own');
    }
    const m = memoryOf(opts);
    const { schema, array } = exportDeviceRecordBatch(batch, { ...opts, handle: false });
    let s: ExportHandle;
    try {
      s = ExportHandle.adopt(m, 'ArrowSchema', schema);
    } catch (e) {
      freeArrowDeviceArray(array, opts);
      throw e;
    }
    try {
      return new ArrayExportHandles(s, ExportHandle.adopt(m, 'ArrowDeviceArray', array));
    } catch (e) {
      s[Symbol.dispose]();
      throw e;
    }
  }
  const schema = exportSchema(batchNodeOf(batch), { memory: opts.memory, into: opts.schemaInto });
  try {
    return { schema, array: exportDeviceArray(batch, opts) };
  } catch (e) {
    releaseArrowSchema(schema, opts);
    if (opts.schemaInto === undefined) memoryOf(opts).free(schema);
    throw e;
  }
}

// --- exchange protocol (PROTOCOL.md) ------------------------------------------------------

/** What the device importers take besides pointers: an object implementing `arrow.c_device_array`, or, for CPU data, `arrow.c_array`. */
export type DeviceArraySource = ArrowDeviceArrayExportable | ArrowArrayExportable;

/** Options of a device import from a protocol object: the pointer form's, and `requestedSchema`. */
export type DeviceExchangeOptions = DeviceImportOptions & ExchangeImportOptions;

/**
 * A device import from a protocol object: `arrow.c_device_array`, or, from
 * a producer without it (CPU data, PyCapsuleInterface.rst, "Device
 * Support"), `arrow.c_array`, whose array is moved into a CPU
 * `ArrowDeviceArray` for the device importer. The handles are disposed on
 * every path (array/exchange.ts).
 */
function viaDeviceArray<R extends object>(source: object, optsArg: unknown, fn: string, imp: (ptr: Ptr, schema: Ptr, opts: DeviceImportOptions) => R): R {
  const o = exchangeOptions<DeviceImportOptions>(optsArg, fn);
  const release = (r: R): void => (r instanceof DeviceArray ? r.release() : releaseImport(r));
  if (hasArrowMethod(source, ArrowSymbols.deviceArray) || !hasArrowMethod(source, ArrowSymbols.array)) {
    return importFromArrayHandles(source, ArrowSymbols.deviceArray, o, (a, s, m) => imp(a, s, { ...o, memory: m }), release);
  }
  return importFromArrayHandles(
    source,
    ArrowSymbols.array,
    o,
    (a, s, m) => {
      const d = m.alloc(m.layouts.ArrowDeviceArray.size);
      try {
        moveStruct(m, 'ArrowArray', a, d + BigInt(access(m.target).ArrowDeviceArray.array.offset));
        writeDeviceFields(m, d, DeviceType.CPU, -1, 0n);
        return imp(d, s, { ...o, memory: m });
      } finally {
        m.free(d);
      }
    },
    release,
  );
}

// --- struct helpers ----------------------------------------------------------------------

/**
 * Allocates a zeroed `ArrowDeviceArray` for a producer to fill.
 *
 * @example
 * const array = allocArrowDeviceArray();
 * nativeLib.produce_device(array);                 // the producer fills it
 * using dev = importDeviceArray(array, schemaPtr); // moved out of our struct
 * freeArrowDeviceArray(array);
 */
export function allocArrowDeviceArray(opts: MemoryOption = {}): Ptr {
  const m = memoryOf(opts);
  return m.alloc(m.layouts.ArrowDeviceArray.size);
}

/**
 * Calls the release of the `ArrowDeviceArray`'s embedded array if it is not released yet, and leaves the
 * struct allocated (CDeviceDataInterface.rst: the release semantics are the `ArrowArray`'s).
 *
 * @example
 * const array = allocArrowDeviceArray();
 * nativeLib.produce_device(array);
 * releaseArrowDeviceArray(array);  // not wanted: the producer's release, once
 * freeArrowDeviceArray(array);
 */
export function releaseArrowDeviceArray(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseStruct(memoryOf(opts), 'ArrowDeviceArray', deviceArrayPtrArg(ptr, 'ptr', memoryOf(opts)));
}

/**
 * Releases (if still live) and frees an `ArrowDeviceArray` allocated by this library; a pointer that is
 * not ours, or freed already, is an `ArrowDeviceError`.
 *
 * @example
 * const array = exportDeviceArray(batch);  // CPU, zero-copy
 * nativeLib.consume_device(array);         // the consumer moves it out or releases it
 * freeArrowDeviceArray(array);
 */
export function freeArrowDeviceArray(ptr: Ptr, opts: MemoryOption = {}): void {
  checkOwned(memoryOf(opts), ptr, 'freeArrowDeviceArray');
  if (ptr === 0n) return;
  releaseArrowDeviceArray(ptr, opts);
  memoryOf(opts).free(ptr);
}

/**
 * Moves an `ArrowDeviceArray` (CDeviceDataInterface.rst, "Moving an array"): bitwise copy, then the source's `array.release` set to NULL.
 *
 * @example
 * const dst = allocArrowDeviceArray();
 * moveArrowDeviceArray(deviceArrayPtr, dst);  // dst owns the data; the source is marked released
 * using dev = importDeviceArray(dst, schemaPtr);
 * freeArrowDeviceArray(dst);
 */
export function moveArrowDeviceArray(src: Ptr, dst: Ptr, opts: MemoryOption = {}): void {
  const m = memoryOf(opts);
  moveStruct(m, 'ArrowDeviceArray', deviceArrayPtrArg(src, 'src', m), deviceArrayPtrArg(dst, 'dst', m));
}

/**
 * `allocArrowDeviceArray`, under its name before 0.2.
 *
 * @deprecated The name before 0.2: `allocArrowDeviceArray`.
 */
export const allocDeviceArray = allocArrowDeviceArray;
/**
 * `releaseArrowDeviceArray`, under its name before 0.2.
 *
 * @deprecated The name before 0.2: `releaseArrowDeviceArray`.
 */
export const releaseDeviceArray = releaseArrowDeviceArray;
/**
 * `freeArrowDeviceArray`, under its name before 0.2.
 *
 * @deprecated The name before 0.2: `freeArrowDeviceArray`.
 */
export const freeDeviceArray = freeArrowDeviceArray;
/**
 * `moveArrowDeviceArray`, under its name before 0.2.
 *
 * @deprecated The name before 0.2: `moveArrowDeviceArray`.
 */
export const moveDeviceArray = moveArrowDeviceArray;
