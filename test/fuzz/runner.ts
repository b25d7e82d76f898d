/**
 * Runs fuzz cases against the importers and judges them by the oracles of
 * issue 18:
 * - only `ArrowDeviceError`s come out of an importer, each with a place
 *   (a plain TypeError/RangeError, or an error with an empty path, is a finding);
 * - a case left unmutated (valid Arrow) imports, or is refused only as
 *   `unsupported` for what arrow-js cannot hold;
 * - at `full` validation, reading every value of an import through arrow-js,
 *   or through flechette for the flechette entry's importers (flechette.ts),
 *   does not throw (what full validation lets through is a validation bug);
 * - an import that fails has released what it was handed at once;
 * - every struct handed over is released exactly once (after a collection,
 *   for zero-copy imports), and no struct twice.
 * A crash or a hang is seen by the parent process (tools/fuzz.ts), which
 * runs this in a child.
 */
import { Data, RecordBatch, Vector } from 'apache-arrow';
import {
  ArrowDeviceError, DeviceArray, importArrayStream, importArrayView, importData, importDeviceArray, importDeviceArrayStream,
  importDeviceData, importDeviceRecordBatch, importField, importRecordBatch, importTable,
} from '../../src/index.js';
import * as flechette from '../../src/flechette/index.js';
import { collectUntil } from '../helpers/gc.js';
import { STREAM_DRIVERS, type Case } from './cases.js';
import { readFlechette } from './flechette.js';
import { layOut, producerLib, type Laid } from './producer.js';

export type FindingKind = 'untyped' | 'no-path' | 'full-read' | 'late-release' | 'leak' | 'double-release' | 'refused-valid';

export interface Finding {
  kind: FindingKind;
  message: string;
}

const replacer = (_k: string, v: unknown): unknown => (typeof v === 'bigint' ? String(v) : v);
/** The most rows read per array: reading is the oracle of `full`, not a benchmark. */
const MAX_ROWS = 2000;
/**
 * The most values read per case, nested ones counted: the cost of reading
 * is the data's (a list of a billion elements is valid, and an unchecked
 * offset below `full` says so), and the harness must not hang on it.
 */
const MAX_VALUES = 1 << 20;
/** Rows whose values are this few are also read through JSON.stringify (arrow-js's toJSON paths). */
const JSON_ROW = 10_000;

/** Reads `x` and what it holds through arrow-js, counting each value against `budget`. */
function readValue(x: unknown, budget: { n: number }): void {
  if (--budget.n < 0 || x === null || typeof x !== 'object') return;
  if (x instanceof Vector) {
    for (let k = 0; k < x.length && budget.n > 0; k++) readValue(x.get(k), budget);
    return;
  }
  if (ArrayBuffer.isView(x)) {
    if ((x as unknown as Record<symbol, unknown>)[Symbol.for('isArrowBigNum')]) String(x); // a decimal: its digits
    return;
  }
  // Struct and map rows: [name or key, value] pairs. (Not `Symbol.iterator in x`: a struct row's proxy
  // answers `in` for field names only.)
  if (typeof (x as { [Symbol.iterator]?: unknown })[Symbol.iterator] === 'function') {
    for (const e of x as Iterable<unknown>) {
      readValue(e, budget);
      if (budget.n <= 0) return;
    }
  }
}

/** Reads every value (up to MAX_ROWS rows and MAX_VALUES values) through arrow-js, as an application would. */
function readAll(d: Data | RecordBatch): void {
  const v = d instanceof RecordBatch ? d : new Vector([d]);
  const n = Math.min(d instanceof RecordBatch ? d.numRows : d.length, MAX_ROWS);
  const budget = { n: MAX_VALUES };
  for (let i = 0; i < n && budget.n > 0; i++) {
    const before = budget.n;
    const row = v.get(i);
    readValue(row, budget);
    if (before - budget.n < JSON_ROW) JSON.stringify(row, replacer);
  }
}

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

/** What the importers were handed, and must release. */
function handed(c: Case, laid: Laid): (number | null)[] {
  const ids: (number | null)[] = [laid.schemaId];
  switch (c.driver) {
    case 'field': return ids;
    case 'table': case 'flechetteTable': return [...ids, ...laid.arrayIds];
    // The schema and arrays reach the consumer through the stream, which releases those it did not hand out.
    case 'stream': case 'deviceStream': case 'flechetteStream': return [laid.streamId, ...ids, ...laid.arrayIds];
    default: return [...ids, laid.arrayIds[0] ?? null];
  }
}

/** Drivers whose input is a record batch (a struct array): any other root is the caller's mistake, refused as invalid. */
const BATCH_DRIVERS = new Set<Case['driver']>(['recordBatch', 'table', 'deviceRecordBatch', 'stream', 'deviceStream', 'flechetteTable', 'flechetteStream']);
/** The flechette entry's batch drivers: a flechette `Table` has no null rows (src/flechette/build.ts `tableOfViews` refuses a struct with nulls). */
const FLECHETTE_BATCH = new Set<Case['driver']>(['flechetteTable', 'flechetteStream']);

/** Whether the root array of a description has a null among its rows (its validity bitmap says so). */
function rootHasNulls(a: Case['arrays'][number]): boolean {
  if (a.nullCount === '0' || a.buffers[0] === null || a.buffers[0] === undefined) return false;
  const bm = Buffer.from(a.buffers[0], 'base64');
  const from = Number(a.offset);
  const to = from + Number(a.length);
  for (let i = from; i < to; i++) if (((bm[i >> 3] ?? 0) & (1 << (i & 7))) === 0) return true;
  return false;
}

/** Whether `c` is valid input to its driver: unmutated, and a struct (without null rows, for flechette) where the driver needs one. */
function validInput(c: Case): boolean {
  if (c.mutations.length !== 0 || (BATCH_DRIVERS.has(c.driver) && c.schema.format !== '+s')) return false;
  return !FLECHETTE_BATCH.has(c.driver) || !c.arrays.some(rootHasNulls);
}

/**
 * Runs one laid-out case. Returns the findings of the import itself; the
 * release checks that need a collection are `checkReleases`.
 */
export function runLaid(c: Case, laid: Laid): Finding[] {
  const out: Finding[] = [];
  const opts = { validate: c.level, expand: c.expand, copy: c.copy } as const;
  // The flechette entry has no `expand` (it holds every type); 64-bit integers, timestamps and decimals as bigints, so that
  // reading them throws only where flechette cannot read at all (flechette.ts: date64 and month-day-nano past 2^53).
  const fopts = { validate: c.level, copy: c.copy, useBigInt: true, useDecimalInt: true, useBigIntTimestamp: true } as const;
  const full = c.level === 'full';
  let reading = false;
  const read = (d: Data | RecordBatch | flechette.ImportedTable | flechette.ImportedColumn): void => {
    reading = true;
    try {
      if (d instanceof Data || d instanceof RecordBatch) readAll(d);
      else readFlechette(d, MAX_ROWS, MAX_VALUES);
    } catch (e) {
      if (full) out.push({ kind: 'full-read', message: `reading values after full validation threw ${describe(e)}` });
    } finally {
      reading = false;
    }
  };
  try {
    switch (c.driver) {
      case 'field': importField(laid.schema); break;
      case 'arrayView': {
        const v = importArrayView(laid.arrays[0]!, laid.schema, opts);
        void v.buffers;
        break;
      }
      case 'data': read(importData(laid.arrays[0]!, laid.schema, opts)); break;
      case 'recordBatch': read(importRecordBatch(laid.arrays[0]!, laid.schema, opts)); break;
      case 'table': for (const b of importTable(laid.arrays, laid.schema, opts).batches) read(b); break;
      case 'deviceArray': {
        const dev = importDeviceArray(laid.arrays[0]!, laid.schema, opts);
        try {
          dev.resolveBufferSizes();
          read(dev.toHost(opts));
        } finally {
          dev.release();
        }
        break;
      }
      case 'deviceData': {
        const d = importDeviceData(laid.arrays[0]!, laid.schema, { ...opts, toHost: true });
        if (!(d instanceof DeviceArray)) read(d);
        break;
      }
      case 'deviceRecordBatch': {
        const b = importDeviceRecordBatch(laid.arrays[0]!, laid.schema, { ...opts, toHost: true });
        if (!(b instanceof DeviceArray)) read(b);
        break;
      }
      case 'stream': case 'deviceStream': {
        const s = c.driver === 'stream' ? importArrayStream(laid.stream, opts) : importDeviceArrayStream(laid.stream, { ...opts, toHost: true });
        try {
          for (const b of s) read(b);
        } finally {
          s.release();
        }
        break;
      }
      case 'flechetteColumn': read(flechette.importColumn(laid.arrays[0]!, laid.schema, fopts)); break;
      case 'flechetteTable': read(flechette.importTable(laid.arrays, laid.schema, fopts)); break;
      case 'flechetteStream': {
        const s = flechette.importArrayStream(laid.stream, fopts);
        try {
          for (const t of s) read(t);
        } finally {
          s.release();
        }
        break;
      }
    }
  } catch (e) {
    if (reading) throw e;
    if (!(e instanceof ArrowDeviceError)) out.push({ kind: 'untyped', message: `${c.driver} threw ${describe(e)}` });
    else if (e.path === '') out.push({ kind: 'no-path', message: `${c.driver} threw an error without a place: ${e.message}` });
    // A case left as it was is valid Arrow: only what arrow-js cannot hold may be refused (unsupported:
    // a type it lacks without expand, values past 2^53 at full, the expansion cap), never as invalid;
    // flechette holds every type, and the same rule refuses no more there.
    else if (validInput(c) && (e.kind !== 'unsupported' || /cannot expand/.test(e.detail))) {
      out.push({ kind: 'refused-valid', message: `${c.driver} refused valid input: ${e.message}` });
    }
    // Import consumes, on failure at once (src/array/api.ts): nothing handed over may wait for a collection.
    const L = producerLib();
    const pending = handed(c, laid).filter((id) => id !== null && L.count(id) === 0);
    if (pending.length && !STREAM_DRIVERS.has(c.driver)) {
      out.push({ kind: 'late-release', message: `${c.driver} failed (${describe(e)}) but ${pending.length} struct(s) handed over are not released yet` });
    }
  }
  return out;
}

/**
 * After the results of `cases` are dropped: collects until every struct
 * handed over is released, then checks none was released twice.
 */
export async function checkReleases(cases: { c: Case; laid: Laid; index: number }[]): Promise<{ index: number; f: Finding }[]> {
  const L = producerLib();
  const roots = cases.flatMap(({ c, laid, index }) => handed(c, laid).filter((x): x is number => x !== null).map((id) => ({ id, index })));
  await collectUntil(() => roots.every((r) => L.count(r.id) >= 1), 20);
  const out: { index: number; f: Finding }[] = [];
  for (const r of roots) {
    if (L.count(r.id) === 0) out.push({ index: r.index, f: { kind: 'leak', message: `struct record ${r.id} handed over was never released` } });
  }
  for (const { laid, index } of cases) {
    for (const id of laid.ids) {
      const n = L.count(id);
      if (n > 1) out.push({ index, f: { kind: 'double-release', message: `struct record ${id} released ${n} times` } });
    }
  }
  return out;
}

/** Lays out and runs one case, then checks its releases: what a regression test of a reproducer does. */
export async function runOne(c: Case, firstId = 1): Promise<Finding[]> {
  const laid = layOut(c, firstId);
  const f = runLaid(c, laid);
  const r = await checkReleases([{ c, laid, index: 0 }]);
  return [...f, ...r.map((x) => x.f)];
}
