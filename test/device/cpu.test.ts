/**
 * CPU device arrays (ARROW_DEVICE_CPU) in both directions, the validation
 * of the device fields, and `DeviceArray` handles over CPU memory: every
 * gold file round trips through `ArrowDeviceArray`, every import is
 * released exactly once, and the accounting goes back to zero.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { Int32, RecordBatch, Schema, Table, tableFromArrays, tableFromIPC, Utf8, Vector, vectorFromArray, type Data, type Struct } from 'apache-arrow';
import { exportSchema, freeArrowSchema, importRecordBatch } from '../../src/array/api.js';
import { DeviceType } from '../../src/abi/constants.js';
import {
  allocDeviceArray, DeviceArray, exportDeviceArray, exportDeviceRecordBatch, freeDeviceArray, importDeviceArray, importDeviceArrayView,
  importDeviceData, importDeviceRecordBatch, moveDeviceArray, releaseDeviceArray,
} from '../../src/device/index.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { accounting, nativeMemory } from '../../src/memory/index.js';
import { schemaToNode } from '../../src/schema/export.js';
import { columnValues, diffTables } from '../helpers/compare.js';
import { collectUntil } from '../helpers/gc.js';
import { ARROW_JS_UNREADABLE, GOLD, goldFiles, goldSkip } from '../helpers/gold.js';
import { arrayRelease, readDeviceFieldsRaw, writeDeviceFieldsRaw } from './helpers.js';

const mem = nativeMemory();

async function settle(): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
}

function expectError(fn: () => unknown, kind: string, message: string | RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ArrowDeviceError, `an ArrowDeviceError, got ${String(e)}`);
    assert.equal(e.kind, kind);
    if (typeof message === 'string') assert.equal(e.message, message);
    else assert.match(e.message, message);
    return true;
  });
}

const small = (): RecordBatch => tableFromArrays({ x: Int32Array.from([1, 2, 3]), s: ['a', 'bb', 'ccc'] }).batches[0]!;

describe('CPU device arrays: gold files', { skip: goldSkip }, () => {
  for (const f of goldFiles) {
    const skip = ARROW_JS_UNREADABLE.has(f) ? 'arrow-js 21 cannot read this IPC file' : false;
    const name = f.replace('.arrow_file', '');
    test(`round trips ${name} through ArrowDeviceArray, zero-copy, with full validation`, { skip }, async () => {
      (() => {
        const table = tableFromIPC(readFileSync(new URL(f, GOLD)));
        const back: RecordBatch[] = [];
        for (const batch of table.batches) {
          const { schema, array } = exportDeviceRecordBatch(batch);
          const fields = readDeviceFieldsRaw(array);
          assert.deepEqual(fields, { deviceType: DeviceType.CPU, deviceId: -1n, syncEvent: 0n, reserved: [0n, 0n, 0n], padding: 0 });
          const b = importDeviceRecordBatch(array, schema, { validate: 'full' });
          assert.ok(b instanceof RecordBatch);
          assert.equal(arrayRelease(array), 0n, 'import moved the struct: its release is NULL');
          back.push(b);
          freeDeviceArray(array);
          freeArrowSchema(schema);
        }
        assert.equal(diffTables(table, back.length ? new Table(back) : new Table(table.schema)), undefined);
      })();
      await settle();
    });

    test(`copies ${name} to the host through a DeviceArray and passes it on unchanged`, { skip }, async () => {
      (() => {
        const table = tableFromIPC(readFileSync(new URL(f, GOLD)));
        const copies: RecordBatch[] = [];
        const moved: RecordBatch[] = [];
        for (const batch of table.batches) {
          const { schema, array } = exportDeviceRecordBatch(batch);
          const node = schemaToNode(new Schema((batch.data.type as Struct).children, batch.schema.metadata));
          const dev = importDeviceArray(array, schema);
          assert.equal(dev.deviceType, DeviceType.CPU);
          assert.equal(dev.deviceTypeName, 'CPU');
          assert.equal(dev.deviceId, -1);
          assert.equal(dev.length, batch.numRows);
          copies.push(dev.toHostRecordBatch({ validate: 'full' }));
          assert.ok(dev.sizesKnown);
          // Pass it on unchanged to another consumer, which imports it.
          const next = allocDeviceArray();
          dev.exportTo(next);
          assert.equal(dev.released, true);
          moved.push(importDeviceRecordBatch(next, node) as RecordBatch);
          freeDeviceArray(next);
          freeDeviceArray(array);
        }
        const t = (bs: RecordBatch[]): Table => (bs.length ? new Table(bs) : new Table(table.schema));
        assert.equal(diffTables(table, t(copies)), undefined);
        assert.equal(diffTables(table, t(moved)), undefined);
      })();
      await settle();
    });
  }
});

describe('CPU device arrays: export', () => {
  test('zeroes reserved and padding even in a struct full of garbage', () => {
    const before = accounting().liveExports;
    const into = allocDeviceArray();
    mem.copyIn(into, new Uint8Array(mem.layouts.ArrowDeviceArray.size).fill(0xab));
    exportDeviceArray(small(), { into });
    assert.deepEqual(readDeviceFieldsRaw(into), { deviceType: 1, deviceId: -1n, syncEvent: 0n, reserved: [0n, 0n, 0n], padding: 0 });
    freeDeviceArray(into);
    assert.equal(accounting().liveExports, before);
  });

  test('a consumer reading it as a plain ArrowArray sees the same data (the array is at offset 0)', () => {
    const p = exportDeviceArray(small());
    const batch = importRecordBatch(p, small().schema);
    assert.deepEqual(columnValues(batch.getChild('s')!), ['a', 'bb', 'ccc']);
    freeDeviceArray(p);
  });

  test('exports a Vector and Data with the device fields of the CPU', () => {
    const v = vectorFromArray([1, null, 3], new Int32());
    for (const x of [v, v.data[0]!] as (Vector | Data)[]) {
      const p = exportDeviceArray(x);
      assert.equal(readDeviceFieldsRaw(p).deviceType, DeviceType.CPU);
      const data = importDeviceData(p, new Int32());
      assert.ok(!(data instanceof DeviceArray));
      assert.deepEqual(columnValues(new Vector([data])), [1, null, 3]);
      freeDeviceArray(p);
    }
  });

  test('refuses a stream and a device id other than -1 for the CPU', () => {
    const before = accounting().liveExports;
    expectError(() => exportDeviceArray(small(), { stream: 1n }), 'invalid', 'options.stream: a CPU export has no stream');
    expectError(() => exportDeviceArray(small(), { deviceId: 2 }), 'invalid', 'options.deviceId: must be -1 for a CPU device, got 2');
    expectError(() => exportDeviceArray(small(), { deviceType: 5 }), 'invalid', 'options.deviceType: unknown device type 5');
    expectError(() => exportDeviceArray(small(), { deviceType: DeviceType.OPENCL }), 'unsupported', 'options.deviceType: exports to OPENCL memory are not supported');
    assert.equal(accounting().liveExports, before);
  });

  test('moveDeviceArray moves bitwise and marks the source released', () => {
    const before = accounting().liveExports;
    const a = exportDeviceArray(small());
    const b = allocDeviceArray();
    moveDeviceArray(a, b);
    assert.equal(arrayRelease(a), 0n);
    assert.notEqual(arrayRelease(b), 0n);
    releaseDeviceArray(a); // released: nothing happens
    assert.equal(accounting().liveExports, before + 4, 'the struct, x, s and the dictionary of s (tableFromArrays dictionary-encodes strings)');
    freeDeviceArray(b);
    freeDeviceArray(a);
    assert.equal(accounting().liveExports, before);
  });
});

describe('CPU device arrays: validation of the device fields', () => {
  /** Exports `small()`, lets `patch` spoil it, imports it and expects `message`; the export must be released. */
  function refuses(patch: (p: bigint) => void, kind: string, message: string, importer = importDeviceRecordBatch as (p: bigint, s: Schema) => unknown): void {
    const before = accounting();
    const p = exportDeviceArray(small());
    patch(p);
    expectError(() => importer(p, small().schema), kind, message);
    assert.equal(arrayRelease(p), 0n, 'the import consumed the struct on failure');
    assert.equal(accounting().liveExports, before.liveExports, 'the producer was released');
    assert.equal(accounting().liveImports, before.liveImports);
    freeDeviceArray(p);
  }
  const L = mem.layouts.ArrowDeviceArray;
  const reservedAt = (p: bigint, k: number): bigint => p + BigInt(L.offsets.reserved! + 8 * k);

  for (const k of [0, 1, 2]) {
    test(`refuses non-zero reserved[${k}]`, () => {
      refuses((p) => mem.writeI64(reservedAt(p, k), 1n << BigInt(8 * k + 3)), 'invalid', `device_array.reserved[${k}]: must be zero`);
      refuses((p) => mem.writeI64(reservedAt(p, k), 7n), 'invalid', `device_array.reserved[${k}]: must be zero`, importDeviceArray as never);
    });
  }

  test('refuses an unknown device type', () => {
    for (const t of [0, 5, 6, 17, -1]) {
      refuses((p) => mem.writeI32(p + BigInt(L.offsets.device_type!), t), 'invalid', `device_array.device_type: unknown device type ${t}`);
    }
  });

  test('refuses a CPU device id other than -1 (or 0), and negative ids below -1', () => {
    refuses((p) => mem.writeI64(p + BigInt(L.offsets.device_id!), 3n), 'invalid', 'device_array.device_id: must be -1 for a CPU device, got 3');
    refuses((p) => mem.writeI64(p + BigInt(L.offsets.device_id!), -2n), 'invalid', 'device_array.device_id: must be -1 or a device number, got -2');
  });

  test('accepts device id 0 for the CPU (DLPack\'s convention)', () => {
    const p = exportDeviceArray(small(), { deviceId: 0 });
    assert.equal(readDeviceFieldsRaw(p).deviceId, 0n);
    const b = importDeviceRecordBatch(p, small().schema) as RecordBatch;
    assert.deepEqual(columnValues(b.getChild('x')!), [1, 2, 3]);
    freeDeviceArray(p);
  });

  test('refuses a sync event on a CPU array', () => {
    refuses((p) => mem.writePtr(p + BigInt(L.offsets.sync_event!), 0x1000n), 'invalid', 'device_array.sync_event: must be NULL for a CPU device');
  });

  test('refuses CUDA and CUDA_MANAGED arrays that name no device', () => {
    for (const [t, name] of [[DeviceType.CUDA, 'CUDA'], [DeviceType.CUDA_MANAGED, 'CUDA_MANAGED']] as const) {
      refuses(
        (p) => writeDeviceFieldsRaw(p, { deviceType: t, deviceId: -1 }),
        'invalid',
        `device_array.device_id: a ${name} array must name a device (>= 0), got -1`,
        importDeviceArray as never,
      );
    }
  });

  test('refuses NULL and released structs without releasing anything', () => {
    expectError(() => importDeviceArray(0n, small().schema), 'invalid', 'device_array: NULL pointer');
    const p = allocDeviceArray();
    expectError(() => importDeviceData(p, new Int32()), 'released', 'device_array: the struct is released (array.release is NULL)');
    freeDeviceArray(p);
  });

  test('names the place of an error inside the embedded array', () => {
    refuses(
      (p) => mem.writeI64(p + BigInt(mem.layouts.ArrowArray.offsets.length!), -4n),
      'invalid',
      'device_array.array.length: negative value -4',
    );
    refuses(
      (p) => mem.writeI64(p + BigInt(mem.layouts.ArrowArray.offsets.length!), -4n),
      'invalid',
      'device_array.array.length: negative value -4',
      importDeviceArray as never,
    );
  });

  test('a bad schema consumes the array too', () => {
    const before = accounting();
    const p = exportDeviceArray(small());
    const s = exportSchema(new Schema([]));
    mem.writePtr(s, 0n); // NULL format
    assert.throws(() => importDeviceRecordBatch(p, s), /schema.format: NULL pointer/);
    assert.equal(accounting().liveExports, before.liveExports);
    freeArrowSchema(s);
    freeDeviceArray(p);
  });
});

describe('CPU device arrays: ownership', () => {
  test('a zero-copy import is released when its views are collected, exactly once', async () => {
    await settle();
    const before = accounting().releasedImports;
    (() => {
      const p = exportDeviceArray(vectorFromArray(['x', null, 'zz'], new Utf8()));
      const data = importDeviceData(p, new Utf8());
      assert.ok(!(data instanceof DeviceArray));
      assert.equal(accounting().liveImports, 1);
      freeDeviceArray(p);
    })();
    await settle();
    assert.equal(accounting().releasedImports, before + 1);
  });

  test('copy: true releases the producer at once', () => {
    const before = accounting();
    const p = exportDeviceArray(small());
    const b = importDeviceRecordBatch(p, small().schema, { copy: true }) as RecordBatch;
    assert.equal(accounting().liveExports, before.liveExports);
    assert.equal(accounting().liveImports, before.liveImports);
    assert.deepEqual(columnValues(b.getChild('s')!), ['a', 'bb', 'ccc']);
    freeDeviceArray(p);
  });

  test('DeviceArray.release() releases once; later calls and uses are safe', () => {
    const before = accounting();
    const p = exportDeviceArray(small());
    const dev = importDeviceArray(p, small().schema);
    freeDeviceArray(p);
    assert.equal(accounting().liveImports, before.liveImports + 1);
    dev.release();
    dev.release();
    assert.equal(accounting().liveImports, before.liveImports);
    assert.equal(accounting().releasedImports, before.releasedImports + 1);
    assert.equal(accounting().liveExports, before.liveExports);
    const why = 'its release() (or [Symbol.dispose]) was called';
    expectError(() => dev.toHost(), 'released', `device_array: toHostView of a released (or moved) DeviceArray: ${why}`);
    expectError(() => dev.exportTo(allocDeviceArray()), 'released', `device_array: exportTo of a released (or moved) DeviceArray: ${why}`);
  });

  test('a DeviceArray dropped without release is released by the garbage collector', async () => {
    await settle();
    const before = accounting().releasedImports;
    (() => {
      const p = exportDeviceArray(small());
      importDeviceArray(p, small().schema);
      freeDeviceArray(p);
    })();
    await settle();
    assert.equal(accounting().releasedImports, before + 1);
  });

  test('exportDeviceArray moves a DeviceArray on unchanged', () => {
    const p = exportDeviceArray(small());
    const original = mem.read(p, mem.layouts.ArrowDeviceArray.size).slice();
    const dev = importDeviceArray(p, small().schema);
    const q = exportDeviceArray(dev);
    assert.deepEqual([...mem.read(q, original.length)], [...original]);
    assert.equal(dev.released, true);
    expectError(() => exportDeviceArray(importDeviceArray(exportDeviceArray(small()), small().schema), { deviceType: DeviceType.CUDA }), 'invalid',
      'options.deviceType: a DeviceArray is exported where it is (CPU -1); copy it with copyTo first');
    freeDeviceArray(q);
    freeDeviceArray(p);
  });

  test('DeviceArray.copyTo(CPU) makes an independent copy', async () => {
    await settle();
    (() => {
      const p = exportDeviceArray(small());
      const dev = importDeviceArray(p, small().schema);
      freeDeviceArray(p);
      const copy = dev.copyTo({ deviceType: DeviceType.CPU });
      dev.release();
      assert.equal(copy.deviceType, DeviceType.CPU);
      assert.deepEqual(columnValues(copy.toHostRecordBatch().getChild('s')!), ['a', 'bb', 'ccc']);
      copy.release();
    })();
    await settle();
  });

  test('importDeviceArrayView gives every type as a plain view', () => {
    const p = exportDeviceArray(vectorFromArray([7, 8], new Int32()));
    const view = importDeviceArrayView(p, new Int32());
    assert.ok(!(view instanceof DeviceArray));
    const b = view.buffers[1]!;
    assert.deepEqual([...new Int32Array(b.buffer, b.byteOffset, 2)], [7, 8]);
    freeDeviceArray(p);
  });

  test('everything above is released: the accounting is back to zero', async () => {
    await settle();
  });
});
