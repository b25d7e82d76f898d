/**
 * Live-object accounting (docs/architecture.md#accounting): how many imports still
 * hold a producer's memory, how many exports still wait for a consumer's
 * `release`, and how many bytes those exports pin. Tests use it to prove
 * that nothing leaked after a round trip.
 */
export interface Accounting {
  /** Imported structs whose producer `release` has not been called yet. */
  liveImports: number;
  /** Exported structs (roots and children) whose `release` the consumer has not called yet. */
  liveExports: number;
  /** Bytes of JS buffers kept alive for live exports. */
  pinnedBytes: number;
  /** Imports whose bytes had to be copied (misaligned buffers, or the `copy` option), since start. */
  copiedBuffers: number;
  /** Bytes copied on import or export (bitmap shifts, misaligned buffers), since start. */
  copiedBytes: number;
  /** Producer `release` callbacks called, since start. */
  releasedImports: number;
  /** Owned handles we handed out (exchange protocol, `{ handle: true }` exports) not disposed yet. */
  liveHandles: number;
  /** References to shared data (`share`, `importShared`) this thread holds: its imports of it. */
  sharedReferences: number;
  /** Shared structs live in the process, in every thread (each released once, by the last reference). */
  processSharedEntries: number;
  /** Handles (`share`) not imported or dropped yet, in the whole process. */
  processSharedHandles: number;
  /** References to shared structs in the whole process: the holds of every thread plus the handles. */
  processSharedReferences: number;
}

/** The counters of shared data, from the table of shares (src/share), once a share or import made one. */
export type SharedCounts = Pick<Accounting, 'sharedReferences' | 'processSharedEntries' | 'processSharedHandles' | 'processSharedReferences'>;
let sharedCounts: (() => SharedCounts) | null = null;

/** Installed by src/share: the table is read only once something was shared. */
export function setSharedCounts(fn: () => SharedCounts): void {
  sharedCounts = fn;
}

const counters: Accounting = {
  liveImports: 0,
  liveExports: 0,
  pinnedBytes: 0,
  copiedBuffers: 0,
  copiedBytes: 0,
  releasedImports: 0,
  liveHandles: 0,
  sharedReferences: 0,
  processSharedEntries: 0,
  processSharedHandles: 0,
  processSharedReferences: 0,
};

/**
 * A snapshot of the counters: what tests read to prove that a round trip leaked nothing.
 *
 * @example
 * const before = accounting();
 * using batch = importRecordBatch(arrayPtr, schemaPtr);
 * accounting().liveImports - before.liveImports; // 1 until the batch is released
 */
export function accounting(): Readonly<Accounting> {
  return sharedCounts === null ? { ...counters } : { ...counters, ...sharedCounts() };
}

/** The live counters, for the library's own layers to update. */
export const liveCounters: Accounting = counters;
