/**
 * The arrow-js objects an import makes without arrow-js's constructors
 * (src/array/build.ts: `makeBatch`, `makeTable`), and its lazy `Data`
 * (`LazyData`, whose buffer fields are accessors), are used only where a
 * check, run when its path is first taken, against the arrow-js in use says both make the same
 * object. A check that fails silently leaves the constructor running: the
 * slower path, but correct, and invisible (one such check compared the
 * wrong objects for days). These tests keep each check true for the
 * arrow-js the package is tested with, and compare what an import makes
 * with what arrow-js makes of the same batches.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Data, Dictionary, Field, Int32, List, RecordBatch, Struct, Table, Utf8, Vector, makeData, tableFromArrays, vectorFromArray } from 'apache-arrow';
import { exportRecordBatch, exportTable, freeArrowArray, freeArrowSchema, importRecordBatch, importTable } from '../../src/index.js';
import { batchShortcutHolds, lazyDataHolds, lazyViewDataHolds, tableShortcutHolds } from '../../src/array/build.js';
import { ARROW_21_2 } from '../../src/schema/arrowjs.js';

describe('arrow-js objects made without their constructors', () => {
  test('the checks hold for this arrow-js (else the constructors run, unseen)', () => {
    // Each check runs on its path's first use (not at load); asking runs it now if nothing has yet.
    assert.equal(batchShortcutHolds(), true, 'makeBatch: RecordBatch made directly');
    assert.equal(tableShortcutHolds(), true, 'makeTable: Table made directly');
    assert.equal(lazyDataHolds(), true, 'dataOf: lazy Data over an import');
    // Before apache-arrow 21.2.0 arrow-js has no view types (ARROW_21_2): nothing to make lazily.
    assert.equal(lazyViewDataHolds(), ARROW_21_2.Utf8View !== undefined, 'dataOf: lazy Data of a view type (utf8_view) over an import');
  });

  test('an imported batch equals arrow-js\'s own, column by column: values, null counts, offsets, children, dictionaries', () => {
    const source = sampleBatch();
    for (const [name, batch] of [['whole', source], ['sliced', source.slice(1, 4)]] as const) {
      const { schema, array } = exportRecordBatch(batch);
      const imported = importRecordBatch(array, schema);
      freeArrowSchema(schema);
      freeArrowArray(array);
      const own = imported as unknown as Record<string, unknown>;
      const theirs = new RecordBatch(imported.schema, imported.data) as unknown as Record<string, unknown>;
      assert.deepEqual(Object.keys(own), Object.keys(theirs), name);
      assert.equal(Object.getPrototypeOf(Object.getPrototypeOf(imported)), RecordBatch.prototype, name);
      assert.deepEqual(own._metadata, theirs._metadata, name);
      assert.equal(imported.numRows, batch.numRows, name);
      for (let i = 0; i < batch.numCols; i++) sameData(imported.getChildAt(i)!.data[0]!, batch.getChildAt(i)!.data[0]!, `${name}.${batch.schema.fields[i]!.name}`);
      assert.equal(JSON.stringify(imported.toArray()), JSON.stringify(batch.toArray()), name);
      imported.release();
    }
  });

  test('an imported table has the own fields, prototype chain and behaviour of arrow-js\'s table of the same batches', () => {
    const one = tableFromArrays({ x: Int32Array.of(1, 2, 3, 4, 5), s: ['a', 'b', 'c', null, 'e'] }).batches[0]!;
    const source = new Table([one.slice(0, 2), one.slice(2, 5), one.slice(5, 5)]);
    const { schema, arrays } = exportTable(source);
    const t = importTable(arrays, schema);
    freeArrowSchema(schema);
    for (const a of arrays) freeArrowArray(a);
    const own = t as unknown as Record<string, unknown>;
    const theirs = new Table(t.batches) as unknown as Record<string, unknown>;
    // The import adds its owners under a symbol of its own (owned()); arrow-js's fields are the same.
    assert.deepEqual(Object.keys(own), Object.keys(theirs));
    assert.ok(t instanceof Table);
    assert.equal(own.schema, theirs.schema);
    assert.deepEqual(own.batches, theirs.batches);
    assert.deepEqual(own._offsets, theirs._offsets);
    assert.ok(t.batches.every((b) => b instanceof RecordBatch));
    assert.equal(t.numRows, 5);
    assert.deepEqual([...t.getChild('x')!], [1, 2, 3, 4, 5]);
    assert.deepEqual(t.get(3)!.toJSON(), { x: 4, s: null });
    assert.deepEqual(t.slice(1, 4).getChild('s')!.toArray(), ['b', 'c', null]);
    t.release();
  });
});

/** A batch with nulls in every column: int32, utf8, a dictionary, a list of int32, a struct of them. */
function sampleBatch(): RecordBatch {
  const ints = vectorFromArray([1, null, 3, 4, null], new Int32());
  const strs = vectorFromArray(['a', 'bb', null, '', 'eee'], new Utf8());
  const dict = vectorFromArray(['x', 'y', null, 'x', 'y'], new Dictionary(new Utf8(), new Int32()));
  const lists = vectorFromArray([[1, 2], null, [], [3, null, 5], [6]], new List(new Field('item', new Int32(), true)));
  const structType = new Struct([new Field('i', new Int32(), true), new Field('s', new Utf8(), true)]);
  const struct = makeData({ type: structType, length: 5, nullCount: 1, nullBitmap: Uint8Array.of(0b11011), children: [ints.data[0]!, strs.data[0]!] });
  return new RecordBatch({ ints: ints.data[0]!, strs: strs.data[0]!, dict: dict.data[0]!, lists: lists.data[0]!, struct } as never);
}

/** `a` (imported) gives what `b` (arrow-js's) gives: type, length, null count, validity, values, offsets, children, dictionary. */
function sameData(a: Data, b: Data, path: string): void {
  assert.equal(String(a.type), String(b.type), path);
  assert.equal(a.length, b.length, path);
  assert.equal(a.nullCount, b.nullCount, `${path}: nullCount`);
  assert.equal(a.nullable, b.nullable, `${path}: nullable`);
  for (let i = 0; i < b.length; i++) assert.equal(a.getValid(i), b.getValid(i), `${path}: valid ${i}`);
  assert.deepEqual(JSON.stringify(new Vector([a]).toArray()), JSON.stringify(new Vector([b]).toArray()), `${path}: values`);
  if (b.valueOffsets) assert.deepEqual([...a.valueOffsets.subarray(0, a.length + 1)], [...b.valueOffsets.subarray(0, b.length + 1)], `${path}: offsets`);
  assert.equal(a.children.length, b.children.length, `${path}: children`);
  a.children.forEach((c, k) => sameData(c, b.children[k]!, `${path}.children[${k}]`));
  assert.equal(!a.dictionary, !b.dictionary, `${path}: dictionary`);
  if (a.dictionary) sameData(a.dictionary.data[0]!, b.dictionary!.data[0]!, `${path}.dictionary`);
}
