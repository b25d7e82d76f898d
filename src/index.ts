/**
 * arrow-device: the Apache Arrow C Data Interface and C Device Data Interface
 * for TypeScript. This file is the public API and nothing else.
 */
export * from './abi/index.js';
export { ArrowDeviceError, type ErrorKind } from './errors.js';
export { nativeMemory, NULL, type Memory, type Ptr, type Signature, type CType, type CValue } from './memory/index.js';
