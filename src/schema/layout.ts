/**
 * The buffer layout of every type: the one table, after nanoarrow's
 * `ArrowLayout`, that decides what an array of a type holds. The import
 * plan (src/array/plan.ts), the reader (src/array/read.ts), the arrow-js
 * conversion and the export of arrow-js data (src/array/arrowjs.ts) and
 * `expand` (src/array/expand.ts) ask it; nothing else switches over types
 * to decide buffers.
 *
 * Columnar.rst, "Buffer listing for each layout", and CDataInterface.rst,
 * "Buffers": the buffers of an `ArrowArray` of a type, in order, each with
 * a role that says how its size follows from the array's offset and length
 * (or from values in another buffer), and the rule its children's lengths
 * follow. A layout is made once per `TypeInfo` and shared.
 */
import type { TypeInfo } from './format.js';

/** The physical kinds of array: what the arrow-js conversion distinguishes. */
export const enum Kind {
  Null,
  Bool,
  /** Fixed-width values (ints, floats, decimals, dates, times, timestamps, durations, intervals, fixed-size binary). */
  Fixed,
  Binary,
  LargeBinary,
  View,
  List,
  LargeList,
  ListView,
  FixedList,
  Struct,
  SparseUnion,
  DenseUnion,
  RunEnd,
}

/**
 * What a buffer holds, which decides its size in bytes for an array whose
 * offset + length is `end` (Columnar.rst, per layout).
 */
export const enum Role {
  /** Validity bitmap: ceil(end / 8) bytes; may be NULL when null_count is 0. */
  Validity,
  /** Values bitmap (bool): ceil(end / 8) bytes. */
  Bits,
  /** Fixed-width values: end * width bytes. */
  Fixed,
  /** Offsets of `width` bytes: (end + 1) * width bytes, NULL allowed when length is 0; the last sizes the data or the child. */
  Offsets,
  /** Variable-size data: as many bytes as the last offset says. */
  Data,
  /** 16-byte views: end * 16 bytes. */
  Views,
  /** One variadic data buffer of a view type: the size its entry in the variadic sizes says. */
  VariadicData,
  /** The int64 sizes of the variadic data buffers, last of a view type's buffers. */
  VariadicSizes,
  /** Union type ids: end bytes. */
  TypeIds,
  /** Dense union offsets: end * 4 bytes. */
  UnionOffsets,
  /** List view offsets or sizes: end * width bytes. */
  ViewRanges,
}

export interface BufferSpec {
  readonly role: Role;
  /** Bytes per element; 0 for bitmaps and data. */
  readonly width: number;
  /** The element size a JS view of the buffer must be aligned to. */
  readonly align: number;
  /** Its name in messages: `NULL offset buffer, but 12 bytes are needed`. */
  readonly what: string;
}

/** How long a node's children must be (checked at `default`). */
export const enum ChildRule {
  None,
  /** Each child at least offset + length (struct, sparse union). */
  Parent,
  /** The child at least (offset + length) * listSize (fixed-size list). */
  Multiple,
  /** The child at least the last offset (list, large list, map). */
  LastOffset,
  /** Any length (dense union, list view: their full checks look inside). */
  Free,
  /** Run ends and values of one length (run-end encoded). */
  RunEnds,
}

export interface ArrayLayout {
  readonly kind: Kind;
  /**
   * The buffers in C order. View types: validity, views and the variadic
   * sizes, between which come the variadic data buffers (`specAt`).
   */
  readonly buffers: readonly BufferSpec[];
  /** The buffers an array of the type has; for view types the minimum. */
  readonly nBuffers: number;
  readonly variadic: boolean;
  /** Whether buffer 0 is a validity bitmap. */
  readonly hasValidity: boolean;
  readonly children: ChildRule;
  /** Bytes per value of the sized buffer (Fixed, ListView, View); 0 otherwise. */
  readonly width: number;
  /** FixedList: the list size. */
  readonly listSize: number;
}

const spec = (role: Role, what: string, width = 0, align = 1): BufferSpec => Object.freeze({ role, width, align, what });

const VALIDITY = spec(Role.Validity, 'validity');
const OFFSETS32 = spec(Role.Offsets, 'offset', 4, 4);
const OFFSETS64 = spec(Role.Offsets, 'offset', 8, 8);
const DATA = spec(Role.Data, 'data');
/** A view type's variadic data buffer `k` (its name carries its index). */
const VARIADIC_DATA = spec(Role.VariadicData, 'variadic data');
const VARIADIC_SIZES = spec(Role.VariadicSizes, 'variadic sizes', 8, 8);

function layout(
  kind: Kind,
  buffers: BufferSpec[],
  children: ChildRule,
  opts: { width?: number; listSize?: number; variadic?: boolean } = {},
): ArrayLayout {
  return Object.freeze({
    kind,
    buffers: Object.freeze(buffers),
    nBuffers: buffers.length,
    variadic: opts.variadic ?? false,
    hasValidity: buffers[0]?.role === Role.Validity,
    children,
    width: opts.width ?? 0,
    listSize: opts.listSize ?? 0,
  });
}

// One object per shape of the simple types.
const NULL = layout(Kind.Null, [], ChildRule.None);
const BOOL = layout(Kind.Bool, [VALIDITY, spec(Role.Bits, 'values')], ChildRule.None);
const BINARY = layout(Kind.Binary, [VALIDITY, OFFSETS32, DATA], ChildRule.None);
const LARGE_BINARY = layout(Kind.LargeBinary, [VALIDITY, OFFSETS64, DATA], ChildRule.None);
const VIEW = layout(Kind.View, [VALIDITY, spec(Role.Views, 'views', 16, 8), VARIADIC_SIZES], ChildRule.None, { width: 16, variadic: true });
const LIST = layout(Kind.List, [VALIDITY, OFFSETS32], ChildRule.LastOffset);
const LARGE_LIST = layout(Kind.LargeList, [VALIDITY, OFFSETS64], ChildRule.LastOffset);
const listView = (w: number): ArrayLayout =>
  layout(Kind.ListView, [VALIDITY, spec(Role.ViewRanges, 'offsets', w, w), spec(Role.ViewRanges, 'sizes', w, w)], ChildRule.Free, { width: w });
const LIST_VIEW = listView(4);
const LARGE_LIST_VIEW = listView(8);
const STRUCT = layout(Kind.Struct, [VALIDITY], ChildRule.Parent);
const SPARSE = layout(Kind.SparseUnion, [spec(Role.TypeIds, 'type ids', 1, 1)], ChildRule.Parent);
const DENSE = layout(Kind.DenseUnion, [spec(Role.TypeIds, 'type ids', 1, 1), spec(Role.UnionOffsets, 'offsets', 4, 4)], ChildRule.Free, { width: 4 });
const RUN_END = layout(Kind.RunEnd, [], ChildRule.RunEnds);

/** Fixed-width layouts by width and alignment, fixed-size lists by size: the objects shared by equal types. */
const shared = new Map<string, ArrayLayout>();

/**
 * Where a `TypeInfo` keeps its layout once asked (a symbol-keyed property,
 * not enumerable: TypeInfo objects are immutable descriptions).
 */
const LAYOUT = Symbol('arrow-device.layout');
type WithLayout = { [LAYOUT]?: ArrayLayout };

/** The layout of an array of type `t`. */
export function layoutOf(t: TypeInfo): ArrayLayout {
  const l = (t as WithLayout)[LAYOUT];
  if (l !== undefined) return l;
  const made = makeLayout(t);
  // A frozen TypeInfo (one a caller made) is asked again each time.
  if (Object.isExtensible(t)) Object.defineProperty(t, LAYOUT, { value: made, enumerable: false });
  return made;
}

function sharedLayout(key: string, make: () => ArrayLayout): ArrayLayout {
  let l = shared.get(key);
  if (l === undefined) shared.set(key, (l = make()));
  return l;
}

function makeLayout(t: TypeInfo): ArrayLayout {
  switch (t.id) {
    case 'null': return NULL;
    case 'bool': return BOOL;
    case 'binary': case 'utf8': return BINARY;
    case 'large_binary': case 'large_utf8': return LARGE_BINARY;
    case 'binary_view': case 'utf8_view': return VIEW;
    case 'list': case 'map': return LIST;
    case 'large_list': return LARGE_LIST;
    case 'list_view': return LIST_VIEW;
    case 'large_list_view': return LARGE_LIST_VIEW;
    case 'struct': return STRUCT;
    case 'run_end_encoded': return RUN_END;
    case 'union': return t.mode === 'dense' ? DENSE : SPARSE;
    case 'fixed_list':
      return sharedLayout(`+w:${t.size}`, () => layout(Kind.FixedList, [VALIDITY], ChildRule.Multiple, { listSize: t.size }));
    default: {
      const width = fixedWidth(t);
      // Decimals and intervals are read by arrow-js as 32-bit words; fixed-size binary as bytes.
      const align = t.id === 'fixed_binary' ? 1 : t.id === 'decimal' || t.id === 'interval' ? 4 : Math.min(width, 8);
      return sharedLayout(`${width}/${align}`, () => layout(Kind.Fixed, [VALIDITY, spec(Role.Fixed, 'values', width, align)], ChildRule.None, { width }));
    }
  }
}

/** The byte width of one value of a fixed-width type. */
function fixedWidth(t: TypeInfo): number {
  switch (t.id) {
    case 'int': case 'float': case 'decimal': return t.bitWidth / 8;
    case 'fixed_binary': return t.byteWidth;
    case 'date': return t.unit === 'day' ? 4 : 8;
    case 'time': return t.unit === 's' || t.unit === 'ms' ? 4 : 8;
    case 'timestamp': case 'duration': return 8;
    case 'interval': return t.unit === 'month' ? 4 : t.unit === 'day_time' ? 8 : 16;
    default: throw new Error(`no fixed width for type "${t.id}"`);
  }
}

/** The spec of buffer `i` of an array of `nBuffers` buffers (view types: the variadic data buffers between views and sizes). */
export function specAt(l: ArrayLayout, i: number, nBuffers: number): BufferSpec {
  if (!l.variadic || i < 2) return l.buffers[i]!;
  return i === nBuffers - 1 ? VARIADIC_SIZES : VARIADIC_DATA;
}
