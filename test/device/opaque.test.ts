/**
 * Device types this library cannot read (OpenCL, Vulkan, Metal, VPI, ROCm,
 * ROCm host, EXT_DEV, oneAPI, WebGPU, Hexagon) import as opaque
 * `DeviceArray`s: metadata readable, pass-through and release work, reading
 * bytes is a clear error. The arrays are built by hand in native memory
 * with buffer addresses no process can read (0x1000 and up, the first page
 * above what the memory backend refuses outright): a single read of one
 * would crash this process, so the tests passing proves no byte was touched.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Dictionary, Field, Int32, Int64, Int8, List, Schema, Utf8 } from 'apache-arrow';
import { DeviceType, type DeviceTypeName } from '../../src/abi/constants.js';
import {
  allocDeviceArray, DeviceArray, exportDeviceArray, freeDeviceArray, importDeviceArray, importDeviceData, importDeviceRecordBatch,
} from '../../src/device/index.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { accounting, nativeMemory } from '../../src/memory/index.js';
import { Builder, releaseCount, trackerProblems, type ArraySpec, type Built } from '../cdata/malformed/builder.js';
import { collectUntil } from '../helpers/gc.js';
import { arrayRelease, readDeviceFieldsRaw, structBytes, wrapDevice } from './helpers.js';

const mem = nativeMemory();
const OPAQUE: DeviceTypeName[] = ['OPENCL', 'VULKAN', 'METAL', 'VPI', 'ROCM', 'ROCM_HOST', 'EXT_DEV', 'ONEAPI', 'HEXAGON'];
const SYNC_EVENT = 0xdead0000n; // never dereferenced

const schema = new Schema([
  new Field('i', new Int32(), true),
  new Field('s', new Utf8(), false),
  new Field('l', new List(new Field('item', new Int64(), false)), false),
  new Field('d', new Dictionary(new Utf8(), new Int8()), false),
]);

/** struct<i: int32, s: utf8, l: list<int64>, d: dictionary<int8, utf8>> of length 3, every buffer at an unreadable address. */
const spec = (): ArraySpec => ({
  length: 3,
  buffers: [null],
  children: [
    { length: 3, nullCount: 1, buffers: [0x1000n, 0x2000n] },
    { length: 3, buffers: [null, 0x3000n, 0x4000n] },
    { length: 3, buffers: [null, 0x5000n], children: [{ length: 7, buffers: [null, 0x6000n] }] },
    { length: 3, buffers: [null, 0x7000n], dictionary: { length: 2, buffers: [null, 0x8000n, 0x9000n] } },
  ],
});

function build(b: Builder, deviceType: number): { ptr: bigint; built: Built } {
  const built = b.array(spec());
  return { ptr: wrapDevice(b, built, { deviceType, deviceId: 3, syncEvent: SYNC_EVENT }), built };
}

function expectUnsupported(fn: () => unknown, name: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ArrowDeviceError);
    assert.equal(e.kind, 'unsupported');
    assert.equal(e.code, 'ENOSYS');
    assert.match(e.message, new RegExp(`^device_array: the bytes of ${name} memory \\(device type \\d+\\) cannot be read`));
    return true;
  });
}

describe('opaque device arrays', () => {
  for (const name of OPAQUE) {
    const type = DeviceType[name];
    test(`${name}: metadata is readable, bytes are refused, release runs once`, () => {
      const b = new Builder();
      try {
        const { ptr, built } = build(b, type);
        const before = accounting();
        // `minimal`: nothing on the device is read (the other levels read offsets there: refused below).
        const dev = importDeviceArray(ptr, schema, { validate: 'minimal' });
        assert.equal(arrayRelease(ptr), 0n, 'moved out of the producer\'s struct');
        assert.equal(accounting().liveImports, before.liveImports + 1);
        assert.equal(dev.deviceType, type);
        assert.equal(dev.deviceTypeName, name);
        assert.equal(dev.deviceId, 3);
        assert.equal(dev.syncEvent, SYNC_EVENT);
        assert.equal(dev.hostReadable, false);
        assert.equal(dev.length, 3);
        assert.equal(dev.nullCount, 0);
        assert.equal(dev.schema.format, '+s');
        assert.deepEqual(dev.buffers, [{ address: 0n, size: 0 }]);
        const [i, s, l, d] = dev.children;
        assert.deepEqual(i!.buffers, [{ address: 0x1000n, size: 1 }, { address: 0x2000n, size: 12 }]);
        assert.equal(i!.nullCount, 1);
        // utf8: the offsets' size is known, the data's is the last offset, which lives on the device.
        assert.deepEqual(s!.buffers, [{ address: 0n, size: 0 }, { address: 0x3000n, size: 16 }, { address: 0x4000n, size: undefined }]);
        assert.deepEqual(l!.buffers[1], { address: 0x5000n, size: 16 });
        assert.deepEqual(l!.children[0]!.buffers[1], { address: 0x6000n, size: 56 });
        assert.deepEqual(d!.buffers[1], { address: 0x7000n, size: 3 });
        assert.equal(d!.dictionary!.length, 2);
        assert.deepEqual(d!.dictionary!.buffers[1], { address: 0x8000n, size: 12 });
        assert.equal(dev.sizesKnown, false);

        expectUnsupported(() => dev.toHost(), name);
        expectUnsupported(() => dev.toHostRecordBatch(), name);
        expectUnsupported(() => dev.resolveBufferSizes(), name);
        expectUnsupported(() => dev.copyTo({ deviceType: DeviceType.CPU }), name);
        expectUnsupported(() => dev.copyTo({ deviceType: DeviceType.CUDA, deviceId: 0 }), name);
        assert.equal(dev.released, false);
        assert.equal(releaseCount(built.root.id), 0);

        dev.release();
        dev.release();
        assert.equal(releaseCount(built.root.id), 1);
        for (const r of built.records) assert.equal(r.calls, 1, `${r.label} released once`);
        assert.equal(accounting().liveImports, before.liveImports);
      } finally {
        b.freeAll();
      }
      assert.deepEqual(trackerProblems.strayCalls, []);
      assert.deepEqual(trackerProblems.callbackErrors, []);
    });

    test(`${name}: passes through unchanged to another consumer`, () => {
      const b = new Builder();
      try {
        const { ptr, built } = build(b, type);
        const original = structBytes(ptr);
        const dev = importDeviceData(ptr, schema, { validate: 'minimal' });
        assert.ok(dev instanceof DeviceArray);
        const next = b.alloc(mem.layouts.ArrowDeviceArray.size);
        dev.exportTo(next);
        assert.equal(dev.released, true);
        assert.equal(releaseCount(built.root.id), 0, 'a move does not release');
        assert.deepEqual(structBytes(next), original, 'the next consumer sees the producer\'s struct, bit for bit');
        assert.deepEqual(readDeviceFieldsRaw(next).reserved, [0n, 0n, 0n]);
        // The next consumer is this library again, through exportDeviceArray's pass-through.
        const again = importDeviceRecordBatch(next, schema, { validate: 'minimal' });
        assert.ok(again instanceof DeviceArray);
        const third = exportDeviceArray(again);
        assert.deepEqual(structBytes(third), original);
        assert.equal(releaseCount(built.root.id), 0);
        freeDeviceArray(third); // the last consumer releases it
        assert.equal(releaseCount(built.root.id), 1);
        for (const r of built.records) assert.equal(r.calls, 1, `${r.label} released once`);
      } finally {
        b.freeAll();
      }
    });
  }

  test('toHost: true on an opaque import is an error, and the array is released once', () => {
    const b = new Builder();
    try {
      const { ptr, built } = build(b, DeviceType.VULKAN);
      expectUnsupported(() => importDeviceRecordBatch(ptr, schema, { toHost: true, validate: 'minimal' }), 'VULKAN');
      assert.equal(releaseCount(built.root.id), 1);
      assert.equal(arrayRelease(ptr), 0n);
    } finally {
      b.freeAll();
    }
  });

  test('a malformed opaque array is refused by its structs alone, and released once', () => {
    const b = new Builder();
    try {
      const built = b.array({ ...spec(), children: [...spec().children!.slice(0, 3), { length: 3, buffers: [null, 0x7000n] }] });
      const ptr = wrapDevice(b, built, { deviceType: DeviceType.METAL, deviceId: 0 });
      assert.throws(() => importDeviceArray(ptr, schema), /^ArrowDeviceError: device_array\.array\.children\[3\]\.dictionary: NULL pointer, but the schema is dictionary-encoded$/);
      assert.equal(releaseCount(built.root.id), 1);
    } finally {
      b.freeAll();
    }
  });

  test('an opaque DeviceArray dropped without release is released by the garbage collector', async () => {
    const b = new Builder();
    const { ptr, built } = build(b, DeviceType.HEXAGON);
    (() => {
      importDeviceArray(ptr, schema, { validate: 'minimal' });
    })();
    const ok = await collectUntil(() => releaseCount(built.root.id) === 1);
    assert.ok(ok, 'released by the FinalizationRegistry');
    b.freeAll();
  });

  test('default and full validation, which read offsets on the device, are refused by name; fixed widths need none', () => {
    for (const validate of ['default', 'full'] as const) {
      const b = new Builder();
      try {
        const { ptr, built } = build(b, DeviceType.OPENCL);
        assert.throws(() => importDeviceArray(ptr, schema, { validate }), (e: unknown) => {
          assert.ok(e instanceof ArrowDeviceError);
          assert.equal(e.kind, 'unsupported');
          assert.equal(
            e.message,
            `device_array.array.children[1]: validation "${validate}" reads the offsets and variadic sizes that size buffers, but the bytes of OPENCL memory (device type 4) ` +
              'cannot be read by this library; import with { validate: "minimal" } to pass it on unread',
          );
          return true;
        });
        assert.equal(releaseCount(built.root.id), 1, 'consumed: released once');
      } finally {
        b.freeAll();
      }
    }
    // Fixed-width columns only: no check of `default` or `full` reads the device, so both import.
    for (const validate of ['default', 'full'] as const) {
      const b = new Builder();
      try {
        const built = b.array({ length: 3, buffers: [null], children: [{ length: 3, nullCount: 1, buffers: [0x1000n, 0x2000n] }] });
        const ptr = wrapDevice(b, built, { deviceType: DeviceType.OPENCL, deviceId: 0 });
        const dev = importDeviceArray(ptr, new Schema([new Field('i', new Int32(), true)]), { validate });
        assert.equal(dev.sizesKnown, true);
        dev.release();
      } finally {
        b.freeAll();
      }
    }
  });

  test('allocDeviceArray gives a zeroed, released struct', () => {
    const p = allocDeviceArray();
    assert.deepEqual(structBytes(p), new Array(mem.layouts.ArrowDeviceArray.size).fill(0));
    freeDeviceArray(p);
  });
});
