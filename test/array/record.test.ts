/**
 * The record of an import (src/array/record.ts): each node's subtree end,
 * written by the reader and by the record of a plain view, gives its
 * children (`childrenAt`, the one way to them) and its place (`pathAt`);
 * here both are compared with a walk that counts fields, and a dense union
 * of many children is checked at `full` against the lengths of the right
 * children.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Vector } from 'apache-arrow';
import { importArrayView } from '../../src/array/api.js';
import { dataFromView } from '../../src/array/build.js';
import { BUFFERS, childrenAt, END, forEachNode, N_BUFFERS, pathAt, type ImportRead } from '../../src/array/record.js';
import type { PlanNode } from '../../src/array/plan.js';
import type { ImportedView } from '../../src/array/view.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { nodeToType } from '../../src/schema/arrowjs.js';
import { Builder, type ArraySpec, type SchemaSpec } from '../cdata/malformed/builder.js';

const b = new Builder();
after(() => b.freeAll());

const i32 = (n: number): ArraySpec => ({ length: n, buffers: [null, new Int32Array(n)] });
const enc = new TextEncoder();

/** struct<a: list<int32>, b: dictionary<int8, utf8>, c: struct<d: int32>, e: utf8_view> */
const schema: SchemaSpec = {
  format: '+s',
  children: [
    { format: '+l', name: 'a', children: [{ format: 'i', name: 'item' }] },
    { format: 'c', name: 'b', dictionary: { format: 'u' } },
    { format: '+s', name: 'c', children: [{ format: 'i', name: 'd' }] },
    { format: 'vu', name: 'e' },
  ],
};
const array: ArraySpec = {
  length: 2,
  buffers: [null],
  children: [
    { length: 2, buffers: [null, new Int32Array([0, 1, 3])], children: [i32(3)] },
    { length: 2, buffers: [null, new Int8Array([1, 0])], dictionary: { length: 2, buffers: [null, new Int32Array([0, 1, 3]), enc.encode('xyz')] } },
    { length: 2, buffers: [null], children: [i32(2)] },
    { length: 2, buffers: [null, new Uint8Array(32), new Uint8Array(4), new BigInt64Array([4n])] },
  ],
};

/** Each node's position and place, by a walk that counts each node's fields (BUFFERS, 2 per buffer). */
function counted(read: ImportRead): { p: number; place: string; kids: number[] }[] {
  const out: { p: number; place: string; kids: number[] }[] = [];
  const walk = (pn: PlanNode, p: number, place: string): number => {
    const me = { p, place, kids: [] as number[] };
    out.push(me);
    let next = p + BUFFERS + 2 * read.nums[p + N_BUFFERS]!;
    pn.children.forEach((c, k) => {
      me.kids.push(next);
      next = walk(c, next, `${place}.children[${k}]`);
    });
    if (pn.dictionary !== null) {
      me.kids.push(next);
      next = walk(pn.dictionary, next, `${place}.dictionary`);
    }
    assert.equal(read.nums[p + END], next, `the end of ${place}`);
    return next;
  };
  assert.equal(walk(read.plan.root, 0, read.prefix), read.length);
  return out;
}

function checkRecord(read: ImportRead): void {
  const nodes = counted(read);
  const visited: number[] = [];
  forEachNode(read, (_, p) => visited.push(p));
  assert.deepEqual(visited, nodes.map((n) => n.p));
  for (const n of nodes) {
    assert.deepEqual(childrenAt(read, n.p), n.kids, n.place);
    assert.equal(pathAt(read, n.p), n.place);
  }
}

describe('the record: each node ends its subtree', () => {
  test('an import: children, dictionary and places follow from the subtree ends; the record has the size its plan says', () => {
    const view = importArrayView(b.array(array).ptr, b.schema(schema).ptr) as ImportedView;
    checkRecord(view.read);
    assert.equal(view.read.plan.recordSize, 0); // a view type: the record grows as it is read
    const fixed = importArrayView(b.array({ ...array, children: array.children!.slice(0, 3) }).ptr, b.schema({ ...schema, children: schema.children!.slice(0, 3) }).ptr) as ImportedView;
    checkRecord(fixed.read);
    assert.equal(fixed.read.length, fixed.read.plan.recordSize);
    assert.equal(pathAt(fixed.read, 3), fixed.read.prefix); // not a node's position
  });

  test('a plain view made into arrow-js Data: its record (built from the view) places children and dictionary', () => {
    const fs: SchemaSpec = { ...schema, children: schema.children!.slice(0, 3) };
    const fa: ArraySpec = { ...array, children: array.children!.slice(0, 3) };
    const view = importArrayView(b.array(fa).ptr, b.schema(fs).ptr, { copy: true });
    const data = dataFromView(view, nodeToType(view.schema, 'schema', {}));
    assert.deepEqual(JSON.parse(JSON.stringify(new Vector([data]).toArray())), [
      { a: [0], b: 'yz', c: { d: 0 } },
      { a: [0, 0], b: 'x', c: { d: 0 } },
    ]);
  });

  test('full: a dense union of 100 children checks each offset against its own child', () => {
    const n = 100;
    const children = Array.from({ length: n }, (_, k) => ({ format: 'i', name: `c${k}` }));
    const s: SchemaSpec = { format: `+ud:${children.map((_, k) => k).join(',')}`, children };
    // Element k is in child k at offset 0; child k has k + 1 elements.
    const u = (last: number): ArraySpec => ({
      length: n,
      buffers: [new Int8Array(n).map((_, k) => k), new Int32Array(n).map((_, k) => (k === n - 1 ? last : 0))],
      children: Array.from({ length: n }, (_, k) => i32(k + 1)),
    });
    const view = importArrayView(b.array(u(n - 1)).ptr, b.schema(s).ptr, { validate: 'full' }) as ImportedView;
    assert.equal(view.children.length, n);
    checkRecord(view.read);
    assert.throws(() => importArrayView(b.array(u(n)).ptr, b.schema(s).ptr, { validate: 'full' }), (e: unknown) => {
      assert.ok(e instanceof ArrowDeviceError);
      assert.equal(e.message, `array.buffers[1]: offset ${n} at ${n - 1} is outside child ${n - 1} of length ${n}`);
      return true;
    });
  });
});
