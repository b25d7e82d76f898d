/**
 * Struct access through src/abi's layouts, one memory call per struct:
 * `StructReader` takes a JS copy of a struct's bytes and reads its fields by
 * name; `StructWriter` fills the bytes of a struct in JS and writes them in
 * one copy. Pointer width comes from the memory's target.
 */
import type { StructLayout } from '../abi/layout.js';
import { invalid } from '../errors.js';
import type { Memory, Ptr } from './memory.js';

function offsetOf(layout: StructLayout, field: string): number {
  const o = layout.offsets[field];
  if (o === undefined) throw invalid('', `${layout.name} has no field "${field}"`);
  return o;
}

/**
 * Scratch space for struct reads and writes. Allocating a fresh ArrayBuffer
 * per struct costs more than the copy itself (and feeds the garbage
 * collector), so transient copies go here. A reader or writer over the
 * scratch must be used up before the next one is made: callers read every
 * field into locals before they recurse.
 */
const SCRATCH_SIZE = 4096;
const scratch = new Uint8Array(SCRATCH_SIZE);
const scratchView = new DataView(scratch.buffer);

/** `n` bytes of scratch (a fresh array when larger). */
function scratchBytes(n: number): Uint8Array {
  return n <= SCRATCH_SIZE ? scratch.subarray(0, n) : new Uint8Array(n);
}

export class StructReader {
  private readonly dv: DataView;

  /** The struct's bytes as a DataView (offset 0 is the struct's start): valid until the next struct access. */
  get view(): DataView {
    return this.dv;
  }
  private readonly wide: boolean;

  constructor(
    readonly layout: StructLayout,
    readonly bytes: Uint8Array,
  ) {
    this.dv = bytes.buffer === scratch.buffer && bytes.byteOffset === 0 ? scratchView : new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.wide = layout.target.pointerSize === 8;
  }

  /** The struct at `ptr`, copied into scratch space: read its fields before the next struct access. */
  static read(mem: Memory, ptr: Ptr, layout: StructLayout): StructReader {
    return new StructReader(layout, mem.read(ptr, layout.size, scratchBytes(layout.size)));
  }

  i64(field: string): bigint {
    return this.dv.getBigInt64(offsetOf(this.layout, field), true);
  }

  i32(field: string): number {
    return this.dv.getInt32(offsetOf(this.layout, field), true);
  }

  ptr(field: string): Ptr {
    const o = offsetOf(this.layout, field);
    return this.wide ? this.dv.getBigUint64(o, true) : BigInt(this.dv.getUint32(o, true));
  }
}

export class StructWriter {
  readonly bytes: Uint8Array;
  private readonly dv: DataView;
  private readonly wide: boolean;

  /** A writer over scratch space (zeroed): fill it and `writeTo` before the next struct access. */
  constructor(readonly layout: StructLayout) {
    this.bytes = scratchBytes(layout.size);
    this.bytes.fill(0);
    this.dv = this.bytes.buffer === scratch.buffer ? scratchView : new DataView(this.bytes.buffer);
    this.wide = layout.target.pointerSize === 8;
  }

  i64(field: string, v: bigint | number): this {
    this.dv.setBigInt64(offsetOf(this.layout, field), BigInt(v), true);
    return this;
  }

  i32(field: string, v: number): this {
    this.dv.setInt32(offsetOf(this.layout, field), v, true);
    return this;
  }

  ptr(field: string, v: Ptr): this {
    const o = offsetOf(this.layout, field);
    if (this.wide) this.dv.setBigUint64(o, v, true);
    else this.dv.setUint32(o, Number(v), true);
    return this;
  }

  writeTo(mem: Memory, ptr: Ptr): void {
    mem.copyIn(ptr, this.bytes);
  }
}

/** Reads `n` pointers of an array at `addr` in one copy. */
export function readPointers(mem: Memory, addr: Ptr, n: number): Ptr[] {
  if (n === 0) return [];
  const ps = mem.target.pointerSize;
  const b = mem.read(addr, n * ps, scratchBytes(n * ps));
  const dv = b.buffer === scratch.buffer ? scratchView : new DataView(b.buffer, b.byteOffset, b.byteLength);
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
