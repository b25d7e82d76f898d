/**
 * flechette -> `ArrayView`: a batch (`viewOfBatch`), a column (`viewsOfColumn`) or a table
 * (`viewsOfTable`) as the library's target-neutral arrays, over flechette's own typed arrays
 * (zero-copy), so that `exportArray` sends flechette data out as `ArrowArray`s without copying.
 *
 * A flechette batch has no offset: every view made here has offset 0, and its buffers are byte views
 * of the batch's typed arrays, in C order (CDataInterface.rst, "ArrowArray.buffers"), ending where
 * the array's use of them ends. Two things are made, both small and neither a copy of data: the int64
 * sizes buffer of a binary or utf8 view array (CDataInterface.rst, "Binary view arrays": flechette
 * keeps none), and a view per row range where a table's columns are batched differently (below).
 * Loads flechette, never arrow-js.
 */
import { type Batch, type Column, type DataType, type Field, type Table, type TypedArray } from '@uwdata/flechette';
import type { ArrayView } from '../array/view.js';
import { invalid, unsupported } from '../errors.js';
import { Kind, layoutOf } from '../schema/layout.js';
import type { SchemaNode } from '../schema/node.js';
import { flechetteTypeId, schemaNodeOfField, schemaNodeOfSchemaObject, schemaNodeOfType } from './types.js';

/**
 * What this conversion reads of a flechette batch (batch.js): the fields every batch has, and those
 * of some classes only (`typeIds` of unions, `data` of views, `dictionary` of dictionary batches),
 * which flechette's declarations leave out. A field a batch class does not use may be undefined.
 */
interface BatchFields {
  readonly length: number;
  readonly nullCount: number;
  readonly type: DataType;
  readonly validity?: Uint8Array | null | undefined;
  readonly values?: TypedArray | null | undefined;
  readonly offsets?: Int32Array | BigInt64Array | null | undefined;
  readonly sizes?: Int32Array | BigInt64Array | null | undefined;
  readonly children?: readonly Batch<unknown>[] | null | undefined;
  readonly typeIds?: Int8Array | null | undefined;
  readonly data?: readonly Uint8Array[] | null | undefined;
  readonly dictionary?: Column<unknown> | null | undefined;
}

/** One conversion: the view made for each dictionary column, so that batches sharing one share its view. */
type Dicts = Map<Column<unknown>, ArrayView>;

/**
 * The `ArrayView` of a flechette batch: offset 0, `nullCount` the batch's, buffers over its typed
 * arrays (zero-copy; no validity where nothing is null), children and dictionary likewise. `node` is
 * the batch's schema (by default that of its type, as an unnamed nullable field); it must be of the
 * batch's type.
 *
 * @example
 * const table = tableFromIPC(bytes);
 * const view = viewOfBatch(table.getChildAt(0).data[0], schemaNodeOfField(table.schema.fields[0]));
 * const arrayPtr = exportArray(view);
 */
export function viewOfBatch(batch: Batch<unknown>, node: SchemaNode = schemaNodeOfType(batch.type), path = 'batch'): ArrayView {
  return viewOf(batch, node, path, new Map());
}

/**
 * The `ArrayView`s of a column, one per batch; `field` (a flechette `Field` or a `SchemaNode`)
 * names the column and its nullability, by default an unnamed nullable field of the column's type.
 *
 * @example
 * const views = viewsOfColumn(table.getChild('x'), table.schema.fields[0]);
 */
export function viewsOfColumn(column: Column<unknown>, field?: Field | SchemaNode): ArrayView[] {
  const node = field === undefined ? schemaNodeOfType(column.type) : isNode(field) ? field : schemaNodeOfField(field);
  const dicts: Dicts = new Map();
  return column.data.map((b, i) => viewOf(b, node, `column.data[${i}]`, dicts));
}

/** A table as record batches: its schema's struct node and one struct `ArrayView` of it per batch. */
export interface TableViews {
  /** The record batches' schema: a struct (`+s`) with a child per field (`schemaNodeOfSchema`). */
  readonly schema: SchemaNode;
  /** One struct array per record batch, its children the columns' arrays. */
  readonly batches: ArrayView[];
}

/**
 * A flechette `Table` as record batches (CDataInterface.rst, "Record batches": a struct array per
 * batch). Where every column has batches of the same lengths (what flechette's own `Table` assumes:
 * its row objects take batch b of every column), batch b of the table is batch b of each column.
 * Where they differ, the rows are cut at every column's batch boundary and each piece is a view of
 * its column's batch at an offset (zero-copy; its null count -1, "not computed", where the batch has
 * nulls): no bytes are copied either way.
 *
 * @example
 * const { schema, batches } = viewsOfTable(tableFromIPC(bytes));
 * const schemaPtr = exportSchema(schema);
 * const arrays = batches.map((b) => exportArray(b));
 */
export function viewsOfTable(table: Table): TableViews {
  const schema = schemaNodeOfSchemaObject(table.schema);
  const columns = table.children;
  if (columns.length !== schema.children.length) {
    throw invalid('table.children', `${columns.length} columns, the schema has ${schema.children.length} fields`);
  }
  if (columns.length === 0) return { schema, batches: [] };
  const dicts: Dicts = new Map();
  const perColumn: ArrayView[][] = new Array(columns.length);
  for (let i = 0; i < columns.length; i++) {
    const data = columns[i]!.data;
    const vs: ArrayView[] = (perColumn[i] = new Array(data.length));
    const type = table.schema.fields[i]?.type;
    for (let k = 0; k < data.length; k++) vs[k] = viewOf(data[k]!, schema.children[i]!, new ColumnPlace(i, k), dicts, type);
  }
  const struct = (children: ArrayView[], length: number): ArrayView =>
    ({ schema, length, offset: 0, nullCount: 0, buffers: [null], children, dictionary: null });

  const first = columns[0]!.data;
  let aligned = true;
  for (let i = 1; i < columns.length && aligned; i++) {
    const data = columns[i]!.data;
    if (data.length !== first.length) aligned = false;
    for (let k = 0; k < data.length && aligned; k++) if (data[k]!.length !== first[k]!.length) aligned = false;
  }
  if (aligned) {
    const batches: ArrayView[] = new Array(first.length);
    for (let k = 0; k < first.length; k++) {
      const children: ArrayView[] = new Array(columns.length);
      for (let i = 0; i < columns.length; i++) children[i] = perColumn[i]![k]!;
      batches[k] = struct(children, first[k]!.length);
    }
    return { schema, batches };
  }

  const rows = columns[0]!.length;
  const cuts = new Set<number>([0, rows]);
  for (const c of columns) {
    if (c.length !== rows) throw invalid('table.children', `columns of ${c.length} and ${rows} rows`);
    let at = 0;
    for (const b of c.data) cuts.add((at += b.length));
  }
  const bounds = [...cuts].sort((a, b) => a - b);
  const batches: ArrayView[] = [];
  const next = columns.map(() => ({ k: 0, start: 0 }));
  for (let s = 0; s + 1 < bounds.length; s++) {
    const from = bounds[s]!;
    const n = bounds[s + 1]! - from;
    const children = columns.map((c, i) => {
      const pos = next[i]!;
      while (pos.start + c.data[pos.k]!.length <= from) pos.start += c.data[pos.k++]!.length;
      return slice(perColumn[i]![pos.k]!, from - pos.start, n);
    });
    batches.push(struct(children, n));
  }
  return { schema, batches };
}

function isNode(x: Field | SchemaNode): x is SchemaNode {
  return typeof (x as SchemaNode).format === 'string';
}

/** Rows `from .. from + n` of a view of offset 0, as a view at an offset (CDataInterface.rst, "ArrowArray.offset"). */
function slice(v: ArrayView, from: number, n: number): ArrayView {
  if (from === 0 && n === v.length) return v;
  const t = v.schema.type.id;
  const nullCount = t === 'null' ? n : v.nullCount === 0 || t === 'union' || t === 'run_end_encoded' ? 0 : -1;
  return { schema: v.schema, length: n, offset: v.offset + from, nullCount, buffers: v.buffers, children: v.children, dictionary: v.dictionary };
}

// --- one batch --------------------------------------------------------------------------------

/** Batch `k` of a table's column `i`, as errors name it: the string made only for one (a string per column per batch cost at every export). */
class ColumnPlace {
  constructor(readonly column: number, readonly batch: number) {}
  toString(): string {
    return `table.children[${this.column}].data[${this.batch}]`;
  }
}

/** Where a batch is: a path, or a table's column's batch (`ColumnPlace`). */
type Where = string | ColumnPlace;

/**
 * The view of one batch of the schema `node`. `known`: the type `node` was made of, where the caller
 * has it (a table's field's): a batch of that very type object needs no check of its type id.
 */
function viewOf(batch: Batch<unknown>, node: SchemaNode, path: Where, dicts: Dicts, known?: DataType): ArrayView {
  const f: BatchFields = batch;
  if (f === null || typeof f !== 'object' || typeof f.length !== 'number' || f.type === undefined) throw invalid(String(path), 'not a flechette batch');
  if (f.type !== known && f.type.typeId !== flechetteTypeId(node)) {
    throw invalid(String(path), `a batch of flechette type ${f.type.typeId} for a schema of format "${node.format}"`);
  }
  // Plain calls, no closures per batch: a table's export makes one view per column per batch.
  const length = f.length;
  const nulls = f.nullCount;
  if (node.dictionary !== null) {
    const indexBytes = (node.type as { readonly bitWidth: number }).bitWidth / 8;
    return out(node, length, nulls, [validityOf(f, path), used(f.values, length * indexBytes, path, '.values')], NO_VIEWS,
      dictionaryView(f.dictionary, node.dictionary, `${String(path)}.dictionary`, dicts));
  }
  const l = layoutOf(node.type);
  switch (l.kind) {
    case Kind.Null:
      return out(node, length, length, [], NO_VIEWS, null);
    case Kind.Bool:
      return out(node, length, nulls, [validityOf(f, path), used(f.values, (length + 7) >> 3, path, '.values')], NO_VIEWS, null);
    case Kind.Fixed:
      return out(node, length, nulls, [validityOf(f, path), used(f.values, length * l.width, path, '.values')], NO_VIEWS, null);
    case Kind.Binary: case Kind.LargeBinary: {
      const offsets = f.offsets;
      const w = l.kind === Kind.Binary ? 4 : 8;
      const offBytes = used(offsets, length === 0 ? 0 : (length + 1) * w, path, '.offsets');
      const last = length === 0 ? 0 : Number(offsets![length]!);
      return out(node, length, nulls, [validityOf(f, path), offBytes, used(f.values, last, path, '.values')], NO_VIEWS, null);
    }
    case Kind.View: {
      const data = f.data ?? [];
      // The variadic sizes the C interface adds (CDataInterface.rst, "Binary view arrays").
      const sizes = BigInt64Array.from(data, (d) => BigInt(d.byteLength));
      return out(node, length, nulls, [validityOf(f, path), used(f.values, length * 16, path, '.values'), ...data, bytesOf(sizes)], NO_VIEWS, null);
    }
    case Kind.List: case Kind.LargeList:
      return out(node, length, nulls, [validityOf(f, path), used(f.offsets, length === 0 ? 0 : (length + 1) * (l.kind === Kind.List ? 4 : 8), path, '.offsets')], childViews(f, node, path, dicts), null);
    case Kind.ListView:
      return out(node, length, nulls, [validityOf(f, path), used(f.offsets, length * l.width, path, '.offsets'), used(f.sizes, length * l.width, path, '.sizes')], childViews(f, node, path, dicts), null);
    case Kind.FixedList: case Kind.Struct:
      return out(node, length, nulls, [validityOf(f, path)], childViews(f, node, path, dicts), null);
    // Columnar.rst, "Union Layout", "Run-End Encoded Layout": no validity bitmap, null count 0.
    case Kind.SparseUnion:
      return out(node, length, 0, [used(f.typeIds, length, path, '.typeIds')], childViews(f, node, path, dicts), null);
    case Kind.DenseUnion:
      return out(node, length, 0, [used(f.typeIds, length, path, '.typeIds'), used(f.offsets, length * 4, path, '.offsets')], childViews(f, node, path, dicts), null);
    case Kind.RunEnd:
      return out(node, length, 0, [], childViews(f, node, path, dicts), null);
  }
}

const NO_VIEWS: readonly ArrayView[] = Object.freeze([]);

/** A view of offset 0 (a flechette batch has none). */
function out(node: SchemaNode, length: number, nullCount: number, buffers: (Uint8Array | null)[], children: readonly ArrayView[], dictionary: ArrayView | null): ArrayView {
  return { schema: node, length, offset: 0, nullCount, buffers, children, dictionary };
}

/** A batch's validity bitmap as buffer 0. */
function validityOf(f: BatchFields, path: Where): Uint8Array | null {
  // A bitmap that says nothing is left out: CDataInterface.rst, "ArrowArray.buffers", the validity
  // may be NULL when null_count is 0 (flechette's IPC reader hands an empty one then).
  if (f.nullCount === 0) return null;
  return used(f.validity, (f.length + 7) >> 3, path, '.validity');
}

/** The views of a batch's children, of the schema's children. */
function childViews(f: BatchFields, node: SchemaNode, where: Where, dicts: Dicts): ArrayView[] {
  const cs = f.children ?? [];
  const path = String(where);
  if (cs.length !== node.children.length) throw invalid(`${path}.children`, `${cs.length} children, the schema has ${node.children.length}`);
  const views: ArrayView[] = new Array(cs.length);
  for (let i = 0; i < cs.length; i++) views[i] = viewOf(cs[i]!, node.children[i]!, `${path}.children[${i}]`, dicts);
  return views;
}

/** The dictionary of a dictionary batch: a C array has one dictionary array, so a column of one batch. */
function dictionaryView(column: Column<unknown> | null | undefined, node: SchemaNode, path: string, dicts: Dicts): ArrayView {
  if (column === null || column === undefined) throw invalid(path, 'a dictionary batch without its dictionary (setDictionary was not called)');
  const made = dicts.get(column);
  if (made !== undefined) return made;
  if (column.data.length !== 1) {
    // flechette appends a delta dictionary batch as another batch of the column (decode/table-from-ipc.js).
    throw unsupported(path, `a dictionary of ${column.data.length} batches: a C array's dictionary is one array (concatenate it first)`);
  }
  const v = viewOf(column.data[0]!, node, `${path}.data[0]`, dicts);
  dicts.set(column, v);
  return v;
}

/** The bytes of a typed array, zero-copy. */
function bytesOf(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** The first `bytes` bytes of a typed array, zero-copy; one too short for them is refused. */
function used(a: ArrayBufferView | null | undefined, bytes: number, path: Where, field: string): Uint8Array {
  // The place is `path` + `field`, joined only for an error (a string per buffer per batch otherwise).
  if (a === null || a === undefined) {
    if (bytes === 0) return new Uint8Array(0);
    throw invalid(String(path) + field, `missing, but ${bytes} bytes are needed`);
  }
  if (a.byteLength < bytes) throw invalid(String(path) + field, `${a.byteLength} bytes, but ${bytes} are needed`);
  return new Uint8Array(a.buffer, a.byteOffset, bytes);
}
