/**
 * Fill-and-import (fill.ts) into arrow-js objects: a schema and a record
 * batch. The rules are fill.ts's.
 */
import type { Schema } from 'apache-arrow';
import { importRecordBatch, importSchema, type ArrayImportOptions, type SchemaImportOptions } from '../array/api.js';
import type { ImportedRecordBatch } from '../array/build.js';
import type { Ptr } from '../memory/memory.js';
import { fillAndImport, memOf, type FillResult, type FillStatus } from './fill.js';

/**
 * Allocates an `ArrowSchema`, lets `fill` fill it, and imports it as an
 * arrow-js `Schema` (`importSchema`), under the rules of
 * `importArrayStreamFrom`. The schema struct is always released and freed
 * (`keep` does not apply: the struct is ours).
 *
 * @example
 * // ADBC: AdbcConnectionGetTableSchema(conn, NULL, NULL, "t", out, err)
 * const schema = importSchemaFrom((out) => getTableSchema(connPtr, null, null, 't', out, errPtr));
 * console.log(schema.fields.map((f) => `${f.name}: ${f.type}`));
 */
export function importSchemaFrom(fill: (out: Ptr) => number | bigint, opts?: SchemaImportOptions): Schema;
export function importSchemaFrom(fill: (out: Ptr) => PromiseLike<FillStatus>, opts?: SchemaImportOptions): Promise<Schema>;
export function importSchemaFrom(fill: (out: Ptr) => FillStatus, opts?: SchemaImportOptions): Schema;
export function importSchemaFrom(fill: (out: Ptr) => FillResult, opts: SchemaImportOptions = {}): Schema | Promise<Schema> {
  return fillAndImport(memOf(opts), ['ArrowSchema'], fill, ([p]) => importSchema(p!, { ...opts, keep: false }));
}

/**
 * Allocates an `ArrowArray` and an `ArrowSchema`, lets `fill(array, schema)`
 * fill both, and imports them as an arrow-js `RecordBatch`
 * (`importRecordBatch`: zero-copy, released by `release()`, `using`, or the
 * garbage collector), under the rules of `importArrayStreamFrom`: on any
 * failure each struct the producer filled is released exactly once.
 *
 * @example
 * // Arrow C++'s ExportRecordBatch(batch, out_array, out_schema), through a C shim:
 * using batch = importRecordBatchFrom((array, schema) => shim.export_batch(handle, array, schema));
 * console.log(batch.numRows);
 */
export function importRecordBatchFrom(fill: (array: Ptr, schema: Ptr) => number | bigint, opts?: ArrayImportOptions): ImportedRecordBatch;
export function importRecordBatchFrom(fill: (array: Ptr, schema: Ptr) => PromiseLike<FillStatus>, opts?: ArrayImportOptions): Promise<ImportedRecordBatch>;
export function importRecordBatchFrom(fill: (array: Ptr, schema: Ptr) => FillStatus, opts?: ArrayImportOptions): ImportedRecordBatch;
export function importRecordBatchFrom(
  fill: (array: Ptr, schema: Ptr) => FillResult,
  opts: ArrayImportOptions = {},
): ImportedRecordBatch | Promise<ImportedRecordBatch> {
  return fillAndImport(memOf(opts), ['ArrowArray', 'ArrowSchema'], fill, ([a, s]) => importRecordBatch(a!, s!, opts));
}
