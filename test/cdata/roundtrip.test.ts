/**
 * Self round trips through the C Data Interface: arrow-js -> ArrowSchema +
 * ArrowArray -> arrow-js, for every gold file arrow-js can read, with the
 * accounting back to zero afterwards. (Real peers live in test/peers/.)
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import {
  Data, Field, Int32, makeData, RecordBatch, Schema, Struct, Table, tableFromArrays, tableFromIPC, Utf8, vectorFromArray,
  type Vector,
} from 'apache-arrow';
import {
  accounting, dataToView, exportArray, exportSchema, exportTable, freeArrowArray, freeArrowSchema, importData,
  importRecordBatch, importTable, importArrayView, importVector, disposeImport, ArrowDeviceError, nativeMemory,
} from '../../src/index.js';
import { columnValues, diffTables } from '../helpers/compare.js';
import { collectUntil } from '../helpers/gc.js';
import { ARROW_JS_UNREADABLE, GOLD, goldFiles, goldSkip } from '../helpers/gold.js';


async function settle(): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
}

/** Asserts that an imported Data tree has the plain fields arrow-js's constructor gives `expected`'s. */
function sameDataFields(actual: Data, expected: Data, path: string): void {
  assert.equal(actual instanceof Data, true, `${path}: a Data`);
  const made = new Data(actual.type, actual.offset, actual.length, -1);
  for (const k of ['stride', 'offset', 'length'] as const) assert.equal(actual[k], made[k], `${path}.${k}`);
  assert.equal(actual.stride, expected.stride, `${path}.stride as the source's`);
  assert.equal(actual.length, expected.length, `${path}.length as the source's`);
  assert.equal(actual.nullCount, expected.nullCount, `${path}.nullCount as the source's`);
  // An array from apache-arrow 21.2.0 on (view types); the older versions the peer range allows have none.
  assert.equal(Array.isArray(actual.variadicBuffers), Array.isArray(made.variadicBuffers), `${path}.variadicBuffers is an array where arrow-js's own is`);
  // The constructor's own fields, whatever this arrow-js names them, are all there.
  const plain = (d: Data): string[] => Object.keys(d).filter((k) => !['values', 'valueOffsets', 'nullBitmap', 'typeIds', 'variadicBuffers'].includes(k)).sort();
  assert.deepEqual(plain(actual), plain(made), `${path}: own fields`);
  assert.equal(actual.children.length, expected.children.length, `${path}.children`);
  actual.children.forEach((c, i) => sameDataFields(c, expected.children[i]!, `${path}.children[${i}]`));
}

describe('C Data Interface self round trip', { skip: goldSkip }, () => {
  for (const f of goldFiles) {
    const skip = ARROW_JS_UNREADABLE.has(f) ? 'arrow-js 21 cannot read this IPC file (covered by tools/integration)' : false;
    test(`round trips ${f.replace('.arrow_file', '')} with full validation`, { skip }, async () => {
      // In a function of its own: an async function keeps its locals alive until it returns,
      // which would keep the imports from being collected by settle().
      (() => {
        const table = tableFromIPC(readFileSync(new URL(f, GOLD)));
        const { schema, arrays } = exportTable(table);
        const back = importTable(arrays, schema, { validate: 'full' });
        for (const p of [...arrays]) freeArrowArray(p);
        freeArrowSchema(schema);
        assert.equal(diffTables(table, back), undefined);
        assert.equal(back.batches.length, table.batches.length);
        // An import's lazy Data, and each batch's struct Data, are made without arrow-js's
        // constructor where that is verified to make the same object (src/array/arrowjs.ts,
        // FAST_LAZY and FAST_BATCH_DATA): every node, the batch's own first, carries the fields the
        // constructor would give it, stride first (arrow-js slices values by it).
        back.batches.forEach((b, i) => sameDataFields(b.data, table.batches[i]!.data, `batch ${i}`));
        // The table too (FAST_TABLE in src/array/build.ts): what arrow-js's constructor makes of its batches.
        const made = new Table([...back.batches]) as unknown as Record<PropertyKey, unknown>;
        const own = back as unknown as Record<PropertyKey, unknown>;
        const arrowKeys = (o: object): PropertyKey[] => Reflect.ownKeys(o).filter((k) => typeof k !== 'symbol' || !k.description?.startsWith('arrow-device.'));
        assert.deepEqual(arrowKeys(own), arrowKeys(made), 'table: own fields, in order');
        assert.equal(own.schema, made.schema, 'table.schema');
        assert.deepEqual(own.batches, made.batches, 'table.batches');
        assert.deepEqual(own._offsets, made._offsets, 'table._offsets');
      })();
      await settle();
    });
  }
});

describe('ownership', () => {
  test('a zero-copy import is released when its views are collected, exactly once', async () => {
    const before = accounting().releasedImports;
    (() => {
      const data = vectorFromArray([1, 2, 3, null], new Int32()).data[0]!;
      const arr = exportArray(data);
      const imported = importData(arr, new Int32());
      assert.deepEqual([...new Data(imported.type, 0, 0).values ?? []], []);
      assert.equal(imported.length, 4);
      assert.equal(accounting().liveImports, 1);
      freeArrowArray(arr); // our struct was moved out at import: this only frees memory
    })();
    await settle();
    assert.equal(accounting().releasedImports, before + 1);
  });

  test('disposeImport releases at once when nothing was viewed, and reading afterwards throws', () => {
    const before = accounting();
    const t = tableFromArrays({ x: Int32Array.from([1, 2, 3]), s: ['a', 'b', 'c'] });
    const arr = exportArray(t.batches[0]!);
    const batch = importRecordBatch(arr, t.schema);
    freeArrowArray(arr);
    assert.equal(batch.numRows, 3, 'the row count needs no buffer');
    disposeImport(batch);
    assert.equal(accounting().liveImports, before.liveImports);
    assert.equal(accounting().releasedImports, before.releasedImports + 1);
    assert.equal(accounting().liveExports, before.liveExports, 'our exporter saw the release');
    assert.throws(() => batch.getChildAt(0)!.get(0), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released');
    disposeImport(batch); // a second dispose does nothing
    assert.equal(accounting().releasedImports, before.releasedImports + 1);
  });

  test('disposeImport releases at once after values were read, and the escaped typed array reads as empty', () => {
    const released = accounting().releasedImports;
    const v = vectorFromArray([1, 2, 3], new Int32());
    const arr = exportArray(v);
    const imported = importVector(arr, new Int32());
    freeArrowArray(arr);
    assert.equal(imported.get(1), 2, 'reading views the buffer');
    const escaped = imported.data[0]!.values;
    assert.equal(escaped.length, 3);
    disposeImport(imported);
    assert.equal(accounting().releasedImports, released + 1, 'released at once, exactly once');
    assert.equal(escaped.length, 0, 'the view was detached');
    assert.throws(() => imported.get(1), /a read of a released import: its release\(\) \(or \[Symbol.dispose\]\) was called/);
    assert.throws(() => disposeImport(v), /not an object returned by an import/);
  });

  test('the copy option releases the producer at once', () => {
    const before = accounting();
    const v = vectorFromArray(['a', 'bb', null, 'dddd'], new Utf8());
    const arr = exportArray(v);
    assert.equal(accounting().liveExports, before.liveExports + 1);
    const data = importData(arr, new Utf8(), { copy: true });
    freeArrowArray(arr);
    assert.equal(accounting().liveExports, before.liveExports, 'the export was released during import');
    assert.equal(accounting().liveImports, before.liveImports);
    assert.deepEqual(columnValues(new (v.constructor as typeof Vector)([data])), ['a', 'bb', null, 'dddd']);
  });

  test('the source struct is marked released after import (moved), and the import still reads', () => {
    const t = tableFromArrays({ x: Int32Array.from([5, 6, 7]) });
    const arr = exportArray(t.batches[0]!);
    const batch = importRecordBatch(arr, t.schema);
    // release is at offset 64 of ArrowArray on 64-bit targets
    assert.throws(() => importRecordBatch(arr, t.schema), /array: the struct is released/);
    assert.deepEqual(columnValues(batch.getChildAt(0)!), [5, 6, 7]);
    freeArrowArray(arr);
  });

  test('export pins buffers until release, and pinned bytes go back to zero', async () => {
    await settle();
    const t = tableFromArrays({ a: Float64Array.from({ length: 1000 }, (_, i) => i) });
    const arr = exportArray(t.batches[0]!);
    assert.ok(accounting().pinnedBytes >= 8000, `pinned ${accounting().pinnedBytes}`);
    freeArrowArray(arr);
    assert.equal(accounting().pinnedBytes, 0);
    assert.equal(accounting().liveExports, 0);
  });
});

describe('offsets', () => {
  test('imports a sliced utf8 array with offset 3', () => {
    const v = vectorFromArray(['a', null, 'ccc', 'dd', null, 'ffffff', 'g'], new Utf8());
    const view = dataToView(v.data[0]!);
    const arr = exportArray({ ...view, offset: 3, length: 4, nullCount: -1 });
    const data = importData(arr, new Utf8(), { validate: 'full' });
    freeArrowArray(arr);
    assert.deepEqual(columnValues(new (v.constructor as typeof Vector)([data])), ['dd', null, 'ffffff', 'g']);
  });

  test('applies a struct offset to its children on top of their own offsets', () => {
    const a = vectorFromArray([0, 1, 2, 3, 4, 5], new Int32());
    const s = vectorFromArray(['z0', 'z1', 'z2', 'z3', 'z4', 'z5'], new Utf8());
    const type = new Struct([new Field('a', new Int32()), new Field('s', new Utf8())]);
    const struct = makeData({ type, length: 6, children: [a.data[0]!, s.data[0]!] });
    const view = dataToView(struct);
    // child a carries its own offset 1 (and one element less); the struct offset 2 applies on top.
    const childA = { ...view.children[0]!, offset: 1, length: 5 };
    const arr = exportArray({ ...view, offset: 2, length: 3, children: [childA, view.children[1]!] });
    const schema = new Schema(type.children);
    const batch = importRecordBatch(arr, schema, { validate: 'full' });
    freeArrowArray(arr);
    assert.deepEqual(columnValues(batch.getChildAt(0)!), [3, 4, 5]);
    assert.deepEqual(columnValues(batch.getChildAt(1)!), ['z2', 'z3', 'z4']);
  });

  test('exports arrow-js slices at bit offsets that are not multiples of 8', () => {
    const values = Array.from({ length: 40 }, (_, i) => (i % 3 === 0 ? null : i % 2 === 0));
    const v = vectorFromArray(values);
    for (const start of [0, 1, 5, 8, 13]) {
      const slice = v.slice(start, start + 20);
      const arr = exportArray(slice.data[0]!);
      const data = importData(arr, slice.type, { validate: 'full' });
      freeArrowArray(arr);
      assert.deepEqual(columnValues(new (v.constructor as typeof Vector)([data])), values.slice(start, start + 20));
    }
  });

  test('exports a sliced record batch', () => {
    const t = tableFromArrays({ x: Int32Array.from({ length: 100 }, (_, i) => i), y: ['a', 'b', 'c', 'd'].flatMap((s) => Array(25).fill(s)) });
    const sliced = t.slice(37, 60);
    const back: RecordBatch[] = [];
    for (const b of sliced.batches) {
      const arr = exportArray(b);
      back.push(importRecordBatch(arr, b.schema));
      freeArrowArray(arr);
    }
    assert.equal(diffTables(sliced, new Table(back)), undefined);
  });
});

describe('schemas', () => {
  test('keeps field and schema metadata, names, nullability', async () => {
    const schema = new Schema(
      [new Field('k', new Int32(), false, new Map([['ARROW:extension:name', 'my.ext'], ['ARROW:extension:metadata', '{}']]))],
      new Map([['origin', 'test'], ['ü', 'ñ']]),
    );
    const ptr = exportSchema(schema);
    const { importSchema } = await import('../../src/index.js');
    const back = importSchema(ptr);
    freeArrowSchema(ptr);
    assert.deepEqual([...back.metadata], [['origin', 'test'], ['ü', 'ñ']]);
    assert.equal(back.fields[0]!.nullable, false);
    assert.equal(back.fields[0]!.metadata.get('ARROW:extension:name'), 'my.ext');
  });

  test('a child moved out of an exported schema and array outlives its parent and is released on its own', () => {
    const mem = nativeMemory();
    const before = accounting().liveExports;
    const t = new Table({ a: vectorFromArray(Int32Array.from([1, 2, 3])), b: vectorFromArray(['x', 'y', 'z'], new Utf8()) });
    for (const kind of ['schema', 'array'] as const) {
      const L = kind === 'schema' ? mem.layouts.ArrowSchema : mem.layouts.ArrowArray;
      const root = kind === 'schema' ? exportSchema(t.schema) : exportArray(t.batches[0]!);
      assert.equal(accounting().liveExports, before + 3, `${kind}: the root and its two children are live`);
      // Move child 1 out (CDataInterface.rst, "Moving child arrays"): bitwise copy, source marked released.
      const children = mem.readPtr(root + BigInt(L.offsets.children!));
      const child = mem.readPtr(children + 8n);
      const moved = mem.alloc(L.size);
      mem.copyIn(moved, mem.read(child, L.size));
      mem.writePtr(child + BigInt(L.offsets.release!), 0n);
      if (kind === 'schema') freeArrowSchema(root);
      else freeArrowArray(root);
      assert.equal(accounting().liveExports, before + 1, `${kind}: only the moved child is live after the root's release`);
      if (kind === 'schema') {
        assert.equal(mem.readCString(mem.readPtr(moved + BigInt(L.offsets.name!))), 'b', 'the moved schema child still reads');
        freeArrowSchema(moved);
      } else {
        assert.equal(mem.readI64(moved + BigInt(L.offsets.length!)), 3n, 'the moved array child still reads');
        freeArrowArray(moved);
      }
      assert.equal(accounting().liveExports, before, `${kind}: all released`);
    }
  });

  test('equal schemas given as pointers with each array share one arrow-js Schema; any difference gives its own', () => {
    const batchOf = (schema: Schema): RecordBatch => new RecordBatch(schema, makeData({
      type: new Struct(schema.fields), length: 1,
      children: schema.fields.map((f) => makeData({ type: f.type as Int32, length: 1, data: Int32Array.from([7]) })),
    }));
    const importWith = (schema: Schema): RecordBatch => {
      const b = batchOf(schema);
      const s = exportSchema(schema);
      const a = exportArray(b);
      const back = importRecordBatch(a, s);
      freeArrowArray(a);
      freeArrowSchema(s);
      assert.equal(back.get(0)!.toJSON()[schema.fields[0]!.name], 7, 'the values read through the shared plan');
      return back;
    };
    const base = new Schema([new Field('a', new Int32(), true), new Field('b', new Int32(), true)], new Map([['k', 'v']]));
    const first = importWith(base);
    const again = importWith(new Schema(base.fields, new Map([['k', 'v']])));
    assert.equal(again.schema, first.schema, 'equal content: one plan, one arrow-js Schema');
    // Each of these differs from base in one thing the plan depends on.
    const variants: [string, Schema][] = [
      ['a field name', new Schema([new Field('ab', new Int32(), true), new Field('', new Int32(), true)], base.metadata)],
      ['nullability', new Schema([new Field('a', new Int32(), false), base.fields[1]!], base.metadata)],
      ['schema metadata', new Schema(base.fields, new Map([['k', 'w']]))],
      ['no metadata', new Schema(base.fields)],
      ['field metadata', new Schema([new Field('a', new Int32(), true, new Map([['k', 'v']])), base.fields[1]!], base.metadata)],
      ['a field fewer', new Schema([base.fields[0]!], base.metadata)],
      // Spelled so that a key of names and formats run together would read as base's two fields.
      ['a name spelling two fields', new Schema([new Field('af2)(ib', new Int32(), true)], base.metadata)],
    ];
    for (const [what, schema] of variants) {
      const back = importWith(schema);
      assert.notEqual(back.schema, first.schema, what);
      assert.deepEqual(back.schema.fields.map((f) => [f.name, f.nullable, [...f.metadata]]), schema.fields.map((f) => [f.name, f.nullable, [...f.metadata]]), what);
      assert.deepEqual([...back.schema.metadata], [...schema.metadata], what);
    }
  });

  test('an ArrayView import keeps buffers readable as bytes', () => {
    const v = vectorFromArray([1, 2, 3], new Int32());
    const arr = exportArray(v);
    const view = importArrayView(arr, new Int32());
    freeArrowArray(arr);
    assert.deepEqual([...new Int32Array(view.buffers[1]!.buffer, view.buffers[1]!.byteOffset, 3)], [1, 2, 3]);
  });
});
