/**
 * Fill-and-import: native code fills a struct we allocate, and we import it.
 *
 * The usual way to get Arrow data out of a C library is an out-parameter:
 * `int produce(..., struct ArrowArrayStream* out)` (ADBC's
 * `AdbcStatementExecuteQuery`, DuckDB's `duckdb_query_arrow_*`, Arrow C++'s
 * `ExportRecordBatchReader`). Around every such call the same steps recur,
 * and each has an error path where something leaks or is released twice:
 * allocate a zeroed struct, call the producer, check its status (a return
 * code, or an exception from the binding), check that it filled the struct,
 * import (which moves the struct out, or releases it on failure), free the
 * allocation. These functions do all of it, once:
 *
 * - `fill` gets the address(es) of zeroed struct(s) this library allocated,
 *   and returns `0` or nothing for success, a non-zero status for failure
 *   (errno-style or any library's status code, such as ADBC's
 *   `AdbcStatusCode`), or throws; or returns a Promise of that (a koffi
 *   `.async` call wrapped in a Promise), and then the import is a Promise too.
 * - On success the struct is imported through the ordinary importer (which
 *   moves it out) with `opts`, and the allocation freed.
 * - On every failure (fill throws or rejects, returns non-zero, returns 0 but
 *   left a struct unfilled, the import fails) whatever the producer filled is
 *   released exactly once, and the allocation freed; the error says which.
 *
 * Target-neutral: the arrow-js forms of a schema and a record batch are in
 * arrowjs.ts (a stream's reader gives arrow-js batches where that target is
 * loaded, as every reader does).
 *
 * They take a function, not a protocol object: a caller holding a producer
 * object writes the one-line `fill` that calls it.
 */
import type { ImportedRecordBatch } from '../array/build.js';
import { readSchemaPtr } from '../array/importer.js';
import type { SchemaNode } from '../schema/node.js';
import type { ArrayView } from '../array/view.js';
import { ArrowDeviceError, invalid } from '../errors.js';
import { isReleased, releaseStruct, structSize, type CStructKind } from '../memory/cstruct.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import {
  importArrayStream, type RecordBatchStreamImport, type StreamImportOptions,
} from '../stream/import.js';

/**
 * What a fill function returns: `0` or nothing when it filled the struct(s),
 * a non-zero status code when it failed (it may also throw).
 */
export type FillStatus = number | bigint | void;

/**
 * A status, or a Promise of one (a call on another thread). Each `...From`
 * function is overloaded on it: a fill returning a number (or koffi's `any`)
 * or nothing gives the result, one returning a Promise a Promise of it; the
 * `number | bigint` overloads come first so that a koffi function, typed as
 * returning `any`, takes the synchronous form.
 */
export type FillResult = FillStatus | PromiseLike<FillStatus>;

/** The error path of a struct, for messages. */
const PATHS: Record<CStructKind, string> = {
  ArrowSchema: 'schema',
  ArrowArray: 'array',
  ArrowDeviceArray: 'device_array',
  ArrowArrayStream: 'stream',
  ArrowDeviceArrayStream: 'device_stream',
};

function isPromiseLike(v: unknown): v is PromiseLike<unknown> {
  return (typeof v === 'object' || typeof v === 'function') && v !== null && typeof (v as PromiseLike<unknown>).then === 'function';
}

/** Throws unless `status` says the fill succeeded. */
function checkStatus(status: unknown): void {
  if (status === undefined || status === 0 || status === 0n) return;
  if (typeof status === 'number' || typeof status === 'bigint') {
    throw new ArrowDeviceError('producer', 'fill', `the fill function returned status ${status} (not 0: it failed)`, { errno: Number(status) });
  }
  throw invalid('fill', `the fill function returned ${status === null ? 'null' : typeof status}: expected a status code (0 for success) or nothing`);
}

/** Releases what a producer left in our structs (each at most once) and frees them; the first release error is thrown unless `quiet`. */
function settle(m: Memory, kinds: readonly CStructKind[], ptrs: readonly Ptr[], quiet: boolean): void {
  let first: unknown;
  for (let i = 0; i < ptrs.length; i++) {
    try {
      releaseStruct(m, kinds[i]!, ptrs[i]!);
    } catch (e) {
      first ??= e;
    } finally {
      m.free(ptrs[i]!);
    }
  }
  if (!quiet && first !== undefined) throw first;
}

/**
 * The one mechanism: allocate zeroed `kinds`, `fill` them, check, `load`
 * (an importer, which consumes the structs on success and on failure), and
 * settle the allocations on every path.
 */
export function fillAndImport<R>(m: Memory, kinds: readonly CStructKind[], fill: unknown, load: (ptrs: readonly Ptr[]) => R): R | Promise<R> {
  if (typeof fill !== 'function') throw invalid('fill', `expected a function that fills the struct, got ${fill === null ? 'null' : typeof fill}`);
  const ptrs: Ptr[] = [];
  try {
    for (const k of kinds) ptrs.push(m.alloc(structSize(m, k)));
  } catch (e) {
    for (const p of ptrs) m.free(p);
    throw e;
  }
  const complete = (status: unknown): R => {
    try {
      checkStatus(status);
      for (let i = 0; i < kinds.length; i++) {
        if (isReleased(m, kinds[i]!, ptrs[i]!)) {
          throw invalid(PATHS[kinds[i]!], `the fill function succeeded but left the ${kinds[i]} unfilled (its release is NULL)`);
        }
      }
    } catch (e) {
      settle(m, kinds, ptrs, true);
      throw e;
    }
    let result: R;
    try {
      result = load(ptrs);
    } catch (e) {
      settle(m, kinds, ptrs, true);
      throw e;
    }
    // Imported: the structs were moved out (or read and released), so this only frees them.
    settle(m, kinds, ptrs, false);
    return result;
  };
  let status: unknown;
  try {
    status = (fill as (...p: Ptr[]) => unknown)(...ptrs);
  } catch (e) {
    settle(m, kinds, ptrs, true);
    throw e;
  }
  if (!isPromiseLike(status)) return complete(status);
  return Promise.resolve(status).then(complete, (e: unknown) => {
    settle(m, kinds, ptrs, true);
    throw e;
  });
}

export const memOf = (o: { memory?: Memory } | undefined): Memory => o?.memory ?? nativeMemory();

/**
 * Allocates an `ArrowArrayStream`, lets `fill` fill it (a native producer's
 * out-parameter), and imports it as `importArrayStream` does. `fill`
 * returns `0` or nothing on success, a non-zero status on failure (any
 * library's code: it becomes the `errno` of an `ArrowDeviceError` of kind
 * `producer`), or throws; returning a Promise (a koffi `.async` call) makes
 * the result a Promise. On every failure path the stream the producer may
 * have filled is released exactly once and our allocation freed; on success
 * the stream was moved into the reader and the allocation freed.
 *
 * @example
 * // A C function `int make_stream(struct ArrowArrayStream* out)`, through koffi:
 * const reader = importArrayStreamFrom((out) => nativeLib.make_stream(out));
 * for (const batch of reader) use(batch);
 *
 * // ADBC: AdbcStatementExecuteQuery on a worker thread, batches read off-thread too.
 * const rows = await importArrayStreamFrom(
 *   (out) => new Promise<number>((resolve, reject) =>
 *     executeQuery.async(stmtPtr, out, null, errPtr, (e, status) => (e ? reject(e) : resolve(status)))),
 *   { offThread: true },
 * );
 * for await (const batch of rows) use(batch);
 */
export function importArrayStreamFrom(fill: (out: Ptr) => number | bigint, opts: StreamImportOptions & { view: true }): RecordBatchStreamImport<ArrayView>;
export function importArrayStreamFrom(fill: (out: Ptr) => number | bigint, opts?: StreamImportOptions): RecordBatchStreamImport<ImportedRecordBatch>;
export function importArrayStreamFrom(fill: (out: Ptr) => PromiseLike<FillStatus>, opts: StreamImportOptions & { view: true }): Promise<RecordBatchStreamImport<ArrayView>>;
export function importArrayStreamFrom(fill: (out: Ptr) => PromiseLike<FillStatus>, opts?: StreamImportOptions): Promise<RecordBatchStreamImport<ImportedRecordBatch>>;
export function importArrayStreamFrom(fill: (out: Ptr) => FillStatus, opts: StreamImportOptions & { view: true }): RecordBatchStreamImport<ArrayView>;
export function importArrayStreamFrom(fill: (out: Ptr) => FillStatus, opts?: StreamImportOptions): RecordBatchStreamImport<ImportedRecordBatch>;
export function importArrayStreamFrom(
  fill: (out: Ptr) => FillResult,
  opts: StreamImportOptions = {},
): RecordBatchStreamImport<ImportedRecordBatch | ArrayView> | Promise<RecordBatchStreamImport<ImportedRecordBatch | ArrayView>> {
  return fillAndImport(memOf(opts), ['ArrowArrayStream'], fill, ([p]) => importArrayStream(p!, opts));
}

/**
 * Allocates an `ArrowSchema`, lets `fill` fill it, and reads it into a
 * `SchemaNode` (every type of the spec; the struct released and freed),
 * under the rules of `importArrayStreamFrom`. Target-neutral: the arrow-js
 * form is `importSchemaFrom` (src/fill/arrowjs.ts).
 */
export function importSchemaNodeFrom(fill: (out: Ptr) => FillResult, opts: { memory?: Memory } = {}): SchemaNode | Promise<SchemaNode> {
  const m = memOf(opts);
  return fillAndImport(m, ['ArrowSchema'], fill, ([p]) => readSchemaPtr(m, p!));
}
