/**
 * One plan per schema: whatever route the arrays take (one at a time, a
 * table, a stream, an async task, a device array) and however the schema
 * arrives (an arrow-js Schema given once, a pointer with every array), the
 * plan of a schema is made once, then every array reads through it
 * (src/array/plan.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Field, Int32, RecordBatch, Schema, Table, Utf8, vectorFromArray } from 'apache-arrow';
import {
  createAsyncDeviceStreamReader, dataToView, exportArrayStream, exportDeviceArray, exportRecordBatch, exportSchema, exportTable, freeArrowArrayStream,
  freeArrowSchema, freeDeviceArray, importArrayStream, importDeviceArray, importRecordBatch, importSchema, importTable,
  viewToData,
} from '../../src/index.js';
import { planBuilds, planOfNode, type Plan } from '../../src/array/plan.js';
import { planOfSchema, planOfType, planWithType } from '../../src/array/plan-arrowjs.js';
import { schemaNodeOf } from '../../src/schema/export.js';
import { asyncPeer, peerMissing } from '../async/peer.js';

let schemas = 0;
/**
 * A table of `n` one-row batches of a schema no test used before (its field
 * names are new), each batch's data made on its own (its own struct type).
 */
function batches(n: number): Table {
  const [i, s] = [`i${schemas}`, `s${schemas++}`];
  const schema = new Schema([new Field(i, new Int32(), true), new Field(s, new Utf8(), true)]);
  const bs = Array.from({ length: n }, (_, k) => {
    const t = new Table({ [i]: vectorFromArray([k], new Int32()), [s]: vectorFromArray([`v${k}`], new Utf8()) });
    return new RecordBatch(schema, t.batches[0]!.data);
  });
  return new Table(bs);
}

/** Plans made while `fn` runs. */
async function plansMadeBy(fn: () => unknown): Promise<number> {
  const before = planBuilds();
  await fn();
  return planBuilds() - before;
}

describe('one plan per schema', () => {
  test('100 batches against one arrow-js Schema: one plan', async () => {
    const t = batches(100);
    const made = await plansMadeBy(() => {
      for (const b of t.batches) {
        const { schema, array } = exportRecordBatch(b);
        freeArrowSchema(schema);
        importRecordBatch(array, t.schema).release();
      }
    });
    assert.equal(made, 1);
  });

  test('100 batches each with its own schema pointer (equal schemas): one plan', async () => {
    const t = batches(100);
    const made = await plansMadeBy(() => {
      for (const b of t.batches) {
        const { schema, array } = exportRecordBatch(b);
        importRecordBatch(array, schema).release();
      }
    });
    assert.equal(made, 1);
  });

  test('one schema by its three routes (arrow-js Schema, its node, a given type): one plan object, one build', async () => {
    const t = batches(2);
    let routes: Plan[] = [];
    const made = await plansMadeBy(() => {
      const bySchema = planOfSchema(t.schema);
      const node = schemaNodeOf(t.schema);
      routes = [bySchema, planOfNode(node), planWithType(node, bySchema.type(), false, 'schema')];
      // The same through the public API: a batch against the Schema, one against its node, a view converted with the batch's type.
      const { schema, array } = exportRecordBatch(t.batches[0]!);
      freeArrowSchema(schema);
      const b = importRecordBatch(array, t.schema);
      const again = exportRecordBatch(t.batches[1]!);
      freeArrowSchema(again.schema);
      importRecordBatch(again.array, node).release();
      assert.equal(viewToData(dataToView(b.data, node), b.data.type).type, b.data.type);
      b.release();
    });
    assert.equal(made, 1);
    assert.equal(routes[1], routes[0], 'the node finds the Schema\'s plan');
    assert.equal(routes[2], routes[0], 'the given type finds it too');
  });

  test('imports against a Schema whose metadata changes between batches: one plan, the Schema carried', async () => {
    const t = batches(10);
    const made = await plansMadeBy(() => {
      t.batches.forEach((b, k) => {
        t.schema.metadata.set('k', String(k));
        const { schema, array } = exportRecordBatch(b);
        freeArrowSchema(schema);
        const got = importRecordBatch(array, t.schema);
        assert.equal(got.schema, t.schema);
        got.release();
      });
    });
    assert.equal(made, 1);
  });

  test('a type given with two different nodes: a plan for each, each reading by its node', () => {
    const type = new Int32();
    const a = schemaNodeOf(new Field('a', type, true));
    const b = schemaNodeOf(new Field('b', type, false));
    const pa = planWithType(a, type, false, 'a');
    const pb = planWithType(b, type, false, 'b');
    assert.notEqual(pa, pb);
    assert.equal(pa.node, a);
    assert.equal(pb.node, b);
    assert.equal(planWithType(a, type, false, 'a').node, a, 'the type\'s entry follows the node asked for');
    // The type's own plan reads by the type's node, not by either field's.
    assert.equal(planOfType(type).node, schemaNodeOf(type));
    assert.equal(planOfType(type).type(), type);
  });

  test('a table of 50 arrays, and its schema imported once for more: one plan', async () => {
    const t = batches(50);
    const made = await plansMadeBy(() => {
      const { schema, arrays } = exportTable(t);
      const imported = importSchema(exportSchema(t.schema));
      importTable(arrays, schema).release();
      const more = exportTable(t);
      freeArrowSchema(more.schema);
      importTable(more.arrays, imported).release();
    });
    assert.equal(made, 1);
  });

  test('a stream of 50 batches: one plan', async () => {
    const t = batches(50);
    const made = await plansMadeBy(() => {
      const p = exportArrayStream(t);
      const reader = importArrayStream(p);
      let n = 0;
      for (const b of reader) n += b.numRows;
      assert.equal(n, 50);
      freeArrowArrayStream(p);
    });
    assert.equal(made, 1);
  });

  test('20 device arrays of one schema: one plan', async () => {
    const t = batches(20);
    const made = await plansMadeBy(() => {
      for (const b of t.batches) {
        const p = exportDeviceArray(b);
        importDeviceArray(p, t.schema).release();
        freeDeviceArray(p);
      }
    });
    assert.equal(made, 1);
  });

  test('an async stream of 30 tasks from a C producer thread: no plan after the first task', { skip: peerMissing }, async () => {
    const peer = asyncPeer();
    const reader = createAsyncDeviceStreamReader({ nativeRing: false, queueSize: 4 });
    const p = peer.produce(reader.handler, 30, 10, -1);
    let n = 0;
    let afterFirst = -1;
    for await (const task of reader.tasks()) {
      n += (task.data as RecordBatch).numRows;
      if (afterFirst < 0) afterFirst = planBuilds();
    }
    await peer.produceWait(p);
    assert.equal(n, 300);
    assert.equal(planBuilds() - afterFirst, 0, 'tasks 2 to 30 read through the plan the schema made');
  });
});
