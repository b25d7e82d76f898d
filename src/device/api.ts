/**
 * The C Device Data Interface API: `ArrowDeviceArray` to and from arrow-js
 * objects and `DeviceArray` handles. The arrow-js importers and the exports
 * are here; the target-neutral import (the device fields, `DeviceArray`
 * handles, `ArrayView`s, the struct helpers) is src/device/import.ts,
 * re-exported here, so this module is the device layer's public face.
 *
 * Ownership and validation are src/device/import.ts's. Export pins (CPU) or
 * copies (CUDA, WebGPU): see `exportDeviceArray`.
 */
import { Data, RecordBatch, Schema, Vector } from 'apache-arrow';
import { deviceTypeName, DeviceType } from '../abi/constants.js';
import { isArrowExportable } from '../abi/protocol.js';
import { buildBatch, buildData, type ImportedData, type ImportedRecordBatch } from '../array/build.js';
import { ArrayExportHandles, ExportHandle } from '../memory/handle.js';
import { exportSchema, memoryOf, releaseArrowSchema, toExportView, type MemoryOption, type SchemaLike } from '../array/api.js';
import { writeArrayView } from '../array/export.js';
import { PlanOf } from '../array/importer.js';
import { batchNodeOf } from '../schema/export.js';
import type { ArrayView } from '../array/view.js';
import { ArrowDeviceError, invalid, prefixPath, unsupported } from '../errors.js';
import type { Ptr } from '../memory/memory.js';
import { access } from '../abi/accessors.js';
import type { SchemaNode } from '../schema/node.js';
import { hostTree, writeCudaCopy } from './copy.js';
import { DeviceArray } from './device-array.js';
import { writeDeviceFields } from './export.js';
import {
  freeArrowDeviceArray, importDeviceWith, viaDeviceArray, type DeviceArraySource, type DeviceExchangeOptions, type DeviceImportOptions,
} from './import.js';
import { writeWebGPUCopy, type WebGPUDevice } from './webgpu.js';

export {
  importDeviceArray, importDeviceArrayAsync, importDeviceArrayLater, importDeviceArrayView, readDeviceFields,
  allocArrowDeviceArray, releaseArrowDeviceArray, freeArrowDeviceArray, moveArrowDeviceArray,
  allocDeviceArray, releaseDeviceArray, freeDeviceArray, moveDeviceArray,
  type DeviceImportOptions, type DeviceFields, type DeviceArraySource, type DeviceExchangeOptions,
} from './import.js';

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
  return importDeviceWith(ptr, schema as SchemaLike | Ptr, opts, PlanOf.Data, buildData);
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
  return importDeviceWith(ptr, schema as Schema | SchemaNode | Ptr, opts, PlanOf.Batch, buildBatch);
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
