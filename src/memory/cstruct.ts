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
 * offsets itself; and `writeDeviceFields`, the fields of an `ArrowDeviceArray`
 * after its array, for every layer that writes one.
 */
import { ArrowDeviceError } from '../errors.js';
import { callRelease } from './registry.js';
import type { Memory, Ptr } from './memory.js';
import { arena, ptrAt, rawOf, reserve, stage, staged } from './raw.js';
import { access } from '../abi/accessors.js';

/**
 * The structs that carry a `release` callback (directly or, for a device array, in its array).
 *
 * @inline
 */
export type CStructKind = 'ArrowSchema' | 'ArrowArray' | 'ArrowDeviceArray' | 'ArrowArrayStream' | 'ArrowDeviceArrayStream';

type ReleaseOffsets = Readonly<Record<CStructKind, number>>;
const releaseOffsets = new WeakMap<object, ReleaseOffsets>();
/** The last layouts asked for and their offsets: a program has one or two memories, read on every import. */
let lastLayouts: object | null = null;
let lastOffsets: ReleaseOffsets | null = null;

/** Byte offset of the `release` callback that ends a struct of `kind`. */
export function releaseOffset(mem: Memory, kind: CStructKind): number {
  const layouts = mem.layouts;
  if (layouts !== lastLayouts) {
    let offs = releaseOffsets.get(layouts);
    if (offs === undefined) {
      const A = access(mem.target);
      offs = {
        ArrowSchema: A.ArrowSchema.release.offset,
        ArrowArray: A.ArrowArray.release.offset,
        ArrowDeviceArray: A.ArrowDeviceArray.array.offset + A.ArrowArray.release.offset,
        ArrowArrayStream: A.ArrowArrayStream.release.offset,
        ArrowDeviceArrayStream: A.ArrowDeviceArrayStream.release.offset,
      };
      releaseOffsets.set(layouts, offs);
    }
    lastLayouts = layouts;
    lastOffsets = offs;
  }
  return lastOffsets![kind];
}

/** The size of a struct of `kind` in `mem`. */
export function structSize(mem: Memory, kind: CStructKind): number {
  return mem.layouts[kind].size;
}

/** The `release` callback of the struct at `ptr` (0 when released), read through number addresses (src/memory/raw.ts). */
function releaseOf(mem: Memory, kind: CStructKind, ptr: Ptr): number {
  const raw = rawOf(mem);
  const wide = mem.target.pointerSize === 8;
  // Number(ptr) + offset: no bigint made (an address of ours is below 2^53; past it, both forms round alike).
  const at = stage(raw, Number(ptr) + releaseOffset(mem, kind), wide ? 8 : 4);
  return ptrAt(staged.dv, at, wide);
}

/** Whether the struct at `ptr` is released (its `release` is NULL). */
export function isReleased(mem: Memory, kind: CStructKind, ptr: Ptr): boolean {
  return releaseOf(mem, kind, ptr) === 0;
}

/** Marks the struct at `ptr` released without calling anything (its owner moved elsewhere). */
export function markReleased(mem: Memory, kind: CStructKind, ptr: Ptr): void {
  rawOf(mem).writeWord(Number(ptr) + releaseOffset(mem, kind), 0);
}

/**
 * Calls the struct's `release` unless it is released already, then marks it
 * released: a producer must do that itself, but one that forgets must never
 * be released twice. Returns whether a release was called.
 */
export function releaseStruct(mem: Memory, kind: CStructKind, ptr: Ptr): boolean {
  if (ptr === 0n) return false;
  const rel = releaseOf(mem, kind, ptr);
  if (rel === 0) return false;
  try {
    callRelease(mem, rel, Number(ptr));
  } finally {
    markReleased(mem, kind, ptr);
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

/**
 * Writes the fields of the `ArrowDeviceArray` at `into` that follow its
 * `ArrowArray`: device id and type, sync event, and `reserved` zeroed (the
 * padding after `device_type` too).
 */
export function writeDeviceFields(mem: Memory, into: Ptr, deviceType: number, deviceId: number | bigint, syncEvent: Ptr): void {
  const D = access(mem.target).ArrowDeviceArray;
  const start = D.device_id.offset;
  // The tail from device_id on, in scratch space (fresh arena bytes are zero: reserved[3] and the
  // padding after device_type stay zero, as the spec requires of a producer), then one copy.
  const off = reserve(D.$size);
  const dv = arena.dv;
  D.device_id.setBig(dv, off, BigInt(deviceId));
  D.device_type.set(dv, off, deviceType);
  D.sync_event.setBig(dv, off, syncEvent);
  rawOf(mem).writeFrom(Number(into) + start, arena, off + start, D.$size - start);
}
