/**
 * `ArrayView` <-> arrow-js `Data`, for the views that are plain JS (the
 * arrow-js objects of imports are built in build.ts, over their records).
 *
 * arrow-js keeps a different offset convention from C: a `Data`'s `offset`
 * applies to its bitmaps (validity, and bool values) only; its values, value
 * offsets and type ids are already sliced. On export we normalise to C
 * offset 0: sliced buffers are already right, and a bitmap whose offset is a
 * multiple of 8 is a subarray; only a bitmap at another bit offset is
 * copied, shifted (counted in `accounting()`). Which arrow-js buffer fills
 * which C buffer follows the layout's roles (src/schema/layout.ts).
 */
import { Data, DataType, makeBuilder, Type, Vector, type Builder } from 'apache-arrow';
import { liveCounters } from '../memory/accounting.js';
import { nodeToType, type ToArrowOptions } from '../schema/arrowjs.js';
import { typeNodeOf, schemaNodeOf } from '../schema/export.js';
import { Kind, layoutOf } from '../schema/layout.js';
import type { SchemaNode } from '../schema/node.js';
import { dataFromView } from './build.js';
import type { ArrayView } from './view.js';

// --- import: ArrayView -> Data ---------------------------------------------------------

/**
 * An arrow-js `Data` of `type` over a plain `ArrayView` (zero-copy over its
 * buffers). `type` is the arrow-js type of `view.schema` (`nodeToType`).
 *
 * @example
 * const view = importArrayView(arrayPtr, schemaPtr);  // an int32 array
 * const data = viewToData(view, new Int32());         // its buffers, as arrow-js Data
 * new Vector([data]).get(0);
 */
export function viewToData(view: ArrayView, type: DataType, path = 'array', opts: ToArrowOptions = {}): Data {
  return dataFromView(view, type, path, opts.expand ?? false);
}

/**
 * The arrow-js `Data` of an `ArrayView`, with the type its schema gives.
 *
 * @example
 * const view = importArrayView(arrayPtr, schemaPtr);      // a list view: arrow-js has no such type
 * const data = viewToArrow(view, { expand: true });       // read as a list (a copy of what it needs)
 */
export function viewToArrow(view: ArrayView, opts: ToArrowOptions = {}, path = 'array'): Data {
  return viewToData(view, nodeToType(view.schema, 'schema', opts), path, opts);
}

// --- export: Data -> ArrayView -----------------------------------------------------------

/**
 * Bytes of a typed array (zero-copy); with `asIs`, the typed array itself,
 * for the export writer, which needs only its buffer, offset and length.
 */
function bytes(a: ArrayBufferView | null | undefined, asIs = false): Uint8Array | null {
  if (!a) return null;
  return a instanceof Uint8Array || asIs ? (a as Uint8Array) : new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/**
 * A bitmap starting at bit `offset`, re-based to bit 0: a subarray when the
 * offset is a multiple of 8, else a shifted copy.
 */
function rebaseBitmap(bitmap: Uint8Array, offset: number, length: number): Uint8Array {
  const nbytes = Math.ceil(length / 8);
  if (offset % 8 === 0) return bitmap.subarray(offset >> 3, (offset >> 3) + nbytes);
  const out = new Uint8Array(nbytes);
  for (let i = 0; i < length; i++) {
    const j = offset + i;
    if (bitmap[j >> 3]! & (1 << (j & 7))) out[i >> 3]! |= 1 << (i & 7);
  }
  liveCounters.copiedBytes += nbytes;
  return out;
}

/**
 * A Vector as one `Data`: its chunk when it has one (zero-copy); else a copy
 * made with arrow-js's builder, which for no chunks is an empty `Data` of the
 * type with every child and dictionary a nested type needs.
 */
function vectorData(v: Vector): Data {
  if (v.data.length === 1) return v.data[0]!;
  const b = makeBuilder({ type: v.type, nullValues: [null, undefined] }) as Builder;
  for (const x of v.toArray() as Iterable<unknown>) b.append(x);
  const d = b.finish().flush();
  liveCounters.copiedBytes += d.byteLength;
  return d;
}

/**
 * A child of arrow-js data as `Data`. arrow-js (21.x) builds the batch of a
 * table whose columns are all empty (`tableFromArrays({ id: new Int32Array(0) })`,
 * `new Table({ a: vector })`) with its one-argument `RecordBatch` constructor,
 * which stores the columns' `Vector`s as the struct's children where every
 * other batch holds `Data`; its own readers cope because a Vector has `type`
 * and `length` too. A zero-length array is valid everywhere (CDataInterface.rst,
 * "The ArrowArray structure": nothing requires length > 0), so the exporter takes
 * such a child as the one `Data` it stands for. Told apart by shape, not
 * `instanceof` (arrow-js's `Symbol.hasInstance` runs per child otherwise).
 */
function childData(c: Data | Vector): Data {
  return Array.isArray((c as Data).children) ? (c as Data) : vectorData(c as Vector);
}

/**
 * An `ArrayView` (C offset convention, offset 0) of arrow-js `data`, and
 * the schema node describing it. Buffers are views of the JS buffers.
 *
 * @example
 * const x = tableFromArrays({ x: Int32Array.of(1, 2, 3) }).getChild('x')!;
 * const view = dataToView(x.data[0]!);   // view.buffers[1]: the 12 bytes of the values
 * const ptr = exportArray(view);         // an ArrayView exports as arrow-js data does
 * freeArrowArray(ptr);
 */
export function dataToView(data: Data, schema?: SchemaNode): ArrayView {
  const node = schema ?? schemaNodeOf(data.type as DataType);
  return toView(data, node, false);
}

/**
 * `dataToView` for the export writer (src/array/export.ts) only: its
 * buffers may be any typed array over the bytes, not only `Uint8Array`s,
 * and its schema node is the type's (`typeNodeOf`: the writer reads only
 * the layout).
 */
export function dataToExportView(data: Data): ArrayView {
  return toView(data, typeNodeOf(data.type as DataType), true);
}

const NONE: readonly never[] = Object.freeze([]);
const EMPTY = new Uint8Array(0);

function toView(data: Data, node: SchemaNode, asIs: boolean): ArrayView {
  const N = data.length;
  const type = data.type as DataType;
  const nullCount = type.typeId === Type.Union ? 0 : type.typeId === Type.Null ? N : data.nullCount;
  const validity =
    nullCount > 0 && data.nullBitmap && data.nullBitmap.byteLength > 0 ? rebaseBitmap(data.nullBitmap, data.offset, N) : null;

  if (type.typeId === Type.Dictionary) {
    const dict = vectorData(data.dictionary!);
    return {
      schema: node,
      length: N,
      offset: 0,
      nullCount,
      buffers: [validity, bytes(data.values as ArrayBufferView, asIs)],
      children: NONE,
      dictionary: toView(dict, node.dictionary!, asIs),
    };
  }
  // The C buffers of each kind (schema/layout.ts gives their order; the reader checks every export
  // against it) from the arrow-js field holding each: an array literal per kind, no loop over roles.
  let buffers: (Uint8Array | null)[];
  switch (layoutOf(node.type).kind) {
    case Kind.Null: buffers = []; break;
    case Kind.Bool: buffers = [validity, rebaseBitmap((data.values as Uint8Array | undefined) ?? EMPTY, data.offset, N)]; break;
    case Kind.Binary: case Kind.LargeBinary: buffers = [validity, bytes(data.valueOffsets as ArrayBufferView, asIs), bytes(data.values as Uint8Array)]; break;
    case Kind.View: {
      const variadic = data.variadicBuffers.map((b) => bytes(b));
      const sizes = new BigInt64Array(variadic.map((b) => BigInt(b?.byteLength ?? 0)));
      buffers = [validity, bytes(data.values as Uint8Array), ...variadic, bytes(sizes)];
      break;
    }
    case Kind.List: case Kind.LargeList: buffers = [validity, bytes(data.valueOffsets as ArrayBufferView, asIs)]; break;
    case Kind.FixedList: case Kind.Struct: buffers = [validity]; break;
    case Kind.DenseUnion: buffers = [bytes(data.typeIds as ArrayBufferView, asIs), bytes(data.valueOffsets as ArrayBufferView, asIs)]; break;
    case Kind.SparseUnion: buffers = [bytes(data.typeIds as ArrayBufferView, asIs)]; break;
    default: buffers = [validity, bytes(data.values as ArrayBufferView, asIs)];
  }
  const n = data.children.length;
  let children: ArrayView[] = NONE as never;
  if (n > 0) {
    children = new Array(n);
    for (let i = 0; i < n; i++) children[i] = toView(childData(data.children[i]!), node.children[i]!, asIs);
  }
  return { schema: node, length: N, offset: 0, nullCount, buffers, children, dictionary: null };
}
