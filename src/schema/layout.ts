/**
 * The buffer layout of every type: one table, after nanoarrow's
 * `ArrowLayout`, that every reader and writer of arrays consults (the host
 * import, src/array/import.ts; the device tree reader, src/device/tree.ts;
 * the arrow-js conversion, src/array/arrowjs.ts; the export of arrow-js
 * data, ibid.), instead of each carrying its own switch over types.
 *
 * Columnar.rst, "Buffer listing for each layout", and CDataInterface.rst,
 * "Buffers": what an `ArrowArray` of a type holds, in order. A layout is
 * made once per `TypeInfo` (parametric types such as `w:16` or unions have
 * their own) and shared.
 */
import type { TypeInfo } from './format.js';

/** The physical kinds of array: the cases every reader and writer distinguishes. */
export const enum Kind {
  /** No buffers (a legacy validity slot is tolerated). */
  Null,
  /** validity, values bitmap. */
  Bool,
  /** validity, values of `width` bytes each (ints, floats, decimals, dates, times, timestamps, durations, intervals, fixed-size binary). */
  Fixed,
  /** validity, int32 offsets, data. */
  Binary,
  /** validity, int64 offsets, data. */
  LargeBinary,
  /** validity, 16-byte views, variadic data buffers, int64 variadic sizes. */
  View,
  /** validity, int32 offsets; one child (list and map). */
  List,
  /** validity, int64 offsets; one child. */
  LargeList,
  /** validity, offsets, sizes (`width` bytes each); one child. */
  ListView,
  /** validity; one child of `listSize` elements per element. */
  FixedList,
  /** validity; any number of children, each as long as the parent. */
  Struct,
  /** type ids; children as long as the parent. No validity (Columnar.rst, "Union Layout"). */
  SparseUnion,
  /** type ids, int32 offsets; children of any length. No validity. */
  DenseUnion,
  /** No buffers; run ends and values. */
  RunEnd,
}

export interface ArrayLayout {
  readonly kind: Kind;
  /** The buffers an array of the type has; for view types the minimum (variadic data buffers and the sizes buffer follow). */
  readonly nBuffers: number;
  readonly variadic: boolean;
  /** Whether buffer 0 is a validity bitmap. */
  readonly hasValidity: boolean;
  /** The children an array of the type has (undefined: as many as its schema, for structs). */
  readonly nChildren: number | undefined;
  /**
   * Bytes per element of the sized buffer: Fixed, the values; View, 16 (a
   * view); ListView, the offsets and sizes (4 or 8); 0 otherwise.
   */
  readonly width: number;
  /** The element size a JS view of the values buffer must be aligned to (Fixed). */
  readonly align: number;
  /** FixedList: the list size. */
  readonly listSize: number;
}

/** Also exported under its former name: what an array of a type must look like. */
export type PhysicalLayout = ArrayLayout;

function layout(kind: Kind, nBuffers: number, hasValidity: boolean, nChildren: number | undefined, width = 0, align = 0, listSize = 0, variadic = false): ArrayLayout {
  return Object.freeze({ kind, nBuffers, variadic, hasValidity, nChildren, width, align, listSize });
}

// One object per shape of the simple types: asked for once per node of every import, never allocated there.
const NULL = layout(Kind.Null, 0, false, 0);
const BOOL = layout(Kind.Bool, 2, true, 0);
const BINARY = layout(Kind.Binary, 3, true, 0);
const LARGE_BINARY = layout(Kind.LargeBinary, 3, true, 0);
const VIEW = layout(Kind.View, 3, true, 0, 16, 8, 0, true);
const LIST = layout(Kind.List, 2, true, 1);
const LARGE_LIST = layout(Kind.LargeList, 2, true, 1);
const LIST_VIEW = layout(Kind.ListView, 3, true, 1, 4, 4);
const LARGE_LIST_VIEW = layout(Kind.ListView, 3, true, 1, 8, 8);
const STRUCT = layout(Kind.Struct, 1, true, undefined);
const RUN_END = layout(Kind.RunEnd, 0, false, 2);

/** Fixed-width layouts by width and alignment, fixed-size lists by size: numbers as keys (a TypeInfo may be made per call). */
const fixedLayouts = new Map<number, ArrayLayout>();
const fixedLists = new Map<number, ArrayLayout>();
/** Union layouts, by their type (unions are rare, their layouts depend on every type id). */
const unions = new WeakMap<TypeInfo, ArrayLayout>();

/** The layout of an array of type `t` (made once per `TypeInfo`). */
export function layoutOf(t: TypeInfo): ArrayLayout {
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
    case 'fixed_list': {
      let l = fixedLists.get(t.size);
      if (l === undefined) fixedLists.set(t.size, (l = layout(Kind.FixedList, 1, true, 1, 0, 0, t.size)));
      return l;
    }
    case 'union': {
      let l = unions.get(t);
      if (l === undefined) {
        l = t.mode === 'dense'
          ? layout(Kind.DenseUnion, 2, false, t.typeIds.length, 4, 4)
          : layout(Kind.SparseUnion, 1, false, t.typeIds.length);
        unions.set(t, l);
      }
      return l;
    }
    default: {
      const width = fixedWidth(t);
      // Decimals and intervals are read by arrow-js as 32-bit words; fixed-size binary as bytes.
      const align = t.id === 'fixed_binary' ? 1 : t.id === 'decimal' || t.id === 'interval' ? 4 : Math.min(width, 8);
      const key = width * 16 + align;
      let l = fixedLayouts.get(key);
      if (l === undefined) fixedLayouts.set(key, (l = layout(Kind.Fixed, 2, true, 0, width, align)));
      return l;
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
