/**
 * `ArrayView`: an `ArrowArray` tree as plain JS, with each buffer as a byte
 * view. It is the library's common form between the C structs and arrow-js,
 * and the "plain view" users read for types arrow-js cannot represent (list
 * views, run-end encoded). Offsets mean what they mean in C: `offset` applies
 * to every buffer of this node, buffers start where the C pointers point.
 */
import type { SchemaNode } from '../schema/node.js';

export interface ArrayView {
  /** The type of this node; for a dictionary-encoded array, `schema.dictionary` is the values' type. */
  readonly schema: SchemaNode;
  readonly length: number;
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
  readonly children: readonly ArrayView[];
  readonly dictionary: ArrayView | null;
}

/** Reads bit `i` of a bitmap (LSB first, Columnar.rst "Validity bitmaps"). */
export function getBit(bitmap: Uint8Array, i: number): boolean {
  return (bitmap[i >> 3]! & (1 << (i & 7))) !== 0;
}

/** Whether element `i` (logical, offset applied) of `view` is valid. Unions and run-end encoded arrays defer to children. */
export function isValid(view: ArrayView, i: number): boolean {
  const t = view.schema.type.id;
  if (t === 'null') return false;
  if (t === 'union' || t === 'run_end_encoded') return true;
  const bm = view.buffers[0];
  if (!bm || view.nullCount === 0) return true;
  return getBit(bm, view.offset + i);
}

/** The total byte size of every buffer in the tree (children and dictionaries included). */
export function viewByteLength(view: ArrayView): number {
  let n = 0;
  for (const b of view.buffers) n += b?.byteLength ?? 0;
  for (const c of view.children) n += viewByteLength(c);
  if (view.dictionary) n += viewByteLength(view.dictionary);
  return n;
}
