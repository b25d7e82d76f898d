/**
 * The conformance runner's flechette target (`--target flechette`): cases
 * imported into `@uwdata/flechette` objects through arrow-device/flechette
 * (src/flechette/index.ts), exported from them, and compared value by value
 * with the gold data.
 *
 * The comparison reads each side on its own, into one canonical form:
 * - the gold side (`goldValues`): the case's `ArrayView`s as the
 *   integration JSON reader made them (tools/integration/json.ts), read here
 *   byte by byte (Columnar.rst): no flechette, no arrow-js, no src/flechette;
 * - the flechette side (`flechetteValues`): what flechette's batches return
 *   (`Batch.at(j)`) under `FLECHETTE_OPTIONS`, each leaf value as flechette
 *   gives it. Nested values are followed through flechette's own fields
 *   (offsets, sizes, strides, union type ids and its `typeMap`, run ends,
 *   dictionary keys) so that every leaf is reached through flechette, and
 *   `at(j)` of a nested row is checked to agree (null or not, its length).
 *   Two leaf types are read from flechette's typed arrays besides `at(j)`,
 *   because flechette's `at(j)` cannot hold them exactly: date64 (always
 *   coerced to a number, `DateDayMillisecondBatch` = `Int64Batch`, which
 *   throws past 2^53) and the nanoseconds of a month-day-nano interval (a
 *   `Float64Array`, `readInt64` -> `toNumber`, which throws past 2^53). Where
 *   `at(j)` gives a number it must equal the stored value; where it throws,
 *   that is counted as flechette's limit and said in the case's note.
 *
 * Canonical form, exact (peers that keep every type): ints of 64 bits as
 * bigint, narrower as number; decimals as their unscaled bigint; date32 as
 * days, date64 as bigint ms; time32 as number, time64, timestamps and
 * durations as bigint; intervals as numbers and [days, ms] and
 * [months, days, bigint ns]; bytes as hex; lists, maps (entries) and structs
 * as arrays (structs by position: names may repeat); unions as
 * { t: type id, v: value }. Logical (peers that map types: DuckDB, Parquet):
 * integers as bigint, decimals as text, dates as ms, times, timestamps and
 * durations as ns, unions as their value.
 */
import { readFileSync } from 'node:fs';
import { tableFromIPC, type Batch, type Column, type ExtractionOptions, type Table } from '@uwdata/flechette';
import { Flag } from '../src/abi/constants.js';
import type { ArrayView } from '../src/array/view.js';
import {
  exportArrayStream as exportFlechetteStream, exportRecordBatch as exportFlechetteRecordBatch, exportTable as exportFlechetteTable,
  importArrayStream as importFlechetteStream, importRecordBatch as importFlechetteRecordBatch, importTable as importFlechetteTable,
  schemaNodeOfSchema, tableOfViews, viewsOfTable,
} from '../src/flechette/index.js';
import type { MemoryOption } from '../src/index.js';
import type { TypeInfo } from '../src/schema/format.js';
import type { SchemaNode } from '../src/schema/node.js';
import { readIntegrationJsonFile } from './integration/json.js';
import type { CaseData, CasePtrs } from './peers/peer.js';

/**
 * The extraction options every flechette import of the runner uses: exact
 * 64-bit integers, times and timestamps (`useBigInt`, `useBigIntTimestamp`),
 * decimals as unscaled integers (`useDecimalInt`), maps as their entries
 * (`useMap: false`: a JS `Map` would merge repeated keys).
 */
export const FLECHETTE_OPTIONS: ExtractionOptions = { useBigInt: true, useBigIntTimestamp: true, useDecimalInt: true, useMap: false };

/** The transports the flechette entry has: ArrowArray (a table's record batches) and ArrowArrayStream. */
export function flechetteSkip(via: string): string | undefined {
  return via === 'array' || via === 'stream'
    ? undefined
    : `--target flechette: arrow-device/flechette has ArrowArray and ArrowArrayStream only (no device, async, CUDA or WebGPU interface), not --via ${via}`;
}

// --- import and export through arrow-device/flechette ---------------------------------------------

/** A case that holds a flechette table: the table, its schema's node and its record batches as views (zero-copy). */
export function caseOfTable(t: Table): CaseData {
  const { schema, batches } = viewsOfTable(t);
  return { schema, batches, flechette: t };
}

/**
 * Imports C structs into a flechette `Table` (`importRecordBatch` for one
 * ArrowArray, `importTable` for others, `importArrayStream(...).toTable()`
 * for a stream), at `full` validation. Import consumes the structs; `free`
 * frees their memory afterwards.
 */
export function importFlechette(ptrs: CasePtrs, free: (p: bigint) => void, opts: MemoryOption = {}): CaseData {
  const o = { ...opts, ...FLECHETTE_OPTIONS, validate: 'full' as const };
  try {
    if (ptrs.stream !== undefined) {
      const reader = importFlechetteStream(ptrs.stream, o);
      try {
        return caseOfTable(reader.toTable());
      } finally {
        reader.release();
      }
    }
    if (ptrs.arrays.length === 1) return caseOfTable(importFlechetteRecordBatch(ptrs.arrays[0]!, ptrs.schema, o));
    return caseOfTable(importFlechetteTable(ptrs.arrays, ptrs.schema, o));
  } finally {
    if (ptrs.stream !== undefined) free(ptrs.stream);
    else {
      free(ptrs.schema);
      for (const p of ptrs.arrays) free(p);
    }
  }
}

/**
 * Exports a flechette table as C structs: `--via array`, `exportRecordBatch`
 * for a table of one record batch, `exportTable` for others; `--via stream`,
 * `exportArrayStream`.
 */
export function exportFlechette(t: Table, opts: MemoryOption, via: string): CasePtrs {
  if (via === 'stream') return { schema: 0n, arrays: [], stream: exportFlechetteStream(t, opts) };
  if (via !== 'array') throw new Error(flechetteSkip(via));
  if (viewsOfTable(t).batches.length === 1) {
    const { schema, array } = exportFlechetteRecordBatch(t, opts);
    return { schema, arrays: [array] };
  }
  const { schema, arrays } = exportFlechetteTable(t, opts);
  return { schema, arrays };
}

/**
 * The case (its gold data and files) as flechette's own objects, for the
 * "ours first" direction: the case's IPC file read by flechette's IPC reader
 * (`tableFromIPC`), so what is exported is what a flechette user holds, not
 * what src/flechette built. The reading is checked against the gold data
 * first; where there is no IPC file, or flechette reads it differently (its
 * own bug: `readerDiff`, which fails the case once both directions ran), the
 * table is built from the gold views by src/flechette (`tableOfViews`).
 */
export function flechetteOfCase(gold: CaseData): { table: Table; note: string; readerDiff?: string } {
  const file = gold.files?.find((f) => f.endsWith('.arrow_file') || f.endsWith('.arrow')) ?? gold.files?.find((f) => f.endsWith('.stream') || f.endsWith('.arrows'));
  if (file) {
    let why: string | undefined;
    try {
      const t = tableFromIPC(readFileSync(file), FLECHETTE_OPTIONS);
      why = diffFlechette(gold, caseOfTable(t), true, new Set()) ?? undefined;
      if (!why) return { table: t, note: `flechette read ${file.split('/').pop()}` };
    } catch (e) {
      why = (e as Error).message;
    }
    const readerDiff = `flechette's own IPC reader of ${file.split('/').pop()} differs from the gold data (${why})`;
    return { table: tableOfViews(gold.schema, gold.batches, FLECHETTE_OPTIONS), note: 'built from the gold views', readerDiff };
  }
  return { table: tableOfViews(gold.schema, gold.batches, FLECHETTE_OPTIONS), note: 'built from the gold views (no IPC file)' };
}

/**
 * The gold data of a case: its integration JSON where there is one, else the
 * case as loaded. The two gold files of generated_extension write a field's
 * metadata in two orders (the JSON ARROW:extension:name first, the IPC file
 * ARROW:extension:metadata first, as arrow-js and flechette both read it):
 * where a node's pairs are the same, the order of the case as loaded (its IPC
 * file) is taken, the order the other peers are held to.
 */
export function goldOf(c: CaseData): CaseData {
  const json = c.files?.find((f) => f.endsWith('.json.gz') || f.endsWith('.json'));
  if (!json) return c;
  const g = readIntegrationJsonFile(json);
  return { schema: metadataOrderOf(g.schema, c.schema), batches: g.batches };
}

function metadataOrderOf(n: SchemaNode, like: SchemaNode | undefined): SchemaNode {
  if (!like) return n;
  const a = n.metadata;
  const o = like.metadata;
  const same = a !== null && o !== null && a.size === o.size && [...o].every(([k, v]) => a.get(k) === v);
  return {
    ...n,
    metadata: same ? new Map(o) : a,
    children: n.children.map((c, i) => metadataOrderOf(c, like.children[i])),
    dictionary: n.dictionary ? metadataOrderOf(n.dictionary, like.dictionary ?? undefined) : null,
  };
}

// --- the comparison -------------------------------------------------------------------------------

/**
 * The first difference between the gold data and a case imported into
 * flechette (`actual.flechette`): with `exact`, the schema (as far as
 * flechette holds one, see `flechetteShape`), then every value; without,
 * field names and logical values. `limits` collects what flechette's `at()`
 * could not return exactly (see the file's comment).
 */
export function diffFlechette(gold: CaseData, actual: CaseData, exact: boolean, limits: Set<string>): string | undefined {
  const t = actual.flechette;
  if (!t) return 'no flechette table in the imported case';
  if (exact) {
    // The schema of the flechette table (caseOfTable), as the peer handed it back: a peer may undo what it is
    // known to change (tools/peers/arrow-cpp.ts: extension metadata order, map field names), each said there.
    const d = diffNodes(flechetteShape(gold.schema, true, false), flechetteShape(actual.schema, true, false), 'schema');
    if (d) return d;
  } else {
    const ng = gold.schema.children.map((c) => c.name ?? '').join(',');
    const nf = t.schema.fields.map((f) => f.name).join(',');
    if (ng !== nf) return `field names: ${ng} != ${nf}`;
  }
  const rows = gold.batches.reduce((n, b) => n + b.length, 0);
  if (t.numRows !== rows) return `rows: gold ${rows}, flechette ${t.numRows}`;
  const fnode = schemaNodeOfSchema(t.schema);
  for (let c = 0; c < gold.schema.children.length; c++) {
    const col = t.children[c];
    if (!col) return `column ${c}: missing in the flechette table`;
    if (col.length !== rows) return `column ${c}: ${col.length} rows, the table has ${rows}`;
    const want = goldColumn(gold, c, exact);
    const got = flechetteColumn(col, fnode.children[c]!, exact, limits);
    for (let r = 0; r < rows; r++) {
      const x = show(want[r]);
      const y = show(got[r]);
      if (x !== y) return `column ${c} (${gold.schema.children[c]!.name}) row ${r}: gold ${x}, flechette ${y}`;
    }
  }
  return undefined;
}

/**
 * A schema node as flechette can hold it: the root without a name or flags;
 * a dictionary's values unnamed, nullable, without metadata (flechette's
 * dictionary type has no field for them, src/flechette/types.ts); metadata
 * that is empty as none.
 */
function flechetteShape(n: SchemaNode, root: boolean, dictValues: boolean): SchemaNode {
  const bare = root || dictValues;
  return {
    format: n.format,
    type: n.type,
    name: bare ? null : (n.name ?? ''),
    flags: root ? 0 : dictValues ? Flag.NULLABLE : n.flags,
    metadata: dictValues || n.metadata === null || n.metadata.size === 0 ? null : n.metadata,
    children: n.children.map((c) => flechetteShape(c, false, false)),
    dictionary: n.dictionary ? flechetteShape(n.dictionary, false, true) : null,
  };
}

function diffNodes(a: SchemaNode, b: SchemaNode, path: string): string | undefined {
  if (a.format !== b.format) return `${path}.format: gold ${a.format}, got ${b.format}`;
  if ((a.name ?? '') !== (b.name ?? '')) return `${path}.name: gold ${a.name}, got ${b.name}`;
  if (a.flags !== b.flags) return `${path}.flags: gold ${a.flags}, got ${b.flags}`;
  // Metadata in order, as the arrow-js target compares it (flechette keeps the order of IPC and C).
  const pairs = (m: ReadonlyMap<string, string> | null): string => JSON.stringify([...(m ?? [])]);
  if (pairs(a.metadata) !== pairs(b.metadata)) return `${path}.metadata: gold ${pairs(a.metadata)}, got ${pairs(b.metadata)}`;
  if (a.children.length !== b.children.length) return `${path}.n_children: gold ${a.children.length}, got ${b.children.length}`;
  for (let i = 0; i < a.children.length; i++) {
    const d = diffNodes(a.children[i]!, b.children[i]!, `${path}.children[${i}]`);
    if (d) return d;
  }
  if (!!a.dictionary !== !!b.dictionary) return `${path}.dictionary: present on one side only`;
  return a.dictionary && b.dictionary ? diffNodes(a.dictionary, b.dictionary, `${path}.dictionary`) : undefined;
}

/** A canonical value as text: bigints with an `n`, NaN and -0 told apart, marks of a disagreement kept. */
function show(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (v === null) return 'null';
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : String(v);
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(show).join(',')}]`;
  if (v instanceof Mismatch) return `<${v.what}>`;
  const u = v as { t: number; v: unknown };
  return `{t:${u.t},v:${show(u.v)}}`;
}

/** flechette's `at(j)` disagrees with its own fields: shown in place of the value, so the comparison fails there. */
class Mismatch {
  constructor(readonly what: string) {}
}

const NANOS: Record<string, bigint> = { s: 1_000_000_000n, ms: 1_000_000n, us: 1_000n, ns: 1n };

/** An exact canonical leaf in the logical form (see the file's comment). */
function logical(t: TypeInfo, v: unknown): unknown {
  if (v === null || v instanceof Mismatch) return v;
  switch (t.id) {
    case 'int': return BigInt(v as number | bigint);
    case 'decimal': return decimalText(v as bigint, t.scale);
    case 'date': return t.unit === 'day' ? BigInt(v as number) * 86_400_000n : v;
    case 'time': case 'timestamp': case 'duration': return BigInt(v as number | bigint) * NANOS[t.unit]!;
    default: return v;
  }
}

function decimalText(n: bigint, scale: number): string {
  if (scale <= 0) return (n * 10n ** BigInt(-scale)).toString();
  const neg = n < 0n;
  const s = (neg ? -n : n).toString().padStart(scale + 1, '0');
  return `${neg ? '-' : ''}${s.slice(0, -scale)}.${s.slice(-scale)}`;
}

const hex = (b: Uint8Array): string => `0x${Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex')}`;
const utf8 = new TextDecoder('utf-8');

// --- the gold side: ArrayViews read byte by byte ------------------------------------------------------

function goldColumn(gold: CaseData, c: number, exact: boolean): unknown[] {
  const out: unknown[] = [];
  for (const b of gold.batches) {
    const child = b.children[c]!;
    // Struct children are indexed like the struct, its offset included.
    for (let i = 0; i < b.length; i++) out.push(goldAt(child, b.offset + i, exact));
  }
  return out;
}

const dv = (b: Uint8Array): DataView => new DataView(b.buffer, b.byteOffset, b.byteLength);
const bit = (b: Uint8Array, p: number): boolean => ((b[p >> 3]! >> (p & 7)) & 1) === 1;

function intAt(b: Uint8Array, p: number, bitWidth: number, signed: boolean): number | bigint {
  const d = dv(b);
  switch (bitWidth) {
    case 8: return signed ? d.getInt8(p) : d.getUint8(p);
    case 16: return signed ? d.getInt16(p * 2, true) : d.getUint16(p * 2, true);
    case 32: return signed ? d.getInt32(p * 4, true) : d.getUint32(p * 4, true);
    default: return signed ? d.getBigInt64(p * 8, true) : d.getBigUint64(p * 8, true);
  }
}

function half(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return sign * f * 2 ** -24;
  if (e === 31) return f ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * 2 ** (e - 15) * (1 + f / 1024);
}

/** Element `i` (logical, from the array's start) of a view, canonical. */
function goldAt(v: ArrayView, i: number, exact: boolean): unknown {
  const p = v.offset + i;
  const n = v.schema;
  const t = n.type;
  const b = v.buffers;
  const nullable = t.id !== 'null' && t.id !== 'union' && t.id !== 'run_end_encoded';
  if (t.id === 'null') return null;
  if (nullable && b[0] && !bit(b[0], p)) return null;
  if (n.dictionary) {
    if (t.id !== 'int') throw new Error(`dictionary index of format ${n.format}`);
    return goldAt(v.dictionary!, Number(intAt(b[1]!, p, t.bitWidth, t.signed)), exact);
  }
  const leaf = (x: unknown): unknown => (exact ? x : logical(t, x));
  const d = (): DataView => dv(b[1]!);
  switch (t.id) {
    case 'bool': return bit(b[1]!, p);
    case 'int': return leaf(intAt(b[1]!, p, t.bitWidth, t.signed));
    case 'float': return t.bitWidth === 16 ? half(d().getUint16(p * 2, true)) : t.bitWidth === 32 ? d().getFloat32(p * 4, true) : d().getFloat64(p * 8, true);
    case 'decimal': {
      const w = t.bitWidth / 8;
      let x = 0n;
      for (let k = w - 1; k >= 0; k--) x = (x << 8n) | BigInt(b[1]![p * w + k]!);
      return leaf(BigInt.asIntN(t.bitWidth, x));
    }
    case 'date': return leaf(t.unit === 'day' ? d().getInt32(p * 4, true) : d().getBigInt64(p * 8, true));
    case 'time': return leaf(t.unit === 's' || t.unit === 'ms' ? d().getInt32(p * 4, true) : d().getBigInt64(p * 8, true));
    case 'timestamp': case 'duration': return leaf(d().getBigInt64(p * 8, true));
    case 'interval':
      if (t.unit === 'month') return d().getInt32(p * 4, true);
      if (t.unit === 'day_time') return [d().getInt32(p * 8, true), d().getInt32(p * 8 + 4, true)];
      return [d().getInt32(p * 16, true), d().getInt32(p * 16 + 4, true), d().getBigInt64(p * 16 + 8, true)];
    case 'fixed_binary': return hex(b[1]!.subarray(p * t.byteWidth, (p + 1) * t.byteWidth));
    case 'binary': case 'utf8': case 'large_binary': case 'large_utf8': {
      const large = t.id.startsWith('large');
      const a = Number(intAt(b[1]!, p, large ? 64 : 32, true));
      const e = Number(intAt(b[1]!, p + 1, large ? 64 : 32, true));
      const bytes = (b[2] ?? new Uint8Array(0)).subarray(a, e);
      return t.id.endsWith('utf8') ? utf8.decode(bytes) : hex(bytes);
    }
    case 'binary_view': case 'utf8_view': {
      const views = dv(b[1]!);
      const len = views.getInt32(p * 16, true);
      const bytes = len <= 12
        ? b[1]!.subarray(p * 16 + 4, p * 16 + 4 + len)
        : b[2 + views.getInt32(p * 16 + 8, true)]!.subarray(views.getInt32(p * 16 + 12, true), views.getInt32(p * 16 + 12, true) + len);
      return t.id === 'utf8_view' ? utf8.decode(bytes) : hex(bytes);
    }
    case 'list': case 'large_list': case 'map': case 'list_view': case 'large_list_view': case 'fixed_list': {
      let a: number;
      let e: number;
      if (t.id === 'fixed_list') [a, e] = [p * t.size, (p + 1) * t.size];
      else if (t.id === 'list_view' || t.id === 'large_list_view') {
        const w = t.id === 'list_view' ? 32 : 64;
        a = Number(intAt(b[1]!, p, w, true));
        e = a + Number(intAt(b[2]!, p, w, true));
      } else {
        const w = t.id === 'large_list' ? 64 : 32;
        a = Number(intAt(b[1]!, p, w, true));
        e = Number(intAt(b[1]!, p + 1, w, true));
      }
      const out: unknown[] = [];
      for (let k = a; k < e; k++) out.push(goldAt(v.children[0]!, k, exact));
      return out;
    }
    case 'struct': return v.children.map((c) => goldAt(c, p, exact));
    case 'union': {
      const id = dv(b[0]!).getInt8(p);
      const ci = t.typeIds.indexOf(id);
      const value = goldAt(v.children[ci]!, t.mode === 'dense' ? dv(b[1]!).getInt32(p * 4, true) : p, exact);
      return exact ? { t: id, v: value } : value;
    }
    case 'run_end_encoded': {
      const ends = v.children[0]!;
      const et = ends.schema.type as Extract<TypeInfo, { id: 'int' }>;
      // The first run whose end is past p (Columnar.rst, "Run-End Encoded Layout").
      let lo = 0;
      let hi = ends.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (Number(intAt(ends.buffers[1]!, ends.offset + mid, et.bitWidth, true)) > p) hi = mid;
        else lo = mid + 1;
      }
      return goldAt(v.children[1]!, lo, exact);
    }
  }
}

// --- the flechette side: what its batches return ------------------------------------------------------

/** flechette's fields this reader follows (batch.js), which its declarations leave out. */
interface FBatch {
  readonly length: number;
  readonly nullCount: number;
  readonly validity?: Uint8Array | null;
  readonly values?: ArrayLike<number | bigint> & ArrayBufferView;
  readonly offsets?: ArrayLike<number | bigint>;
  readonly sizes?: ArrayLike<number | bigint>;
  readonly children?: FBatch[];
  readonly typeIds?: Int8Array;
  readonly typeMap?: Record<number, number>;
  readonly dictionary?: Column<unknown>;
  readonly stride?: number;
  at(j: number): unknown;
}

function flechetteColumn(col: Column<unknown>, node: SchemaNode, exact: boolean, limits: Set<string>): unknown[] {
  const out: unknown[] = [];
  let row = 0;
  for (const b of col.data as unknown as FBatch[]) {
    for (let j = 0; j < b.length; j++, row++) {
      let v = flechetteAt(b, node, j, exact, limits);
      // The column's own at() reaches the same batch and row: null where the value is (not for a union, whose
      // at() is its member's value; skipped where flechette's leaf coercion throws).
      const a = node.type.id === 'union' ? LIMIT : reads(() => col.at(row), limits, `Column.at() of ${node.format}`);
      if (a !== LIMIT && !(v instanceof Mismatch) && (a === null) !== (v === null)) v = new Mismatch(`Column.at(${row}) is ${a === null ? '' : 'not '}null`);
      out.push(v);
    }
  }
  return out;
}

/** `f()`, or `LIMIT` where flechette's `toNumber` refuses a 64-bit value past 2^53 (flechette's limit, noted). */
const LIMIT = Symbol('flechette cannot return it');
function reads(f: () => unknown, limits: Set<string>, what = 'a nested 64-bit value'): unknown {
  try {
    return f();
  } catch (e) {
    const m = (e as Error).message;
    if (/BigInt exceeds integer number representation/.test(m)) {
      limits.add(`flechette's at() throws on ${what} past 2^53 ("${m.replace(/-?\d+$/, 'N')}")`);
      return LIMIT;
    }
    throw e;
  }
}

/** Whether row j is valid, as flechette decides it (batch.js `Batch`: no null count or no bitmap, all valid). */
const valid = (b: FBatch, j: number): boolean => !b.nullCount || !b.validity || bit(b.validity, j);

function flechetteAt(b: FBatch, node: SchemaNode, j: number, exact: boolean, limits: Set<string>): unknown {
  const t = node.type;
  const leaf = (x: unknown): unknown => (exact ? x : logical(t, x));
  if (node.dictionary) {
    if (!valid(b, j)) return null;
    const key = Number(b.values![j]!);
    const dict = b.dictionary!;
    let k = key;
    for (const d of dict.data as unknown as FBatch[]) {
      if (k < d.length) return flechetteAt(d, node.dictionary, k, exact, limits);
      k -= d.length;
    }
    return new Mismatch(`dictionary key ${key} out of range`);
  }
  if (t.id === 'null') return b.at(j) === null ? null : new Mismatch('at() of a null array is not null');
  const nested = ['list', 'large_list', 'map', 'list_view', 'large_list_view', 'fixed_list', 'struct', 'union', 'run_end_encoded'].includes(t.id);
  if (!nested) {
    // Leaves: flechette's at(j), except where it cannot hold the value (see the file's comment).
    if (t.id === 'date' && t.unit === 'ms') {
      if (!valid(b, j)) return b.at(j) === null ? null : new Mismatch('at() of a null is not null');
      const raw = (b.values as BigInt64Array)[j]!;
      const x = reads(() => b.at(j), limits, 'date64 values');
      if (x !== LIMIT && x !== Number(raw)) return new Mismatch(`at() ${String(x)} != stored ${raw}`);
      return leaf(raw);
    }
    if (t.id === 'interval' && t.unit === 'month_day_nano') {
      if (!valid(b, j)) return b.at(j) === null ? null : new Mismatch('at() of a null is not null');
      const d = dv(new Uint8Array(b.values!.buffer, b.values!.byteOffset, b.values!.byteLength));
      const raw = [d.getInt32(j * 16, true), d.getInt32(j * 16 + 4, true), d.getBigInt64(j * 16 + 8, true)] as const;
      const x = reads(() => b.at(j), limits, 'month-day-nano interval nanoseconds') as Float64Array | null | typeof LIMIT;
      if (x !== LIMIT && (x === null || x[0] !== raw[0] || x[1] !== raw[1] || x[2] !== Number(raw[2]))) {
        return new Mismatch(`at() ${x === null ? 'null' : `[${[...x]}]`} != stored [${raw.join(',')}]`);
      }
      return [raw[0], raw[1], raw[2]];
    }
    const x = b.at(j);
    if (x === null) return null;
    if (x === undefined) return new Mismatch('at() undefined');
    switch (t.id) {
      case 'decimal': return leaf(BigInt(x as number | bigint));
      case 'date': return leaf((x as number) / 86_400_000);
      case 'interval': return t.unit === 'day_time' ? [...(x as Int32Array)] : x;
      case 'binary': case 'large_binary': case 'binary_view': case 'fixed_binary': return hex(x as Uint8Array);
      default: return leaf(x);
    }
  }
  if (t.id === 'union') {
    const id = b.typeIds![j]!;
    const ci = b.typeMap![id]!;
    const off = t.mode === 'dense' ? Number(b.offsets![j]!) : j;
    const value = flechetteAt(b.children![ci]!, node.children[ci]!, off, exact, limits);
    return exact ? { t: id, v: value } : value;
  }
  if (t.id === 'run_end_encoded') {
    const runs = b.children![0]!.values!;
    let lo = 0;
    let hi = runs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (Number(runs[mid]!) > j) hi = mid;
      else lo = mid + 1;
    }
    return flechetteAt(b.children![1]!, node.children[1]!, lo, exact, limits);
  }
  const x = reads(() => b.at(j), limits, `at() of ${node.format}`);
  if (!valid(b, j)) return x === null || x === LIMIT ? null : new Mismatch('at() of a null row is not null');
  if (x === null) return new Mismatch('at() of a valid row is null');
  if (t.id === 'struct') return node.children.map((c, i) => flechetteAt(b.children![i]!, c, j, exact, limits));
  let a: number;
  let e: number;
  if (t.id === 'fixed_list') [a, e] = [j * b.stride!, (j + 1) * b.stride!];
  else if (t.id === 'list_view' || t.id === 'large_list_view') {
    a = Number(b.offsets![j]!);
    e = a + Number(b.sizes![j]!);
  } else [a, e] = [Number(b.offsets![j]!), Number(b.offsets![j + 1]!)];
  if (x !== LIMIT && (x as ArrayLike<unknown>).length !== e - a) return new Mismatch(`at() has ${(x as ArrayLike<unknown>).length} elements, the offsets say ${e - a}`);
  const out: unknown[] = [];
  for (let k = a; k < e; k++) out.push(flechetteAt(b.children![0]!, node.children[0]!, k, exact, limits));
  return out;
}

export type { Batch };
