/**
 * The C Data Interface API: import and export of `ArrowSchema` and
 * `ArrowArray` to and from arrow-js objects.
 *
 * Ownership, in one place:
 * - Import consumes. `importSchema*` reads the `ArrowSchema` and releases it
 *   (on success and on failure; pass `keep: true` to leave it to the caller);
 *   an array import always does so with a schema pointer. It moves the
 *   `ArrowArray` out of the caller's struct (marked released at once: the
 *   caller may free it) and calls the producer's `release` exactly once: on
 *   failure, at once; with `copy: true`, at once after copying; otherwise at
 *   the object's `release()` (`using`, `releaseImport`), or once no JS object
 *   can reach the producer's memory any more (src/array/owner.ts).
 * - Export pins. `export*` writes structs whose buffers point at the JS
 *   buffers, held until the consumer calls `release`. Into a struct the
 *   consumer allocated (`into`), or one we allocate (free it with
 *   `freeArrowArray`/`freeArrowSchema` once the consumer has moved or released it).
 */
import { Data, DataType, Schema, Table, Vector, RecordBatch, type Field } from 'apache-arrow';
import {
  ArrowSymbols, describeArrowMethods, hasArrowMethod, isArrowExportable,
  type ArrowArrayExportable, type ArrowSchemaExportable, type ArrowStreamExportable,
} from '../abi/protocol.js';
import { ptrArrayArg } from '../args.js';
import { invalid } from '../errors.js';
import { releaseStruct } from '../memory/cstruct.js';
import { ArrayExportHandles, ExportHandle, TableExportHandles } from '../memory/handle.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nodeToField, nodeToType, type ToArrowOptions } from '../schema/arrowjs.js';
import type { SchemaNode } from '../schema/node.js';
import { dataToExportView, dataToView } from './arrowjs.js';
import { exchangeOptions, importFromArrayHandles, importFromHandle, streamTableImporter, type ExchangeImportOptions } from './exchange.js';
import { exportArrayView, exportBatchView, exportSchemaNode, exportTableViews, memoryOf, type ExportOptions, type MemoryOption } from './core.js';
import './handoff.js'; // the exchange protocol's methods of imported objects
import { consume, importWith, planOf, PlanOf, readSchemaPtr, type ImportCoreOptions, type SchemaLike } from './importer.js';
import {
  buildBatch, buildData, importedTable, importedVector, ownersOf, releaseImport,
  type ImportedData, type ImportedRecordBatch, type ImportedTable, type ImportedVector,
} from './build.js';
import { ImportOwner } from './owner.js';
import { planOfNode, type Plan } from './plan.js';
import { batchSchemaOf } from './plan-arrowjs.js';
import { batchNodeOf, schemaNodeOf } from '../schema/export.js';
import { validationLevel } from './read.js';
import { viewOf, type ArrayView } from './view.js';

export type { SchemaLike };

export interface SchemaImportOptions extends MemoryOption, ToArrowOptions {
  /** Leave the `ArrowSchema` unreleased: the caller keeps ownership. */
  keep?: boolean;
}

/**
 * Options of the array importers' pointer form (`importData`, `importRecordBatch`, ...): the memory,
 * `copy`, the validation level and the conversion to arrow-js (`expand`).
 */
export interface ArrayImportOptions extends MemoryOption, ImportCoreOptions {}

/** Protocol-form options: those of the pointer form and of the exchange (`requestedSchema`). */
export type SchemaExchangeOptions = SchemaImportOptions & ExchangeImportOptions;
/** Protocol-form options of the array importers: those of the pointer form and of the exchange (`requestedSchema`). */
export type ArrayExchangeOptions = ArrayImportOptions & ExchangeImportOptions;

export { memoryOf, type ExportOptions, type MemoryOption } from './core.js';

// --- schema ----------------------------------------------------------------------------

/**
 * Reads an `ArrowSchema` (or what an object implementing `arrow.c_schema`
 * exports) into a `SchemaNode` (every type of the spec, including
 * those arrow-js lacks) and releases it unless `keep`.
 *
 * @example
 * const node = importSchemaNode(ptr); // node.format === '+s', node.children[0].name ...
 */
export function importSchemaNode(source: ArrowSchemaExportable, opts?: SchemaExchangeOptions): SchemaNode;
export function importSchemaNode(ptr: Ptr, opts?: SchemaImportOptions): SchemaNode;
export function importSchemaNode(ptr: Ptr | ArrowSchemaExportable, opts: SchemaImportOptions = {}): SchemaNode {
  if (isArrowExportable(ptr)) {
    const o = exchangeOptions<SchemaImportOptions>(opts, 'importSchemaNode');
    // The handle's dispose releases and frees the struct: `keep` has nothing to keep.
    return importFromHandle(ptr, ArrowSymbols.schema, o, (p, m) => readSchemaPtr(m, p, false), () => undefined);
  }
  return readSchemaPtr(memoryOf(opts), ptr, opts.keep ?? false);
}

/**
 * Imports an `ArrowSchema` describing a record batch (format `+s`) as an
 * arrow-js `Schema`; or what an object implementing `arrow.c_schema`
 * (PROTOCOL.md) exports. Give the result to `importRecordBatch` / `importTable`
 * for every array of this schema (a driver that sends the schema once):
 * what those need of it is made once, and arrays are read by the schema as
 * the producer sent it, also when `expand` changed its arrow-js form.
 *
 * @example
 * const schema = importSchema(schemaPtr);
 * console.log(schema.fields.map((f) => `${f.name}: ${f.type}`));
 * for (const p of arrayPtrs) use(importRecordBatch(p, schema));
 *
 * @example
 * const schema = importSchema(arrowExportable(table));   // any object implementing arrow.c_schema
 */
export function importSchema(source: ArrowSchemaExportable, opts?: SchemaExchangeOptions): Schema;
export function importSchema(ptr: Ptr, opts?: SchemaImportOptions): Schema;
export function importSchema(ptr: Ptr | ArrowSchemaExportable, opts: SchemaImportOptions = {}): Schema {
  // Through the plan: importing arrays against the Schema returned then reads them by the schema
  // as the producer sent it, also when `expand` changed the arrow-js form (list view -> list).
  return batchSchemaOf(planOfNode(importSchemaNode(ptr as Ptr, opts), opts));
}

/**
 * Imports an `ArrowSchema` (a pointer, or an object implementing `arrow.c_schema`) as an arrow-js `Field` (name, type, nullability, metadata).
 *
 * @example
 * const field = importField(schemaPtr);  // the ArrowSchema is released unless { keep: true }
 * console.log(field.name, String(field.type), field.nullable);
 */
export function importField(source: ArrowSchemaExportable, opts?: SchemaExchangeOptions): Field;
export function importField(ptr: Ptr, opts?: SchemaImportOptions): Field;
export function importField(ptr: Ptr | ArrowSchemaExportable, opts: SchemaImportOptions = {}): Field {
  return nodeToField(importSchemaNode(ptr as Ptr, opts), 'schema', opts);
}

/**
 * Imports an `ArrowSchema` (a pointer, or an object implementing `arrow.c_schema`) as an arrow-js `DataType`.
 *
 * @example
 * const type = importType(schemaPtr);                 // format 'i' -> Int32
 * using data = importData(arrayPtr, type);            // arrays of that type, against it
 */
export function importType(source: ArrowSchemaExportable, opts?: SchemaExchangeOptions): DataType;
export function importType(ptr: Ptr, opts?: SchemaImportOptions): DataType;
export function importType(ptr: Ptr | ArrowSchemaExportable, opts: SchemaImportOptions = {}): DataType {
  return nodeToType(importSchemaNode(ptr as Ptr, opts), 'schema', opts);
}

/**
 * Exports a schema, field, type or `SchemaNode` as an `ArrowSchema`. Returns
 * the struct's address (`opts.into`, or a new allocation the caller frees with `freeArrowSchema`).
 *
 * @example
 * const ptr = exportSchema(table.schema);
 * nativeLib.consume_schema(ptr); // the consumer moves or releases it
 * freeArrowSchema(ptr);
 *
 * @example
 * using schema = exportSchema(table.schema, { handle: true }); // an owned handle
 * nativeLib.consume_schema(schema.address);
 */
export function exportSchema(s: SchemaLike, opts: ExportOptions & { handle: true }): ExportHandle;
export function exportSchema(s: SchemaLike, opts?: ExportOptions): Ptr;
export function exportSchema(s: SchemaLike, opts: ExportOptions = {}): Ptr | ExportHandle {
  return exportSchemaNode(schemaNodeOf(s), opts);
}

// --- arrays ----------------------------------------------------------------------------

/**
 * Imports an `ArrowArray` as an `ArrayView`: every type of the spec, buffers
 * as zero-copy byte views. Release it with `releaseImport(view)`; otherwise
 * the producer is released when the views are no longer reachable (or at
 * once with `copy`). `source` may be an object implementing `arrow.c_array`
 * in place of both pointers (then the second argument is the options).
 *
 * @example
 * // A run-end encoded array, which arrow-js cannot represent, read as it is:
 * const view = importArrayView(arrayPtr, schemaPtr);
 * const runEnds = view.children[0]!;                  // view.schema.type.id === 'run_end_encoded'
 * const ends = new Int32Array(runEnds.buffers[1]!.buffer, runEnds.buffers[1]!.byteOffset, runEnds.length);
 * releaseImport(view);                                 // the producer's release, now
 */
export function importArrayView(source: ArrowArrayExportable, opts?: ArrayExchangeOptions): ArrayView;
export function importArrayView(ptr: Ptr, schema: SchemaLike | Ptr, opts?: ArrayImportOptions): ArrayView;
export function importArrayView(ptr: Ptr | ArrowArrayExportable, schema?: SchemaLike | Ptr | ArrayExchangeOptions, opts: ArrayImportOptions = {}): ArrayView {
  if (isArrowExportable(ptr)) return viaArray(ptr, schema, 'importArrayView', (a, s, o) => importArrayView(a, s, o), releaseImport);
  const sch = schema as SchemaLike | Ptr;
  const m = memoryOf(opts);
  const c = consume(m, 'ArrowArray', ptr, sch, opts, 'array', PlanOf.Array);
  const plan = c.plan!;
  return importWith(ImportOwner.move(m, ptr, 'ArrowArray', c.staged, c.at), plan, opts, c.level, 'array', (read) => viewOf(read, plan.root, 0));
}

/**
 * Releases the producer's memory behind an import now: `x` is an object an
 * import function returned. Kept for compatibility: the same as
 * `releaseImport(x)` (which is safe also after values were read).
 *
 * @example
 * const batch = importRecordBatch(arrayPtr, schema);
 * disposeImport(batch); // as releaseImport(batch) or batch.release()
 */
export function disposeImport(x: object): void {
  releaseImport(x);
}

/**
 * Imports an `ArrowArray` as arrow-js `Data` of the schema's type, or what
 * an object implementing `arrow.c_array` (PROTOCOL.md) exports.
 *
 * @example
 * const data = importData(arrayPtr, schemaPtr);          // zero-copy
 * const copy = importData(arrayPtr2, new Int32(), { copy: true }); // released at once
 * data.release();                                        // or `using data = ...`
 *
 * @example
 * const d = importData(exportable);  // an object implementing arrow.c_array (PROTOCOL.md)
 */
export function importData(source: ArrowArrayExportable, opts?: ArrayExchangeOptions): ImportedData;
export function importData(ptr: Ptr, schema: SchemaLike | Ptr, opts?: ArrayImportOptions): ImportedData;
export function importData(ptr: Ptr | ArrowArrayExportable, schema?: SchemaLike | Ptr | ArrayExchangeOptions, opts: ArrayImportOptions = {}): ImportedData {
  if (isArrowExportable(ptr)) return viaArray(ptr, schema, 'importData', (a, s, o) => importData(a, s, o), releaseImport);
  const sch = schema as SchemaLike | Ptr;
  const m = memoryOf(opts);
  const c = consume(m, 'ArrowArray', ptr, sch, opts, 'array', PlanOf.Data);
  return importWith(ImportOwner.move(m, ptr, 'ArrowArray', c.staged, c.at), c.plan!, opts, c.level, 'array', buildData);
}

/**
 * Imports an `ArrowArray` (or an object implementing `arrow.c_array`) as an
 * arrow-js `Vector` (releasable like the Data it holds).
 *
 * @example
 * using v = importVector(arrayPtr, new Int32());  // the schema as an arrow-js DataType
 * const values = v.toArray();                      // an Int32Array over the producer's memory
 */
export function importVector(source: ArrowArrayExportable, opts?: ArrayExchangeOptions): ImportedVector;
export function importVector(ptr: Ptr, schema: SchemaLike | Ptr, opts?: ArrayImportOptions): ImportedVector;
export function importVector(ptr: Ptr | ArrowArrayExportable, schema?: SchemaLike | Ptr | ArrayExchangeOptions, opts: ArrayImportOptions = {}): ImportedVector {
  const data = importData(ptr as Ptr, schema as SchemaLike | Ptr, opts);
  return importedVector(data, ownersOf(data)!);
}

/**
 * Imports a struct `ArrowArray` as an arrow-js `RecordBatch`.
 *
 * Importing many arrays against one schema (a driver that sends the schema
 * once): pass the arrow-js `Schema` (for example from `importSchema(ptr)`)
 * to every call; what the import needs of it is made once per `Schema`
 * object. A schema pointer is consumed (released) by the call it is given to.
 *
 * `source` may be an object of the exchange protocol (PROTOCOL.md)
 * implementing `arrow.c_array` in place of both pointers: the second
 * argument is then the options (with `requestedSchema`), and the handles are
 * disposed on every path.
 *
 * @example
 * const schema = importSchema(schemaPtr);             // once
 * using batch = importRecordBatch(arrayPtr, schema);   // released at the end of the scope
 * batch.getChild('x')?.toArray();
 *
 * @example
 * using b = importRecordBatch(exportable);  // an object implementing arrow.c_array (PROTOCOL.md)
 */
export function importRecordBatch(source: ArrowArrayExportable, opts?: ArrayExchangeOptions): ImportedRecordBatch;
export function importRecordBatch(ptr: Ptr, schema: Schema | SchemaNode | Ptr, opts?: ArrayImportOptions): ImportedRecordBatch;
export function importRecordBatch(ptr: Ptr | ArrowArrayExportable, schema?: Schema | SchemaNode | Ptr | ArrayExchangeOptions, opts: ArrayImportOptions = {}): ImportedRecordBatch {
  if (isArrowExportable(ptr)) return viaArray(ptr, schema, 'importRecordBatch', (a, s, o) => importRecordBatch(a, s, o), releaseImport);
  const sch = schema as Schema | SchemaNode | Ptr;
  const m = memoryOf(opts);
  const c = consume(m, 'ArrowArray', ptr, sch, opts, 'array', PlanOf.Batch);
  return importWith(ImportOwner.move(m, ptr, 'ArrowArray', c.staged, c.at), c.plan!, opts, c.level, 'array', buildBatch);
}

/**
 * Imports several struct `ArrowArray`s sharing one schema as an arrow-js
 * `Table`; `table.release()` releases every batch. Import consumes every
 * array: if one fails, those imported already are released at once, and
 * those not yet imported too.
 *
 * `source` may be an object of the exchange protocol (PROTOCOL.md) in
 * place of the pointers: one implementing `arrow.c_stream` is read to its
 * end (as `importArrayStream(source).toTable()`), else `arrow.c_array` gives
 * a table of one batch.
 *
 * @example
 * const t = importTable(arrowExportable(table)); // any object implementing arrow.c_stream
 */
export function importTable(source: ArrowStreamExportable | ArrowArrayExportable, opts?: ArrayExchangeOptions): ImportedTable;
export function importTable(ptrs: readonly Ptr[], schema: Schema | SchemaNode | Ptr, opts?: ArrayImportOptions): ImportedTable;
export function importTable(
  ptrs: readonly Ptr[] | ArrowStreamExportable | ArrowArrayExportable,
  schema?: Schema | SchemaNode | Ptr | ArrayExchangeOptions,
  opts: ArrayImportOptions = {},
): ImportedTable {
  // An array is the pointer form: not probed for the protocol's symbol methods (each a miss along its prototype chain).
  if (!Array.isArray(ptrs) && isArrowExportable(ptrs)) return tableOfExportable(ptrs, schema);
  schema = schema as Schema | SchemaNode | Ptr;
  const m = memoryOf(opts);
  try {
    ptrArrayArg(ptrs, 'ptrs', m, m.layouts.ArrowArray.size, 'ArrowArrays');
  } catch (e) {
    if (typeof schema === 'bigint' && schema !== 0n) releaseStruct(m, 'ArrowSchema', schema);
    throw e;
  }
  let plan: Plan;
  try {
    plan = batchPlan(m, schema, opts);
    validationLevel(opts.validate);
  } catch (e) {
    for (const p of ptrs) if (typeof p === 'bigint') releaseStruct(m, 'ArrowArray', p);
    throw e;
  }
  const batches: ImportedRecordBatch[] = [];
  for (let i = 0; i < ptrs.length; i++) {
    try {
      const c = consume(m, 'ArrowArray', ptrs[i]!, undefined, opts, 'arrays', PlanOf.None, i);
      batches.push(importWith(ImportOwner.move(m, ptrs[i]!, 'ArrowArray', c.staged, c.at), plan, opts, c.level, 'arrays', buildBatch, null, i));
    } catch (e) {
      for (const b of batches) b.release();
      for (const p of ptrs.slice(i + 1)) if (typeof p === 'bigint') releaseStruct(m, 'ArrowArray', p);
      throw e;
    }
  }
  return importedTable(batches, plan.batch().schema);
}

/** The plan of a record batch's schema, its arrow-js form made (a struct, "+s"). */
function batchPlan(m: Memory, schema: Schema | SchemaNode | Ptr, opts: ToArrowOptions): Plan {
  const plan = planOf(m, schema, opts, true);
  plan.batch('schema');
  return plan;
}

/** An array import from a protocol object (`arrow.c_array`): `optsArg` is the options, `imp` the pointer form. */
function viaArray<R>(source: object, optsArg: unknown, fn: string, imp: (array: Ptr, schema: Ptr, opts: ArrayImportOptions) => R, release: (r: R) => void): R {
  const o = exchangeOptions<ArrayImportOptions>(optsArg, fn);
  return importFromArrayHandles(source, ArrowSymbols.array, o, (a, s, m) => imp(a, s, { ...o, memory: m }), release);
}

/** `importTable(source)`: a stream read to its end, else one array. */
function tableOfExportable(source: object, optsArg: unknown): ImportedTable {
  const o = exchangeOptions<ArrayImportOptions>(optsArg, 'importTable');
  const viaStream = streamTableImporter();
  if (hasArrowMethod(source, ArrowSymbols.stream) && viaStream) return viaStream(source, o);
  if (hasArrowMethod(source, ArrowSymbols.array)) {
    const b = viaArray(source, o, 'importTable', (a, s, opts) => importRecordBatch(a, s, opts), releaseImport);
    return importedTable([b], b.schema);
  }
  throw invalid('source', `importTable needs an object implementing arrow.c_stream or arrow.c_array, got one implementing ${describeArrowMethods(source)}`);
}

/**
 * Exports arrow-js `Data`, a single-chunk `Vector`, a `RecordBatch` (as a
 * struct array) or an `ArrayView` as an `ArrowArray`, zero-copy. Returns the
 * struct's address (`opts.into` or a new allocation; see `freeArrowArray`).
 *
 * @example
 * const schema = exportSchema(batch.schema);
 * const array = exportArray(batch);
 * await new Promise((resolve, reject) =>          // koffi's async form: the consumer runs on a worker thread
 *   nativeLib.consume.async(schema, array, (err, rc) => (err ? reject(err) : resolve(rc))));
 *
 * @example
 * using array = exportArray(batch, { handle: true });  // an owned handle: released if nobody took it
 */
export function exportArray(x: Data | Vector | RecordBatch | ArrayView, opts: ExportOptions & { handle: true }): ExportHandle;
export function exportArray(x: Data | Vector | RecordBatch | ArrayView, opts?: ExportOptions): Ptr;
export function exportArray(x: Data | Vector | RecordBatch | ArrayView, opts: ExportOptions = {}): Ptr | ExportHandle {
  const view = toExportView(x, true);
  // The views of arrow-js data were made for this export (toExportView): their arrays are ours.
  return exportArrayView(view, opts, view !== x);
}

/**
 * The `ArrayView` an export of any of the JS array forms writes. `forWriter`:
 * for `writeArrayView` only, whose buffers may be any typed array (see
 * `dataToExportView`).
 */
export function toExportView(x: Data | Vector | RecordBatch | ArrayView, forWriter = false): ArrayView {
  const toView = forWriter ? dataToExportView : dataToView;
  // A batch's struct type is its node for the writer (it reads no names); as a view, its schema's.
  if (x instanceof RecordBatch) return forWriter ? dataToExportView(x.data) : dataToView(x.data, batchNodeOf(x));
  if (x instanceof Vector) {
    if (x.data.length !== 1) {
      throw invalid('array', `a Vector of ${x.data.length} chunks is not one array: export each chunk, or a Table as a stream`);
    }
    return toView(x.data[0]!);
  }
  if (x instanceof Data) return toView(x);
  return x;
}

/**
 * Exports a `RecordBatch` as a schema and a struct array; with
 * `{ handle: true }`, as two owned handles (`ArrayExportHandles`: disposing
 * the pair disposes both).
 *
 * @example
 * const { schema, array } = exportRecordBatch(batch);
 * nativeLib.consume(schema, array);
 * freeArrowSchema(schema);
 * freeArrowArray(array);
 */
export function exportRecordBatch(batch: RecordBatch, opts: MemoryOption & { handle: true }): ArrayExportHandles;
export function exportRecordBatch(batch: RecordBatch, opts?: MemoryOption & { schemaInto?: Ptr; arrayInto?: Ptr; handle?: false }): {
  /** The `ArrowSchema`: a struct (`+s`) of the batch's fields. */
  schema: Ptr;
  /** The struct `ArrowArray` of the batch's columns. */
  array: Ptr;
};
export function exportRecordBatch(
  batch: RecordBatch,
  opts: MemoryOption & { schemaInto?: Ptr; arrayInto?: Ptr; handle?: boolean } = {},
): { schema: Ptr; array: Ptr } | ArrayExportHandles {
  // The struct view made for this export (toExportView): its arrays are ours.
  return exportBatchView(batchNodeOf(batch), toExportView(batch, true), true, opts);
}

/**
 * Exports a `Table` as one schema and one struct array per batch; with
 * `{ handle: true }`, as owned handles (`TableExportHandles`).
 *
 * @example
 * using t = exportTable(table, { handle: true });
 * for (const a of t.arrays) nativeLib.consume(exportSchema(table.schema), a.address);
 */
export function exportTable(table: Table, opts: MemoryOption & { handle: true }): TableExportHandles;
export function exportTable(table: Table, opts?: MemoryOption & { handle?: false }): {
  /** The `ArrowSchema` of every batch. */
  schema: Ptr;
  /** One struct `ArrowArray` per batch, in the table's order. */
  arrays: Ptr[];
};
export function exportTable(table: Table, opts: MemoryOption & { handle?: boolean } = {}): { schema: Ptr; arrays: Ptr[] } | TableExportHandles {
  const node = table.batches.length > 0 ? batchNodeOf(table.batches[0]!) : schemaNodeOf(table.schema);
  return exportTableViews(node, table.batches.length, (i) => toExportView(table.batches[i]!, true), true, opts);
}

// --- struct helpers (target-neutral: core.ts) ------------------------------------------

export {
  allocArrowSchema, allocArrowArray, releaseArrowArray, releaseArrowSchema, freeArrowArray, freeArrowSchema, moveArrowArray, moveArrowSchema,
  isOurArrowArray,
} from './core.js';
