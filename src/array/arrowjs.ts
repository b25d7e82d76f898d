/**
 * `ArrayView` <-> arrow-js `Data`.
 *
 * arrow-js keeps a different offset convention from C: a `Data`'s `offset`
 * applies to its bitmaps (validity, and bool values) only; its values, value
 * offsets and type ids are already sliced (subarrays starting at the first
 * element), and children of structs, sparse unions and fixed-size lists are
 * sliced too. On import we slice the same way (zero-copy subarrays). On
 * export we normalise to C offset 0: sliced buffers are already right, and a
 * bitmap whose offset is a multiple of 8 is a subarray; only a bitmap at
 * another bit offset is copied, shifted (counted in `accounting()`).
 */
import {
  Data, DataType, Decimal, Dictionary, Field, FixedSizeBinary, Int32, Utf8, makeBuilder, makeData as arrowMakeData, Null, RecordBatch, Type, Vector, type Builder,
  Schema, Struct,
} from 'apache-arrow';
import { ArrowDeviceError, unsupported } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import { nodeToType, type ToArrowOptions } from '../schema/arrowjs.js';
import { typeToNode } from '../schema/export.js';
import type { SchemaNode } from '../schema/node.js';
import type { ArrayView } from './view.js';
import { ImportedView, UNSET } from './import.js';
import { sameOwnFields } from './same-object.js';
import { Kind, layoutOf } from '../schema/layout.js';
import type { ImportOwner } from './owner.js';
import { isDetached, isWasmMemoryBuffer } from '../memory/wasm.js';
import { ImportedData, ImportedRecordBatch } from './imported.js';
import { expandView, MAX_EXPANDED_ELEMENTS } from './expand.js';

type TypedArrayCtor =
  | Int8ArrayConstructor | Uint8ArrayConstructor | Int16ArrayConstructor | Uint16ArrayConstructor
  | Int32ArrayConstructor | Uint32ArrayConstructor | Float32ArrayConstructor | Float64ArrayConstructor
  | BigInt64ArrayConstructor | BigUint64ArrayConstructor;

type AnyTypedArray = InstanceType<TypedArrayCtor>;

/** A typed array over the bytes of `b` (zero-copy; `b` is aligned for `Ctor` by the import). */
function typed<C extends TypedArrayCtor>(Ctor: C, b: Uint8Array | null | undefined): InstanceType<C> {
  if (!b || b.byteLength === 0) return new Ctor(0) as InstanceType<C>;
  return new Ctor(b.buffer as ArrayBuffer, b.byteOffset, Math.floor(b.byteLength / Ctor.BYTES_PER_ELEMENT)) as InstanceType<C>;
}

const EMPTY = new Uint8Array(0);

// --- import: ArrayView -> Data ---------------------------------------------------------

/**
 * Whether `new RecordBatch(schema, data)` may be skipped for a batch whose
 * children all have its length: its constructor then only rebuilds the
 * schema (`schema.assign`, a clone of every field) and the struct `Data`
 * (a fresh struct type), which costs more than the rest of a small import.
 * Checked once against this arrow-js: the constructor must make nothing
 * but the three own properties set below.
 */
const BATCH_SHORTCUT = ((): boolean => {
  try {
    const f = new Field('x', new Null(), true);
    const schema = new Schema([f]);
    const rb = new RecordBatch(schema, arrowMakeData({ type: new Struct([f]), length: 0, children: [arrowMakeData({ type: new Null(), length: 0 })] }));
    return Object.keys(rb).join(',') === 'schema,data,_metadata' && rb.metadata instanceof Map && rb.metadata.size === 0;
  } catch {
    return false;
  }
})();

/** Schemas without repeated field names (arrow-js's `schema.assign` goes by name: keep its constructor for the others). */
const uniqueNames = new WeakMap<Schema, boolean>();
function hasUniqueNames(schema: Schema): boolean {
  let u = uniqueNames.get(schema);
  if (u === undefined) {
    u = new Set(schema.fields.map((f) => f.name)).size === schema.fields.length;
    uniqueNames.set(schema, u);
  }
  return u;
}

/**
 * `new RecordBatch(schema, structData())` for an import of `struct` (`new
 * Struct(schema.fields)`) whose columns are `children`, `N` rows: the same
 * batch (the schema given, a struct `Data` of `struct` over the children,
 * no validity, empty metadata), made without the constructor's rebuilding
 * where that is all it would do, and without the struct's own `Data`
 * (`structData`, made only when the constructor is needed).
 */
export function makeBatch(schema: Schema, struct: Struct, children: Data[], N: number, structData: () => Data<Struct>): RecordBatch {
  // Repeated field names take the shortcut too: there the constructor's rebuilding by name is a
  // known arrow-js bug (gold case duplicate_fieldnames: an int8 column reported as int32).
  let same = BATCH_SHORTCUT && children.length === schema.fields.length;
  for (let i = 0; same && i < children.length; i++) same = children[i]!.length === N;
  if (!same) {
    const b = new ImportedRecordBatch(schema, structData());
    // Keep the schema as imported where the constructor rebuilt it by name.
    if (!hasUniqueNames(schema) && b.data.children.length === schema.fields.length) (b as { schema: Schema }).schema = schema;
    return b;
  }
  const b = Object.create(ImportedRecordBatch.prototype) as { schema: Schema; data: Data<Struct>; _metadata: Map<string, string> };
  b.schema = schema;
  b.data = newBatchData(struct, N, children);
  b._metadata = new Map();
  return b as unknown as RecordBatch;
}

/** The (empty) validity of a batch's struct Data: one array for every batch (arrow-js never writes it). */
const EMPTY_BITMAP = new Uint8Array(0);

/**
 * arrow-js's `stride` of a type (its `strideForType`, not exported), by
 * type object: asked of a `Data` arrow-js makes, once per type (an import's
 * types are its plan's, the same objects batch after batch).
 */
const strides = new WeakMap<DataType, number>();
function strideOf(type: DataType): number {
  let s = strides.get(type);
  if (s === undefined) {
    s = new Data(type, 0, 0, 0).stride;
    strides.set(type, s);
  }
  return s;
}

/**
 * A batch's struct `Data` as `new Data(struct, 0, N, 0, [, , EMPTY_BITMAP],
 * children)` makes it, its fields stored directly: the constructor's
 * clamping is a no-op on an import's integers and its `strideForType` reads
 * `type.typeId` through a getter that is megamorphic in a program of several
 * types (the constructor and strideForType were 3.6% of a 1-row, 1-column
 * import). `FAST_BATCH_DATA` checks once, against this arrow-js, that both
 * make the same object; otherwise the constructor is used.
 */
interface BatchDataFields {
  type: DataType;
  children: Data[];
  dictionary: undefined;
  offset: number;
  length: number;
  _nullCount: number;
  stride: number;
  nullBitmap: Uint8Array;
  variadicBuffers: Uint8Array[];
}
function FastBatchData(this: BatchDataFields, struct: Struct, N: number, children: Data[]): void {
  this.type = struct;
  this.children = children;
  this.dictionary = undefined;
  this.offset = 0;
  this.length = N;
  this._nullCount = 0;
  this.stride = strideOf(struct);
  this.nullBitmap = EMPTY_BITMAP;
  this.variadicBuffers = [];
}
FastBatchData.prototype = Data.prototype;
type BatchDataCtor = new (struct: Struct, N: number, children: Data[]) => Data<Struct>;

function classBatchData(struct: Struct, N: number, children: Data[]): Data<Struct> {
  return new Data(struct, 0, N, 0, [undefined, undefined, EMPTY_BITMAP] as never, children) as Data<Struct>;
}

/** Whether `FastBatchData` makes what the constructor makes: the same own properties, in order, with the same values. */
const FAST_BATCH_DATA = ((): boolean => {
  try {
    const f = new Field('x', new Int32(), true);
    const struct = new Struct([f]);
    const children = [arrowMakeData({ type: new Int32(), length: 2, data: new Int32Array(2) })] as Data[];
    const slow = classBatchData(struct, 2, children);
    const fast = new (FastBatchData as unknown as BatchDataCtor)(struct, 2, children);
    // variadicBuffers is a fresh empty array in each; the children must be the array given.
    return sameOwnFields(slow, fast) && slow.children === children && fast.children === children;
  } catch {
    return false;
  }
})();
const newBatchData: (struct: Struct, N: number, children: Data[]) => Data<Struct> = FAST_BATCH_DATA
  ? (struct, N, children) => new (FastBatchData as unknown as BatchDataCtor)(struct, N, children)
  : classBatchData;

/**
 * How a node's arrow-js buffers are made from its C buffers, decided once
 * per node at build time (a small integer instead of a closure per buffer:
 * a batch of 100 columns made 800 closures per import).
 */
const enum Form {
  /** Validity only (struct, fixed-size list), or nothing (null). */
  None,
  /** bool: the values bitmap as is. */
  Bits,
  /** Fixed width: values subarray by `stride` elements of the type's ArrayType. */
  Fixed,
  /** binary/utf8, list, map: int32 offsets (+ data for binary). */
  Offsets32,
  /** large binary/utf8, large list: int64 offsets (+ data). */
  Offsets64,
  /** binary_view/utf8_view: 16-byte views and variadic buffers. */
  Views,
  /** Sparse union: type ids. */
  Sparse,
  /** Dense union: type ids and int32 offsets. */
  Dense,
  /** Dictionary indices of the index type's ArrayType. */
  Indices,
  /** Buffers given by thunks (a conversion that copied: 64-bit indices narrowed). */
  Parts,
}

/** Thunks for the buffers of an arrow-js `Data` made by a conversion (Form.Parts). */
interface Parts {
  valueOffsets?: () => ArrayBufferView;
  values?: () => ArrayBufferView;
  nullBitmap?: () => Uint8Array;
  typeIds?: () => Int8Array;
  variadicBuffers?: () => Uint8Array[];
}


/**
 * What a `LazyData` makes its buffers from, and the buffers made so far
 * (its slots are the cache). An import's node is its first Data's state
 * (`ImportedView` has these fields); a `LazyState` serves any other.
 */
interface DataState {
  valueOffsets: unknown;
  values: unknown;
  nullBitmap: unknown;
  typeIds: unknown;
  variadicBuffers: unknown;
  wasm: { [K in LazyKey]?: ArrayBufferView[] } | undefined;
  readonly view: ArrayView;
  readonly owner: ImportOwner | null;
  readonly form: Form;
  readonly hasBitmap: boolean;
  readonly stride: number;
  readonly Ctor: TypedArrayCtor | null;
  readonly parts: Parts | null;
}

/** A `DataState` of its own (a view not imported, or a second Data over an imported node). */
class LazyState implements DataState {
  valueOffsets: unknown = UNSET;
  values: unknown = UNSET;
  nullBitmap: unknown = UNSET;
  typeIds: unknown = UNSET;
  variadicBuffers: unknown = UNSET;
  /** The wasm-memory views of each slot read, checked for detachment on every read; absent for native imports. */
  wasm: { [K in LazyKey]?: ArrayBufferView[] } | undefined = undefined;
  constructor(
    /**
     * The import this Data reads, kept for the Data's whole life: it holds the
     * import's keep-alive token, so the producer's memory stays while the Data
     * is reachable even after every buffer was read (on wasm the typed arrays
     * share the module's ArrayBuffer and say nothing about the import).
     */
    readonly view: ArrayView,
    /** The import's owner (null for a copy, or a view not imported): checked on every buffer read. */
    readonly owner: ImportOwner | null,
    readonly form: Form,
    /** Whether the validity bitmap is used (a null count and a bitmap present). */
    readonly hasBitmap: boolean,
    /** Fixed width: elements of the ArrayType per value; Indices/Fixed: the ArrayType. */
    readonly stride: number,
    readonly Ctor: TypedArrayCtor | null,
    readonly parts: Parts | null,
  ) {}
}

const STATE = Symbol('arrow-device.lazy');
/**
 * The empty array every leaf `Data` of an import shares for its children
 * and variadic buffers, and passes as its buffers (arrow-js reads them
 * only): an allocation saved per node. Frozen, so that a write, which
 * arrow-js never makes, could not reach other imports.
 */
const NONE: readonly never[] = Object.freeze([]);
const LAZY_KEYS = ['valueOffsets', 'values', 'nullBitmap', 'typeIds', 'variadicBuffers'] as const;
type LazyKey = (typeof LAZY_KEYS)[number];

/** Buffer `i` of `view` (viewed now if it was not): an import's checks its owner first. */
function bufOf(view: ArrayView, i: number): Uint8Array | null {
  return view instanceof ImportedView ? view.buffer(i) : (view.buffers[i] ?? null);
}

/** Makes slot `key` of a Data from its state, in arrow-js's slicing convention. */
function makeSlot(st: DataState, key: LazyKey, O: number, N: number): unknown {
  const view = st.view;
  if (key === 'nullBitmap') return st.hasBitmap ? bufOf(view, 0)! : EMPTY;
  switch (st.form) {
    case Form.Bits:
      return key === 'values' ? (bufOf(view, 1) ?? EMPTY) : undefined;
    case Form.Fixed:
      return key === 'values' ? typed(st.Ctor!, bufOf(view, 1)).subarray(O * st.stride, (O + N) * st.stride) : undefined;
    case Form.Indices:
      return key === 'values' ? typed(st.Ctor!, bufOf(view, 1)).subarray(O, O + N) : undefined;
    case Form.Offsets32:
      if (key === 'valueOffsets') {
        const o = typed(Int32Array, bufOf(view, 1)).subarray(O, O + N + 1);
        return o.length ? o : new Int32Array(1);
      }
      // binary/utf8 have their data in buffer 2; lists and maps have none.
      return key === 'values' && view.schema.children.length === 0 ? (bufOf(view, 2) ?? EMPTY) : undefined;
    case Form.Offsets64:
      if (key === 'valueOffsets') {
        const o = typed(BigInt64Array, bufOf(view, 1)).subarray(O, O + N + 1);
        return o.length ? o : new BigInt64Array(1);
      }
      return key === 'values' && view.schema.children.length === 0 ? (bufOf(view, 2) ?? EMPTY) : undefined;
    case Form.Views:
      if (key === 'values') return (bufOf(view, 1) ?? EMPTY).subarray(O * 16, (O + N) * 16);
      if (key === 'variadicBuffers') {
        const n = (view instanceof ImportedView ? view.raw.length : view.buffers.length) - 3;
        const out: Uint8Array[] = new Array(n);
        for (let k = 0; k < n; k++) out[k] = bufOf(view, 2 + k) ?? EMPTY;
        return out;
      }
      return undefined;
    case Form.Sparse:
      return key === 'typeIds' ? typed(Int8Array, bufOf(view, 0)).subarray(O, O + N) : undefined;
    case Form.Dense:
      if (key === 'typeIds') return typed(Int8Array, bufOf(view, 0)).subarray(O, O + N);
      return key === 'valueOffsets' ? typed(Int32Array, bufOf(view, 1)).subarray(O, O + N) : undefined;
    case Form.Parts: {
      const thunk = st.parts![key];
      return thunk ? thunk() : undefined;
    }
    default:
      return undefined;
  }
}

/**
 * A `Data` whose buffers are made on first read, by prototype getters that
 * make the slot from the node's `LazyState` (which views the producer's
 * buffer) and cache it. The getters stay for the Data's whole life: every
 * read of a buffer through arrow-js (`vector.get(i)` reads `data.values`
 * each time) first checks that the import is not released, so a released
 * batch throws an error that says why instead of reading detached (empty)
 * buffers. Building arrow-js objects over an import so views nothing, and
 * costs no per-instance property definitions.
 */
class LazyData extends ImportedData {
  declare [STATE]: DataState;
  constructor(st: DataState, type: DataType, O: number, N: number, nullCount: number, children: Data[], dictionary?: Vector) {
    super(type, O, N, nullCount, NONE as never, children, dictionary, NONE as never);
    // Whatever the Data constructor stored through the setters (variadicBuffers = []) was dropped:
    // the state makes it. The getters read only this one own field.
    this[STATE] = st;
  }
}

/**
 * A `LazyData` of a view type, whose variadic buffers are lazy too. Only
 * this class has the `variadicBuffers` accessor: on the others the Data
 * constructor's `variadicBuffers = []` stays a plain property (an accessor
 * would turn it into a property definition per node).
 */
class LazyViewData extends LazyData {}


/**
 * The fields the Data constructor stores for a lazy node, stored directly:
 * its argument clamping is a no-op on an import's integers, it sets no
 * buffer (it is given none), and its `strideForType` call cost a tenth of
 * a small import (a megamorphic `typeId` read) where a per-type cache costs
 * a lookup. `FAST_LAZY` below checks once, against this arrow-js, that
 * this makes what the constructor makes.
 */
interface LazyFields {
  type: DataType;
  children: Data[];
  dictionary: Vector | undefined;
  offset: number;
  length: number;
  _nullCount: number;
  stride: number;
  variadicBuffers?: unknown;
  [STATE]: DataState;
}
function FastLazyData(this: LazyFields, st: DataState, type: DataType, O: number, N: number, nullCount: number, children: Data[], dictionary: Vector | undefined): void {
  this.type = type;
  this.children = children;
  this.dictionary = dictionary;
  this.offset = O;
  this.length = N;
  this._nullCount = nullCount;
  this.stride = strideOf(type);
  this.variadicBuffers = NONE;
  this[STATE] = st;
}
FastLazyData.prototype = LazyData.prototype;
type LazyCtor = new (st: DataState, type: DataType, O: number, N: number, nullCount: number, children: Data[], dictionary?: Vector) => LazyData;

/**
 * Whether `FastLazyData` makes the same object as `new LazyData`: the same
 * own properties in the same order with the same values, for a type of
 * each stride rule. Otherwise (another arrow-js) the constructor is used.
 */
const FAST_LAZY = ((): boolean => {
  try {
    const st = new LazyState({ schema: null as never, length: 3, offset: 1, nullCount: 0, buffers: [], children: [], dictionary: null }, null, Form.None, false, 1, null, null);
    for (const type of [new Int32(), new Decimal(2, 38, 128), new FixedSizeBinary(5), new Utf8()] as DataType[]) {
      const slow = new LazyData(st, type, 1, 3, -1, NONE as never, undefined);
      const fast = new (FastLazyData as unknown as LazyCtor)(st, type, 1, 3, -1, NONE as never, undefined);
      if (!sameOwnFields(slow, fast)) return false;
    }
    return true;
  } catch {
    return false;
  }
})();
const NewLazyData: LazyCtor = FAST_LAZY ? (FastLazyData as unknown as LazyCtor) : LazyData;

/** The views in a buffer slot's value that are of a wasm memory (`variadicBuffers` holds several). */
function wasmViews(value: unknown): ArrayBufferView[] {
  const views = Array.isArray(value) ? value : [value];
  return views.filter((v): v is ArrayBufferView => ArrayBuffer.isView(v) && isWasmMemoryBuffer(v.buffer));
}

function wasmDetached(key: string): ArrowDeviceError {
  return new ArrowDeviceError(
    'memory',
    key,
    "this buffer was viewed in a WebAssembly module's memory before the memory grew, which detached the view; " +
      'read the data after the module is done growing its memory, or import with { copy: true }',
  );
}

for (const key of LAZY_KEYS) {
  Object.defineProperty(key === 'variadicBuffers' ? LazyViewData.prototype : LazyData.prototype, key, {
    configurable: true,
    // The hot path (arrow-js reads `data.values` on every get(i)): one own field, one branch for
    // the release check, one for wasm memory.
    get(this: LazyData) {
      const st = this[STATE];
      // Read by the Data constructor itself, before the state exists.
      if (st === undefined) return undefined;
      const owner = st.owner;
      if (owner !== null && owner.isReleased) owner.check((st.view as ImportedView).path, 'a read');
      let value = st[key];
      if (value === UNSET) {
        value = makeSlot(st, key, this.offset, this.length);
        st[key] = value;
        const views = wasmViews(value);
        if (views.length > 0) (st.wasm ??= {})[key] = views;
      }
      // A view of wasm memory is detached when the module's memory grows, and a detached typed
      // array reads as empty (length 0, every index undefined): arrow-js would return wrong values
      // without a word. Such a slot is checked on each read (native views cost nothing here).
      const wasm = st.wasm;
      if (wasm !== undefined) {
        const views = wasm[key];
        if (views !== undefined) for (const v of views) if (isDetached(v)) throw wasmDetached(key);
      }
      return value;
    },
    set(this: LazyData, value: unknown) {
      // Called by the Data constructor before the state exists: the constructor resets it after.
      const st = this[STATE];
      if (st !== undefined) st[key] = value;
    },
  });
}

/**
 * A `Data` of `type` over `view`: lazy over an import (buffers made on
 * first read), made now for any other view.
 */
function makeData(
  view: ArrayView,
  type: DataType,
  form: Form,
  hasBitmap: boolean,
  stride: number,
  Ctor: TypedArrayCtor | null,
  parts: Parts | null,
  children: Data[] = NONE as never,
  dictionary?: Vector,
): Data {
  const { offset: O, length: N } = view;
  const nullCount = form === Form.Sparse || form === Form.Dense ? 0 : hasBitmap ? view.nullCount : 0;
  const imported = view instanceof ImportedView;
  let st: DataState;
  if (imported && view.form === -1) {
    // The node is its own (first) Data's state.
    view.form = form;
    view.hasBitmap = hasBitmap;
    view.stride = stride;
    view.Ctor = Ctor;
    view.parts = parts;
    st = view as unknown as DataState;
  } else {
    st = new LazyState(view, imported ? view.owner : null, form, hasBitmap, stride, Ctor, parts);
  }
  if (imported) {
    return form === Form.Views
      ? new LazyViewData(st, type, O, N, nullCount, children, dictionary)
      : new NewLazyData(st, type, O, N, nullCount, children, dictionary);
  }
  const slot = (k: LazyKey): unknown => makeSlot(st, k, O, N);
  const b = [slot('valueOffsets'), slot('values'), slot('nullBitmap'), slot('typeIds')];
  return new Data(type, O, N, nullCount, b as never, children, dictionary, (slot('variadicBuffers') as Uint8Array[] | undefined) ?? []);
}

/** `data.slice(O, N)` unless that is the whole of it (slicing views every buffer of a lazy child). */
function sliceIf(data: Data, O: number, N: number): Data {
  return O === 0 && N === data.length ? data : data.slice(O, N);
}

/**
 * The place of child `i` of `view` (at `path`): an imported child already
 * names it (the importer built the same string), so a batch builds none.
 */
function childPath(view: ArrayView, i: number, path: string): string {
  const kid = view.children[i];
  return kid instanceof ImportedView ? kid.path : `${path}.children[${i}]`;
}

/** The children of a struct (or sparse union) `view`, each sliced to the parent's offset and length. */
function slicedChildren(view: ArrayView, type: DataType, path: string, opts: ToArrowOptions): Data[] {
  const { offset: O, length: N } = view;
  const kids = view.children;
  const out: Data[] = new Array(kids.length);
  for (let i = 0; i < kids.length; i++) out[i] = sliceIf(viewToData(kids[i]!, (type.children[i] as Field).type, childPath(view, i, path), opts), O, N);
  return out;
}

/** Whether `view`'s validity bitmap is used: a null count, and a bitmap present. */
function bitmapUsed(view: ArrayView): boolean {
  return view.nullCount !== 0 && (view instanceof ImportedView ? view.present(0) : (view.buffers[0]?.byteLength ?? 0) > 0);
}

/** An arrow-js `Data` of `type` over `view` (zero-copy). `type` comes from `nodeToType(view.schema)`. */
export function viewToData(view: ArrayView, type: DataType, path = 'array', opts: ToArrowOptions = {}): Data {
  const { offset: O, length: N } = view;
  const t = view.schema.type;
  const hasBitmap = bitmapUsed(view);

  if (view.schema.dictionary) {
    const dict = viewToData(view.dictionary!, (type as Dictionary).dictionary, `${path}.dictionary`, opts);
    if (t.id === 'int' && t.bitWidth === 64) {
      // 64-bit indices narrowed to int32 (nodeToType asks for it only under `expand`): a copy, checked.
      const wide = typed(t.signed ? BigInt64Array : BigUint64Array, bufOf(view, 1)).subarray(O, O + N);
      const out = new Int32Array(N);
      for (let k = 0; k < N; k++) {
        const x = wide[k]!;
        if (x > 2147483647n || x < 0n) {
          const valid = !hasBitmap || (bufOf(view, 0)![(O + k) >> 3]! & (1 << ((O + k) & 7))) !== 0;
          if (valid) throw unsupported(`${path}.buffers[1]`, `dictionary index ${x} at ${O + k} does not fit the int32 that { expand: true } narrows 64-bit indices to`);
          continue; // a null slot's index is never read
        }
        out[k] = Number(x);
      }
      liveCounters.copiedBytes += out.byteLength;
      return makeData(view, type, Form.Parts, hasBitmap, 0, null, { values: () => out }, [], new Vector([dict]));
    }
    const Ctor = (type as Dictionary).indices.ArrayType as TypedArrayCtor;
    return makeData(view, type, Form.Indices, hasBitmap, 1, Ctor, null, [], new Vector([dict]));
  }

  const lay = layoutOf(t);
  switch (lay.kind) {
    case Kind.Null:
      return new Data(new Null(), O, N, N);
    case Kind.Bool:
      return makeData(view, type, Form.Bits, hasBitmap, 0, null, null);
    case Kind.Binary:
      return makeData(view, type, Form.Offsets32, hasBitmap, 0, null, null);
    case Kind.LargeBinary:
      return makeData(view, type, Form.Offsets64, hasBitmap, 0, null, null);
    case Kind.View:
      return makeData(view, type, Form.Views, hasBitmap, 0, null, null);
    case Kind.List: case Kind.LargeList: {
      const child = viewToData(view.children[0]!, (type.children[0] as Field).type, childPath(view, 0, path), opts);
      return makeData(view, type, lay.kind === Kind.LargeList ? Form.Offsets64 : Form.Offsets32, hasBitmap, 0, null, null, [child]);
    }
    case Kind.FixedList: {
      const size = lay.listSize;
      const child = viewToData(view.children[0]!, (type.children[0] as Field).type, childPath(view, 0, path), opts);
      return makeData(view, type, Form.None, hasBitmap, 0, null, null, [sliceIf(child, O * size, N * size)]);
    }
    case Kind.Struct:
      return makeData(view, type, Form.None, hasBitmap, 0, null, null, slicedChildren(view, type, path, opts));
    case Kind.SparseUnion:
      return makeData(view, type, Form.Sparse, false, 0, null, null, slicedChildren(view, type, path, opts));
    case Kind.DenseUnion: {
      const kids = view.children.map((c, i) => viewToData(c, (type.children[i] as Field).type, childPath(view, i, path), opts));
      return makeData(view, type, Form.Dense, false, 0, null, null, kids);
    }
    case Kind.ListView:
      if (!opts.expand) throw unsupported(`${path}`, `arrow-js cannot represent "${view.schema.format}"; pass { expand: true } or use the ArrayView`);
      return listViewToList(view, type, path, opts);
    case Kind.RunEnd:
      if (!opts.expand) throw unsupported(`${path}`, `arrow-js cannot represent "+r"; pass { expand: true } or use the ArrayView`);
      return expandRunEnds(view, type, path, opts);
    default: {
      // Fixed-width types: arrow-js slices their values by `stride` elements of `ArrayType`.
      const Ctor = type.ArrayType as TypedArrayCtor;
      return makeData(view, type, Form.Fixed, hasBitmap, lay.width / Ctor.BYTES_PER_ELEMENT, Ctor, null);
    }
  }
}

/**
 * The arrow-js `RecordBatch` of a struct `view` with the plan's schema: the
 * batch's columns are the struct's children, sliced to its offset and
 * length (`makeBatch`). The struct's own `Data` is made only where
 * arrow-js's constructor needs it.
 */
export function viewToBatch(view: ArrayView, plan: { readonly arrow: Schema; readonly struct: Struct }, path: string, opts: ToArrowOptions): RecordBatch {
  const children = slicedChildren(view, plan.struct, path, opts);
  return makeBatch(plan.arrow, plan.struct, children, view.length, () => viewToData(view, plan.struct, path, opts) as Data<Struct>);
}

/** Builds `type` from a list of values with arrow-js's builders (a copy, on request only). */
function build(type: DataType, values: Iterable<unknown>): Data {
  const b = makeBuilder({ type, nullValues: [null, undefined] }) as Builder;
  for (const v of values) b.append(v);
  const d = b.finish().flush();
  liveCounters.copiedBytes += d.byteLength;
  return d;
}

export { MAX_EXPANDED_ELEMENTS };

function checkExpansion(count: number, path: string, what: string): void {
  if (count > MAX_EXPANDED_ELEMENTS) {
    throw unsupported(path, `expanding ${what} would build ${count} elements, more than the ${MAX_EXPANDED_ELEMENTS} { expand: true } builds`);
  }
}

/**
 * Runs an expansion: an error other than ours (none is expected: the
 * expansion copies bytes, src/array/expand.ts) comes out as a typed error
 * at `path`, so every error of an import is an ArrowDeviceError.
 */
function expanding(path: string, fn: () => Data): Data {
  try {
    return fn();
  } catch (e) {
    if (e instanceof ArrowDeviceError) throw e;
    throw new ArrowDeviceError('unsupported', path, `arrow-js cannot expand this array: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

/** Run-end encoded -> its values type, each run repeated (the nearest arrow-js type): bytes taken, see expand.ts. */
function expandRunEnds(view: ArrayView, type: DataType, path: string, opts: ToArrowOptions): Data {
  checkExpansion(view.length, path, 'this run-end encoded array');
  return expanding(path, () => viewToData(expandView(view, path), type, path, opts));
}

/** List view -> list with the same elements (the nearest arrow-js type): bytes taken, see expand.ts. */
function listViewToList(view: ArrayView, type: DataType, path: string, opts: ToArrowOptions): Data {
  return expanding(path, () => viewToData(expandView(view, path), type, path, opts));
}

/** The arrow-js `Data` of an `ArrayView`, with the type its schema gives. */
export function viewToArrow(view: ArrayView, opts: ToArrowOptions = {}, path = 'array'): Data {
  return viewToData(view, nodeToType(view.schema, 'schema', opts), path, opts);
}

// --- export: Data -> ArrayView -----------------------------------------------------------

/**
 * Bytes of a typed array (zero-copy); with `asIs`, the typed array itself,
 * for the export writer, which needs only its buffer, offset and length
 * (a byte view per buffer made nothing but garbage there).
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

/** Concatenates a dictionary Vector of several chunks (a copy; one chunk is zero-copy). */
function dictionaryData(v: Vector): Data {
  if (v.data.length === 1) return v.data[0]!;
  return build(v.type, v.toArray() as Iterable<unknown>);
}

/**
 * An `ArrayView` (C offset convention, offset 0) of arrow-js `data`, and
 * the schema node describing it. Buffers are views of the JS buffers.
 */
export function dataToView(data: Data, schema?: SchemaNode): ArrayView {
  const node = schema ?? typeToNode(data.type, '', true, null);
  return toView(data, node, false);
}

/**
 * `dataToView` for the export writer (src/array/export.ts) only: its
 * buffers may be any typed array over the bytes, not only `Uint8Array`s.
 */
export function dataToExportView(data: Data, schema?: SchemaNode): ArrayView {
  const node = schema ?? typeToNode(data.type, '', true, null);
  return toView(data, node, true);
}

/** The views of `data`'s children (a loop: a closure per node was most of a small export's garbage). */
function childViews(data: Data, node: SchemaNode, asIs: boolean): ArrayView[] {
  const n = data.children.length;
  const out: ArrayView[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = toView(data.children[i]!, node.children[i]!, asIs);
  return out;
}

function toView(data: Data, node: SchemaNode, asIs: boolean): ArrayView {
  const N = data.length;
  const type = data.type as DataType;
  const nullCount = type.typeId === Type.Union ? 0 : type.typeId === Type.Null ? N : data.nullCount;
  const validity =
    nullCount > 0 && data.nullBitmap && data.nullBitmap.byteLength > 0 ? rebaseBitmap(data.nullBitmap, data.offset, N) : null;

  if (type.typeId === Type.Dictionary) {
    const dict = dictionaryData(data.dictionary!);
    return {
      schema: node,
      length: N,
      offset: 0,
      nullCount,
      buffers: [validity, bytes(data.values as AnyTypedArray, asIs)],
      children: NONE as never,
      dictionary: toView(dict, node.dictionary!, asIs),
    };
  }
  let buffers: (Uint8Array | null)[];
  let children: ArrayView[] = NONE as never;
  switch (layoutOf(node.type).kind) {
    case Kind.Null:
      buffers = [];
      break;
    case Kind.Bool:
      buffers = [validity, rebaseBitmap((data.values as Uint8Array | undefined) ?? EMPTY, data.offset, N)];
      break;
    case Kind.Binary: case Kind.LargeBinary:
      buffers = [validity, bytes(data.valueOffsets as AnyTypedArray, asIs), bytes(data.values as Uint8Array)];
      break;
    case Kind.View: {
      const variadic = data.variadicBuffers.map((b) => bytes(b));
      const sizes = new BigInt64Array(variadic.map((b) => BigInt(b?.byteLength ?? 0)));
      buffers = [validity, bytes(data.values as Uint8Array), ...variadic, bytes(sizes)];
      break;
    }
    case Kind.List: case Kind.LargeList:
      buffers = [validity, bytes(data.valueOffsets as AnyTypedArray, asIs)];
      children = [toView(data.children[0]!, node.children[0]!, asIs)];
      break;
    case Kind.FixedList: case Kind.Struct:
      buffers = [validity];
      children = childViews(data, node, asIs);
      break;
    case Kind.DenseUnion:
      buffers = [bytes(data.typeIds as Int8Array, asIs), bytes(data.valueOffsets as Int32Array, asIs)];
      children = childViews(data, node, asIs);
      break;
    case Kind.SparseUnion:
      buffers = [bytes(data.typeIds as Int8Array, asIs)];
      children = childViews(data, node, asIs);
      break;
    default:
      buffers = [validity, bytes(data.values as AnyTypedArray, asIs)];
  }
  return { schema: node, length: N, offset: 0, nullCount, buffers, children, dictionary: null };
}
