/**
 * The one reader: an `ArrowArray` tree, followed through its plan
 * (plan.ts), into a flat record of numbers (record.ts: per node, in
 * pre-order, its counts, then each buffer's address and size in bytes).
 * Every import reads through here: arrays,
 * batches, tables, stream items, async tasks, and device arrays, whose
 * structs are in CPU memory and whose buffers may not be.
 *
 * Sizes come from the struct alone, except those that depend on values
 * (the data of binary types is as long as the last offset, a list's child
 * must be as long, variadic buffers are as long as their sizes say): on
 * memory the host reads, those values are read as the node is; on device
 * memory they are deferred reads, done in one batch (one synchronisation)
 * once the tree is read (CDeviceDataInterface.rst; nanoarrow's device
 * layer does the same), and applied by the same code.
 *
 * Validation levels (`ValidationLevel`, after nanoarrow) mean the same on
 * every memory. Beyond its doc: every level reads the first and last
 * offsets and the variadic sizes (they size buffers), refusing a wide offset
 * past 2^53 and a negative or oversized variadic size; `full` also refuses
 * date64 and second/millisecond/microsecond timestamps whose milliseconds
 * pass 2^53, which arrow-js cannot read (`unsupported`), and on device
 * memory reads the buffers it checks, in one batch. Where a level's check needs bytes this library
 * cannot read (an opaque device), the import is refused as `unsupported`,
 * naming the level.
 *
 * What `minimal` and `default` leave unchecked, exactly (no import at any
 * level reads outside what the struct declares; these only make values
 * wrong): `minimal`, whether the first offset is 0 or more and the last not
 * below it (a last offset below 0 sizes the data as empty), children as long
 * as their parent needs, run ends and values of differing lengths;
 * `default` (and `minimal`), the offsets between the first and the last,
 * union type ids and dense offsets, run ends, list view ranges, views,
 * dictionary indices, date64 and timestamp values arrow-js cannot read.
 * No level: UTF-8 validity of utf8 data, null_count against the bitmap,
 * decimal values within their precision, map keys free of nulls and sorted,
 * the contents of null slots. `expand` checks what it copies at every level
 * (expand.ts).
 *
 * Limits at every level (typed errors naming the place and the size): a
 * buffer past MAX_BUFFER_BYTES, nesting past MAX_NESTING_DEPTH, a struct
 * reached twice in one tree, n_buffers past MAX_BUFFERS, a bitmap read past
 * MAX_BITMAP_BITS, and a copy JS cannot allocate (`nomem`).
 *
 * Buffers are not viewed here: the record holds addresses, and views are
 * made on first read (record.ts `bufferView`), or, with `copy`, copies made
 * now. The O(length) checks of `full` are in full-checks.ts.
 */
import { allocBytes, ArrowDeviceError, invalid, prefixPath } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory } from '../memory/memory.js';
import { ptrAt, rawOf, stage, staged, type Addr, type RawAccess } from '../memory/raw.js';
import { access, type Access } from '../abi/accessors.js';
import { ChildRule, Kind, Role } from '../schema/layout.js';
import { AddressSet, MAX_NESTING_DEPTH, reachedTwice, visitOnce } from '../schema/node.js';
import { checkedBuffers, fullCheck, offsetAt, type Bytes } from './full-checks.js';
import type { PlanNode } from './plan.js';
import {
  bufferView, BUFFERS, Deferred, END, forEachNode, LENGTH, N_BUFFERS, NULL_COUNT, OFFSET, pathAt, pathOf, UNKNOWN, type DeferredRead, type ImportRead,
} from './record.js';

/**
 * How much of foreign input an import checks, each level documented by its cost (the `validate` option;
 * `'default'` unless set):
 * - `'minimal'`: what the struct says about itself (counts of buffers and children against the type,
 *   lengths, offsets and null counts, NULL buffers, released children), O(buffers). The checks that keep
 *   an import from reading out of bounds, so `'none'` means `'minimal'`.
 * - `'default'`: adds the values that size buffers (first and last offsets, child lengths, variadic
 *   sizes), still O(buffers).
 * - `'full'`: adds the contents, O(length): every offset in order and in range, union type ids, run ends,
 *   views inside their buffers, dictionary indices; reading every value through arrow-js cannot throw.
 *
 * docs/validation.md lists what each level leaves unchecked.
 */
export type ValidationLevel = 'none' | 'minimal' | 'default' | 'full';

export const MINIMAL = 1;
export const DEFAULT = 2;
export const FULL = 3;
const LEVELS: Record<ValidationLevel, number> = { none: MINIMAL, minimal: MINIMAL, default: DEFAULT, full: FULL };
const LEVEL_NAMES = ['minimal', 'minimal', 'default', 'full'];

/** The level asked for (`default` unless set), as a number. */
export function validationLevel(level: ValidationLevel | undefined): number {
  if (level === undefined) return DEFAULT;
  const n = LEVELS[level];
  if (n === undefined) throw invalid('options.validate', `unknown validation level "${String(level)}"`);
  return n;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
/** Upper bound on n_buffers (view types: 3 + variadic buffers). */
export const MAX_BUFFERS = 1 << 20;
/**
 * The largest buffer this library views or copies: 4 GiB, the most koffi
 * can view (a larger view aborts the process) and a JS typed array holds on
 * every supported runtime. A larger buffer is valid Arrow, refused as
 * `unsupported` with its place and size.
 */
export const MAX_BUFFER_BYTES = 2 ** 32;

/**
 * The largest end (offset + length) of a bitmap this library imports where
 * its bits are read: arrow-js computes bit positions with 32-bit integer
 * operators (`pos >> 3` in `Data.getValid` and the bit readers, `rhs >> 3`
 * in the null count of an unknown null_count), so past 2^31 - 1 a position
 * turns negative: validity reads wrong and counting the nulls recurses until
 * the stack overflows (the fuzzer's seed 20261125 case 64582). Such an array
 * is valid Arrow, refused as `unsupported` at every level. A validity bitmap
 * with null_count 0 is never read by arrow-js, so it passes at any length.
 */
export const MAX_BITMAP_BITS = 2 ** 31 - 1;

/** Refuses a buffer of `size` bytes at `path` that JS cannot hold (see MAX_BUFFER_BYTES). */
export function checkBufferSize(size: number, path: string): void {
  if (size > MAX_BUFFER_BYTES) {
    throw new ArrowDeviceError('unsupported', path, `a buffer of ${size} bytes is larger than the ${MAX_BUFFER_BYTES} bytes JS can hold`);
  }
}

/** A read of device bytes into JS memory. */
export interface Range {
  readonly src: Addr;
  readonly size: number;
  readonly dst: Uint8Array;
}

/**
 * How the reader gets at the bytes of the buffers (the structs are always
 * in CPU memory): in batches, each one synchronisation. A device whose
 * reads complete later (WebGPU's `mapAsync`) returns a promise: its arrays
 * are read with `readTree` and `checkLevelAsync`.
 */
export interface DeviceReader {
  /** Reads each range into its `dst`, in one batch; errors name no place. */
  readBatch(ranges: readonly Range[]): void | Promise<void>;
  /** Why the bytes cannot be read, or null when `readBatch` works. */
  readonly unreadable: string | null;
  /** Whether `readBatch` completes later: the synchronous reads refuse such a device before reading. */
  readonly async?: boolean;
}

/** A batch of device reads and what to do with their bytes once read. */
interface Batch {
  readonly ranges: Range[];
  apply(): void;
  /** Places an error of the read names no place of. */
  readonly place: string;
}

/** Runs `batch` through `device`: synchronously, or (a device that reads later) after its promise. */
function runBatch(batch: Batch, device: DeviceReader): void | Promise<void> {
  const placed = (e: unknown): never => {
    throw e instanceof ArrowDeviceError && e.path === '' ? prefixPath(e, batch.place) : e;
  };
  let r: void | Promise<void>;
  try {
    r = batch.ranges.length > 0 ? device.readBatch(batch.ranges) : undefined;
  } catch (e) {
    return placed(e);
  }
  if (r instanceof Promise) return r.then(() => batch.apply(), placed);
  batch.apply();
}

// --- reading -----------------------------------------------------------------------------

/** The byte offsets of an `ArrowArray`'s fields on a target (src/abi/layout.ts), and how wide its pointers are. */
interface Fields {
  readonly size: number;
  readonly length: number;
  readonly nullCount: number;
  readonly offset: number;
  readonly nBuffers: number;
  readonly nChildren: number;
  readonly buffers: number;
  readonly children: number;
  readonly dictionary: number;
  readonly release: number;
  readonly wide: boolean;
  readonly ps: number;
  readonly A: Access['ArrowArray'];
}

/** The fields of `mem`'s target, made per read (a cache per target did not pay: docs/performance.md). */
function fieldsOf(mem: Memory): Fields {
  const A = access(mem.target).ArrowArray;
  const wide = mem.target.pointerSize === 8;
  return {
    size: A.$size, length: A.length.offset, nullCount: A.null_count.offset, offset: A.offset.offset, nBuffers: A.n_buffers.offset,
    nChildren: A.n_children.offset, buffers: A.buffers.offset, children: A.children.offset, dictionary: A.dictionary.offset,
    release: A.release.offset, wide, ps: wide ? 8 : 4, A,
  };
}

/** What every node of one read needs. */
class Reader {
  /** The child indices from the root to the node being read (-1: a dictionary), for paths. */
  readonly trail: number[] = [];
  readonly raw: RawAccess;
  readonly f: Fields;
  /** The struct addresses read: each is read once, so a DAG costs its input, not its unfolding. */
  readonly seen = AddressSet.shared();
  /** Whether buffers are read by the host at their addresses (`device` null). */
  readonly host: boolean;

  constructor(
    readonly read: ImportRead,
    /** How buffer bytes are read where the host cannot read them at their addresses. */
    readonly device: DeviceReader | null,
  ) {
    const mem = read.mem!;
    this.raw = rawOf(mem);
    this.f = fieldsOf(mem);
    this.host = device === null;
  }

  /** The place of the node being read. */
  path(): string {
    return pathOf(this.read.prefix, this.trail);
  }
}

/** Where a check is: the reader (its node being read) or a place computed before. Paths are built only for errors. */
type Where = Reader | string;

function place(w: Where): string {
  return typeof w === 'string' ? w : w.path();
}

/**
 * Reads the `ArrowArray` tree at `addr` (our copy of the root, moved from the
 * producer) into `read`, at `read.level`. `device`: how buffer bytes are
 * read when the host cannot read them at their addresses (null: it can).
 * Runs the level's checks; on device memory at `minimal`, the value reads
 * stay deferred (`resolveDeferred`).
 */
export function readArray(read: ImportRead, addr: Addr, device: DeviceReader | null = null): void {
  readTree(read, addr, device);
  if (device?.async === true && device.unreadable === null && ((read.deferred !== null && read.level >= DEFAULT) || read.level >= FULL)) {
    throw asyncDevice(read);
  }
  if (device !== null && read.deferred !== null && read.level >= DEFAULT) {
    if (runBatch(deferredBatch(read, device), device) instanceof Promise) throw asyncDevice(read);
  }
  if (read.level >= FULL) checkFull(read, device);
}

/**
 * Reads the struct tree into the record, with the checks the structs alone
 * allow (and, on host memory, the values); `readArray` and
 * `checkLevelAsync` add the level's device reads.
 */
export function readTree(read: ImportRead, addr: Addr, device: DeviceReader | null): void {
  const r = new Reader(read, device);
  try {
    readArrayStruct(r, read.plan.root, addr, 0);
  } catch (e) {
    // An error that names no place (a bad address, say) is the node's being read: the trail is still its.
    if (e instanceof ArrowDeviceError && e.path === '') throw prefixPath(e, r.path());
    throw e;
  } finally {
    r.seen.done();
  }
}

/**
 * For a device whose reads complete later, after `readTree`: the level's
 * device reads (one batch for the values that size buffers, one for what
 * `full` checks), each awaited.
 */
export async function checkLevelAsync(read: ImportRead, device: DeviceReader): Promise<void> {
  if (read.deferred !== null && read.level >= DEFAULT) await runBatch(deferredBatch(read, device), device);
  if (read.level >= FULL) await runBatch(fullBatch(read, device), device);
}

function asyncDevice(read: ImportRead): ArrowDeviceError {
  return new ArrowDeviceError(
    'unsupported',
    read.prefix,
    `this device reads its bytes asynchronously, and validation "${LEVEL_NAMES[read.level]}" reads some: ` +
      'use the asynchronous import (importDeviceArrayAsync, resolveBufferSizesAsync), or { validate: "minimal" } to pass it on unread',
  );
}

/** An int64 count of the struct staged at `at` with a non-zero high word: refused with its exact value. */
function bigCount(r: Reader, dv: DataView, at: number, o: number, what: string): number {
  const v = dv.getBigInt64(at + o, true);
  if (v < 0n) throw invalid(`${r.path()}.${what}`, `negative value ${v}`);
  if (v > MAX_SAFE) throw invalid(`${r.path()}.${what}`, `value ${v} is too large`);
  return Number(v);
}

/** The null count's refusal (-1 is "unknown"; anything else below 0, or above the length, is invalid). */
function badNullCount(r: Reader, dv: DataView, at: number, length: number): ArrowDeviceError {
  const v = dv.getBigInt64(at + r.f.nullCount, true);
  return v < -1n
    ? invalid(`${r.path()}.null_count`, `negative value ${v}`)
    : invalid(`${r.path()}.null_count`, `${Number(v)} is greater than the length ${length}`);
}

/** Reads the `ArrowArray` struct at `addr` (plan node `pn`), its children and its dictionary, into the record; returns its position. */
function readArrayStruct(r: Reader, pn: PlanNode, addr: Addr, depth: number): number {
  if (addr === 0) throw invalid(r.path(), 'NULL pointer');
  if (depth > MAX_NESTING_DEPTH) throw invalid(r.path(), `nesting deeper than ${MAX_NESTING_DEPTH} levels`);
  const read = r.read;
  const nums = read.nums;
  const f = r.f;
  const wide = f.wide;
  const ps = f.ps;
  {
    const p = read.length;
    // Refused before anything of it is read: read again under another plan node, its buffers
    // would be sized (and read) by another type (schema/node.ts `visitOnce`).
    visitOnce(r.seen, addr, '');
    const at = stage(r.raw, addr, f.size);
    const dv = staged.dv;
    // The fields, read in place: int64 counts below 2^32 (high word 0) are the common case.
    if ((wide ? dv.getUint32(at + f.release, true) + dv.getUint32(at + f.release + 4, true) : dv.getUint32(at + f.release, true)) === 0) {
      throw released();
    }
    const length = dv.getInt32(at + f.length + 4, true) === 0 ? dv.getUint32(at + f.length, true) : bigCount(r, dv, at, f.length, 'length');
    const offset = dv.getInt32(at + f.offset + 4, true) === 0 ? dv.getUint32(at + f.offset, true) : bigCount(r, dv, at, f.offset, 'offset');
    const ncHi = dv.getInt32(at + f.nullCount + 4, true);
    // -1 ("unknown") has a high word of -1 and a low word whose int32 reading is negative; -2 stands for any other negative value.
    const ncLo = dv.getInt32(at + f.nullCount, true);
    const nullCount = ncHi === 0 ? ncLo >>> 0 : ncHi === -1 && ncLo < 0 ? ncLo : -2;
    if (nullCount < -1 || nullCount > length) throw badNullCount(r, dv, at, length);
    if (length + offset > Number.MAX_SAFE_INTEGER) throw invalid('', 'offset + length overflows');
    const nBuffers = dv.getInt32(at + f.nBuffers + 4, true) === 0 ? dv.getUint32(at + f.nBuffers, true) : bigCount(r, dv, at, f.nBuffers, 'n_buffers');
    const nChildren = dv.getInt32(at + f.nChildren + 4, true) === 0 ? dv.getUint32(at + f.nChildren, true) : bigCount(r, dv, at, f.nChildren, 'n_children');
    // View types take any number of variadic buffers: refuse counts no producer could have
    // allocated before following the pointer array that far.
    if (nBuffers > MAX_BUFFERS) throw invalid(`${r.path()}.n_buffers`, `implausible value ${nBuffers}`);
    const buffersPtr = ptrAt(dv, at + f.buffers, wide);
    const childrenPtr = ptrAt(dv, at + f.children, wide);
    const dictPtr = ptrAt(dv, at + f.dictionary, wide);
    checkCounts(r, pn, nBuffers, nChildren, buffersPtr, childrenPtr, dictPtr, nullCount);

    // The buffer and child pointer arrays, one read each (one read of both where they are
    // contiguous was measured and did not pay: docs/performance.md).
    let bdv = dv;
    let bat = 0;
    let cdv = dv;
    let cat = 0;
    if (nBuffers > 0) {
      bat = stagePointers(r, buffersPtr, nBuffers, 'buffers');
      bdv = staged.dv;
    }
    if (nChildren > 0) {
      cat = stagePointers(r, childrenPtr, nChildren, 'children');
      cdv = staged.dv;
    }
    let q = p;
    nums[q++] = length;
    nums[q++] = offset;
    nums[q++] = nullCount;
    nums[q++] = nBuffers;
    nums[q++] = 0; // END, once the children and the dictionary are read
    for (let i = 0; i < nBuffers; i++) {
      const b = ptrAt(bdv, bat + i * ps, wide);
      // A device address is any 64-bit value (a handle, say): one a number cannot hold is kept exact.
      if (b > Number.MAX_SAFE_INTEGER && !r.host) (read.exact ??= new Map()).set(q, bdv.getBigUint64(bat + i * ps, true));
      nums[q++] = b;
      nums[q++] = 0;
    }
    read.length = q;

    const l = pn.layout;
    const end = offset + length;
    // The length the list child must have (the last offset), once known; -1 while deferred.
    let childMin = 0;
    let listRead: DeferredRead | null = null;
    if (l.variadic) {
      sizeViews(r, pn, p, end, nBuffers);
    } else if (l.kind === Kind.Null) {
      // A legacy validity slot of a null array is tolerated and never read.
      if (nBuffers === 1) nums[p + BUFFERS] = 0;
    } else {
      const specs = l.buffers;
      for (let i = 0; i < nBuffers; i++) {
        const s = specs[i]!;
        const role = s.role;
        let size: number;
        let nullable = false;
        switch (role) {
          case Role.Validity:
            sizeValidity(r, p, i, end, length, nullCount);
            continue;
          case Role.Bits:
            if (end > MAX_BITMAP_BITS && nums[p + BUFFERS + 2 * i] !== 0) throw bitmapPastLimit(r, i, end, 'values');
            size = Math.ceil(end / 8);
            break;
          case Role.Offsets:
            // offset + length + 1 offsets; an empty array may have a NULL offsets buffer, one with elements may not.
            size = (end + 1) * s.width;
            nullable = length === 0;
            break;
          case Role.Data:
            continue; // sized by its offsets (applyOffsets)
          default:
            size = end * s.width;
        }
        sizeBuffer(r, p, i, size, s.what, nullable);
        if (role !== Role.Offsets) continue;
        // The first and last offsets size the data (binary types) or the child (lists).
        if (nums[p + BUFFERS + 2 * i] === 0) {
          childMin = applyOffsets(r.read, pn, p, i, 0, 0, r);
        } else if (r.host) {
          childMin = readOffsets(r, pn, p, i, offset, end, s.width === 8);
        } else {
          childMin = -1;
          listRead = { kind: Deferred.Offsets, pn, p, i, child: -1, path: r.path() };
          (read.deferred ??= []).push(listRead);
          if (l.kind === Kind.Binary || l.kind === Kind.LargeBinary) nums[p + BUFFERS + 2 * (i + 1) + 1] = UNKNOWN;
          i++; // the data buffer is sized when the offsets are read
        }
      }
    }

    // Children, each checked against the length its parent needs; then the dictionary.
    const kids = pn.children;
    const trail = r.trail;
    const check = read.level >= DEFAULT ? l.children : ChildRule.None;
    let first = -1;
    for (let k = 0; k < nChildren; k++) {
      trail.push(k);
      const cp = readArrayStruct(r, kids[k]!, ptrAt(cdv, cat + k * ps, wide), depth + 1);
      trail.pop();
      if (k === 0) first = cp;
      const clen = nums[cp + LENGTH]!;
      switch (check) {
        case ChildRule.Parent: if (clen < end) throw shortChild(r, k, clen, end); break;
        case ChildRule.Multiple: if (clen < end * l.listSize) throw shortChild(r, k, clen, end * l.listSize); break;
        case ChildRule.LastOffset:
          if (childMin >= 0) {
            if (clen < childMin) throw shortChild(r, k, clen, childMin);
          } else listRead!.child = cp;
          break;
        case ChildRule.RunEnds:
          if (k === 1 && nums[first + LENGTH] !== clen) {
            throw invalid(`${r.path()}.children[1].length`, `run ends (${nums[first + LENGTH]}) and values (${clen}) differ in length`);
          }
      }
    }
    if (pn.dictionary !== null) {
      trail.push(-1);
      readArrayStruct(r, pn.dictionary, dictPtr, depth + 1);
      trail.pop();
    }
    nums[p + END] = read.length;
    return p;
  }
}

function released(): ArrowDeviceError {
  return new ArrowDeviceError('released', '', 'the struct is released (release is NULL)');
}

function shortChild(w: Where, k: number, length: number, min: number): ArrowDeviceError {
  return invalid(`${place(w)}.children[${k}].length`, `${length} is less than the ${min} its parent needs`);
}

/**
 * The minimal checks of an `ArrowArray` struct against its type: counts of
 * buffers and children, NULL pointer arrays, a dictionary where the schema
 * has one (and only there), a null count the layout can have.
 */
function checkCounts(r: Reader, pn: PlanNode, nBuffers: number, nChildren: number, buffersPtr: Addr, childrenPtr: Addr, dictPtr: Addr, nullCount: number): void {
  const schema = pn.schema;
  const l = pn.layout;
  const n = l.nBuffers;
  if (l.variadic ? nBuffers < n : nBuffers !== n && !(l.kind === Kind.Null && nBuffers === 1)) {
    throw invalid(`${r.path()}.n_buffers`, `type "${schema.format}" needs ${l.variadic ? 'at least ' : ''}${n} buffer${n === 1 ? '' : 's'}, got ${nBuffers}`);
  }
  if (nChildren !== schema.children.length) {
    throw invalid(`${r.path()}.n_children`, `the schema has ${schema.children.length} children, the array ${nChildren}`);
  }
  if (nBuffers > 0 && buffersPtr === 0) throw invalid(`${r.path()}.buffers`, `NULL pointer with n_buffers = ${nBuffers}`);
  if (nChildren > 0 && childrenPtr === 0) throw invalid(`${r.path()}.children`, `NULL pointer with n_children = ${nChildren}`);
  if (schema.dictionary && dictPtr === 0) throw invalid(`${r.path()}.dictionary`, 'NULL pointer, but the schema is dictionary-encoded');
  if (!schema.dictionary && dictPtr !== 0) throw invalid(`${r.path()}.dictionary`, 'present, but the schema is not dictionary-encoded');
  if (!l.hasValidity && nullCount > 0 && l.kind !== Kind.Null) {
    throw invalid(`${r.path()}.null_count`, `type "${schema.format}" has no validity bitmap, so null_count must be 0 or -1, got ${nullCount}`);
  }
}

/** Stages `n` pointers at `addr` (errors placed at `<node>.field`); returns their offset in `staged`. */
function stagePointers(r: Reader, addr: Addr, n: number, field: string): number {
  try {
    return stage(r.raw, addr, n * r.f.ps);
  } catch (e) {
    throw prefixPath(e, `${r.path()}.${field}`);
  }
}

function bitmapPastLimit(r: Reader, i: number, end: number, what: string): ArrowDeviceError {
  return new ArrowDeviceError(
    'unsupported',
    `${r.path()}.buffers[${i}]`,
    `the ${what} bitmap's offset + length is ${end}: arrow-js reads bits with 32-bit integers, up to ${MAX_BITMAP_BITS}`,
  );
}

function sizeValidity(r: Reader, p: number, i: number, end: number, length: number, nullCount: number): void {
  const ptr = r.read.nums[p + BUFFERS + 2 * i]!;
  // CDataInterface.rst: the validity buffer MAY be NULL only if null_count is 0. A bitmap past the
  // limit is refused before it is viewed or copied.
  if (end > MAX_BITMAP_BITS && nullCount !== 0 && ptr !== 0) throw bitmapPastLimit(r, i, end, 'validity');
  if (ptr === 0 && nullCount !== 0 && length > 0) throw invalid(`${r.path()}.buffers[${i}]`, `NULL validity buffer with null_count ${nullCount}`);
  sizeBuffer(r, p, i, Math.ceil(end / 8), 'validity', true);
}

/**
 * Sets the size of buffer `i` of the node at `p`: a NULL buffer is refused
 * where bytes are needed (unless `nullable`) and sized 0; a present one is
 * checked against what JS can hold and, on host memory, against the
 * memory's address range (a bad address is refused now, with its place, not
 * when a view is first read); with `copy`, copied now.
 */
function sizeBuffer(r: Reader, p: number, i: number, size: number, what: string, nullable: boolean): void {
  const read = r.read;
  const nums = read.nums;
  const at = p + BUFFERS + 2 * i;
  const ptr = nums[at]!;
  if (ptr === 0) {
    if (size > 0 && !nullable) throw invalid(`${r.path()}.buffers[${i}]`, `NULL ${what} buffer, but ${size} bytes are needed`);
    return;
  }
  nums[at + 1] = size;
  if (size === 0 || !r.host) return;
  read.holds = true;
  try {
    if (read.viewed) checkBufferSize(size, '');
    r.raw.check(ptr, size);
    if (read.copy) {
      liveCounters.copiedBuffers++;
      liveCounters.copiedBytes += size;
      (read.views ??= new Map()).set(at, read.mem!.read(BigInt(ptr), size));
    }
  } catch (e) {
    throw e instanceof ArrowDeviceError && e.path === '' ? prefixPath(e, `${r.path()}.buffers[${i}]`) : e;
  }
}

/**
 * Reads the first and last offsets of buffer `i` (host memory) and applies
 * them (`applyOffsets`).
 */
function readOffsets(r: Reader, pn: PlanNode, p: number, i: number, offset: number, end: number, wide: boolean): number {
  const w = wide ? 8 : 4;
  const at = p + BUFFERS + 2 * i;
  const copy = r.read.views?.get(at);
  let first: number;
  let last: number;
  if (copy !== undefined) {
    first = offsetAt(copy, 0, wide, offset, 0, r, i);
    last = offsetAt(copy, 0, wide, end, 0, r, i);
  } else {
    // One read each (one read of both where they are close was measured and did not pay: docs/performance.md).
    const addr = r.read.nums[at]!;
    const o1 = stage(r.raw, addr + offset * w, w);
    first = offsetAt(staged.u8, o1, wide, offset, offset, r, i);
    const o2 = stage(r.raw, addr + end * w, w);
    last = offsetAt(staged.u8, o2, wide, end, end, r, i);
  }
  return applyOffsets(r.read, pn, p, i, first, last, r);
}

/**
 * What the first and last offsets of buffer `i` of the node at `p` decide
 * (the same on host and device memory): checked at `default`, the data
 * buffer sized (binary types) or the child's least length returned (lists).
 */
function applyOffsets(read: ImportRead, pn: PlanNode, p: number, i: number, first: number, last: number, w: Where): number {
  const what = pn.layout.buffers[i]!.what;
  if (read.level >= DEFAULT) {
    if (first < 0) throw invalid(`${place(w)}.buffers[${i}]`, `first ${what} ${first} is negative`);
    if (last < first) throw invalid(`${place(w)}.buffers[${i}]`, `last ${what} ${last} is less than the first ${first}`);
  }
  const n = Math.max(last, 0);
  const k = pn.layout.kind;
  if (k === Kind.Binary || k === Kind.LargeBinary) {
    const nums = read.nums;
    const at = p + BUFFERS + 2 * (i + 1);
    const ptr = nums[at]!;
    if (ptr === 0) {
      if (n > 0) throw invalid(`${place(w)}.buffers[${i + 1}]`, `NULL data buffer, but ${n} bytes are needed`);
      nums[at + 1] = 0;
    } else if (typeof w === 'string') {
      nums[at + 1] = n; // device memory: its size is checked when copied
    } else {
      sizeBuffer(w, p, i + 1, n, 'data', true);
    }
  }
  return n;
}

/** Sizes the buffers of a view type: validity, views, then the variadic data buffers by their sizes. */
function sizeViews(r: Reader, pn: PlanNode, p: number, end: number, nBuffers: number): void {
  const nums = r.read.nums;
  sizeValidity(r, p, 0, end, nums[p + LENGTH]!, nums[p + NULL_COUNT]!);
  sizeBuffer(r, p, 1, end * 16, 'views', false);
  const nVariadic = nBuffers - 3;
  const sizesAt = nBuffers - 1;
  sizeBuffer(r, p, sizesAt, nVariadic * 8, 'variadic sizes', nVariadic === 0);
  if (nVariadic === 0) return;
  if (r.host) {
    const addr = nums[p + BUFFERS + 2 * sizesAt]!;
    const copy = r.read.views?.get(p + BUFFERS + 2 * sizesAt);
    let bytes: Uint8Array;
    if (copy !== undefined) bytes = copy;
    else {
      const o = stage(r.raw, addr, nVariadic * 8);
      bytes = staged.u8.subarray(o, o + nVariadic * 8);
    }
    applyVariadic(r.read, p, bytes, r);
  } else {
    for (let k = 0; k < nVariadic; k++) nums[p + BUFFERS + 2 * (2 + k) + 1] = UNKNOWN;
    (r.read.deferred ??= []).push({ kind: Deferred.Variadic, pn, p, i: sizesAt, child: -1, path: r.path() });
  }
}

/**
 * Sizes the variadic data buffers of the view node at `p` from its variadic
 * sizes (`bytes`): on host memory (`w` the reader) checked and copied as
 * every buffer is; on device memory (`w` the node's place) when copied.
 */
function applyVariadic(read: ImportRead, p: number, bytes: Uint8Array, w: Where): void {
  const nums = read.nums;
  const nBuffers = nums[p + N_BUFFERS]!;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let k = 0; k < nBuffers - 3; k++) {
    const sz = dv.getBigInt64(k * 8, true);
    if (sz < 0n || sz > MAX_SAFE) throw invalid(`${place(w)}.buffers[${nBuffers - 1}]`, `variadic buffer ${k} has size ${sz}`);
    const size = Number(sz);
    if (typeof w !== 'string') sizeBuffer(w, p, 2 + k, size, `variadic data ${k}`, size === 0);
    else {
      const at = p + BUFFERS + 2 * (2 + k);
      if (nums[at] === 0 && size > 0) throw invalid(`${w}.buffers[${2 + k}]`, `NULL variadic data ${k} buffer, but ${size} bytes are needed`);
      nums[at + 1] = nums[at] === 0 ? 0 : size;
    }
  }
}

/**
 * Does the deferred device reads of `read` in one batch and applies them
 * (sizes, and the `default` checks of the values read).
 */
export function resolveDeferred(read: ImportRead, device: DeviceReader): void {
  if (read.deferred === null) return;
  if (device.async === true && device.unreadable === null) throw asyncDevice(read);
  if (runBatch(deferredBatch(read, device), device) instanceof Promise) throw asyncDevice(read);
}

/** `resolveDeferred` for a device whose reads complete later. */
export async function resolveDeferredAsync(read: ImportRead, device: DeviceReader): Promise<void> {
  if (read.deferred !== null) await runBatch(deferredBatch(read, device), device);
}

/** The batch of the deferred reads of `read`, and how their values apply (sizes, and the `default` checks). */
function deferredBatch(read: ImportRead, device: DeviceReader): Batch {
  const list = read.deferred!;
  if (device.unreadable !== null) {
    throw new ArrowDeviceError(
      'unsupported',
      list[0]!.path,
      `validation "${LEVEL_NAMES[read.level]}" reads the offsets and variadic sizes that size buffers, but ${device.unreadable}; ` +
        'import with { validate: "minimal" } to pass it on unread',
    );
  }
  const nums = read.nums;
  const ranges: Range[] = [];
  for (const d of list) {
    const addr = nums[d.p + BUFFERS + 2 * d.i]!;
    if (d.kind === Deferred.Offsets) {
      const w = d.pn.layout.buffers[d.i]!.width;
      ranges.push({ src: addr + nums[d.p + OFFSET]! * w, size: w, dst: new Uint8Array(w) });
      ranges.push({ src: addr + (nums[d.p + OFFSET]! + nums[d.p + LENGTH]!) * w, size: w, dst: new Uint8Array(w) });
    } else {
      const n = (nums[d.p + N_BUFFERS]! - 3) * 8;
      ranges.push({ src: addr, size: n, dst: new Uint8Array(n) });
    }
  }
  return {
    ranges,
    // One batch: an error of the read names the first buffer it read.
    place: `${list[0]!.path}.buffers[${list[0]!.i}]`,
    apply(): void {
      let j = 0;
      for (const d of list) {
        if (d.kind === Deferred.Offsets) {
          const wide = d.pn.layout.buffers[d.i]!.width === 8;
          const first = offsetAt(ranges[j++]!.dst, 0, wide, 0, 0, d.path, d.i);
          const last = offsetAt(ranges[j++]!.dst, 0, wide, 0, 0, d.path, d.i);
          const min = applyOffsets(read, d.pn, d.p, d.i, first, last, d.path);
          if (d.child >= 0 && nums[d.child + LENGTH]! < min) throw shortChild(d.path, 0, nums[d.child + LENGTH]!, min);
        } else {
          applyVariadic(read, d.p, ranges[j++]!.dst, d.path);
        }
      }
      read.deferred = null;
    },
  };
}

// --- full validation ---------------------------------------------------------------------

const EMPTY = new Uint8Array(0);

/**
 * The O(length) checks of `full` (full-checks.ts), node by node in record
 * order, on the bytes of the buffers they read: views of host memory (or the
 * copies a copy holds), or on device memory copies read in one batch.
 */
export function checkFull(read: ImportRead, device: DeviceReader | null): void {
  if (device === null) {
    runChecks(read, (at) => bufferView(read, at, 1, -1));
  } else if (runBatch(fullBatch(read, device), device) instanceof Promise) {
    throw asyncDevice(read);
  }
}

/** The batch of device reads `full` checks, and the checks over the copies. */
function fullBatch(read: ImportRead, device: DeviceReader): Batch {
  const nums = read.nums;
  const copies = new Map<number, Uint8Array>();
  const ranges: Range[] = [];
  let first = -1;
  forEachNode(read, (pn, p) => {
    if (pn.full === 0) return;
    for (const at of checkedBuffers(read, pn, p)) {
      const size = nums[at + 1]!;
      if (nums[at] === 0 || size <= 0 || copies.has(at)) continue;
      if (first < 0) first = p;
      const dst = allocBytes(size, pathAt(read, p));
      copies.set(at, dst);
      ranges.push({ src: nums[at]!, size, dst });
    }
  });
  if (ranges.length > 0 && device.unreadable !== null) {
    throw new ArrowDeviceError(
      'unsupported',
      pathAt(read, first),
      `validation "full" reads the offsets, type ids, views and values it checks, but ${device.unreadable}; import with { validate: "minimal" } to pass it on unread`,
    );
  }
  return {
    ranges,
    place: read.prefix,
    apply: () => runChecks(read, (at) => (nums[at] === 0 ? null : (copies.get(at) ?? EMPTY))),
  };
}

/** Runs the checks of `full` at every node that has some, on the bytes `bytes` gives. */
function runChecks(read: ImportRead, bytes: Bytes): void {
  forEachNode(read, (pn, p) => {
    if (pn.full !== 0) fullCheck(read, pn, p, bytes);
  });
}

