/**
 * The fuzzer's reader of flechette imports (src/flechette): every value of
 * a `Table` or `Column` read through flechette's own `Column.at` and
 * `toArray`, as an application would, under the same caps as the arrow-js
 * reader of runner.ts (MAX_ROWS rows, MAX_VALUES values a case). flechette
 * materializes a value whole (a list row is an array of all its elements),
 * so each row's cost is counted first, over the batches' own offsets
 * (`cost`), and a row past the budget is not read: a list of a billion
 * elements is valid, and reading it is not the oracle.
 *
 * Two reads flechette itself cannot make, with the extraction options the
 * fuzzer imports with ({ useBigInt, useDecimalInt, useBigIntTimestamp }),
 * are known limits, not findings: a date64 (milliseconds) past 2^53 and a
 * month-day-nano interval whose nanoseconds are past 2^53 (batch.js
 * `Int64Batch`, `IntervalMonthDayNanoBatch`: `toNumber` throws). Those
 * values (told by their bytes as each is read) read as null, on those batch
 * instances only, and are counted (`flechetteLimits`); any other throw is
 * the reader's to report.
 */
import { Column, DateUnit, IntervalUnit, Table, Type } from '@uwdata/flechette';

/** A flechette batch as its classes hold it (batch.js): the members the reader looks at. */
interface B {
  length: number;
  nullCount: number;
  type: { typeId: number; unit?: number; stride?: number; mode?: number };
  validity?: Uint8Array;
  values?: ArrayLike<number | bigint> & { byteLength: number };
  offsets?: ArrayLike<number | bigint>;
  sizes?: ArrayLike<number | bigint>;
  children?: B[];
  typeIds?: Int8Array;
  typeMap?: Record<number, number>;
  cache?: ArrayLike<unknown>;
  dictionary?: Column<unknown>;
  isValid(i: number): boolean;
  value(i: number): unknown;
}

/** Values read as null because flechette cannot read them (see the module comment), over the process. */
export const flechetteLimits = { values: 0 };

/** A row whose cost cannot be counted: an index outside the child it points into. */
const WEIRD = -1;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const unsafe = (v: bigint): boolean => v > MAX_SAFE || v < -MAX_SAFE;

/** Known limits: the values of each date64 and month-day-nano batch in the tree that flechette cannot read read as null (counted). */
function guard(b: B): void {
  const t = b.type;
  let bad: ((i: number) => boolean) | null = null;
  if (t.typeId === Type.Date && t.unit === DateUnit.MILLISECOND && b.values instanceof BigInt64Array) {
    const v = b.values;
    bad = (i) => unsafe(v[i]!);
  } else if (t.typeId === Type.Interval && t.unit === IntervalUnit.MONTH_DAY_NANO && b.values instanceof Uint8Array) {
    const v = b.values;
    const dv = new DataView(v.buffer, v.byteOffset, v.byteLength);
    bad = (i) => i * 16 + 16 <= v.byteLength && unsafe(dv.getBigInt64(i * 16 + 8, true));
  }
  if (bad !== null) {
    const own = b.value.bind(b);
    const skip = bad;
    // On this instance only (flechette's classes are untouched); `at`, `slice` and iteration call `this.value`.
    b.value = (i: number): unknown => {
      if (!skip(i)) return own(i);
      flechetteLimits.values++;
      return null;
    };
  }
  for (const c of b.children ?? []) guard(c);
  // A dictionary's values are read through its own column (flechette caches them on `setDictionary`, at import).
  for (const d of b.dictionary?.data ?? []) guard(d as unknown as B);
}

const int = (x: number | bigint | undefined): number => (typeof x === 'bigint' ? Number(x) : (x ?? Number.NaN));

/** The first run whose end is greater than `i` (batch.js `RunEndEncodedBatch`, arrays.js `bisect`). */
function runOf(ends: ArrayLike<number | bigint>, i: number): number {
  let lo = 0;
  let hi = ends.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (int(ends[mid]) <= i) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The number of values `b.at(i)` materializes, counting stops past `left`;
 * WEIRD where the row points outside what it indexes (flechette would read
 * `undefined`, or loop over a garbage range).
 */
function cost(b: B, i: number, left: number): number {
  if (!Number.isInteger(i) || i < 0 || i >= b.length) return WEIRD;
  if (b.nullCount && b.validity && !b.isValid(i)) return 1;
  const kids = b.children ?? [];
  switch (b.type.typeId) {
    case Type.List: case Type.LargeList: case Type.Map:
      return range(kids[0], int(b.offsets?.[i]), int(b.offsets?.[i + 1]), left);
    case Type.ListView: case Type.LargeListView: {
      const a = int(b.offsets?.[i]);
      return range(kids[0], a, a + int(b.sizes?.[i]), left);
    }
    case Type.FixedSizeList: {
      const s = b.type.stride ?? 0;
      return range(kids[0], i * s, (i + 1) * s, left);
    }
    case Type.Struct: {
      let n = 1;
      for (const c of kids) {
        const k = cost(c, i, left - n);
        if (k < 0) return WEIRD;
        if ((n += k) > left) return n;
      }
      return n;
    }
    case Type.Union: {
      const c = kids[b.typeMap?.[b.typeIds?.[i] ?? -1] ?? -1];
      if (c === undefined) return WEIRD;
      const k = cost(c, b.type.mode ? int(b.offsets?.[i]) : i, left - 1);
      return k < 0 ? WEIRD : 1 + k;
    }
    case Type.RunEndEncoded: {
      const [ends, vals] = kids;
      if (ends?.values === undefined || vals === undefined) return WEIRD;
      const k = cost(vals, runOf(ends.values, i), left - 1);
      return k < 0 ? WEIRD : 1 + k;
    }
    case Type.Dictionary: {
      const k = int(b.values?.[i]);
      return b.cache !== undefined && Number.isInteger(k) && k >= 0 && k < b.cache.length ? 1 : WEIRD;
    }
    default:
      return 1;
  }
}

/** The cost of elements `a .. e` of a child (a list's). */
function range(child: B | undefined, a: number, e: number, left: number): number {
  if (child === undefined || !Number.isInteger(a) || !Number.isInteger(e) || a < 0 || a > e || e > child.length) return WEIRD;
  let n = 1;
  for (let k = a; k < e; k++) {
    const c = cost(child, k, left - n);
    if (c < 0) return WEIRD;
    if ((n += c) > left) return n;
  }
  return n;
}

/**
 * Reads every value of a flechette import (up to `maxRows` rows a column and
 * `maxValues` values in all): each row through `Column.at`, and a column
 * read whole through `toArray`. Throws what flechette throws; a row whose
 * indices point outside what it indexes throws a RangeError naming it
 * (reading it would go out of range, or loop over a garbage range).
 */
export function readFlechette(x: Table | Column<unknown>, maxRows: number, maxValues: number): void {
  const columns = x instanceof Table ? x.children : [x];
  let left = maxValues;
  columns.forEach((col, ci) => {
    for (const b of col.data as unknown as B[]) guard(b);
    let row = 0;
    let whole = true;
    for (const b of col.data as unknown as B[]) {
      for (let j = 0; j < b.length; j++, row++) {
        if (row >= maxRows || left <= 0) return;
        const n = cost(b, j, left);
        if (n < 0) throw new RangeError(`column ${ci} row ${row}: its offsets point outside the child it indexes`);
        if (n > left) {
          left = 0;
          whole = false;
          break;
        }
        left -= n;
        col.at(row);
      }
      if (!whole) return;
    }
    // Every row was read within the budget: the column whole, as toArray gives it (typed arrays, copies across batches).
    col.toArray();
  });
}
