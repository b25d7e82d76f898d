/**
 * The stream layer: `ArrowArrayStream` and CPU `ArrowDeviceArrayStream` <->
 * synchronous iterables of arrow-js `RecordBatch`. The public surface of
 * this folder, re-exported by src/index.ts.
 */
import './arrowjs.js'; // arrow-js batches for the readers (src/stream/import.ts is target-neutral)
export {
  importArrayStream, RecordBatchStreamImport, StreamProducerError, type StreamImportOptions,
} from './import.js';
export { importDeviceArrayStream, exportDeviceArrayStream } from './device.js';
export {
  exportArrayStream, allocArrowArrayStream, allocArrowDeviceArrayStream, releaseArrowArrayStream,
  releaseArrowDeviceArrayStream, freeArrowArrayStream, freeArrowDeviceArrayStream, isArrowArrayStreamReleased,
  type RecordBatchSource, type StreamExportOptions,
} from './export.js';
