/**
 * arrow-device: the Apache Arrow C Data Interface and C Device Data Interface
 * for TypeScript. This file is the public API and nothing else.
 */
export * from './abi/index.js';
export { ArrowDeviceError, type ErrorKind } from './errors.js';
export {
  nativeMemory, NULL, accounting, wasmMemory, wasmMemoryFromExports, isDetached,
  type Accounting, type Memory, type Ptr, type Signature, type CType, type CValue,
  type WasmMemory, type WasmMemoryOptions, type WasmLinearMemory, type WasmTable, type WasmMalloc, type WasmFree,
} from './memory/index.js';
export { parseFormat, formatOf, type TypeInfo, type TimeUnit } from './schema/format.js';
export type { SchemaNode } from './schema/node.js';
export type { Metadata } from './schema/metadata.js';
export type { ToArrowOptions } from './schema/arrowjs.js';
export type { ArrayView } from './array/view.js';
export { isValid, getBit } from './array/view.js';
export type { ValidationLevel } from './array/import.js';
export { viewToArrow, dataToView, viewToData } from './array/arrowjs.js';
export * from './array/api.js';
export {
  releaseImport, isImportReleased, ImportedRecordBatch, ImportedTable, ImportedVector, ImportedData, type Releasable,
} from './array/imported.js';
export * from './device/index.js';
export * from './stream/index.js';
export * from './async/index.js';
