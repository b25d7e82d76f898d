/**
 * The exchange protocol (PROTOCOL.md): Arrow data handed between JavaScript
 * libraries by well-known symbols and owned handles, the JavaScript twin of
 * Arrow's PyCapsule interface. Its vocabulary lives in src/abi/protocol.ts
 * (every layer recognises protocol objects); the handles in
 * src/memory/handle.ts; the consumer side in src/array/exchange.ts (every
 * import function takes protocol objects); this layer adds the producer
 * side for arrow-js objects.
 */
export {
  ArrowSymbols, isArrowExportable,
  type ArrowSymbol, type ArrowHandle, type ArrowArrayHandles, type ArrowWasmMemory, type ArrowWasmTable, type ArrowDeviceExportOptions,
  type ArrowSchemaExportable, type ArrowArrayExportable, type ArrowStreamExportable, type ArrowDeviceArrayExportable,
  type ArrowDeviceStreamExportable, type ArrowExportable,
} from '../abi/protocol.js';
export { ExportHandle, ArrayExportHandles, TableExportHandles } from '../memory/handle.js';
export type { ExchangeImportOptions } from '../array/exchange.js';
export {
  arrowExportable,
  type ExportableOptions, type SchemaExportMethod, type ArrayExportMethods, type StreamExportMethods, type TableExportable, type RecordBatchExportable, type ArrayExportable, type VectorExportable, type ReaderExportable,
} from './exportable.js';
