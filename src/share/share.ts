/**
 * Arrow data shared between the threads of one process without a copy
 * (docs/threads.md): `share(x)` gives a handle of plain data that survives
 * structured clone (`postMessage`), `importShared(handle)` in any thread
 * builds the same arrow-js objects over the same memory.
 *
 * The model is arrow-rs's `Arc` over an imported `FFI_ArrowArray`: one
 * count of references that every thread can reach (the table,
 * src/share/table.ts), each thread's own `ImportOwner` and views over the
 * memory, and the producer's `release` called once, by whichever thread
 * drops the last reference. CDataInterface.rst asks consumers to treat
 * exported buffers as immutable, so any number of threads may read them at
 * once.
 *
 * When a struct is first shared it moves into process memory (the C
 * allocator's, which any thread may free; our own small allocations sit in
 * this thread's JS slabs and die with it), and its schema is written there
 * too, so a thread reads both from addresses the table gives, never from the
 * handle: a handle names table slots by index and generation and nothing
 * else, and is checked against the table before any address is touched.
 *
 * This module is the arrow-js face of the layer (what a handle is built as
 * here, and which arrow-js objects are shared how); the table, the
 * references and the import of the shared structs are src/share/core.ts,
 * which loads no apache-arrow (the flechette target shares through it too).
 */
import { Data, RecordBatch, Schema, Struct, Table, Vector } from 'apache-arrow';
import { ArrowDeviceError, invalid } from '../errors.js';
import { toExportView } from '../array/api.js';
import { buildBatch, buildData, importedTable, importedVector, ImportedRecordBatch, ImportedTable, owned, ownersOf, type ImportedData, type ImportedVector } from '../array/build.js';
import { viewToArrow } from '../array/arrowjs.js';
import { importWith } from '../array/importer.js';
import type { ArrayView } from '../array/view.js';
import { DeviceArray } from '../device/device-array.js';
import {
  allShared, copiedFound, deviceFound, importSharedWith, isArrayView, plainView, shareWith,
  type Found, type ShareOptions, type ShareTarget, type SharedHandle, type SharedImportOptions, type SharedKind, type SharedViews,
} from './core.js';

export {
  dropShared, releaseThreadShares,
  type SharedKind, type SharedHandle, type SharedTicket, type WorkerLike, type ShareOptions, type SharedImportOptions,
} from './core.js';

/** What `importShared` returns for a handle of kind `K`. */
export type SharedImport<K extends SharedKind> = K extends 'table'
  ? ImportedTable
  : K extends 'batch'
    ? ImportedRecordBatch
    : K extends 'vector'
      ? ImportedVector
      : K extends 'data'
        ? ImportedData
        : K extends 'view'
          ? ArrayView
          : DeviceArray;

// --- share ------------------------------------------------------------------------------------

/** What `share` shares of `x`: a device array or an import by its owners, else arrow-js data over shared buffers, else a copy. */
function arrowFind(x: object): Found | SharedViews {
  if (x instanceof DeviceArray) return deviceFound(x);
  const owners = ownersOf(x);
  if (owners !== undefined) {
    if (x instanceof Table) return { kind: 'table', owners, rows: x.numRows, copied: false };
    if (x instanceof RecordBatch) return { kind: 'batch', owners, rows: x.numRows, copied: false };
    if (x instanceof Vector) return { kind: 'vector', owners, rows: x.length, copied: false };
    if (x instanceof Data) return { kind: 'data', owners, rows: x.length, copied: false };
    return { kind: 'view', owners, rows: (x as ArrayView).length, copied: false };
  }
  return sharedBuffersOf(x) ?? copyToProcess(x);
}

/**
 * Shares `x` with other threads of this process: returns a handle that
 * `postMessage` carries (structured clone), from which `importShared` in the
 * receiving thread builds the same arrow-js objects over the same memory,
 * zero-copy, at a cost that grows with the number of buffers, not of rows.
 *
 * `x` is an import of this library (an `ImportedTable`, `ImportedRecordBatch`,
 * `ImportedVector`, `ImportedData`, an imported `ArrayView`, or a
 * `DeviceArray`) in native memory, or arrow-js data built in JavaScript:
 * a `Table`, `RecordBatch` or `Vector` whose every buffer is a
 * `SharedArrayBuffer` travels as itself (no copy: `handle.views`), other
 * arrow-js data is copied once into process memory (a JS `ArrayBuffer`
 * belongs to its thread, which may end first; `accounting().copiedBytes`
 * counts it).
 *
 * The handle carries one reference: import it once (send to N threads with
 * N calls). The producer's `release` runs once, when the last reference in
 * any thread is released (`release()`, `using`, or the garbage collector),
 * never while a thread can still read. `x` itself stays readable here until
 * it is released here; its release detaches this thread's views only.
 *
 * @example
 * import { Worker } from 'node:worker_threads';
 * const worker = new Worker(new URL('./sum.js', import.meta.url));
 * worker.postMessage(share(table, { worker }));  // zero-copy; given back if the worker dies
 * // in sum.js: using t = importShared(handle); ... t.getChild('v')
 */
export function share(x: Table, opts?: ShareOptions): SharedHandle<'table'>;
export function share(x: RecordBatch, opts?: ShareOptions): SharedHandle<'batch'>;
export function share(x: Vector, opts?: ShareOptions): SharedHandle<'vector'>;
export function share(x: Data, opts?: ShareOptions): SharedHandle<'data'>;
export function share(x: DeviceArray, opts?: ShareOptions): SharedHandle<'device'>;
export function share(x: ArrayView, opts?: ShareOptions): SharedHandle<'view'>;
export function share(x: Table | RecordBatch | Vector | Data | DeviceArray | ArrayView, opts: ShareOptions = {}): SharedHandle {
  return shareWith(x, opts, arrowFind);
}

// --- arrow-js data built in JavaScript: over SharedArrayBuffers, or copied once into process memory --

/**
 * The arrays of a `Table`, `RecordBatch` or `Vector` of arrow-js whose every
 * buffer is over a `SharedArrayBuffer`, as plain `ArrayView`s over the same
 * memory; null otherwise (then it is copied). A `Data` or an `ArrayView` is
 * always copied: what comes back is an `ImportedData`, which only an import
 * makes.
 */
function sharedBuffersOf(x: object): SharedViews | null {
  let kind: SharedKind;
  let parts: (RecordBatch | Vector)[];
  let rows: number;
  if (x instanceof Table) [kind, parts, rows] = ['table', x.batches, x.numRows];
  else if (x instanceof RecordBatch) [kind, parts, rows] = ['batch', [x], x.numRows];
  else if (x instanceof Vector && x.data.length === 1) [kind, parts, rows] = ['vector', [x], x.length];
  else return null;
  if (parts.length === 0) return null;
  const views: ArrayView[] = [];
  for (const p of parts) {
    const v = toExportView(p);
    // Structured clone keeps own data properties only: the view as plain objects.
    if (!allShared(v)) return null;
    views.push(plainView(v));
  }
  return { kind, views, rows };
}

/**
 * Arrow-js objects over the `SharedArrayBuffer`s a handle's views carry: no
 * native memory is read, so a malformed view can only fail as arrow-js reads
 * it (a typed error here where the layout is wrong).
 */
function fromSharedViews(h: SharedHandle, opts: SharedImportOptions): SharedImport<SharedKind> {
  const views = h.views!;
  if (!Array.isArray(views) || views.length === 0 || (h.kind !== 'table' && views.length !== 1)) {
    throw invalid('handle.views', `a ${h.kind} handle with ${Array.isArray(views) ? views.length : 'no'} views`);
  }
  const data = views.map((v, i) => {
    try {
      return viewToArrow(v, opts, `handle.views[${i}]`);
    } catch (e) {
      if (e instanceof ArrowDeviceError) throw e;
      throw invalid(`handle.views[${i}]`, `not an array: ${String(e)}`);
    }
  });
  if (h.kind === 'vector') return importedVector(data[0]!, []);
  if (h.kind !== 'table' && h.kind !== 'batch') throw invalid('handle.kind', `views travel only for a table, a batch or a vector, not a ${h.kind}`);
  const batches = data.map((d, i) => {
    if (!(d.type instanceof Struct)) throw invalid(`handle.views[${i}]`, 'a batch must be a struct array');
    return owned(new ImportedRecordBatch(new Schema(d.type.children, views[i]!.schema.metadata ?? undefined), d as Data<Struct>), []);
  });
  return h.kind === 'batch' ? batches[0]! : owned(new ImportedTable(batches), []);
}

/**
 * Arrow-js data no import of ours made: its buffers are `ArrayBuffer`s of
 * this thread, freed with it, so each array is copied once into one block of
 * process memory (structs, buffer pointers and bytes together) and imported
 * from there. The block is freed with the entry's last reference; no producer
 * `release` runs (the entry says so: `EntryFlags.Block`).
 */
function copyToProcess(x: object): Found {
  let kind: SharedKind;
  let views: ArrayView[];
  let rows: number;
  if (x instanceof Table) {
    kind = 'table';
    views = x.batches.map((b) => toExportView(b));
    rows = x.numRows;
  } else if (x instanceof RecordBatch) {
    kind = 'batch';
    views = [toExportView(x)];
    rows = x.numRows;
  } else if (x instanceof Vector) {
    kind = 'vector';
    views = [toExportView(x)];
    rows = x.length;
  } else if (x instanceof Data) {
    kind = 'data';
    views = [toExportView(x)];
    rows = x.length;
  } else if (isArrayView(x)) {
    kind = 'view';
    views = [x];
    rows = x.length;
  } else {
    throw invalid('x', 'not an arrow-js Table, RecordBatch, Vector or Data, an ArrayView or a DeviceArray');
  }
  return copiedFound(kind, views, rows);
}

// --- import -------------------------------------------------------------------------------------

/** The arrow-js builds of a handle's arrays (src/share/core.ts `ShareTarget`). */
const arrowTarget: ShareTarget = {
  one(o, plan, kind, opts, level, path) {
    if (kind === 'batch' || kind === 'table') {
      plan.batch(path);
      return importWith(o, plan, opts, level, path, buildBatch);
    }
    plan.type();
    const data = importWith(o, plan, opts, level, path, buildData);
    return kind === 'vector' ? importedVector(data, o) : data;
  },
  table(batches) {
    const b = batches as ImportedRecordBatch[];
    return importedTable(b, b[0]!.schema as Schema);
  },
  views: (h, opts) => fromSharedViews(h, opts),
};

/**
 * Imports what another thread of this process shared (`share`): the same
 * arrow-js objects (`ImportedTable`, `ImportedRecordBatch`, ...) over the
 * same memory, zero-copy. Consumes the handle's reference: a second import
 * of one handle, a handle whose data was released, one from another process
 * or an altered one is a typed `ArrowDeviceError` naming the fault, found in
 * the process's table of shares before any address is read.
 *
 * Release it as any import (`release()`, `using`, or the garbage collector):
 * that detaches this thread's views and drops its reference; the last
 * reference in the process calls the producer's `release`.
 *
 * @example
 * import { parentPort } from 'node:worker_threads';
 * parentPort!.on('message', (handle: SharedHandle<'table'>) => {
 *   using t = importShared(handle);
 *   let sum = 0;
 *   for (const v of t.getChild('v')!) sum += Number(v);
 *   parentPort!.postMessage(sum);
 * });
 */
export function importShared<K extends SharedKind>(handle: SharedHandle<K>, opts?: SharedImportOptions): SharedImport<K>;
export function importShared(handle: SharedHandle, opts: SharedImportOptions = {}): SharedImport<SharedKind> {
  return importSharedWith(handle, opts, arrowTarget) as SharedImport<SharedKind>;
}
