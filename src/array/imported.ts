/**
 * The objects an import returns, and their deterministic release.
 *
 * Every import has one `ImportOwner` (owner.ts); the arrow-js objects
 * returned (`RecordBatch`, `Table`, `Vector`, `Data`) are subclasses that
 * know their owners and add `release()`, `released` and
 * `[Symbol.dispose]()`, so `using batch = importRecordBatch(...)` works.
 * `releaseImport(x)` does the same for any object an import returned
 * (also an `ArrayView`). Releasing is safe at any time, also after values
 * were read: the owner detaches every view first (see owner.ts).
 */
import { Data, Field, Int32, makeData, RecordBatch, Schema, Struct, Table, Vector, type DataType, type TypeMap } from 'apache-arrow';
import { ArrowSymbols, type ArrowDeviceExportOptions, type ArrowSchemaExportable } from '../abi/protocol.js';
import { invalid } from '../errors.js';
import type { ArrayExportHandles, ExportHandle } from '../memory/handle.js';
import type { ImportOwner } from './owner.js';
import { sameOwnFields } from './same-object.js';

/** What every import returns: an object that can be released now. */
export interface Releasable {
  /**
   * Releases the producer's memory now (exactly once; later calls do
   * nothing). Afterwards reading values through this object (or any arrow-js
   * object made from it) throws an `ArrowDeviceError` of kind `released`,
   * and typed arrays taken from it read as empty (detached).
   */
  release(): void;
  /** Whether the producer's memory has been released (a `copy` import is released at once but stays readable). */
  readonly released: boolean;
  /** `release()`, for `using`. */
  [Symbol.dispose](): void;
}

/**
 * The owners of an object an import returned, as a symbol-keyed property
 * of the object itself: a WeakMap entry per import cost more than the rest
 * of a small import (ephemeron bookkeeping in the garbage collector), and a
 * symbol key stays out of `Object.keys` and JSON.
 */
const OWNERS = Symbol('arrow-device.owners');
/** One owner (an import of one array: no array made for it), or several (a table). */
type Owned = { [OWNERS]?: ImportOwner | readonly ImportOwner[] };

/** Records the owners of an object an import returns. */
export function owned<T extends object>(x: T, by: ImportOwner | readonly ImportOwner[]): T {
  // A plain assignment (the cheapest property add): symbol keys are never listed by Object.keys,
  // for...in or JSON.stringify.
  (x as Owned)[OWNERS] = by;
  return x;
}

/** The owners of an object an import returned; undefined for any other object. */
export function ownersOf(x: object): readonly ImportOwner[] | undefined {
  const by = (x as Owned)[OWNERS];
  return by === undefined ? undefined : Array.isArray(by) ? by : [by as ImportOwner];
}

/**
 * Releases the producer's memory behind `x`, an object an import function
 * returned (`Data`, `Vector`, `RecordBatch`, `Table`, `ArrayView`), now.
 * Safe at any time: views of the memory are detached first, and reading
 * through the import's objects afterwards throws. Idempotent.
 *
 * @example
 * const batch = importRecordBatch(arrayPtr, schema);
 * console.log(batch.getChild('x')?.get(0));
 * releaseImport(batch);         // or batch.release(), or `using batch = ...`
 */
export function releaseImport(x: object): void {
  const by = (x as Owned)[OWNERS];
  if (by === undefined) throw invalid('releaseImport', 'not an object returned by an import of this library');
  if (Array.isArray(by)) releaseAll(by);
  else (by as ImportOwner).release();
}

/** Whether every owner behind `x` (an object an import returned) is released. */
export function isImportReleased(x: object): boolean {
  const by = ownersOf(x);
  if (!by) throw invalid('isImportReleased', 'not an object returned by an import of this library');
  return by.every((o) => o.isReleased);
}

/** Releases each owner; the first error is thrown after all were tried. */
export function releaseAll(by: readonly ImportOwner[]): void {
  let first: unknown;
  for (const o of by) {
    try {
      o.release();
    } catch (e) {
      first ??= e;
    }
  }
  if (first !== undefined) throw first;
}

function defineReleasable(proto: object): void {
  Object.defineProperties(proto, {
    release: {
      value: function release(this: object): void {
        releaseImport(this);
      },
      configurable: true,
      writable: true,
    },
    released: {
      get(this: object): boolean {
        return isImportReleased(this);
      },
      configurable: true,
    },
    [Symbol.dispose]: {
      value: function dispose(this: object): void {
        releaseImport(this);
      },
      configurable: true,
      writable: true,
    },
  });
}

/**
 * What an imported object adds for the exchange protocol (PROTOCOL.md),
 * installed by handoff.ts: `arrow.c_schema` exports its schema;
 * `arrow.c_array` and `arrow.c_device_array` hand it on to the next
 * consumer without a copy, by moving the producer's struct into the handle:
 * the object is then released (reads throw, reason "moved") whether or not
 * the consumer takes the handle. An import with no producer behind it
 * (`copy: true`) is exported from its JS memory and stays readable.
 */
export interface Exchangeable {
  /** The schema as an owned `ArrowSchema` handle; the object is unchanged. */
  [ArrowSymbols.schema](): ExportHandle;
  /** Hands the data on as `ArrowSchema` and `ArrowArray` handles (moved: the object is released). */
  [ArrowSymbols.array](requestedSchema?: ArrowSchemaExportable | null): ArrayExportHandles;
  /** Hands the data on as `ArrowSchema` and (CPU) `ArrowDeviceArray` handles (moved: the object is released). */
  [ArrowSymbols.deviceArray](requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ArrayExportHandles;
}

/** A `RecordBatch` an import returned: releasable, and handed on by the exchange protocol (see `Exchangeable`). */
export class ImportedRecordBatch<T extends TypeMap = any> extends RecordBatch<T> {}
export interface ImportedRecordBatch<T extends TypeMap = any> extends Releasable, Exchangeable {}
defineReleasable(ImportedRecordBatch.prototype);

/** A `Table` an import returned: releasing it releases every batch. */
export class ImportedTable<T extends TypeMap = any> extends Table<T> {}
export interface ImportedTable<T extends TypeMap = any> extends Releasable {}
defineReleasable(ImportedTable.prototype);

/** A `Vector` an import returned: releasable, and handed on by the exchange protocol (see `Exchangeable`). */
export class ImportedVector<T extends DataType = any> extends Vector<T> {}
export interface ImportedVector<T extends DataType = any> extends Releasable, Exchangeable {}
defineReleasable(ImportedVector.prototype);

/** A `Data` an import returned: releasable, and handed on by the exchange protocol (see `Exchangeable`). */
export class ImportedData<T extends DataType = any> extends Data<T> {}
export interface ImportedData<T extends DataType = any> extends Releasable, Exchangeable {}
defineReleasable(ImportedData.prototype);

/** Makes `batch` (a plain RecordBatch built for an import) an `ImportedRecordBatch` owned by `by`. */
export function asImportedBatch(batch: RecordBatch, by: ImportOwner | readonly ImportOwner[]): ImportedRecordBatch {
  if (!(batch instanceof ImportedRecordBatch)) Object.setPrototypeOf(batch, ImportedRecordBatch.prototype);
  return owned(batch as ImportedRecordBatch, by);
}

/** An `ImportedTable` of imported batches (of `schema` when there are none). */
export function importedTable(batches: readonly ImportedRecordBatch[], schema: Schema): ImportedTable {
  // With repeated field names arrow-js rejects new Table(schema, batches) (its schema comparison
  // goes by name), so a table of batches takes its schema from them.
  const t = batches.length === 0 ? new ImportedTable(schema) : FAST_TABLE && sameSchemaObject(batches) ? newTable([...batches]) : new ImportedTable([...batches]);
  return owned(t, batches.flatMap((b) => ownersOf(b) ?? []));
}

/** Whether every batch has the first one's schema object (an import's batches share their plan's). */
function sameSchemaObject(batches: readonly RecordBatch[]): boolean {
  const s = batches[0]!.schema;
  for (let i = 1; i < batches.length; i++) if (batches[i]!.schema !== s) return false;
  return true;
}

/**
 * A table of batches that share one schema object, as `new Table(batches)`
 * makes it, its fields stored directly: the constructor unwraps its
 * arguments (a closure and a flatMap per call), tests each batch's class
 * and compares each batch's schema with the first's, which for one schema
 * object is its answer already (12.8% of importing a 1,000-row table from
 * parquet-wasm). `FAST_TABLE` checks once that both make the same object.
 */
interface TableFields {
  schema: Schema;
  batches: RecordBatch[];
  _offsets: Uint32Array;
}
function FastTable(this: TableFields, batches: RecordBatch[]): void {
  this.schema = batches[0]!.schema;
  this.batches = batches;
  // arrow-js's computeChunkOffsets: the running sum of the batches' lengths, in a Uint32Array.
  const offsets = new Uint32Array(batches.length + 1);
  for (let i = 0; i < batches.length; i++) offsets[i + 1] = offsets[i]! + batches[i]!.data.length;
  this._offsets = offsets;
}
FastTable.prototype = ImportedTable.prototype;
const newTable = (batches: RecordBatch[]): ImportedTable => new (FastTable as unknown as new (b: RecordBatch[]) => ImportedTable)(batches);

const FAST_TABLE = ((): boolean => {
  try {
    const f = new Field('x', new Int32(), true);
    const schema = new Schema([f]);
    const batch = (n: number): RecordBatch =>
      new RecordBatch(schema, makeData({ type: new Struct([f]), length: n, children: [makeData({ type: new Int32(), length: n, data: new Int32Array(n) })] }));
    const batches = [batch(2), batch(3), batch(0)];
    return sameOwnFields(new ImportedTable([...batches]), newTable([...batches]));
  } catch {
    return false;
  }
})();

/** An `ImportedVector` over one imported `Data`. */
export function importedVector(data: Data, by: ImportOwner | readonly ImportOwner[]): ImportedVector {
  return owned(new ImportedVector([data]), by);
}

/**
 * `data` as an `ImportedData` owned by `by`. The lazy Data of a zero-copy
 * import is one already (LazyData extends ImportedData); a Data that a
 * conversion built (`expand`) gets the prototype, which adds only methods.
 */
export function importedData(data: Data, by: ImportOwner | readonly ImportOwner[]): ImportedData {
  if (!(data instanceof ImportedData)) Object.setPrototypeOf(data, ImportedData.prototype);
  return owned(data as ImportedData, by);
}

