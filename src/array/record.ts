/**
 * The record of one import: what the reader (read.ts) found in an
 * `ArrowArray` tree, as a flat array of numbers. Per node, in pre-order
 * (the node, its children, its dictionary): its length, offset, null count
 * and buffer count, then each buffer's address and size in bytes (from its
 * start to the end of what the array uses). Also the place of a node (for
 * errors after the read), and the views of its buffers, made on first read.
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
/** Buffer `k` of the node at `p`: its address at `p + BUFFERS + 2k`, its size right after. */
export const BUFFERS = 4;

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
  /** See the file comment (LENGTH, OFFSET, NULL_COUNT, N_BUFFERS, BUFFERS). */
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
  const trail: number[] = [];
  const found = (function walk(pn: PlanNode, q: number): number {
    if (q === p) return -1;
    const nums = read.nums;
    let next = q + BUFFERS + 2 * nums[q + N_BUFFERS]!;
    for (let k = 0; k < pn.children.length; k++) {
      trail.push(k);
      const r = walk(pn.children[k]!, next);
      if (r < 0) return r;
      trail.pop();
      next = r;
    }
    if (pn.dictionary !== null) {
      trail.push(-1);
      const r = walk(pn.dictionary, next);
      if (r < 0) return r;
      trail.pop();
      next = r;
    }
    return next;
  })(read.plan.root, 0);
  return found < 0 ? pathOf(read.prefix, trail) : read.prefix;
}

/** The position after the subtree of the node at `p` (its children's and dictionary's records). */
export function skip(read: ImportRead, pn: PlanNode, p: number): number {
  const next = childPos(read, pn, p, pn.children.length);
  return pn.dictionary !== null ? skip(read, pn.dictionary, next) : next;
}

/** The record position of child `k` of the node at `p` (`k` = its child count: its dictionary's). */
export function childPos(read: ImportRead, pn: PlanNode, p: number, k: number): number {
  let next = p + BUFFERS + 2 * read.nums[p + N_BUFFERS]!;
  for (let j = 0; j < k; j++) next = skip(read, pn.children[j]!, next);
  return next;
}
