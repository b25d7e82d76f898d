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
  Data, DataType, Dictionary, Field, makeBuilder, makeData as arrowMakeData, Null, RecordBatch, Type, Vector, type Builder,
  type FixedSizeList, Schema, Struct,
  type Union,
} from 'apache-arrow';
import { ArrowDeviceError, invalid, unsupported } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import { nodeToType, type ToArrowOptions } from '../schema/arrowjs.js';
import { typeToNode } from '../schema/export.js';
import type { SchemaNode } from '../schema/node.js';
import type { ArrayView } from './view.js';
import { ImportedView } from './import.js';
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
 * `new RecordBatch(schema, data)` for the `Data` of an import of `struct`
 * (`new Struct(schema.fields)`): the same batch (the schema given, a struct
 * `Data` of `struct` over `data`'s children, no validity, empty metadata),
 * made without the constructor's rebuilding where that is all it would do.
 */
export function makeBatch(schema: Schema, struct: Struct, data: Data<Struct>): RecordBatch {
  const children = data.children;
  const N = data.length;
  // Repeated field names take the shortcut too: there the constructor's rebuilding by name is a
  // known arrow-js bug (gold case duplicate_fieldnames: an int8 column reported as int32).
  let same = BATCH_SHORTCUT && children.length === schema.fields.length;
  for (let i = 0; same && i < children.length; i++) same = children[i]!.length === N;
  if (!same) {
    const b = new ImportedRecordBatch(schema, data);
    // Keep the schema as imported where the constructor rebuilt it by name.
    if (!hasUniqueNames(schema) && b.data.children.length === schema.fields.length) (b as { schema: Schema }).schema = schema;
    return b;
  }
  const b = Object.create(ImportedRecordBatch.prototype) as { schema: Schema; data: Data<Struct>; _metadata: Map<string, string> };
  b.schema = schema;
  b.data = new Data(struct, 0, N, 0, [undefined, undefined, new Uint8Array(0)] as never, children) as Data<Struct>;
  b._metadata = new Map();
  return b as unknown as RecordBatch;
}

/** Thunks for the buffers of an arrow-js `Data`, in arrow-js's slicing convention. */
interface Parts {
  valueOffsets?: () => ArrayBufferView;
  values?: () => ArrayBufferView;
  nullBitmap?: () => Uint8Array;
  typeIds?: () => Int8Array;
  variadicBuffers?: () => Uint8Array[];
}

const PARTS = Symbol('arrow-device.parts');
const SOURCE = Symbol('arrow-device.source');
const CACHE = Symbol('arrow-device.cache');
const WASM = Symbol('arrow-device.wasm-views');
const OWNER = Symbol('arrow-device.owner');
const LAZY_KEYS = ['valueOffsets', 'values', 'nullBitmap', 'typeIds', 'variadicBuffers'] as const;
type LazyKey = (typeof LAZY_KEYS)[number];

/**
 * A `Data` whose buffers are made on first read, by prototype getters that
 * call the part's thunk (which views the producer's buffer) and cache the
 * result. The getters stay for the Data's whole life: every read of a
 * buffer through arrow-js (`vector.get(i)` reads `data.values` each time)
 * first checks that the import is not released, so a released batch throws
 * an error that says why instead of reading detached (empty) buffers.
 * Building arrow-js objects over an import so views nothing, and costs no
 * per-instance property definitions.
 */
class LazyData extends ImportedData {
  declare [PARTS]: Parts;
  declare [CACHE]: { [K in LazyKey]?: unknown };
  /** The import's owner (null for a copy): checked on every buffer read. */
  declare [OWNER]: ImportOwner | null;
  /** The wasm-memory views of each slot read, checked for detachment on every read; absent for native imports. */
  declare [WASM]: { [K in LazyKey]?: ArrayBufferView[] } | undefined;
  /**
   * The import this Data reads, kept for the Data's whole life: it holds the
   * import's keep-alive token, so the producer's memory stays while the Data
   * is reachable even after every buffer was read (on wasm the typed arrays
   * share the module's ArrayBuffer and say nothing about the import).
   */
  declare [SOURCE]: ImportedView;
  constructor(source: ImportedView, parts: Parts, type: DataType, O: number, N: number, nullCount: number, children: Data[], dictionary?: Vector) {
    super(type, O, N, nullCount, [] as never, children, dictionary, []);
    // Whatever the Data constructor stored through the setters (variadicBuffers = []) was dropped:
    // the parts make it. Every field is an own property from here on (the getters read only these).
    this[CACHE] = {};
    this[PARTS] = parts;
    this[SOURCE] = source;
    this[OWNER] = source.owner;
    this[WASM] = undefined;
  }
}

/**
 * A `LazyData` of a view type, whose variadic buffers are lazy too. Only
 * this class has the `variadicBuffers` accessor: on the others the Data
 * constructor's `variadicBuffers = []` stays a plain property (an accessor
 * would turn it into a property definition per node).
 */
class LazyViewData extends LazyData {}

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
    // The hot path (arrow-js reads `data.values` on every get(i)): own fields only, one branch for
    // the release check, one for wasm memory.
    get(this: LazyData) {
      const cache = this[CACHE];
      // Read by the Data constructor itself, before the fields below exist.
      if (cache === undefined) return undefined;
      const owner = this[OWNER];
      if (owner !== null && owner.isReleased) {
        const source = this[SOURCE];
        owner.check(source.path, 'a read');
      }
      let value = cache[key];
      if (value === undefined && !(key in cache)) {
        const thunk = this[PARTS][key];
        value = thunk ? thunk() : key === 'variadicBuffers' ? [] : undefined;
        cache[key] = value;
        const views = wasmViews(value);
        if (views.length > 0) (this[WASM] ??= {})[key] = views;
      }
      // A view of wasm memory is detached when the module's memory grows, and a detached typed
      // array reads as empty (length 0, every index undefined): arrow-js would return wrong values
      // without a word. Such a slot is checked on each read (native views cost nothing here).
      const wasm = this[WASM];
      if (wasm !== undefined) {
        const views = wasm[key];
        if (views !== undefined) for (const v of views) if (isDetached(v)) throw wasmDetached(key);
      }
      return value;
    },
    set(this: LazyData, value: unknown) {
      // Called by the Data constructor before CACHE exists: the constructor resets it after.
      const cache = this[CACHE];
      if (cache !== undefined) cache[key] = value;
    },
  });
}

/** A `Data` from `parts`: lazy over an import, evaluated now otherwise. */
function makeData(
  lazy: ImportedView | undefined,
  type: DataType,
  O: number,
  N: number,
  nullCount: number,
  parts: Parts,
  children: Data[] = [],
  dictionary?: Vector,
): Data {
  if (lazy) {
    return parts.variadicBuffers
      ? new LazyViewData(lazy, parts, type, O, N, nullCount, children, dictionary)
      : new LazyData(lazy, parts, type, O, N, nullCount, children, dictionary);
  }
  const b = [parts.valueOffsets?.(), parts.values?.(), parts.nullBitmap?.(), parts.typeIds?.()];
  return new Data(type, O, N, nullCount, b as never, children, dictionary, parts.variadicBuffers?.() ?? []);
}

/** `data.slice(O, N)` unless that is the whole of it (slicing views every buffer of a lazy child). */
function sliceIf(data: Data, O: number, N: number): Data {
  return O === 0 && N === data.length ? data : data.slice(O, N);
}

/** An arrow-js `Data` of `type` over `view` (zero-copy). `type` comes from `nodeToType(view.schema)`. */
export function viewToData(view: ArrayView, type: DataType, path = 'array', opts: ToArrowOptions = {}): Data {
  const { offset: O, length: N } = view;
  const t = view.schema.type;
  // An import's buffers are read one at a time, on first access; any other view's are there already.
  const lazy = view instanceof ImportedView;
  const buf = lazy ? (i: number) => view.buffer(i) : (i: number) => view.buffers[i] ?? null;
  const hasBitmap = view.nullCount !== 0 && (lazy ? view.present(0) : (view.buffers[0]?.byteLength ?? 0) > 0);
  const nullCount = hasBitmap ? view.nullCount : 0;
  const nullBitmap = (): Uint8Array => (hasBitmap ? buf(0)! : EMPTY);
  const childType = (i: number): DataType => (type.children[i] as Field).type;
  const child = (i: number): Data => viewToData(view.children[i]!, childType(i), `${path}.children[${i}]`, opts);
  const offsets32 = (): Int32Array => {
    const o = typed(Int32Array, buf(1)).subarray(O, O + N + 1);
    return o.length ? o : new Int32Array(1);
  };
  const offsets64 = (): BigInt64Array => {
    const o = typed(BigInt64Array, buf(1)).subarray(O, O + N + 1);
    return o.length ? o : new BigInt64Array(1);
  };
  const bytes = (i: number) => (): Uint8Array => buf(i) ?? EMPTY;
  const data = (parts: Parts, children: Data[] = [], dictionary?: Vector, nc = nullCount): Data =>
    makeData(lazy ? (view as ImportedView) : undefined, type, O, N, nc, parts, children, dictionary);

  if (view.schema.dictionary) {
    const Ctor = (type as Dictionary).indices.ArrayType as TypedArrayCtor;
    const dict = viewToData(view.dictionary!, (type as Dictionary).dictionary, `${path}.dictionary`, opts);
    if (t.id === 'int' && t.bitWidth === 64) {
      // 64-bit indices narrowed to int32 (nodeToType asks for it only under `expand`): a copy, checked.
      const wide = typed(t.signed ? BigInt64Array : BigUint64Array, buf(1)).subarray(O, O + N);
      const out = new Int32Array(N);
      for (let k = 0; k < N; k++) {
        const x = wide[k]!;
        if (x > 2147483647n || x < 0n) {
          const valid = !hasBitmap || (buf(0)![(O + k) >> 3]! & (1 << ((O + k) & 7))) !== 0;
          if (valid) throw unsupported(`${path}.buffers[1]`, `dictionary index ${x} at ${O + k} does not fit the int32 that { expand: true } narrows 64-bit indices to`);
          continue; // a null slot's index is never read
        }
        out[k] = Number(x);
      }
      liveCounters.copiedBytes += out.byteLength;
      return data({ values: () => out, nullBitmap }, [], new Vector([dict]));
    }
    return data({ values: () => typed(Ctor, buf(1)).subarray(O, O + N), nullBitmap }, [], new Vector([dict]));
  }

  switch (t.id) {
    case 'null':
      return new Data(new Null(), O, N, N);
    case 'bool':
      return data({ values: bytes(1), nullBitmap });
    case 'binary': case 'utf8':
      return data({ valueOffsets: offsets32, values: bytes(2), nullBitmap });
    case 'large_binary': case 'large_utf8':
      return data({ valueOffsets: offsets64, values: bytes(2), nullBitmap });
    case 'binary_view': case 'utf8_view':
      return data({
        values: () => bytes(1)().subarray(O * 16, (O + N) * 16),
        nullBitmap,
        variadicBuffers: () => Array.from({ length: (lazy ? view.raw.length : view.buffers.length) - 3 }, (_, k) => buf(2 + k) ?? EMPTY),
      });
    case 'list': case 'map':
      return data({ valueOffsets: offsets32, nullBitmap }, [child(0)]);
    case 'large_list':
      return data({ valueOffsets: offsets64, nullBitmap }, [child(0)]);
    case 'fixed_list': {
      const size = (type as FixedSizeList).listSize;
      return data({ nullBitmap }, [sliceIf(child(0), O * size, N * size)]);
    }
    case 'struct':
      return data({ nullBitmap }, view.children.map((_, i) => sliceIf(child(i), O, N)));
    case 'union': {
      const typeIds = (): Int8Array => typed(Int8Array, buf(0)).subarray(O, O + N);
      if (t.mode === 'sparse') return data({ typeIds }, view.children.map((_, i) => sliceIf(child(i), O, N)), undefined, 0);
      const valueOffsets = (): Int32Array => typed(Int32Array, buf(1)).subarray(O, O + N);
      return data({ typeIds, valueOffsets }, view.children.map((_, i) => child(i)), undefined, 0);
    }
    case 'list_view': case 'large_list_view':
      if (!opts.expand) throw unsupported(`${path}`, `arrow-js cannot represent "${view.schema.format}"; pass { expand: true } or use the ArrayView`);
      return listViewToList(view, type, path, opts);
    case 'run_end_encoded':
      if (!opts.expand) throw unsupported(`${path}`, `arrow-js cannot represent "+r"; pass { expand: true } or use the ArrayView`);
      return expandRunEnds(view, type, path, opts);
    default: {
      // Fixed-width types: arrow-js slices their values by `stride` elements of `ArrayType`.
      const Ctor = type.ArrayType as TypedArrayCtor;
      const stride = byteWidthOf(view.schema) / Ctor.BYTES_PER_ELEMENT;
      return data({ values: () => typed(Ctor, buf(1)).subarray(O * stride, (O + N) * stride), nullBitmap });
    }
  }
}

function byteWidthOf(node: SchemaNode): number {
  const t = node.type;
  switch (t.id) {
    case 'int': case 'float': case 'decimal': return t.bitWidth / 8;
    case 'fixed_binary': return t.byteWidth;
    case 'date': return t.unit === 'day' ? 4 : 8;
    case 'time': return t.unit === 's' || t.unit === 'ms' ? 4 : 8;
    case 'timestamp': case 'duration': return 8;
    case 'interval': return t.unit === 'month' ? 4 : t.unit === 'day_time' ? 8 : 16;
    default: throw invalid('', `no fixed width for "${node.format}"`);
  }
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

/** Bytes of a typed array (zero-copy). */
function bytes(a: ArrayBufferView | null | undefined): Uint8Array | null {
  if (!a) return null;
  return a instanceof Uint8Array ? a : new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
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
  return toView(data, node);
}

function toView(data: Data, node: SchemaNode): ArrayView {
  const N = data.length;
  const type = data.type as DataType;
  const nullCount = type.typeId === Type.Union ? 0 : type.typeId === Type.Null ? N : data.nullCount;
  const validity =
    nullCount > 0 && data.nullBitmap && data.nullBitmap.byteLength > 0 ? rebaseBitmap(data.nullBitmap, data.offset, N) : null;
  const childView = (d: Data, i: number): ArrayView => toView(d, node.children[i]!);

  if (type.typeId === Type.Dictionary) {
    const dict = dictionaryData(data.dictionary!);
    return {
      schema: node,
      length: N,
      offset: 0,
      nullCount,
      buffers: [validity, bytes(data.values as AnyTypedArray)],
      children: [],
      dictionary: toView(dict, node.dictionary!),
    };
  }
  let buffers: (Uint8Array | null)[];
  let children: ArrayView[] = [];
  switch (node.type.id) {
    case 'null':
      buffers = [];
      break;
    case 'bool':
      buffers = [validity, rebaseBitmap((data.values as Uint8Array | undefined) ?? EMPTY, data.offset, N)];
      break;
    case 'binary': case 'utf8': case 'large_binary': case 'large_utf8':
      buffers = [validity, bytes(data.valueOffsets as AnyTypedArray), bytes(data.values as Uint8Array)];
      break;
    case 'binary_view': case 'utf8_view': {
      const variadic = data.variadicBuffers.map((b) => bytes(b));
      const sizes = new BigInt64Array(variadic.map((b) => BigInt(b?.byteLength ?? 0)));
      buffers = [validity, bytes(data.values as Uint8Array), ...variadic, bytes(sizes)];
      break;
    }
    case 'list': case 'large_list': case 'map':
      buffers = [validity, bytes(data.valueOffsets as AnyTypedArray)];
      children = [childView(data.children[0]!, 0)];
      break;
    case 'fixed_list': case 'struct':
      buffers = [validity];
      children = data.children.map(childView);
      break;
    case 'union':
      buffers = (type as Union).mode === 1
        ? [bytes(data.typeIds as Int8Array), bytes(data.valueOffsets as Int32Array)]
        : [bytes(data.typeIds as Int8Array)];
      children = data.children.map(childView);
      break;
    default:
      buffers = [validity, bytes(data.values as AnyTypedArray)];
  }
  return { schema: node, length: N, offset: 0, nullCount, buffers, children, dictionary: null };
}
