/**
 * The Memory interface: everything the upper layers need to touch the memory
 * a C struct lives in. Two backends fit it: native (Node, through koffi) and
 * wasm32 (a WebAssembly.Memory and the module's exports). Addresses are
 * always `bigint` (koffi 3's pointer type), whatever the pointer width, and
 * the width is a property of the memory: `memory.target` and `memory.layouts`
 * give the struct layouts to use with it.
 */
import type { Layouts, Target } from '../abi/layout.js';
import type { Addr, RawAccess } from './raw.js';

/** An address in a Memory. `0n` is NULL. */
export type Ptr = bigint;
/** The NULL address, `0n`: what an absent buffer, child or callback reads as. */
export const NULL: Ptr = 0n;

/** The C types that appear in the interfaces' callback signatures. */
export type CType = 'void' | 'int32' | 'int64' | 'pointer';

/** A C function signature, for callbacks we expose and foreign functions we call. */
export interface Signature {
  /** The function's name, for messages and to tell callbacks apart. */
  readonly name: string;
  /** Its return type. */
  readonly result: CType;
  /** Its parameter types, in order. */
  readonly params: readonly CType[];
}

/** The value of a `CType` on the JS side: pointers and int64 are bigint. */
export type CValue = number | bigint;

/**
 * Where C structs live, and everything the library does with that memory: typed reads and writes,
 * C strings, zero-copy views, copies, allocation and calls through function pointers. Two backends
 * implement it: `nativeMemory()` (the process's own, through koffi) and `wasmMemory()` (a wasm32 module's
 * linear memory). Every function of the package takes one as its `memory` option.
 */
export interface Memory {
  /** The C target of this memory: its pointer width and int64 alignment. */
  readonly target: Target;
  /** The struct layouts for `target` (`layoutsFor(target)`). */
  readonly layouts: Layouts;
  /** A short name for messages: "native", "wasm32". */
  readonly name: string;
  /**
   * True when every `view()` is of one shared ArrayBuffer that outlives the
   * views (a wasm memory's): an ArrayBuffer's collection then says nothing
   * about the views, so the import layer tracks the view objects instead
   * (and the arrow-js objects built over them hold the import).
   */
  readonly viewsShareBuffer?: boolean;

  /**
   * @internal Number-address access for the per-batch hot paths (see
   * src/memory/raw.ts). Both backends of the library have it; a `Memory`
   * without it is adapted through the bigint methods.
   */
  readonly raw?: RawAccess;

  /**
   * Whether `addr` is a live allocation of this memory's `alloc` (absent on
   * memories that do not track them). `free*` helpers check it before they
   * touch the struct, so misuse is a typed error, never a crash.
   */
  owns?(addr: Ptr): boolean;
  /** Memory of the process that any thread may free with `freeProcess` (native memory only: src/share). */
  allocProcess?(size: number): Ptr;
  /** Frees what `allocProcess` gave, in any thread. */
  freeProcess?(addr: Ptr): void;

  /** Reads an unsigned 8-bit integer at `addr`. */
  readU8(addr: Ptr): number;
  /** Reads a signed 8-bit integer at `addr`. */
  readI8(addr: Ptr): number;
  /** Reads an unsigned 16-bit integer at `addr`, in the memory's byte order. */
  readU16(addr: Ptr): number;
  /** Reads a signed 16-bit integer at `addr`, in the memory's byte order. */
  readI16(addr: Ptr): number;
  /** Reads an unsigned 32-bit integer at `addr`, in the memory's byte order. */
  readU32(addr: Ptr): number;
  /** Reads a signed 32-bit integer at `addr`, in the memory's byte order. */
  readI32(addr: Ptr): number;
  /** Reads a signed 64-bit integer at `addr`, in the memory's byte order. */
  readI64(addr: Ptr): bigint;
  /** Reads an unsigned 64-bit integer at `addr`, in the memory's byte order. */
  readU64(addr: Ptr): bigint;
  /** Reads a 32-bit float at `addr`, in the memory's byte order. */
  readF32(addr: Ptr): number;
  /** Reads a 64-bit float at `addr`, in the memory's byte order. */
  readF64(addr: Ptr): number;
  /** A pointer-width unsigned value; `0n` for NULL. */
  readPtr(addr: Ptr): Ptr;

  /** Writes an unsigned 8-bit integer at `addr`. */
  writeU8(addr: Ptr, v: number): void;
  /** Writes a signed 8-bit integer at `addr`. */
  writeI8(addr: Ptr, v: number): void;
  /** Writes an unsigned 16-bit integer at `addr`, in the memory's byte order. */
  writeU16(addr: Ptr, v: number): void;
  /** Writes a signed 16-bit integer at `addr`, in the memory's byte order. */
  writeI16(addr: Ptr, v: number): void;
  /** Writes an unsigned 32-bit integer at `addr`, in the memory's byte order. */
  writeU32(addr: Ptr, v: number): void;
  /** Writes a signed 32-bit integer at `addr`, in the memory's byte order. */
  writeI32(addr: Ptr, v: number): void;
  /** Writes a signed 64-bit integer at `addr`, in the memory's byte order. */
  writeI64(addr: Ptr, v: bigint | number): void;
  /** Writes an unsigned 64-bit integer at `addr`, in the memory's byte order. */
  writeU64(addr: Ptr, v: bigint | number): void;
  /** Writes a 32-bit float at `addr`, in the memory's byte order. */
  writeF32(addr: Ptr, v: number): void;
  /** Writes a 64-bit float at `addr`, in the memory's byte order. */
  writeF64(addr: Ptr, v: number): void;
  /** Writes a pointer-width value at `addr`. */
  writePtr(addr: Ptr, v: Ptr): void;

  /**
   * The bytes of a NUL-terminated string, without the NUL. Throws if no NUL
   * is found within `maxBytes` (a guard against unterminated foreign strings).
   */
  readCStringBytes(addr: Ptr, maxBytes?: number): Uint8Array;
  /** A NUL-terminated UTF-8 string; throws a typed error on invalid UTF-8. */
  readCString(addr: Ptr, maxBytes?: number): string;

  /** Throws the typed error a read of `byteLength` bytes at `addr` would, without reading. */
  checkAddress(addr: Ptr, byteLength: number): void;

  /**
   * A zero-copy view of `byteLength` bytes at `addr`. The view is only valid
   * while the memory behind it is; keeping it valid is the caller's job (the
   * array layer ties views to the owner of the import). A view of 0 bytes
   * never touches the address.
   */
  view(addr: Ptr, byteLength: number): Uint8Array;
  /** Copies `byteLength` bytes at `addr` into a new JS-owned array. */
  copyOut(addr: Ptr, byteLength: number): Uint8Array;
  /** Copies `byteLength` bytes at `addr` into `into` (or a new array) and returns it. */
  read(addr: Ptr, byteLength: number, into?: Uint8Array): Uint8Array;
  /** Copies `bytes` to `addr`. */
  copyIn(addr: Ptr, bytes: Uint8Array): void;

  /** Allocates `size` zeroed bytes, aligned for any of the interfaces' structs (>= 8). */
  alloc(size: number): Ptr;
  /** Frees what `alloc` returned. `free(NULL)` does nothing. */
  free(addr: Ptr): void;

  /**
   * The address of the bytes of a JS-owned buffer, for export, if this memory
   * can point at them directly (native: yes; wasm32: no, the JS heap is not in
   * the module's memory). The caller must keep `bytes` reachable for as long
   * as the address is used.
   */
  addressOf(bytes: ArrayBufferView): Ptr | undefined;

  /**
   * A C-callable function pointer that runs `fn`. Registrations are a scarce
   * resource (koffi allows 8192 in all): register once per signature and
   * dispatch on the struct's `private_data`.
   */
  registerCallback(sig: Signature, fn: (...args: CValue[]) => CValue | void): Ptr;
  /** Calls the foreign function at `fn`. */
  call(fn: Ptr, sig: Signature, ...args: CValue[]): CValue | undefined;
  /**
   * Calls the foreign function at `fn` without blocking the JS thread (native:
   * on one of koffi's worker threads). Use it for foreign code that may wait
   * on threads that call back into JS: their callbacks are queued to the JS
   * thread, which a synchronous call would keep busy (a deadlock).
   */
  callAsync(fn: Ptr, sig: Signature, ...args: CValue[]): Promise<CValue | undefined>;
  /**
   * Whether `fn` is one of this memory's own registered callbacks (a JS
   * function behind a C pointer). Calling one on another thread gains
   * nothing: it runs on the JS thread anyway, queued there by the FFI. Absent
   * on memories whose calls all run on the JS thread (wasm32).
   */
  isOwnCallback?(fn: Ptr): boolean;
  /**
   * Keeps the code at `fn` (a producer's callback, kept to be called later:
   * a `release`, a stream's `get_next`) loaded for the rest of the process,
   * whatever becomes of the handle its library was loaded by: native memory
   * pins the shared library that holds it. Absent where code cannot be
   * unloaded under a struct (a wasm module's table lives with its memory).
   */
  keepLoaded?(fn: Addr): void;
}
