/**
 * arrow-device against DuckDB's C API, an independent implementation of the
 * C Data Interface: we import what DuckDB exports and compare with what
 * DuckDB prints, and DuckDB imports what we export and SQL checks it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  Bool, DateDay, Decimal, Field, Float64, Int32, Int64, List, Schema, Struct, tableFromArrays, TimestampMicrosecond, Utf8,
  vectorFromArray, Table, type Vector, type Data,
} from 'apache-arrow';
import { accounting, exportSchema, exportTable, freeArrowArray, freeArrowSchema, importTable } from '../../../src/index.js';
import { collectUntil } from '../../helpers/gc.js';
import { DUCKDB_MISSING, DuckDB, duckdbAvailable, freeStruct } from './duckdb.js';

const skip = duckdbAvailable() ? false : DUCKDB_MISSING;

/** The storage value of element i (raw integers for temporal types), for comparisons with SQL. */
function raw(v: Vector, i: number, stride = 1): Array<number | bigint> {
  let idx = i;
  for (const d of v.data as Data[]) {
    if (idx < d.length) {
      const vals = d.values as unknown as ArrayLike<number | bigint>;
      return Array.from({ length: stride }, (_, k) => vals[idx * stride + k]!);
    }
    idx -= d.length;
  }
  throw new Error(`index ${i} out of range`);
}

/** A 128-bit little-endian two's complement integer in 4 uint32 words, as text with `scale` decimals. */
function decimalText(words: ArrayLike<number>, scale: number): string {
  let n = 0n;
  for (let k = 3; k >= 0; k--) n = (n << 32n) | BigInt(words[k]! >>> 0);
  n = BigInt.asIntN(128, n);
  const neg = n < 0n;
  let s = (neg ? -n : n).toString().padStart(scale + 1, '0');
  if (scale > 0) s = `${s.slice(0, -scale)}.${s.slice(-scale)}`;
  return neg ? `-${s}` : s;
}

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex').toUpperCase();
}

const json = (x: unknown): string => JSON.stringify(x, (_, v) => (typeof v === 'bigint' ? Number(v) : v));

interface Case {
  name: string;
  /** SQL producing the column `v` from `i` (0..N-1). */
  expr: string;
  /** Appended to the nullable expression (types DuckDB's CASE cannot produce directly). */
  cast?: string;
  /** SQL giving DuckDB's canonical text of `v`. */
  canon: string;
  /** Our canonical text of element i of the imported column. */
  ours: (v: Vector, i: number) => string;
}

const str = (v: Vector, i: number): string => String(v.get(i));
/** DuckDB prints doubles with at least one decimal ("-100.0"). */
const duckDouble = (x: number): string => (Number.isInteger(x) ? x.toFixed(1) : String(x));
const decimal = (v: Vector, i: number): string => decimalText(raw(v, i, 4) as number[], (v.type as Decimal).scale);
const cases: Case[] = [
  { name: 'BOOLEAN', expr: 'i % 3 = 0', canon: 'v::VARCHAR', ours: str },
  { name: 'TINYINT', expr: '(i % 200 - 100)::TINYINT', canon: 'v::VARCHAR', ours: str },
  { name: 'SMALLINT', expr: '(i * 7 - 9000)::SMALLINT', canon: 'v::VARCHAR', ours: str },
  { name: 'INTEGER', expr: '(i * 100003 - 7)::INTEGER', canon: 'v::VARCHAR', ours: str },
  { name: 'BIGINT', expr: '(i * 1000000007 - 3)::BIGINT', canon: 'v::VARCHAR', ours: str },
  { name: 'UTINYINT', expr: '(i % 256)::UTINYINT', canon: 'v::VARCHAR', ours: str },
  { name: 'USMALLINT', expr: '(i * 21)::USMALLINT', canon: 'v::VARCHAR', ours: str },
  { name: 'UINTEGER', expr: '(i * 1000003)::UINTEGER', canon: 'v::VARCHAR', ours: str },
  { name: 'UBIGINT', expr: '(i::UBIGINT * 3000000000000001)', canon: 'v::VARCHAR', ours: str },
  { name: 'FLOAT', expr: '(i / 8)::FLOAT', canon: 'v::DOUBLE::VARCHAR', ours: (v, i) => duckDouble(v.get(i) as number) },
  { name: 'DOUBLE', expr: 'i / 4 - 100', canon: 'v::VARCHAR', ours: (v, i) => duckDouble(v.get(i) as number) },
  { name: 'DECIMAL(9,2)', expr: '(i * 1.25 - 50)::DECIMAL(9,2)', canon: 'v::VARCHAR', ours: decimal },
  { name: 'DECIMAL(18,3)', expr: '(i * 12345.125)::DECIMAL(18,3)', canon: 'v::VARCHAR', ours: decimal },
  { name: 'DECIMAL(38,10)', expr: '(i::DECIMAL(38,10) * -1234567.0123456789)::DECIMAL(38,10)', canon: 'v::VARCHAR', ours: decimal },
  { name: 'HUGEINT', expr: '(i::HUGEINT * 17014118346046923173168730371588)', canon: 'v::VARCHAR', ours: decimal },
  { name: 'VARCHAR', expr: "repeat('é', i % 5) || i::VARCHAR", canon: 'v', ours: str },
  { name: 'BLOB', expr: "('\\x' || (i % 256)::VARCHAR || 'ab')::BLOB", canon: 'hex(v)', ours: (v, i) => hex(v.get(i) as Uint8Array) },
  { name: 'DATE', expr: "DATE '1969-12-01' + i::INTEGER", canon: "(v - DATE '1970-01-01')::VARCHAR", ours: (v, i) => String(raw(v, i)[0]) },
  { name: 'TIME', expr: "TIME '00:00:00' + to_microseconds(i * 1000003)", canon: '((hour(v) * 3600 + minute(v) * 60)::BIGINT * 1000000 + microsecond(v))::VARCHAR', ours: (v, i) => String(raw(v, i)[0]) },
  { name: 'TIMESTAMP', expr: "TIMESTAMP '1960-01-01' + to_microseconds(i * 123456789012)", canon: 'epoch_us(v)::VARCHAR', ours: (v, i) => String(raw(v, i)[0]) },
  { name: 'TIMESTAMP_S', expr: "(TIMESTAMP '1960-01-01' + to_seconds(i * 86401))::TIMESTAMP_S", canon: 'epoch(v)::BIGINT::VARCHAR', ours: (v, i) => String(raw(v, i)[0]) },
  { name: 'TIMESTAMP_MS', expr: "(TIMESTAMP '1960-01-01' + to_milliseconds(i * 86401001))::TIMESTAMP_MS", canon: 'epoch_ms(v)::VARCHAR', ours: (v, i) => String(raw(v, i)[0]) },
  { name: 'TIMESTAMP_NS', expr: "(TIMESTAMP '1960-01-01' + to_microseconds(i * 86401001))::TIMESTAMP_NS", canon: 'epoch_ns(v)::VARCHAR', ours: (v, i) => String(raw(v, i)[0]) },
  { name: 'TIMESTAMPTZ', expr: "TIMESTAMPTZ '2001-02-03 04:05:06+00' + to_microseconds(i * 1000001)", canon: 'epoch_us(v)::VARCHAR', ours: (v, i) => String(raw(v, i)[0]) },
  {
    name: 'INTERVAL',
    expr: "to_months(i % 30) + to_days(i % 11) + to_microseconds(i * 1000003)",
    canon: "(datepart('year', v) * 12 + datepart('month', v))::VARCHAR || ',' || datepart('day', v)::VARCHAR || ',' || (datepart('hour', v)::BIGINT * 3600000000 + datepart('minute', v)::BIGINT * 60000000 + datepart('microseconds', v))::VARCHAR",
    ours: (v, i) => {
      const [m, d, lo, hi] = raw(v, i, 4) as number[];
      const nanos = (BigInt(hi!) << 32n) | BigInt(lo! >>> 0);
      return `${m},${d},${nanos / 1000n}`;
    },
  },
  { name: 'UUID', expr: "('00000000-0000-4000-8000-' || lpad(i::VARCHAR, 12, '0'))::UUID", canon: 'v::VARCHAR', ours: str },
  { name: 'LIST', expr: 'CASE WHEN i % 4 = 1 THEN [] ELSE [i, NULL, i * 2] END', canon: 'to_json(v)::VARCHAR', ours: (v, i) => json([...(v.get(i) as Vector)]) },
  { name: 'STRUCT', expr: "{'a': i, 'b': 'x' || i::VARCHAR}", canon: 'to_json(v)::VARCHAR', ours: (v, i) => json((v.get(i) as { toJSON(): unknown }).toJSON()) },
  { name: 'MAP', expr: "MAP {'k' || i::VARCHAR: i}", canon: 'to_json(v)::VARCHAR', ours: (v, i) => json((v.get(i) as { toJSON(): unknown }).toJSON()) },
  { name: 'ENUM', expr: "(['red', 'green', 'blue'][i % 3 + 1])::ENUM('red', 'green', 'blue')", canon: 'v::VARCHAR', ours: str },
  { name: 'ARRAY', expr: '[i, i + 1, i + 2]', cast: '::INTEGER[3]', canon: 'to_json(v)::VARCHAR', ours: (v, i) => json([...(v.get(i) as Vector)]) },
  { name: 'UNION', expr: "CASE WHEN i % 2 = 0 THEN union_value(n := i::INTEGER)::UNION(n INTEGER, s VARCHAR) ELSE union_value(s := 's' || i::VARCHAR)::UNION(n INTEGER, s VARCHAR) END", canon: 'v::VARCHAR', ours: str },
];

const N = 3000; // more than one 2048-row DuckDB chunk

describe('DuckDB peer: C Data Interface', { skip }, () => {
  let db: DuckDB;
  before(async () => {
    db = await DuckDB.open({ threads: 4 });
  });
  after(() => db?.close());

  for (const c of cases) {
    test(`imports DuckDB ${c.name} zero-copy and matches DuckDB's own values`, async () => {
      const from = `(SELECT (CASE WHEN i % 7 = 3 THEN NULL ELSE (${c.expr}) END)${c.cast ?? ''} AS v FROM range(${N}) t(i))`;
      const expected = await db.queryText(`SELECT CASE WHEN v IS NULL THEN NULL ELSE ${c.canon} END FROM ${from}`);
      const { schema, arrays } = await db.queryArrow(`SELECT v FROM ${from}`);
      const table = importTable(arrays, schema, { validate: 'full' });
      for (const p of arrays) freeStruct(p);
      freeStruct(schema);
      assert.ok(arrays.length >= 2, 'DuckDB exported several chunks');
      const col = table.getChildAt(0)!;
      assert.equal(col.length, N);
      for (let i = 0; i < N; i++) {
        const e = expected[i]![0];
        const ours = col.isValid(i) ? c.ours(col, i) : null;
        if (ours !== e) assert.fail(`row ${i}: ours ${ours} != DuckDB ${e} (type ${String(col.type)})`);
      }
    });
  }

  test('DuckDB aggregates a table exported from arrow-js, zero-copy', async () => {
    const n = 100_000;
    const ints = Int32Array.from({ length: n }, (_, i) => i - 50_000);
    const t = new Table({
      a: vectorFromArray(ints),
      b: vectorFromArray(Float64Array.from({ length: n }, (_, i) => i / 2)),
      c: vectorFromArray(Array.from({ length: n }, (_, i) => (i % 10 === 0 ? null : BigInt(i) * 3n)), new Int64()),
      d: vectorFromArray(Array.from({ length: n }, (_, i) => (i % 3 === 0 ? null : `s${i % 100}`)), new Utf8()),
    });
    const { schema, arrays } = exportTable(t);
    await db.createTableFromArrow('js_table', schema, arrays);
    for (const p of arrays) freeArrowArray(p);
    freeArrowSchema(schema);
    const [row] = await db.queryText(
      'SELECT count(*), sum(a), sum(b), sum(c), count(c), count(d), count(DISTINCT d), max(length(d)) FROM js_table',
    );
    const sumA = ints.reduce((s, x) => s + x, 0);
    const sumC = Array.from({ length: n }, (_, i) => (i % 10 === 0 ? 0n : BigInt(i) * 3n)).reduce((s, x) => s + x, 0n);
    assert.deepEqual(row, [
      String(n), String(sumA), `${(n * (n - 1)) / 4}.0`, String(sumC), String(n - n / 10),
      String(n - Math.ceil(n / 3)), '100', '3',
    ]);
    assert.equal(accounting().liveExports, 0, 'DuckDB released every exported array');
  });

  test('DuckDB reads nested, temporal and boolean columns we export', async () => {
    const schema = new Schema([
      new Field('l', new List(new Field('item', new Int32(), true)), true),
      new Field('s', new Struct([new Field('x', new Int32()), new Field('y', new Utf8())]), true),
      new Field('d', new DateDay(), true),
      new Field('ts', new TimestampMicrosecond(), true),
      new Field('b', new Bool(), true),
    ]);
    const l = vectorFromArray([[1, 2], null, [], [3]], schema.fields[0]!.type);
    const s = vectorFromArray([{ x: 1, y: 'a' }, { x: 2, y: 'b' }, null, { x: 4, y: 'd' }], schema.fields[1]!.type);
    const d = vectorFromArray([Date.UTC(2020, 0, 1), null, Date.UTC(1969, 11, 31), 0], new DateDay());
    const ts = vectorFromArray([Date.UTC(2020, 0, 1, 12), 0, null, -1000], new TimestampMicrosecond());
    const b = vectorFromArray([true, false, null, true], new Bool());
    const exported = exportTable(new Table({ l, s, d, ts, b }));
    await db.createTableFromArrow('nested', exported.schema, exported.arrays);
    for (const p of exported.arrays) freeArrowArray(p);
    freeArrowSchema(exported.schema);
    const rows = await db.queryText(
      "SELECT to_json(l)::VARCHAR, to_json(s)::VARCHAR, d::VARCHAR, strftime(ts, '%Y-%m-%d %H:%M:%S.%f'), b::VARCHAR FROM nested",
    );
    assert.deepEqual(rows, [
      ['[1,2]', '{"x":1,"y":"a"}', '2020-01-01', '2020-01-01 12:00:00.000000', 'true'],
      [null, '{"x":2,"y":"b"}', null, '1970-01-01 00:00:00.000000', 'false'],
      ['[]', null, '1969-12-31', null, null],
      ['[3]', '{"x":4,"y":"d"}', '1970-01-01', '1969-12-31 23:59:59.000000', 'true'],
    ]);
  });

  test('a DuckDB result survives a round trip through us, checked by DuckDB itself', async () => {
    const cols = cases.filter((c) => !['UNION', 'HUGEINT', 'UUID', 'ENUM'].includes(c.name));
    const select = cols.map((c, k) => `(CASE WHEN i % 7 = ${k % 7} THEN NULL ELSE (${c.expr}) END)${c.cast ?? ''} AS c${k}`).join(', ');
    await db.run(`CREATE TABLE original AS SELECT ${select} FROM range(${N}) t(i)`);
    (await (async () => {
      const { schema, arrays } = await db.queryArrow('SELECT * FROM original');
      const table = importTable(arrays, schema);
      for (const p of arrays) freeStruct(p);
      freeStruct(schema);
      const out = exportTable(table);
      await db.createTableFromArrow('copy', out.schema, out.arrays);
      for (const p of out.arrays) freeArrowArray(p);
      freeArrowSchema(out.schema);
    })());
    const [diff] = await db.queryText(
      'SELECT (SELECT count(*) FROM (SELECT * FROM original EXCEPT ALL SELECT * FROM copy)) + (SELECT count(*) FROM (SELECT * FROM copy EXCEPT ALL SELECT * FROM original))',
    );
    assert.deepEqual(diff, ['0']);
    const [types] = await db.queryText(
      "SELECT (SELECT string_agg(data_type, ',' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = 'original') = (SELECT string_agg(data_type, ',' ORDER BY ordinal_position) FROM information_schema.columns WHERE table_name = 'copy')",
    );
    assert.deepEqual(types, ['true']);
    const released = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
    assert.ok(released, `accounting back to zero: ${JSON.stringify(accounting())}`);
  });

  test('exportSchema of a schema DuckDB converts keeps names and types', async () => {
    const schema = new Schema([new Field('id', new Int32(), false), new Field('x', new Float64(), true)]);
    const s = exportSchema(schema);
    const t = tableFromArrays({ id: Int32Array.of(1, 2), x: Float64Array.of(0.5, 1.5) });
    const { arrays } = exportTable(t);
    await db.createTableFromArrow('named', s, arrays);
    freeArrowSchema(s);
    for (const p of arrays) freeArrowArray(p);
    assert.deepEqual(await db.queryText("SELECT column_name || ':' || data_type FROM information_schema.columns WHERE table_name = 'named' ORDER BY ordinal_position"), [
      ['id:INTEGER'],
      ['x:DOUBLE'],
    ]);
  });
});
