/** The device layer's public surface (src/index.ts re-exports it). */
export {
  importDeviceArray, importDeviceArrayAsync, importDeviceData, importDeviceRecordBatch, importDeviceArrayView, readDeviceFields,
  exportDeviceArray, exportDeviceRecordBatch, allocDeviceArray, releaseDeviceArray, freeDeviceArray, moveDeviceArray,
  allocArrowDeviceArray, releaseArrowDeviceArray, freeArrowDeviceArray, moveArrowDeviceArray,
  type DeviceImportOptions, type DeviceExportOptions, type DeviceFields,
} from './api.js';
export { DeviceArray, type DeviceSpec, type DeviceCopyOptions, type ToHostOptions } from './device-array.js';
export type { DeviceArrayNode, DeviceBuffer } from './device-array.js';
export { cudaRuntime, cudaAvailable, cudartCandidates, CudaRuntime, CudaError, MemcpyKind, type CudaMemoryKind } from './cuda.js';
