export * from './memory.js';
export { nativeMemory } from './native.js';
export { accounting, type Accounting } from './accounting.js';
