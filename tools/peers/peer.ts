/** The interface the conformance runner drives a peer implementation through. */
import type { Table as FlechetteTable } from '@uwdata/flechette';
import type { ArrayView, Memory, SchemaNode } from '../../src/index.js';

/** A case in our own form: a struct schema and its batches. */
export interface CaseData {
  schema: SchemaNode;
  batches: ArrayView[];
  /** The files the case was read from (a peer may read them itself). */
  files?: readonly string[];
  /**
   * `--target flechette`: the case as a flechette table (`schema` and
   * `batches` are then its views, tools/conformance-flechette.ts). An
   * import of the run gives one; `exportCase` exports it through
   * arrow-device/flechette. A peer that builds a case from another keeps it.
   */
  flechette?: FlechetteTable;
}

/**
 * C structs holding a case: one ArrowSchema and one ArrowArray (or
 * ArrowDeviceArray, `--via device`) per batch; or, with `--via stream` and
 * `device-stream`, one stream struct in `stream` (schema and arrays unused).
 */
export interface CasePtrs {
  schema: bigint;
  arrays: bigint[];
  stream?: bigint;
}

export interface Peer {
  readonly name: string;
  /** The memory the peer's structs live in (peer first: we import from it); native if absent. */
  readonly memory?: Memory;
  /** Whether the comparison is of exact types (false for peers that map types to their own). */
  readonly exactTypes: boolean;
  /** A reason to skip a case the peer cannot take, or undefined. */
  unsupported(data: CaseData): string | undefined;
  /**
   * The transports besides `array` the peer takes: a reason to skip `via`,
   * or undefined. Without it, the peer takes `--via array` only.
   */
  supports?(via: string): string | undefined;
  /** `--via async`, ours first: we produce into the peer's handler, the peer produces into ours. */
  asyncRoundTrip?(original: CaseData): Promise<{ data: CaseData; note?: string }>;
  /** `--via async`, peer first: the peer produces into our handler, we produce back, the peer compares. */
  asyncPeerFirst?(original: CaseData): Promise<string | undefined>;
  /**
   * How many structs of ours (exports) the peer has taken and not released
   * after it was done with them: its own leaks, measured by the peer around
   * each hand-over, so the accounting can tell them apart from ours. Absent:
   * none (every export must come back).
   */
  heldExports?(): number;
  /**
   * The schema we imported from the peer's own export with what the peer is
   * known to change in a schema undone (each change named and justified by
   * the peer), so that `--target flechette` can compare our import of its
   * export with the gold data in the peer-first direction. Absent: nothing.
   */
  undoSchemaChanges?(original: SchemaNode, imported: SchemaNode): SchemaNode;
  /** A reason to skip when the peer threw this error (its own "not supported"), or undefined: a failure. */
  skipReason?(e: unknown): string | undefined;
  /**
   * Ours first: the peer imports `ptrs` (it takes ownership), exports its own
   * structs, and we import them. Returns what we imported.
   */
  roundTrip(original: CaseData, ptrs: CasePtrs): Promise<{ data: CaseData; note?: string }>;
  /**
   * Peer first: the peer exports `original` in its own structs, `through`
   * (we import and export again) hands back ours, and the peer imports and
   * compares them with its own copy. Returns a difference, or undefined.
   */
  peerFirst(original: CaseData, through: (ptrs: CasePtrs, free: (p: bigint) => void) => Promise<CasePtrs>): Promise<string | undefined>;
  close(): Promise<void>;
}
