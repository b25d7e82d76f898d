/**
 * Value comparison of arrow-js objects for tests: every value normalised to
 * plain JSON-like data (bigint kept as bigint, bytes as arrays), so two
 * tables that hold the same values compare equal whatever their chunking,
 * offsets or buffer sharing.
 */
import { DataType, Schema, Table, Type, Vector, type Decimal, type Field, type Struct } from 'apache-arrow';

/** What the comparisons need of a table or record batch. */
export interface Tabular {
  readonly schema: Schema;
  readonly numRows: number;
  readonly numCols: number;
  getChildAt(i: number): Vector | null;
}

export function normalize(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint' || typeof v === 'number' || typeof v === 'string' || typeof v === 'boolean') {
    return typeof v === 'number' && Number.isNaN(v) ? 'NaN' : v;
  }
  if (v instanceof Vector) return Array.from({ length: v.length }, (_, i) => normalize(v.get(i)));
  if (ArrayBuffer.isView(v)) return Array.from(v as unknown as ArrayLike<number | bigint>);
  if (Array.isArray(v)) return v.map(normalize);
  if (v instanceof Map) return [...v.entries()].map(([k, x]) => [normalize(k), normalize(x)]);
  if (typeof v === 'object') {
    const o = v as { toJSON?: () => unknown; [Symbol.iterator]?: unknown };
    // StructRow and MapRow: iterate their entries.
    if (typeof (v as { toArray?: unknown }).toArray === 'function' && typeof o[Symbol.iterator] === 'function') {
      return [...(v as Iterable<unknown>)].map(normalize);
    }
    if (typeof o.toJSON === 'function') return normalize(o.toJSON());
    return Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, normalize(x)]));
  }
  return String(v);
}

/** Values of a column, normalised. */
export function columnValues(v: Vector): unknown[] {
  return Array.from({ length: v.length }, (_, i) => normalize(v.get(i)));
}

/** A 128/256-bit (or narrower) little-endian two's complement decimal in uint32 words, as text with `scale` decimals. */
export function decimalText(words: ArrayLike<number>, scale: number): string {
  let n = 0n;
  for (let k = words.length - 1; k >= 0; k--) n = (n << 32n) | BigInt(words[k]! >>> 0);
  n = BigInt.asIntN(words.length * 32, n);
  const neg = n < 0n;
  let s = (neg ? -n : n).toString().padStart(scale + 1, '0');
  if (scale > 0) s = `${s.slice(0, -scale)}.${s.slice(-scale)}`;
  return neg ? `-${s}` : s;
}

/** The int64 storage value of element i of a column of 64-bit values. */
function storageAt(v: Vector, i: number): bigint {
  let k = i;
  for (const d of v.data) {
    if (k < d.length) return BigInt((d.values as unknown as ArrayLike<bigint | number>)[k]!);
    k -= d.length;
  }
  throw new RangeError(`index ${i} out of range`);
}

const toNanos: Record<number, bigint> = { 0: 1_000_000_000n, 1: 1_000_000n, 2: 1_000n, 3: 1n };

/**
 * Values of a column in a form independent of the physical type, for peers
 * that map types (DuckDB: decimal32 -> decimal128, time32[s] -> time64[us]):
 * decimals as text, times and durations as nanoseconds. Nested values are
 * compared as `normalize` gives them.
 */
export function logicalValues(v: Vector): unknown[] {
  const t = v.type as DataType;
  const raw = (i: number): bigint => {
    const x = v.get(i) as number | bigint;
    return typeof x === 'bigint' ? x : BigInt(Math.round(x));
  };
  return Array.from({ length: v.length }, (_, i) => {
    if (!v.isValid(i)) return null;
    switch (t.typeId) {
      case Type.Decimal:
        return decimalText(v.get(i) as Uint32Array, (t as Decimal).scale);
      case Type.Time:
      case Type.Duration:
        return raw(i) * toNanos[(t as unknown as { unit: number }).unit]!;
      case Type.Timestamp:
        // get() converts to float milliseconds and loses precision: read the int64 storage.
        return storageAt(v, i) * toNanos[(t as unknown as { unit: number }).unit]!;
      default:
        return normalize(v.get(i));
    }
  });
}

/** A type's description for comparison (arrow-js prints types consistently; dictionary ids ignored). */
export function typeString(t: DataType): string {
  if (t.typeId === Type.Dictionary) {
    const d = t as unknown as { indices: DataType; dictionary: DataType; isOrdered: boolean };
    return `Dictionary<${typeString(d.indices)}, ${typeString(d.dictionary)}${d.isOrdered ? ', ordered' : ''}>`;
  }
  const children = (t.children ?? []) as Field[];
  const extra = t.typeId === Type.Map ? `sorted=${(t as unknown as { keysSorted: boolean }).keysSorted}` : '';
  return `${t.typeId}:${String(t)}${children.length ? `<${children.map(fieldString).join(', ')}>` : ''}${extra}`;
}

export function fieldString(f: Field): string {
  const md = f.metadata.size ? ` ${JSON.stringify([...f.metadata])}` : '';
  return `${f.name}${f.nullable ? '?' : ''}: ${typeString(f.type)}${md}`;
}

/**
 * The schema of a table as its data says. arrow-js 21 reports a wrong
 * `table.schema` when field names repeat (gold case duplicate_fieldnames:
 * an int8 column read back as int32, its constructor rebuilding by name);
 * the struct type of its batches' data is right.
 */
function dataSchema(t: Tabular): Schema {
  if (t instanceof Table && t.batches.length > 0) {
    return new Schema((t.batches[0]!.data.type as Struct).children, t.schema.metadata);
  }
  return t.schema;
}

/** Describes the first difference between two tables (types, metadata, values), or returns undefined when equal. */
export function diffTables(a: Tabular, b: Tabular): string | undefined {
  const fa = dataSchema(a).fields.map(fieldString);
  const fb = dataSchema(b).fields.map(fieldString);
  for (let i = 0; i < Math.max(fa.length, fb.length); i++) {
    if (fa[i] !== fb[i]) return `field ${i}: ${fa[i]} != ${fb[i]}`;
  }
  const ma = JSON.stringify([...a.schema.metadata]);
  const mb = JSON.stringify([...b.schema.metadata]);
  if (ma !== mb) return `schema metadata: ${ma} != ${mb}`;
  return diffValues(a, b, true);
}

/** The first difference in column names or values, types ignored (for peers that map types). */
export function diffValues(a: Tabular, b: Tabular, typesEqual = false): string | undefined {
  const na = a.schema.fields.map((f) => f.name).join(',');
  const nb = b.schema.fields.map((f) => f.name).join(',');
  if (na !== nb) return `field names: ${na} != ${nb}`;
  if (a.numRows !== b.numRows) return `rows: ${a.numRows} != ${b.numRows}`;
  const values = typesEqual ? columnValues : logicalValues;
  for (let c = 0; c < a.numCols; c++) {
    const va = values(a.getChildAt(c)!);
    const vb = values(b.getChildAt(c)!);
    for (let r = 0; r < va.length; r++) {
      const x = stringify(va[r]);
      const y = stringify(vb[r]);
      if (x !== y) return `column ${c} (${a.schema.fields[c]!.name}) row ${r}: ${x} != ${y}`;
    }
  }
  return undefined;
}

export function stringify(v: unknown): string {
  return JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? `${x}n` : x));
}
