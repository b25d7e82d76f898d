/**
 * Release, mark-released and move of the interfaces' structs, written once.
 *
 * Every struct of the C Data, C Stream and C Device Data interfaces is
 * "released" when its `release` callback is NULL (CDataInterface.rst,
 * "Released structure"); an `ArrowDeviceArray` has no callback of its own:
 * its embedded `ArrowArray`'s `release` is its release
 * (CDeviceDataInterface.rst, "ArrowDeviceArray"). Moving a struct is a
 * bitwise copy, then the source marked released (CDataInterface.rst,
 * "Moving an array"). Every layer calls these instead of computing release
 * offsets itself.
 */
import { ArrowDeviceError } from '../errors.js';
import { RELEASE_SIG } from './registry.js';
import type { Memory, Ptr } from './memory.js';

/** The structs that carry a `release` callback (directly or, for a device array, in its array). */
export type CStructKind = 'ArrowSchema' | 'ArrowArray' | 'ArrowDeviceArray' | 'ArrowArrayStream' | 'ArrowDeviceArrayStream';

const releaseOffsets = new WeakMap<object, Map<CStructKind, bigint>>();

/** Byte offset of the `release` callback that ends a struct of `kind`. */
export function releaseOffset(mem: Memory, kind: CStructKind): bigint {
  let byKind = releaseOffsets.get(mem.layouts);
  if (!byKind) releaseOffsets.set(mem.layouts, (byKind = new Map()));
  let off = byKind.get(kind);
  if (off === undefined) {
    const L = mem.layouts;
    off =
      kind === 'ArrowDeviceArray'
        ? BigInt(L.ArrowDeviceArray.offsets.array! + L.ArrowArray.offsets.release!)
        : BigInt(L[kind].offsets.release!);
    byKind.set(kind, off);
  }
  return off;
}

/** The size of a struct of `kind` in `mem`. */
export function structSize(mem: Memory, kind: CStructKind): number {
  return mem.layouts[kind].size;
}

/** Whether the struct at `ptr` is released (its `release` is NULL). */
export function isReleased(mem: Memory, kind: CStructKind, ptr: Ptr): boolean {
  return mem.readPtr(ptr + releaseOffset(mem, kind)) === 0n;
}

/** Marks the struct at `ptr` released without calling anything (its owner moved elsewhere). */
export function markReleased(mem: Memory, kind: CStructKind, ptr: Ptr): void {
  mem.writePtr(ptr + releaseOffset(mem, kind), 0n);
}

/**
 * Calls the struct's `release` unless it is released already, then marks it
 * released: a producer must do that itself, but one that forgets must never
 * be released twice. Returns whether a release was called.
 */
export function releaseStruct(mem: Memory, kind: CStructKind, ptr: Ptr): boolean {
  if (ptr === 0n) return false;
  const at = ptr + releaseOffset(mem, kind);
  const rel = mem.readPtr(at);
  if (rel === 0n) return false;
  try {
    mem.call(rel, RELEASE_SIG, ptr);
  } finally {
    mem.writePtr(at, 0n);
  }
  return true;
}

/** Moves the struct at `src` into `dst` (bitwise copy), then marks `src` released. */
export function moveStruct(mem: Memory, kind: CStructKind, src: Ptr, dst: Ptr): void {
  const size = structSize(mem, kind);
  mem.copyIn(dst, mem.read(src, size));
  markReleased(mem, kind, src);
}

/** Moves the struct at `src` into a new allocation of ours and returns it. */
export function moveToNew(mem: Memory, kind: CStructKind, src: Ptr): Ptr {
  const dst = mem.alloc(structSize(mem, kind));
  moveStruct(mem, kind, src, dst);
  return dst;
}

/**
 * Refuses a pointer that `mem` did not allocate (or freed already) before a
 * `free*` helper reads the struct: releasing through a stale pointer would
 * read freed memory, and libc's free would abort on a double free.
 */
export function checkOwned(mem: Memory, ptr: Ptr, what: string): void {
  if (ptr === 0n || !mem.owns) return;
  if (!mem.owns(ptr)) {
    throw new ArrowDeviceError(
      'invalid',
      what,
      `0x${ptr.toString(16)} was not allocated by this library's ${mem.name} memory, or was freed already`,
    );
  }
}
