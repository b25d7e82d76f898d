/**
 * The native backend of `Memory`: the process's own address space, through
 * koffi. koffi is loaded lazily so that merely importing the package never
 * fails on a platform without a koffi binary.
 */
import { createRequire } from '../platform/node.js';
import { layoutsFor, NATIVE64, type Layouts, type Target } from '../abi/layout.js';
import { allocBytes, ArrowDeviceError } from '../errors.js';
import type { CType, CValue, Memory, Ptr, Signature } from './memory.js';
import { callbacks } from './registry.js';
import { hex, stage, staged, type Addr, type Arena, type RawAccess } from './raw.js';
import { SLAB_MAX, SlabHeap } from './slab.js';
import { loadWorkers, type NativeWorkers } from './workers.js';

type Koffi = typeof import('koffi');
type KoffiType = ReturnType<Koffi['proto']>;

let koffiModule: Koffi | undefined;

/** koffi, loaded on first use. */
export function koffi(): Koffi {
  if (!koffiModule) {
    const require = createRequire(import.meta.url);
    try {
      koffiModule = require('koffi') as Koffi;
    } catch (cause) {
      throw new ArrowDeviceError('unsupported', '', `the native backend needs koffi, which failed to load: ${String(cause)}`, {
        cause,
      });
    }
    raiseAsyncStack(koffiModule);
  }
  return koffiModule;
}

/**
 * koffi runs async calls (`fn.async`) on stacks of its own, 128 KiB by
 * default: too small for native consumers such as DuckDB, which crash there
 * on deep queries. koffi only accepts a config change before the first
 * library is loaded, so raise it as soon as koffi is loaded (if someone
 * loaded a library first, leave it and carry on).
 */
export const ASYNC_STACK_SIZE = 8 << 20;
function raiseAsyncStack(k: Koffi): void {
  try {
    if ((k.config().async_stack_size ?? 0) < ASYNC_STACK_SIZE) k.config({ async_stack_size: ASYNC_STACK_SIZE });
  } catch {
    // "Cannot change Koffi configuration once a library has been loaded": keep koffi's setting.
  }
}

/**
 * Addresses below this are never valid on the platforms we run on (Linux's
 * default `vm.mmap_min_addr` is 64 KiB; Windows reserves the first 64 KiB and
 * macOS the first 4 GiB). Reading one would crash the process instead of
 * throwing. It is also where a small wasm module's pointers fall, when one is
 * passed without `{ memory }`: the message says so.
 */
export const MIN_VALID_ADDRESS = 0x10000n;
const MAX_ADDRESS = (1n << 64n) - 1n;
/** Addresses below this hold any size without passing MAX_ADDRESS (`check`). */
const NO_CARRY_BELOW = 1n << 62n;
const MAX_SAFE_BIG = BigInt(Number.MAX_SAFE_INTEGER);
/** The largest fresh-array read copied through the staging arena (larger ones are copied straight in). */
const STAGED_READ_MAX = 16 * 1024;

const textDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const ctypeToKoffi: Record<CType, string> = {
  void: 'void',
  int32: 'int32_t',
  int64: 'int64_t',
  pointer: 'uintptr_t',
};

class NativeMemory implements Memory {
  readonly target: Target = NATIVE64;
  readonly layouts: Layouts = layoutsFor(NATIVE64);
  readonly name = 'native';
  private readonly k: Koffi;
  private readonly protos = new Map<string, KoffiType>();
  private readonly protosBySig = new WeakMap<Signature, KoffiType>();
  /**
   * Our own registered callbacks by C address: `call` of one of them runs
   * its JS function directly, as the C call would have (same arguments,
   * same result conversion), without the trip through C and back.
   */
  private readonly own = new Map<Ptr, { sig: Signature; fn: (...args: CValue[]) => CValue | void }>();
  private readonly libc: LibC;

  readonly raw: RawAccess;
  /** Small allocations, in JS ArrayBuffers JS reads and writes in place (src/memory/slab.ts). */
  private readonly slabs: SlabHeap;

  constructor() {
    this.k = koffi();
    if (this.k.sizeof('void *') !== 8) {
      throw new ArrowDeviceError('unsupported', '', `32-bit native targets are not supported (sizeof(void*) = ${this.k.sizeof('void *')})`);
    }
    this.libc = loadLibC(this.k);
    const k = this.k;
    this.slabs = new SlabHeap((u8) => Number(k.address(u8)));
    this.raw = nativeRaw(this.k, this.libc, this.slabs, (size) => this.allocNum(size), (addr) => this.freeNum(addr));
  }

  checkAddress(addr: Ptr, byteLength: number): void {
    this.check(addr, byteLength);
  }

  private check(addr: Ptr, size: number): Ptr {
    if (typeof addr !== 'bigint') {
      throw new ArrowDeviceError('memory', '', `address must be a bigint, got ${typeof addr}`);
    }
    // Every address of a user-space process is below 2^62, where no size (below 2^53) can carry
    // past 2^64: two comparisons, no bigint made (the sum below allocates one, for every pointer
    // argument of every call).
    if (addr >= MIN_VALID_ADDRESS && addr < NO_CARRY_BELOW) return addr;
    if (addr < MIN_VALID_ADDRESS || addr + BigInt(size) > MAX_ADDRESS) {
      throw new ArrowDeviceError(
        'memory',
        '',
        addr === 0n ? 'NULL pointer' : `invalid address 0x${addr.toString(16)} (${size} bytes)`,
      );
    }
    return addr;
  }

  readU8(addr: Ptr): number { return this.k.decode(this.check(addr, 1), 'uint8_t') as number; }
  readI8(addr: Ptr): number { return this.k.decode(this.check(addr, 1), 'int8_t') as number; }
  readU16(addr: Ptr): number { return this.k.decode(this.check(addr, 2), 'uint16_t') as number; }
  readI16(addr: Ptr): number { return this.k.decode(this.check(addr, 2), 'int16_t') as number; }
  readU32(addr: Ptr): number { return this.k.decode(this.check(addr, 4), 'uint32_t') as number; }
  readI32(addr: Ptr): number { return this.k.decode(this.check(addr, 4), 'int32_t') as number; }
  readI64(addr: Ptr): bigint { return BigInt(this.k.decode(this.check(addr, 8), 'int64_t') as number | bigint); }
  readU64(addr: Ptr): bigint { return BigInt(this.k.decode(this.check(addr, 8), 'uint64_t') as number | bigint); }
  readF32(addr: Ptr): number { return this.k.decode(this.check(addr, 4), 'float') as number; }
  readF64(addr: Ptr): number { return this.k.decode(this.check(addr, 8), 'double') as number; }
  readPtr(addr: Ptr): Ptr { return BigInt(this.k.decode(this.check(addr, 8), 'uintptr_t') as number | bigint); }

  writeU8(addr: Ptr, v: number): void { this.k.encode(this.check(addr, 1), 'uint8_t', v); }
  writeI8(addr: Ptr, v: number): void { this.k.encode(this.check(addr, 1), 'int8_t', v); }
  writeU16(addr: Ptr, v: number): void { this.k.encode(this.check(addr, 2), 'uint16_t', v); }
  writeI16(addr: Ptr, v: number): void { this.k.encode(this.check(addr, 2), 'int16_t', v); }
  writeU32(addr: Ptr, v: number): void { this.k.encode(this.check(addr, 4), 'uint32_t', v); }
  writeI32(addr: Ptr, v: number): void { this.k.encode(this.check(addr, 4), 'int32_t', v); }
  writeI64(addr: Ptr, v: bigint | number): void { this.k.encode(this.check(addr, 8), 'int64_t', BigInt(v)); }
  writeU64(addr: Ptr, v: bigint | number): void { this.k.encode(this.check(addr, 8), 'uint64_t', BigInt(v)); }
  writeF32(addr: Ptr, v: number): void { this.k.encode(this.check(addr, 4), 'float', v); }
  writeF64(addr: Ptr, v: number): void { this.k.encode(this.check(addr, 8), 'double', v); }
  writePtr(addr: Ptr, v: Ptr): void { this.k.encode(this.check(addr, 8), 'uintptr_t', v); }

  readCStringBytes(addr: Ptr, maxBytes = 1 << 20): Uint8Array {
    this.check(addr, 1);
    // strnlen is bounded, unlike strlen: an unterminated string cannot run us off a page.
    const n = Number(this.libc.strnlen(addr, maxBytes + 1));
    if (n > maxBytes) {
      throw new ArrowDeviceError('invalid', '', `string at 0x${addr.toString(16)} has no NUL terminator within ${maxBytes} bytes`);
    }
    return this.read(addr, n);
  }

  readCString(addr: Ptr, maxBytes?: number): string {
    const bytes = this.readCStringBytes(addr, maxBytes);
    try {
      return textDecoder.decode(bytes);
    } catch {
      throw new ArrowDeviceError('invalid', '', `string at 0x${addr.toString(16)} is not valid UTF-8`);
    }
  }

  view(addr: Ptr, byteLength: number): Uint8Array {
    if (byteLength === 0) return new Uint8Array(0);
    if (!Number.isSafeInteger(byteLength) || byteLength < 0) {
      throw new ArrowDeviceError('memory', '', `invalid view length ${byteLength}`);
    }
    // koffi.view(NULL, n) aborts the process: check() refuses NULL first.
    return new Uint8Array(this.k.view(this.check(addr, byteLength), byteLength));
  }

  copyOut(addr: Ptr, byteLength: number): Uint8Array {
    return this.read(addr, byteLength);
  }

  read(addr: Ptr, byteLength: number, into?: Uint8Array): Uint8Array {
    const out = into ?? allocBytes(byteLength);
    if (byteLength === 0) return out;
    if (out.byteLength < byteLength) throw new ArrowDeviceError('memory', '', `read of ${byteLength} bytes into ${out.byteLength}`);
    this.check(addr, byteLength);
    if (into === undefined && byteLength <= STAGED_READ_MAX && addr <= MAX_SAFE_BIG) {
      // Into a fresh array: copy through the staging arena (whose native address is known) and
      // then in JS. Handing koffi a fresh JS array instead makes V8 move it off its heap first,
      // which costs more than the copy.
      const at = stage(this.raw, Number(addr), byteLength);
      out.set(staged.u8.subarray(at, at + byteLength));
      return out;
    }
    // One memcpy into JS memory: no external ArrayBuffer (which V8 counts as
    // external memory and answers with garbage collections), no per-field FFI calls.
    this.libc.memcpyOut(out, addr, byteLength);
    return out;
  }

  copyIn(addr: Ptr, bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    this.libc.memcpyIn(this.check(addr, bytes.byteLength), bytes, bytes.byteLength);
  }

  /**
   * Every live allocation of ours: the small ones are known to the slabs
   * (each block's size class), the C allocator's are here. `free` of
   * anything else (an address we never allocated, or one freed already) is
   * a typed error, never a libc abort ("double free") or a crash
   * (docs/architecture.md#our-own-allocations-are-tracked).
   */
  private readonly large = new Set<number>();

  alloc(size: number): Ptr {
    return BigInt(this.allocNum(size));
  }

  /** `alloc`, returning the address as a number (src/memory/raw.ts). */
  allocNum(size: number): number {
    if (!Number.isSafeInteger(size) || size < 0) throw new ArrowDeviceError('invalid', 'alloc', `size must be a non-negative integer, got ${String(size)}`);
    if (size <= SLAB_MAX) return this.slabs.alloc(SlabHeap.classOf(size));
    const p = this.libc.calloc(1, size);
    if (p === 0) throw new ArrowDeviceError('nomem', '', `allocation of ${size} bytes failed`);
    // calloc's result as uintptr_t: a number below 2^53 (user-space addresses are), else koffi gives a bigint.
    if (typeof p !== 'number') {
      this.libc.free(p);
      throw new ArrowDeviceError('memory', '', `allocation at 0x${p.toString(16)} is above 2^53`);
    }
    this.large.add(p);
    return p;
  }

  free(addr: Ptr): void {
    if (addr === 0n) return;
    // A bigint past 2^53 is no allocation of ours, and must not round onto one.
    this.freeNum(addr > MAX_SAFE_BIG || addr < 0n ? -1 : Number(addr), addr);
  }

  /** `free` of an address as a number (`big`: the caller's bigint, for the message). */
  freeNum(addr: number, big: Ptr = BigInt(addr)): void {
    if (addr === 0) return;
    const cls = this.slabs.classAt(addr);
    if (cls > 0) {
      this.slabs.free(addr);
    } else if (cls < 0 && this.large.delete(addr)) {
      this.libc.free(addr);
    } else {
      throw new ArrowDeviceError(
        'invalid',
        'free',
        `0x${big.toString(16)} was not allocated by this library's native memory, or was freed already`,
      );
    }
  }

  /**
   * Memory of the process, not of this thread: the C allocator's, untracked,
   * which any thread may free (`freeProcess`). Threads share imports through
   * it (src/share): our tracked allocations (`alloc`) may sit in this
   * thread's JS slabs, which die with the thread.
   */
  allocProcess(size: number): Ptr {
    if (!Number.isSafeInteger(size) || size <= 0) throw new ArrowDeviceError('invalid', 'alloc', `size must be a positive integer, got ${String(size)}`);
    const p = this.libc.calloc(1, size);
    if (p === 0 || p === 0n) throw new ArrowDeviceError('nomem', '', `allocation of ${size} bytes failed`);
    return BigInt(p);
  }

  /** Frees what `allocProcess` gave, in any thread; the caller knows it is live (src/share checks its table). */
  freeProcess(addr: Ptr): void {
    if (addr !== 0n) this.libc.free(this.check(addr, 1));
  }

  /** Whether `addr` is a live allocation of ours. */
  owns(addr: Ptr): boolean {
    if (addr < 0n || addr > MAX_SAFE_BIG) return false;
    const a = Number(addr);
    const cls = this.slabs.classAt(a);
    return cls > 0 || (cls < 0 && this.large.has(a));
  }

  addressOf(bytes: ArrayBufferView): Ptr | undefined {
    if (bytes.byteLength === 0) return undefined;
    // Touching .buffer makes V8 move a small on-heap typed array's bytes to a
    // stable off-heap backing store before we take their address.
    void bytes.buffer;
    return BigInt(this.k.address(bytes));
  }

  /**
   * The koffi prototype of `sig`. Signatures are module-level constants, so
   * the cache goes by the signature object first (no key string per call),
   * and by its text for a signature object seen for the first time.
   */
  private proto(sig: Signature): KoffiType {
    let p = this.protosBySig.get(sig);
    if (p) return p;
    const key = `${sig.name}:${sig.result}(${sig.params.join(',')})`;
    p = this.protos.get(key);
    if (!p) {
      // Anonymous: koffi's type names are global to the process, and a second copy of this
      // library in one process (two versions a package manager did not deduplicate) would
      // fail its first export with "Duplicate type name" if this one named its prototypes.
      p = this.k.proto(ctypeToKoffi[sig.result], sig.params.map((t) => ctypeToKoffi[t]));
      this.protos.set(key, p);
    }
    this.protosBySig.set(sig, p);
    return p;
  }

  registerCallback(sig: Signature, fn: (...args: CValue[]) => CValue | void): Ptr {
    const p = this.proto(sig);
    const wrapped = (...args: (number | bigint)[]): CValue | undefined => {
      const norm = args.map((a, i) => (sig.params[i] === 'pointer' || sig.params[i] === 'int64' ? BigInt(a) : a));
      const r = fn(...norm);
      return sig.result === 'void' ? undefined : (r ?? 0);
    };
    const ptr = BigInt(this.k.register(wrapped, this.k.pointer(p)));
    this.own.set(ptr, { sig, fn });
    return ptr;
  }

  /**
   * Foreign functions decoded for `callAsync`, by address: koffi.decode of a
   * function pointer builds a new JS function every time (most of an async
   * call's cost on the JS thread), and an async stream calls the same few
   * handler functions once per batch. Bounded (cleared when full).
   */
  private readonly asyncFns = new Map<Ptr, { proto: KoffiType; f: AsyncFn }>();

  private asyncFn(fn: Ptr, sig: Signature): AsyncFn {
    const proto = this.proto(sig);
    const hit = this.asyncFns.get(fn);
    if (hit && hit.proto === proto) return hit.f;
    if (this.asyncFns.size >= 1024) this.asyncFns.clear();
    const f = this.k.decode(fn, proto) as unknown as AsyncFn;
    this.asyncFns.set(fn, { proto, f });
    return f;
  }

  isOwnCallback(fn: Ptr): boolean {
    return this.own.has(fn);
  }

  /** The callback addresses `keepLoaded` has seen (bounded: a repeat after a clear pins again, harmlessly). */
  private readonly kept = new Set<Addr>();
  /** The address ranges of the libraries pinned, where the loader tells them (`_dl_find_object`): one pin a library. */
  private readonly pinned: { start: number; end: number }[] = [];
  /** How to pin a library (see loadDynamicLoader), loaded on first use; null where there is none. */
  private dl: DynamicLoader | null | undefined;

  /**
   * Pins the shared library holding `fn` (`dladdr` names it and `dlopen`
   * with RTLD_NOLOAD takes one more reference to it; `GetModuleHandleExW` on
   * Windows): a library's `koffi.load` handle may be collected, and the
   * library unloaded, while an import still holds a struct whose callbacks
   * are in it; calling them then would jump
   * into unmapped code. The reference is never dropped: a library that
   * produced an import stays loaded until the process exits. Code in no
   * library (JIT callbacks, the executable) needs nothing.
   */
  keepLoaded(fn: Addr): void {
    if (fn === 0 || this.kept.has(fn)) return;
    for (const r of this.pinned) if (fn >= r.start && fn < r.end) return;
    if (this.kept.size >= 4096) this.kept.clear();
    this.kept.add(fn);
    const dl = (this.dl ??= loadDynamicLoader(this.k, this));
    const range = dl?.pin(fn);
    if (typeof range === 'object' && this.pinned.length < 256) this.pinned.push(range);
  }

  /** The package's worker threads (src/memory/workers.ts), loaded on the first call off the JS thread; null where they are not used. */
  private pool: NativeWorkers | null | undefined;

  workers(): NativeWorkers | null {
    if (this.pool === undefined) this.pool = loadWorkers(this.k, this);
    return this.pool;
  }

  callAsync(fn: Ptr, sig: Signature, ...args: CValue[]): Promise<CValue | undefined> {
    this.check(fn, 1);
    let pool: NativeWorkers | null;
    try {
      pool = this.workers();
    } catch (e) {
      return Promise.reject(e); // ARROW_DEVICE_WORKERS unreadable: a rejection, as every failure of the call
    }
    if (pool !== null) {
      // Every CType is an integer, so every signature goes through the pool (native/workers.c).
      const r = sig.result;
      if (r === 'int64' || r === 'pointer') return pool.call(fn, args as (bigint | number)[], true);
      return r === 'void' ? pool.call(fn, args as (bigint | number)[]).then(() => undefined) : pool.call(fn, args as (bigint | number)[]);
    }
    const f = this.asyncFn(fn, sig);
    return new Promise((resolve, reject) => {
      f.async(...args, (err: unknown, r: number | bigint | null | undefined) => {
        if (err) reject(err instanceof Error ? err : new Error(String(err)));
        else if (sig.result === 'void') resolve(undefined);
        else if (sig.result === 'pointer' || sig.result === 'int64') resolve(BigInt(r ?? 0));
        else resolve(r as number);
      });
    });
  }

  call(fn: Ptr, sig: Signature, ...args: CValue[]): CValue | undefined {
    const own = this.own.get(fn);
    if (own !== undefined && sameShape(own.sig, sig)) return callOwn(own.sig, own.fn, sig, args);
    this.check(fn, 1);
    const r = this.k.call(fn, this.proto(sig), ...args) as number | bigint | null | undefined;
    if (sig.result === 'void') return undefined;
    if (sig.result === 'pointer' || sig.result === 'int64') return BigInt(r ?? 0);
    return r as number;
  }
}

/** Whether two signatures have the same C shape (a call through one reaches a function of the other correctly). */
function sameShape(a: Signature, b: Signature): boolean {
  if (a === b) return true;
  if (a.result !== b.result || a.params.length !== b.params.length) return false;
  for (let i = 0; i < a.params.length; i++) if (a.params[i] !== b.params[i]) return false;
  return true;
}

/**
 * Calls one of our own callbacks as a C call through `sig` would: arguments
 * converted as the C side would pass them to the callback (pointers and
 * int64 as bigint, int32 as number), the result as `call` returns it.
 */
function callOwn(own: Signature, fn: (...args: CValue[]) => CValue | void, sig: Signature, args: CValue[]): CValue | undefined {
  const norm: CValue[] = new Array(own.params.length);
  for (let i = 0; i < own.params.length; i++) {
    const t = own.params[i];
    const a = args[i] ?? 0;
    norm[i] =
      t === 'pointer' ? BigInt.asUintN(64, BigInt(a))
      : t === 'int64' ? BigInt.asIntN(64, BigInt(a))
      : Number(a) | 0;
  }
  const r = fn(...norm);
  if (sig.result === 'void') return undefined;
  if (sig.result === 'pointer') return BigInt.asUintN(64, BigInt(r ?? 0));
  if (sig.result === 'int64') return BigInt.asIntN(64, BigInt(r ?? 0));
  return Number(r ?? 0) | 0;
}

/** Copies up to this many bytes between JS memories word by word (`copyWords`). */
const WORD_COPY_MAX = 128;

/**
 * Copies `n` bytes (a multiple of 4, at 4-aligned offsets) from `src` at
 * `from` to `dst` at `to`, 32 bits at a time. For struct-sized copies within
 * JS memory (a slab and a scratch arena), where `subarray` + `set` allocated a
 * view and called a builtin for 80 bytes; the two never overlap (a slab is
 * never an arena).
 */
function copyWords(src: DataView, from: number, dst: DataView, to: number, n: number): void {
  for (let i = 0; i < n; i += 4) dst.setUint32(to + i, src.getUint32(from + i, true), true);
}

/**
 * Number-address access (src/memory/raw.ts) through libc calls whose
 * arguments are all numbers: koffi converts those without making a bigint,
 * and a call that returns nothing returns nothing to convert either.
 */
function nativeRaw(
  k: Koffi,
  libc: LibC,
  slabs: SlabHeap,
  alloc: (size: number) => number,
  free: (addr: number) => void,
): RawAccess {
  const MAX = Number.MAX_SAFE_INTEGER;
  const MIN = Number(MIN_VALID_ADDRESS);
  const check = (addr: Addr, n: number): void => {
    if (!(addr >= MIN && addr <= MAX - n)) {
      throw new ArrowDeviceError('memory', '', addr === 0 ? 'NULL pointer' : `invalid address ${hex(addr)} (${n} bytes)`);
    }
  };
  const arenaAddr = (a: Arena): number => (a.addr >= 0 ? a.addr : (a.addr = Number(k.address(a.u8))));
  // A word staged in JS memory whose native address is known, for writes of a pointer-width value.
  const word = new BigUint64Array(1);
  const wordDv = new DataView(word.buffer);
  const wordAddr = Number(k.address(word));
  // Memory in a slab is JS's own: read and written there without a call through the FFI.
  return {
    check,
    inPlace: (addr, n) => slabs.find(addr, n),
    readInto(addr, n, a, off) {
      const s = slabs.find(addr, n);
      if (s !== null) {
        const at = addr - s.addr;
        if (n <= WORD_COPY_MAX && ((at | off | n) & 3) === 0) copyWords(s.dv, at, a.dv, off, n);
        else a.u8.set(s.u8.subarray(at, at + n), off);
        return;
      }
      check(addr, n);
      if (n > 0) libc.memcpyNum(arenaAddr(a) + off, addr, n);
    },
    writeFrom(addr, a, off, n) {
      const s = slabs.find(addr, n);
      if (s !== null) {
        const at = addr - s.addr;
        if (n <= WORD_COPY_MAX && ((at | off | n) & 3) === 0) copyWords(a.dv, off, s.dv, at, n);
        else s.u8.set(a.u8.subarray(off, off + n), at);
        return;
      }
      check(addr, n);
      if (n > 0) libc.memcpyNum(addr, arenaAddr(a) + off, n);
    },
    writeWord(addr, v) {
      const s = slabs.find(addr, 8);
      if (s !== null) {
        const at = addr - s.addr;
        s.dv.setUint32(at, v >>> 0, true);
        s.dv.setUint32(at + 4, Math.floor(v / 4294967296), true);
        return;
      }
      check(addr, 8);
      if (v === 0) {
        libc.memsetNum(addr, 0, 8);
      } else {
        wordDv.setUint32(0, v >>> 0, true);
        wordDv.setUint32(4, Math.floor(v / 4294967296), true);
        libc.memcpyNum(addr, wordAddr, 8);
      }
    },
    copyWithin(dst, src, n) {
      check(dst, n);
      check(src, n);
      if (n > 0) libc.memcpyNum(dst, src, n);
    },
    alloc,
    free,
    strlen(addr, max) {
      const s = slabs.find(addr, 1);
      if (s !== null) {
        // In JS's own memory: look for the NUL there (and past the slab's end, through the FFI).
        const at = addr - s.addr;
        const end = Math.min(s.u8.byteLength, at + max + 1);
        const nul = s.u8.subarray(at, end).indexOf(0);
        if (nul >= 0) return nul;
        if (end - at > max) throw noNul(addr, max);
      }
      check(addr, 1);
      // strnlen is bounded, unlike strlen: an unterminated string cannot run us off a page.
      const n = Number(libc.strnlen(addr, max + 1));
      if (n > max) throw noNul(addr, max);
      return n;
    },
  };
}

function noNul(addr: Addr, max: number): ArrowDeviceError {
  return new ArrowDeviceError('invalid', '', `string at 0x${addr.toString(16)} has no NUL terminator within ${max} bytes`);
}

/**
 * Takes one more reference to the loaded library holding a code address:
 * false where none does; where the loader tells it, the range of addresses
 * that library maps (every other address in it is then pinned already).
 */
interface DynamicLoader {
  pin(addr: number): boolean | { start: number; end: number };
}

/**
 * How to pin a library by an address in it. POSIX: `dladdr` names the
 * library and `dlopen` of that name with RTLD_NOW | RTLD_NOLOAD takes a
 * reference (never a load), both from the process's own symbols (the C
 * library since glibc 2.34, musl and macOS), else from libdl. glibc 2.35
 * and later also have `_dl_find_object`, which finds the library by address
 * without `dladdr`'s search of its symbol table for the nearest symbol (a
 * cost that grows with the library's symbols, paid once per callback address:
 * the first query of a fresh process has several) and gives the range the
 * library maps, so one pin serves every callback in it; the name then comes from its
 * `link_map` (`l_name`, the second word). Windows: `GetModuleHandleExW` with
 * GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS finds the module by address and,
 * without ..._UNCHANGED_REFCOUNT, takes the reference itself. Null where
 * neither loads.
 */
function loadDynamicLoader(k: Koffi, mem: Pick<Memory, 'readPtr' | 'readU8'>): DynamicLoader | null {
  if (process.platform === 'win32') {
    try {
      const kernel32 = k.load('kernel32.dll');
      const GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS = 4;
      const getModuleHandleEx = kernel32.func(
        'int __stdcall GetModuleHandleExW(uint32_t flags, uintptr_t addr, _Out_ uint64_t *module)',
      ) as (flags: number, addr: number, module: BigUint64Array) => number;
      const module = new BigUint64Array(1);
      return { pin: (addr) => getModuleHandleEx(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS, addr, module) !== 0 };
    } catch {
      return null;
    }
  }
  const RTLD_NOW = 2;
  const RTLD_NOLOAD = process.platform === 'darwin' ? 0x10 : 4;
  for (const name of [null, 'libdl.so.2']) {
    try {
      const lib = k.load(name);
      const dladdr = lib.func('int dladdr(uintptr_t addr, _Out_ uint64_t *info)') as (addr: number, info: BigUint64Array) => number;
      const dlopen = lib.func('uintptr_t dlopen(uintptr_t filename, int flags)') as (filename: bigint, flags: number) => unknown;
      const open = (name: bigint): boolean => Number(dlopen(name, RTLD_NOW | RTLD_NOLOAD)) !== 0;
      // Dl_info: dli_fname, dli_fbase, dli_sname, dli_saddr.
      const info = new BigUint64Array(4);
      const byName = (addr: number): boolean => dladdr(addr, info) !== 0 && info[0] !== 0n && open(info[0]!);
      const find = findObject(lib);
      if (find === null) return { pin: byName };
      // struct dl_find_object: flags, map_start, map_end, link_map, eh_frame, then at most 9 words more.
      const found = new BigUint64Array(16);
      return {
        pin: (addr) => {
          if (find(addr, found) !== 0) return byName(addr);
          const start = Number(found[1]!);
          const end = Number(found[2]!);
          const map = found[3]!;
          if (map === 0n || !(addr >= start && addr < end)) return byName(addr);
          // l_name: "" for the program itself, which is never unloaded.
          const fname = mem.readPtr(map + 8n);
          if (fname === 0n) return byName(addr);
          return (mem.readU8(fname) === 0 || open(fname)) && { start, end };
        },
      };
    } catch {
      // Not in this one: the next.
    }
  }
  return null;
}

/** glibc's `_dl_find_object` (2.35 and later), null where the C library has none. */
function findObject(lib: ReturnType<Koffi['load']>): ((addr: number, out: BigUint64Array) => number) | null {
  if (process.platform !== 'linux') return null;
  try {
    return lib.func('int _dl_find_object(uintptr_t pc, _Out_ uint64_t *result)') as (addr: number, out: BigUint64Array) => number;
  } catch {
    return null;
  }
}

interface LibC {
  calloc(n: number, size: number): number | bigint;
  memcpyNum(dst: number, src: number, n: number): void;
  memsetNum(dst: number, c: number, n: number): void;
  free(p: number | bigint): void;
  memcpyIn(dst: bigint, src: Uint8Array, n: number): unknown;
  memcpyOut(dst: Uint8Array, src: bigint, n: number): unknown;
  strnlen(s: bigint | number, max: number): number | bigint;
}

/**
 * Where the C library's functions are: the process's own symbols on Linux
 * and macOS (the C library is always loaded in Node, Bun and Deno); on
 * Windows the Universal C Runtime, `ucrtbase.dll` (the process handle there
 * is the executable, node.exe, which exports no `calloc`). The UCRT is part
 * of Windows 10 and later and allocates from the process heap, as the
 * runtime every current Windows build of Node, Bun and Deno uses does.
 */
function libCName(): string | null {
  return process.platform === 'win32' ? 'ucrtbase.dll' : null;
}

/**
 * The C library functions we need (see `libCName`). memcpy with a JS typed
 * array on one side copies without creating an external ArrayBuffer.
 */
function loadLibC(k: Koffi): LibC {
  const name = libCName();
  let lib: ReturnType<Koffi['load']>;
  try {
    lib = k.load(name);
  } catch (cause) {
    const where = name === null ? "the C library's symbols from the process" : `the C runtime ${name}`;
    throw new ArrowDeviceError('unsupported', '', `cannot load ${where}: ${String(cause)}`, { cause });
  }
  return {
    calloc: lib.func('uintptr_t calloc(size_t n, size_t size)') as LibC['calloc'],
    free: lib.func('void free(uintptr_t p)') as LibC['free'],
    memcpyIn: lib.func('void *memcpy(uintptr_t dst, const uint8_t *src, size_t n)') as LibC['memcpyIn'],
    memcpyOut: lib.func('void *memcpy(uint8_t *dst, uintptr_t src, size_t n)') as LibC['memcpyOut'],
    strnlen: lib.func('size_t strnlen(uintptr_t s, size_t maxlen)') as LibC['strnlen'],
    // void results: nothing to convert back (memcpy's pointer result would be).
    memcpyNum: lib.func('void memcpy(uintptr_t dst, uintptr_t src, size_t n)') as LibC['memcpyNum'],
    memsetNum: lib.func('void memset(uintptr_t dst, int c, size_t n)') as LibC['memsetNum'],
  };
}

type AsyncFn = { async: (...args: unknown[]) => void };

let native: NativeMemory | undefined;

/** Whether `m` is the process's own memory, without creating it (where koffi cannot load, nothing is). */
export function isNativeMemory(m: Memory): boolean {
  return native !== undefined && m === native;
}

/**
 * The process's own memory (x86-64 / aarch64), through koffi: the default `memory` of every function.
 * Created on first use.
 *
 * @example
 * const m = nativeMemory();
 * const ptr = allocArrowSchema({ memory: m });    // as allocArrowSchema() does by default
 * m.readPtr(ptr + BigInt(m.layouts.ArrowSchema.offsets.release)); // 0n: a zeroed struct, released
 * freeArrowSchema(ptr);
 */
export function nativeMemory(): Memory {
  if (!native) {
    native = new NativeMemory();
    // Every callback kind now, outside any callback (see CallbackCache).
    callbacks.registerAll(native);
  }
  return native;
}

/**
 * The package's worker threads for foreign calls that may wait, or null where koffi's async calls
 * serve instead (`nativeWorkersMissing` says why).
 *
 * @internal Not a public name (src/index.ts does not export it): src/adbc and tests use it.
 */
export function nativeWorkers(): NativeWorkers | null {
  nativeMemory();
  return native!.workers();
}
