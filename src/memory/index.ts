export * from './memory.js';
export { nativeMemory } from './native.js';
