/**
 * arrow-device: the Apache Arrow C Data Interface, C Stream Interface and C
 * Device Data Interface for TypeScript.
 *
 * This file is the public API, and only it: every name is listed by hand
 * (as arrow-js's Arrow.ts does), so a module's internals never leak and a
 * rename is a decision, not a side effect. Names follow Arrow's own words:
 * `import*` / `export*` + the arrow-js or spec object (`importRecordBatch`,
 * `exportArrayStream`), and the struct helpers carry the C struct's name
 * (`allocArrowDeviceArray`, `freeArrowArrayStream`). Older names stay as
 * deprecated aliases (see CHANGELOG.md, "Migration").
 *
 * @module arrow-device
 */

// The arrow-js target: readers of streams build arrow-js batches (the core below it is target-neutral).
import './stream/arrowjs.js';

// --- constants and struct layouts (CDataInterface.rst, CDeviceDataInterface.rst) ---------
export { DeviceType, Flag, Errno, deviceTypeName, errnoName, type DeviceTypeName, type DeviceTypeCode, type ErrnoName } from './abi/constants.js';
export { layoutsFor, NATIVE64, WASM32, type Target, type Layouts, type StructLayout, type FieldLayout } from './abi/layout.js';

// --- errors ----------------------------------------------------------------------------------
export { ArrowDeviceError, type ErrorKind, type ArrowDeviceErrorOptions } from './errors.js';

// --- memory: where structs live (the process's own, or a WebAssembly module's) --------------
export {
  nativeMemory, NULL, accounting, wasmMemory, wasmMemoryFromExports, isDetached,
  type Accounting, type Memory, type Ptr, type Signature, type CType, type CValue,
  type WasmMemory, type WasmMemoryOptions, type WasmLinearMemory, type WasmTable, type WasmMalloc, type WasmFree,
} from './memory/index.js';

// --- schemas -----------------------------------------------------------------------------------
export { parseFormat, formatOf, type TypeInfo, type TimeUnit as FormatTimeUnit } from './schema/format.js';
export type { SchemaNode } from './schema/node.js';
export type { Metadata } from './schema/metadata.js';
export type { ToArrowOptions } from './schema/arrowjs.js';

// --- arrays and record batches (ArrowSchema, ArrowArray) --------------------------------------
export type { ArrayView } from './array/view.js';
export { isValid, getBit } from './array/view.js';
export type { ValidationLevel } from './array/read.js';
export { viewToArrow, dataToView, viewToData } from './array/arrowjs.js';
export {
  importSchema, importSchemaNode, importField, importType, exportSchema,
  importData, importVector, importRecordBatch, importTable, importArrayView,
  exportArray, exportRecordBatch, exportTable,
  allocArrowSchema, allocArrowArray, releaseArrowSchema, releaseArrowArray, freeArrowSchema, freeArrowArray,
  moveArrowSchema, moveArrowArray, isOurArrowArray, disposeImport,
  type MemoryOption, type SchemaImportOptions, type ArrayImportOptions, type ExportOptions, type SchemaLike,
  type SchemaExchangeOptions, type ArrayExchangeOptions,
} from './array/api.js';
export {
  releaseImport, isImportReleased, ImportedRecordBatch, ImportedTable, ImportedVector, ImportedData, type Releasable, type Exchangeable,
} from './array/build.js';

// --- device arrays (ArrowDeviceArray) --------------------------------------------------------------
export {
  importDeviceArray, importDeviceArrayAsync, importDeviceData, importDeviceRecordBatch, importDeviceArrayView,
  exportDeviceArray, exportDeviceRecordBatch,
  allocArrowDeviceArray, releaseArrowDeviceArray, freeArrowDeviceArray, moveArrowDeviceArray,
  allocDeviceArray, releaseDeviceArray, freeDeviceArray, moveDeviceArray,
  type DeviceImportOptions, type DeviceExportOptions, type DeviceFields, type DeviceExchangeOptions, type DeviceArraySource,
} from './device/api.js';
export { DeviceArray, type DeviceSpec, type DeviceCopyOptions, type ToHostOptions } from './device/device-array.js';
export type { DeviceArrayNode, DeviceBuffer } from './device/device-array.js';
export { cudaAvailable, CudaError, type CudaMemoryKind } from './device/cuda.js';
export {
  webgpuBufferAt, webgpuRegistry, BufferUsage, type WebGPUBuffer, type WebGPUCommandBuffer, type WebGPUDevice, type WebGPURegion, type WebGPURegistry,
} from './device/webgpu.js';

// --- streams (ArrowArrayStream, ArrowDeviceArrayStream) -------------------------------------------
export { importDeviceArrayStream, exportDeviceArrayStream } from './stream/device.js';
export {
  importArrayStream, RecordBatchStreamImport, StreamProducerError,
  type StreamImportOptions, type StreamItem, type StreamExchangeOptions, type DeviceStreamSource, type StreamHandOn, type DeviceStreamHandOn,
  type AnyStreamHandOn,
} from './stream/import.js';
export {
  exportArrayStream, allocArrowArrayStream, allocArrowDeviceArrayStream, releaseArrowArrayStream,
  releaseArrowDeviceArrayStream, freeArrowArrayStream, freeArrowDeviceArrayStream, isArrowArrayStreamReleased,
  type RecordBatchSource, type StreamExportOptions, type StreamExportItem,
} from './stream/export.js';

// --- fill-and-import: a native producer fills a struct we allocate, we import it ------------------
export { importArrayStreamFrom, type FillStatus, type FillResult } from './fill/fill.js';
export { importSchemaFrom, importRecordBatchFrom } from './fill/arrowjs.js';
export { importDeviceArrayStreamFrom, importDeviceRecordBatchFrom } from './fill/device.js';

// --- async device streams (ArrowAsyncDeviceStreamHandler, ArrowAsyncProducer, ArrowAsyncTask) ----
export {
  AsyncDeviceStreamReader, AsyncStreamError, createAsyncDeviceStreamReader,
  type AsyncConsumerOptions, type AsyncTaskResult, type AsyncItem,
} from './async/consumer.js';
export { produceAsyncDeviceStream, type AsyncBatchSource, type AsyncProducerOptions, type AsyncProduceResult } from './async/producer.js';

// --- threads: Arrow data shared between the threads of one process, zero-copy (docs/threads.md) ---
export {
  share, importShared, dropShared, releaseThreadShares,
  type SharedHandle, type SharedTicket, type SharedKind, type SharedImport, type ShareOptions, type SharedImportOptions, type WorkerLike,
} from './share/index.js';

// --- the exchange protocol (PROTOCOL.md): Arrow data between JavaScript libraries ------------
export {
  ArrowSymbols, isArrowExportable, arrowExportable, ExportHandle, ArrayExportHandles, TableExportHandles,
  type ArrowSymbol, type ArrowHandle, type ArrowArrayHandles, type ArrowWasmMemory, type ArrowWasmTable, type ArrowDeviceExportOptions,
  type ArrowSchemaExportable, type ArrowArrayExportable, type ArrowStreamExportable, type ArrowDeviceArrayExportable,
  type ArrowDeviceStreamExportable, type ArrowExportable, type ExchangeImportOptions,
  type ExportableOptions, type SchemaExportMethod, type ArrayExportMethods, type StreamExportMethods, type TableExportable, type RecordBatchExportable, type ArrayExportable, type VectorExportable, type ReaderExportable,
} from './protocol/index.js';
