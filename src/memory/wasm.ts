/**
 * The wasm32 backend of `Memory`: the linear memory of a WebAssembly module,
 * with the module's own allocator and indirect function table. Every import
 * and export of the library works over it with the same code as native; only
 * the layouts (WASM32: 4-byte pointers, int64 8-aligned) and the memory differ.
 *
 * What the module must export (or its JS glue hand out):
 *
 * | what | why | C (clang/wasm-ld) | Rust (wasm-bindgen) | Emscripten |
 * | --- | --- | --- | --- | --- |
 * | its `WebAssembly.Memory` | every read and write | `memory` (default) | `memory`, or the glue's `wasmMemory()` | `wasmMemory` / `HEAP8.buffer` owner |
 * | an allocator | structs we export, our copy of an imported struct, exported buffers | `malloc`, `free` | `__wbindgen_malloc`, `__wbindgen_free` | `_malloc`, `_free` (`-sEXPORTED_FUNCTIONS`) |
 * | its indirect function table | calling the producer's `release` (`call`), making our callbacks callable from wasm (`registerCallback`) | `-Wl,--export-table -Wl,--growable-table` (`__indirect_function_table`) | the glue's `_functionTable()` | `wasmTable` (`-sALLOW_TABLE_GROWTH`) |
 *
 * The allocator is given as `malloc(size, align)` and `free(ptr, size, align)`:
 * wasm-bindgen's `__wbindgen_malloc`/`__wbindgen_free` take exactly that, and a
 * C `malloc(size)`/`free(ptr)` can be passed as is (a wasm function ignores
 * extra arguments). Allocations are asked for with 16-byte alignment, and one
 * that comes back less than 8-aligned is refused.
 *
 * Only importing needs no table: without one, `release` cannot be called, so
 * imports throw when they would release; pass `table`.
 *
 * ## Memory growth
 *
 * When the module grows its memory (any allocation may), the engine replaces
 * `memory.buffer` and detaches the old ArrayBuffer. This backend never keeps
 * a stale buffer: every read, write and copy goes through the current one.
 * Views handed out by `view()` are plain `Uint8Array`s over the buffer of the
 * moment, so after a growth they are detached: their length is 0, indexing
 * them gives `undefined`, and typed-array methods (`slice`, `set`,
 * `subarray`) throw a TypeError. They never show stale or foreign bytes
 * (`isDetached` tells). The import layer makes views lazily, on first access
 * of a buffer, so a buffer first read after a growth is viewed in the new
 * memory and is fine. For data that must outlive a growth of the module's
 * memory, import with `copy: true`. A shared memory (SharedArrayBuffer, wasm
 * threads) is not detached by growth: there old views stay valid.
 */
import { layoutsFor, WASM32, type Layouts, type Target } from '../abi/layout.js';
import type { ArrowWasmMemory } from '../abi/protocol.js';
import { allocBytes, ArrowDeviceError } from '../errors.js';
import type { CType, CValue, Memory, Ptr, Signature } from './memory.js';
import type { Addr, Arena, RawAccess } from './raw.js';
import { setWasmHandles } from './handle.js';

// In its own module so that importing native code only (arrow-device/adbc) loads no wasm code; public from here.
export { isDetached } from './detached.js';

/** `malloc(size, align)`: the address of `size` bytes aligned to `align`, or 0. */
export type WasmMalloc = (size: number, align: number) => number;
/** `free(ptr, size, align)`, with what `malloc` was given. */
export type WasmFree = (ptr: number, size: number, align: number) => void;

/**
 * The part of a `WebAssembly.Memory` this backend uses. The WebAssembly
 * types are declared here, structurally, rather than taken from TypeScript's
 * DOM lib: the published .d.ts must type-check in a Node project whose `lib`
 * has no "DOM" (a real `WebAssembly.Memory` fits this interface).
 */
export interface WasmLinearMemory {
  /** The memory's current bytes; a growth replaces (and detaches) it. */
  readonly buffer: ArrayBuffer;
  /** Grows the memory by `delta` 64 KiB pages; returns the old size in pages. */
  grow(delta: number): number;
}

/**
 * The WebAssembly JS API at run time (the global object), typed with only what
 * this file calls. Module-scoped: it shadows, and never conflicts with, the DOM
 * lib's global where a program has one.
 */
declare const WebAssembly: {
  readonly Memory: abstract new (...args: never[]) => WasmLinearMemory;
  readonly Table: abstract new (...args: never[]) => WasmTable;
  readonly Module: new (bytes: Uint8Array<ArrayBuffer>) => WasmModule;
  readonly Instance: new (module: WasmModule, imports: Record<string, Record<string, unknown>>) => {
    readonly exports: Record<string, unknown>;
  };
};
/** A compiled module, opaque here. */
type WasmModule = object;

/** The part of a `WebAssembly.Table` this backend uses (a wrapper for tests or glue code will do). */
export interface WasmTable {
  /** The number of entries: a function pointer is an index below it. */
  readonly length: number;
  /** The function at `index`. */
  get(index: number): unknown;
  /** Adds `delta` entries set to `value`; returns the old length. */
  grow(delta: number, value?: unknown): number;
}

/** What `wasmMemory` needs of a wasm32 module: its memory, its allocator and, to call or register C callbacks, its function table. */
export interface WasmMemoryOptions {
  /** The module's linear memory (wasm32). */
  memory: WasmLinearMemory;
  /** The module's allocator: `__wbindgen_malloc`, or C `malloc`. See the file comment. */
  malloc: WasmMalloc;
  /** The allocator's free: `__wbindgen_free`, or C `free`. */
  free: WasmFree;
  /**
   * The module's indirect function table (funcref): needed to call foreign
   * function pointers (`release`) and to register callbacks. It must be
   * growable for `registerCallback`.
   */
  table?: WasmTable;
  /** A name for messages; "wasm32" by default. */
  name?: string;
}

/** A wasm32 `Memory`, plus what a test or a caller may want to know about the module side. */
export interface WasmMemory extends Memory {
  /** The module's linear memory. */
  readonly memory: WasmLinearMemory;
  /** The module's function table; undefined when none was given (callbacks then cannot be called or registered). */
  readonly table: WasmTable | undefined;
  /** Allocations made with `alloc` and not freed yet, and their bytes. */
  readonly allocations: {
    /** How many. */
    readonly count: number;
    /** Their bytes, in all. */
    readonly bytes: number;
  };
  /** How many times the memory has been seen to grow (its buffer replaced) since this object was made. */
  readonly growths: number;
}

/** Alignment asked of the module's allocator: max_align_t on wasm32. */
const ALLOC_ALIGN = 16;
const MAX_WASM32 = 2 ** 32;
const MAX_WASM32_BIG = BigInt(MAX_WASM32);

const textDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function memoryError(detail: string): ArrowDeviceError {
  return new ArrowDeviceError('memory', '', detail);
}

/**
 * Every ArrayBuffer a wasm memory backend has seen as its memory's buffer
 * (growth replaces it): how the array layer tells a view of wasm memory,
 * which growth can detach while the import is live, from a native view.
 */
const wasmBuffers = new WeakSet<ArrayBuffer>();

/** Whether `buf` is (or was, before a growth) the buffer of a wasm memory this library reads. */
export function isWasmMemoryBuffer(buf: ArrayBufferLike): boolean {
  return wasmBuffers.has(buf as ArrayBuffer);
}

const valType: Record<Exclude<CType, 'void'>, number> = { int32: 0x7f, int64: 0x7e, pointer: 0x7f };

/** Unsigned LEB128. */
function leb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function section(id: number, body: number[]): number[] {
  return [id, ...leb(body.length), ...body];
}

function str(s: string): number[] {
  const b = [...new TextEncoder().encode(s)];
  return [...leb(b.length), ...b];
}

/**
 * The bytes of a module that imports `m.f` with the wasm signature of `sig`
 * and exports `f`, a wasm function that calls it: a JS function cannot be put
 * into a funcref table, an exported wasm function can.
 *
 *   (module (type (func (param ...) (result ...))) (import "m" "f" (func $f (type 0)))
 *     (func (type 0) local.get 0 ... call $f) (export "f" (func 1)))
 */
export function trampolineModule(sig: Signature): Uint8Array<ArrayBuffer> {
  const params = sig.params.map((p) => valType[p as Exclude<CType, 'void'>]);
  const result = sig.result;
  const results = result === 'void' ? [] : [valType[result]];
  const type = [0x60, ...leb(params.length), ...params, ...leb(results.length), ...results];
  const body = [0x00 /* no locals */];
  for (let i = 0; i < params.length; i++) body.push(0x20, ...leb(i)); // local.get i
  body.push(0x10, 0x00, 0x0b); // call 0 (the import); end
  return new Uint8Array([
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, [1, ...type]),
    ...section(2, [1, ...str('m'), ...str('f'), 0x00, 0x00]),
    ...section(3, [1, 0x00]),
    ...section(7, [1, ...str('f'), 0x00, 0x01]),
    ...section(10, [1, ...leb(body.length), ...body]),
  ]);
}

const trampolineModules = new Map<string, WasmModule>();

function trampoline(sig: Signature, fn: (...args: (number | bigint)[]) => number | bigint | undefined): Function {
  const key = `${sig.result}(${sig.params.join(',')})`;
  let mod = trampolineModules.get(key);
  if (!mod) {
    mod = new WebAssembly.Module(trampolineModule(sig));
    trampolineModules.set(key, mod);
  }
  const inst = new WebAssembly.Instance(mod, { m: { f: fn } });
  return inst.exports.f as Function;
}

class WasmMemoryImpl implements WasmMemory {
  readonly target: Target = WASM32;
  readonly layouts: Layouts = layoutsFor(WASM32);
  readonly name: string;
  /**
   * Every view is of the memory's one ArrayBuffer, which lives as long as the
   * module: the import layer must track the views themselves, not their buffer.
   */
  readonly viewsShareBuffer = true;
  readonly memory: WasmLinearMemory;
  readonly table: WasmTable | undefined;
  growths = 0;
  /** The allocator functions, as given. */
  readonly mallocFn: WasmMalloc;
  readonly freeFn: WasmFree;
  /** Views of the current buffer; replaced when an access finds the buffer grown (see `refresh`). */
  private u8: Uint8Array;
  private dv: DataView;
  private readonly sizes = new Map<number, number>();
  private bytes = 0;

  constructor(o: WasmMemoryOptions) {
    if (!(o.memory instanceof WebAssembly.Memory)) throw new ArrowDeviceError('invalid', 'options.memory', 'not a WebAssembly.Memory');
    if (typeof o.malloc !== 'function') throw new ArrowDeviceError('invalid', 'options.malloc', 'the module\'s allocator is needed (__wbindgen_malloc, malloc)');
    if (typeof o.free !== 'function') throw new ArrowDeviceError('invalid', 'options.free', 'the module\'s free is needed (__wbindgen_free, free)');
    this.memory = o.memory;
    this.mallocFn = o.malloc;
    this.freeFn = o.free;
    this.table = o.table;
    this.name = o.name ?? 'wasm32';
    this.u8 = new Uint8Array(this.memory.buffer);
    this.dv = new DataView(this.memory.buffer);
    this.whole = { u8: this.u8, dv: this.dv, addr: 0, next: 0 };
    wasmBuffers.add(this.memory.buffer);
  }

  get allocations(): { count: number; bytes: number } {
    return { count: this.sizes.size, bytes: this.bytes };
  }

  /**
   * Takes new views of `memory.buffer` if it was replaced. Called only when
   * an access falls outside the cached view: a growth detaches the old
   * buffer (its views' length becomes 0), and a shared memory's old buffer
   * is shorter than the new one, so an access the old view can serve is
   * one the new memory serves identically.
   */
  private refresh(): void {
    const buf = this.memory.buffer;
    if (buf !== this.u8.buffer) {
      wasmBuffers.add(buf);
      this.u8 = new Uint8Array(buf);
      this.dv = new DataView(buf);
      this.whole = { u8: this.u8, dv: this.dv, addr: 0, next: 0 };
      this.growths++;
    }
  }

  /**
   * The whole memory as the JS memory `stage` reads in place (offset =
   * address): no copy of a struct out of it. Valid until the memory grows,
   * which only a call into the module can do: code that calls into the
   * module between a `stage` and its last read of the bytes must check them
   * (`isDetached`) or stage again (ImportOwner.move does).
   */
  private whole: Arena = { u8: new Uint8Array(0), dv: new DataView(new ArrayBuffer(0)), addr: 0, next: 0 };

  /** The offset of `size` bytes at `addr`, checked; throws the typed error of a bad access. */
  private at(addr: Ptr, size: number): number {
    if (typeof addr !== 'bigint') throw memoryError(`address must be a bigint, got ${typeof addr}`);
    if (addr === 0n) throw memoryError('NULL pointer');
    if (addr < 0n || addr >= MAX_WASM32_BIG) throw memoryError(`address 0x${addr.toString(16)} is not a wasm32 address`);
    const a = Number(addr);
    if (a + size > this.u8.byteLength) {
      this.refresh();
      if (a + size > this.u8.byteLength) {
        throw memoryError(`address 0x${a.toString(16)} (${size} bytes) is outside the wasm memory of ${this.u8.byteLength} bytes`);
      }
    }
    return a;
  }

  /** `at` for a number address (src/memory/raw.ts): the same checks and messages. */
  private atNum(a: Addr, size: number): number {
    if (a === 0) throw memoryError('NULL pointer');
    if (!(a >= 0 && a < MAX_WASM32)) throw memoryError(`address 0x${a.toString(16)} is not a wasm32 address`);
    if (a + size > this.u8.byteLength) {
      this.refresh();
      if (a + size > this.u8.byteLength) {
        throw memoryError(`address 0x${a.toString(16)} (${size} bytes) is outside the wasm memory of ${this.u8.byteLength} bytes`);
      }
    }
    return a;
  }

  readonly raw: RawAccess = {
    check: (addr, n) => void this.atNum(addr, n),
    inPlace: (addr, n) => {
      this.atNum(addr, n);
      return this.whole;
    },
    readInto: (addr, n, arena, off) => {
      const a = this.atNum(addr, n);
      const u8 = this.u8;
      if (n <= 64) {
        // Struct-sized copies: a loop beats creating a subarray.
        const dst = arena.u8;
        for (let i = 0; i < n; i++) dst[off + i] = u8[a + i]!;
      } else {
        arena.u8.set(u8.subarray(a, a + n), off);
      }
    },
    writeFrom: (addr, arena, off, n) => {
      const a = this.atNum(addr, n);
      const u8 = this.u8;
      const src = arena.u8;
      // Within the memory (bytes staged in place): one native copy.
      if (src.buffer === u8.buffer) u8.copyWithin(a, src.byteOffset + off, src.byteOffset + off + n);
      else if (n > 64) u8.set(src.subarray(off, off + n), a);
      else for (let i = 0; i < n; i++) u8[a + i] = src[off + i]!;
    },
    writeWord: (addr, v) => {
      const a = this.atNum(addr, 4);
      this.dv.setUint32(a, v, true);
    },
    copyWithin: (dst, src, n) => {
      const d = this.atNum(dst, n);
      const s = this.atNum(src, n);
      this.u8.copyWithin(d, s, s + n);
    },
    alloc: (size) => Number(this.alloc(size)),
    free: (addr) => this.free(BigInt(addr)),
    strlen: (addr, max) => {
      const a = this.atNum(addr, 1);
      const end = Math.min(this.u8.byteLength, a + max + 1);
      // Short strings (formats, names): a loop beats creating a subarray to search.
      const u8 = this.u8;
      for (let i = a, stop = Math.min(end, a + 64); i < stop; i++) if (u8[i] === 0) return i - a;
      const nul = this.u8.subarray(a, end).indexOf(0);
      if (nul >= 0) return nul;
      if (end === this.u8.byteLength && end - a <= max) {
        throw memoryError(`string at 0x${a.toString(16)} runs off the end of the wasm memory`);
      }
      throw new ArrowDeviceError('invalid', '', `string at 0x${a.toString(16)} has no NUL terminator within ${max} bytes`);
    },
  };

  checkAddress(addr: Ptr, byteLength: number): void {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) throw memoryError(`invalid length ${byteLength}`);
    this.at(addr, byteLength);
  }

  // Each accessor checks (and so possibly refreshes) before it touches this.u8/this.dv: in
  // `this.dv.getInt32(this.at(...))` the stale DataView would be taken before the check ran.
  readU8(addr: Ptr): number { const a = this.at(addr, 1); return this.u8[a]!; }
  readI8(addr: Ptr): number { const a = this.at(addr, 1); return this.dv.getInt8(a); }
  readU16(addr: Ptr): number { const a = this.at(addr, 2); return this.dv.getUint16(a, true); }
  readI16(addr: Ptr): number { const a = this.at(addr, 2); return this.dv.getInt16(a, true); }
  readU32(addr: Ptr): number { const a = this.at(addr, 4); return this.dv.getUint32(a, true); }
  readI32(addr: Ptr): number { const a = this.at(addr, 4); return this.dv.getInt32(a, true); }
  readI64(addr: Ptr): bigint { const a = this.at(addr, 8); return this.dv.getBigInt64(a, true); }
  readU64(addr: Ptr): bigint { const a = this.at(addr, 8); return this.dv.getBigUint64(a, true); }
  readF32(addr: Ptr): number { const a = this.at(addr, 4); return this.dv.getFloat32(a, true); }
  readF64(addr: Ptr): number { const a = this.at(addr, 8); return this.dv.getFloat64(a, true); }
  readPtr(addr: Ptr): Ptr { const a = this.at(addr, 4); return BigInt(this.dv.getUint32(a, true)); }

  writeU8(addr: Ptr, v: number): void { const a = this.at(addr, 1); this.dv.setUint8(a, v); }
  writeI8(addr: Ptr, v: number): void { const a = this.at(addr, 1); this.dv.setInt8(a, v); }
  writeU16(addr: Ptr, v: number): void { const a = this.at(addr, 2); this.dv.setUint16(a, v, true); }
  writeI16(addr: Ptr, v: number): void { const a = this.at(addr, 2); this.dv.setInt16(a, v, true); }
  writeU32(addr: Ptr, v: number): void { const a = this.at(addr, 4); this.dv.setUint32(a, v, true); }
  writeI32(addr: Ptr, v: number): void { const a = this.at(addr, 4); this.dv.setInt32(a, v, true); }
  writeI64(addr: Ptr, v: bigint | number): void { const a = this.at(addr, 8); this.dv.setBigInt64(a, BigInt(v), true); }
  writeU64(addr: Ptr, v: bigint | number): void { const a = this.at(addr, 8); this.dv.setBigUint64(a, BigInt(v), true); }
  writeF32(addr: Ptr, v: number): void { const a = this.at(addr, 4); this.dv.setFloat32(a, v, true); }
  writeF64(addr: Ptr, v: number): void { const a = this.at(addr, 8); this.dv.setFloat64(a, v, true); }
  writePtr(addr: Ptr, v: Ptr): void {
    if (v < 0n || v >= MAX_WASM32_BIG) throw memoryError(`pointer 0x${v.toString(16)} does not fit in 32 bits`);
    const a = this.at(addr, 4);
    this.dv.setUint32(a, Number(v), true);
  }

  readCStringBytes(addr: Ptr, maxBytes = 1 << 20): Uint8Array {
    const a = this.at(addr, 1);
    const end = Math.min(this.u8.byteLength, a + maxBytes + 1);
    const nul = this.u8.subarray(a, end).indexOf(0);
    if (nul < 0) {
      if (end === this.u8.byteLength && end - a <= maxBytes) {
        throw memoryError(`string at 0x${a.toString(16)} runs off the end of the wasm memory`);
      }
      throw new ArrowDeviceError('invalid', '', `string at 0x${a.toString(16)} has no NUL terminator within ${maxBytes} bytes`);
    }
    return this.u8.slice(a, a + nul);
  }

  readCString(addr: Ptr, maxBytes?: number): string {
    const bytes = this.readCStringBytes(addr, maxBytes);
    try {
      return textDecoder.decode(bytes);
    } catch {
      throw new ArrowDeviceError('invalid', '', `string at 0x${addr.toString(16)} is not valid UTF-8`);
    }
  }

  private length(byteLength: number): number {
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) throw memoryError(`invalid length ${byteLength}`);
    return byteLength;
  }

  view(addr: Ptr, byteLength: number): Uint8Array {
    if (this.length(byteLength) === 0) return new Uint8Array(0);
    const a = this.at(addr, byteLength);
    return new Uint8Array(this.u8.buffer, a, byteLength);
  }

  copyOut(addr: Ptr, byteLength: number): Uint8Array {
    return this.read(addr, byteLength);
  }

  read(addr: Ptr, byteLength: number, into?: Uint8Array): Uint8Array {
    const out = into ?? allocBytes(this.length(byteLength));
    if (byteLength === 0) return out;
    if (out.byteLength < byteLength) throw memoryError(`read of ${byteLength} bytes into ${out.byteLength}`);
    const a = this.at(addr, byteLength);
    if (byteLength <= 64) {
      // Struct-sized reads: a loop beats creating a subarray.
      const u8 = this.u8;
      for (let i = 0; i < byteLength; i++) out[i] = u8[a + i]!;
    } else {
      out.set(this.u8.subarray(a, a + byteLength));
    }
    return out;
  }

  copyIn(addr: Ptr, bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    const a = this.at(addr, bytes.byteLength);
    this.u8.set(bytes, a);
  }

  alloc(size: number): Ptr {
    if (!Number.isSafeInteger(size) || size < 0 || size >= MAX_WASM32) {
      throw new ArrowDeviceError('nomem', '', `allocation of ${size} bytes is impossible in a wasm32 memory`);
    }
    const n = Math.max(1, size);
    let p: number;
    try {
      p = this.mallocFn(n, ALLOC_ALIGN) >>> 0;
    } catch (cause) {
      // wasm-bindgen's malloc traps (unreachable) when the memory cannot grow.
      throw new ArrowDeviceError('nomem', '', `allocation of ${size} bytes in the wasm memory failed: ${String(cause)}`, { cause });
    }
    if (p === 0) throw new ArrowDeviceError('nomem', '', `allocation of ${size} bytes in the wasm memory failed`);
    if (p % 8 !== 0) {
      this.freeFn(p, n, ALLOC_ALIGN);
      throw new ArrowDeviceError('unsupported', '', `the module's malloc returned 0x${p.toString(16)}, which is not 8-byte aligned`);
    }
    const a = this.at(BigInt(p), n);
    this.u8.fill(0, a, a + n);
    this.sizes.set(p, n);
    this.bytes += n;
    return BigInt(p);
  }

  owns(addr: Ptr): boolean {
    return typeof addr === 'bigint' && addr > 0n && addr < MAX_WASM32_BIG && this.sizes.has(Number(addr));
  }

  free(addr: Ptr): void {
    if (addr === 0n) return;
    const p = Number(addr);
    const n = this.sizes.get(p);
    if (n === undefined) {
      // Never hand the module's allocator an address it did not give us (or gave and got back).
      throw memoryError(`free of 0x${p.toString(16)}, which this memory did not allocate (or freed already)`);
    }
    this.sizes.delete(p);
    this.bytes -= n;
    this.freeFn(p, n, ALLOC_ALIGN);
  }

  addressOf(): Ptr | undefined {
    // The JS heap is not in the module's memory: export copies into it.
    return undefined;
  }

  private needTable(what: string): WasmTable {
    if (!this.table) {
      throw new ArrowDeviceError(
        'unsupported',
        '',
        `${what} needs the module's indirect function table: pass wasmMemory({ table }) (C: link with -Wl,--export-table; wasm-bindgen: the glue's _functionTable())`,
      );
    }
    return this.table;
  }

  registerCallback(sig: Signature, fn: (...args: CValue[]) => CValue | void): Ptr {
    const table = this.needTable(`registering the ${sig.name} callback`);
    const wrapped = (...args: (number | bigint)[]): number | bigint | undefined => {
      const norm = args.map((a, i) => fromWasm(sig.params[i]!, a));
      const r = fn(...norm);
      return sig.result === 'void' ? undefined : toWasm(sig.result, r ?? 0);
    };
    const f = trampoline(sig, wrapped);
    let index: number;
    try {
      index = table.grow(1, f);
    } catch (cause) {
      throw new ArrowDeviceError(
        'unsupported',
        '',
        `cannot add the ${sig.name} callback to the module's function table (${String(cause)}): the table must be growable (C: link with -Wl,--growable-table; Emscripten: -sALLOW_TABLE_GROWTH)`,
        { cause },
      );
    }
    return BigInt(index);
  }

  /** wasm code runs on the JS thread: an async call is a synchronous one whose result is delivered as a promise. */
  callAsync(fn: Ptr, sig: Signature, ...args: CValue[]): Promise<CValue | undefined> {
    try {
      return Promise.resolve(this.call(fn, sig, ...args));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  call(fn: Ptr, sig: Signature, ...args: CValue[]): CValue | undefined {
    const table = this.needTable(`calling ${sig.name}`);
    if (fn === 0n) throw memoryError(`NULL function pointer (${sig.name})`);
    if (fn < 0n || fn >= BigInt(table.length)) {
      throw memoryError(`function pointer ${fn} (${sig.name}) is outside the module's function table of ${table.length} entries`);
    }
    const f = table.get(Number(fn));
    if (typeof f !== 'function') throw memoryError(`function pointer ${fn} (${sig.name}) is an empty slot of the module's function table`);
    if (args.length !== sig.params.length) {
      throw new ArrowDeviceError('invalid', '', `${sig.name} takes ${sig.params.length} arguments, got ${args.length}`);
    }
    const r = (f as (...a: (number | bigint)[]) => unknown)(...args.map((a, i) => toWasm(sig.params[i]!, a)));
    if (sig.result === 'void') return undefined;
    return fromWasm(sig.result, r as number | bigint);
  }
}

/** A JS value of `t` as the wasm32 value: pointers are i32 (numbers), int64 is i64 (bigint). */
function toWasm(t: CType, v: CValue): number | bigint {
  switch (t) {
    case 'int64':
      return BigInt(v);
    case 'pointer':
      return Number(BigInt.asUintN(32, BigInt(v))) | 0;
    default:
      return Number(v);
  }
}

/** A wasm32 value as the library's JS value of `t`: pointers and int64 as bigint. */
function fromWasm(t: CType, v: number | bigint): CValue {
  switch (t) {
    case 'pointer':
      return BigInt(Number(v) >>> 0);
    case 'int64':
      return BigInt(v);
    default:
      return Number(v);
  }
}

const byMemory = new WeakMap<WasmLinearMemory, WasmMemoryImpl[]>();

/**
 * The `Memory` of a wasm32 module: pass it as `{ memory }` to every import
 * and export function. One object per module (same options give the same
 * object): allocations and registered callbacks are tracked per object.
 *
 * @example
 * // parquet-wasm (arrow-rs compiled to wasm32, wasm-bindgen glue)
 * import * as pw from 'parquet-wasm/esm';
 * const ex = pw.initSync({ module: wasmBytes });
 * const memory = wasmMemory({ memory: ex.memory, malloc: ex.__wbindgen_malloc, free: ex.__wbindgen_free, table: pw._functionTable() });
 * const ffi = pw.readParquet(parquetBytes).intoFFI();
 * const table = importTable([...ffi.arrayAddrs()].map(BigInt), BigInt(ffi.schemaAddr()), { memory });
 * ffi.free();
 *
 * @example
 * // a C module: clang --target=wasm32 ... -Wl,--export-table -Wl,--growable-table, exporting malloc and free
 * const { instance } = await WebAssembly.instantiate(wasmBytes);
 * const memory = wasmMemoryFromExports(instance.exports);
 */
export function wasmMemory(opts: WasmMemoryOptions): WasmMemory {
  const list = opts.memory instanceof WebAssembly.Memory ? byMemory.get(opts.memory) : undefined;
  const same = list?.find((m) => m.table === opts.table && m.mallocFn === opts.malloc && m.freeFn === opts.free);
  if (same) return same;
  const m = new WasmMemoryImpl(opts);
  byMemory.set(opts.memory, [...(list ?? []), m]);
  return m;
}

/**
 * `wasmMemory` from a module's exports by their usual names: `memory`;
 * `malloc`/`free` (C), `__wbindgen_malloc`/`__wbindgen_free` (wasm-bindgen)
 * or `_malloc`/`_free` (Emscripten); the table `__indirect_function_table`.
 * `overrides` fills in or replaces any of them.
 *
 * @example
 * const { instance } = await WebAssembly.instantiate(wasmBytes); // a C module exporting malloc, free and its table
 * const memory = wasmMemoryFromExports(instance.exports);
 * const batch = importRecordBatch(BigInt(arrayAddr), BigInt(schemaAddr), { memory });
 */
export function wasmMemoryFromExports(exports: object, overrides: Partial<WasmMemoryOptions> = {}): WasmMemory {
  const ex = exports as Record<string, unknown>;
  const fn = (...names: string[]): unknown => names.map((n) => ex[n]).find((f) => typeof f === 'function');
  const memory = overrides.memory ?? ex.memory;
  if (!(memory instanceof WebAssembly.Memory)) {
    throw new ArrowDeviceError('invalid', 'exports.memory', 'the module exports no memory named "memory": pass { memory }');
  }
  const table = overrides.table ?? (ex.__indirect_function_table instanceof WebAssembly.Table ? ex.__indirect_function_table : undefined);
  const malloc = overrides.malloc ?? (fn('malloc', '__wbindgen_malloc', '_malloc') as WasmMalloc | undefined);
  const free = overrides.free ?? (fn('free', '__wbindgen_free', '_free') as WasmFree | undefined);
  if (!malloc || !free) {
    throw new ArrowDeviceError('invalid', 'exports', 'the module exports no allocator (malloc/free, __wbindgen_malloc/__wbindgen_free): pass { malloc, free }');
  }
  return wasmMemory({ memory, malloc, free, table, name: overrides.name });
}

// --- the exchange protocol's `memory` (PROTOCOL.md, "Memory") -----------------------------

const descriptors = new WeakMap<WasmMemoryImpl, ArrowWasmMemory>();

/**
 * What a protocol handle whose struct is in `m` carries as its `memory`:
 * the module's memory, table and allocator, as `m` was made from (so that
 * `wasmMemoryOf` of it gives `m` back); undefined when `m` is not a wasm
 * memory. One object per memory (consumers cache per object).
 */
export function wasmHandleMemory(m: Memory): ArrowWasmMemory | undefined {
  if (!(m instanceof WasmMemoryImpl)) return undefined;
  let d = descriptors.get(m);
  if (!d) {
    if (!m.table) {
      throw new ArrowDeviceError('unsupported', '', "a handle in wasm memory needs the module's function table (the consumer calls release through it): pass wasmMemory({ table })");
    }
    d = Object.freeze({ memory: m.memory, table: m.table, malloc: m.mallocFn, free: m.freeFn });
    descriptors.set(m, d);
  }
  return d;
}

const fromHandleMemory = new WeakMap<object, WasmMemory>();

/**
 * The `Memory` of a protocol handle's `memory` (a module's memory, table
 * and allocator): one object per descriptor, and the same `WasmMemory` as
 * `wasmMemory` with the same parts gives. `path` names the place in errors.
 */
export function wasmMemoryOf(d: ArrowWasmMemory, path: string): WasmMemory {
  const hit = fromHandleMemory.get(d);
  if (hit) return hit;
  const o = d as Partial<ArrowWasmMemory> | null;
  if (typeof o !== 'object' || o === null || !(o.memory instanceof WebAssembly.Memory)) {
    throw new ArrowDeviceError('invalid', `${path}.memory`, 'expected a WebAssembly.Memory (the module the struct lives in)');
  }
  if (typeof o.malloc !== 'function' || typeof o.free !== 'function') {
    throw new ArrowDeviceError('invalid', path, "expected the module's allocator as malloc(size, align) and free(ptr, size, align)");
  }
  if (typeof o.table !== 'object' || o.table === null || typeof o.table.get !== 'function') {
    throw new ArrowDeviceError('invalid', `${path}.table`, "expected the module's function table (release is called through it)");
  }
  const m = wasmMemory({ memory: o.memory, table: o.table, malloc: o.malloc, free: o.free });
  fromHandleMemory.set(d, m);
  return m;
}

// Handles (src/memory/handle.ts) reach wasm memory through these, given when this module loads.
setWasmHandles({ handleMemory: wasmHandleMemory, memoryOf: wasmMemoryOf });
