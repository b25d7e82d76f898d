/**
 * Pointer arrays in a Memory, in one copy each way: `readPointers` reads an
 * array of `n` pointers, `encodePointers` lays pointers out as the bytes of
 * one. Pointer width comes from the memory's target. (Struct fields go
 * through the typed accessors of src/abi/accessors.ts.)
 */
import type { Memory, Ptr } from './memory.js';

/** Reads `n` pointers of an array at `addr` in one copy. */
export function readPointers(mem: Memory, addr: Ptr, n: number): Ptr[] {
  if (n === 0) return [];
  const ps = mem.target.pointerSize;
  const b = mem.read(addr, n * ps);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const out: Ptr[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = ps === 8 ? dv.getBigUint64(i * 8, true) : BigInt(dv.getUint32(i * 4, true));
  return out;
}

/** Encodes pointers as the bytes of a pointer array of the memory's width. */
export function encodePointers(mem: Memory, ptrs: readonly Ptr[], into: Uint8Array, at = 0): void {
  const ps = mem.target.pointerSize;
  const dv = new DataView(into.buffer, into.byteOffset, into.byteLength);
  for (let i = 0; i < ptrs.length; i++) {
    if (ps === 8) dv.setBigUint64(at + i * 8, ptrs[i]!, true);
    else dv.setUint32(at + i * 4, Number(ptrs[i]!), true);
  }
}
