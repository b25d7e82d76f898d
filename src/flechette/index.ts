/**
 * arrow-device/flechette: the C Data and C Stream interfaces for
 * `@uwdata/flechette`, the Arrow library under arquero and Mosaic, zero-copy
 * both ways. What a flechette user imports instead of `arrow-device`: the
 * same import and export functions, with flechette's `Table`, `Column`,
 * `Batch`, `Schema`, `Field` and `DataType` where the main entry has arrow-js's.
 *
 * This entry and the modules below it load no apache-arrow (test/flechette/loads.test.ts
 * asserts it by module name): the core they share with the arrow-js target (the plan, the one
 * import path, the stream reader, the writers: docs/architecture.md) is target-neutral, and only
 * src/flechette/ knows flechette.
 *
 * Every type of the spec imports as it is (flechette has run-end encoded arrays and list views), so
 * there is no `expand` here. Ownership is the main entry's: one owner per import; `release()`,
 * `using` or `releaseImport(x)` releases the producer now, and the garbage collector when nothing
 * can still reach its memory. Released means unreadable: the tables and columns returned (subclasses
 * of flechette's; its classes are not patched) throw a `released` error where a read starts, and every
 * buffer flechette holds is detached (what escaped earlier reads `undefined` or an empty array).
 *
 * @module arrow-device/flechette
 */
export * from './core.js';

// === Device arrays, the async reader, shares between threads (issue 52, item 2) ======================
// src/flechette/{device,async,share}.ts over the target-neutral device, async and share layers; they
// import core.ts (flechetteStreamTarget, ImportedTable, ImportedColumn), as adbc.ts does, which so loads
// none of them. Everything here loads no apache-arrow (test/flechette/loads.test.ts).

export {
  importDeviceRecordBatch, importDeviceArrayStream, toHostTable,
  type FlechetteDeviceOptions, type FlechetteDeviceStreamOptions, type FlechetteDeviceStreamReader,
} from './device.js';
export { createAsyncDeviceStreamReader, type FlechetteAsyncOptions, type FlechetteAsyncReader } from './async.js';
export { AsyncStreamError, type AsyncTaskResult } from '../async/consumer.js';
export { share, importShared, type FlechetteSharedImport, type FlechetteSharedImportOptions } from './share.js';
export { dropShared, releaseThreadShares, type SharedHandle, type SharedKind, type SharedTicket, type ShareOptions, type WorkerLike } from '../share/core.js';
export { DeviceArray, type DeviceArrayNode, type DeviceBuffer, type DeviceSpec, type DeviceCopyOptions, type ToHostOptions } from '../device/device-array.js';
export {
  importDeviceArray, importDeviceArrayAsync, importDeviceArrayView,
  allocArrowDeviceArray, releaseArrowDeviceArray, freeArrowDeviceArray, moveArrowDeviceArray,
  type DeviceArraySource, type DeviceImportOptions,
} from '../device/import.js';
export { DeviceType, deviceTypeName } from '../abi/constants.js';
export { allocArrowDeviceArrayStream, releaseArrowDeviceArrayStream, freeArrowDeviceArrayStream } from '../stream/export.js';
