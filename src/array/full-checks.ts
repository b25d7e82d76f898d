/**
 * The O(length) checks of the `full` validation level (read.ts runs them,
 * node by node in record order, once the tree is read): every offset in
 * order and in range, views inside their buffers, list views inside their
 * child, union type ids declared and dense offsets inside their child, run
 * ends increasing and covering the array, dictionary indices inside the
 * dictionary, and date64 and timestamp values arrow-js can read as numbers.
 * Each reads the bytes it is given (views of host memory, or copies of
 * device memory), so it is the same on every memory.
 */
import { ArrowDeviceError, invalid } from '../errors.js';
import { Kind } from '../schema/layout.js';
import { FullCheck, type PlanNode } from './plan.js';
import { BUFFERS, childrenAt, LENGTH, N_BUFFERS, NULL_COUNT, OFFSET, pathAt, type ImportRead } from './record.js';

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** The bytes of buffer `at` (its record index) for a check: a host view, or a device copy. */
export type Bytes = (at: number) => Uint8Array | null;

/**
 * Offset `k` from bytes `b`, which hold offsets from `base` on starting at
 * byte `at0`; exact within 2^53 (refused past it at every level, as buffer
 * `i` of `w`'s node).
 */
export function offsetAt(b: Uint8Array, at0: number, wide: boolean, k: number, base: number, w: string | { path(): string }, i: number): number {
  const j = at0 + (k - base) * (wide ? 8 : 4);
  const lo = (b[j]! | (b[j + 1]! << 8) | (b[j + 2]! << 16) | (b[j + 3]! << 24)) >>> 0;
  if (!wide) return lo | 0;
  const hi = b[j + 4]! | (b[j + 5]! << 8) | (b[j + 6]! << 16) | (b[j + 7]! << 24); // signed high word
  const v = hi * 4294967296 + lo;
  if (v > Number.MAX_SAFE_INTEGER || v < -Number.MAX_SAFE_INTEGER) {
    throw invalid(`${typeof w === 'string' ? w : w.path()}.buffers[${i}]`, `offset ${(BigInt(hi) << 32n) | BigInt(lo)} at ${k} is out of range`);
  }
  return v;
}

/** The record indices of the buffers `full` reads at the node at `p`. */
export function checkedBuffers(read: ImportRead, pn: PlanNode, p: number): number[] {
  const b = (k: number, q = p): number => q + BUFFERS + 2 * k;
  const out: number[] = [];
  const f = pn.full;
  const nBuffers = read.nums[p + N_BUFFERS]!;
  if (f & (FullCheck.Offsets | FullCheck.Millis | FullCheck.Indices)) out.push(b(0), b(1));
  if (f & FullCheck.Views) for (let k = 0; k < nBuffers; k++) out.push(b(k));
  if (f & FullCheck.ListViews) out.push(b(1), b(2));
  if (f & FullCheck.Union) for (let k = 0; k < nBuffers; k++) out.push(b(k));
  if (f & FullCheck.RunEnds) out.push(b(1, childrenAt(read, p)[0]!));
  return out;
}

/** The checks of `full` at the node at `p`. */
export function fullCheck(read: ImportRead, pn: PlanNode, p: number, bytes: Bytes): void {
  const nums = read.nums;
  const f = pn.full;
  const offset = nums[p + OFFSET]!;
  const length = nums[p + LENGTH]!;
  const nullCount = nums[p + NULL_COUNT]!;
  const end = offset + length;
  const buf = (k: number, q = p): Uint8Array | null => bytes(q + BUFFERS + 2 * k);
  const path = (): string => pathAt(read, p);
  const validity = (): Uint8Array | null => (pn.layout.hasValidity && nullCount !== 0 ? buf(0) : null);
  const id = pn.schema.type.id;
  if (f & FullCheck.Offsets) {
    const b = buf(1);
    const strings = id === 'utf8' || id === 'large_utf8';
    if (b !== null && b.byteLength > 0) checkOffsets(b, pn.layout.buffers[1]!.width === 8, offset, end, pn.layout.buffers[1]!.what, path(), strings);
  }
  if (f & FullCheck.Views) {
    const views = buf(1);
    const nVar = nums[p + N_BUFFERS]! - 3;
    const sizes: number[] = [];
    for (let k = 0; k < nVar; k++) sizes.push(nums[p + BUFFERS + 2 * (2 + k) + 1]!);
    if (views !== null) checkViews(views, offset, length, sizes, validity(), path(), id === 'utf8_view');
  }
  if (f & FullCheck.ListViews) {
    const o = buf(1);
    const s = buf(2);
    if (o !== null && s !== null) checkListViews(o, s, pn.layout.width === 8, offset, end, nums[childrenAt(read, p)[0]! + LENGTH]!, path());
  }
  if (f & FullCheck.Union) {
    const ids = buf(0);
    const at = childrenAt(read, p);
    const lengths = pn.children.map((_, k) => nums[at[k]! + LENGTH]!);
    const declared = (pn.schema.type as { typeIds: readonly number[] }).typeIds;
    if (ids !== null) checkUnion(ids, pn.layout.kind === Kind.DenseUnion ? buf(1) : null, declared, lengths, offset, end, path());
  }
  if (f & FullCheck.RunEnds) {
    const q = childrenAt(read, p)[0]!;
    const w = (pn.children[0]!.schema.type as { bitWidth: number }).bitWidth / 8;
    checkRunEnds(buf(1, q), w, nums[q + OFFSET]!, nums[q + LENGTH]!, end, path());
  }
  if (f & FullCheck.Millis) {
    const t = pn.schema.type;
    // arrow-js reads a microsecond timestamp as v / 1000 (whole milliseconds must fit 2^53 too).
    const divisor = t.id === 'timestamp' && t.unit === 'us' ? 1000n : 1n;
    checkMillis(buf(1), offset, length, validity(), path(), divisor);
  }
  if (f & FullCheck.Indices) {
    const dictLength = nums[childrenAt(read, p)[pn.children.length]! + LENGTH]!;
    checkIndices(buf(1), pn.schema.type, offset, length, dictLength, validity(), path());
  }
}

/**
 * The longest string a JavaScript engine makes, in UTF-16 code units (V8's limit, 2^29 - 24; the other
 * engines' are larger). A UTF-8 value of this many bytes or fewer decodes to no more code units, so it
 * always reads; a longer one may not, and a read that cannot make its string throws: `full` refuses it
 * as `unsupported`, as it refuses a number beyond 2^53 (its promise is that every value reads).
 */
const MAX_STRING_BYTES = 0x1fffffe8;

function tooLongString(path: string, k: number, bytes: number): ArrowDeviceError {
  return new ArrowDeviceError('unsupported', `${path}.buffers[1]`, `string ${k} is ${bytes} bytes, longer than a JavaScript string can be made from (${MAX_STRING_BYTES})`);
}

function checkOffsets(b: Uint8Array, wide: boolean, offset: number, end: number, what: string, path: string, strings: boolean): void {
  let prev = offsetAt(b, 0, wide, offset, 0, path, 1);
  for (let k = offset + 1; k <= end; k++) {
    const cur = offsetAt(b, 0, wide, k, 0, path, 1);
    if (cur < prev) throw invalid(`${path}.buffers[1]`, `${what}s are not monotone at ${k}: ${cur} after ${prev}`);
    if (strings && cur - prev > MAX_STRING_BYTES) throw tooLongString(path, k - 1, cur - prev);
    prev = cur;
  }
}

function checkRunEnds(b: Uint8Array | null, w: number, offset: number, length: number, end: number, path: string): void {
  if (!b || length === 0) {
    if (end > 0) throw invalid(`${path}.children[0]`, `no run ends for ${end} elements`);
    return;
  }
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const get = (k: number): number =>
    w === 2 ? dv.getInt16(k * 2, true) : w === 4 ? dv.getInt32(k * 4, true) : Number(dv.getBigInt64(k * 8, true));
  let prev = 0;
  for (let k = offset; k < offset + length; k++) {
    const cur = get(k);
    if (cur <= prev) throw invalid(`${path}.children[0]`, `run ends must be positive and strictly increasing: ${cur} after ${prev} at ${k}`);
    prev = cur;
  }
  if (prev < end) throw invalid(`${path}.children[0]`, `the last run end ${prev} is less than offset + length ${end}`);
}

const isNull = (validity: Uint8Array | null, k: number): boolean => validity !== null && (validity[k >> 3]! & (1 << (k & 7))) === 0;

function checkViews(views: Uint8Array, offset: number, length: number, sizes: number[], validity: Uint8Array | null, path: string, strings: boolean): void {
  const dv = new DataView(views.buffer, views.byteOffset, views.byteLength);
  for (let k = offset; k < offset + length; k++) {
    if (isNull(validity, k)) continue;
    const len = dv.getInt32(k * 16, true);
    if (len < 0) throw invalid(`${path}.buffers[1]`, `view ${k} has negative length ${len}`);
    if (strings && len > MAX_STRING_BYTES) throw tooLongString(path, k, len);
    if (len > 12) {
      const buf = dv.getInt32(k * 16 + 8, true);
      const off = dv.getInt32(k * 16 + 12, true);
      if (buf < 0 || buf >= sizes.length) throw invalid(`${path}.buffers[1]`, `view ${k} refers to data buffer ${buf} of ${sizes.length}`);
      if (off < 0 || off + len > sizes[buf]!) {
        throw invalid(`${path}.buffers[1]`, `view ${k} (offset ${off}, length ${len}) is outside data buffer ${buf} of ${sizes[buf]} bytes`);
      }
    }
  }
}

/**
 * `b` as an array of `Ctor`: zero-copy where aligned, else over a copy. The
 * O(length) checks read elements through typed arrays (a DataView call or
 * a BigInt per element made `full` validation of a large buffer take minutes).
 */
function elements<C extends Int8ArrayConstructor | Uint8ArrayConstructor | Int16ArrayConstructor | Uint16ArrayConstructor | Int32ArrayConstructor | Uint32ArrayConstructor>(
  Ctor: C,
  b: Uint8Array,
): InstanceType<C> {
  const w = Ctor.BYTES_PER_ELEMENT;
  const src = b.byteOffset % w === 0 ? b : b.slice();
  return new Ctor(src.buffer as ArrayBuffer, src.byteOffset, Math.floor(src.byteLength / w)) as InstanceType<C>;
}

/** Element `k` of 64-bit little-endian integers held as int32 words, exact within 2^53 (-1 for any negative value). */
function word64(words: Int32Array, k: number): number {
  const hi = words[2 * k + 1]!;
  return hi < 0 ? -1 : hi * 4294967296 + (words[2 * k]! >>> 0);
}

/** Every list view (null ones too, Columnar.rst "ListView Layout") inside the child. */
function checkListViews(offs: Uint8Array, sizes: Uint8Array, wide: boolean, offset: number, end: number, childLength: number, path: string): void {
  const bad = (k: number, off: number | bigint, size: number | bigint): ArrowDeviceError =>
    invalid(`${path}.buffers[1]`, `list view ${k} (offset ${off}, size ${size}) is outside the child of length ${childLength}`);
  const o = elements(Int32Array, offs);
  const z = elements(Int32Array, sizes);
  for (let k = offset; k < end; k++) {
    const off = wide ? word64(o, k) : o[k]!;
    const size = wide ? word64(z, k) : z[k]!;
    if (off < 0 || size < 0 || off + size > childLength) {
      const big = (w: Int32Array): bigint => (BigInt(w[2 * k + 1]!) << 32n) | BigInt(w[2 * k]! >>> 0);
      throw wide ? bad(k, big(o), big(z)) : bad(k, off, size);
    }
  }
}

/** Every type id declared by the union; every dense offset inside its child. */
function checkUnion(typeIds: Uint8Array, offs: Uint8Array | null, declared: readonly number[], lengths: readonly number[], offset: number, end: number, path: string): void {
  const childOf = new Int16Array(256).fill(-1);
  declared.forEach((id, k) => {
    if (id >= 0 && id < 128) childOf[id] = k;
  });
  const ids = elements(Int8Array, typeIds);
  const o = offs ? elements(Int32Array, offs) : null;
  for (let k = offset; k < end; k++) {
    const id = ids[k]!;
    const c = childOf[id & 255]!;
    if (c < 0) throw invalid(`${path}.buffers[0]`, `type id ${id} at ${k} is not one of the union's (${declared.join(',')})`);
    if (o) {
      const off = o[k]!;
      if (off < 0 || off >= lengths[c]!) throw invalid(`${path}.buffers[1]`, `offset ${off} at ${k} is outside child ${c} of length ${lengths[c]}`);
    }
  }
}

/**
 * arrow-js reads date64 and second/millisecond/microsecond timestamps as JS
 * numbers of milliseconds, and throws for an int64 it cannot convert exactly
 * (beyond 2^53 once divided by `divisor`). Valid Arrow, but `full` promises
 * every value reads: such a value is refused as `unsupported`, with its place.
 */
function checkMillis(values: Uint8Array | null, offset: number, length: number, validity: Uint8Array | null, path: string, divisor: bigint): void {
  if (!values) return;
  const words = elements(Int32Array, values);
  // A high word within +-limit is safe without a closer look.
  const limit = divisor === 1n ? 2097151 : 2097151999;
  for (let k = offset; k < offset + length; k++) {
    const hi = words[2 * k + 1]!;
    if (hi <= limit && hi >= -limit) continue;
    if (isNull(validity, k)) continue;
    const raw = (BigInt(hi) << 32n) | BigInt(words[2 * k]! >>> 0);
    const v = divisor === 1n ? raw : raw / divisor;
    if (v > MAX_SAFE || v < -MAX_SAFE) {
      throw new ArrowDeviceError('unsupported', `${path}.buffers[1]`, `value ${v} at ${k} is beyond the 2^53 arrow-js can read as a number`);
    }
  }
}

function checkIndices(values: Uint8Array | null, t: PlanNode['schema']['type'], offset: number, length: number, dictLength: number, validity: Uint8Array | null, path: string): void {
  if (!values || t.id !== 'int') return;
  const end = offset + length;
  const bad = (k: number, i: number | bigint): ArrowDeviceError =>
    invalid(`${path}.buffers[1]`, `dictionary index ${i} at ${k} is outside the dictionary of length ${dictLength}`);
  if (t.bitWidth === 64) {
    const words = elements(Int32Array, values);
    for (let k = offset; k < end; k++) {
      const i = word64(words, k);
      if ((i < 0 || i >= dictLength) && !isNull(validity, k)) {
        const hi = BigInt(words[2 * k + 1]!);
        const lo = BigInt(words[2 * k]! >>> 0);
        throw bad(k, t.signed ? (hi << 32n) | lo : BigInt.asUintN(64, (hi << 32n) | lo));
      }
    }
    return;
  }
  // Read as unsigned: a signed index is inside exactly when its unsigned reading is below
  // min(dictLength, 2^(bits-1)). One monomorphic scan per width (a loop over several typed array
  // kinds runs several times slower: a 4 GiB index buffer must scan in seconds).
  const bits = t.bitWidth;
  const bound = t.signed ? Math.min(dictLength, 2 ** (bits - 1)) : dictLength;
  if (bound >= 2 ** bits) return;
  const ix = bits === 8 ? elements(Uint8Array, values) : bits === 16 ? elements(Uint16Array, values) : elements(Uint32Array, values);
  const scan = bits === 8 ? firstAtLeast8 : bits === 16 ? firstAtLeast16 : firstAtLeast32;
  for (let k = scan(ix as never, offset, end, bound); k >= 0; k = scan(ix as never, k + 1, end, bound)) {
    if (isNull(validity, k)) continue;
    const u = ix[k]!;
    throw bad(k, t.signed && u >= 2 ** (bits - 1) ? u - 2 ** bits : u);
  }
}

/** The first `k` in [from, to) with `a[k] >= bound`, or -1. */
function firstAtLeast8(a: Uint8Array, from: number, to: number, bound: number): number {
  for (let k = from; k < to; k++) if (a[k]! >= bound) return k;
  return -1;
}

function firstAtLeast16(a: Uint16Array, from: number, to: number, bound: number): number {
  for (let k = from; k < to; k++) if (a[k]! >= bound) return k;
  return -1;
}

function firstAtLeast32(a: Uint32Array, from: number, to: number, bound: number): number {
  for (let k = from; k < to; k++) if (a[k]! >= bound) return k;
  return -1;
}
