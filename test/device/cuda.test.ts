/**
 * CUDA device arrays, against a real GPU when a CUDA runtime that sees one
 * is found, else against the simulated CUDA runtime
 * (test/device/cuda/sim/simcudart.c: device memory the host cannot read,
 * asynchronous streams, events, CUDA's error codes). Either way every test
 * here runs; the first line printed says which CUDA it was.
 *
 * - Without CUDA: the runtime is pointed at a library that does not exist
 *   (ARROW_DEVICE_CUDART), so absent CUDA is a clear `unsupported` error
 *   when used, never at load; CUDA arrays still import as `DeviceArray`s
 *   that can be inspected, passed on and released; and host-readable kinds
 *   with no event import zero-copy without CUDA at all.
 * - With CUDA: JS -> CUDA -> host round trips of the gold files, events on
 *   a named stream, CUDA_HOST and CUDA_MANAGED zero-copy, copies between
 *   kinds and devices, the two-batch copy, CUDA's errors as typed errors,
 *   and the C peer (test/device/cuda/peer.cu built by
 *   test/device/cuda/run-gpu.sh on a GPU; its C twin
 *   test/device/cuda/sim/peer.c on the simulator) in both directions.
 *   On the simulator, every test ends with no live allocation, event or
 *   queued op (and no stream but the suite's own).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, afterEach, describe, test } from 'node:test';
import {
  Field, Float64, Int32, Int64, RecordBatch, Schema, Struct, Table, tableFromArrays, tableFromIPC, Type, Utf8, vectorFromArray, type Vector,
} from 'apache-arrow';
import { DeviceType } from '../../src/abi/constants.js';
import { allocArrowSchema, freeArrowSchema } from '../../src/array/api.js';
import { cudaBackend, setDeviceBackend } from '../../src/device/backend.js';
import { CudaError, resetCudaRuntimeForTests } from '../../src/device/cuda.js';
import { exportDeviceArrayStream, freeArrowDeviceArrayStream, importDeviceArrayStream } from '../../src/stream/index.js';
import {
  allocDeviceArray, cudaRuntime, DeviceArray, exportDeviceArray, exportDeviceRecordBatch, freeDeviceArray, importDeviceArray,
  importDeviceData, importDeviceRecordBatch,
} from '../../src/device/index.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { accounting, nativeMemory } from '../../src/memory/index.js';
import { importShared, share } from '../../src/share/index.js';
import { koffi } from '../../src/memory/native.js';
import { diffCases, load } from '../../tools/conformance-lib.js';
import { Builder, releaseCount } from '../cdata/malformed/builder.js';
import { columnValues, diffTables } from '../helpers/compare.js';
import { collectUntil } from '../helpers/gc.js';
import { ARROW_JS_UNREADABLE, GOLD, goldFiles } from '../helpers/gold.js';
import { setupCuda, simControl } from './cuda/sim/sim.js';
import { readDeviceFieldsRaw, wrapDevice } from './helpers.js';

const mem = nativeMemory();
const cuda = setupCuda();
console.log(`# CUDA tests run against ${cuda.describe}`);
// CI sets ARROW_DEVICE_CUDA_REQUIRED=1: there a missing simulator (no C compiler) is a failure, not a skip.
if (cuda.mode === 'none' && process.env.ARROW_DEVICE_CUDA_REQUIRED === '1') throw new Error(`ARROW_DEVICE_CUDA_REQUIRED=1: ${cuda.describe}`);
const NO_CUDA = cuda.mode === 'none' ? cuda.describe : false;
const sim = cuda.mode === 'sim' ? simControl(process.env.ARROW_DEVICE_CUDART!) : undefined;

/**
 * Runs `fn` with the simulator's copies, memsets and kernels slowed to
 * `us` each (a no-op on a real GPU), so that work `fn` queues is still
 * running when the next step starts: a consumer that skips the event then
 * reads old bytes instead of passing by luck.
 */
function slowly<T>(fn: () => T, us = 20_000): T {
  if (!sim) return fn();
  const prev = sim.setDelayUs(us);
  try {
    return fn();
  } finally {
    sim.setDelayUs(prev);
  }
}

async function settle(): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
}

/**
 * Runs `fn` as on a machine without CUDA: the runtime is looked for at a
 * path that does not exist. The CUDA of the run (real or simulated) is
 * loaded again afterwards.
 */
function withoutCuda<T>(fn: () => T): T {
  const saved = process.env.ARROW_DEVICE_CUDART;
  process.env.ARROW_DEVICE_CUDART = '/nonexistent/libcudart.so.99';
  resetCudaRuntimeForTests();
  try {
    return fn();
  } finally {
    if (saved === undefined) delete process.env.ARROW_DEVICE_CUDART;
    else process.env.ARROW_DEVICE_CUDART = saved;
    resetCudaRuntimeForTests();
  }
}

const int32Batch = (): RecordBatch => new Table({ x: vectorFromArray([1, 2, null, 4], new Int32()) }).batches[0]!;

describe('CUDA device arrays without CUDA', () => {
  test('a missing runtime is an unsupported error naming what was tried, and ARROW_DEVICE_CUDART overrides the search', () => {
    withoutCuda(() => {
      assert.throws(() => cudaRuntime(), (e: unknown) => {
        assert.ok(e instanceof ArrowDeviceError);
        assert.equal(e.kind, 'unsupported');
        assert.equal(e.code, 'ENOSYS');
        assert.match(e.message, /^the CUDA runtime named by ARROW_DEVICE_CUDART failed to load: \/nonexistent\/libcudart\.so\.99$/);
        return true;
      });
    });
    // Without the override the search runs: here it finds no runtime unless a real one is installed.
    const saved = process.env.ARROW_DEVICE_CUDART;
    delete process.env.ARROW_DEVICE_CUDART;
    resetCudaRuntimeForTests();
    try {
      if (cuda.mode === 'gpu' && saved === undefined) assert.doesNotThrow(() => cudaRuntime());
      else if (cuda.mode === 'sim' && process.env.ARROW_DEVICE_CUDA_SIM !== '1') {
        assert.throws(() => cudaRuntime(), /no CUDA runtime \(libcudart\) found; set ARROW_DEVICE_CUDART/);
      }
    } finally {
      if (saved !== undefined) process.env.ARROW_DEVICE_CUDART = saved;
      resetCudaRuntimeForTests();
    }
  });

  test('a CUDA array imports as a DeviceArray, copying it is an unsupported error, and release runs once', () => withoutCuda(() => {
    const b = new Builder();
    try {
      const built = b.array({ length: 2, buffers: [null, 0x1000n] });
      const ptr = wrapDevice(b, built, { deviceType: DeviceType.CUDA, deviceId: 0, syncEvent: 0x2000n });
      const dev = importDeviceArray(ptr, new Int32());
      assert.equal(dev.deviceTypeName, 'CUDA');
      assert.deepEqual(dev.buffers[1], { address: 0x1000n, size: 8 });
      assert.throws(() => dev.toHost(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported' && /libcudart/.test(e.message));
      assert.equal(dev.released, false);
      dev.release();
      assert.equal(releaseCount(built.root.id), 1);
    } finally {
      b.freeAll();
    }
  }));

  test('CUDA_HOST and CUDA_MANAGED memory with an event need CUDA to wait: unsupported, released once', () => withoutCuda(() => {
    const b = new Builder();
    try {
      for (const t of [DeviceType.CUDA_HOST, DeviceType.CUDA_MANAGED]) {
        const built = b.array({ length: 2, buffers: [null, new Int32Array([5, 6])] });
        const ptr = wrapDevice(b, built, { deviceType: t, deviceId: 0, syncEvent: 0x2000n });
        assert.throws(() => importDeviceData(ptr, new Int32()), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported');
        assert.equal(releaseCount(built.root.id), 1);
      }
    } finally {
      b.freeAll();
    }
  }));

  test('CUDA_HOST and CUDA_MANAGED memory without an event import zero-copy, no CUDA needed', async () => {
    const b = new Builder();
    for (const t of [DeviceType.CUDA_HOST, DeviceType.CUDA_MANAGED]) {
      const built = b.array({ length: 2, buffers: [null, new Int32Array([5, 6])] });
      const ptr = wrapDevice(b, built, { deviceType: t, deviceId: 0 });
      withoutCuda(() => {
        const data = importDeviceData(ptr, new Int32());
        assert.ok(!(data instanceof DeviceArray));
        assert.deepEqual([...(data.values as Int32Array)], [5, 6]);
      });
      assert.ok(await collectUntil(() => releaseCount(built.root.id) === 1));
    }
    b.freeAll();
  });

  test('an export to CUDA memory is an unsupported error and leaves nothing behind', () => withoutCuda(() => {
    const before = accounting();
    for (const t of [DeviceType.CUDA, DeviceType.CUDA_HOST, DeviceType.CUDA_MANAGED]) {
      assert.throws(() => exportDeviceArray(int32Batch(), { deviceType: t }), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported');
      const into = allocDeviceArray();
      assert.throws(() => exportDeviceArray(int32Batch(), { deviceType: t, into }), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported');
      assert.deepEqual(readDeviceFieldsRaw(into), { deviceType: 0, deviceId: 0n, syncEvent: 0n, reserved: [0n, 0n, 0n], padding: 0 });
      freeDeviceArray(into);
    }
    assert.equal(accounting().liveExports, before.liveExports);
  }));
});

// --- with CUDA ----------------------------------------------------------------------------

/** The values peer.cu writes (and checks), row k of n. */
function expectedBatch(n: number): RecordBatch {
  const str = (k: number): string => Array.from({ length: k % 7 }, (_, j) => String.fromCharCode(97 + ((k + j) % 26))).join('');
  const ks = Array.from({ length: n }, (_, k) => k);
  const stType = new Struct([new Field('a', new Int64(), true), new Field('b', new Float64(), true)]);
  return new Table({
    i: vectorFromArray(ks.map((k) => (k % 5 === 0 ? null : k * 3 - 7)), new Int32()),
    s: vectorFromArray(ks.map((k) => (k % 11 === 0 ? null : str(k))), new Utf8()),
    st: vectorFromArray(ks.map((k) => (k % 13 === 0 ? null : { a: BigInt(k * k - 1000), b: k * 0.25 })), stType) as Vector,
  }).batches[0]!;
}

interface Peer {
  exportBatch(n: number, deviceType: number, schema: bigint, out: bigint): number;
  check(n: number, array: bigint): bigint;
  liveExports(): bigint;
  lastError(): string;
}

function loadPeer(): Peer | string {
  if (cuda.mode === 'none') return 'no CUDA';
  const path = cuda.peer;
  if (path === undefined) return 'the CUDA C peer is not built (test/device/cuda/build/libpeer.so); run test/device/cuda/run-gpu.sh';
  const lib = koffi().load(path);
  const exp = lib.func('int peer_export(int64_t n, int32_t device_type, uintptr_t schema, uintptr_t out)');
  const chk = lib.func('int64_t peer_check(int64_t n, uintptr_t array)');
  const live = lib.func('int64_t peer_live_exports(void)');
  const err = lib.func('const char *peer_last_error(void)');
  return {
    exportBatch: (n, t, s, o) => exp(n, t, s, o) as number,
    check: (n, a) => BigInt(chk(n, a) as number | bigint),
    liveExports: () => BigInt(live() as number | bigint),
    lastError: () => String(err()),
  };
}

describe('CUDA device arrays', { skip: NO_CUDA }, () => {
  const rt = cuda.mode !== 'none' ? cuda.runtime : undefined;
  const devices = cuda.mode !== 'none' ? cuda.devices : 0;
  const stream = rt ? rt.streamCreate() : 0n;
  after(() => {
    if (rt && stream) rt.streamDestroy(stream);
    cudaRuntime().releaseCached();
    if (sim) assert.deepEqual(sim.live(), { allocations: 0, streams: 0, events: 0, pendingOps: 0 }, 'no live CUDA object at the end');
  });
  // Every test leaves no CUDA object behind but the suite's stream (the runtime's own cached ones are let go first).
  afterEach(async () => {
    await settle();
    cudaRuntime().releaseCached();
    if (sim) assert.deepEqual(sim.live(), { allocations: 0, streams: 1, events: 0, pendingOps: 0 }, 'live CUDA objects after the test');
  });

  for (const f of goldFiles) {
    const name = f.replace('.arrow_file', '');
    if (ARROW_JS_UNREADABLE.has(f)) {
      // arrow-js cannot read these: the case comes from the integration JSON, as the conformance runner reads it.
      test(`round trips ${name} (integration JSON) -> CUDA -> host`, async () => {
        (() => {
          const c = load([new URL(`${name}.json.gz`, GOLD).pathname]);
          const back = c.batches.map((view) => {
            const array = exportDeviceArray(view, { deviceType: DeviceType.CUDA, deviceId: 0 });
            const dev = importDeviceArray(array, c.schema);
            const host = dev.toHostView({ validate: 'full' });
            dev.release();
            freeDeviceArray(array);
            return host;
          });
          assert.ok(c.batches.length > 0);
          assert.equal(diffCases(c, { schema: c.schema, batches: back }, true), undefined);
        })();
        await settle();
      });
      continue;
    }
    test(`round trips ${name} JS -> CUDA -> host`, async () => {
      (() => {
        const table = tableFromIPC(readFileSync(new URL(f, GOLD)));
        const back: RecordBatch[] = [];
        for (const batch of table.batches) {
          const { schema, array } = exportDeviceRecordBatch(batch, { deviceType: DeviceType.CUDA, deviceId: 0 });
          const fields = readDeviceFieldsRaw(array);
          assert.deepEqual(fields, { deviceType: DeviceType.CUDA, deviceId: 0n, syncEvent: 0n, reserved: [0n, 0n, 0n], padding: 0 });
          const dev = importDeviceRecordBatch(array, schema);
          assert.ok(dev instanceof DeviceArray);
          back.push(dev.toHostRecordBatch({ validate: 'full' }));
          dev.release();
          freeDeviceArray(array);
          freeArrowSchema(schema);
        }
        assert.equal(diffTables(table, back.length ? new Table(back) : new Table(table.schema)), undefined);
      })();
      await settle();
    });
  }

  test('zero rows of every gold type JS -> CUDA -> host: a sliced batch, and the batch of empty Vectors arrow-js makes of empty columns', async () => {
    (() => {
      let n = 0;
      for (const f of goldFiles) {
        if (ARROW_JS_UNREADABLE.has(f)) continue;
        const table = tableFromIPC(readFileSync(new URL(f, GOLD)));
        const names = table.schema.fields.map((x) => x.name);
        // `new Table({ name: vector })` is keyed by name: only where the names are unique (src/array/arrowjs.ts, childData).
        const forms = [table.slice(0, 0), ...(new Set(names).size === names.length ? [new Table(Object.fromEntries(names.map((k, i) => [k, table.getChildAt(i)!.slice(0, 0)])))] : [])];
        for (const t of forms) {
          for (const batch of t.batches) {
            const { schema, array } = exportDeviceRecordBatch(batch, { deviceType: DeviceType.CUDA, deviceId: 0 });
            const dev = importDeviceRecordBatch(array, schema);
            assert.ok(dev instanceof DeviceArray, f);
            const host = dev.toHostRecordBatch({ validate: 'full' });
            dev.release();
            freeDeviceArray(array);
            freeArrowSchema(schema);
            assert.equal(host.numRows, 0, f);
            assert.equal(diffTables(new Table([batch]), new Table([host])), undefined, f);
            n++;
          }
        }
      }
      assert.ok(n > goldFiles.length, `${n} zero-row batches`);
    })();
    await settle();
  });

  test('an export on a named stream records an event there and exports it as sync_event', async () => {
    (() => {
      const batch = expectedBatch(1000);
      const p = exportDeviceArray(batch, { deviceType: DeviceType.CUDA, deviceId: 0, stream });
      const f = readDeviceFieldsRaw(p);
      assert.notEqual(f.syncEvent, 0n, 'a cudaEvent_t* is exported');
      assert.notEqual(mem.readPtr(f.syncEvent), 0n, 'pointing at an event');
      const dev = importDeviceRecordBatch(p, batch.schema, { stream });
      assert.ok(dev instanceof DeviceArray);
      assert.equal(dev.syncEvent, f.syncEvent);
      assert.equal(diffTables(new Table([batch]), new Table([dev.toHostRecordBatch({ stream })])), undefined);
      dev.release(); // destroys the event and frees the device memory
      freeDeviceArray(p);
    })();
    await settle();
  });

  for (const [name, t] of [['CUDA_HOST', DeviceType.CUDA_HOST], ['CUDA_MANAGED', DeviceType.CUDA_MANAGED]] as const) {
    test(`${name} memory imports zero-copy as arrow-js after the event`, async () => {
      (() => {
        const batch = expectedBatch(500);
        const p = exportDeviceArray(batch, { deviceType: t, deviceId: 0, stream });
        assert.notEqual(readDeviceFieldsRaw(p).syncEvent, 0n);
        const b = importDeviceRecordBatch(p, batch.schema);
        assert.ok(b instanceof RecordBatch, 'zero-copy, not a DeviceArray');
        assert.equal(diffTables(new Table([batch]), new Table([b])), undefined);
        freeDeviceArray(p);
      })();
      await settle();
    });
  }

  test('share: CUDA_HOST and CUDA_MANAGED batches import zero-copy after the event, a CUDA array as a DeviceArray', async () => {
    (() => {
      for (const t of [DeviceType.CUDA_HOST, DeviceType.CUDA_MANAGED, DeviceType.CUDA]) {
        const batch = expectedBatch(200);
        const p = exportDeviceArray(batch, { deviceType: t, deviceId: 0, stream });
        if (t === DeviceType.CUDA) {
          const dev = importDeviceArray(p, batch.schema);
          const back = importShared(share(dev));
          assert.ok(back instanceof DeviceArray);
          dev.release();
          assert.equal(diffTables(new Table([batch]), new Table([back.toHostRecordBatch()])), undefined);
          back.release();
        } else {
          const b = importDeviceRecordBatch(p, batch.schema) as RecordBatch & { release(): void };
          const back = importShared(share(b as never)) as unknown as RecordBatch & { release(): void };
          b.release();
          assert.equal(diffTables(new Table([batch]), new Table([back])), undefined);
          back.release();
        }
        freeDeviceArray(p);
      }
      assert.equal(accounting().processSharedEntries, 0);
    })();
    await settle();
  });

  test('copies between CUDA kinds and to the CPU keep every value', async () => {
    (() => {
      const batch = expectedBatch(300);
      const p = exportDeviceArray(batch, { deviceType: DeviceType.CUDA, deviceId: 0 });
      const dev = importDeviceArray(p, batch.schema);
      freeDeviceArray(p);
      const targets = [
        { deviceType: DeviceType.CUDA, deviceId: Math.min(1, devices - 1) },
        { deviceType: DeviceType.CUDA_MANAGED, deviceId: 0 },
        { deviceType: DeviceType.CUDA_HOST, deviceId: 0 },
        { deviceType: DeviceType.CPU },
      ];
      for (const target of targets) {
        const copy = dev.copyTo(target, { stream });
        assert.equal(copy.deviceType, target.deviceType);
        assert.equal(copy.syncEvent, 0n, 'a copy is complete when copyTo returns');
        assert.equal(diffTables(new Table([batch]), new Table([copy.toHostRecordBatch()])), undefined);
        copy.release();
      }
      dev.release();
    })();
    await settle();
  });

  test('copies a dictionary-encoded column between CUDA kinds (the dictionary is one node however often it is read)', async () => {
    (() => {
      const batch = tableFromArrays({ s: ['a', 'b', 'a', null, 'c'] }).batches[0]!;
      assert.equal(batch.schema.fields[0]!.type.typeId, Type.Dictionary);
      const p = exportDeviceArray(batch, { deviceType: DeviceType.CUDA, deviceId: 0 });
      const dev = importDeviceArray(p, batch.schema);
      freeDeviceArray(p);
      assert.equal(dev.children[0]!.dictionary, dev.children[0]!.dictionary);
      for (const deviceType of [DeviceType.CUDA_HOST, DeviceType.CUDA_MANAGED, DeviceType.CPU]) {
        const copy = dev.copyTo({ deviceType, deviceId: 0 });
        assert.deepEqual(copy.toHostRecordBatch().getChild('s')!.toArray(), ['a', 'b', 'a', null, 'c']);
        copy.release();
      }
      dev.release();
    })();
    await settle();
  });

  test('a copy to the host reads the sizes in one batch, then the buffers in one more', () => {
    const calls: boolean[] = [];
    const prev = setDeviceBackend(DeviceType.CUDA, {
      ...cudaBackend,
      readBatch: (ctx, ranges, small) => {
        calls.push(small);
        cudaBackend.readBatch(ctx, ranges, small);
      },
    });
    try {
      const batch = expectedBatch(100);
      const p = exportDeviceArray(batch, { deviceType: DeviceType.CUDA });
      const dev = importDeviceArray(p, batch.schema);
      freeDeviceArray(p);
      dev.toHost();
      dev.release();
      assert.deepEqual(calls, [true, false]);
    } finally {
      setDeviceBackend(DeviceType.CUDA, prev);
    }
  });

  test("CUDA's errors are typed errors (CudaError, an ArrowDeviceError) that name the call, and a failed export leaves nothing behind", () => {
    const r = cudaRuntime();
    const expectCuda = (f: () => unknown, code: number, name: string, kind: string, call: RegExp): void => {
      assert.throws(f, (e: unknown) => {
        assert.ok(e instanceof CudaError && e instanceof ArrowDeviceError, String(e));
        assert.equal(e.cudaError, code);
        assert.equal(e.cudaErrorName, name);
        assert.equal(e.kind, kind);
        assert.match(e.message, call);
        assert.match(e.message, new RegExp(`failed: ${name} \\(${code}\\)`));
        return true;
      });
    };
    const before = r.getDevice();
    expectCuda(() => r.setDevice(devices + 3), 101, 'cudaErrorInvalidDevice', 'invalid', /^cudaSetDevice\(\d+\) failed/);
    const d = r.malloc(64);
    r.free(d);
    expectCuda(() => r.free(d), 1, 'cudaErrorInvalidValue', 'invalid', /^cudaFree failed/);
    const h = r.malloc(64, 'host');
    const d2 = r.malloc(64);
    try {
      // A direction that is no cudaMemcpyKind. (A kind that does not match the pointers is undefined behaviour in
      // CUDA's documentation, not an error: a real runtime with unified addressing copies anyway.)
      expectCuda(() => r.memcpy(d2, h, 64, 99), 21, 'cudaErrorInvalidMemcpyDirection', 'invalid', /^cudaMemcpy failed/);
    } finally {
      r.free(d2);
      r.free(h, 'host');
    }
    // A NULL event. (A destroyed stream or event is undefined behaviour on a real runtime: it may crash the process.)
    expectCuda(() => r.eventSynchronize(0n), 400, 'cudaErrorInvalidResourceHandle', 'invalid', /^cudaEventSynchronize failed/);
    // An export to a device that does not exist: typed, nothing allocated, the current device unchanged.
    const exports = accounting().liveExports;
    expectCuda(() => exportDeviceArray(int32Batch(), { deviceType: DeviceType.CUDA, deviceId: devices + 3 }), 101, 'cudaErrorInvalidDevice', 'invalid', /cudaSetDevice/);
    assert.equal(accounting().liveExports, exports);
    assert.equal(r.getDevice(), before);
  });

  const peer = loadPeer();
  if (typeof peer === 'string') console.log(`# CUDA peer tests skipped: ${peer}`);
  describe('against the CUDA C peer', { skip: typeof peer === 'string' ? peer : false }, () => {
    const p = peer as Peer;
    for (const [name, t] of [['CUDA', DeviceType.CUDA], ['CUDA_HOST', DeviceType.CUDA_HOST], ['CUDA_MANAGED', DeviceType.CUDA_MANAGED]] as const) {
      test(`imports the peer's ${name} batch (written by a kernel, with an event), and releases it once`, async () => {
        const n = 10_000;
        (() => {
          const schema = allocArrowSchema();
          const array = allocDeviceArray();
          // The peer's kernels are still running when it returns: the import must wait on its event.
          assert.equal(slowly(() => p.exportBatch(n, t, schema, array)), 0, p.lastError());
          assert.notEqual(readDeviceFieldsRaw(array).syncEvent, 0n);
          const x = importDeviceRecordBatch(array, schema);
          const batch = x instanceof DeviceArray ? x.toHostRecordBatch({ validate: 'full' }) : x;
          assert.equal(x instanceof DeviceArray, t === DeviceType.CUDA, 'device memory is a DeviceArray, host-readable memory arrow-js');
          if (x instanceof DeviceArray) x.release();
          assert.equal(diffTables(new Table([expectedBatch(n)]), new Table([batch])), undefined);
          assert.deepEqual(columnValues(batch.getChild('s')!).slice(0, 3), [null, 'b', 'cd']);
          freeDeviceArray(array);
          freeArrowSchema(schema);
        })();
        assert.ok(await collectUntil(() => p.liveExports() === 0n), 'the peer\'s export was released');
        await settle();
      });
    }

    for (const [name, t] of [['CUDA', DeviceType.CUDA], ['CUDA_MANAGED', DeviceType.CUDA_MANAGED], ['CUDA_HOST', DeviceType.CUDA_HOST]] as const) {
      test(`exports a JS batch to ${name} memory with an event, and the peer checks it on the device`, () => {
        const n = 10_000;
        const before = accounting().liveExports;
        // Our copies are still running when the export returns: the peer must wait on our event.
        const batch = expectedBatch(n);
        const ptr = slowly(() => exportDeviceArray(batch, { deviceType: t, deviceId: 0, stream }));
        assert.equal(p.check(n, ptr), 0n, p.lastError());
        assert.equal(accounting().liveExports, before, 'the peer released our export');
        freeDeviceArray(ptr);
      });
    }

    test("copies the peer's batch, kernels still running, to every CUDA kind and the CPU: each copy waits on its event", () => {
      const n = 2_000;
      const targets = [
        { deviceType: DeviceType.CUDA, deviceId: Math.min(1, devices - 1) },
        { deviceType: DeviceType.CUDA_HOST, deviceId: 0 },
        { deviceType: DeviceType.CUDA_MANAGED, deviceId: 0 },
        { deviceType: DeviceType.CPU },
      ];
      for (const target of targets) {
        const schema = allocArrowSchema();
        const array = allocDeviceArray();
        assert.equal(slowly(() => p.exportBatch(n, DeviceType.CUDA, schema, array)), 0, p.lastError());
        const dev = importDeviceArray(array, schema);
        const copy = dev.copyTo(target);
        dev.release(); // the copy is complete: the peer's memory may go
        assert.equal(diffTables(new Table([expectedBatch(n)]), new Table([copy.toHostRecordBatch()])), undefined, `to ${copy.deviceTypeName}`);
        copy.release();
        freeDeviceArray(array);
        freeArrowSchema(schema);
      }
      assert.equal(p.liveExports(), 0n);
    });

    test('passes the peer\'s batch through unchanged, back to the peer', () => {
      const n = 777;
      const schema = allocArrowSchema();
      const array = allocDeviceArray();
      assert.equal(slowly(() => p.exportBatch(n, DeviceType.CUDA, schema, array)), 0, p.lastError());
      const dev = importDeviceArray(array, schema);
      const next = allocDeviceArray();
      dev.exportTo(next);
      assert.equal(p.check(n, next), 0n, p.lastError());
      assert.equal(p.liveExports(), 0n);
      freeDeviceArray(next);
      freeDeviceArray(array);
      freeArrowSchema(schema);
    });
  });

  // Device streams of CUDA data (CDeviceDataInterface.rst, "Device Stream Interface"): each array
  // leaves with the event its producer recorded, and the consumer waits on it before reading.
  describe('ArrowDeviceArrayStream of CUDA memory', () => {
    /** Batch k of a stream: x = k*100 + i, so every value says where it came from. */
    const batchOf = (k: number, rows = 64): RecordBatch =>
      new Table({ x: vectorFromArray(Int32Array.from({ length: rows }, (_, i) => k * 100 + i)) }).batches[0]!;
    /** A CUDA DeviceArray of batch k, its copy still queued on `stream` (the event pending) when returned. */
    const onDevice = (k: number, deviceType: number = DeviceType.CUDA): DeviceArray => {
      const b = batchOf(k);
      const p = exportDeviceArray(b, { deviceType, deviceId: 0, stream });
      const dev = importDeviceArray(p, b.schema);
      freeDeviceArray(p);
      return dev;
    };

    test('JS -> CUDA DeviceArrays -> exportDeviceArrayStream -> importDeviceArrayStream: events carried, values exact', async () => {
      await (async () => {
        const devs = slowly(() => [0, 1, 2].map((k) => onDevice(k)));
        const events = devs.map((d) => d.syncEvent);
        for (const e of events) assert.notEqual(e, 0n, 'each array has its producer event');
        const ptr = exportDeviceArrayStream(devs, { schema: batchOf(0).schema });
        assert.equal(mem.readI32(ptr + BigInt(mem.layouts.ArrowDeviceArrayStream.offsets.device_type!)), DeviceType.CUDA);
        const reader = importDeviceArrayStream(ptr);
        freeArrowDeviceArrayStream(ptr);
        assert.equal(reader.deviceType, DeviceType.CUDA);
        let k = 0;
        for await (const item of reader) {
          assert.ok(item instanceof DeviceArray, 'CUDA device memory comes as a DeviceArray');
          assert.equal(item.deviceType, DeviceType.CUDA);
          assert.equal(item.syncEvent, events[k], 'the event its producer recorded');
          const host = item.toHostRecordBatch({ stream }); // waits on the event (cudaStreamWaitEvent) before copying
          assert.deepEqual([...(host.getChild('x')!.toArray() as Int32Array)].slice(0, 3), [k * 100, k * 100 + 1, k * 100 + 2]);
          assert.equal(host.getChild('x')!.get(63), k * 100 + 63);
          k++;
        }
        assert.equal(k, 3);
      })();
      await settle();
    });

    test('{ toHost: true } gives record batches; CUDA_HOST streams give zero-copy batches after the event', async () => {
      await (async () => {
        for (const [deviceType, opts] of [[DeviceType.CUDA, { toHost: true as const, stream }], [DeviceType.CUDA_HOST, {}]] as const) {
          const devs = slowly(() => [0, 1].map((k) => onDevice(k, deviceType)));
          const ptr = exportDeviceArrayStream(devs, { schema: batchOf(0).schema });
          const reader = importDeviceArrayStream(ptr, opts);
          freeArrowDeviceArrayStream(ptr);
          let k = 0;
          for (const b of reader) {
            assert.ok(b instanceof RecordBatch, `${deviceType}: a record batch`);
            assert.equal(b.getChild('x')!.get(5), k * 100 + 5, 'never stale: the event was waited on');
            k++;
          }
          assert.equal(k, 2);
        }
      })();
      await settle();
    });

    test('a long CUDA stream read without keeping holds at most two arrays\' device memory at once', async () => {
      await (async () => {
        const n = 40;
        // One array's allocations, measured.
        const base = sim?.live().allocations ?? 0;
        const one = onDevice(0);
        const perArray = (sim?.live().allocations ?? base) - base;
        one.release();
        let made = 0;
        function* source(): Generator<DeviceArray> {
          for (let k = 0; k < n; k++) {
            made++;
            yield onDevice(k);
          }
        }
        // deviceType given: the stream does not read ahead to learn it.
        const ptr = exportDeviceArrayStream(source(), { schema: batchOf(0).schema, deviceType: DeviceType.CUDA });
        const reader = importDeviceArrayStream(ptr);
        freeArrowDeviceArrayStream(ptr);
        let peak = 0;
        let k = 0;
        for (const item of reader) {
          assert.ok(item instanceof DeviceArray);
          if (sim) peak = Math.max(peak, sim.live().allocations - base);
          k++;
        }
        assert.equal(k, n);
        assert.equal(made, n);
        if (sim) assert.ok(peak <= 2 * perArray, `peak ${peak} allocations, ${perArray} per array`);
      })();
      await settle();
    });

    test('an array of another device in a CUDA stream fails that get_next with a typed error', async () => {
      await (async () => {
        const cudaDev = onDevice(0);
        const hostDev = onDevice(1, DeviceType.CUDA_HOST);
        const ptr = exportDeviceArrayStream([cudaDev, hostDev], { schema: batchOf(0).schema });
        const reader = importDeviceArrayStream(ptr);
        freeArrowDeviceArrayStream(ptr);
        reader.next();
        assert.throws(() => reader.next(), /a CUDA_HOST DeviceArray in a stream of device type 2/);
        hostDev.release();
      })();
      await settle();
    });
  });
});
