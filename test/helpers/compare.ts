/**
 * Value comparison of arrow-js objects for tests: every value normalised to
 * plain JSON-like data (bigint kept as bigint, bytes as arrays), so two
 * tables that hold the same values compare equal whatever their chunking,
 * offsets or buffer sharing.
 */
import { DataType, Type, Vector, type Field, type RecordBatch, type Table } from 'apache-arrow';

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

/** Describes the first difference between two tables, or returns undefined when equal. */
export function diffTables(a: Table | RecordBatch, b: Table | RecordBatch): string | undefined {
  const fa = a.schema.fields.map(fieldString);
  const fb = b.schema.fields.map(fieldString);
  for (let i = 0; i < Math.max(fa.length, fb.length); i++) {
    if (fa[i] !== fb[i]) return `field ${i}: ${fa[i]} != ${fb[i]}`;
  }
  const ma = JSON.stringify([...a.schema.metadata]);
  const mb = JSON.stringify([...b.schema.metadata]);
  if (ma !== mb) return `schema metadata: ${ma} != ${mb}`;
  if (a.numRows !== b.numRows) return `rows: ${a.numRows} != ${b.numRows}`;
  for (let c = 0; c < a.numCols; c++) {
    const va = columnValues(a.getChildAt(c)!);
    const vb = columnValues(b.getChildAt(c)!);
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
