/**
 * The `ArrowArray` tree of a device array, read without touching a single
 * buffer byte: only the structs (which the spec puts in CPU memory) are read.
 *
 * Each buffer's size is known from the struct alone, except where it
 * depends on values that live on the device: the data buffer of
 * binary/utf8 (its size is the last offset), view types' variadic data
 * buffers (their sizes are in the variadic sizes buffer), and the last
 * offset of lists, which the child must be long enough for. Those reads are
 * collected as `Fetch`es while the tree is read, and `resolveSizes` does
 * them all in one batch (one synchronisation), after nanoarrow's device
 * layer. Nothing here depends on another fetch, so one batch always suffices.
 *
 * Validation: the `minimal` checks of src/array/import.ts (counts of
 * buffers and children against the type, lengths, offsets, null counts,
 * NULL buffers the type needs, dictionaries), plus, once the fetch is done,
 * the `default` level's checks of the fetched values (last offsets not
 * negative, children long enough, variadic sizes not negative).
 */
import { ArrowDeviceError, invalid, prefixPath } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { readPointers } from '../memory/struct.js';
import { access } from '../abi/accessors.js';
import { rawOf, stage, staged } from '../memory/raw.js';
import { Kind, layoutOf } from '../schema/layout.js';
import { MAX_NESTING_DEPTH, visitOnce, type SchemaNode } from '../schema/node.js';
import type { ArrayView } from '../array/view.js';
import { checkBufferSize, checkCounts } from '../array/import.js';
import type { DeviceBackend, DeviceContext, ReadRange } from './backend.js';

/** One buffer of a device array. */
export interface DeviceBuffer {
  /** The address on the device; `0n` for a NULL buffer. */
  readonly address: Ptr;
  /**
   * Bytes from `address` to the end of what the array uses (its `offset`
   * included); `undefined` while it depends on values on the device that
   * have not been fetched yet (see `DeviceArray.resolveBufferSizes`).
   */
  readonly size: number | undefined;
}

/**
 * Each buffer's place, `device_array.array.children[1].buffers[2]`, for the
 * errors of reads and copies (kept apart: the buffers are public objects).
 */
const bufferPaths = new WeakMap<DeviceBuffer, string>();

/** A node of a device array: what its structs say, with buffers as device addresses. */
export interface DeviceArrayNode {
  readonly schema: SchemaNode;
  readonly length: number;
  readonly offset: number;
  /** -1 when the producer did not compute it. */
  readonly nullCount: number;
  readonly buffers: readonly DeviceBuffer[];
  readonly children: readonly DeviceArrayNode[];
  readonly dictionary: DeviceArrayNode | null;
}

export class DeviceNode implements DeviceArrayNode {
  constructor(
    readonly schema: SchemaNode,
    readonly length: number,
    readonly offset: number,
    readonly nullCount: number,
    readonly buffers: { address: Ptr; size: number | undefined }[],
    readonly children: DeviceNode[],
    readonly dictionary: DeviceNode | null,
  ) {}
}

/** A read of device bytes that a buffer size or a check depends on. */
export interface Fetch {
  readonly addr: Ptr;
  readonly size: number;
  /** The buffer the bytes are in: its start and the bytes from there to the end of the read. */
  readonly base: Ptr;
  readonly extent: number;
  /** The buffer's place, for errors. */
  readonly path: string;
  apply(bytes: Uint8Array): void;
}

/**
 * Refuses, with the buffer's place, a read of `size` bytes from `base`
 * that the host memory knows is bad (NULL page, out of range), when the
 * backend reads the device's addresses as host addresses: a device array's
 * buffer pointer of 0x10 must give a typed error like the host import's,
 * not a read at 0x10 + offset that faults.
 */
function checkHostRange(ctx: DeviceContext, backend: DeviceBackend, base: Ptr, size: number, path: string): void {
  if (!backend.hostReadable(ctx.deviceType) || size === 0) return;
  try {
    ctx.mem.checkAddress(base, size);
  } catch (e) {
    throw prefixPath(e, path);
  }
}

/** Does `fetches` in one batch of `backend` reads and applies them; errors name the buffer read. */
export function readFetches(fetches: readonly Fetch[], backend: DeviceBackend, ctx: DeviceContext): void {
  const ranges: ReadRange[] = fetches.map((f) => {
    checkHostRange(ctx, backend, f.base, f.extent, f.path);
    return { src: f.addr, size: f.size, dst: new Uint8Array(f.size) };
  });
  try {
    backend.readBatch(ctx, ranges, true);
  } catch (e) {
    // One batch: name the first buffer it read (the whole batch failed).
    throw e instanceof ArrowDeviceError && e.path === '' && fetches.length > 0 ? prefixPath(e, fetches[0]!.path) : e;
  }
  fetches.forEach((f, i) => f.apply(ranges[i]!.dst));
}

/** The place of a buffer of a tree read here (empty for one made elsewhere). */
export function bufferPath(b: DeviceBuffer): string {
  return bufferPaths.get(b) ?? '';
}

/** A host copy of `b` (its size known) is possible: refuses a buffer too large for JS or, on host memory, a bad address. */
export function checkCopy(b: DeviceBuffer, backend: DeviceBackend, ctx: DeviceContext): void {
  const path = bufferPath(b);
  checkBufferSize(b.size ?? 0, path);
  checkHostRange(ctx, backend, b.address, b.size ?? 0, path);
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const MAX_BUFFERS = 1 << 20;

function toCount(v: bigint, path: string, what: string): number {
  if (v < 0n) throw invalid(`${path}.${what}`, `negative value ${v}`);
  if (v > MAX_SAFE) throw invalid(`${path}.${what}`, `value ${v} is too large`);
  return Number(v);
}

/**
 * Reads the `ArrowArray` tree at `ptr` (CPU memory) against `schema`,
 * collecting into `fetches` the device reads its sizes and checks need.
 * `check` false skips the checks of fetched values (validation `none`).
 */
export function readDeviceTree(
  mem: Memory,
  ptr: Ptr,
  schema: SchemaNode,
  path: string,
  fetches: Fetch[],
  check = true,
  depth = 0,
  seen = new Set<Ptr>(),
): DeviceNode {
  if (ptr === 0n) throw invalid(path, 'NULL pointer');
  if (depth > MAX_NESTING_DEPTH) throw invalid(path, `nesting deeper than ${MAX_NESTING_DEPTH} levels`);
  visitOnce(seen, ptr, path);
  try {
    // The struct's bytes staged once (src/memory/raw.ts), its fields read through the typed accessors.
    const A = access(mem.target).ArrowArray;
    const at = stage(rawOf(mem), Number(ptr), A.$size);
    const dv = staged.dv;
    if (A.release.get(dv, at) === 0) throw new ArrowDeviceError('released', path, 'the struct is released (release is NULL)');
    const length = toCount(A.length.big(dv, at), path, 'length');
    const offset = toCount(A.offset.big(dv, at), path, 'offset');
    const nc64 = A.null_count.big(dv, at);
    if (nc64 < -1n) throw invalid(`${path}.null_count`, `negative value ${nc64}`);
    const nullCount = Number(nc64);
    if (nullCount > length) throw invalid(`${path}.null_count`, `${nullCount} is greater than the length ${length}`);
    if (length + offset > Number.MAX_SAFE_INTEGER) throw invalid(path, 'offset + length overflows');
    const nBuffers = toCount(A.n_buffers.big(dv, at), path, 'n_buffers');
    const nChildren = toCount(A.n_children.big(dv, at), path, 'n_children');
    if (nBuffers > MAX_BUFFERS) throw invalid(`${path}.n_buffers`, `implausible value ${nBuffers}`);
    const buffersPtr = A.buffers.big(dv, at);
    const childrenPtr = A.children.big(dv, at);
    const dictPtr = A.dictionary.big(dv, at);

    checkCounts(schema, layoutOf(schema.type), nBuffers, nChildren, buffersPtr, childrenPtr, dictPtr, nullCount, path);
    const t = schema.type;
    const pointers = (addr: Ptr, n: number, field: string): Ptr[] => {
      try {
        return readPointers(mem, addr, n);
      } catch (e) {
        throw prefixPath(e, `${path}.${field}`);
      }
    };
    const bufPtrs = pointers(buffersPtr, nBuffers, 'buffers');
    const childPtrs = pointers(childrenPtr, nChildren, 'children');
    const end = offset + length;

    const buffers: { address: Ptr; size: number | undefined }[] = bufPtrs.map((address, i) => {
      const b = { address, size: undefined };
      bufferPaths.set(b, `${path}.buffers[${i}]`);
      return b;
    });
    const pathOf = (i: number): string => `${path}.buffers[${i}]`;
    /** Sets buffer `i`'s size; a NULL buffer is refused where `size` bytes are needed, unless `nullable`. */
    const sized = (i: number, size: number, what: string, nullable = false): void => {
      const b = buffers[i]!;
      if (b.address === 0n) {
        if (size > 0 && !nullable) throw invalid(`${path}.buffers[${i}]`, `NULL ${what} buffer, but ${size} bytes are needed`);
        b.size = 0;
      } else b.size = size;
    };
    const validity = (): void => {
      sized(0, Math.ceil(end / 8), 'validity', true);
      if (buffers[0]!.address === 0n && nullCount !== 0 && length > 0) {
        throw invalid(`${path}.buffers[0]`, `NULL validity buffer with null_count ${nullCount}`);
      }
    };
    /** The offsets buffer `i` (sized now) and a fetch of its last offset, handed to `use`. */
    const offsets = (i: number, wide: boolean, use: (last: number) => void): void => {
      const w = wide ? 8 : 4;
      sized(i, (end + 1) * w, 'offsets', length === 0);
      const b = buffers[i]!;
      if (b.address === 0n) {
        use(0);
        return;
      }
      fetches.push({
        addr: b.address + BigInt(end * w),
        size: w,
        base: b.address,
        extent: (end + 1) * w,
        path: pathOf(i),
        apply: (bytes) => {
          const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
          const v = wide ? dv.getBigInt64(0, true) : BigInt(dv.getInt32(0, true));
          if (check && (v < 0n || v > MAX_SAFE)) throw invalid(`${path}.buffers[${i}]`, `last offset ${v} is out of range`);
          use(v < 0n ? 0 : Number(v));
        },
      });
    };
    const children: DeviceNode[] = [];
    const child = (k: number): DeviceNode => {
      const c = readDeviceTree(mem, childPtrs[k]!, schema.children[k]!, `${path}.children[${k}]`, fetches, check, depth + 1, seen);
      children.push(c);
      return c;
    };
    const atLeast = (c: DeviceNode, k: number, min: number): void => {
      if (check && c.length < min) throw invalid(`${path}.children[${k}].length`, `${c.length} is less than the ${min} its parent needs`);
    };

    const lay = layoutOf(t);
    switch (lay.kind) {
      case Kind.Null:
        if (nBuffers === 1) buffers[0]!.size = 0;
        break;
      case Kind.Bool:
        validity();
        sized(1, Math.ceil(end / 8), 'values');
        break;
      case Kind.Binary: case Kind.LargeBinary:
        validity();
        offsets(1, lay.kind === Kind.LargeBinary, (last) => sized(2, last, 'data', last === 0));
        if (buffers[2]!.address === 0n && buffers[2]!.size === undefined) buffers[2]!.size = 0;
        break;
      case Kind.View: {
        validity();
        sized(1, end * lay.width, 'views');
        const nVariadic = nBuffers - 3;
        const sizesAt = nBuffers - 1;
        sized(sizesAt, nVariadic * 8, 'variadic sizes', nVariadic === 0);
        for (let k = 0; k < nVariadic; k++) if (buffers[2 + k]!.address === 0n) buffers[2 + k]!.size = 0;
        if (nVariadic > 0) {
          fetches.push({
            addr: buffers[sizesAt]!.address,
            size: nVariadic * 8,
            base: buffers[sizesAt]!.address,
            extent: nVariadic * 8,
            path: pathOf(sizesAt),
            apply: (bytes) => {
              const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
              for (let k = 0; k < nVariadic; k++) {
                const s = dv.getBigInt64(k * 8, true);
                if (s < 0n || s > MAX_SAFE) throw invalid(`${path}.buffers[${sizesAt}]`, `variadic buffer ${k} has size ${s}`);
                sized(2 + k, Number(s), `variadic data ${k}`, s === 0n);
              }
            },
          });
        }
        break;
      }
      case Kind.List: case Kind.LargeList: {
        validity();
        const c = child(0);
        offsets(1, lay.kind === Kind.LargeList, (last) => atLeast(c, 0, last));
        break;
      }
      case Kind.ListView: {
        const w = lay.width;
        validity();
        sized(1, end * w, 'offsets');
        sized(2, end * w, 'sizes');
        child(0);
        break;
      }
      case Kind.FixedList:
        validity();
        atLeast(child(0), 0, end * lay.listSize);
        break;
      case Kind.Struct:
        validity();
        for (let k = 0; k < nChildren; k++) atLeast(child(k), k, end);
        break;
      case Kind.SparseUnion: case Kind.DenseUnion:
        sized(0, end, 'type ids');
        if (lay.kind === Kind.DenseUnion) sized(1, end * 4, 'offsets');
        for (let k = 0; k < nChildren; k++) {
          const c = child(k);
          if (lay.kind === Kind.SparseUnion) atLeast(c, k, end);
        }
        break;
      case Kind.RunEnd: {
        const re = child(0);
        const values = child(1);
        if (check && re.length !== values.length) {
          throw invalid(`${path}.children[1].length`, `run ends (${re.length}) and values (${values.length}) differ in length`);
        }
        break;
      }
      default:
        validity();
        sized(1, end * lay.width, 'values');
    }
    const dictionary = schema.dictionary
      ? readDeviceTree(mem, dictPtr, schema.dictionary, `${path}.dictionary`, fetches, check, depth + 1, seen)
      : null;
    return new DeviceNode(schema, length, offset, nullCount, buffers, children, dictionary);
  } catch (e) {
    if (e instanceof ArrowDeviceError && e.path === '') throw prefixPath(e, path);
    throw e;
  }
}

/** Whether every buffer size in the tree is known. */
export function sizesKnown(node: DeviceArrayNode): boolean {
  return node.buffers.every((b) => b.size !== undefined) && node.children.every(sizesKnown) && (!node.dictionary || sizesKnown(node.dictionary));
}

/** Every buffer of the tree, depth first (children, then dictionary). */
export function* allBuffers(node: DeviceArrayNode): Generator<DeviceBuffer> {
  yield* node.buffers;
  for (const c of node.children) yield* allBuffers(c);
  if (node.dictionary) yield* allBuffers(node.dictionary);
}

/** The total of every known buffer size in the tree. */
export function treeByteLength(node: DeviceArrayNode): number {
  let n = 0;
  for (const b of allBuffers(node)) n += b.size ?? 0;
  return n;
}

/**
 * The `ArrayView` of a tree whose bytes were copied: `bytes(buffer)` gives
 * each non-NULL buffer's host copy.
 */
export function hostView(node: DeviceArrayNode, bytes: (b: DeviceBuffer) => Uint8Array): ArrayView {
  return {
    schema: node.schema,
    length: node.length,
    offset: node.offset,
    nullCount: node.nullCount,
    buffers: node.buffers.map((b) => (b.address === 0n ? null : bytes(b))),
    children: node.children.map((c) => hostView(c, bytes)),
    dictionary: node.dictionary ? hostView(node.dictionary, bytes) : null,
  };
}
