/**
 * Who owns what an import returned, for every target: the owners recorded
 * on the returned object (an arrow-js `RecordBatch`, a flechette `Table`, an
 * `ArrayView`), and the release through them. Target-neutral: nothing here
 * knows an Arrow library, so the flechette target loads it without arrow-js.
 */
import { invalid } from '../errors.js';
import type { ImportOwner } from './owner.js';

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
 * The owners of an object an import returned, as a symbol-keyed property of
 * the object itself (out of `Object.keys` and JSON).
 */
const OWNERS = Symbol('arrow-device.owners');
/** One owner (an import of one array: no array made for it), or several (a table). */
type Owned = { [OWNERS]?: ImportOwner | readonly ImportOwner[] };

/** Records the owners of an object an import returns. */
export function owned<T extends object>(x: T, by: ImportOwner | readonly ImportOwner[]): T {
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
  releaseObject(x, 'released');
}

/** Releases the owners of `x` for `reason` (owner.ts), and makes its `Data` unreadable. */
export function releaseObject(x: object, reason: Parameters<ImportOwner['release']>[0]): void {
  const by = (x as Owned)[OWNERS];
  if (by === undefined) throw invalid('releaseImport', 'not an object returned by an import of this library');
  if (!Array.isArray(by)) (by as ImportOwner).release(reason);
  else {
    let first: unknown;
    for (const o of by as readonly ImportOwner[]) {
      try {
        o.release(reason);
      } catch (e) {
        first ??= e;
      }
    }
    if (first !== undefined) throw first;
  }
}

/**
 * Whether every owner behind `x` (an object an import returned) is released.
 *
 * @example
 * const batch = importRecordBatch(arrayPtr, schema);
 * isImportReleased(batch);  // false
 * batch.release();
 * isImportReleased(batch);  // true: reads now throw a `released` ArrowDeviceError
 */
export function isImportReleased(x: object): boolean {
  const by = ownersOf(x);
  if (!by) throw invalid('isImportReleased', 'not an object returned by an import of this library');
  return by.every((o) => o.isReleased);
}

/** Adds `release()`, `released` and `[Symbol.dispose]()` to the prototype of a class whose objects an import returns. */
export function defineReleasable(proto: object): void {
  const release = function release(this: object): void {
    releaseImport(this);
  };
  Object.defineProperties(proto, {
    release: { value: release, configurable: true, writable: true },
    released: {
      get(this: object): boolean {
        return isImportReleased(this);
      },
      configurable: true,
    },
    [Symbol.dispose]: { value: release, configurable: true, writable: true },
  });
}

