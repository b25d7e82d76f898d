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
  const dicts: Dicts = new Map();
  const perColumn = columns.map((c, i) => c.data.map((b, k) => viewOf(b, schema.children[i]!, `table.children[${i}].data[${k}]`, dicts)));
  const struct = (children: ArrayView[], length: number): ArrayView =>
    ({ schema, length, offset: 0, nullCount: 0, buffers: [null], children, dictionary: null });
  if (columns.length === 0) return { schema, batches: [] };

  const lengths = columns[0]!.data.map((b) => b.length);
  const aligned = columns.every((c) => c.data.length === lengths.length && c.data.every((b, k) => b.length === lengths[k]));
  if (aligned) return { schema, batches: lengths.map((n, k) => struct(perColumn.map((vs) => vs[k]!), n)) };

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

function viewOf(batch: Batch<unknown>, node: SchemaNode, path: string, dicts: Dicts): ArrayView {
  const f: BatchFields = batch;
  if (f === null || typeof f !== 'object' || typeof f.length !== 'number' || f.type === undefined) throw invalid(path, 'not a flechette batch');
  if (f.type.typeId !== flechetteTypeId(node)) {
    throw invalid(path, `a batch of flechette type ${f.type.typeId} for a schema of format "${node.format}"`);
  }
  const length = f.length;
  const validity = (): Uint8Array | null => {
    // A bitmap that says nothing is left out: CDataInterface.rst, "ArrowArray.buffers", the validity
    // may be NULL when null_count is 0 (flechette's IPC reader hands an empty one then).
    if (f.nullCount === 0) return null;
    return used(f.validity, (length + 7) >> 3, `${path}.validity`);
  };
  const children = (): ArrayView[] => {
    const cs = f.children ?? [];
    if (cs.length !== node.children.length) throw invalid(`${path}.children`, `${cs.length} children, the schema has ${node.children.length}`);
    return cs.map((c, i) => viewOf(c, node.children[i]!, `${path}.children[${i}]`, dicts));
  };
  const out = (nullCount: number, buffers: (Uint8Array | null)[], kids: ArrayView[] = [], dictionary: ArrayView | null = null): ArrayView =>
    ({ schema: node, length, offset: 0, nullCount, buffers, children: kids, dictionary });

  if (node.dictionary !== null) {
    const indexBytes = (node.type as { readonly bitWidth: number }).bitWidth / 8;
    return out(f.nullCount, [validity(), used(f.values, length * indexBytes, `${path}.values`)], [],
      dictionaryView(f.dictionary, node.dictionary, `${path}.dictionary`, dicts));
  }
  const l = layoutOf(node.type);
  switch (l.kind) {
    case Kind.Null:
      return out(length, []);
    case Kind.Bool:
      return out(f.nullCount, [validity(), used(f.values, (length + 7) >> 3, `${path}.values`)]);
    case Kind.Fixed:
      return out(f.nullCount, [validity(), used(f.values, length * l.width, `${path}.values`)]);
    case Kind.Binary: case Kind.LargeBinary: {
      const offsets = f.offsets;
      const w = l.kind === Kind.Binary ? 4 : 8;
      const offBytes = used(offsets, length === 0 ? 0 : (length + 1) * w, `${path}.offsets`);
      const last = length === 0 ? 0 : Number(offsets![length]!);
      return out(f.nullCount, [validity(), offBytes, used(f.values, last, `${path}.values`)]);
    }
    case Kind.View: {
      const data = f.data ?? [];
      // The variadic sizes the C interface adds (CDataInterface.rst, "Binary view arrays").
      const sizes = BigInt64Array.from(data, (d) => BigInt(d.byteLength));
      return out(f.nullCount, [validity(), used(f.values, length * 16, `${path}.values`), ...data, bytesOf(sizes)]);
    }
    case Kind.List: case Kind.LargeList:
      return out(f.nullCount, [validity(), used(f.offsets, length === 0 ? 0 : (length + 1) * (l.kind === Kind.List ? 4 : 8), `${path}.offsets`)], children());
    case Kind.ListView:
      return out(f.nullCount, [validity(), used(f.offsets, length * l.width, `${path}.offsets`), used(f.sizes, length * l.width, `${path}.sizes`)], children());
    case Kind.FixedList: case Kind.Struct:
      return out(f.nullCount, [validity()], children());
    // Columnar.rst, "Union Layout", "Run-End Encoded Layout": no validity bitmap, null count 0.
    case Kind.SparseUnion:
      return out(0, [used(f.typeIds, length, `${path}.typeIds`)], children());
    case Kind.DenseUnion:
      return out(0, [used(f.typeIds, length, `${path}.typeIds`), used(f.offsets, length * 4, `${path}.offsets`)], children());
    case Kind.RunEnd:
      return out(0, [], children());
  }
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
function used(a: ArrayBufferView | null | undefined, bytes: number, path: string): Uint8Array {
  if (a === null || a === undefined) {
    if (bytes === 0) return new Uint8Array(0);
    throw invalid(path, `missing, but ${bytes} bytes are needed`);
  }
  if (a.byteLength < bytes) throw invalid(path, `${a.byteLength} bytes, but ${bytes} are needed`);
  return new Uint8Array(a.buffer, a.byteOffset, bytes);
}
