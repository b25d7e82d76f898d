/**
 * The core of arrow-device/flechette (index.ts is the entry: this and the device, async and share
 * routes): import into flechette and export from it over the target-neutral import path, stream
 * reader and writers. arrow-device/flechette/adbc builds on this module alone, so a query loads no
 * device, async or share code (test/flechette/loads.test.ts).
 */
import { Column, Table, type Batch, type DataType, type ExtractionOptions, type Field, type Schema } from '@uwdata/flechette';
import { ArrowSymbols, hasArrowMethod, isArrowExportable, type ArrowArrayExportable, type ArrowSchemaExportable, type ArrowStreamExportable } from '../abi/protocol.js';
import { isSchemaNode, ptrArrayArg } from '../args.js';
import {
  exportArrayView, exportBatchView, exportSchemaNode, exportTableViews, memoryOf, type BatchExportOptions, type ExportOptions, type MemoryOption,
} from '../array/core.js';
import { checkRequestedSchema, exchangeOptions, importFromArrayHandles, importFromHandle, type ExchangeImportOptions } from '../array/exchange.js';
import { consume, importWith, PlanOf, quietly, readSchemaPtr, type ImportCoreOptions } from '../array/importer.js';
import { defineReleasable, owned, ownersOf, releaseImport, type Releasable } from '../array/owned.js';
import { ImportOwner } from '../array/owner.js';
import { planOfNode, type Plan } from '../array/plan.js';
import { validationLevel } from '../array/read.js';
import { ImportedView, viewOf, type ArrayView } from '../array/view.js';
import { invalid } from '../errors.js';
import { releaseStruct } from '../memory/cstruct.js';
import { ArrayExportHandles, ExportHandle, TableExportHandles } from '../memory/handle.js';
import type { Memory, Ptr } from '../memory/memory.js';
import type { SchemaNode } from '../schema/node.js';
import { exportArrayStream as exportViewStream, type StreamExportOptions } from '../stream/export.js';
import {
  importArrayStream as importViewStream, type RecordBatchStreamImport, type StreamHandOn, type StreamImportOptions, type StreamTarget,
} from '../stream/import.js';
import { tableOfViews, columnOfViews, type TableClasses } from './build.js';
import { flechetteSchema, flechetteField, schemaNodeOfField, schemaNodeOfSchemaObject, schemaNodeOfType } from './types.js';
import { viewOfBatch, viewsOfTable } from './view.js';

export type { ExtractionOptions };

/** Options of the flechette importers: the memory, `copy`, the validation level, and flechette's own extraction options. */
export interface FlechetteImportOptions extends MemoryOption, Omit<ImportCoreOptions, 'expand'>, ExtractionOptions {}

/**
 * The options of an import from a protocol object: the memory, and `requestedSchema` (PyCapsuleInterface.rst,
 * "Schema Requests"), here also a flechette `Schema`, `Field` or `DataType` (exported for the producer to read).
 */
export interface FlechetteExchangeOptions extends Omit<ExchangeImportOptions, 'requestedSchema'> {
  /**
   * The schema to ask the producer for: an object implementing `arrow.c_schema`, a flechette `Schema`,
   * `Field` or `DataType`, or a `SchemaNode`. The producer may ignore it: the data is always read by
   * the schema the producer returns.
   */
  requestedSchema?: ArrowSchemaExportable | Schema | Field | DataType | SchemaNode;
}

/** @internal Options with a flechette `requestedSchema` made a `SchemaNode`, which the neutral exchange (src/array/exchange.ts) takes. */
export function flechetteRequest<O extends FlechetteExchangeOptions>(o: O): O & ExchangeImportOptions {
  const r = o.requestedSchema as unknown;
  if (r === undefined || r === null || typeof r !== 'object' || hasArrowMethod(r, ArrowSymbols.schema) || isSchemaNode(r)) return o as O & ExchangeImportOptions;
  return { ...o, requestedSchema: nodeOf(memoryOf(o), r as FlechetteSchemaLike, false) };
}

/** A schema argument: a flechette `Schema` (a record batch's), `Field` or `DataType` (an array's), a `SchemaNode`, or an `ArrowSchema` pointer (read and released). */
export type FlechetteSchemaLike = Schema | Field | DataType | SchemaNode | Ptr;

// --- the objects an import returns ---------------------------------------------------------------

/* eslint-disable @typescript-eslint/no-explicit-any -- flechette's own default for its type parameter */
/**
 * A flechette `Table` an import returned: releasable (`release()`, `released`, `using`). Its other
 * members are flechette's `Table`'s.
 *
 * @example
 * using table = importRecordBatch(arrayPtr, schemaPtr);  // an ImportedTable
 * table.getChild('x')?.at(0);
 */
export class ImportedTable extends Table {
  // The reads a program starts from (arquero's `fromArrow` takes its columns here) say why they cannot read
  // once released, as the arrow-js target's objects do: a check of the owners per call, not per value.
  // flechette's classes are not patched: these are overrides in this subclass.
  override getChildAt(index: number): ReturnType<Table['getChildAt']> {
    readable(this, `table.getChildAt(${index})`);
    return super.getChildAt(index);
  }

  override getChild(name: string): ReturnType<Table['getChild']> {
    readable(this, `table.getChild(${JSON.stringify(name)})`);
    return super.getChild(name);
  }

  override toArray(): ReturnType<Table['toArray']> {
    readable(this, 'table.toArray()');
    return super.toArray();
  }

  override toColumns(): ReturnType<Table['toColumns']> {
    readable(this, 'table.toColumns()');
    return super.toColumns();
  }

  override at(index: number): ReturnType<Table['at']> {
    readable(this, `table.at(${index})`);
    return super.at(index);
  }

  /** The table's rows, as flechette's `Table` iterates them; throws the `released` error once released. */
  override [Symbol.iterator](): ReturnType<Table[typeof Symbol.iterator]> {
    readable(this, 'table[Symbol.iterator]()');
    return super[Symbol.iterator]();
  }
}
export interface ImportedTable extends Releasable {}
defineReleasable(ImportedTable.prototype);

/** Throws the `released` error of the first released owner of `x` (or of the table it is a column of). */
function readable(x: object, path: string): void {
  const by = ownersOf(x) ?? ownersOf((x as { [TABLE]?: ImportedTable })[TABLE] ?? x);
  if (by !== undefined) for (const o of by) o.check(path, 'a read');
}

/**
 * The table an imported table's column belongs to: its owners are the column's. A property of the
 * column (our subclass), not a WeakMap: a WeakMap entry per column cost more than building the
 * column (bench:overhead, 100 columns).
 */
const TABLE = Symbol('arrow-device.table');

/**
 * A flechette `Column` an import returned (one array, or a list of arrays of one type): releasable.
 *
 * @example
 * using column = importColumn(arrayPtr, schemaPtr);
 * column.toArray();
 */
export class ImportedColumn<T = any> extends Column<T> {
  /** The table the column is of, set by `tableOver`: a field of every column, so setting it changes no column's shape. */
  [TABLE]: ImportedTable | undefined = undefined;

  // As ImportedTable's reads: `at(i)`, a per-value read flechette sets on each column, reads `undefined` instead.
  override toArray(): ReturnType<Column<T>['toArray']> {
    readable(this, 'column.toArray()');
    return super.toArray();
  }

  /** The column's values, as flechette's `Column` iterates them; throws the `released` error once released. */
  override [Symbol.iterator](): Iterator<T | null> {
    readable(this, 'column[Symbol.iterator]()');
    return super[Symbol.iterator]();
  }
}
export interface ImportedColumn<T = any> extends Releasable {}
defineReleasable(ImportedColumn.prototype);
/* eslint-enable @typescript-eslint/no-explicit-any */

/**
 * What keeps an import's record alive for as long as a flechette batch over it is reachable: a
 * native view's `ArrayBuffer` is kept by every typed array over it, but wasm memory's views share
 * the module's buffer, so there the owner (src/array/owner.ts) counts on the objects built over the
 * import to hold the record. flechette's batches are those objects; a hidden property does it
 * without touching flechette's classes.
 */
const KEEP = Symbol('arrow-device.keep');

function keepAlive(batches: readonly Batch<unknown>[], record: object): void {
  for (const b of batches) {
    Object.defineProperty(b, KEEP, { value: record });
    const kids = (b as { children?: Batch<unknown>[] }).children;
    if (Array.isArray(kids)) keepAlive(kids, record);
    const dict = (b as { dictionary?: Column<unknown> | null }).dictionary;
    if (dict instanceof Column) keepAlive(dict.data, record);
  }
}

/** The classes an import's table is built of. */
const IMPORTED: TableClasses = { Table: ImportedTable, Column: ImportedColumn };

/**
 * @internal The `ImportedTable` of record batches of `node` over imported views (the caller records its
 * owners): its columns `ImportedColumn`s that answer for the table's owners, its batches keeping the
 * imports' records reachable where views share one buffer (wasm memory; a native view's own buffer is
 * kept by the typed arrays over it).
 */
export function tableOver(node: SchemaNode, views: readonly ArrayView[], opts: ExtractionOptions): ImportedTable {
  const out = tableOfViews(node, views, opts, IMPORTED) as ImportedTable;
  let keep = false;
  for (let k = 0; k < views.length && !keep; k++) {
    const v = views[k];
    keep = v instanceof ImportedView && v.read.owner !== null && v.read.owner.mem.viewsShareBuffer === true;
  }
  const columns = out.children;
  for (let i = 0; i < columns.length; i++) {
    const c = columns[i] as ImportedColumn;
    if (keep) keepAlive(c.data, views);
    c[TABLE] = out;
  }
  return out;
}

// --- schemas ---------------------------------------------------------------------------------------

/** The nodes made of flechette `Field` and `DataType` objects (see `nodeOf`; a `Schema`'s: types.ts). */
const nodesOf = new WeakMap<object, SchemaNode>();

/** The node of a schema argument; a pointer is read (and released: import consumes it). */
function nodeOf(m: Memory, schema: FlechetteSchemaLike, batch: boolean): SchemaNode {
  if (typeof schema === 'bigint') return readSchemaPtr(m, schema, false, 'schema', 'schema');
  if (isSchemaNode(schema)) return schema;
  if (typeof schema === 'object' && schema !== null) {
    // A schema object given again (every batch of a program's loop) gives the node made the first time, and so
    // its plan: as an arrow-js Schema finds its plan (src/array/plan-arrowjs.ts), by the object.
    const known = nodesOf.get(schema);
    if (known !== undefined && (!batch || known.type.id === 'struct')) return known;
    let node: SchemaNode | undefined;
    // A Schema's node is the one its export makes too (types.ts keeps it per schema object).
    if (Array.isArray((schema as Schema).fields)) return schemaNodeOfSchemaObject(schema as Schema);
    else if (!batch && typeof (schema as Field).name === 'string' && typeof (schema as Field).type === 'object') node = schemaNodeOfField(schema as Field);
    else if (!batch && typeof (schema as DataType).typeId === 'number') node = schemaNodeOfType(schema as DataType);
    if (node !== undefined) {
      nodesOf.set(schema, node);
      return node;
    }
  }
  throw invalid(
    'schema',
    batch
      ? 'expected a flechette Schema, a SchemaNode or a pointer (bigint) to an ArrowSchema'
      : 'expected a flechette Schema, Field or DataType, a SchemaNode or a pointer (bigint) to an ArrowSchema',
  );
}

/**
 * Reads an `ArrowSchema` (a pointer, released unless `keep`; or an object implementing
 * `arrow.c_schema`) into a flechette `Schema`: a record batch's schema (a struct, `+s`).
 *
 * @example
 * const schema = importSchema(schemaPtr);
 * schema.fields.map((f) => f.name);
 */
export function importSchema(ptr: Ptr | ArrowSchemaExportable, opts: MemoryOption & { keep?: boolean } & FlechetteExchangeOptions = {}): Schema {
  return flechetteSchema(importNode(ptr, opts, 'importSchema'));
}

/**
 * Reads an `ArrowSchema` of any type (a pointer, released unless `keep`; or an object implementing
 * `arrow.c_schema`) into a flechette `Field`, named as the schema names it.
 *
 * @example
 * const field = importField(schemaPtr);
 * field.type.typeId;   // flechette's Type
 */
export function importField(ptr: Ptr | ArrowSchemaExportable, opts: MemoryOption & { keep?: boolean } & FlechetteExchangeOptions = {}): Field {
  return flechetteField(importNode(ptr, opts, 'importField'));
}

function importNode(ptr: Ptr | ArrowSchemaExportable, opts: MemoryOption & { keep?: boolean } & FlechetteExchangeOptions, fn: string): SchemaNode {
  if (isArrowExportable(ptr)) {
    const o = flechetteRequest(exchangeOptions<MemoryOption & FlechetteExchangeOptions>(opts, fn));
    return importFromHandle(ptr, ArrowSymbols.schema, o, (p, m) => readSchemaPtr(m, p), () => undefined);
  }
  return readSchemaPtr(memoryOf(opts), ptr, opts.keep ?? false, 'schema', 'ptr');
}

// --- arrays and record batches ----------------------------------------------------------------------

/**
 * Imports an `ArrowArray` of any type as a flechette `Column` of one batch, zero-copy. `schema`:
 * its `ArrowSchema` (a pointer, read and released), a flechette `Field` or `DataType`, or a
 * `SchemaNode`. `source` may be an object implementing `arrow.c_array` in place of both pointers.
 *
 * @example
 * using column = importColumn(arrayPtr, schemaPtr);
 * column.at(0);
 */
export function importColumn(source: ArrowArrayExportable, opts?: FlechetteImportOptions & FlechetteExchangeOptions): ImportedColumn;
export function importColumn(ptr: Ptr, schema: FlechetteSchemaLike, opts?: FlechetteImportOptions): ImportedColumn;
export function importColumn(ptr: Ptr | ArrowArrayExportable, schema?: FlechetteSchemaLike | FlechetteImportOptions, opts: FlechetteImportOptions = {}): ImportedColumn {
  if (isArrowExportable(ptr)) return viaArray(ptr, schema, 'importColumn', (a, s, o) => importColumn(a, s, o));
  return importOne(ptr, schema as FlechetteSchemaLike, opts, false, (plan, view) => {
    const c = columnOfViews(plan.node, [view], opts);
    keepAlive(c.data, view);
    return new ImportedColumn(c.data as Batch<unknown>[], c.type);
  });
}

/**
 * Imports a record batch (an `ArrowArray` of a struct, `+s`, with its schema) as a flechette `Table`
 * with one batch per column, zero-copy. `source` may implement `arrow.c_array`.
 *
 * @example
 * using table = importRecordBatch(arrayPtr, schemaPtr);
 * table.toColumns();
 */
export function importRecordBatch(source: ArrowArrayExportable, opts?: FlechetteImportOptions & FlechetteExchangeOptions): ImportedTable;
export function importRecordBatch(ptr: Ptr, schema: Schema | SchemaNode | Ptr, opts?: FlechetteImportOptions): ImportedTable;
export function importRecordBatch(ptr: Ptr | ArrowArrayExportable, schema?: Schema | SchemaNode | Ptr | FlechetteImportOptions, opts: FlechetteImportOptions = {}): ImportedTable {
  if (isArrowExportable(ptr)) return viaArray(ptr, schema, 'importRecordBatch', (a, s, o) => importRecordBatch(a, s, o));
  return importOne(ptr, schema as FlechetteSchemaLike, opts, true, (plan, view) => tableOver(plan.node, [view], opts));
}

/** One array through the one import path (src/array/importer.ts), built by `build` over its view. */
function importOne<R extends object>(ptr: Ptr, schema: FlechetteSchemaLike, opts: FlechetteImportOptions, batch: boolean, build: (plan: Plan, view: ArrayView) => R): R {
  const m = memoryOf(opts);
  let node: SchemaNode;
  try {
    node = nodeOf(m, schema, batch);
    if (batch && node.type.id !== 'struct') throw invalid('schema.format', `a schema (record batch) must be a struct ("+s"), got "${node.format}"`);
  } catch (e) {
    // Import consumes its input: the array too.
    if (typeof ptr === 'bigint' && ptr !== 0n) quietly(() => releaseStruct(m, 'ArrowArray', ptr));
    throw e;
  }
  const c = consume(m, 'ArrowArray', ptr, node, opts, 'array', PlanOf.Array);
  const plan = c.plan!;
  return importWith(ImportOwner.move(m, ptr, 'ArrowArray', c.staged, c.at), plan, opts, c.level, 'array', (read) => build(plan, viewOf(read, plan.root, 0)));
}

function viaArray<R extends object>(source: object, optsArg: unknown, fn: string, imp: (array: Ptr, schema: Ptr, opts: FlechetteImportOptions) => R): R {
  const o = flechetteRequest(exchangeOptions<FlechetteImportOptions & FlechetteExchangeOptions>(optsArg, fn));
  return importFromArrayHandles(source, ArrowSymbols.array, o, (a, s, m) => imp(a, s, { ...o, memory: m }), releaseImport);
}

/**
 * Imports record batches of one schema as one flechette `Table` (its columns have a batch per
 * record batch), zero-copy; or, from an object implementing `arrow.c_stream` (read to its end) or
 * `arrow.c_array`, what it holds.
 *
 * @example
 * using table = importTable([array1, array2], schemaPtr);
 * table.numRows;
 */
export function importTable(source: ArrowStreamExportable | ArrowArrayExportable, opts?: FlechetteImportOptions & FlechetteExchangeOptions): ImportedTable;
export function importTable(ptrs: readonly Ptr[], schema: Schema | SchemaNode | Ptr, opts?: FlechetteImportOptions): ImportedTable;
export function importTable(
  ptrs: readonly Ptr[] | ArrowStreamExportable | ArrowArrayExportable,
  schema?: Schema | SchemaNode | Ptr | FlechetteImportOptions,
  opts: FlechetteImportOptions = {},
): ImportedTable {
  if (!Array.isArray(ptrs) && typeof ptrs === 'object' && ptrs !== null) {
    const o = exchangeOptions<FlechetteImportOptions & FlechetteExchangeOptions>(schema, 'importTable');
    if (hasArrowMethod(ptrs, ArrowSymbols.stream)) return importArrayStream(ptrs as ArrowStreamExportable, o).toTable();
    return viaArray(ptrs, o, 'importTable', (a, s, oo) => importRecordBatch(a, s, oo));
  }
  const list = ptrs as readonly Ptr[];
  const m = memoryOf(opts);
  try {
    ptrArrayArg(list, 'ptrs', m, m.layouts.ArrowArray.size, 'ArrowArrays');
  } catch (e) {
    if (typeof schema === 'bigint' && schema !== 0n) releaseStruct(m, 'ArrowSchema', schema);
    throw e;
  }
  let plan: Plan;
  try {
    const node = nodeOf(m, schema as FlechetteSchemaLike, true);
    if (node.type.id !== 'struct') throw invalid('schema.format', `a schema (record batch) must be a struct ("+s"), got "${node.format}"`);
    plan = planOfNode(node, {});
    validationLevel(opts.validate);
  } catch (e) {
    for (const p of list) if (typeof p === 'bigint') quietly(() => releaseStruct(m, 'ArrowArray', p));
    throw e;
  }
  const views: ArrayView[] = [];
  for (let i = 0; i < list.length; i++) {
    try {
      const c = consume(m, 'ArrowArray', list[i]!, undefined, opts, 'arrays', PlanOf.None, i);
      views.push(importWith(ImportOwner.move(m, list[i]!, 'ArrowArray', c.staged, c.at), plan, opts, c.level, 'arrays', (read) => viewOf(read, plan.root, 0), null, i));
    } catch (e) {
      for (const v of views) releaseImport(v);
      for (const p of list.slice(i + 1)) if (typeof p === 'bigint') quietly(() => releaseStruct(m, 'ArrowArray', p));
      throw e;
    }
  }
  return tableOfImports(plan.node, views, views, opts);
}

/** One table over imported views (`of`: the objects the imports returned, whose owners the table takes); on a failure they are released. */
function tableOfImports(node: SchemaNode, views: ArrayView[], of: readonly object[], opts: ExtractionOptions): ImportedTable {
  let t: ImportedTable;
  try {
    t = tableOver(node, views, opts);
  } catch (e) {
    for (const v of of) quietly(() => releaseImport(v));
    throw e;
  }
  return owned(t, of.flatMap((v) => ownersOf(v) ?? []));
}

// --- streams ------------------------------------------------------------------------------------------

/** Options of `importArrayStream`: the importers' and the reader's (`keep`, `offThread`, `onProducerError`, ...). */
export interface FlechetteStreamOptions extends FlechetteImportOptions, Omit<StreamImportOptions, 'view' | 'target' | 'expand' | keyof DeviceOnly>, FlechetteExchangeOptions {}

/** The device options of the main entry's stream reader, which a flechette reader of a plain stream has no use for. */
type DeviceOnly = Pick<StreamImportOptions, 'toHost' | 'stream'>;

/**
 * A reader of an `ArrowArrayStream` as flechette tables, one per record batch, zero-copy: the main
 * entry's reader (src/stream/import.ts), its items built by the flechette target. It keeps one batch
 * alive at a time: the table it handed out is released when it hands out the next or when the
 * reading ends, unless kept (`keep(table)`, the `keep` option, `readAll()`, `toTable()`). `for...of`
 * reads on the JS thread, `for await` with `offThread` off it; `schema` is flechette's.
 *
 * @example
 * using reader = importArrayStream(streamPtr);
 * for (const batch of reader) total += sum(batch.getChild('x')!.toArray());
 */
export type FlechetteStreamReader = RecordBatchStreamImport<ImportedTable, ImportedTable, Schema> & StreamHandOn;

/** The view each item of a flechette reader was built over: `toTable` builds one table over them all. */
const viewOfItem = new WeakMap<ImportedTable, ArrayView>();

/** @internal The flechette target of a stream reader (src/stream/import.ts `StreamTarget`); the ADBC target's too. */
export function flechetteStreamTarget(opts: ExtractionOptions): StreamTarget<ImportedTable, ImportedTable, Schema> {
  return {
    item(read, plan) {
      const view = viewOf(read, plan.root, 0);
      const t = tableOver(plan.node, [view], opts);
      viewOfItem.set(t, view);
      return t;
    },
    table(items, node) {
      return tableOfImports(node, items.map((t) => viewOfItem.get(t)!), items, opts);
    },
    schema: (node) => flechetteSchema(node),
  };
}

/**
 * Imports an `ArrowArrayStream` (a pointer, or an object implementing `arrow.c_stream`) as a reader
 * of flechette tables.
 *
 * @example
 * const table = importArrayStream(streamPtr).toTable();
 * aq.fromArrow(table);    // arquero reads flechette tables
 */
export function importArrayStream(ptr: Ptr | ArrowStreamExportable, opts: FlechetteStreamOptions = {}): FlechetteStreamReader {
  return importViewStream(ptr, { ...flechetteRequest(opts), target: flechetteStreamTarget(opts) }) as unknown as FlechetteStreamReader;
}

// --- export -------------------------------------------------------------------------------------------

/**
 * Exports a flechette `Schema` (a record batch's), `Field` or `DataType`, or a `SchemaNode`, as an
 * `ArrowSchema`; with `{ handle: true }`, an owned handle.
 *
 * @example
 * const schemaPtr = exportSchema(table.schema);
 */
export function exportSchema(s: Schema | Field | DataType | SchemaNode, opts: ExportOptions & { handle: true }): ExportHandle;
export function exportSchema(s: Schema | Field | DataType | SchemaNode, opts?: ExportOptions): Ptr;
export function exportSchema(s: Schema | Field | DataType | SchemaNode, opts: ExportOptions = {}): Ptr | ExportHandle {
  return exportSchemaNode(nodeOf(memoryOf(opts), s, false), opts);
}

/**
 * Exports one flechette `Batch`, or a `Column` of one batch, as an `ArrowArray` of its type,
 * zero-copy: its typed arrays are pinned until the consumer releases the array. `field` names it
 * (its nullability and metadata do not reach the array; they are the schema's: `exportSchema`).
 *
 * @example
 * const schemaPtr = exportSchema(table.schema.fields[0]);
 * const arrayPtr = exportColumn(table.getChildAt(0));
 */
export function exportColumn(x: Column<unknown> | Batch<unknown>, opts: ExportOptions & { handle: true }): ExportHandle;
export function exportColumn(x: Column<unknown> | Batch<unknown>, opts?: ExportOptions): Ptr;
export function exportColumn(x: Column<unknown> | Batch<unknown>, opts: ExportOptions = {}): Ptr | ExportHandle {
  let batch: Batch<unknown>;
  if (x instanceof Column) {
    if (x.data.length !== 1) throw invalid('column', `a Column of ${x.data.length} batches is not one array: export each batch, or a Table as a stream`);
    batch = x.data[0]!;
  } else batch = x;
  return exportArrayView(viewOfBatch(batch), opts);
}

/**
 * Exports a flechette `Table` of one record batch as an `ArrowSchema` and a struct `ArrowArray`,
 * zero-copy; with `{ handle: true }`, two owned handles. A table of several batches: `exportTable`
 * or `exportArrayStream`.
 *
 * @example
 * const { schema, array } = exportRecordBatch(tableFromArrays({ x: [1, 2, 3] }));
 * nativeLib.consume(schema, array);
 */
export function exportRecordBatch(table: Table, opts: MemoryOption & { handle: true }): ArrayExportHandles;
export function exportRecordBatch(table: Table, opts?: BatchExportOptions & { handle?: false }): {
  /** The `ArrowSchema`: a struct (`+s`) of the table's fields. */
  schema: Ptr;
  /** The struct `ArrowArray` of the table's one record batch. */
  array: Ptr;
};
export function exportRecordBatch(table: Table, opts: BatchExportOptions = {}): { schema: Ptr; array: Ptr } | ArrayExportHandles {
  const { schema, batches } = viewsOfTable(table);
  if (batches.length !== 1) throw invalid('table', `a Table of ${batches.length} record batches is not one: export it with exportTable or exportArrayStream`);
  return exportBatchView(schema, batches[0]!, false, opts);
}

/**
 * Exports a flechette `Table` as one `ArrowSchema` and an `ArrowArray` per record batch (its columns'
 * batches lined up; see `viewsOfTable`), zero-copy.
 *
 * @example
 * const { schema, arrays } = exportTable(table);
 */
export function exportTable(table: Table, opts: MemoryOption & { handle: true }): TableExportHandles;
export function exportTable(table: Table, opts?: MemoryOption & { handle?: false }): {
  /** The `ArrowSchema` of every record batch. */
  schema: Ptr;
  /** One struct `ArrowArray` per record batch, in the table's order. */
  arrays: Ptr[];
};
export function exportTable(table: Table, opts: MemoryOption & { handle?: boolean } = {}): { schema: Ptr; arrays: Ptr[] } | TableExportHandles {
  const { schema, batches } = viewsOfTable(table);
  return exportTableViews(schema, batches.length, (i) => batches[i]!, false, opts);
}

/** What a flechette stream can be exported from: a `Table`, or any iterable of tables of one schema (pulled one per `get_next`). */
export type FlechetteStreamSource = Table | Iterable<Table>;

/** Options of `exportArrayStream`: where it is written, and the schema of an empty iterable. */
export interface FlechetteStreamExportOptions extends Omit<StreamExportOptions, 'schema' | 'deviceType'> {
  /** The stream's schema: needed for an empty iterable, otherwise the first table's. */
  schema?: Schema | SchemaNode;
}

/**
 * Exports flechette tables as an `ArrowArrayStream` (CStreamInterface.rst), zero-copy, one record
 * batch per `get_next`: a `Table`'s batches, or the batches of each table an iterable yields (a
 * generator is pulled lazily). The rules of the main entry's `exportArrayStream` hold (the consumer
 * releases once; `get_next` of a source that throws returns an errno and `get_last_error` its text).
 *
 * @example
 * const stream = exportArrayStream(table);
 * await conn.ingest('t', stream);     // or any consumer of an ArrowArrayStream
 */
export function exportArrayStream(source: FlechetteStreamSource, opts: FlechetteStreamExportOptions & { handle: true }): ExportHandle;
export function exportArrayStream(source: FlechetteStreamSource, opts?: FlechetteStreamExportOptions): Ptr;
export function exportArrayStream(source: FlechetteStreamSource, opts: FlechetteStreamExportOptions = {}): Ptr | ExportHandle {
  const m = memoryOf(opts);
  const given = opts.schema === undefined ? undefined : nodeOf(m, opts.schema, true);
  if (source instanceof Table) {
    const { schema, batches } = viewsOfTable(source);
    return exportViewStream(batches, { ...opts, schema: given ?? schema });
  }
  const o = source as unknown as Record<symbol, unknown> | null;
  if (o === null || typeof o !== 'object' || typeof o[Symbol.iterator] !== 'function') {
    throw invalid('source', 'expected a flechette Table or an Iterable<Table>');
  }
  return exportViewStream(viewsOfTables(source as Iterable<Table>), { ...opts, schema: given });
}

/** The record batches of each table, lazily (a generator of tables is pulled one table at a time). */
function* viewsOfTables(tables: Iterable<Table>): Generator<ArrayView> {
  for (const t of tables) {
    if (!(t instanceof Table)) throw invalid('source', 'the source yielded something other than a flechette Table');
    yield* viewsOfTable(t).batches;
  }
}

/**
 * An object implementing the exchange protocol (PROTOCOL.md) for a flechette `Table`:
 * `arrow.c_schema`, `arrow.c_stream` (its batches) and, for a table of one record batch,
 * `arrow.c_array`; each call exports anew, zero-copy. The table is not changed.
 *
 * @example
 * await conn.ingest('t', arrowExportable(table));   // any consumer of the protocol
 */
export function arrowExportable(table: Table): ArrowSchemaExportable & ArrowStreamExportable & Partial<ArrowArrayExportable> {
  if (!(table instanceof Table)) throw invalid('table', 'expected a flechette Table');
  const node = schemaNodeOfSchemaObject(table.schema);
  const out: Record<symbol, unknown> = {
    [ArrowSymbols.schema]: (): ExportHandle => exportSchemaNode(node, { handle: true }) as ExportHandle,
    [ArrowSymbols.stream]: (requested?: unknown): ExportHandle => {
      checkRequestedSchema(requested, node, 'arrow.c_stream');
      return exportArrayStream(table, { handle: true });
    },
  };
  if (viewsOfTable(table).batches.length === 1) {
    out[ArrowSymbols.array] = (requested?: unknown): ArrayExportHandles => {
      checkRequestedSchema(requested, node, 'arrow.c_array');
      return exportRecordBatch(table, { handle: true });
    };
  }
  return out as unknown as ArrowSchemaExportable & ArrowStreamExportable & Partial<ArrowArrayExportable>;
}

// --- the rest of the public face, target-neutral ----------------------------------------------------

export { flechetteSchema, flechetteField, flechetteType, schemaNodeOfSchema, schemaNodeOfField, schemaNodeOfType } from './types.js';
export { batchOfView, columnOfViews, tableOfViews, type TableClasses } from './build.js';
export { viewOfBatch, viewsOfColumn, viewsOfTable, type TableViews } from './view.js';
export { ArrayExportHandles, ExportHandle, TableExportHandles } from '../memory/handle.js';
export { releaseImport, isImportReleased, type Releasable } from '../array/owned.js';
export { ArrowDeviceError, type ErrorKind } from '../errors.js';
export { nativeMemory, NULL, accounting, wasmMemory, wasmMemoryFromExports, isDetached, type Memory, type Ptr, type WasmMemory } from '../memory/index.js';
export type { SchemaNode } from '../schema/node.js';
export type { ArrayView } from '../array/view.js';
export type { ValidationLevel } from '../array/read.js';
export {
  allocArrowSchema, allocArrowArray, releaseArrowArray, releaseArrowSchema, freeArrowArray, freeArrowSchema, moveArrowArray, moveArrowSchema,
  isOurArrowArray, type MemoryOption, type ExportOptions, type BatchExportOptions,
} from '../array/core.js';
export {
  allocArrowArrayStream, releaseArrowArrayStream, freeArrowArrayStream, isArrowArrayStreamReleased,
} from '../stream/export.js';
