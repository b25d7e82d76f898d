/**
 * The simulated CUDA runtime's own tests (test/device/cuda/sim/simcudart.c):
 * that it behaves like a GPU where the library's mistakes would hide. They
 * call its C entry points directly (not through src/device), and always
 * run against the simulator, GPU or not.
 *
 * - Device memory is not host memory: a host read crashes (in a child process).
 * - Work is asynchronous: a read before synchronising sees the old bytes.
 * - Events order work across streams; cudaMemcpy follows the default stream.
 * - CUDA's error codes, with their real numeric values.
 * - After every test: no live allocation, stream, event or queued op.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import koffi from 'koffi';
import { nativeMemory } from '../../../src/memory/index.js';
import { RELEASE_SIG } from '../../../src/memory/registry.js';
import { runChild } from '../../helpers/child.js';
import { buildSim, simControl } from './sim/sim.js';

const build = ((): ReturnType<typeof buildSim> | string => {
  try {
    return buildSim();
  } catch (e) {
    if (process.env.ARROW_DEVICE_CUDA_REQUIRED === '1') throw e;
    return (e as Error).message; // no C compiler: the suite skips, saying why
  }
})();
const { cudart, peer: peerPath } = typeof build === 'string' ? { cudart: '', peer: '' } : build;
const lib = typeof build === 'string' ? undefined : koffi.load(cudart);
const sim = typeof build === 'string' ? undefined! : simControl(cudart);
const mem = nativeMemory();

// cudaError_t values of the CUDA runtime (driver_types.h).
const E = { Success: 0, InvalidValue: 1, InvalidMemcpyDirection: 21, InvalidDevice: 101, InvalidResourceHandle: 400, NotReady: 600 } as const;
const H2H = 0, H2D = 1, D2H = 2, D2D = 3;

type F = (...a: unknown[]) => number;
const fn = (decl: string): F => {
  if (!lib) return () => -1;
  const f = lib.func(decl);
  return (...a) => Number(f(...a));
};
const c = {
  malloc: fn('int cudaMalloc(uintptr_t p, size_t n)'),
  mallocHost: fn('int cudaMallocHost(uintptr_t p, size_t n)'),
  mallocManaged: fn('int cudaMallocManaged(uintptr_t p, size_t n, unsigned int flags)'),
  free: fn('int cudaFree(uintptr_t p)'),
  freeHost: fn('int cudaFreeHost(uintptr_t p)'),
  memcpy: fn('int cudaMemcpy(uintptr_t dst, uintptr_t src, size_t n, int kind)'),
  memcpyAsync: fn('int cudaMemcpyAsync(uintptr_t dst, uintptr_t src, size_t n, int kind, uintptr_t s)'),
  memsetAsync: fn('int cudaMemsetAsync(uintptr_t p, int v, size_t n, uintptr_t s)'),
  streamCreate: fn('int cudaStreamCreateWithFlags(uintptr_t s, unsigned int flags)'),
  streamDestroy: fn('int cudaStreamDestroy(uintptr_t s)'),
  streamSynchronize: fn('int cudaStreamSynchronize(uintptr_t s)'),
  streamWaitEvent: fn('int cudaStreamWaitEvent(uintptr_t s, uintptr_t e, unsigned int flags)'),
  eventCreate: fn('int cudaEventCreateWithFlags(uintptr_t e, unsigned int flags)'),
  eventRecord: fn('int cudaEventRecord(uintptr_t e, uintptr_t s)'),
  eventSynchronize: fn('int cudaEventSynchronize(uintptr_t e)'),
  eventQuery: fn('int cudaEventQuery(uintptr_t e)'),
  eventDestroy: fn('int cudaEventDestroy(uintptr_t e)'),
  setDevice: fn('int cudaSetDevice(int d)'),
  getLastError: fn('int cudaGetLastError(void)'),
};
const errorName = (lib?.func('const char *cudaGetErrorName(int e)') ?? (() => '')) as (e: number) => string;

const scratch = mem.alloc(8);
/** Calls a CUDA function whose first argument is an out-pointer; returns what it wrote. */
function out(f: F, ...rest: unknown[]): bigint {
  mem.writePtr(scratch, 0n);
  assert.equal(f(scratch, ...rest), E.Success);
  return mem.readPtr(scratch);
}
const hostBytes = (p: bigint, n: number): number[] => [...mem.read(p, n)];
const fill = (n: number, v: number): Uint8Array => new Uint8Array(n).fill(v);

/** Pageable host memory (a native allocation the simulator does not know). */
function pageable(bytes: Uint8Array): bigint {
  const p = mem.alloc(bytes.length);
  mem.copyIn(p, bytes);
  return p;
}

/** Runs `body` with every copy, memset and kernel slowed to `us`. */
function slowly<T>(body: () => T, us = 50_000): T {
  const prev = sim.setDelayUs(us);
  try {
    return body();
  } finally {
    sim.setDelayUs(prev);
  }
}

describe('the simulated CUDA runtime', { skip: typeof build === 'string' ? build : false }, () => {
  afterEach(() => {
    assert.deepEqual(sim.live(), { allocations: 0, streams: 0, events: 0, pendingOps: 0 }, 'live simulator objects after the test');
  });

  test('a host read of device memory crashes (SIGSEGV), before and after cudaFree; pinned and managed memory read fine', () => {
    const child = (body: string): ReturnType<typeof runChild> =>
      runChild(`
        import { koffi } from '@/src/memory/native.js';
        import { nativeMemory } from '@/src/memory/index.js';
        const lib = koffi().load(${JSON.stringify(cudart)});
        const mem = nativeMemory();
        const out = mem.alloc(8);
        const call = (decl, ...a) => { const rc = lib.func(decl)(out, ...a); if (rc !== 0) throw new Error(decl + ' ' + rc); return mem.readPtr(out); };
        ${body}
      `);
    const pinned = child(`
      const h = call('int cudaMallocHost(uintptr_t p, size_t n)', 64);
      const m = call('int cudaMallocManaged(uintptr_t p, size_t n, unsigned int f)', 64, 1);
      console.log('read', mem.read(h, 8).length + mem.read(m, 8).length);
    `);
    assert.equal(pinned.status, 0, pinned.stderr);
    assert.match(pinned.stdout, /read 16/);
    const read = child(`
      const d = call('int cudaMalloc(uintptr_t p, size_t n)', 64);
      console.log('allocated');
      mem.read(d, 8);
      console.log('read device memory');
    `);
    assert.equal(read.signal, 'SIGSEGV', `status ${read.status}: ${read.stdout}${read.stderr}`);
    assert.match(read.stdout, /allocated/);
    assert.doesNotMatch(read.stdout, /read device memory/);
    const write = child(`
      const d = call('int cudaMalloc(uintptr_t p, size_t n)', 64);
      mem.copyIn(d, new Uint8Array(8));
    `);
    assert.equal(write.signal, 'SIGSEGV');
    const afterFree = child(`
      const d = call('int cudaMalloc(uintptr_t p, size_t n)', 64);
      if (lib.func('int cudaFree(uintptr_t p)')(d) !== 0) throw new Error('free');
      console.log('freed');
      mem.read(d, 8);
    `);
    assert.equal(afterFree.signal, 'SIGSEGV');
    assert.match(afterFree.stdout, /freed/);
  });

  test('a process that exits right after destroying streams exits cleanly (the workers are joined before the library is unloaded)', () => {
    // koffi unloads the library at exit; a destroyed stream's worker, woken by the destroy, used to
    // run its last instructions in unmapped memory: SIGSEGV after the program's last line, about one
    // exit in two of `conformance --via cuda`.
    const code = `
      import { koffi } from '@/src/memory/native.js';
      import { nativeMemory } from '@/src/memory/index.js';
      const lib = koffi().load(${JSON.stringify(cudart)});
      const mem = nativeMemory();
      const out = mem.alloc(8);
      const create = lib.func('int cudaStreamCreate(uintptr_t p)');
      const destroy = lib.func('int cudaStreamDestroy(uintptr_t s)');
      const memset = lib.func('int cudaMemsetAsync(uintptr_t p, int v, size_t n, uintptr_t s)');
      const malloc = lib.func('int cudaMalloc(uintptr_t p, size_t n)');
      if (malloc(out, 64) !== 0) throw new Error('cudaMalloc');
      const d = mem.readPtr(out);
      // Each op takes 300 ms: the destroyed streams' workers are still draining when the process
      // exits, and wake (their op's time up) after the library was unloaded unless it stopped them.
      lib.func('int64_t sim_set_delay_us(int64_t us)')(300000);
      for (let i = 0; i < 8; i++) {
        if (create(out) !== 0) throw new Error('cudaStreamCreate');
        const s = mem.readPtr(out);
        if (memset(d, i, 64, s) !== 0) throw new Error('cudaMemsetAsync');
        if (destroy(s) !== 0) throw new Error('cudaStreamDestroy');
      }
      console.log('done');
    `;
    for (let run = 0; run < 3; run++) {
      const r = runChild(code);
      assert.equal(r.signal, null, `run ${run}: killed by ${r.signal} after ${JSON.stringify(r.stdout)}`);
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, /done/);
    }
  });

  test('an unsynchronised read sees the old bytes; after cudaStreamSynchronize, the new ones', () => {
    const d = out(c.malloc, 64);
    const h = out(c.mallocHost, 64);
    const s = out(c.streamCreate, 1);
    const src = pageable(fill(64, 0xab));
    slowly(() => {
      assert.equal(c.memcpyAsync(d, src, 64, H2D, s), E.Success);
      assert.equal(c.memcpyAsync(h, d, 64, D2H, s), E.Success);
    });
    // A pageable source is staged by the call: overwriting it now changes nothing.
    mem.copyIn(src, fill(64, 0x11));
    assert.deepEqual(hostBytes(h, 64), [...fill(64, 0)], 'not copied yet');
    assert.ok(sim.pendingOps() > 0);
    assert.equal(c.streamSynchronize(s), E.Success);
    assert.deepEqual(hostBytes(h, 64), [...fill(64, 0xab)]);
    mem.free(src);
    assert.equal(c.streamDestroy(s), E.Success);
    assert.equal(c.free(d), E.Success);
    assert.equal(c.freeHost(h), E.Success);
  });

  test('cudaMemcpyAsync into pageable memory returns once the copy is done (as documented)', () => {
    const d = out(c.malloc, 16);
    const s = out(c.streamCreate, 1);
    const dst = pageable(fill(16, 0));
    slowly(() => {
      assert.equal(c.memsetAsync(d, 0x42, 16, s), E.Success);
      assert.equal(c.memcpyAsync(dst, d, 16, D2H, s), E.Success);
    }, 20_000);
    assert.deepEqual(hostBytes(dst, 16), [...fill(16, 0x42)]);
    mem.free(dst);
    c.streamDestroy(s);
    c.free(d);
  });

  test('an event orders work across streams: cudaStreamWaitEvent holds the copy until the memset before the event is done', () => {
    const d = out(c.malloc, 32);
    const d2 = out(c.malloc, 32);
    const h = out(c.mallocHost, 32);
    const h2 = out(c.mallocHost, 32);
    const a = out(c.streamCreate, 1);
    const b = out(c.streamCreate, 1);
    const other = out(c.streamCreate, 1);
    const e = out(c.eventCreate, 2);
    assert.equal(c.eventQuery(e), E.Success, 'an event never recorded is complete');
    slowly(() => {
      assert.equal(c.memsetAsync(d, 7, 32, a), E.Success);
      assert.equal(c.eventRecord(e, a), E.Success);
      assert.equal(c.eventQuery(e), E.NotReady);
      assert.equal(c.streamWaitEvent(b, e, 0), E.Success);
      assert.equal(c.memcpyAsync(h, d, 32, D2H, b), E.Success);
      // The same without the wait, on a third stream: the copy overtakes the memset on a.
      assert.equal(c.memsetAsync(d2, 9, 32, a), E.Success);
    });
    assert.equal(c.memcpyAsync(h2, d2, 32, D2H, other), E.Success);
    assert.equal(c.streamSynchronize(other), E.Success);
    assert.equal(c.streamSynchronize(b), E.Success);
    assert.deepEqual(hostBytes(h, 32), [...fill(32, 7)], 'waited for the event');
    assert.deepEqual(hostBytes(h2, 32), [...fill(32, 0)], 'did not wait: old bytes');
    assert.equal(c.eventSynchronize(e), E.Success);
    assert.equal(c.eventQuery(e), E.Success);
    assert.equal(c.streamSynchronize(a), E.Success);
    for (const s of [a, b, other]) assert.equal(c.streamDestroy(s), E.Success);
    assert.equal(c.eventDestroy(e), E.Success);
    for (const p of [d, d2]) assert.equal(c.free(p), E.Success);
    for (const p of [h, h2]) assert.equal(c.freeHost(p), E.Success);
  });

  test('cudaMemcpy runs after the work queued on the default stream; a destroyed stream still finishes its work', () => {
    const d = out(c.malloc, 16);
    const h = out(c.mallocHost, 16);
    slowly(() => assert.equal(c.memsetAsync(d, 5, 16, 0n), E.Success));
    assert.equal(c.memcpy(h, d, 16, D2H), E.Success);
    assert.deepEqual(hostBytes(h, 16), [...fill(16, 5)]);

    const s = out(c.streamCreate, 1);
    const e = out(c.eventCreate, 2);
    slowly(() => {
      assert.equal(c.memsetAsync(d, 6, 16, s), E.Success);
      assert.equal(c.eventRecord(e, s), E.Success);
    });
    assert.equal(c.streamDestroy(s), E.Success, 'returns at once');
    assert.equal(sim.liveStreams(), 0);
    assert.equal(c.eventSynchronize(e), E.Success);
    assert.equal(c.memcpy(h, d, 16, D2H), E.Success);
    assert.deepEqual(hostBytes(h, 16), [...fill(16, 6)]);
    assert.equal(c.eventDestroy(e), E.Success);
    c.free(d);
    c.freeHost(h);
  });

  test("CUDA's error codes: invalid pointers, wrong copy kinds, use after free, bad devices, dead handles", () => {
    const d = out(c.malloc, 64);
    const h = out(c.mallocHost, 64);
    const p = pageable(fill(64, 1));
    assert.equal(c.malloc(0n, 8), E.InvalidValue, 'NULL out-pointer');
    assert.equal(c.getLastError(), E.InvalidValue, 'cudaGetLastError reports the last failure');
    assert.equal(c.getLastError(), E.Success, '... and resets it');
    assert.equal(c.setDevice(2), E.InvalidDevice, 'two simulated devices: 0 and 1');
    assert.equal(c.setDevice(-1), E.InvalidDevice);
    assert.equal(errorName(E.InvalidDevice), 'cudaErrorInvalidDevice');
    // Copies whose kind does not match the pointers.
    assert.equal(c.memcpy(d, d, 64, H2D), E.InvalidValue, 'HostToDevice from device memory');
    assert.equal(c.memcpy(p, p, 64, D2H), E.InvalidValue, 'DeviceToHost from host memory');
    assert.equal(c.memcpy(d, p, 64, D2D), E.InvalidValue, 'DeviceToDevice from host memory');
    assert.equal(c.memcpy(p, d, 64, H2H), E.InvalidValue, 'HostToHost from device memory');
    assert.equal(c.memcpy(d, p, 64, 9), E.InvalidMemcpyDirection);
    assert.equal(c.memcpy(d, p, 64, H2D), E.Success);
    assert.equal(c.memcpy(h, d, 64, D2H), E.Success);
    assert.equal(c.memcpy(h, d + 32n, 64, D2H), E.InvalidValue, 'past the end of the allocation');
    assert.equal(c.memcpy(0n, d, 8, D2H), E.InvalidValue, 'NULL');
    assert.equal(c.memsetAsync(p, 0, 8, 0n), E.InvalidValue, 'memset of pageable memory');
    // Frees of the wrong kind, twice, and uses after free.
    assert.equal(c.freeHost(d), E.InvalidValue);
    assert.equal(c.free(h), E.InvalidValue);
    assert.equal(c.free(d + 8n), E.InvalidValue, 'not the start of an allocation');
    assert.equal(c.free(d), E.Success);
    assert.equal(c.free(d), E.InvalidValue, 'double free');
    assert.equal(c.memcpy(h, d, 8, D2H), E.InvalidValue, 'copy from freed device memory');
    assert.equal(c.memcpy(h, d, 8, 4), E.InvalidValue, 'copy from freed device memory, cudaMemcpyDefault');
    assert.equal(c.memsetAsync(d, 0, 8, 0n), E.InvalidValue, 'memset of freed device memory');
    // Streams and events: destroyed handles, and an event recorded on another device's stream.
    const s = out(c.streamCreate, 1);
    const e = out(c.eventCreate, 2);
    assert.equal(c.streamDestroy(s), E.Success);
    assert.equal(c.streamDestroy(s), E.InvalidResourceHandle);
    assert.equal(c.streamSynchronize(s), E.InvalidResourceHandle);
    assert.equal(c.memcpyAsync(h, p, 8, H2H, s), E.InvalidResourceHandle);
    assert.equal(c.streamDestroy(0n), E.InvalidResourceHandle, 'the default stream cannot be destroyed');
    assert.equal(c.setDevice(1), E.Success);
    const s1 = out(c.streamCreate, 1);
    assert.equal(c.setDevice(0), E.Success);
    assert.equal(c.eventRecord(e, s1), E.InvalidResourceHandle, 'event on device 0, stream on device 1');
    assert.equal(c.streamWaitEvent(s1, e, 0), E.Success, 'waiting across devices is allowed');
    assert.equal(c.streamDestroy(s1), E.Success);
    assert.equal(c.eventDestroy(e), E.Success);
    assert.equal(c.eventDestroy(e), E.InvalidResourceHandle);
    assert.equal(c.eventRecord(e, 0n), E.InvalidResourceHandle);
    assert.equal(c.eventSynchronize(e), E.InvalidResourceHandle);
    assert.equal(c.freeHost(h), E.Success);
    mem.free(p);
  });

  test('the counters count: allocations of every kind, streams, events, queued ops', () => {
    const before = sim.completedOps();
    const d = out(c.malloc, 8);
    const h = out(c.mallocHost, 8);
    const m = out(c.mallocManaged, 8, 1);
    const s = out(c.streamCreate, 1);
    const e = out(c.eventCreate, 2);
    assert.deepEqual(sim.live(), { allocations: 3, streams: 1, events: 1, pendingOps: 0 });
    slowly(() => c.memsetAsync(m, 1, 8, s), 20_000);
    assert.equal(sim.pendingOps(), 1);
    assert.equal(c.free(m), E.Success, 'cudaFree waits for the device first');
    assert.equal(sim.pendingOps(), 0);
    assert.equal(sim.completedOps(), before + 1);
    c.eventDestroy(e);
    c.streamDestroy(s);
    c.freeHost(h);
    c.free(d);
  });

  test('the C peer hands out its batch before its kernels ran: a consumer that skips sync_event reads unwritten memory', () => {
    const peer = koffi.load(peerPath);
    const exportBatch = peer.func('int peer_export(int64_t n, int32_t device_type, uintptr_t schema, uintptr_t out)');
    const live = peer.func('int64_t peer_live_exports(void)');
    const L = mem.layouts;
    const schema = mem.alloc(L.ArrowSchema.size);
    const array = mem.alloc(L.ArrowDeviceArray.size);
    const n = 100;
    const CUDA_HOST = 3;
    assert.equal(slowly(() => exportBatch(n, CUDA_HOST, schema, array)), 0);
    // The int32 child's values, read in place (pinned memory is host-readable) without waiting.
    const root = array + BigInt(L.ArrowDeviceArray.offsets.array!);
    const child0 = mem.readPtr(mem.readPtr(root + BigInt(L.ArrowArray.offsets.children!)));
    const values = mem.readPtr(mem.readPtr(child0 + BigInt(L.ArrowArray.offsets.buffers!)) + 8n);
    const expected = Array.from({ length: n }, (_, k) => k * 3 - 7);
    const read = (): number[] => [...new Int32Array(mem.read(values, n * 4).slice().buffer)];
    assert.notDeepEqual(read(), expected, 'stale: the kernel has not run');
    const event = mem.readPtr(mem.readPtr(array + BigInt(L.ArrowDeviceArray.offsets.sync_event!)));
    assert.equal(c.eventSynchronize(event), E.Success);
    assert.deepEqual(read(), expected, 'after the event');
    mem.call(mem.readPtr(root + BigInt(L.ArrowArray.offsets.release!)), RELEASE_SIG, root);
    mem.call(mem.readPtr(schema + BigInt(L.ArrowSchema.offsets.release!)), RELEASE_SIG, schema);
    assert.equal(Number(live()), 0);
    mem.free(array);
    mem.free(schema);
  });
});
