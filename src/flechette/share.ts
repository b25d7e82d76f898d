/**
 * Arrow data shared between the threads of one process, for flechette (issue 52; docs/threads.md):
 * `share(x)` of a flechette `Table` or `Column` (an import of this library, shared by its structs;
 * or one built in JavaScript, copied once into process memory unless every buffer is a
 * `SharedArrayBuffer`), and `importShared(handle)` as flechette objects over the same memory,
 * zero-copy. The table of shares, the references and the import of the shared structs are the main
 * entry's (src/share/core.ts), so a handle made by either entry is imported by either: a thread
 * that reads arrow-js and one that reads flechette share one producer's data, released once by the
 * last of them.
 *
 * Each import is one owner in its thread, as any import: `release()` (or `using`, or the
 * collector) detaches this thread's views and drops its reference. Shared memory is native memory,
 * whose views keep their own `ArrayBuffer`s (src/array/owner.ts `view`): a flechette batch holds
 * the import by the typed arrays it is made of.
 *
 * Loads no apache-arrow. Imports src/flechette/index.ts, which re-exports it: neither uses the
 * other at load.
 */
import { Column, Table, type Batch, type ExtractionOptions } from '@uwdata/flechette';
import { owned, ownersOf } from '../array/owned.js';
import { importWith } from '../array/importer.js';
import { viewOf, type ArrayView } from '../array/view.js';
import { DeviceArray } from '../device/device-array.js';
import { ArrowDeviceError, invalid } from '../errors.js';
import {
  allShared, copiedFound, deviceFound, importSharedWith, isArrayView, plainView, shareWith,
  type Found, type ShareOptions, type ShareTarget, type SharedHandle, type SharedImportOptions, type SharedKind, type SharedViews,
} from '../share/core.js';
import { columnOfViews } from './build.js';
import { flechetteStreamTarget, ImportedColumn, ImportedTable, tableOver } from './core.js';
import { viewsOfColumn, viewsOfTable } from './view.js';

/** Options of the flechette `importShared`: the shared import's (`validate`), and flechette's own extraction options. */
export interface FlechetteSharedImportOptions extends Omit<SharedImportOptions, 'expand'>, ExtractionOptions {}

/** What the flechette `importShared` returns for a handle of kind `K`. */
export type FlechetteSharedImport<K extends SharedKind> = K extends 'table' | 'batch'
  ? ImportedTable
  : K extends 'vector' | 'data'
    ? ImportedColumn
    : K extends 'view'
      ? ArrayView
      : DeviceArray;

// --- share ------------------------------------------------------------------------------------

/** What `share` shares of `x`: an import by its owners, else data over shared buffers as it is, else a copy. */
function flechetteFind(x: object): Found | SharedViews {
  if (x instanceof DeviceArray) return deviceFound(x);
  const owners = ownersOf(x);
  if (owners !== undefined) {
    if (x instanceof Table) return { kind: 'table', owners, rows: x.numRows, copied: false };
    if (x instanceof Column) return { kind: 'vector', owners, rows: x.length, copied: false };
    return { kind: 'view', owners, rows: (x as ArrayView).length, copied: false };
  }
  let kind: SharedKind;
  let views: ArrayView[];
  let rows: number;
  if (x instanceof Table) [kind, views, rows] = ['table', viewsOfTable(x).batches, x.numRows];
  else if (x instanceof Column) {
    if (x.data.length !== 1) throw invalid('x', `a Column of ${x.data.length} batches is not one array: share a Table`);
    [kind, views, rows] = ['vector', viewsOfColumn(x), x.length];
  } else if (isArrayView(x)) [kind, views, rows] = ['view', [x], x.length];
  else throw invalid('x', 'not a flechette Table or Column, an ArrayView or a DeviceArray');
  // Views travel as they are only where a handle of views is built again (tables and columns).
  if (kind !== 'view' && views.length > 0 && views.every((v) => allShared(v))) return { kind, views: views.map(plainView), rows };
  return copiedFound(kind, views, rows);
}

/**
 * Shares `x` with other threads of this process: a handle that `postMessage` carries, from which
 * `importShared` in the receiving thread (of this entry, or the main entry's for arrow-js objects)
 * builds the same data over the same memory, zero-copy. `x`: a flechette `Table` or `Column` an
 * import returned (shared by its structs: no copy), one built in JavaScript (copied once into
 * process memory, `accounting().copiedBytes`; over `SharedArrayBuffer`s it travels as itself), an
 * imported `ArrayView` or a `DeviceArray`. The handle carries one reference: import it once. The
 * producer's `release` runs when the last reference in any thread is released.
 *
 * @example
 * import { Worker } from 'node:worker_threads';
 * const worker = new Worker(new URL('./sum.js', import.meta.url));
 * worker.postMessage(share(table, { worker }));   // given back if the worker dies
 * // in sum.js: using t = importShared(handle); t.getChild('v').toArray()
 */
export function share(x: Table, opts?: ShareOptions): SharedHandle<'table'>;
export function share(x: Column<unknown>, opts?: ShareOptions): SharedHandle<'vector'>;
export function share(x: DeviceArray, opts?: ShareOptions): SharedHandle<'device'>;
export function share(x: ArrayView, opts?: ShareOptions): SharedHandle<'view'>;
export function share(x: Table | Column<unknown> | DeviceArray | ArrayView, opts: ShareOptions = {}): SharedHandle {
  return shareWith(x, opts, flechetteFind);
}

// --- import -------------------------------------------------------------------------------------

/** The flechette builds of a handle's arrays (src/share/core.ts `ShareTarget`). */
function flechetteTarget(opts: FlechetteSharedImportOptions): ShareTarget {
  const items = flechetteStreamTarget(opts);
  return {
    one(o, plan, kind, o2, level, path) {
      if (kind === 'batch' || kind === 'table') {
        return importWith(o, plan, o2, level, path, (read) => {
          if (plan.node.type.id !== 'struct') throw invalid(`${path}.schema.format`, `a record batch must be a struct ("+s"), got "${plan.node.format}"`);
          return items.item(read, plan);
        });
      }
      // A vector or data: one Column of one batch (its batch holds the import by its typed arrays: see above).
      return importWith(o, plan, o2, level, path, (read) => {
        const c = columnOfViews(plan.node, [viewOf(read, plan.root, 0)], opts);
        return new ImportedColumn(c.data as Batch<unknown>[], c.type);
      });
    },
    table: (batches, node, path) => items.table(batches as ImportedTable[], node, path),
    views(h) {
      const views = h.views!;
      if (!Array.isArray(views) || views.length === 0 || (h.kind !== 'table' && views.length !== 1)) {
        throw invalid('handle.views', `a ${h.kind} handle with ${Array.isArray(views) ? views.length : 'no'} views`);
      }
      try {
        if (h.kind === 'vector') {
          const c = columnOfViews(views[0]!.schema, views, opts);
          return owned(new ImportedColumn(c.data as Batch<unknown>[], c.type), []);
        }
        if (h.kind !== 'table' && h.kind !== 'batch') throw invalid('handle.kind', `views travel only for a table, a batch or a vector, not a ${h.kind}`);
        views.forEach((v, i) => {
          if (v.schema?.type?.id !== 'struct') throw invalid(`handle.views[${i}]`, 'a batch must be a struct array');
        });
        return owned(tableOver(views[0]!.schema, views, opts), []);
      } catch (e) {
        if (e instanceof ArrowDeviceError) throw e;
        throw invalid('handle.views', `not an array: ${String(e)}`);
      }
    },
  };
}

/**
 * Imports what another thread of this process shared (this entry's `share`, or the main entry's):
 * a table or batch as a flechette `ImportedTable` (a table's batches as one table), a vector or
 * data as an `ImportedColumn`, a view as an `ArrayView`, a device array as a `DeviceArray`; over
 * the same memory, zero-copy, after waiting on the event of host-readable device memory. Consumes
 * the handle's reference: a second import, a handle whose data was released, one from another
 * process or an altered one is a typed `ArrowDeviceError`, found before any address is read.
 *
 * @example
 * import { parentPort } from 'node:worker_threads';
 * parentPort!.on('message', (handle: SharedHandle<'table'>) => {
 *   using t = importShared(handle);
 *   parentPort!.postMessage(t.getChild('v')!.toArray().reduce((a, b) => a + b, 0));
 * });
 */
export function importShared<K extends SharedKind>(handle: SharedHandle<K>, opts?: FlechetteSharedImportOptions): FlechetteSharedImport<K>;
export function importShared(handle: SharedHandle, opts: FlechetteSharedImportOptions = {}): FlechetteSharedImport<SharedKind> {
  return importSharedWith(handle, opts, flechetteTarget(opts)) as FlechetteSharedImport<SharedKind>;
}
