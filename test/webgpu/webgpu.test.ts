/**
 * WebGPU device arrays on a real WebGPU implementation (Dawn for Node; on a
 * machine without a GPU, SwiftShader): export to a GPUDevice, import,
 * validation on the device, copies back, hand-on, the realm's registry,
 * release. See test/webgpu/gpu.ts for how the device is found.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  Data, Dictionary, Field, Float32, Float64, Int32, Int64, Int8, List, makeData, RecordBatch, Schema, Struct, Utf8, vectorFromArray, type DataType,
} from 'apache-arrow';
import { DeviceType } from '../../src/abi/constants.js';
import { ArrowSymbols } from '../../src/abi/protocol.js';
import { exportSchema, freeArrowSchema } from '../../src/array/api.js';
import {
  DeviceArray, exportDeviceArray, exportDeviceRecordBatch, freeDeviceArray, importDeviceArray, importDeviceArrayAsync,
} from '../../src/device/index.js';
import { createAsyncDeviceStreamReader, exportDeviceArrayStream, freeArrowArrayStream, importDeviceArrayStream, produceAsyncDeviceStream } from '../../src/index.js';
import { BufferUsage, webgpuBufferAt, webgpuRegistry } from '../../src/device/webgpu.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { accounting } from '../../src/memory/index.js';
import { ExportHandle } from '../../src/memory/handle.js';
import { Builder } from '../cdata/malformed/builder.js';
import { readDeviceFieldsRaw, wrapDevice, writeDeviceFieldsRaw } from '../device/helpers.js';
import { openGpu, skipReason, type Gpu, type TestDevice } from './gpu.js';

const opened = await openGpu();
const gpu: Gpu | null = typeof opened === 'string' ? null : opened;
const skip = typeof opened === 'string' ? skipReason(opened) : false;
if (gpu) console.log(`# WebGPU adapter: ${gpu.adapter}`);
else console.log(`# WebGPU tests skipped: ${opened as string}`);

const batch = (): RecordBatch => {
  const schema = new Schema([
    new Field('i', new Int32(), true),
    new Field('s', new Utf8(), true),
    new Field('l', new List(new Field('item', new Int64(), true)), true),
    new Field('d', new Dictionary(new Utf8(), new Int8()), true),
    new Field('f', new Float64(), false),
  ]);
  const n = 1000;
  const i = vectorFromArray(Array.from({ length: n }, (_, k) => (k % 7 === 0 ? null : k * 3)), new Int32());
  const s = vectorFromArray(Array.from({ length: n }, (_, k) => (k % 5 === 0 ? null : `row ${k}`)), new Utf8());
  const l = vectorFromArray(Array.from({ length: n }, (_, k) => (k % 9 === 0 ? null : Array.from({ length: k % 4 }, (_, j) => BigInt(k * 10 + j)))), new List(new Field('item', new Int64(), true)));
  const d = vectorFromArray(Array.from({ length: n }, (_, k) => ['red', 'green', null, 'blue'][k % 4]!), new Dictionary(new Utf8(), new Int8()));
  const f = vectorFromArray(Array.from({ length: n }, (_, k) => k / 4), new Float64());
  const data = makeData({
    type: new Struct(schema.fields),
    length: n,
    nullCount: 0,
    children: [i.data[0]!, s.data[0]!, l.data[0]!, d.data[0]!, f.data[0]!] as Data<DataType>[],
  });
  return new RecordBatch(schema, data);
};

const rows = (b: RecordBatch): unknown[] => b.toArray().map((r) => JSON.stringify(r.toJSON(), (_, v) => (typeof v === 'bigint' ? `${v}n` : v)));

/** A struct array of one utf8 column with the given offsets (malformed where they say so). */
const utf8Batch = (offsets: number[]): RecordBatch => {
  const schema = new Schema([new Field('s', new Utf8(), false)]);
  const s = makeData({ type: new Utf8(), length: offsets.length - 1, nullCount: 0, valueOffsets: Int32Array.from(offsets), data: new TextEncoder().encode('abcdefghijklmnop') });
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: s.length, nullCount: 0, children: [s] }));
};

describe('WebGPU device arrays', { skip }, () => {
  let device: TestDevice;
  let before0: ReturnType<typeof accounting>;
  before(() => {
    device = gpu!.device;
    before0 = accounting();
  });
  after(() => {
    const a = accounting();
    assert.equal(a.liveExports, before0.liveExports, 'every export released');
    assert.equal(a.liveImports, before0.liveImports, 'every import released');
  });

  test('a batch goes to the GPU and back: types, nulls, dictionary, list; one GPUBuffer, 256-byte aligned, released once', async () => {
    const b = batch();
    const { schema, array } = exportDeviceRecordBatch(b, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    const f = readDeviceFieldsRaw(array);
    assert.equal(f.deviceType, DeviceType.WEBGPU);
    assert.equal(webgpuRegistry().device(Number(f.deviceId)), device, 'device_id names the GPUDevice in the realm registry');
    assert.notEqual(f.syncEvent, 0n, 'the upload recorded an event');
    const dev = await importDeviceArrayAsync(array, schema);
    freeArrowSchema(schema);
    freeDeviceArray(array);
    assert.equal(dev.deviceType, DeviceType.WEBGPU);
    assert.ok(dev.sizesKnown);
    const col = dev.children[1]!;
    const data = col.buffers[2]!;
    assert.ok(data.webgpu, 'a buffer names its GPUBuffer');
    assert.equal(data.webgpu.offset % 256, 0);
    assert.equal(data.size, new TextEncoder().encode(b.getChild('s')!.toArray().filter((x: unknown) => x !== null).join('')).byteLength);
    const gpuBuffers = new Set<unknown>();
    const walk = (n: typeof dev | (typeof dev.children)[number]): void => {
      for (const x of n.buffers) if (x.webgpu) gpuBuffers.add(x.webgpu.buffer);
      n.children.forEach(walk);
      if (n.dictionary) walk(n.dictionary);
    };
    walk(dev);
    assert.equal(gpuBuffers.size, 1, 'one upload per batch');
    const back = await dev.toHostRecordBatchAsync();
    assert.deepEqual(rows(back), rows(b));
    const address = data.address;
    dev.release();
    dev.release();
    assert.equal(webgpuBufferAt(address), undefined, 'the release ended the range');
  });

  test('a compute shader reads an exported column where it is (binding offset), the result comes back through toHostAsync', async () => {
    const n = 4096;
    const values = Float64Array.from({ length: n }, (_, k) => k);
    // f32 on the GPU: WGSL has no f64; the column is float32 here.
    const col = vectorFromArray(Float32Array.from(values));
    const ptr = exportDeviceArray(col.data[0]!, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    const schema = exportSchema(col.type);
    const dev = await importDeviceArrayAsync(ptr, schema);
    freeArrowSchema(schema);
    freeDeviceArray(ptr);
    const region = dev.buffers[1]!.webgpu!;
    const out = device.createBuffer({ size: n * 4, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC });
    const module = device.createShaderModule({
      code: `@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3u) { if (id.x < ${n}u) { o[id.x] = a[id.x] * 2.0 + 1.0; } }`,
    });
    const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    const group = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: region.buffer, offset: region.offset, size: n * 4 } },
        { binding: 1, resource: { buffer: out } },
      ],
    });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(n / 64);
    pass.end();
    device.queue.submit([enc.finish()]);
    // The output, as another library would hand it on: registered in the realm, a float32 ArrowDeviceArray over it.
    const reg = webgpuRegistry();
    const base = reg.register(out, device);
    const b = new Builder();
    try {
      const built = b.array({ length: n, nullCount: 0, buffers: [null, BigInt(base)] });
      const foreign = wrapDevice(b, built, { deviceType: DeviceType.WEBGPU, deviceId: reg.deviceId(device) });
      const outSchema = exportSchema(new Float32());
      const result = await importDeviceArrayAsync(foreign, outSchema, { validate: 'full' });
      freeArrowSchema(outSchema);
      assert.equal(result.buffers[1]!.webgpu!.buffer, out);
      const data = await result.toHostAsync();
      result.release();
      assert.equal(built.root.calls, 1, "the foreign producer's release ran once");
      const got = data.values as Float32Array;
      for (let k = 0; k < n; k += 511) assert.equal(got[k], k * 2 + 1);
    } finally {
      reg.unregister(base);
      out.destroy();
      dev.release();
      b.freeAll();
    }
  });

  test('validation on the device gives the host verdict: non-monotone offsets refused at full, passed at default', async () => {
    const bad = utf8Batch([0, 6, 3, 9, 12]);
    const host = (() => {
      const { schema, array } = exportDeviceRecordBatch(bad);
      try {
        importDeviceArray(array, schema, { validate: 'full' }).release();
        return 'accepted';
      } catch (e) {
        return (e as ArrowDeviceError).message;
      } finally {
        freeArrowSchema(schema);
        freeDeviceArray(array);
      }
    })();
    const { schema, array } = exportDeviceRecordBatch(bad, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    await assert.rejects(importDeviceArrayAsync(array, schema, { validate: 'full' }), (e: unknown) => {
      assert.ok(e instanceof ArrowDeviceError);
      assert.equal(e.message, host);
      assert.match(e.message, /not monotone/);
      return true;
    });
    freeArrowSchema(schema);
    freeDeviceArray(array);
    const ok = exportDeviceRecordBatch(bad, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    const dev = await importDeviceArrayAsync(ok.array, ok.schema);
    freeArrowSchema(ok.schema);
    freeDeviceArray(ok.array);
    assert.equal(dev.children[0]!.buffers[2]!.size, 12);
    dev.release();
  });

  test('the synchronous import refuses a level it would have to read for, names the asynchronous one; minimal passes it on unread', async () => {
    const b = utf8Batch([0, 3, 6]);
    const { schema, array } = exportDeviceRecordBatch(b, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    assert.throws(() => importDeviceArray(array, schema), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported' && /importDeviceArrayAsync/.test(e.message));
    freeArrowSchema(schema);
    freeDeviceArray(array);
    const again = exportDeviceRecordBatch(b, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    const dev = importDeviceArray(again.array, again.schema, { validate: 'minimal' });
    freeArrowSchema(again.schema);
    freeDeviceArray(again.array);
    assert.equal(dev.sizesKnown, false);
    assert.throws(() => dev.resolveBufferSizes(), /asynchronous/);
    assert.throws(() => dev.toHost(), /toHostAsync/);
    await dev.resolveBufferSizesAsync();
    assert.equal(dev.children[0]!.buffers[2]!.size, 6);
    assert.deepEqual((await dev.toHostRecordBatchAsync()).getChild('s')!.toArray(), ['abc', 'def']);
    dev.release();
  });

  test('an address in no GPUBuffer of the realm is refused with its place, and the producer released', async () => {
    // A CPU export relabelled as WebGPU: its buffer pointers are host addresses, unknown to the registry.
    const live = accounting().liveExports;
    const { schema, array } = exportDeviceRecordBatch(utf8Batch([0, 3, 6]));
    writeDeviceFieldsRaw(array, { deviceType: DeviceType.WEBGPU, deviceId: 0 });
    assert.ok(accounting().liveExports > live);
    await assert.rejects(importDeviceArrayAsync(array, schema), (e: unknown) => {
      assert.ok(e instanceof ArrowDeviceError);
      assert.equal(e.kind, 'invalid');
      assert.match(e.path, /^device_array\.array\.children\[0\]/);
      assert.match(e.message, /no live GPUBuffer/);
      return true;
    });
    assert.equal(accounting().liveExports, live, 'the producer was released');
    freeArrowSchema(schema);
    freeDeviceArray(array);
  });

  test('hand-on through the exchange protocol: the GPU buffers move to the next consumer without a copy', async () => {
    const b = batch();
    const { schema, array } = exportDeviceRecordBatch(b, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    const first = await importDeviceArrayAsync(array, schema);
    freeArrowSchema(schema);
    freeDeviceArray(array);
    const buffer = first.children[0]!.buffers[1]!.webgpu!.buffer;
    const second = await importDeviceArrayAsync(first);
    assert.ok(first.released, 'the first handle is moved');
    assert.equal(second.children[0]!.buffers[1]!.webgpu!.buffer, buffer, 'the same GPUBuffer');
    const h = second[ArrowSymbols.deviceArray]();
    const third = await importDeviceArrayAsync({ [ArrowSymbols.schema]: () => h.schema, [ArrowSymbols.deviceArray]: () => h } as never);
    assert.deepEqual(rows(await third.toHostRecordBatchAsync()), rows(b));
    third.release();
    assert.ok(h.array instanceof ExportHandle);
  });

  test('an export refuses what it cannot do, with its place', () => {
    const b = utf8Batch([0, 1]);
    assert.throws(() => exportDeviceArray(b, { deviceType: DeviceType.WEBGPU }), (e: unknown) => e instanceof ArrowDeviceError && e.path === 'options.gpuDevice');
    assert.throws(() => exportDeviceArray(b, { deviceType: DeviceType.WEBGPU, gpuDevice: device, deviceId: 3 }), (e: unknown) => e instanceof ArrowDeviceError && e.path === 'options.deviceId');
  });

  test('the registry is the realm\'s: one object, addresses resolve to their buffer and offset, ends free the range', () => {
    const reg = webgpuRegistry();
    assert.equal((globalThis as Record<symbol, unknown>)[Symbol.for('arrow.webgpu')], reg);
    const a = device.createBuffer({ size: 1000, usage: BufferUsage.STORAGE });
    const c = device.createBuffer({ size: 10, usage: BufferUsage.STORAGE });
    const ba = reg.register(a, device);
    const bc = reg.register(c, device);
    assert.equal(ba % 256, 0);
    assert.ok(bc >= ba + 1000);
    assert.deepEqual({ ...reg.resolve(ba + 999)!, buffer: null, device: null }, { buffer: null, device: null, base: ba, offset: 999 });
    assert.equal(reg.resolve(ba + 999)!.buffer, a);
    assert.equal(reg.resolve(bc + 10), undefined);
    reg.unregister(ba);
    assert.equal(reg.resolve(ba), undefined);
    assert.equal(reg.resolve(bc)!.buffer, c);
    reg.unregister(bc);
    a.destroy();
    c.destroy();
  });

  /** `n` batches of utf8 (so that a level reads offsets from the GPU), each uploaded and imported as a DeviceArray. */
  const gpuBatches = async (n: number): Promise<{ host: RecordBatch[]; devs: DeviceArray[] }> => {
    const host: RecordBatch[] = [];
    const devs: DeviceArray[] = [];
    for (let k = 0; k < n; k++) {
      const b = utf8Batch([0, k + 1, 2 * k + 3]);
      host.push(b);
      const { schema, array } = exportDeviceRecordBatch(b, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
      devs.push(await importDeviceArrayAsync(array, schema));
      freeArrowSchema(schema);
      freeDeviceArray(array);
    }
    return { host, devs };
  };

  test('a device stream carries WebGPU arrays: for await checks each on the GPU; toHost copies back; next() refuses to read', async () => {
    const { host, devs } = await gpuBatches(3);
    const ptr = exportDeviceArrayStream(devs, { schema: host[0]!.schema });
    assert.ok(devs.every((d) => !d.released), 'moved out only as the stream is read');
    const reader = importDeviceArrayStream(ptr);
    assert.equal(reader.deviceType, DeviceType.WEBGPU);
    const got: string[] = [];
    for await (const item of reader) {
      assert.ok(item instanceof DeviceArray && item.sizesKnown, 'a DeviceArray whose level was checked on the GPU');
      got.push(...((await item.toHostRecordBatchAsync()).getChild('s')!.toArray() as string[]));
    }
    assert.deepEqual(got, host.flatMap((b) => b.getChild('s')!.toArray() as string[]));
    freeArrowArrayStream(ptr);

    const again = await gpuBatches(2);
    const p2 = exportDeviceArrayStream(again.devs, { schema: again.host[0]!.schema });
    const copies = await importDeviceArrayStream(p2, { toHost: true }).readAllAsync();
    assert.deepEqual(copies.flatMap((b) => (b as RecordBatch).getChild('s')!.toArray() as string[]), again.host.flatMap((b) => b.getChild('s')!.toArray() as string[]));
    for (const c of copies) (c as { release?: () => void }).release?.();
    freeArrowArrayStream(p2);

    const third = await gpuBatches(1);
    const p3 = exportDeviceArrayStream(third.devs, { schema: third.host[0]!.schema });
    const r3 = importDeviceArrayStream(p3);
    assert.throws(() => r3.next(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported' && /asynchronous/.test(e.message));
    r3.release();
    freeArrowArrayStream(p3);
  });

  test('the async reader carries WebGPU arrays as it carries CUDA\'s: each checked on the GPU before it is handed out', async () => {
    const { host, devs } = await gpuBatches(4);
    const reader = createAsyncDeviceStreamReader({ toHost: true });
    const producing = produceAsyncDeviceStream(devs, reader.handler, { schema: host[0]!.schema, deviceType: DeviceType.WEBGPU });
    const got: string[] = [];
    for await (const b of reader) got.push(...((b as RecordBatch).getChild('s')!.toArray() as string[]));
    const r = await producing;
    assert.equal(r.end, 'complete');
    assert.deepEqual(got, host.flatMap((b) => b.getChild('s')!.toArray() as string[]));
  });

  test('sizes and checks are one readback each per array; each GPUBuffer is destroyed exactly when its array is released', async () => {
    // Counts what the library asks of the device: staging buffers (one per readback) and destroys.
    let stagings = 0;
    const destroyed = new Map<unknown, number>();
    // Every member the library uses, bound to the real device (Dawn's methods refuse another receiver).
    const counting: TestDevice = Object.create(device, {
      queue: { value: device.queue },
      limits: { value: device.limits },
      createCommandEncoder: { value: () => device.createCommandEncoder() },
      createBuffer: {
        value: (d: Parameters<TestDevice['createBuffer']>[0]) => {
          const b = device.createBuffer(d);
          if ((d.usage & BufferUsage.MAP_READ) !== 0) stagings++;
          const destroy = b.destroy.bind(b);
          Object.defineProperty(b, 'destroy', { value: () => (destroyed.set(b, (destroyed.get(b) ?? 0) + 1), destroy()) });
          return b;
        },
      },
    }) as TestDevice;
    const b = batch();
    for (const [validate, reads] of [['minimal', 0], ['default', 1], ['full', 2]] as const) {
      const { schema, array } = exportDeviceRecordBatch(b, { deviceType: DeviceType.WEBGPU, gpuDevice: counting });
      const before = stagings;
      const dev = await importDeviceArrayAsync(array, schema, { validate });
      freeArrowSchema(schema);
      freeDeviceArray(array);
      assert.equal(stagings - before, reads, `${validate}: ${reads} readbacks for a batch of 5 columns, 3 of them variable-length`);
      const gpuBuffer = dev.children[0]!.buffers[1]!.webgpu!.buffer;
      const staged = [...destroyed.keys()].filter((x) => x !== gpuBuffer);
      assert.ok(staged.every((x) => destroyed.get(x) === 1), 'every staging buffer destroyed once');
      assert.equal(destroyed.get(gpuBuffer), undefined, 'the data stays while the array lives');
      const moved = await importDeviceArrayAsync(dev);
      assert.equal(destroyed.get(gpuBuffer), undefined, 'a hand-on destroys nothing');
      moved.release();
      assert.equal(destroyed.get(gpuBuffer), 1, 'destroyed by the release');
      moved.release();
      dev.release();
      assert.equal(destroyed.get(gpuBuffer), 1, 'and only once');
    }
  });

  test('the tail of a GPUBuffer whose size is not a multiple of 4 cannot be copied out: refused, not a WebGPU validation error', async () => {
    const reg = webgpuRegistry();
    const odd = device.createBuffer({ size: 10, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC });
    const base = reg.register(odd, device);
    const b = new Builder();
    try {
      const built = b.array({ length: 10, nullCount: 0, buffers: [null, BigInt(base)] });
      const ptr = wrapDevice(b, built, { deviceType: DeviceType.WEBGPU, deviceId: reg.deviceId(device) });
      const schema = exportSchema(new Int8());
      const dev = await importDeviceArrayAsync(ptr, schema);
      freeArrowSchema(schema);
      await assert.rejects(dev.toHostAsync(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported' && /not a multiple of 4/.test(e.message));
      dev.release();
      assert.equal(built.root.calls, 1);
    } finally {
      reg.unregister(base);
      odd.destroy();
      b.freeAll();
    }
  });

  test('DeviceArray of WebGPU is a DeviceArray', async () => {
    const { schema, array } = exportDeviceRecordBatch(utf8Batch([0, 2]), { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    const dev = await importDeviceArrayAsync(array, schema);
    freeArrowSchema(schema);
    freeDeviceArray(array);
    assert.ok(dev instanceof DeviceArray);
    assert.equal(dev.deviceTypeName, 'WEBGPU');
    assert.equal(dev.hostReadable, false);
    dev.release();
  });
});
