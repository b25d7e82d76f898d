/**
 * `ArrayView` -> flechette: a batch per array (`batchOfView`), a column per list of arrays of one type
 * (`columnOfViews`), a `Table` per list of record batches (`tableOfViews`), over the view's own bytes.
 *
 * A flechette batch is built as flechette's IPC reader builds one (decode/table-from-ipc.js `visit`):
 * `batchType(type, options)` and its constructor, each buffer a typed array of the kind the type names,
 * over the same `ArrayBuffer` as the view's bytes. A flechette batch has no `offset`, so a C offset
 * (CDataInterface.rst, "ArrowArray.offset": it applies to every buffer of the node) is applied here,
 * by `subarray`, to every buffer where it falls on a byte: values, offsets, sizes, views, type ids.
 * Bytes are copied (and counted in `accounting().copiedBytes`) in three cases only:
 * - a validity or boolean bitmap at a bit offset that is not a multiple of 8 (shifted into a copy);
 * - a buffer whose address is not a multiple of its typed array's element size (JS cannot view it);
 * - the run ends of a run-end encoded array with a non-zero offset: flechette finds row i in the
 *   first run whose end is greater than i, counting from 0 (batch.js `RunEndEncodedBatch`), where C
 *   counts from the unsliced start (Columnar.rst, "Run-End Encoded Layout"): the runs the slice
 *   covers are rewritten relative to it.
 * flechette reads offsets as they are, never subtracting the first (batch.js `BinaryBatch`,
 * `ListBatch`: value i is `subarray(offsets[i], offsets[i + 1])` of the whole data buffer, or that
 * slice of the whole child), so a sliced list's or binary's offsets need no rebasing: the data
 * buffer and the child are kept whole. Loads flechette, never arrow-js.
 */
import {
  batchType, Column, Table,
  type Batch, type DataType, type ExtractionOptions, type Field, type OffsetArray, type TypedArray, type TypedArrayConstructor,
} from '@uwdata/flechette';
import { ImportedView, type ArrayView } from '../array/view.js';
import { ArrowDeviceError, invalid } from '../errors.js';
import type { ImportOwner } from '../array/owner.js';
import { liveCounters } from '../memory/accounting.js';
import { Kind, layoutOf, type ArrayLayout } from '../schema/layout.js';
import type { SchemaNode } from '../schema/node.js';
import { flechetteSchema, flechetteType } from './types.js';

export type { ExtractionOptions };

/** What flechette's batch constructors read (batch.js: `Batch`, `SparseUnionBatch`, `ViewBatch`). */
interface BatchInit {
  length: number;
  nullCount: number;
  type: DataType;
  validity?: Uint8Array | undefined;
  values?: TypedArray | undefined;
  offsets?: OffsetArray | undefined;
  sizes?: OffsetArray | undefined;
  children?: Batch<unknown>[] | undefined;
  /** Unions: the type id of each row. */
  typeIds?: Int8Array | undefined;
  /** Binary and utf8 views: the variadic data buffers. */
  data?: Uint8Array[] | undefined;
}

/** `BatchInit` with each buffer field given, `LATER` (`field`'s to make) or `PENDING` (its marker for a lazy batch's constructor). */
type LaterInit = { [K in keyof BatchInit]: K extends BufferKey ? BatchInit[K] | typeof LATER | Pending : BatchInit[K] };

/** A batch class, as `batchType` returns it (typed `any` in flechette's declarations). */
type BatchClass = new (init: BatchInit) => Batch<unknown>;

/** flechette's `DictionaryBatch`: its dictionary is a `Column` set after construction. */
interface DictionaryBatchLike extends Batch<unknown> {
  setDictionary(dictionary: Column<unknown>): unknown;
}

/** The state of one conversion: the options, and the dictionary columns made so far (by their view). */
interface Build {
  readonly options: ExtractionOptions;
  /** The options as `classOf`'s key (`optionsKey`). */
  readonly key: number;
  /**
   * A dictionary view met again (record batches of one stream sharing one dictionary, fields sharing
   * one) gives the one column made for it: flechette's IPC writer takes a table's dictionaries from
   * its first batch (encode/table-to-ipc.js `assembleDictionaryBatches`), right only if every batch
   * holds the same column.
   */
  dicts: Map<ArrayView, Column<unknown>> | null;
}

/**
 * The flechette batch of an array, zero-copy where the rules above allow. `options` are flechette's
 * own (`useBigInt`, `useDate`, `useDecimalInt`, `useMap`, `useProxy`, ...), given to `batchType`.
 *
 * @example
 * const view = importArrayView(arrayPtr, schemaPtr);
 * const batch = batchOfView(view, { useBigInt: true });
 * batch.at(0);
 */
export function batchOfView(view: ArrayView, options: ExtractionOptions = {}, path = 'array'): Batch<unknown> {
  const type = flechetteType(view.schema, 'schema');
  return build(view, view.schema, type, view.offset, view.length, path, newBuild(options));
}

/**
 * A flechette `Column` of arrays of the type of `node`, one batch each.
 *
 * @example
 * const column = columnOfViews(node, [view1, view2]);
 * column.toArray();
 */
export function columnOfViews(node: SchemaNode, views: readonly ArrayView[], options: ExtractionOptions = {}): Column<unknown> {
  const type = flechetteType(node, 'schema');
  const b = newBuild(options);
  return new Column(views.map((v, i) => build(v, node, type, v.offset, v.length, `arrays[${i}]`, b)), type);
}

/**
 * A flechette `Table` of record batches of one schema: `schema` is the batches' struct node (`+s`,
 * CDataInterface.rst, "Record batches"), each view a struct array of it; each field becomes a column
 * with a batch per record batch, so the columns' batches line up, as `Table` requires. A record
 * batch's struct has no null rows: one that says it has is refused. `make`: the classes the table
 * and its columns are built of (flechette's `Table` and `Column` by default).
 *
 * @example
 * const schema = importSchemaNode(schemaPtr);
 * const table = tableOfViews(schema, arrayPtrs.map((p) => importArrayView(p, schema)));
 * table.toArray();
 */
export function tableOfViews(schema: SchemaNode, views: readonly ArrayView[], options: ExtractionOptions = {}, make: TableClasses = FLECHETTE): Table {
  const fs = flechetteSchema(schema);
  const b = newBuild(options);
  // Each column's list of batches made at its length and filled, not grown by push from `[]`: V8 tenured
  // that allocation site (every batch list it made went to the old generation), and the import's whole
  // graph with it; a loop of imports then ran twice as slow, from the full collections (bench:overhead).
  const columns: Batch<unknown>[][] = new Array(fs.fields.length);
  for (let i = 0; i < columns.length; i++) columns[i] = new Array<Batch<unknown>>(views.length);
  const fields = fs.fields;
  for (let k = 0; k < views.length; k++) {
    const v = views[k]!;
    const path = `batches[${k}]`;
    sameShape(v, schema, path);
    if (v.nullCount !== 0 && nullsIn(v, v.offset, v.length, bufferOf(v, 0), path) > 0) {
      throw invalid(`${path}.null_count`, 'a record batch has no null rows, but its struct has nulls');
    }
    for (let i = 0; i < fields.length; i++) {
      const c = v.children[i]!;
      // Struct children are indexed like the struct, its offset included (Columnar.rst, "Struct Layout").
      columns[i]![k] = build(c, schema.children[i]!, fields[i]!.type, c.offset + v.offset, v.length, path, b, v.offset, i);
    }
  }
  const made: Column<unknown>[] = new Array(fields.length);
  for (let i = 0; i < fields.length; i++) made[i] = new make.Column(columns[i]!, fields[i]!.type);
  return new make.Table(fs, made, options.useProxy);
}

/** The classes a table is made of: flechette's, or subclasses (the entry's releasable `ImportedTable` and `ImportedColumn`). */
export interface TableClasses {
  /** The class of the table. */
  readonly Table: {
    /** A table of the schema, one column per field, with `useProxy` (flechette's extraction option). */
    new (schema: Table['schema'], children: Column<unknown>[], useProxy?: boolean): Table;
  };
  /** The class of each column. */
  readonly Column: {
    /** A column of its batches (one per record batch) and its type. */
    new (data: Batch<unknown>[], type: DataType): Column<unknown>;
  };
}

const FLECHETTE: TableClasses = { Table, Column };

// --- one node ---------------------------------------------------------------------------------

/** The view must be of the schema's node: same format, same number of children. */
function sameShape(view: ArrayView, node: SchemaNode, path: string): void {
  if (view.schema === node) return;
  if (view.schema.format !== node.format) throw invalid(path, `the array is of type "${view.schema.format}", the schema says "${node.format}"`);
  if (view.children.length !== node.children.length) {
    throw invalid(`${path}.n_children`, `${view.children.length} children, the schema has ${node.children.length}`);
  }
  if ((view.dictionary === null) !== (node.dictionary === null)) {
    throw invalid(`${path}.dictionary`, node.dictionary === null ? 'a dictionary the schema does not have' : 'no dictionary, but the schema is dictionary-encoded');
  }
}

/**
 * The batch of the `length` elements of `view` from physical element `start` (its offset and any
 * parent's applied). `logical` is where that is in the view's own logical elements (start - offset),
 * for the check that the range lies inside the array. The buffer fields are made by `field` (over an
 * import, when flechette first reads them: see "Lazy batches"); the children here, at once.
 */
function build(
  view: ArrayView, node: SchemaNode, type: DataType, start: number, length: number, at: string, b: Build,
  logical = start - view.offset, child = -1,
): Batch<unknown> {
  const cls = classOf(type, b);
  const l = layoutOf(node.type);
  const src = new FieldSource(view, node, type, l, start, length, at, child);
  if (view.schema !== node) sameShape(view, node, src.path);
  if (logical < 0 || logical + length > view.length) {
    throw invalid(`${src.path}.length`, `elements ${logical}..${logical + length} are needed, the array has ${view.length}`);
  }
  // Over an import, each buffer is viewed when flechette first reads it; over a plain view (the
  // caller's own buffers), at once.
  const lazy = view instanceof ImportedView && lazyBatches;

  if (node.dictionary !== null) {
    // Columnar.rst, "Dictionary-encoded Layout": validity and indices; the dictionary is not sliced.
    const dictType = type as DataType & { readonly dictionary: DataType };
    const init = validityOf(src, lazy);
    init.values = LATER;
    const batch = construct(cls, init, src, lazy) as DictionaryBatchLike;
    const dict = dictionaryColumn(view.dictionary, node.dictionary, dictType.dictionary, `${src.path}.dictionary`, b);
    try {
      // flechette reads every dictionary value here (batch.js: setDictionary caches the column's toArray()),
      // so a value it cannot read fails the import, not a later read: as a typed error naming the place.
      batch.setDictionary(dict);
    } catch (e) {
      if (e instanceof ArrowDeviceError) throw e;
      throw new ArrowDeviceError('unsupported', `${src.path}.dictionary`, `flechette cannot read the dictionary's values: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    return batch;
  }

  const kids = type as DataType & { readonly children?: readonly Field[] };
  switch (l.kind) {
    case Kind.Null:
      return construct(cls, initOf(length, type, length, undefined), src, lazy);
    case Kind.Bool: case Kind.Fixed: {
      const init = validityOf(src, lazy);
      init.values = LATER;
      return construct(cls, init, src, lazy);
    }
    case Kind.Binary: case Kind.LargeBinary: {
      const init = validityOf(src, lazy);
      init.offsets = LATER;
      init.values = LATER;
      return construct(cls, init, src, lazy);
    }
    case Kind.View: {
      const init = validityOf(src, lazy);
      init.values = LATER;
      init.data = LATER;
      return construct(cls, init, src, lazy);
    }
    case Kind.List: case Kind.LargeList: {
      // List and map (Columnar.rst, "Variable-size List Layout", "Map"): the child whole.
      const c = view.children[0]!;
      const child = build(c, node.children[0]!, kids.children![0]!.type, c.offset, c.length, src.path, b, 0, 0);
      const init = validityOf(src, lazy);
      init.offsets = LATER;
      init.children = [child];
      return construct(cls, init, src, lazy);
    }
    case Kind.ListView: {
      const c = view.children[0]!;
      const child = build(c, node.children[0]!, kids.children![0]!.type, c.offset, c.length, src.path, b, 0, 0);
      const init = validityOf(src, lazy);
      init.offsets = LATER;
      init.sizes = LATER;
      init.children = [child];
      return construct(cls, init, src, lazy);
    }
    case Kind.FixedList: {
      // Columnar.rst, "Fixed-Size List Layout": list i is child elements i*size .. (i+1)*size.
      const c = view.children[0]!;
      const size = l.listSize;
      const child = build(c, node.children[0]!, kids.children![0]!.type, c.offset + start * size, length * size, src.path, b, start * size, 0);
      const init = validityOf(src, lazy);
      init.children = [child];
      return construct(cls, init, src, lazy);
    }
    case Kind.Struct: {
      const cs = view.children;
      const children: Batch<unknown>[] = new Array(cs.length);
      for (let i = 0; i < cs.length; i++) {
        const c = cs[i]!;
        children[i] = build(c, node.children[i]!, kids.children![i]!.type, c.offset + start, length, src.path, b, start, i);
      }
      const init = validityOf(src, lazy);
      init.children = children;
      return construct(cls, init, src, lazy);
    }
    case Kind.SparseUnion: case Kind.DenseUnion: {
      // Columnar.rst, "Union Layout": no validity (nulls are the children's); type ids, and for a dense
      // union the int32 offsets into each child, which is kept whole; a sparse union's children are
      // indexed like the union.
      const dense = l.kind === Kind.DenseUnion;
      const children = view.children.map((c, i) => dense
        ? build(c, node.children[i]!, kids.children![i]!.type, c.offset, c.length, src.path, b, 0, i)
        : build(c, node.children[i]!, kids.children![i]!.type, c.offset + start, length, src.path, b, start, i));
      const init = initOf(length, type, 0, undefined);
      init.typeIds = LATER;
      if (dense) init.offsets = LATER;
      init.children = children;
      return construct(cls, init, src, lazy);
    }
    case Kind.RunEnd: {
      const init = initOf(length, type, 0, undefined);
      init.children = runEndChildren(view, node, type, start, length, src.path, b);
      return construct(cls, init, src, lazy);
    }
  }
}

/**
 * What a batch's buffer fields are made of: its node's view, type and layout, its window and place;
 * for a lazy batch (see "Lazy batches"), also its state: the fields' values and the import's owner.
 * One object per batch: a 100-column batch's import made three per column before (bench:overhead).
 */
class FieldSource {
  /** The buffer fields, by `BUFFER_KEYS` index: as the class's constructor assigned them, then as made. */
  v0: unknown = undefined;
  v1: unknown = undefined;
  v2: unknown = undefined;
  v3: unknown = undefined;
  v4: unknown = undefined;
  v5: unknown = undefined;
  /** Whether the batch's construction is over: until then a read gives what the constructor assigned. */
  ready = false;
  /** The import's owner (null for a copy), kept here: the check on every read is one load from this object. */
  owner: ImportOwner | null = null;
  constructor(
    readonly view: ArrayView,
    readonly node: SchemaNode,
    readonly type: DataType,
    readonly l: ArrayLayout,
    readonly start: number,
    readonly length: number,
    /** The place of the batch, or of its parent where `child` is not -1. */
    readonly at: string,
    /** Which child of the parent at `at` the batch is, or -1. */
    readonly child: number,
  ) {}

  /** A state with no source, never ready: for a lazy class constructed by someone else than `construct`. */
  static bare(): FieldSource {
    return new FieldSource(null as unknown as ArrayView, null as unknown as SchemaNode, null as unknown as DataType, null as unknown as ArrayLayout, 0, 0, '', -1);
  }

  /** The batch's place, as errors name it: made when one needs it (a string per column costs at every import). */
  get path(): string {
    return this.child < 0 ? this.at : `${this.at}.children[${this.child}]`;
  }

  get(i: number): unknown {
    switch (i) {
      case 0: return this.v0;
      case 1: return this.v1;
      case 2: return this.v2;
      case 3: return this.v3;
      case 4: return this.v4;
      default: return this.v5;
    }
  }

  set(i: number, v: unknown): void {
    switch (i) {
      case 0: this.v0 = v; break;
      case 1: this.v1 = v; break;
      case 2: this.v2 = v; break;
      case 3: this.v3 = v; break;
      case 4: this.v4 = v; break;
      default: this.v5 = v;
    }
  }
}

/**
 * Buffer field `i` (of `BUFFER_KEYS`) of the batch of `s`, made now: the one place each field's
 * form is decided, for a lazy batch's first read and an eager batch's construction alike.
 */
function field(s: FieldSource, i: number): unknown {
  const { view, type, start, length } = s;
  if (i === VALIDITY) return bits(bufferOf(view, 0), start, length, s, '.buffers[0]');
  if (s.node.dictionary !== null) {
    const A = (type as DataType & { readonly indices: { readonly values: TypedArrayConstructor } }).indices.values;
    return typed(A, bufferOf(view, 1), start, length, s, '.buffers[1]');
  }
  const l = s.l;
  switch (l.kind) {
    case Kind.Bool:
      return bits(bufferOf(view, 1), start, length, s, '.buffers[1]');
    case Kind.Fixed: {
      // The typed array flechette's type names (none: bytes, for fixed-size binary and month-day-nano
      // intervals), with as many elements per value as the layout's width holds (decimal128: two).
      const A = (type as { readonly values?: TypedArrayConstructor }).values ?? Uint8Array;
      const per = l.width / A.BYTES_PER_ELEMENT;
      return typed(A, bufferOf(view, 1), start * per, length * per, s, '.buffers[1]');
    }
    case Kind.Binary: case Kind.LargeBinary: {
      const data = bufferOf(view, 2) ?? new Uint8Array(0);
      if (i === VALUES) return data;
      const o = offsetsOf(type, bufferOf(view, 1), start, length + 1, s, '.buffers[1]');
      const last = length === 0 ? 0 : Number(o[length]!);
      if (last > data.byteLength) throw invalid(`${s.path}.buffers[2]`, `the last offset is ${last}, the data has ${data.byteLength} bytes`);
      return o;
    }
    case Kind.View:
      // CDataInterface.rst, "Binary view arrays": validity, views, the variadic data buffers, then
      // their sizes (which flechette does not need: each view holds its own length).
      if (i === VALUES) return typed(Uint8Array, bufferOf(view, 1), start * 16, length * 16, s, '.buffers[1]');
      return view.buffers.slice(2, view.buffers.length - 1).map((d) => d ?? new Uint8Array(0));
    case Kind.List: case Kind.LargeList: {
      const o = offsetsOf(type, bufferOf(view, 1), start, length + 1, s, '.buffers[1]');
      const last = length === 0 ? 0 : Number(o[length]!);
      const n = view.children[0]!.length;
      if (last > n) throw invalid(`${s.path}.buffers[1]`, `the last offset is ${last}, the child has ${n} elements`);
      return o;
    }
    case Kind.ListView:
      return i === OFFSETS
        ? offsetsOf(type, bufferOf(view, 1), start, length, s, '.buffers[1]')
        : offsetsOf(type, bufferOf(view, 2), start, length, s, '.buffers[2]');
    case Kind.SparseUnion: case Kind.DenseUnion:
      return i === TYPE_IDS
        ? typed(Int8Array, bufferOf(view, 0), start, length, s, '.buffers[0]')
        : typed(Int32Array, bufferOf(view, 1), start, length, s, '.buffers[1]');
    default:
      throw new Error(`arrow-device: no buffer field ${BUFFER_KEYS[i]} for ${s.node.format}`);
  }
}

/** Buffer `i` of a view (null where NULL or past its buffers): an import's viewed alone, not with the node's others. */
function bufferOf(view: ArrayView, i: number): Uint8Array | null {
  return view instanceof ImportedView ? view.buffer(i) : view.buffers[i] ?? null;
}

// --- lazy batches ------------------------------------------------------------------------------

/**
 * Over an import, a batch's buffers are viewed when flechette first reads them, as the arrow-js
 * target's `Data` are (src/array/build.ts): viewing native memory makes an external `ArrayBuffer`
 * per buffer, the larger part of a small batch's import, and many programs read a few columns of
 * many. flechette's batches take their buffers as fields at construction (batch.js `Batch`), and its
 * classes are not patched: each class `batchType` gives has a subclass here whose buffer fields
 * (`BUFFER_KEYS`) are accessors on its prototype. The constructor's own assignments land in the
 * batch's `FieldSource`; a field to be made later is assigned `PENDING`, which `DirectBatch`'s trim
 * (`values.subarray(0, length)`) turns into a `Pending` recording the trim. The first read of the
 * field after construction makes it (`field`, as the eager form does, its checks and typed errors
 * included), applies what was recorded, and keeps it. Every read checks the release: a released
 * import's batch throws the `released` error naming the field, where an eager batch's detached typed
 * arrays read as empty. The first batch of each class is checked to hold no `Pending` outside its
 * accessors (a class that read a buffer in its constructor some other way, as flechette's
 * `DateBatch` wrapper does with `useDate`, copying the wrapped batch's fields): such a class is built
 * eagerly from then on.
 */
let lazyBatches = true;

/** @internal Whether imports build lazy batches (tests compare both forms); returns the previous setting. */
export function useLazyBatches(on: boolean): boolean {
  const was = lazyBatches;
  lazyBatches = on;
  return was;
}

const BUFFER_KEYS = ['validity', 'values', 'offsets', 'sizes', 'typeIds', 'data'] as const;
type BufferKey = (typeof BUFFER_KEYS)[number];
const VALIDITY = 0, VALUES = 1, OFFSETS = 2, SIZES = 3, TYPE_IDS = 4, DATA = 5;

/** In a batch's init: the field is `field`'s to make (now, or on first read). */
const LATER = Symbol('arrow-device.later');

/** A buffer field not made yet, with the `subarray` call the class's constructor made on it (and those before). */
class Pending {
  constructor(readonly before: Pending | null, readonly begin: number | undefined, readonly end: number | undefined) {}
  subarray(begin?: number, end?: number): Pending {
    return new Pending(this, begin, end);
  }
}
const PENDING = new Pending(null, undefined, undefined);

/** `made` with the trims `p` recorded, the first first; a trim to the whole array (`DirectBatch`'s, of a field made at its length) keeps it. */
function trimmed(made: unknown, p: Pending): unknown {
  if (p.before === null) return made;
  const m = trimmed(made, p.before) as { readonly length?: number; subarray(b?: number, e?: number): unknown };
  if (!p.begin && ArrayBuffer.isView(m) && (p.end === undefined || p.end >= (m.length as number))) return m;
  return m.subarray(p.begin, p.end);
}

/** A lazy batch's `FieldSource`, which holds its fields. */
const STATE = Symbol('arrow-device.lazy');
type LazyBatch = Batch<unknown> & { [STATE]?: FieldSource };

/**
 * The source of the lazy batch being constructed (`construct`): the class's constructor's first
 * assignment to a buffer field makes it the batch's state. A lazy class constructed otherwise (by
 * flechette itself) gets a bare state that is never ready: its fields read as they were assigned.
 */
let adopting: FieldSource | null = null;

function stateOf(batch: LazyBatch): FieldSource {
  let s = batch[STATE];
  if (s === undefined) {
    s = adopting ?? FieldSource.bare();
    adopting = null;
    batch[STATE] = s;
  }
  return s;
}

function accessor(i: number): PropertyDescriptor {
  return {
    configurable: true,
    get(this: LazyBatch): unknown {
      const s = this[STATE];
      if (s === undefined) return undefined;
      const owner = s.owner;
      if (owner !== null && owner.isReleased) owner.check(`${s.path}.${BUFFER_KEYS[i]!}`, 'a read');
      const v = s.get(i);
      // Before the construction is over (read by the class's constructor), the pending value itself.
      if (!s.ready || !(v instanceof Pending)) return v;
      const made = trimmed(field(s, i), v);
      s.set(i, made);
      return made;
    },
    set(this: LazyBatch, v: unknown): void {
      stateOf(this).set(i, v);
    },
  };
}

/**
 * The lazy subclass of each batch class once its first batch showed it can be lazy, or null where it
 * showed it cannot. Weak: `batchType` makes a class per call for some types (with `useDate`, flechette's
 * `wrap`), and those must not be kept after their types.
 */
const LAZY_CLASSES = new WeakMap<BatchClass, BatchClass | null>();

function subclassOf(Ctor: BatchClass): BatchClass {
  const L = class extends Ctor {};
  Object.defineProperty(L, 'name', { value: Ctor.name });
  for (let i = 0; i < BUFFER_KEYS.length; i++) Object.defineProperty(L.prototype, BUFFER_KEYS[i]!, accessor(i));
  return L;
}

/** A batch class of flechette's for one type under one set of options, with its lazy subclass once known. */
interface ClassEntry {
  /** The options' key (`optionsKey`), -1 where the entry is not kept. */
  readonly key: number;
  readonly Ctor: BatchClass;
  /** The lazy subclass, null where the class cannot be lazy; undefined until its first lazy batch. */
  lazy: BatchClass | null | undefined;
  /** The type's entry for other options, met before. */
  readonly next: ClassEntry | undefined;
}

/**
 * The class of each type for each set of options used with it: one lookup per batch, where `batchType`
 * and the lazy subclass's were two (and `batchType` made a class per call with `useDate`).
 */
const CLASSES = new WeakMap<DataType, ClassEntry>();

function classOf(type: DataType, b: Build): ClassEntry {
  const first = CLASSES.get(type);
  for (let e = first; e !== undefined; e = e.next) if (e.key === b.key) return e;
  const e: ClassEntry = { key: b.key, Ctor: batchType(type, b.options) as BatchClass, lazy: undefined, next: first };
  if (b.key >= 0) CLASSES.set(type, e);
  return e;
}

/**
 * The options as a number, one bit per flechette option set (the `use...` flags `batchType` reads:
 * batch-type.js), so a class found for a type is found for the same options only. The names are
 * numbered as they are met, so an option a later flechette adds is keyed too; -1 (nothing kept) past 30.
 */
const OPTION_BITS = new Map<string, number>();

function optionsKey(options: ExtractionOptions): number {
  let key = 0;
  for (const k in options) {
    if (!k.startsWith('use') || !(options as Record<string, unknown>)[k]) continue;
    let bit = OPTION_BITS.get(k);
    if (bit === undefined) {
      if (OPTION_BITS.size >= 30) return -1;
      OPTION_BITS.set(k, (bit = OPTION_BITS.size));
    }
    key |= 1 << bit;
  }
  return key;
}

function newBuild(options: ExtractionOptions): Build {
  return { options, key: optionsKey(options), dicts: null };
}

/** Whether `x`'s own fields (and, one level down, those of objects it holds: a wrapped batch) hold a `Pending`. */
function holdsPending(x: object, depth: number): boolean {
  for (const v of Object.values(x)) {
    if (v instanceof Pending) return true;
    if (depth > 0 && typeof v === 'object' && v !== null && !ArrayBuffer.isView(v) && !Array.isArray(v) && holdsPending(v, depth - 1)) return true;
  }
  return false;
}

/**
 * The batch of the class over `init`, whose fields marked `LATER` are `field`'s: made on first read where
 * `lazy` and the class allows it, else now.
 */
function construct(cls: ClassEntry, init: LaterInit, src: FieldSource, lazy: boolean): Batch<unknown> {
  // The fields one by one, not a loop over BUFFER_KEYS: keyed reads of the init cost more than the
  // rest of a one-row batch's construction.
  const f0 = init.validity === LATER, f1 = init.values === LATER, f2 = init.offsets === LATER;
  const f3 = init.sizes === LATER, f4 = init.typeIds === LATER, f5 = init.data === LATER;
  if (lazy && (f0 || f1 || f2 || f3 || f4 || f5)) {
    let L = cls.lazy;
    // A class's first lazy batch is checked (below) with a subclass made for it.
    const first = L === undefined && (L = LAZY_CLASSES.get(cls.Ctor)) === undefined;
    if (first) L = subclassOf(cls.Ctor);
    if (L) {
      if (f0) init.validity = PENDING;
      if (f1) init.values = PENDING;
      if (f2) init.offsets = PENDING;
      if (f3) init.sizes = PENDING;
      if (f4) init.typeIds = PENDING;
      if (f5) init.data = PENDING;
      adopting = src;
      let batch: LazyBatch;
      try {
        batch = new L(init as BatchInit) as LazyBatch;
      } finally {
        adopting = null;
      }
      if (batch[STATE] === undefined) batch[STATE] = src;
      if (!first || (batch[STATE] === src && !holdsPending(batch, 1))) {
        if (first) LAZY_CLASSES.set(cls.Ctor, L);
        cls.lazy = L;
        src.ready = true;
        src.owner = (src.view as ImportedView).read.owner;
        return batch;
      }
      LAZY_CLASSES.set(cls.Ctor, null);
      cls.lazy = null;
    } else cls.lazy = null;
  }
  const Ctor = cls.Ctor;
  if (f0) init.validity = field(src, VALIDITY) as Uint8Array;
  if (f1) init.values = field(src, VALUES) as TypedArray;
  if (f2) init.offsets = field(src, OFFSETS) as OffsetArray;
  if (f3) init.sizes = field(src, SIZES) as OffsetArray;
  if (f4) init.typeIds = field(src, TYPE_IDS) as Int8Array;
  if (f5) init.data = field(src, DATA) as Uint8Array[];
  return new Ctor(init as BatchInit);
}

/**
 * The validity of a batch where nothing is null: empty, as flechette's IPC reader gives it (a buffer
 * region of 0 bytes); flechette then reads every value as valid (batch.js `Batch`), and its IPC
 * writer, which writes every batch's validity, finds one (encode/table-to-ipc.js `buffer`).
 */
const NO_NULLS = new Uint8Array(0);

/**
 * The init of a batch of a node with a validity bitmap (buffer 0): its null count and validity. Where
 * nothing is null the bitmap is not read; with `lazy`, a bitmap whose null count is the array's own
 * (the whole array) is `field`'s; a window or an uncounted array (null_count -1) is counted now.
 */
function validityOf(s: FieldSource, lazy: boolean): LaterInit {
  const { view, start, length, type } = s;
  if (view.nullCount === 0) return initOf(length, type, 0, NO_NULLS);
  if (lazy && view.nullCount > 0 && start === view.offset && length === view.length) return initOf(length, type, view.nullCount, LATER);
  const bm = bufferOf(view, 0);
  const nullCount = nullsIn(view, start, length, bm, s.path);
  return initOf(length, type, nullCount, nullCount === 0 ? NO_NULLS : bits(bm, start, length, s, '.buffers[0]'));
}

/** A batch's init with its counts, type and validity, every other field unset (one shape for every case). */
function initOf(length: number, type: DataType, nullCount: number, validity: LaterInit['validity']): LaterInit {
  return { length, nullCount, type, validity, values: undefined, offsets: undefined, sizes: undefined, children: undefined, typeIds: undefined, data: undefined };
}

/**
 * The number of nulls among the `length` elements from physical `start`: the array's own count where
 * the range is the whole array, else counted in the bitmap (and where the array did not count:
 * `null_count` -1, CDataInterface.rst, "ArrowArray.null_count").
 */
function nullsIn(view: ArrayView, start: number, length: number, bm: Uint8Array | null, path: string): number {
  if (view.nullCount === 0) return 0;
  if (bm === null) {
    // CDataInterface.rst, "ArrowArray.buffers": the validity may be NULL only when null_count is 0.
    if (view.nullCount > 0) throw invalid(`${path}.buffers[0]`, `NULL validity bitmap, but null_count is ${view.nullCount}`);
    return 0;
  }
  if (view.nullCount > 0 && start === view.offset && length === view.length) return view.nullCount;
  const end = start + length;
  if (bm.byteLength * 8 < end) throw invalid(`${path}.buffers[0]`, `the validity bitmap has ${bm.byteLength} bytes, ${Math.ceil(end / 8)} are needed`);
  let valid = 0;
  let i = start;
  for (; i < end && (i & 7) !== 0; i++) valid += (bm[i >> 3]! >> (i & 7)) & 1;
  for (; i + 8 <= end; i += 8) valid += POPCOUNT[bm[i >> 3]!]!;
  for (; i < end; i++) valid += (bm[i >> 3]! >> (i & 7)) & 1;
  return length - valid;
}

const POPCOUNT = Uint8Array.from({ length: 256 }, (_, v) => {
  let n = 0;
  for (let x = v; x !== 0; x >>= 1) n += x & 1;
  return n;
});

// --- buffers ----------------------------------------------------------------------------------

/**
 * The bits `start .. start + length` of a bitmap (LSB first, Columnar.rst "Validity bitmaps") as a
 * bitmap from bit 0: a subarray where `start` is a multiple of 8, else a shifted copy (counted).
 */
function bits(bm: Uint8Array | null, start: number, length: number, place: Place, suffix: string): Uint8Array {
  const end = start + length;
  const need = (end + 7) >> 3;
  if (length === 0) return new Uint8Array(0);
  if (bm === null) throw invalid(place.path + suffix, `NULL bitmap, but ${need} bytes are needed`);
  if (bm.byteLength < need) throw invalid(place.path + suffix, `the bitmap has ${bm.byteLength} bytes, ${need} are needed`);
  const first = start >> 3;
  const shift = start & 7;
  if (shift === 0) return bm.subarray(first, need);
  const out = new Uint8Array((length + 7) >> 3);
  for (let j = 0; j < out.length; j++) {
    const lo = bm[first + j]! >>> shift;
    const hi = first + j + 1 < need ? (bm[first + j + 1]! << (8 - shift)) & 0xff : 0;
    out[j] = lo | hi;
  }
  liveCounters.copiedBytes += out.byteLength;
  return out;
}

/** The offsets of a binary or list type, as the typed array its flechette type names (Int32Array, BigInt64Array). */
function offsetsOf(type: DataType, buf: Uint8Array | null, start: number, count: number, place: Place, suffix: string): OffsetArray {
  const A = (type as { readonly offsets: Int32ArrayConstructor | BigInt64ArrayConstructor }).offsets;
  // The offsets of an empty array may be NULL or empty (src/schema/layout.ts, `Role.Offsets`);
  // flechette reads none of them then, but a batch sent out again needs its one zero.
  if (count === 1 && (buf === null || buf.byteLength < (start + 1) * A.BYTES_PER_ELEMENT)) return new A(1);
  return typed(A, buf, start, count, place, suffix);
}

/** A typed array of the kind a constructor makes, over existing memory. */
interface ArrayKind<T> {
  new (length: number): T;
  new (buffer: ArrayBufferLike, byteOffset: number, length: number): T;
  readonly BYTES_PER_ELEMENT: number;
}

/**
 * `count` elements of `A` from element `start` of `buf`: a view of the same `ArrayBuffer` where the
 * address is a multiple of the element size, else a copy (counted). CDataInterface.rst,
 * "ArrowArray.buffers": alignment is recommended, not required, and JS cannot view unaligned memory.
 */
function typed<T extends TypedArray>(
  A: ArrayKind<T> | TypedArrayConstructor, buf: Uint8Array | null, start: number, count: number, place: Place, suffix: string,
): T {
  const K = A as ArrayKind<T>;
  const size = K.BYTES_PER_ELEMENT;
  const from = start * size;
  const bytes = count * size;
  if (count === 0) return buf !== null && (buf.byteOffset + from) % size === 0 && from <= buf.byteLength ? new K(buf.buffer, buf.byteOffset + from, 0) : new K(0);
  if (buf === null) throw invalid(place.path + suffix, `NULL buffer, but ${from + bytes} bytes are needed`);
  if (buf.byteLength < from + bytes) throw invalid(place.path + suffix, `the buffer has ${buf.byteLength} bytes, ${from + bytes} are needed`);
  const at = buf.byteOffset + from;
  if (at % size === 0) return new K(buf.buffer, at, count);
  const copy = new Uint8Array(bytes);
  copy.set(buf.subarray(from, from + bytes));
  liveCounters.copiedBytes += bytes;
  return new K(copy.buffer, 0, count);
}

/**
 * Where a buffer is, for an error: its batch's place (`FieldSource`, whose path is made only then) and
 * the buffer's suffix (`.buffers[1]`), joined only when an error needs them.
 */
interface Place {
  readonly path: string;
}

// --- dictionaries and run-end encoded arrays --------------------------------------------------

/** The dictionary of a dictionary-encoded node as a flechette column of one batch (the view whole). */
function dictionaryColumn(dict: ArrayView | null, node: SchemaNode, type: DataType, path: string, b: Build): Column<unknown> {
  // CDataInterface.rst, "ArrowArray.dictionary": present for a dictionary-encoded array.
  if (dict === null) throw invalid(path, 'NULL dictionary for a dictionary-encoded array');
  const made = b.dicts?.get(dict);
  // Of the type object the schema's dictionary type holds: flechette's IPC writer finds the id by it.
  if (made !== undefined && made.type === type) return made;
  const column = new Column([build(dict, node, type, dict.offset, dict.length, path, b)], type);
  (b.dicts ??= new Map()).set(dict, column);
  return column;
}

/**
 * The run ends and values of a run-end encoded array's rows `start .. start + length` (physical:
 * Columnar.rst, "Run-End Encoded Layout", the offset counts logical rows from the unsliced start,
 * and run ends are counted from there too). Unsliced, both children as they are; sliced, the runs
 * the slice covers, their ends made relative to the slice (a copy of one run end per run, counted),
 * and the values of those runs.
 */
function runEndChildren(view: ArrayView, node: SchemaNode, type: DataType, start: number, length: number, path: string, b: Build): Batch<unknown>[] {
  const [re, vals] = view.children as [ArrayView, ArrayView];
  const [reNode, valsNode] = node.children as [SchemaNode, SchemaNode];
  if (re.length !== vals.length) throw invalid(`${path}.children[1].length`, `${vals.length} values for ${re.length} runs`);
  const endsType = (type as DataType & { readonly children: readonly Field[] }).children[0]!.type;
  const valsType = (type as DataType & { readonly children: readonly Field[] }).children[1]!.type;
  if (start === 0) {
    return [
      build(re, reNode, endsType, re.offset, re.length, `${path}.children[0]`, b),
      build(vals, valsNode, valsType, vals.offset, vals.length, `${path}.children[1]`, b),
    ];
  }
  const A = (endsType as { readonly values: TypedArrayConstructor }).values;
  const ends = typed(A, bufferOf(re, 1), re.offset, re.length, { path }, '.children[0].buffers[1]');
  const end = (k: number): number => Number(ends[k]!);
  // The first run whose end is greater than `start`, and the first whose end reaches `start + length`.
  const firstRun = (row: number): number => {
    let lo = 0;
    let hi = ends.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (end(mid) > row) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  };
  const k0 = length === 0 ? 0 : firstRun(start);
  const k1 = length === 0 ? 0 : firstRun(start + length - 1) + 1;
  if (k1 > ends.length) throw invalid(`${path}.children[0]`, `the runs end at ${ends.length === 0 ? 0 : end(ends.length - 1)}, rows up to ${start + length} are needed`);
  const n = k1 - k0;
  const rel = new (A as ArrayKind<TypedArray>)(n);
  const big = rel instanceof BigInt64Array;
  for (let k = 0; k < n; k++) {
    const e = Math.min(end(k0 + k), start + length) - start;
    if (big) (rel as BigInt64Array)[k] = BigInt(e);
    else (rel as Int16Array | Int32Array)[k] = e;
  }
  liveCounters.copiedBytes += rel.byteLength;
  const relView: ArrayView = {
    schema: reNode, length: n, offset: 0, nullCount: 0,
    buffers: [null, new Uint8Array(rel.buffer, rel.byteOffset, rel.byteLength)], children: [], dictionary: null,
  };
  return [
    build(relView, reNode, endsType, 0, n, `${path}.children[0]`, b),
    build(vals, valsNode, valsType, vals.offset + k0, n, `${path}.children[1]`, b, k0),
  ];
}
