/**
 * Proves the DuckDB peer on its own (no src/): DuckDB both produces and consumes
 * the Arrow C structs here, read back with plain koffi.decode.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import koffi from 'koffi';
import {
  DUCKDB_ASYNC_CALLS,
  DUCKDB_MISSING,
  DuckDB,
  duckdbAvailable,
  duckdbVersion,
  freeStruct,
  mallocStruct,
} from './duckdb.js';

// struct ArrowSchema / struct ArrowArray field offsets (x86-64).
const S = { format: 0, name: 8, metadata: 16, flags: 24, n_children: 32, children: 40, dictionary: 48, release: 56, private_data: 64 };
const A = { length: 0, null_count: 8, offset: 16, n_buffers: 24, n_children: 32, buffers: 40, children: 48, dictionary: 56, release: 64, private_data: 72 };

const ReleaseProto = koffi.proto('void', ['void *']);
const ptrAt = (p: bigint, off: number) => koffi.decode(p, off, 'void *') as bigint | null;
const strAt = (p: bigint, off: number) => koffi.decode(p, off, 'const char *') as string | null;
const i64At = (p: bigint, off: number) => BigInt(koffi.decode(p, off, 'int64_t') as number | bigint);
const childAt = (p: bigint, childrenOffset: number, i: number) => ptrAt(ptrAt(p, childrenOffset)!, 8 * i)!;

/** Calls release (if set) and frees the struct, as a consumer of queryArrow must. */
function dispose(struct: bigint, releaseOffset: number): void {
  const release = ptrAt(struct, releaseOffset);
  if (release !== null) koffi.call(release, ReleaseProto, struct);
  freeStruct(struct);
}
function disposeAll(r: { schema: bigint; arrays: bigint[] }): void {
  for (const a of r.arrays) dispose(a, A.release);
  dispose(r.schema, S.release);
}
/** name -> format string of the top-level columns of a "+s" schema. */
function columnFormats(schema: bigint): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < Number(i64At(schema, S.n_children)); i++) {
    const child = childAt(schema, S.children, i);
    out[strAt(child, S.name)!] = strAt(child, S.format)!;
  }
  return out;
}

const skip = duckdbAvailable() ? false : DUCKDB_MISSING;

describe('DuckDB Arrow C Data Interface peer', { skip }, () => {
  let db: DuckDB;
  before(async () => {
    db = await DuckDB.open();
  });
  after(() => db?.close());

  test('loads DuckDB v1.5 and calls it asynchronously', () => {
    assert.match(duckdbVersion(), /^v1\.5\./);
    assert.equal(DUCKDB_ASYNC_CALLS, true, 'koffi async stack could not be raised: import the peer before other koffi users');
  });

  test('queryText returns DuckDB text, null for NULL, across chunks', async () => {
    assert.deepEqual(
      await db.queryText(
        "select 1 as a, 'a string longer than twelve bytes' as b, null as c, 2.5::DOUBLE as d, DATE '2024-02-29' as e;",
      ),
      [['1', 'a string longer than twelve bytes', null, '2.5', '2024-02-29']],
    );
    const rows = await db.queryText('select range from range(3000)');
    assert.equal(rows.length, 3000);
    assert.deepEqual(rows[2999], ['2999']);
    assert.deepEqual(await db.queryText('select 1 where false'), []);
  });

  test('SET threads is settable', async () => {
    const other = await DuckDB.open({ threads: 2 });
    try {
      assert.deepEqual(await other.queryText("select current_setting('threads')"), [['2']]);
      await other.run('SET threads = 3');
      assert.deepEqual(await other.queryText("select current_setting('threads')"), [['3']]);
    } finally {
      other.close();
    }
  });

  test('queryArrow hands out one ArrowSchema and ArrowArrays that the caller releases and frees', async () => {
    const { schema, arrays } = await db.queryArrow("select 42::INTEGER as a, 'x' as b");
    assert.notEqual(schema, 0n);
    assert.equal(arrays.length, 1);
    const array = arrays[0];
    assert.notEqual(array, 0n);

    assert.equal(strAt(schema, S.format), '+s');
    assert.equal(i64At(schema, S.n_children), 2n);
    assert.deepEqual(columnFormats(schema), { a: 'i', b: 'u' }); // VARCHAR: plain utf8 "u" by default
    assert.notEqual(ptrAt(schema, S.release), null);

    assert.equal(i64At(array, A.length), 1n);
    assert.equal(i64At(array, A.offset), 0n);
    assert.equal(i64At(array, A.n_children), 2n);
    assert.equal(i64At(array, A.n_buffers), 1n); // struct: validity only
    const a = childAt(array, A.children, 0);
    assert.equal(i64At(a, A.n_buffers), 2n);
    const values = ptrAt(ptrAt(a, A.buffers)!, 8)!; // buffers[1]
    assert.equal(koffi.decode(values, 'int32_t'), 42);

    // Release: the producer's callback marks the struct released by nulling `release`.
    for (const [struct, offset] of [[array, A.release], [schema, S.release]] as const) {
      const release = ptrAt(struct, offset);
      assert.notEqual(release, null);
      koffi.call(release!, ReleaseProto, struct);
      assert.equal(ptrAt(struct, offset), null);
      freeStruct(struct);
    }
  });

  test('round trip: queryArrow chunks -> createTableFromArrow -> same rows', async () => {
    const r = await db.queryArrow('select x::BIGINT as x, x::VARCHAR as s from generate_series(1, 5000) g(x)');
    assert.deepEqual(r.arrays.map((a) => i64At(a, A.length)), [2048n, 2048n, 904n]);
    await db.createTableFromArrow('t', r.schema, r.arrays);
    assert.deepEqual(await db.queryText('select count(*), sum(x), count(distinct s), max(s) from t'), [
      ['5000', '12502500', '5000', '999'],
    ]);
    assert.deepEqual(await db.queryText("select data_type from information_schema.columns where table_name = 't'"), [
      ['BIGINT'],
      ['VARCHAR'],
    ]);
    // DuckDB moved every array (release now NULL) and released it; the schema is still ours.
    for (const a of r.arrays) assert.equal(ptrAt(a, A.release), null);
    assert.notEqual(ptrAt(r.schema, S.release), null);
    disposeAll(r);
  });

  test('duckdb_data_chunk_from_arrow moves the array: DuckDB calls our release on its own copy', async () => {
    const r = await db.queryArrow('select range::INTEGER as v from range(4100)');
    // Interpose a JS release callback in front of DuckDB's own.
    const original = new Map<bigint, bigint>(); // private_data -> DuckDB's release
    const calledWith: bigint[] = [];
    const jsRelease = koffi.register((p: bigint) => {
      calledWith.push(p);
      koffi.call(original.get(ptrAt(p, A.private_data)!)!, ReleaseProto, p);
    }, koffi.pointer(ReleaseProto));
    try {
      for (const a of r.arrays) {
        original.set(ptrAt(a, A.private_data)!, ptrAt(a, A.release)!);
        koffi.encode(a, A.release, 'void *', jsRelease);
      }
      await db.createTableFromArrow('moved', r.schema, r.arrays);
      assert.equal(calledWith.length, r.arrays.length, 'each array released exactly once');
      for (const p of calledWith) assert.ok(!r.arrays.includes(p), 'release gets a pointer to a moved copy');
      assert.deepEqual(await db.queryText('select count(*), sum(v) from moved'), [['4100', '8402950']]);
    } finally {
      koffi.unregister(jsRelease);
    }
    disposeAll(r);
  });

  test('consumes a hand-built ArrowArray of 100000 rows (one struct, more than one DuckDB vector)', async () => {
    const N = 100_000;
    const blocks: bigint[] = [];
    const block = (size: number) => {
      const p = mallocStruct(size);
      blocks.push(p);
      return p;
    };
    const cstr = (s: string) => {
      const bytes = Buffer.from(`${s}\0`);
      const p = block(bytes.length);
      Buffer.from(koffi.view(p, bytes.length)).set(bytes);
      return p;
    };
    const put = (p: bigint, off: number, type: string, v: unknown) => koffi.encode(p, off, type, v);
    // Release callbacks only mark the structs released: the memory is freed below.
    let arrayReleases = 0;
    const releaseArray = koffi.register((p: bigint) => {
      arrayReleases++;
      put(p, A.release, 'void *', null);
    }, koffi.pointer(ReleaseProto));
    const releaseSchema = koffi.register((p: bigint) => put(p, S.release, 'void *', null), koffi.pointer(ReleaseProto));
    try {
      // ArrowSchema "+s" { x: "i" }
      const childSchema = block(72);
      put(childSchema, S.format, 'void *', cstr('i'));
      put(childSchema, S.name, 'void *', cstr('x'));
      put(childSchema, S.flags, 'int64_t', 2n); // ARROW_FLAG_NULLABLE
      put(childSchema, S.release, 'void *', releaseSchema);
      const schema = block(72);
      put(schema, S.format, 'void *', cstr('+s'));
      put(schema, S.n_children, 'int64_t', 1n);
      put(schema, S.children, 'void *', block(8));
      put(ptrAt(schema, S.children)!, 0, 'void *', childSchema);
      put(schema, S.release, 'void *', releaseSchema);
      // ArrowArray: struct of one int32 child, no nulls (validity buffers NULL).
      const values = block(4 * N);
      new Int32Array(koffi.view(values, 4 * N)).forEach((_, i, a) => (a[i] = i));
      const child = block(80);
      put(child, A.length, 'int64_t', BigInt(N));
      put(child, A.n_buffers, 'int64_t', 2n);
      put(child, A.buffers, 'void *', block(16));
      put(ptrAt(child, A.buffers)!, 8, 'void *', values);
      put(child, A.release, 'void *', releaseArray);
      const array = block(80);
      put(array, A.length, 'int64_t', BigInt(N));
      put(array, A.n_buffers, 'int64_t', 1n);
      put(array, A.buffers, 'void *', block(8));
      put(array, A.n_children, 'int64_t', 1n);
      put(array, A.children, 'void *', block(8));
      put(ptrAt(array, A.children)!, 0, 'void *', child);
      put(array, A.release, 'void *', releaseArray);

      await db.createTableFromArrow('hand_built', schema, [array]);
      assert.deepEqual(await db.queryText('select count(*), sum(x), max(x) from hand_built'), [['100000', '4999950000', '99999']]);
      assert.equal(arrayReleases, 1, 'DuckDB releases the parent once; children are the parent release\'s job');
      assert.equal(ptrAt(array, A.release), null);
      assert.notEqual(ptrAt(schema, S.release), null, 'schema untouched');
    } finally {
      koffi.unregister(releaseArray);
      koffi.unregister(releaseSchema);
      blocks.forEach(freeStruct);
    }
  });

  test('DuckDB Arrow format strings for common SQL types (default arrow options)', async () => {
    await db.run("create type mood as enum ('sad', 'ok', 'happy')");
    const columns: [string, string, string][] = [
      // [SQL expression, column, expected format]
      ['true', 'bool_', 'b'],
      ['1::TINYINT', 'tinyint_', 'c'],
      ['1::SMALLINT', 'smallint_', 's'],
      ['1::INTEGER', 'integer_', 'i'],
      ['1::BIGINT', 'bigint_', 'l'],
      ['1::UTINYINT', 'utinyint_', 'C'],
      ['1::USMALLINT', 'usmallint_', 'S'],
      ['1::UINTEGER', 'uinteger_', 'I'],
      ['1::UBIGINT', 'ubigint_', 'L'],
      ['1::HUGEINT', 'hugeint_', 'd:38,0'],
      ['1.5::FLOAT', 'float_', 'f'],
      ['1.5::DOUBLE', 'double_', 'g'],
      ['1.25::DECIMAL(9,2)', 'dec9_', 'd:9,2,128'],
      ['1.25::DECIMAL(18,3)', 'dec18_', 'd:18,3,128'],
      ['1.25::DECIMAL(38,10)', 'dec38_', 'd:38,10,128'],
      ["'x'::VARCHAR", 'varchar_', 'u'],
      ["'x'::BLOB", 'blob_', 'z'],
      ["DATE '2024-01-02'", 'date_', 'tdD'],
      ["TIME '12:34:56'", 'time_', 'ttu'],
      ["TIMESTAMP '2024-01-02 03:04:05'", 'ts_', 'tsu:'],
      ["'2024-01-02 03:04:05'::TIMESTAMP_S", 'ts_s', 'tss:'],
      ["'2024-01-02 03:04:05'::TIMESTAMP_MS", 'ts_ms', 'tsm:'],
      ["'2024-01-02 03:04:05'::TIMESTAMP_NS", 'ts_ns', 'tsn:'],
      ["INTERVAL 1 DAY", 'interval_', 'tin'],
      ["'00000000-0000-0000-0000-000000000001'::UUID", 'uuid_', 'u'],
      ['[1, 2]::INTEGER[]', 'list_', '+l'],
      ["{'a': 1, 'b': 'x'}", 'struct_', '+s'],
      ["MAP {'k': 1}", 'map_', '+m'],
      ['union_value(n := 1)::UNION(n INTEGER, s VARCHAR)', 'union_', '+us:0,1'],
      ["'ok'::mood", 'enum_', 'C'], // dictionary-encoded: uint8 indices, dictionary "u"
      ['[1, 2, 3]::INTEGER[3]', 'array_', '+w:3'],
    ];
    const select = `select ${columns.map(([expr, name]) => `${expr} as ${name}`).join(', ')}`;
    const r = await db.queryArrow(select);
    const formats = columnFormats(r.schema);
    assert.deepEqual(formats, Object.fromEntries(columns.map(([, name, format]) => [name, format])));
    const tstz = await db.queryArrow("select TIMESTAMPTZ '2024-01-02 03:04:05+00' as t");
    const tz = (await db.queryText("select current_setting('TimeZone')"))[0][0];
    assert.equal(columnFormats(tstz.schema).t, `tsu:${tz}`); // the session TimeZone
    disposeAll(tstz);
    const enumChild = childAt(r.schema, S.children, columns.findIndex(([, n]) => n === 'enum_'));
    assert.equal(strAt(ptrAt(enumChild, S.dictionary)!, S.format), 'u');

    // Every one of them goes back in through createTableFromArrow with the same text.
    await db.createTableFromArrow('all_types', r.schema, r.arrays);
    assert.deepEqual(await db.queryText('select * from all_types'), await db.queryText(select));
    disposeAll(r);
  });

  test('errors reject with DuckDB messages and leave the connection usable', async () => {
    await assert.rejects(db.run('selec 1'), /Parser Error: syntax error at or near "selec"/);
    await assert.rejects(db.queryText('select * from no_such_table'), /Catalog Error: Table with name no_such_table does not exist/);
    // A runtime error, raised while DuckDB's threads execute the query.
    await assert.rejects(db.queryArrow("select error('boom ' || range) from range(5000) where range = 4000"), /Invalid Input Error: boom 4000/);
    const r = await db.queryArrow('select 1 as x');
    await db.createTableFromArrow('dup', r.schema, r.arrays.slice(0, 1));
    const r2 = await db.queryArrow('select 1 as x');
    await assert.rejects(db.createTableFromArrow('dup', r2.schema, r2.arrays), /Table with name "dup" already exists/);
    disposeAll(r);
    disposeAll(r2);
    assert.deepEqual(await db.queryText('select 7'), [['7']]);
  });

  test('mallocStruct zeroes', () => {
    const p = mallocStruct(80);
    for (let off = 0; off < 80; off += 8) assert.equal(i64At(p, off), 0n);
    freeStruct(p);
  });
});
