export * from './memory.js';
export { nativeMemory } from './native.js';
export { accounting, type Accounting } from './accounting.js';
export { wasmMemory, wasmMemoryFromExports, isDetached, type WasmMemory, type WasmMemoryOptions, type WasmLinearMemory, type WasmTable, type WasmMalloc, type WasmFree } from './wasm.js';
