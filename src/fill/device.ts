/**
 * Fill-and-import of device arrays and device streams (src/fill/fill.ts has
 * the rules): apart from the plain ones so that they, and
 * `arrow-device/adbc`, load no device code.
 */
import type { ImportedRecordBatch } from '../array/build.js';
import { importDeviceRecordBatch, type DeviceImportOptions } from '../device/api.js';
import type { DeviceArray } from '../device/device-array.js';
import type { Ptr } from '../memory/memory.js';
import { importDeviceArrayStream } from '../stream/device.js';
import type { RecordBatchStreamImport, StreamImportOptions, StreamItem } from '../stream/import.js';
import { fillAndImport, memOf, type FillResult, type FillStatus } from './fill.js';

/**
 * `importArrayStreamFrom` for an `ArrowDeviceArrayStream`: allocates it, lets
 * `fill` fill it, and imports it as `importDeviceArrayStream` does, under
 * the same rules.
 *
 * @example
 * const reader = importDeviceArrayStreamFrom((out) => nativeLib.make_device_stream(out), { toHost: true });
 * for (const batch of reader) use(batch);
 */
export function importDeviceArrayStreamFrom(fill: (out: Ptr) => number | bigint, opts?: StreamImportOptions): RecordBatchStreamImport<StreamItem>;
export function importDeviceArrayStreamFrom(fill: (out: Ptr) => PromiseLike<FillStatus>, opts?: StreamImportOptions): Promise<RecordBatchStreamImport<StreamItem>>;
export function importDeviceArrayStreamFrom(fill: (out: Ptr) => FillStatus, opts?: StreamImportOptions): RecordBatchStreamImport<StreamItem>;
export function importDeviceArrayStreamFrom(
  fill: (out: Ptr) => FillResult,
  opts: StreamImportOptions = {},
): RecordBatchStreamImport<StreamItem> | Promise<RecordBatchStreamImport<StreamItem>> {
  return fillAndImport(memOf(opts), ['ArrowDeviceArrayStream'], fill, ([p]) => importDeviceArrayStream(p!, opts));
}

/**
 * Allocates an `ArrowDeviceArray` and an `ArrowSchema`, lets
 * `fill(deviceArray, schema)` fill both, and imports them as
 * `importDeviceRecordBatch` does (a record batch the CPU reads, else a
 * `DeviceArray`, or a host copy with `toHost`), under the rules of
 * `importArrayStreamFrom`.
 *
 * @example
 * const batch = importDeviceRecordBatchFrom((array, schema) => gpuLib.export_batch(array, schema), { toHost: true });
 */
export function importDeviceRecordBatchFrom(
  fill: (deviceArray: Ptr, schema: Ptr) => PromiseLike<FillStatus>,
  opts: DeviceImportOptions & { toHost: true },
): Promise<ImportedRecordBatch>;
export function importDeviceRecordBatchFrom(fill: (deviceArray: Ptr, schema: Ptr) => number | bigint, opts: DeviceImportOptions & { toHost: true }): ImportedRecordBatch;
export function importDeviceRecordBatchFrom(fill: (deviceArray: Ptr, schema: Ptr) => number | bigint, opts?: DeviceImportOptions): ImportedRecordBatch | DeviceArray;
export function importDeviceRecordBatchFrom(fill: (deviceArray: Ptr, schema: Ptr) => PromiseLike<FillStatus>, opts?: DeviceImportOptions): Promise<ImportedRecordBatch | DeviceArray>;
export function importDeviceRecordBatchFrom(fill: (deviceArray: Ptr, schema: Ptr) => FillStatus, opts: DeviceImportOptions & { toHost: true }): ImportedRecordBatch;
export function importDeviceRecordBatchFrom(fill: (deviceArray: Ptr, schema: Ptr) => FillStatus, opts?: DeviceImportOptions): ImportedRecordBatch | DeviceArray;
export function importDeviceRecordBatchFrom(
  fill: (deviceArray: Ptr, schema: Ptr) => FillResult,
  opts: DeviceImportOptions = {},
): ImportedRecordBatch | DeviceArray | Promise<ImportedRecordBatch | DeviceArray> {
  return fillAndImport(memOf(opts), ['ArrowDeviceArray', 'ArrowSchema'], fill, ([a, s]) => importDeviceRecordBatch(a!, s!, opts));
}
