/**
 * The C Data Interface API: import and export of `ArrowSchema` and
 * `ArrowArray` to and from arrow-js objects.
 *
 * Ownership, in one place:
 * - Import consumes. `importSchema*` reads the `ArrowSchema` and releases it
 *   (on success and on failure; pass `keep: true` to leave it to the caller).
 *   `import*` of an array moves the `ArrowArray` out of the caller's struct
 *   (the caller's struct is marked released at once and may be freed) and
 *   calls the producer's `release` exactly once: on failure, at once; with
 *   `copy: true`, at once after copying; otherwise when no JS object can reach
 *   the producer's memory any more (a FinalizationRegistry over every
 *   zero-copy view). Zero-copy views cannot be detached in JS, so there is no
 *   explicit early release in the safe API: ask for `copy` when you need the
 *   producer's memory back at a known time.
 * - Export pins. `export*` writes structs whose buffers point at the JS
 *   buffers, held until the consumer calls `release`. Into a struct the
 *   consumer allocated (`into`), or one we allocate (free it with
 *   `freeArrowArray`/`freeArrowSchema` once the consumer has moved or released it).
 */
import { Data, DataType, Field, RecordBatch, Schema, Struct, Table, Vector } from 'apache-arrow';
import { arrayPtrArg, batchSchemaArg, optionalPtrArg, ptrArrayArg, schemaLikeArg, schemaPtrArg } from '../args.js';
import { ArrowDeviceError, invalid } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { nodeToField, nodeToSchema, nodeToType, type ToArrowOptions } from '../schema/arrowjs.js';
import { toSchemaNode, writeSchemaNode, schemaToNode } from '../schema/export.js';
import { readSchemaNode, releaseSchemaStruct, type SchemaNode } from '../schema/node.js';
import { dataToView, makeBatch, viewToData } from './arrowjs.js';
import { writeArrayView, arrayReleaseCallback } from './export.js';
import { readArrayView, validationLevel, type ValidationLevel } from './import.js';
import { ImportOwner } from './owner.js';
import type { ArrayView } from './view.js';

export interface MemoryOption {
  /** The memory the structs live in; the process's own (native) by default. */
  memory?: Memory;
}

export interface SchemaImportOptions extends MemoryOption, ToArrowOptions {
  /** Leave the `ArrowSchema` unreleased: the caller keeps ownership. */
  keep?: boolean;
}

export interface ArrayImportOptions extends MemoryOption, ToArrowOptions {
  /** Copy every buffer into JS memory and release the producer at once. */
  copy?: boolean;
  /** How much of the foreign input to check; `default` unless set. See `ValidationLevel`. */
  validate?: ValidationLevel;
}

export interface ExportOptions extends MemoryOption {
  /** Write into this struct (the consumer's memory) instead of allocating one. */
  into?: Ptr;
}

/** Anything that describes a type: arrow-js objects or a `SchemaNode`. */
export type SchemaLike = Schema | Field | DataType | SchemaNode;

const mem = (o: MemoryOption | undefined): Memory => o?.memory ?? nativeMemory();

// --- schema ----------------------------------------------------------------------------

/**
 * Reads an `ArrowSchema` into a `SchemaNode` (every type of the spec, including
 * those arrow-js lacks) and releases it unless `keep`.
 *
 * @example
 * const node = importSchemaNode(ptr); // node.format === '+s', node.children[0].name ...
 */
export function importSchemaNode(ptr: Ptr, opts: SchemaImportOptions = {}): SchemaNode {
  const m = mem(opts);
  schemaPtrArg(ptr, 'ptr', m);
  if (ptr === 0n) throw invalid('schema', 'NULL pointer');
  if (m.readPtr(ptr + BigInt(m.layouts.ArrowSchema.offsets.release!)) === 0n) {
    throw new ArrowDeviceError('released', 'schema', 'the struct is released (release is NULL)');
  }
  try {
    return readSchemaNode(m, ptr, 'schema');
  } finally {
    // Import consumes the struct, on success and on failure (a released child
    // deeper down does not make the root released).
    if (!opts.keep) releaseSchemaStruct(m, ptr);
  }
}

/**
 * Imports an `ArrowSchema` describing a record batch (format `+s`) as an arrow-js `Schema`.
 *
 * @example
 * const schema = importSchema(schemaPtr);
 * console.log(schema.fields.map((f) => `${f.name}: ${f.type}`));
 */
export function importSchema(ptr: Ptr, opts: SchemaImportOptions = {}): Schema {
  return nodeToSchema(importSchemaNode(ptr, opts), 'schema', opts);
}

/** Imports an `ArrowSchema` as an arrow-js `Field` (name, type, nullability, metadata). */
export function importField(ptr: Ptr, opts: SchemaImportOptions = {}): Field {
  return nodeToField(importSchemaNode(ptr, opts), 'schema', opts);
}

/** Imports an `ArrowSchema` as an arrow-js `DataType`. */
export function importType(ptr: Ptr, opts: SchemaImportOptions = {}): DataType {
  return nodeToType(importSchemaNode(ptr, opts), 'schema', opts);
}

/**
 * Exports a schema, field, type or `SchemaNode` as an `ArrowSchema`. Returns
 * the struct's address (`opts.into`, or a new allocation the caller frees with `freeArrowSchema`).
 *
 * @example
 * const ptr = exportSchema(table.schema);
 * nativeLib.consume_schema(ptr); // the consumer moves or releases it
 * freeArrowSchema(ptr);
 */
export function exportSchema(s: SchemaLike, opts: ExportOptions = {}): Ptr {
  const m = mem(opts);
  optionalPtrArg(opts.into, 'opts.into', m, m.layouts.ArrowSchema.size, 'an ArrowSchema');
  const into = opts.into ?? m.alloc(m.layouts.ArrowSchema.size);
  try {
    writeSchemaNode(m, toSchemaNode(s), into);
  } catch (e) {
    if (opts.into === undefined) m.free(into);
    throw e;
  }
  return into;
}

// --- arrays ----------------------------------------------------------------------------

function schemaNodeOf(schema: SchemaLike | Ptr, opts: ArrayImportOptions): SchemaNode {
  return typeof schema === 'bigint' ? importSchemaNode(schema, opts) : toSchemaNode(schema);
}

/** Moves the `ArrowArray` at `ptr` into an owner and reads it; releases it on failure. */
function importView(ptr: Ptr, node: SchemaNode, opts: ArrayImportOptions, path = 'array'): { view: ArrayView; owner: ImportOwner } {
  const m = mem(opts);
  if (ptr === 0n) throw invalid(path, 'NULL pointer');
  if (m.readPtr(ptr + BigInt(m.layouts.ArrowArray.offsets.release!)) === 0n) {
    throw new ArrowDeviceError('released', path, 'the struct is released (release is NULL)');
  }
  const level = consumeOnFailure(ptr, opts, () => validationLevel(opts.validate));
  const owner = ImportOwner.move(m, ptr);
  try {
    const view = readArrayView({ mem: m, owner, token: {}, copy: opts.copy ?? false, level }, owner.ptr, node, path);
    return { view, owner };
  } catch (e) {
    owner.release();
    throw e;
  }
}

/**
 * Imports an `ArrowArray` as an `ArrayView`: every type of the spec, buffers
 * as zero-copy byte views. The array's memory is released when the views are
 * no longer reachable (or at once with `copy`).
 */
export function importArrayView(ptr: Ptr, schema: SchemaLike | Ptr, opts: ArrayImportOptions = {}): ArrayView {
  const m = mem(opts);
  arrayPtrArg(ptr, 'ptr', m);
  const node = consumeOnFailure(ptr, opts, () => schemaNodeOf(schemaLikeArg(schema, 'schema', m, m.layouts.ArrowSchema.size), opts));
  const { view, owner } = importView(ptr, node, opts);
  owner.done();
  return owned(view, [owner]);
}

/** The owners of each object an import returned, for `disposeImport`. */
const owners = new WeakMap<object, ImportOwner[]>();

function owned<T extends object>(x: T, by: ImportOwner[]): T {
  owners.set(x, by);
  return x;
}

/**
 * Releases the producer's memory behind an import now, if that is safe:
 * `x` is an object an import function returned (`Data`, `Vector`,
 * `RecordBatch`, `Table`, `ArrayView`). Refused (an `ArrowDeviceError`)
 * while any zero-copy view of that memory may still be reachable; buffers
 * not viewed yet can no longer be read afterwards (reading throws). Imports
 * made with `copy` are released already.
 *
 * @example
 * const batch = importRecordBatch(arrayPtr, schema);
 * console.log(batch.numRows);   // no buffer read: nothing viewed
 * disposeImport(batch);         // the producer's release runs now
 */
export function disposeImport(x: object): void {
  const by = owners.get(x);
  if (!by) throw invalid('disposeImport', 'not an object returned by an import of this library');
  for (const o of by) o.dispose();
}

/**
 * Imports an `ArrowArray` as arrow-js `Data` of the schema's type.
 *
 * @example
 * const data = importData(arrayPtr, schemaPtr);          // zero-copy
 * const copy = importData(arrayPtr2, new Int32(), { copy: true }); // released at once
 */
export function importData(ptr: Ptr, schema: SchemaLike | Ptr, opts: ArrayImportOptions = {}): Data {
  const m = mem(opts);
  arrayPtrArg(ptr, 'ptr', m);
  const { node, type } = consumeOnFailure(ptr, opts, () => {
    schemaLikeArg(schema, 'schema', m, m.layouts.ArrowSchema.size);
    const node = schemaNodeOf(schema, opts);
    const type =
      schema instanceof DataType ? schema : schema instanceof Field ? schema.type : nodeToType(node, 'schema', opts);
    return { node, type };
  });
  const { view, owner } = importView(ptr, node, opts);
  return owned(finish(owner, () => viewToData(view, type, 'array', opts)), [owner]);
}

/**
 * Runs `fn` (which builds JS objects over the owner's views) and marks the
 * import complete. If `fn` fails, no view has escaped, so the producer is
 * released at once rather than at some later garbage collection.
 */
function finish<T>(owner: ImportOwner, fn: () => T): T {
  let result: T;
  try {
    result = fn();
  } catch (e) {
    owner.release();
    throw e;
  }
  owner.done();
  return result;
}

/** Import consumes the array even when it fails before reading it (a bad schema, bad options). */
function consumeOnFailure<T>(ptr: Ptr, opts: ArrayImportOptions, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (ptr !== 0n) releaseArrowArray(ptr, opts);
    throw e;
  }
}

/** Imports an `ArrowArray` as an arrow-js `Vector`. */
export function importVector(ptr: Ptr, schema: SchemaLike | Ptr, opts: ArrayImportOptions = {}): Vector {
  const data = importData(ptr, schema, opts);
  return owned(new Vector([data]), owners.get(data)!);
}

/**
 * What an import of batches needs of an arrow-js `Schema`, made once per
 * Schema object (arrow-js schemas are immutable): its `SchemaNode` and the
 * struct type of its batches.
 */
interface BatchSchema {
  node: SchemaNode;
  arrow: Schema;
  struct: Struct;
}
const batchSchemas = new WeakMap<Schema, BatchSchema>();

function schemaOf(schema: Schema | SchemaNode | Ptr, opts: ArrayImportOptions): BatchSchema {
  if (schema instanceof Schema) {
    let b = batchSchemas.get(schema);
    if (!b) {
      b = { node: schemaToNode(schema), arrow: schema, struct: new Struct(schema.fields) };
      batchSchemas.set(schema, b);
    }
    return b;
  }
  const node = typeof schema === 'bigint' ? importSchemaNode(schema, opts) : schema;
  const arrow = nodeToSchema(node, 'schema', opts);
  return { node, arrow, struct: new Struct(arrow.fields) };
}

function batchFrom(ptr: Ptr, s: BatchSchema, opts: ArrayImportOptions, path: string): RecordBatch {
  const { view, owner } = importView(ptr, s.node, opts, path);
  const batch = finish(owner, () => makeBatch(s.arrow, s.struct, viewToData(view, s.struct, path, opts) as Data<Struct>));
  return owned(batch, [owner]);
}

/**
 * Imports a struct `ArrowArray` as an arrow-js `RecordBatch`.
 *
 * @example
 * const batch = importRecordBatch(arrayPtr, schemaPtr);
 * batch.getChild('x')?.toArray();
 */
export function importRecordBatch(ptr: Ptr, schema: Schema | SchemaNode | Ptr, opts: ArrayImportOptions = {}): RecordBatch {
  const m = mem(opts);
  arrayPtrArg(ptr, 'ptr', m);
  const s = consumeOnFailure(ptr, opts, () => schemaOf(batchSchemaArg(schema, 'schema', m, m.layouts.ArrowSchema.size), opts));
  return batchFrom(ptr, s, opts, 'array');
}

/**
 * Imports several struct `ArrowArray`s sharing one schema as an arrow-js
 * `Table`. If one fails, the arrays not yet imported are released too.
 */
export function importTable(ptrs: readonly Ptr[], schema: Schema | SchemaNode | Ptr, opts: ArrayImportOptions = {}): Table {
  const m = mem(opts);
  ptrArrayArg(ptrs, 'ptrs', m, m.layouts.ArrowArray.size, 'ArrowArrays');
  let s: BatchSchema;
  try {
    s = schemaOf(batchSchemaArg(schema, 'schema', m, m.layouts.ArrowSchema.size), opts);
  } catch (e) {
    for (const p of ptrs) releaseArrowArray(p, opts);
    throw e;
  }
  const batches: RecordBatch[] = [];
  for (let i = 0; i < ptrs.length; i++) {
    try {
      batches.push(batchFrom(ptrs[i]!, s, opts, `arrays[${i}]`));
    } catch (e) {
      for (const p of ptrs.slice(i + 1)) releaseArrowArray(p, { memory: m });
      throw e;
    }
  }
  // With repeated field names arrow-js rejects new Table(schema, batches) (its schema comparison
  // goes by name), so a table of batches takes its schema from them.
  const table = batches.length > 0 ? new Table(batches) : new Table(s.arrow);
  return owned(table, batches.flatMap((b) => owners.get(b)!));
}

/**
 * Exports arrow-js `Data`, a single-chunk `Vector`, a `RecordBatch` (as a
 * struct array) or an `ArrayView` as an `ArrowArray`, zero-copy. Returns the
 * struct's address (`opts.into` or a new allocation; see `freeArrowArray`).
 *
 * @example
 * const schema = exportSchema(batch.schema);
 * const array = exportArray(batch);
 * await nativeLib.consume.async(schema, array);
 */
export function exportArray(x: Data | Vector | RecordBatch | ArrayView, opts: ExportOptions = {}): Ptr {
  const m = mem(opts);
  optionalPtrArg(opts.into, 'opts.into', m, m.layouts.ArrowArray.size, 'an ArrowArray');
  const view = toExportView(x);
  const into = opts.into ?? m.alloc(m.layouts.ArrowArray.size);
  try {
    writeArrayView(m, view, into);
  } catch (e) {
    if (opts.into === undefined) m.free(into);
    throw e;
  }
  return into;
}

/** The `ArrayView` an export of any of the JS array forms writes. */
export function toExportView(x: Data | Vector | RecordBatch | ArrayView): ArrayView {
  if (x instanceof RecordBatch) return dataToView(x.data, batchNode(x));
  if (x instanceof Vector) {
    if (x.data.length !== 1) {
      throw invalid('array', `a Vector of ${x.data.length} chunks is not one array: export each chunk, or a Table as a stream`);
    }
    return dataToView(x.data[0]!);
  }
  if (x instanceof Data) return dataToView(x);
  return x;
}

/**
 * The `SchemaNode` of a batch's schema as its data says, made once per
 * struct type (arrow-js types and fields are immutable) and schema metadata.
 */
const batchNodes = new WeakMap<DataType, { metadata: Map<string, string> | null; node: SchemaNode }>();
function batchNode(batch: RecordBatch): SchemaNode {
  const type = batch.data.type as DataType;
  const metadata = batch.schema.metadata ?? null;
  const c = batchNodes.get(type);
  if (c && c.metadata === metadata && (metadata === null || sameEntries(metadata, c.node.metadata))) return c.node;
  const node = schemaToNode(batchSchema(batch));
  batchNodes.set(type, { metadata, node });
  return node;
}

function sameEntries(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string> | null): boolean {
  const n = b?.size ?? 0;
  if (a.size !== n) return false;
  if (n === 0) return true;
  for (const [k, v] of a) if (b!.get(k) !== v) return false;
  return true;
}

/**
 * The schema of a batch as its data says. arrow-js 21 can give a batch (and
 * its table) a `schema` that disagrees with the data when field names repeat
 * (gold case generated_duplicate_fieldnames: an int8 column reported as
 * int32); the struct type of `batch.data` is right, so export from that.
 */
function batchSchema(batch: RecordBatch): Schema {
  return new Schema((batch.data.type as Struct).children, batch.schema.metadata);
}

/** Exports a `RecordBatch` as a schema and a struct array. */
export function exportRecordBatch(batch: RecordBatch, opts: MemoryOption & { schemaInto?: Ptr; arrayInto?: Ptr } = {}): { schema: Ptr; array: Ptr } {
  const m = mem(opts);
  optionalPtrArg(opts.schemaInto, 'opts.schemaInto', m, m.layouts.ArrowSchema.size, 'an ArrowSchema');
  optionalPtrArg(opts.arrayInto, 'opts.arrayInto', m, m.layouts.ArrowArray.size, 'an ArrowArray');
  const schema = exportSchema(batchSchema(batch), { ...opts, into: opts.schemaInto });
  try {
    return { schema, array: exportArray(batch, { ...opts, into: opts.arrayInto }) };
  } catch (e) {
    releaseArrowSchema(schema, opts);
    if (opts.schemaInto === undefined) mem(opts).free(schema);
    throw e;
  }
}

/** Exports a `Table` as one schema and one struct array per batch. */
export function exportTable(table: Table, opts: MemoryOption = {}): { schema: Ptr; arrays: Ptr[] } {
  const schema = exportSchema(table.batches.length > 0 ? batchSchema(table.batches[0]!) : table.schema, opts);
  return { schema, arrays: table.batches.map((b) => exportArray(b, opts)) };
}

// --- struct helpers --------------------------------------------------------------------

/** Allocates a zeroed `ArrowSchema` for a producer to fill. */
export function allocArrowSchema(opts: MemoryOption = {}): Ptr {
  const m = mem(opts);
  return m.alloc(m.layouts.ArrowSchema.size);
}

/** Allocates a zeroed `ArrowArray` for a producer to fill. */
export function allocArrowArray(opts: MemoryOption = {}): Ptr {
  const m = mem(opts);
  return m.alloc(m.layouts.ArrowArray.size);
}

/** Calls the `ArrowArray`'s release if it is not released yet. */
export function releaseArrowArray(ptr: Ptr, opts: MemoryOption = {}): void {
  const m = mem(opts);
  arrayPtrArg(ptr, 'ptr', m);
  if (ptr === 0n) return;
  const off = BigInt(m.layouts.ArrowArray.offsets.release!);
  const rel = m.readPtr(ptr + off);
  if (rel === 0n) return;
  m.call(rel, { name: 'release', result: 'void', params: ['pointer'] }, ptr);
  m.writePtr(ptr + off, 0n);
}

/** Calls the `ArrowSchema`'s release if it is not released yet. */
export function releaseArrowSchema(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseSchemaStruct(mem(opts), schemaPtrArg(ptr, 'ptr', mem(opts)));
}

/** Releases (if still live) and frees an `ArrowArray` struct allocated by this library. */
export function freeArrowArray(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseArrowArray(ptr, opts);
  mem(opts).free(ptr);
}

/** Releases (if still live) and frees an `ArrowSchema` struct allocated by this library. */
export function freeArrowSchema(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseArrowSchema(ptr, opts);
  mem(opts).free(ptr);
}

/**
 * Moves a struct as the spec says (CDataInterface.rst, "Moving an array"):
 * a bitwise copy into `dst`, then the source marked released.
 */
export function moveArrowArray(src: Ptr, dst: Ptr, opts: MemoryOption = {}): void {
  const m = mem(opts);
  arrayPtrArg(src, 'src', m);
  arrayPtrArg(dst, 'dst', m);
  const L = m.layouts.ArrowArray;
  m.copyIn(dst, m.copyOut(src, L.size));
  m.writePtr(src + BigInt(L.offsets.release!), 0n);
}

/** Moves an `ArrowSchema` (bitwise copy, then the source marked released). */
export function moveArrowSchema(src: Ptr, dst: Ptr, opts: MemoryOption = {}): void {
  const m = mem(opts);
  schemaPtrArg(src, 'src', m);
  schemaPtrArg(dst, 'dst', m);
  const L = m.layouts.ArrowSchema;
  m.copyIn(dst, m.copyOut(src, L.size));
  m.writePtr(src + BigInt(L.offsets.release!), 0n);
}

/** Whether `ptr` is an `ArrowArray` exported by this library (its release is ours). */
export function isOurArrowArray(ptr: Ptr, opts: MemoryOption = {}): boolean {
  const m = mem(opts);
  arrayPtrArg(ptr, 'ptr', m);
  return m.readPtr(ptr + BigInt(m.layouts.ArrowArray.offsets.release!)) === arrayReleaseCallback(m);
}
