/**
 * Number addresses for the per-batch hot paths (import, export, release).
 *
 * The public API speaks `bigint` addresses (koffi's pointer type, and the
 * only integer that holds every 64-bit value). Inside the hot paths a bigint
 * is a heap object per value: every pointer read, every `ptr + offset` and
 * every Set key allocated one, and the garbage collector was a quarter of a
 * small import's profile. Addresses of the memory we can read fit in a
 * double exactly (x86-64 and aarch64 user space is below 2^48, wasm32 below
 * 2^32), so the hot paths carry `Addr = number` and convert at the edges.
 * A value read from foreign memory that is not exactly representable (2^53
 * or more) is never a readable address: `checkRange` refuses it.
 *
 * Struct bytes are read by `stage`: one copy into an arena of JS memory,
 * after which the fields are read with DataView calls (no FFI call, no
 * allocation per field). Arenas are bump-allocated and never reused while a
 * copy in them can be reachable: a full arena is replaced by a new one, so a
 * caller may hold a staged copy across any number of later reads.
 */
import type { FieldAccess } from '../abi/accessors.js';
import { allocBytes, ArrowDeviceError } from '../errors.js';
import type { Memory, Ptr } from './memory.js';

/** An address as a number (see the file comment). */
export type Addr = number;

/** JS memory that struct copies are staged in; `addr` is its native address where one is known. */
export interface Arena {
  readonly u8: Uint8Array;
  readonly dv: DataView;
  /** The native address of `u8`'s first byte (native memory only; -1 until asked). */
  addr: number;
  /** The next free byte. */
  next: number;
}

/**
 * Number-address access a `Memory` backend provides for the hot paths.
 * Both backends of the library implement it; `rawOf` adapts any other
 * `Memory` through its bigint methods.
 */
export interface RawAccess {
  /** Throws the memory's typed error for a read or write of `n` bytes at `addr` (a number). */
  check(addr: Addr, n: number): void;
  /** Copies `n` bytes at `addr` (checked) into `arena` at `off`. */
  readInto(addr: Addr, n: number, arena: Arena, off: number): void;
  /** Copies `n` bytes from `arena` at `off` to `addr` (checked). */
  writeFrom(addr: Addr, arena: Arena, off: number, n: number): void;
  /** Writes a pointer-width value at `addr` (checked). */
  writeWord(addr: Addr, v: number): void;
  /** Copies `n` bytes from `src` to `dst`, both in this memory (checked). */
  copyWithin(dst: Addr, src: Addr, n: number): void;
  /** `Memory.alloc`, the address as a number. */
  alloc(size: number): Addr;
  /** `Memory.free` of an address `alloc` returned. */
  free(addr: Addr): void;
  /**
   * Where the `n` bytes at `addr` can be read and written in place from JS
   * (memory that is JS's own: the native backend's slabs, src/memory/slab.ts):
   * the JS memory holding them (their offset there is `addr - .addr`), or
   * null.
   */
  inPlace?(addr: Addr, n: number): Arena | null;
  /**
   * The length of the NUL-terminated string at `addr`: the bytes before its
   * NUL, which must come within `max` bytes (else the memory's typed error,
   * as `Memory.readCStringBytes` throws).
   */
  strlen(addr: Addr, max: number): number;
}

const ARENA_BYTES = 64 * 1024;
/** The largest copy served from a shared arena; a larger one gets an arena of its own. */
const ARENA_MAX = 16 * 1024;

/** A new arena of `size` bytes (also for scratch space that is written to memory with `writeFrom`). */
export function newArena(size: number): Arena {
  // A size JS cannot allocate is a typed nomem error (the caller places it), never a plain RangeError.
  const u8 = allocBytes(size);
  return { u8, dv: new DataView(u8.buffer), addr: -1, next: 0 };
}

/** The arena copies are staged in now. Read it right after `stage` (a later stage may start a new one). */
export let arena: Arena = newArena(ARENA_BYTES);

/**
 * Reserves `n` bytes of arena space (8-aligned) and returns their offset in
 * `arena`; they are zero (an arena's bytes are handed out once). `n` is a
 * byte count the caller computed, possibly from foreign fields: it must be
 * a non-negative safe integer, and no bitwise arithmetic (32-bit) touches
 * it, so a read of 4 GiB is never sized as 0 bytes.
 */
export function reserve(n: number): number {
  if (!(n >= 0 && n <= Number.MAX_SAFE_INTEGER) || !Number.isInteger(n)) {
    throw new ArrowDeviceError('memory', '', `invalid read length ${n}`);
  }
  const size = Math.ceil(n / 8) * 8;
  if (n > ARENA_MAX) {
    arena = newArena(size);
  } else if (arena.next + size > arena.u8.byteLength) {
    arena = newArena(ARENA_BYTES);
  }
  const off = arena.next;
  arena.next = off + size;
  return off;
}

/** The JS memory the last `stage` left its bytes in: an arena, or the memory itself (`RawAccess.inPlace`). */
export let staged: Arena = arena;

/**
 * Makes the `n` bytes at `addr` readable from JS and returns their offset in
 * `staged` (take `staged.dv` at once, before the next `stage`): memory JS
 * can read in place is read there (no copy), any other is copied into the
 * arena (one call). A copy is never written over while reachable; bytes
 * read in place are live: read them before anything writes there (a move
 * marks its source released, say).
 */
export function stage(raw: RawAccess, addr: Addr, n: number): number {
  if (raw.inPlace !== undefined) {
    const m = raw.inPlace(addr, n);
    if (m !== null) {
      staged = m;
      return addr - m.addr;
    }
  }
  const off = reserve(n);
  raw.readInto(addr, n, arena, off);
  staged = arena;
  return off;
}

const TWO_32 = 4294967296;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/**
 * The int64 at `at` as a number: exact within ±(2^53 - 1), ±Infinity
 * beyond (callers refuse it, printing the exact value with `i64Text`).
 */
export function i64At(dv: DataView, at: number): number {
  const lo = dv.getUint32(at, true);
  const hi = dv.getInt32(at + 4, true);
  const v = hi * TWO_32 + lo;
  return v > MAX_SAFE ? Infinity : v < -MAX_SAFE ? -Infinity : v;
}

/** The exact int64 at `at`, as text, for messages. */
export function i64Text(dv: DataView, at: number): string {
  return dv.getBigInt64(at, true).toString();
}

/**
 * The pointer at `at` (8 bytes when `wide`, else 4) as a number. A 64-bit
 * value of 2^53 or more comes back inexact, but at least 2^53, which no
 * check accepts as an address.
 */
export function ptrAt(dv: DataView, at: number, wide: boolean): Addr {
  if (!wide) return dv.getUint32(at, true);
  return dv.getUint32(at + 4, true) * TWO_32 + dv.getUint32(at, true);
}

/** Writes `v` (a safe integer, may be negative) as an int64 at `at`. */
export function setI64(dv: DataView, at: number, v: number): void {
  dv.setUint32(at, v >>> 0, true);
  dv.setInt32(at + 4, Math.floor(v / TWO_32), true);
}

/** Writes the pointer `v` (a number below 2^53) at `at`. */
export function setPtr(dv: DataView, at: number, v: Addr, wide: boolean): void {
  if (wide) {
    dv.setUint32(at, v >>> 0, true);
    dv.setUint32(at + 4, Math.floor(v / TWO_32), true);
  } else {
    dv.setUint32(at, v, true);
  }
}

/** `0x…` of an address for messages (`~` marks one that a double cannot hold exactly). */
export function hex(addr: Addr): string {
  return `${addr > MAX_SAFE ? '~' : ''}0x${addr.toString(16)}`;
}

/** The address as the bigint the public API speaks. */
export function big(addr: Addr): bigint {
  return BigInt(addr);
}

/**
 * An address the public API gave us, as a number. An address of 2^53 or
 * more is not one the library can read: the memory's own checks refuse it
 * first (`checkAddress`), so this only converts.
 */
export function num(addr: bigint): Addr {
  return Number(addr);
}

const rawCache = new WeakMap<Memory, RawAccess>();

/** The number-address access of `mem`: its own where it has one, else built on its bigint methods. */
export function rawOf(mem: Memory): RawAccess {
  const own = mem.raw;
  if (own) return own;
  let r = rawCache.get(mem);
  if (!r) {
    r = bigintRaw(mem);
    rawCache.set(mem, r);
  }
  return r;
}

/** `RawAccess` over a `Memory`'s bigint methods (for a `Memory` implemented outside this library). */
function bigintRaw(mem: Memory): RawAccess {
  const ok = (addr: Addr, n: number): bigint => {
    if (!(addr >= 0) || addr > MAX_SAFE) throw new ArrowDeviceError('memory', '', `invalid address ${hex(addr)} (${n} bytes)`);
    const b = BigInt(addr);
    mem.checkAddress(b, n);
    return b;
  };
  return {
    check: (addr, n) => void ok(addr, n),
    readInto: (addr, n, a, off) => void mem.read(ok(addr, n), n, a.u8.subarray(off, off + n)),
    writeFrom: (addr, a, off, n) => mem.copyIn(ok(addr, n), a.u8.subarray(off, off + n)),
    writeWord: (addr, v) => mem.writePtr(ok(addr, mem.target.pointerSize), BigInt(v)),
    copyWithin: (dst, src, n) => mem.copyIn(ok(dst, n), mem.read(ok(src, n), n)),
    alloc: (size) => Number(mem.alloc(size)),
    free: (addr) => mem.free(BigInt(addr)),
    strlen: (addr, max) => mem.readCStringBytes(ok(addr, 1), max).byteLength,
  };
}

// ignoreBOM: a string that starts with U+FEFF keeps it (by default a decoder drops a leading BOM, and a
// name or key would lose its first character).
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The NUL-terminated UTF-8 string at `addr` (at most `max` bytes before
 * its NUL), read with one length call and one copy (or none, in place); the
 * `Memory.readCString` of the hot paths. Invalid UTF-8 is a typed error.
 */
export function cString(raw: RawAccess, addr: Addr, max: number): string {
  const n = raw.strlen(addr, max);
  if (n === 0) return '';
  const at = stage(raw, addr, n);
  const u8 = staged.u8;
  // Short ASCII (format strings, most names): no decoder call.
  if (n <= 64) {
    let ascii = true;
    for (let i = 0; i < n; i++) {
      if (u8[at + i]! >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) return String.fromCharCode.apply(null, u8.subarray(at, at + n) as unknown as number[]);
  }
  try {
    return utf8.decode(u8.subarray(at, at + n));
  } catch {
    throw new ArrowDeviceError('invalid', '', `string at ${hex(addr)} is not valid UTF-8`);
  }
}

/**
 * Field `f` (an accessor of src/abi/accessors.ts) of the struct at `ptr`,
 * read through one staged copy of the field: for the paths that read one
 * field of a struct (the hot paths stage the whole struct once instead).
 */
export function readField(mem: Memory, f: FieldAccess, ptr: Ptr | Addr): number {
  const at = stage(rawOf(mem), Number(ptr) + f.offset, f.size);
  return f.get(staged.dv, at - f.offset);
}

/** `readField` with the exact value (a callback pointer handed on, a device address). */
export function readFieldBig(mem: Memory, f: FieldAccess, ptr: Ptr | Addr): bigint {
  const at = stage(rawOf(mem), Number(ptr) + f.offset, f.size);
  return f.big(staged.dv, at - f.offset);
}

/** Writes `v` into field `f` of the struct at `ptr` (one copy of the field's bytes). */
export function writeField(mem: Memory, f: FieldAccess, ptr: Ptr | Addr, v: number): void {
  const raw = rawOf(mem);
  const off = reserve(f.offset + f.size);
  f.set(arena.dv, off, v);
  raw.writeFrom(Number(ptr) + f.offset, arena, off + f.offset, f.size);
}

/** `writeField` of an exact value (a pointer handed on, a device address). */
export function writeFieldBig(mem: Memory, f: FieldAccess, ptr: Ptr | Addr, v: bigint): void {
  const raw = rawOf(mem);
  const off = reserve(f.offset + f.size);
  f.setBig(arena.dv, off, v);
  raw.writeFrom(Number(ptr) + f.offset, arena, off + f.offset, f.size);
}

/**
 * Writes a whole struct of `size` bytes at `ptr` in one copy: `fill` sets
 * its fields with the typed accessors on `dv` at `at` (zero bytes before).
 */
export function writeStruct(mem: Memory, ptr: Ptr | Addr, size: number, fill: (dv: DataView, at: number) => void): void {
  const off = reserve(size);
  const a = arena;
  fill(a.dv, off);
  rawOf(mem).writeFrom(Number(ptr), a, off, size);
}
