/**
 * `ArrayView`: an `ArrowArray` tree as plain JS, with each buffer as a byte
 * view. It is the library's common form between the C structs and arrow-js,
 * and the "plain view" users read for types arrow-js cannot represent (list
 * views, run-end encoded). Offsets mean what they mean in C: `offset` applies
 * to every buffer of this node, buffers start where the C pointers point.
 */
import type { SchemaNode } from '../schema/node.js';
import type { PlanNode } from './plan.js';
import { childrenAt, LENGTH, N_BUFFERS, nodeBuffer, NULL_COUNT, OFFSET, pathAt, type ImportRead } from './record.js';

/**
 * An `ArrowArray` tree as plain JS: each node's counts, and each buffer as a byte view, with every type
 * of the spec (list views and run-end encoded arrays too, which arrow-js lacks). What `importArrayView`
 * returns, `dataToView` makes of arrow-js data, and `exportArray` takes.
 */
export interface ArrayView {
  /** The type of this node; for a dictionary-encoded array, `schema.dictionary` is the values' type. */
  readonly schema: SchemaNode;
  /** The number of logical elements (`ArrowArray.length`). */
  readonly length: number;
  /** The logical offset into every buffer of this node (`ArrowArray.offset`), in elements. */
  readonly offset: number;
  /** -1 when unknown (the producer did not compute it). */
  readonly nullCount: number;
  /**
   * The buffers in C order (validity first where the layout has one), each a
   * view of the bytes from the buffer's start to the end of what this array
   * uses; null where the C pointer was NULL. For view types: validity, views,
   * each variadic data buffer, then the int64 variadic sizes buffer.
   */
  readonly buffers: readonly (Uint8Array | null)[];
  /** The child arrays, in the order of `schema.children`. */
  readonly children: readonly ArrayView[];
  /** The dictionary (the values) of a dictionary-encoded array; null otherwise. */
  readonly dictionary: ArrayView | null;
}

/**
 * The `ArrayView` of a node of an import (its record and position): its
 * buffers are viewed when `buffers` is first read (all of this node's at
 * once), or one at a time through `buffer(i)`; reads throw once the import
 * is released.
 */
export class ImportedView implements ArrayView {
  readonly schema: SchemaNode;
  readonly length: number;
  readonly offset: number;
  readonly nullCount: number;
  #cached: (Uint8Array | null)[] | undefined;

  constructor(
    /** The import's record: also its keep-alive token (see ImportRead). */
    readonly read: ImportRead,
    private readonly pn: PlanNode,
    /** The node's position in the record. */
    readonly at: number,
    readonly children: readonly ArrayView[],
    readonly dictionary: ArrayView | null,
  ) {
    const nums = read.nums;
    this.schema = pn.schema;
    this.length = nums[at + LENGTH]!;
    this.offset = nums[at + OFFSET]!;
    this.nullCount = nums[at + NULL_COUNT]!;
  }

  /** Every buffer of this node, viewed now if they were not; throws once the import is released. */
  get buffers(): readonly (Uint8Array | null)[] {
    const owner = this.read.owner;
    if (owner !== null && owner.isReleased) owner.check(pathAt(this.read, this.at), 'a buffer read');
    if (this.#cached === undefined) {
      const n = this.read.nums[this.at + N_BUFFERS]!;
      const out: (Uint8Array | null)[] = new Array(n);
      for (let i = 0; i < n; i++) out[i] = this.buffer(i);
      this.#cached = out;
    }
    return this.#cached;
  }

  /** Buffer `i`, viewed now if it was not; throws once the import is released. */
  buffer(i: number): Uint8Array | null {
    return nodeBuffer(this.read, this.pn, this.at, i);
  }
}

/** The `ArrayView` of the node at `p` of an import, and of its children and dictionary. */
export function viewOf(read: ImportRead, pn: PlanNode, p: number): ImportedView {
  const at = childrenAt(read, p);
  const children = pn.children.map((c, k) => viewOf(read, c, at[k]!));
  const dictionary = pn.dictionary === null ? null : viewOf(read, pn.dictionary, at[children.length]!);
  return new ImportedView(read, pn, p, children, dictionary);
}

/**
 * Reads bit `i` of a bitmap (LSB first, Columnar.rst "Validity bitmaps").
 *
 * @example
 * getBit(Uint8Array.of(0b0000_0101), 2); // true
 * getBit(Uint8Array.of(0b0000_0101), 1); // false
 */
export function getBit(bitmap: Uint8Array, i: number): boolean {
  return (bitmap[i >> 3]! & (1 << (i & 7))) !== 0;
}

/**
 * Whether element `i` (logical, offset applied) of `view` is valid. Unions and run-end encoded arrays
 * have no validity bitmap (Columnar.rst, "Union Layout", "Run-End Encoded Layout"): they read as
 * valid here, and their children say.
 *
 * @example
 * const view = importArrayView(arrayPtr, schemaPtr);
 * const nulls = Array.from({ length: view.length }, (_, i) => !isValid(view, i)).filter(Boolean).length;
 */
export function isValid(view: ArrayView, i: number): boolean {
  const t = view.schema.type.id;
  if (t === 'null') return false;
  if (t === 'union' || t === 'run_end_encoded') return true;
  const bm = view.buffers[0];
  if (!bm || view.nullCount === 0) return true;
  return getBit(bm, view.offset + i);
}
