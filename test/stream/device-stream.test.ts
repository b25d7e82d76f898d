/**
 * Device streams of device data (CDeviceDataInterface.rst, "Device Stream
 * Interface"), both directions, with an opaque device type (Vulkan): the
 * arrays' buffers sit at addresses no process can read, so the tests
 * passing proves that no byte was touched. Each item keeps its
 * `sync_event`; ownership follows the reader rules (one item alive at a
 * time unless kept; exactly one release each).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Field, Int32, Schema, Table, vectorFromArray } from 'apache-arrow';
import { DeviceType } from '../../src/abi/constants.js';
import {
  allocArrowDeviceArrayStream, DeviceArray, exportDeviceArrayStream, freeArrowDeviceArrayStream, importDeviceArray,
  importDeviceArrayStream, nativeMemory, StreamProducerError,
} from '../../src/index.js';
import { Builder, releaseCount, type ArraySpec, type Built } from '../cdata/malformed/builder.js';
import { wrapDevice } from '../device/helpers.js';

const mem = nativeMemory();
const SYNC_EVENT = 0xdead0000n; // never dereferenced
const schema = new Schema([new Field('i', new Int32(), true)]);
/** struct<i: int32> of length 3 whose buffers are at unreadable addresses. */
const spec = (): ArraySpec => ({ length: 3, buffers: [null], children: [{ length: 3, buffers: [null, 0x2000n] }] });

function vulkanArrays(b: Builder, n: number, deviceType: number = DeviceType.VULKAN): { devs: DeviceArray[]; built: Built[] } {
  const built: Built[] = [];
  const devs: DeviceArray[] = [];
  for (let k = 0; k < n; k++) {
    const bt = b.array(spec(), `array${k}`);
    built.push(bt);
    const p = wrapDevice(b, bt, { deviceType, deviceId: 1, syncEvent: SYNC_EVENT + BigInt(k) });
    devs.push(importDeviceArray(p, schema));
  }
  return { devs, built };
}

describe('device streams of device data', () => {
  test('exportDeviceArrayStream of Vulkan DeviceArrays -> importDeviceArrayStream yields DeviceArrays with their events', () => {
    const b = new Builder();
    try {
      const { devs, built } = vulkanArrays(b, 3);
      const stream = exportDeviceArrayStream(devs, { schema });
      assert.equal(mem.readI32(stream + BigInt(mem.layouts.ArrowDeviceArrayStream.offsets.device_type!)), DeviceType.VULKAN);
      const reader = importDeviceArrayStream(stream);
      freeArrowDeviceArrayStream(stream);
      assert.equal(reader.deviceType, DeviceType.VULKAN);
      let k = 0;
      let previous: DeviceArray | undefined;
      for (const item of reader) {
        assert.ok(item instanceof DeviceArray, 'device memory the CPU cannot read comes as a DeviceArray');
        assert.equal(item.deviceType, DeviceType.VULKAN);
        assert.equal(item.deviceId, 1);
        assert.equal(item.syncEvent, SYNC_EVENT + BigInt(k), 'each array keeps its sync_event');
        assert.equal(item.length, 3);
        assert.deepEqual(item.children[0]!.buffers[1], { address: 0x2000n, size: 12 });
        assert.equal(devs[k]!.released, true, 'moved out of the exported handle');
        if (previous) {
          assert.equal(previous.released, true, 'the reader released the item it handed out before');
          assert.equal(releaseCount(built[k - 1]!.root.id), 1);
        }
        previous = item;
        k++;
      }
      assert.equal(k, 3);
      for (const bt of built) assert.equal(releaseCount(bt.root.id), 1, 'every array released exactly once');
    } finally {
      b.freeAll();
    }
  });

  test('keep() keeps a DeviceArray past the reader; toHost() of an opaque stream is refused with the device named', () => {
    const b = new Builder();
    try {
      const { devs, built } = vulkanArrays(b, 2);
      const stream = exportDeviceArrayStream(devs, { schema });
      const reader = importDeviceArrayStream(stream);
      freeArrowDeviceArrayStream(stream);
      const first = reader.keep(reader.next().value!);
      reader.next();
      assert.equal(reader.next().done, true);
      assert.ok(first instanceof DeviceArray);
      assert.equal(first.released, false);
      assert.equal(releaseCount(built[1]!.root.id), 1);
      first.release();
      assert.equal(releaseCount(built[0]!.root.id), 1);

      const more = vulkanArrays(b, 1);
      const s2 = exportDeviceArrayStream(more.devs, { schema });
      const r2 = importDeviceArrayStream(s2, { toHost: true });
      freeArrowDeviceArrayStream(s2);
      assert.throws(() => r2.next(), /device_stream\.batches\[0\].*VULKAN memory/);
      assert.equal(r2.released, true);
      assert.equal(releaseCount(more.built[0]!.root.id), 1);
    } finally {
      b.freeAll();
    }
  });

  test('an array of another device, or host data in a stream of device memory, fails that get_next', () => {
    const b = new Builder();
    try {
      const v = vulkanArrays(b, 1);
      const o = vulkanArrays(b, 1, DeviceType.OPENCL);
      const stream = exportDeviceArrayStream([v.devs[0]!, o.devs[0]!], { schema });
      const reader = importDeviceArrayStream(stream);
      freeArrowDeviceArrayStream(stream);
      reader.next();
      assert.throws(
        () => reader.next(),
        (e: unknown) => e instanceof StreamProducerError && /a OPENCL DeviceArray in a stream of device type 7/.test(e.message),
      );
      assert.equal(releaseCount(v.built[0]!.root.id), 1);
      o.devs[0]!.release();

      const host = new Table({ i: vectorFromArray([1, 2, 3], new Int32()) }).batches[0]!;
      const s2 = exportDeviceArrayStream([host], { schema, deviceType: DeviceType.VULKAN });
      const r2 = importDeviceArrayStream(s2);
      freeArrowDeviceArrayStream(s2);
      assert.throws(() => r2.next(), /host data in a stream of device memory/);
    } finally {
      b.freeAll();
    }
  });

  test('a stream whose device type is unknown is refused at import (and released)', () => {
    const p = allocArrowDeviceArrayStream();
    const s = exportDeviceArrayStream([], { schema });
    // Move our own stream into p and corrupt its device type.
    mem.copyIn(p, mem.read(s, mem.layouts.ArrowDeviceArrayStream.size));
    mem.writePtr(s + BigInt(mem.layouts.ArrowDeviceArrayStream.offsets.release!), 0n);
    mem.writeI32(p + BigInt(mem.layouts.ArrowDeviceArrayStream.offsets.device_type!), 99);
    assert.throws(() => importDeviceArrayStream(p), /device_stream\.device_type: unknown device type 99/);
    assert.equal(mem.readPtr(p + BigInt(mem.layouts.ArrowDeviceArrayStream.offsets.release!)), 0n, 'released on failure');
    freeArrowDeviceArrayStream(p);
    freeArrowDeviceArrayStream(s);
  });
});
