/**
 * Every error of a device conversion names its place (issue 18: 38 fuzz
 * cases said "invalid address 0x8 (8 bytes)" with an empty path). Each
 * buffer of a few shapes in turn is given the address 0x8 (the NULL page,
 * which no process maps), and every operation that reads device bytes is
 * run on it: each either succeeds (it does not read that buffer) or throws
 * an ArrowDeviceError whose path is exactly that buffer's place. A CUDA
 * array where no CUDA runtime loads is refused at the device array.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { tableFromArrays } from 'apache-arrow';
import {
  ArrowDeviceError, DeviceType, exportDeviceArray, importDeviceArray, importDeviceArrayView, importDeviceData, importDeviceRecordBatch,
  wasmMemory, type DeviceArray,
} from '../../src/index.js';
import { cudaAvailable } from '../../src/device/cuda.js';
import type { ADesc, Case, SDesc } from './cases.js';
import { layOut, producerLib, producerMissing } from './producer.js';

const skip = producerMissing ?? false;
const b64 = (a: ArrayBufferView): string => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');
const S = (format: string, children: SDesc[] = [], extra: Partial<SDesc> = {}): SDesc => ({
  format, name: 'f', flags: '2', metadata: null, children, dictionary: null, ...extra,
});
const A = (length: number, buffers: (ArrayBufferView | null)[], children: ADesc[] = [], extra: Partial<ADesc> = {}): ADesc => ({
  length: String(length), offset: '0', nullCount: '0', buffers: buffers.map((b) => (b ? b64(b) : null)), children, dictionary: null, ...extra,
});
const enc = new TextEncoder();
const DEVICE = { type: DeviceType.CPU, id: '-1', syncEvent: '0', reserved: false };
let ids = 1;

/** Shapes whose every buffer is read by a host copy: a struct batch of int32, utf8 (with nulls), a list, a utf8 view and a dictionary. */
function shape(): { schema: SDesc; array: ADesc } {
  const views = new Uint8Array(32);
  const dv = new DataView(views.buffer);
  dv.setInt32(0, 2, true);
  views.set(enc.encode('hi'), 4);
  dv.setInt32(16, 14, true);
  views.set(enc.encode('abcd'), 20);
  dv.setInt32(24, 0, true);
  dv.setInt32(28, 0, true);
  return {
    schema: S('+s', [
      S('i'),
      S('u'),
      S('+l', [S('s', [], { name: 'item' })]),
      S('vu'),
      S('c', [], { dictionary: S('u') }),
    ], { name: '', flags: '0' }),
    array: A(2, [null], [
      A(2, [null, new Int32Array([1, 2])]),
      A(2, [new Uint8Array([1]), new Int32Array([0, 1, 3]), enc.encode('abc')], [], { nullCount: '1' }),
      A(2, [null, new Int32Array([0, 1, 2])], [A(2, [null, new Int16Array([7, 8])])]),
      A(2, [null, views, enc.encode('abcdefghijklmnop'), new BigInt64Array([16n])]),
      A(2, [null, new Int8Array([1, 0])], [], { dictionary: A(2, [null, new Int32Array([0, 1, 2]), enc.encode('xy')]) }),
    ]),
  };
}

/** Every (place, description) of a buffer in the tree, depth first. */
function places(a: ADesc, path: string, out: { path: string; node: ADesc; index: number }[] = []): typeof out {
  a.buffers.forEach((b, i) => {
    if (b !== null) out.push({ path: `${path}.buffers[${i}]`, node: a, index: i });
  });
  a.children.forEach((c, k) => places(c, `${path}.children[${k}]`, out));
  if (a.dictionary) places(a.dictionary, `${path}.dictionary`, out);
  return out;
}

/** The operations that read device bytes, each on a fresh import of `c`. */
const OPS: [name: string, run: (c: Case) => unknown][] = [
  ['resolveBufferSizes', (c) => withDevice(c, (d) => d.resolveBufferSizes())],
  ['toHostView', (c) => withDevice(c, (d) => d.toHostView())],
  ['toHostView full', (c) => withDevice(c, (d) => d.toHostView({ validate: 'full' }))],
  ['toHost', (c) => withDevice(c, (d) => d.toHost())],
  ['toHostRecordBatch', (c) => withDevice(c, (d) => d.toHostRecordBatch())],
  ['copyTo(CPU)', (c) => withDevice(c, (d) => d.copyTo({ deviceType: DeviceType.CPU }).release())],
  ['importDeviceData', (c) => { const l = lay(c); return importDeviceData(l.arrays[0]!, l.schema, { toHost: true }); }],
  ['importDeviceRecordBatch full', (c) => { const l = lay(c); return importDeviceRecordBatch(l.arrays[0]!, l.schema, { toHost: true, validate: 'full' }); }],
  ['importDeviceArrayView copy', (c) => { const l = lay(c); return importDeviceArrayView(l.arrays[0]!, l.schema, { copy: true }); }],
];

function lay(c: Case) {
  const l = layOut(c, ids);
  ids += l.ids.length;
  return l;
}

function withDevice(c: Case, fn: (d: DeviceArray) => unknown): unknown {
  const l = lay(c);
  const d = importDeviceArray(l.arrays[0]!, l.schema);
  try {
    return fn(d);
  } finally {
    d.release();
  }
}

describe('device conversions name the place of every bad address', { skip }, () => {
  const { schema, array } = shape();
  for (const [name, run] of OPS) {
    test(`${name}: a buffer at 0x8 fails with that buffer's place, or is not read`, () => {
      const root = 'device_array.array';
      let refused = 0;
      for (const p of places(array, root)) {
        const arr = structuredClone(array);
        // The same node in the clone: walk the path from the root.
        const node = p.path.slice(root.length).split('.').filter((s) => s.startsWith('children') || s === 'dictionary').reduce<ADesc>((n, s) => {
          const m = /^children\[(\d+)\]$/.exec(s);
          return m ? n.children[Number(m[1])]! : n.dictionary!;
        }, arr);
        node.rawBuffer = { index: p.index, addr: '8' };
        const c: Case = { origin: 'places.test.ts', mutations: [], driver: 'deviceArray', level: 'default', expand: false, copy: false, schema, arrays: [arr], device: DEVICE };
        try {
          run(c);
        } catch (e) {
          assert.ok(e instanceof ArrowDeviceError, `${p.path}: ${String(e)}`);
          assert.equal(e.path, p.path, `${name} with ${p.path} at 0x8: ${e.message}`);
          assert.match(e.detail, /NULL pointer|invalid address 0x8/);
          refused++;
        }
      }
      // A host copy reads every buffer; resolving sizes reads only the offsets and variadic sizes it needs.
      assert.ok(refused > 0, 'some buffer was read');
    });
  }

  test('an export to CUDA memory that cannot be made names the option that asked for it', { skip: cudaAvailable().ok ? 'a CUDA runtime is here' : false }, () => {
    const memory = new WebAssembly.Memory({ initial: 1 });
    let top = 1024;
    const wm = wasmMemory({ memory, malloc: (n, a) => { top = Math.ceil(top / a) * a; top += n; return top - n; }, free: () => {}, table: new WebAssembly.Table({ initial: 1, element: 'anyfunc' }) });
    const batch = tableFromArrays({ x: Int32Array.of(1, 2) }).batches[0]!;
    for (const [what, opts] of [['native', {}], ['wasm', { memory: wm }]] as const) {
      assert.throws(() => exportDeviceArray(batch, { deviceType: DeviceType.CUDA, ...opts }), (e: unknown) => {
        assert.ok(e instanceof ArrowDeviceError, `${what}: ${String(e)}`);
        assert.equal(e.path, 'options.deviceType', `${what}: ${e.message}`);
        return true;
      });
    }
  });

  test('a CUDA array where no CUDA runtime loads is refused at the device array, and released', { skip: cudaAvailable().ok ? 'a CUDA runtime is here' : false }, () => {
    const c: Case = {
      origin: 'places.test.ts', mutations: [], driver: 'deviceData', level: 'default', expand: false, copy: false,
      schema: S('i'), arrays: [A(2, [null, new Int32Array([1, 2])])], device: { type: DeviceType.CUDA, id: '0', syncEvent: '0', reserved: false },
    };
    for (let k = 0; k < 2; k++) {
      // Twice: the cached load failure must not carry the first call's place into the second.
      const l = lay(c);
      assert.throws(() => importDeviceData(l.arrays[0]!, l.schema, { toHost: true }), (e: unknown) => {
        assert.ok(e instanceof ArrowDeviceError);
        assert.equal(e.kind, 'unsupported');
        assert.equal(e.path, 'device_array');
        assert.match(e.detail, /no CUDA runtime|CUDA runtime named by ARROW_DEVICE_CUDART/);
        return true;
      });
      assert.equal(producerLib().count(l.arrayIds[0]!), 1, 'the array is released at once');
      assert.equal(producerLib().count(l.schemaId!), 1, 'and the schema');
    }
  });
});
