/**
 * The device-aware copy to the host, without a GPU: a test backend for
 * EXT_DEV reads host memory (as the CPU backend does) but records every
 * batch it is asked for. Every gold file goes through it, so the copy
 * covers children, dictionaries and view types' variadic buffers, and the
 * tests prove the shape of the device traffic: the sizes of variable-length
 * buffers come from ONE batched read of every last offset (and variadic
 * sizes buffer) in the tree, then every buffer is copied in one more batch.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { Int32, RecordBatch, Schema, Table, tableFromIPC, Utf8, vectorFromArray, type Struct } from 'apache-arrow';
import { DeviceType } from '../../src/abi/constants.js';
import { dataToView } from '../../src/array/arrowjs.js';
import type { ArrayView } from '../../src/array/view.js';
import { cpuBackend, setDeviceBackend, type DeviceBackend, type DeviceContext, type ReadRange } from '../../src/device/backend.js';
import { exportDeviceArray, freeDeviceArray, importDeviceArray, importDeviceRecordBatch, DeviceArray } from '../../src/device/index.js';
import { freeArrowSchema, exportSchema } from '../../src/array/api.js';
import { accounting, nativeMemory } from '../../src/memory/index.js';
import { schemaToNode } from '../../src/schema/export.js';
import { diffTables } from '../helpers/compare.js';
import { collectUntil } from '../helpers/gc.js';
import { ARROW_JS_UNREADABLE, GOLD, goldFiles, goldSkip } from '../helpers/gold.js';
import { writeDeviceFieldsRaw } from './helpers.js';

const mem = nativeMemory();

interface Batch {
  small: boolean;
  ranges: number;
  bytes: number;
  syncEvent: bigint;
}
const batches: Batch[] = [];
const recording: DeviceBackend = {
  name: 'test-ext-dev',
  hostReadable: () => false,
  syncForHost: () => {
    throw new Error('an EXT_DEV array must never be read in place');
  },
  readBatch(ctx: DeviceContext, ranges: readonly ReadRange[], small: boolean) {
    batches.push({ small, ranges: ranges.length, bytes: ranges.reduce((n, r) => n + r.size, 0), syncEvent: ctx.syncEvent });
    cpuBackend.readBatch(ctx, ranges, small);
  },
};
let previous: DeviceBackend | undefined;
before(() => {
  previous = setDeviceBackend(DeviceType.EXT_DEV, recording);
});
after(() => {
  setDeviceBackend(DeviceType.EXT_DEV, previous);
});

/**
 * How many device reads the sizes and the `default` checks need: the first and the last offset of
 * each offsets buffer (binary, utf8, lists, maps), and each variadic sizes buffer.
 */
function expectedFetches(v: ArrayView): number {
  const t = v.schema.type.id;
  let n = 0;
  if (['binary', 'utf8', 'large_binary', 'large_utf8', 'list', 'large_list', 'map'].includes(t) && v.buffers[1]) n += 2;
  if ((t === 'binary_view' || t === 'utf8_view') && v.buffers.length > 3) n++;
  for (const c of v.children) n += expectedFetches(c);
  if (v.dictionary) n += expectedFetches(v.dictionary);
  return n;
}

/** A batch exported as a CPU device array, then relabelled as EXT_DEV memory (the bytes stay in host memory). */
function exportAsExtDev(batch: RecordBatch): bigint {
  const p = exportDeviceArray(batch);
  writeDeviceFieldsRaw(p, { deviceType: DeviceType.EXT_DEV, deviceId: 0 });
  return p;
}

describe('device-aware copy to the host', { skip: goldSkip }, () => {
  for (const f of goldFiles) {
    const skip = ARROW_JS_UNREADABLE.has(f) ? 'arrow-js 21 cannot read this IPC file' : false;
    test(`copies ${f.replace('.arrow_file', '')} in two batches: offsets at import, then buffers`, { skip }, async () => {
      (() => {
        const table = tableFromIPC(readFileSync(new URL(f, GOLD)));
        const copies: RecordBatch[] = [];
        for (const batch of table.batches) {
          const schema = new Schema((batch.data.type as Struct).children, batch.schema.metadata);
          const expected = expectedFetches(dataToView(batch.data, schemaToNode(schema)));
          const p = exportAsExtDev(batch);
          batches.length = 0;
          const dev = importDeviceArray(p, schema);
          freeDeviceArray(p);
          // `default`: the values that size buffers are read and checked at import, in one batch.
          const fetch = batches.filter((b) => b.small);
          assert.equal(fetch.length, expected > 0 ? 1 : 0, 'one batched read for every size in the tree');
          if (expected > 0) assert.equal(fetch[0]!.ranges, expected, 'every first and last offset and variadic sizes buffer, in that one batch');
          assert.equal(dev.sizesKnown, true);
          batches.length = 0;
          copies.push(dev.toHostRecordBatch({ validate: 'full' }));
          const copy = batches.filter((b) => !b.small);
          assert.equal(batches.filter((b) => b.small).length, 0, 'no size read again');
          assert.equal(copy.length, 1, 'one batch of buffer copies');
          assert.ok(dev.sizesKnown);
          // Asking again reads nothing more for the sizes.
          batches.length = 0;
          dev.resolveBufferSizes();
          assert.equal(batches.length, 0);
          dev.release();
        }
        assert.equal(diffTables(table, copies.length ? new Table(copies) : new Table(table.schema)), undefined);
      })();
      const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
      assert.ok(ok, JSON.stringify(accounting()));
    });
  }

  test('toHost: true copies at import and releases the device array at once', () => {
    const table = tableFromIPC(readFileSync(new URL('generated_nested.arrow_file', GOLD)));
    const batch = table.batches[0]!;
    const before = accounting();
    const schemaPtr = exportSchema(new Schema((batch.data.type as Struct).children));
    const p = exportAsExtDev(batch);
    const back = importDeviceRecordBatch(p, schemaPtr, { toHost: true });
    assert.ok(back instanceof RecordBatch);
    assert.equal(accounting().liveImports, before.liveImports);
    assert.equal(accounting().liveExports, before.liveExports, 'the producer (our CPU export) was released');
    assert.equal(diffTables(new Table([batch]), new Table([back])), undefined);
    freeDeviceArray(p);
    freeArrowSchema(schemaPtr);
  });

  test('the resolved sizes are the last offsets, and a negative one is refused by name at every level that checks it', () => {
    const batch = new Table({
      n: vectorFromArray([1, 2, 3, 4], new Int32()),
      s: vectorFromArray(['alpha', null, 'gamma', 'delta!'], new Utf8()),
    }).batches[0]!;
    const schema = new Schema((batch.data.type as Struct).children);
    const col = 1;
    const p = exportAsExtDev(batch);
    const dev = importDeviceArray(p, schema, { validate: 'minimal' });
    freeDeviceArray(p);
    assert.equal(dev.sizesKnown, false, 'minimal reads nothing on the device at import');
    dev.resolveBufferSizes();
    const child = dev.children[col]!;
    const offsets = mem.read(child.buffers[1]!.address, child.buffers[1]!.size!);
    const last = new DataView(offsets.buffer).getInt32((child.offset + child.length) * 4, true);
    assert.equal(child.buffers[2]!.size, last);
    dev.release();

    // A producer whose last offset is negative: the same verdict as a host import of the same array.
    const negative = (fn: (q: bigint) => void): void => {
      const q = exportDeviceArray(batch);
      const c = importDeviceArray(q, schema, { validate: 'minimal' }); // read the layout, then give it back
      const lastAt = c.children[col]!.buffers[1]!.address + BigInt((c.children[col]!.offset + c.children[col]!.length) * 4);
      c.exportTo(q);
      const saved = mem.readI32(lastAt);
      mem.writeI32(lastAt, -5);
      try {
        fn(q);
      } finally {
        mem.writeI32(lastAt, saved);
        freeDeviceArray(q);
      }
    };
    const message = new RegExp(`^ArrowDeviceError: device_array\\.array\\.children\\[${col}\\]\\.buffers\\[1\\]: last offset -5 is less than the first 0$`);
    negative((q) => {
      writeDeviceFieldsRaw(q, { deviceType: DeviceType.EXT_DEV, deviceId: 0 });
      assert.throws(() => importDeviceArray(q, schema), message, 'device memory, default');
    });
    negative((q) => assert.throws(() => importDeviceRecordBatch(q, schema), message, 'CPU memory read in place, default'));
    negative((q) => {
      writeDeviceFieldsRaw(q, { deviceType: DeviceType.EXT_DEV, deviceId: 0 });
      const d = importDeviceArray(q, schema, { validate: 'minimal' });
      d.resolveBufferSizes();
      assert.equal(d.children[col]!.buffers[2]!.size, 0, 'minimal: a last offset below 0 sizes the data as empty, on the device as on the host');
      d.release();
    });
  });

  test('copyTo(CPU) from a device goes through the same two batches', () => {
    const table = tableFromIPC(readFileSync(new URL('generated_binary.arrow_file', GOLD)));
    const batch = table.batches.find((b) => b.numRows > 0)!;
    const schema = new Schema((batch.data.type as Struct).children);
    const p = exportAsExtDev(batch);
    batches.length = 0;
    const dev = importDeviceArray(p, schema);
    freeDeviceArray(p);
    const cpu = dev.copyTo({ deviceType: DeviceType.CPU });
    dev.release();
    assert.deepEqual(batches.map((b) => b.small), [true, false], 'the sizes at import, the buffers at the copy');
    assert.ok(cpu instanceof DeviceArray);
    assert.equal(cpu.deviceTypeName, 'CPU');
    assert.equal(diffTables(new Table([batch]), new Table([cpu.toHostRecordBatch()])), undefined);
    cpu.release();
  });
});
