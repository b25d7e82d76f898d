/**
 * Device arrays into flechette (src/flechette/device.ts): `ArrowDeviceArray`s of memory the CPU
 * reads in place as flechette tables, zero-copy and after the producer's event; memory it cannot
 * read as `DeviceArray`s or host copies; device streams as readers of flechette tables. Against
 * independent producers: the threads fixture (test/threads/shared.c, CPU device arrays from C that
 * count their releases) and the CUDA C peer on the simulated CUDA runtime (test/device/cuda/sim:
 * device memory the host cannot read, kernels still running when the array is handed over, an event
 * to wait on), or on a real GPU where one is found. Values are compared with what the producer
 * wrote; every test ends with the producer's arrays released and the accounting back to zero.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, test } from 'node:test';
import { int32 } from '@uwdata/flechette';
import { Table as ArrowTable, Utf8, vectorFromArray } from 'apache-arrow';
import { DeviceType } from '../../src/abi/constants.js';
import { allocArrowSchema, freeArrowSchema } from '../../src/array/api.js';
import { cudaRuntime } from '../../src/device/cuda.js';
import { exportDeviceArrayStream, freeArrowDeviceArrayStream } from '../../src/stream/index.js';
import { exportDeviceRecordBatch, freeArrowDeviceArray } from '../../src/device/index.js';
import * as F from '../../src/flechette/index.js';
import { accounting, nativeMemory, type Ptr } from '../../src/memory/index.js';
import { koffi } from '../../src/memory/native.js';
import { collectUntil } from '../helpers/gc.js';
import { setupCuda, simControl } from '../device/cuda/sim/sim.js';
import { sharedFixture, sharedMissing } from '../threads/fixture.js';

const mem = nativeMemory();
const cuda = setupCuda();
const sim = cuda.mode === 'sim' ? simControl(process.env.ARROW_DEVICE_CUDART!) : undefined;

async function settle(extra: () => boolean = () => true): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0 && extra());
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
}

/** Every value of a flechette column, by `at` (null where invalid). */
const valuesOf = (c: { length: number; at(i: number): unknown } | null | undefined): unknown[] => Array.from({ length: c!.length }, (_, i) => c!.at(i));

/** The address of the values buffer of child `k` of the record batch in the ArrowArray at `p` (an ArrowDeviceArray's starts there). */
function childValuesAddress(p: Ptr, k: number): Ptr {
  const A = mem.layouts.ArrowArray.offsets;
  const child = mem.readPtr(mem.readPtr(p + BigInt(A.children!)) + BigInt(8 * k));
  return mem.readPtr(mem.readPtr(child + BigInt(A.buffers!)) + 8n);
}

describe('CPU device arrays from a C producer', { skip: sharedMissing ?? false }, () => {
  afterEach(() => settle(() => sharedFixture().outstanding() === 0));

  test('a CPU ArrowDeviceArray imports as a flechette table over the producer\'s memory; release() releases it once and detaches', () => {
    const fx = sharedFixture();
    const releases = fx.releases();
    const copied = accounting().copiedBytes;
    const p = fx.deviceBatch(1000, 5);
    const values = childValuesAddress(p, 1);
    const t = F.importDeviceRecordBatch(p, fx.schema(), { useBigInt: true });
    mem.free(p); // moved out: only our struct's memory
    assert.ok(t instanceof F.ImportedTable, 'a flechette table, not a DeviceArray');
    assert.equal(t.numRows, 1000);
    assert.deepEqual(t.schema.fields.map((f) => f.name), ['id', 'v']);
    assert.deepEqual(valuesOf(t.getChild('id')).slice(0, 3), [5n, 6n, 7n]);
    const v = t.getChild('v')!.data[0]!.values as Float64Array;
    assert.equal(v[999], 1004 * 0.5);
    assert.equal(mem.addressOf(v), values, 'the values are the producer\'s bytes');
    assert.equal(accounting().copiedBytes, copied, 'nothing copied');
    assert.equal(fx.releases(), releases);
    t.release();
    assert.equal(fx.releases(), releases + 1, 'released once');
    assert.equal(t.released, true);
    assert.equal(v.byteLength, 0, 'released means detached');
    t.release();
    assert.equal(fx.releases(), releases + 1, 'a second release() does nothing');
    assert.equal(fx.doubleReleases(), 0);
  });

  test('`using` releases, and a table left to the collector is released by it', async () => {
    const fx = sharedFixture();
    const releases = fx.releases();
    {
      const p = fx.deviceBatch(10);
      using t = F.importDeviceRecordBatch(p, fx.schema()) as F.ImportedTable;
      mem.free(p);
      assert.equal(t.getChild('v')!.at(9), 4.5);
    }
    assert.equal(fx.releases(), releases + 1);
    (() => {
      const p = fx.deviceBatch(10);
      F.importDeviceRecordBatch(p, fx.schema());
      mem.free(p);
    })();
    assert.ok(await collectUntil(() => fx.releases() === releases + 2), 'collected, then released');
  });

  test('a schema argument that is not a record batch\'s is refused, and the array is consumed', () => {
    const fx = sharedFixture();
    const releases = fx.releases();
    for (const [schema, path] of [[{ not: 'a schema' }, 'schema'], [F.schemaNodeOfType(int32()), 'schema.format']] as const) {
      const p = fx.deviceBatch(3);
      assert.throws(() => F.importDeviceRecordBatch(p, schema as never), (e: unknown) => e instanceof F.ArrowDeviceError && e.kind === 'invalid' && e.path === path);
      mem.free(p);
    }
    assert.equal(fx.releases(), releases + 2, 'import consumes: each array was released');
  });
});

/** The CUDA C peer (test/device/cuda/sim/peer.c on the simulator, peer.cu on a GPU). */
interface Peer {
  exportBatch(n: number, deviceType: number, schema: bigint, out: bigint): number;
  liveExports(): bigint;
  lastError(): string;
}

function loadPeer(): Peer | string {
  if (cuda.mode === 'none') return cuda.describe;
  if (cuda.peer === undefined) return 'the CUDA C peer is not built (test/device/cuda/run-gpu.sh)';
  const lib = koffi().load(cuda.peer);
  const exp = lib.func('int peer_export(int64_t n, int32_t device_type, uintptr_t schema, uintptr_t out)');
  const live = lib.func('int64_t peer_live_exports(void)');
  const err = lib.func('const char *peer_last_error(void)');
  return {
    exportBatch: (n, t, s, o) => exp(n, t, s, o) as number,
    liveExports: () => BigInt(live() as number | bigint),
    lastError: () => String(err()),
  };
}

/** Row k of the peer's batch (peer.c): i, s, st. */
const str = (k: number): string => Array.from({ length: k % 7 }, (_, j) => String.fromCharCode(97 + ((k + j) % 26))).join('');
const expectedI = (n: number): unknown[] => Array.from({ length: n }, (_, k) => (k % 5 === 0 ? null : k * 3 - 7));
const expectedS = (n: number): unknown[] => Array.from({ length: n }, (_, k) => (k % 11 === 0 ? null : str(k)));
const expectedSt = (n: number): unknown[] => Array.from({ length: n }, (_, k) => (k % 13 === 0 ? null : { a: BigInt(k * k - 1000), b: k * 0.25 }));

function assertPeerTable(t: F.ImportedTable, n: number, offset = 0): void {
  assert.equal(t.numRows, n);
  assert.deepEqual(valuesOf(t.getChild('i')), expectedI(n + offset).slice(offset));
  assert.deepEqual(valuesOf(t.getChild('s')), expectedS(n + offset).slice(offset));
  assert.deepEqual(valuesOf(t.getChild('st')), expectedSt(n + offset).slice(offset));
}

const peer = loadPeer();
if (typeof peer === 'string') console.log(`# flechette CUDA tests skipped: ${peer}`);
else console.log(`# flechette CUDA tests run against ${cuda.describe}`);

describe('CUDA device arrays from the CUDA C peer', { skip: typeof peer === 'string' ? peer : false }, () => {
  const p = peer as Peer;
  /** Runs `fn` with the simulator's kernels slowed, so a consumer that skips the event reads unwritten memory. */
  const slowly = <T>(fn: () => T): T => {
    if (!sim) return fn();
    const prev = sim.setDelayUs(20_000);
    try {
      return fn();
    } finally {
      sim.setDelayUs(prev);
    }
  };
  /** The peer's batch of n rows on `deviceType`, its kernels still running: the device array and its schema. */
  const exported = (n: number, deviceType: number): { array: Ptr; schema: Ptr } => {
    const schema = allocArrowSchema();
    const array = mem.alloc(mem.layouts.ArrowDeviceArray.size);
    assert.equal(slowly(() => p.exportBatch(n, deviceType, schema, array)), 0, p.lastError());
    return { array, schema };
  };
  const done = ({ array, schema }: { array: Ptr; schema: Ptr }): void => {
    mem.free(array);
    freeArrowSchema(schema);
  };
  afterEach(async () => {
    await settle(() => p.liveExports() === 0n);
    cudaRuntime().releaseCached();
    if (sim) {
      const live = sim.live();
      assert.deepEqual([live.allocations, live.events, live.pendingOps], [0, 0, 0], `no live CUDA memory or event: ${JSON.stringify(live)}`);
    }
  });
  after(() => cudaRuntime().releaseCached());

  for (const [name, t] of [['CUDA_HOST', DeviceType.CUDA_HOST], ['CUDA_MANAGED', DeviceType.CUDA_MANAGED]] as const) {
    test(`${name} memory imports zero-copy as a flechette table, after the event`, () => {
      const n = 5000;
      const x = exported(n, t);
      const iValues = childValuesAddress(x.array, 0);
      const copied = accounting().copiedBytes;
      const table = F.importDeviceRecordBatch(x.array, x.schema, { useBigInt: true });
      done(x);
      assert.ok(table instanceof F.ImportedTable, 'host-readable memory: a table, not a DeviceArray');
      const i = table.getChild('i')!.data[0]!.values as Int32Array;
      assert.equal(mem.addressOf(i), iValues, 'the values are the peer\'s CUDA memory');
      // Right values with the kernels slowed: the import waited on the event.
      assertPeerTable(table, n);
      assert.equal(accounting().copiedBytes, copied, 'nothing copied');
      assert.equal(p.liveExports(), 1n);
      table.release();
      assert.equal(p.liveExports(), 0n, 'released once, at release()');
      assert.equal(i.byteLength, 0, 'released means detached');
    });
  }

  test('CUDA device memory is a DeviceArray; toHostTable copies it; { toHost: true } gives a table over a host copy', () => {
    const n = 3000;
    const x = exported(n, DeviceType.CUDA);
    const dev = F.importDeviceRecordBatch(x.array, x.schema, { useBigInt: true });
    done(x);
    assert.ok(dev instanceof F.DeviceArray, 'device memory is not read in place');
    assert.equal(dev.deviceType, DeviceType.CUDA);
    const copy = F.toHostTable(dev, { useBigInt: true });
    assertPeerTable(copy, n);
    assert.equal(dev.released, false, 'the DeviceArray stays live');
    dev.release();
    assert.equal(p.liveExports(), 0n);
    assertPeerTable(copy, n); // the copy is JS memory: readable after the device array is gone
    const y = exported(n, DeviceType.CUDA);
    const host = F.importDeviceRecordBatch(y.array, y.schema, { toHost: true, useBigInt: true });
    done(y);
    assert.equal(p.liveExports(), 0n, 'with toHost the device array is released at once');
    assert.ok(host instanceof F.ImportedTable);
    assertPeerTable(host, n);
    host.release(); // releasable like every import; owns nothing
  });

  test('a DeviceArray as a protocol source (arrow.c_device_array): the table is built over the moved struct', () => {
    const x = exported(100, DeviceType.CUDA_HOST);
    const dev = F.importDeviceArray(x.array, x.schema);
    done(x);
    const t = F.importDeviceRecordBatch(dev, { useBigInt: true });
    assert.equal(dev.released, true, 'moved into the table\'s import');
    assert.ok(t instanceof F.ImportedTable);
    assertPeerTable(t, 100);
    t.release();
  });

  test('a device stream of the peer\'s CUDA_HOST arrays reads as flechette tables, zero-copy, one alive at a time; toTable() holds the rest', () => {
    const xs = [0, 1, 2, 3].map(() => exported(64, DeviceType.CUDA_HOST));
    const devs = xs.map((x) => F.importDeviceArray(x.array, x.schema));
    xs.forEach(done);
    const ptr = exportDeviceArrayStream(devs, { schema: devs[0]!.schema });
    const reader = F.importDeviceArrayStream(ptr, { useBigInt: true });
    freeArrowDeviceArrayStream(ptr);
    assert.equal(reader.deviceType, DeviceType.CUDA_HOST);
    assert.deepEqual(reader.schema.fields.map((f) => f.name), ['i', 's', 'st']);
    const copied = accounting().copiedBytes;
    const first = reader.next().value as F.ImportedTable;
    assert.ok(first instanceof F.ImportedTable);
    assertPeerTable(first, 64);
    const second = reader.next().value as F.ImportedTable;
    assert.equal(first.released, true, 'released when the reader handed out the next');
    assert.equal(p.liveExports(), 3n);
    const rest = reader.toTable();
    assert.equal(accounting().copiedBytes, copied, 'nothing copied');
    assert.equal(second.released, false, 'the batch handed out before toTable() is the caller\'s');
    assert.equal(rest.numRows, 128);
    assertPeerTable(second, 64);
    rest.release();
    assert.equal(p.liveExports(), 1n, 'toTable()\'s two batches released with it');
    second.release();
    assert.equal(p.liveExports(), 0n);
  });

  test('a device stream of CUDA memory: DeviceArrays (copied with toHostTable), or tables with { toHost: true }', () => {
    for (const toHost of [false, true]) {
      const xs = [0, 1].map(() => exported(200, DeviceType.CUDA));
      const devs = xs.map((x) => F.importDeviceArray(x.array, x.schema));
      xs.forEach(done);
      const ptr = exportDeviceArrayStream(devs, { schema: devs[0]!.schema });
      const reader = F.importDeviceArrayStream(ptr, { toHost, useBigInt: true });
      freeArrowDeviceArrayStream(ptr);
      let k = 0;
      for (const item of reader) {
        if (toHost) assertPeerTable(item as F.ImportedTable, 200);
        else {
          assert.ok(item instanceof F.DeviceArray);
          assertPeerTable(F.toHostTable(item, { useBigInt: true }), 200);
        }
        k++;
      }
      assert.equal(k, 2);
      assert.equal(p.liveExports(), 0n, `toHost ${toHost}: every array released`);
    }
  });
});

describe('the main entry\'s CUDA exports into flechette (no C peer needed: runs on a real GPU too)', { skip: cuda.mode === 'none' ? cuda.describe : false }, () => {
  const rt = cuda.mode !== 'none' ? cuda.runtime : undefined;
  const stream = rt ? rt.streamCreate() : 0n;
  after(() => {
    if (rt && stream) rt.streamDestroy(stream);
    cudaRuntime().releaseCached();
  });
  afterEach(() => settle());

  test('CUDA_HOST, CUDA_MANAGED (zero-copy, after the event on a named stream) and CUDA ({ toHost: true }) batches import with their values', () => {
    const n = 777;
    const batch = new ArrowTable({
      x: vectorFromArray(Float64Array.from({ length: n }, (_, i) => i / 4)),
      s: vectorFromArray(Array.from({ length: n }, (_, i) => (i % 4 === 0 ? null : `r${i}`)), new Utf8()),
    }).batches[0]!;
    for (const t of [DeviceType.CUDA_HOST, DeviceType.CUDA_MANAGED, DeviceType.CUDA]) {
      const { schema, array } = exportDeviceRecordBatch(batch, { deviceType: t, deviceId: 0, stream });
      const x = F.importDeviceRecordBatch(array, schema, { toHost: t === DeviceType.CUDA });
      freeArrowDeviceArray(array);
      F.freeArrowSchema(schema);
      assert.ok(x instanceof F.ImportedTable, `${t}: a table`);
      assert.deepEqual(valuesOf(x.getChild('x')), Array.from({ length: n }, (_, i) => i / 4));
      assert.deepEqual(valuesOf(x.getChild('s')), Array.from({ length: n }, (_, i) => (i % 4 === 0 ? null : `r${i}`)));
      x.release();
    }
  });
});
