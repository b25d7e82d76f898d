/**
 * The record of one import: what the reader (read.ts) found in an
 * `ArrowArray` tree, as a flat array of numbers. Per node, in pre-order
 * (the node, its children, its dictionary): its length, offset, null count,
 * buffer count and the end of its subtree, then each buffer's address and
 * size in bytes (from its start to the end of what the array uses). Also a
 * node's children (`childrenAt`, the one way to them), its place (for errors
 * after the read), and the views of its buffers, made on first read.
 */
import { allocBytes, invalid } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory } from '../memory/memory.js';
import { specAt } from '../schema/layout.js';
import type { ImportOwner } from './owner.js';
import type { Plan, PlanNode } from './plan.js';

/** Where a node's fields are in the record, from its position `p`. */
export const LENGTH = 0;
export const OFFSET = 1;
export const NULL_COUNT = 2;
export const N_BUFFERS = 3;
/** The end of the node's subtree: the position one past its last descendant's record (its next sibling's). */
export const END = 4;
/** Buffer `k` of the node at `p`: its address at `p + BUFFERS + 2k`, its size right after. */
export const BUFFERS = 5;

/** A size not known yet: it depends on device values not read yet. */
export const UNKNOWN = -1;

/** Reads of device values that sizes and checks depend on, not done yet (read.ts `deferredBatch`). */
export const enum Deferred {
  /** The first and last offsets of buffer `i` of the node at `p`. */
  Offsets,
  /** The variadic sizes of the node at `p`. */
  Variadic,
}

/** One deferred read: what it reads and what it sizes. */
export interface DeferredRead {
  readonly kind: Deferred;
  readonly pn: PlanNode;
  /** The node's position in the record, and the buffer's index. */
  readonly p: number;
  readonly i: number;
  /** Lists: the child's position, once read (-1 before). */
  child: number;
  readonly path: string;
}

/**
 * One import's record: what the reader found, and the import's keep-alive
 * token (every lazy arrow-js `Data` and `ArrayView` of the import refers
 * to it; `ImportOwner.hold` registers it, so the producer's memory stays
 * while any of them can still make a view).
 */
export class ImportRead {
  /** See the file comment (LENGTH, OFFSET, NULL_COUNT, N_BUFFERS, END, BUFFERS). */
  readonly nums: number[] = [];
  /** How much of `nums` the reader has written. */
  length = 0;
  /** Views (or, with `copy`, copies) made so far, by the record index of the buffer's address. */
  views: Map<number, Uint8Array> | null = null;
  /** Device reads not done yet (validation `minimal`: done by `resolveDeferred`). */
  deferred: DeferredRead[] | null = null;
  /** Whether a buffer read on host memory has bytes (an import of only empty buffers holds nothing). */
  holds = false;
  /** The buffer slots the import's lazy arrow-js Data made, 5 per Data in the order the Data were made (build.ts). */
  slots: unknown[] | undefined = undefined;
  /** How many lazy Data were made over this record (build.ts). */
  nData = 0;
  /**
   * Whether the buffers will be viewed or copied into JS (every import but a
   * `DeviceArray`, which holds addresses): only then is a buffer JS cannot
   * hold refused here (a `DeviceArray` refuses it when copied).
   */
  viewed = true;
  /** Device addresses of 2^53 or more (which a number cannot hold exactly), by record index: kept exact for the `DeviceArray`. */
  exact: Map<number, bigint> | null = null;

  constructor(
    readonly plan: Plan,
    /** Null for a copy (its bytes are ours) and for a device read that keeps no owner. */
    readonly owner: ImportOwner | null,
    /** The memory the structs are in (null for a plain view's record, which reads no memory). */
    readonly mem: Memory | null,
    /** The root's place (`array`, `device_array.array`), or with `index` the list's (`arrays`). */
    private readonly base: string,
    readonly level: number,
    readonly copy: boolean,
    /** The array's index in a list of them (`importTable`'s), or -1: the place is `base[index]`, made only for an error. */
    private readonly index = -1,
  ) {
    // A tree plan's record has a size known in advance (view types and DAGs grow it as they are read).
    if (plan !== null && plan.recordSize > 0) this.nums = new Array<number>(plan.recordSize);
  }

  /** The root's place: `array`, `arrays[3]`, `device_array.array`. */
  get prefix(): string {
    return this.index < 0 ? this.base : `${this.base}[${this.index}]`;
  }
}

/** The place of the node reached from the root by `trail` (child indices, -1 for a dictionary). */
export function pathOf(prefix: string, trail: readonly number[]): string {
  let path = prefix;
  for (const k of trail) path += k < 0 ? '.dictionary' : `.children[${k}]`;
  return path;
}

// --- views of its buffers -------------------------------------------------------------------

const EMPTY = new Uint8Array(0);

/**
 * Buffer `at` (the record index of its address) of an import, from its
 * start to the end of what the array uses: null for a NULL buffer; viewed
 * now (zero-copy) unless a view or copy was made before (kept for the next
 * read unless `keep` is false: a lazy Data keeps what it made itself). Throws once the
 * import is released. `align`: the JS element size the view must be
 * aligned to (a wasm memory's views start at the buffer's address; a
 * misaligned one is copied, and counted). `node`: the record position of
 * the buffer's node, for the place of an error (-1: none).
 */
export function bufferView(read: ImportRead, at: number, align: number, node: number, keep = true): Uint8Array | null {
  const nums = read.nums;
  const addr = nums[at]!;
  if (addr === 0) return null;
  const size = nums[at + 1]!;
  if (size === 0) return EMPTY;
  const owner = read.owner;
  if (owner !== null && owner.isReleased) owner.check(bufferPlace(read, node, at), 'a buffer read');
  const made = read.views?.get(at);
  if (made !== undefined) return made;
  if (size === UNKNOWN) throw invalid(bufferPlace(read, node, at), 'a buffer size is unknown: resolve the sizes first');
  let v = owner!.view(addr, size);
  if (v.byteOffset % align !== 0) {
    const copy = allocBytes(size, bufferPlace(read, node, at));
    copy.set(v);
    v = copy;
    liveCounters.copiedBuffers++;
    liveCounters.copiedBytes += size;
  }
  if (keep) (read.views ??= new Map()).set(at, v);
  return v;
}

/** C buffer `k` of the node at `p` (plan node `pn`): `bufferView` of it, or null past the node's buffers. */
export function nodeBuffer(read: ImportRead, pn: PlanNode, p: number, k: number, keep = true): Uint8Array | null {
  const nb = read.nums[p + N_BUFFERS]!;
  if (k >= nb) return null;
  return bufferView(read, p + BUFFERS + 2 * k, specAt(pn.layout, k, nb).align, p, keep);
}

/** The place of the buffer at record index `at` of the node at `node` (-1: no place). */
function bufferPlace(read: ImportRead, node: number, at: number): string {
  return node < 0 ? '' : `${pathAt(read, node)}.buffers[${(at - node - BUFFERS) / 2}]`;
}

/** A copy of `read`'s record, for a copy of its bytes (`views`, filled by the caller) read through `plan`. */
export function recordCopy(read: ImportRead, plan: Plan = read.plan): ImportRead {
  const r = new ImportRead(plan, null, read.mem, read.prefix, read.level, true);
  for (let i = 0; i < read.length; i++) r.nums[i] = read.nums[i]!;
  r.length = read.length;
  r.exact = read.exact;
  return r;
}

/** The place of the node at record position `p` (for errors after the read). */
export function pathAt(read: ImportRead, p: number): string {
  let path = read.prefix;
  let pn = read.plan.root;
  let q = 0;
  while (q !== p) {
    // The child whose subtree holds `p`: the last that starts at or before it.
    const at = childrenAt(read, q);
    let k = at.length - 1;
    while (k >= 0 && at[k]! > p) k--;
    if (k < 0 || p >= read.nums[at[k]! + END]!) return read.prefix;
    if (k < pn.children.length) {
      path += `.children[${k}]`;
      pn = pn.children[k]!;
    } else {
      path += '.dictionary';
      pn = pn.dictionary!;
    }
    q = at[k]!;
  }
  return path;
}

const NO_CHILDREN: readonly number[] = Object.freeze([]);

/**
 * The record positions of the children of the node at `p`, in order, then of its dictionary where it has
 * one (at index `children.length` of its plan node): the first follows the node's buffers, each next one
 * starts where the one before ends (its END). The one way to a node's children in the record.
 */
export function childrenAt(read: ImportRead, p: number): readonly number[] {
  const nums = read.nums;
  const end = nums[p + END]!;
  let q = p + BUFFERS + 2 * nums[p + N_BUFFERS]!;
  if (q >= end) return NO_CHILDREN;
  const out: number[] = [];
  for (; q < end; q = nums[q + END]!) out.push(q);
  return out;
}

/** Calls `fn` with each node of the record (its plan node and position), in record order (pre-order). */
export function forEachNode(read: ImportRead, fn: (pn: PlanNode, p: number) => void): void {
  const walk = (pn: PlanNode, p: number): void => {
    fn(pn, p);
    const at = childrenAt(read, p);
    const kids = pn.children;
    for (let k = 0; k < kids.length; k++) walk(kids[k]!, at[k]!);
    if (pn.dictionary !== null) walk(pn.dictionary, at[kids.length]!);
  };
  walk(read.plan.root, 0);
}
