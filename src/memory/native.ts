/**
 * The native backend of `Memory`: the process's own address space, through
 * koffi. koffi is loaded lazily so that merely importing the package never
 * fails on a platform without a koffi binary.
 */
import { createRequire } from 'node:module';
import { layoutsFor, NATIVE64, type Layouts, type Target } from '../abi/layout.js';
import { ArrowDeviceError } from '../errors.js';
import type { CType, CValue, Memory, Ptr, Signature } from './memory.js';

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
 * default `vm.mmap_min_addr` is 64 KiB; Windows and macOS reserve the low
 * pages too). Reading one would crash the process instead of throwing.
 */
const MIN_VALID_ADDRESS = 4096n;
const MAX_ADDRESS = (1n << 64n) - 1n;

const textDecoder = new TextDecoder('utf-8', { fatal: true });

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
  private strnlen: ((p: bigint, n: number) => number) | undefined;

  constructor() {
    this.k = koffi();
    if (this.k.sizeof('void *') !== 8) {
      throw new ArrowDeviceError('unsupported', '', `32-bit native targets are not supported (sizeof(void*) = ${this.k.sizeof('void *')})`);
    }
  }

  private check(addr: Ptr, size: number): Ptr {
    if (typeof addr !== 'bigint') {
      throw new ArrowDeviceError('memory', '', `address must be a bigint, got ${typeof addr}`);
    }
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
    if (!this.strnlen) {
      // strnlen from the C library already in the process: bounded, unlike strlen.
      const self = this.k.load(null);
      this.strnlen = self.func('size_t strnlen(uintptr_t s, size_t maxlen)') as unknown as (p: bigint, n: number) => number;
    }
    const n = Number(this.strnlen(addr, maxBytes + 1));
    if (n > maxBytes) {
      throw new ArrowDeviceError('invalid', '', `string at 0x${addr.toString(16)} has no NUL terminator within ${maxBytes} bytes`);
    }
    return this.view(addr, n);
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
    return this.view(addr, byteLength).slice();
  }

  copyIn(addr: Ptr, bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    this.view(addr, bytes.byteLength).set(bytes);
  }

  alloc(size: number): Ptr {
    const n = Math.max(1, size);
    const p = BigInt(this.k.alloc('uint8_t', n) as bigint | number);
    if (p === 0n) throw new ArrowDeviceError('nomem', '', `allocation of ${size} bytes failed`);
    this.view(p, n).fill(0);
    return p;
  }

  free(addr: Ptr): void {
    if (addr === 0n) return;
    this.k.free(addr);
  }

  addressOf(bytes: ArrayBufferView): Ptr | undefined {
    if (bytes.byteLength === 0) return undefined;
    // Touching .buffer makes V8 move a small on-heap typed array's bytes to a
    // stable off-heap backing store before we take their address.
    void bytes.buffer;
    return BigInt(this.k.address(bytes));
  }

  private proto(sig: Signature): KoffiType {
    const key = `${sig.name}:${sig.result}(${sig.params.join(',')})`;
    let p = this.protos.get(key);
    if (!p) {
      p = this.k.proto(`arrow_device_${sig.name}`, ctypeToKoffi[sig.result], sig.params.map((t) => ctypeToKoffi[t]));
      this.protos.set(key, p);
    }
    return p;
  }

  registerCallback(sig: Signature, fn: (...args: CValue[]) => CValue | void): Ptr {
    const p = this.proto(sig);
    const wrapped = (...args: (number | bigint)[]): CValue | undefined => {
      const norm = args.map((a, i) => (sig.params[i] === 'pointer' || sig.params[i] === 'int64' ? BigInt(a) : a));
      const r = fn(...norm);
      return sig.result === 'void' ? undefined : (r ?? 0);
    };
    return BigInt(this.k.register(wrapped, this.k.pointer(p)));
  }

  call(fn: Ptr, sig: Signature, ...args: CValue[]): CValue | undefined {
    this.check(fn, 1);
    const r = this.k.call(fn, this.proto(sig), ...args) as number | bigint | null | undefined;
    if (sig.result === 'void') return undefined;
    if (sig.result === 'pointer' || sig.result === 'int64') return BigInt(r ?? 0);
    return r as number;
  }
}

let native: NativeMemory | undefined;

/** The process's own memory (x86-64 / aarch64). Created on first use. */
export function nativeMemory(): Memory {
  native ??= new NativeMemory();
  return native;
}
