/**
 * The arrow-js objects an import makes without arrow-js's constructors
 * (src/array/build.ts: `makeBatch`, `makeTable`) are taken only where a
 * load-time check against the arrow-js in use says both make the same
 * object. A check that fails silently leaves the constructor running: the
 * slower path, but correct, and invisible (one such check compared the
 * wrong objects for days). These tests keep each check true for the
 * arrow-js the package is tested with, and compare what an import makes
 * with what arrow-js makes of the same batches.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RecordBatch, Table, tableFromArrays } from 'apache-arrow';
import { exportTable, freeArrowArray, freeArrowSchema, importTable } from '../../src/index.js';
import { BATCH_SHORTCUT, TABLE_SHORTCUT } from '../../src/array/build.js';

describe('arrow-js objects made without their constructors', () => {
  test('the load-time checks hold for this arrow-js (else the constructors run, unseen)', () => {
    assert.equal(BATCH_SHORTCUT, true, 'makeBatch: RecordBatch made directly');
    assert.equal(TABLE_SHORTCUT, true, 'makeTable: Table made directly');
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
