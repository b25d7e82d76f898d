/**
 * The package's worker threads (src/memory/workers.ts, native/workers.c):
 * native memory's `callAsync` of a real C function (libc's `strlen` and
 * `getpid`) with many calls in flight at once, more than one wake-up settles
 * (16), so the deferred re-arming is taken too; every call gets its own
 * result. Skips with the reason where the pool is not used (no prebuilt
 * library, Windows, ARROW_DEVICE_WORKERS=0).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import koffi from 'koffi';
import { nativeMemory, nativeWorkers } from '../../src/memory/native.js';
import { nativeWorkersMissing } from '../../src/memory/workers.js';
import type { Signature } from '../../src/memory/memory.js';

const pool = process.platform === 'win32' ? null : nativeWorkers();
const skip = pool === null ? `the package's worker threads are not used here: ${nativeWorkersMissing() ?? 'Windows'}` : false;

/** A libc function's address (`dlsym` of the process's own symbols). */
function libcAddress(name: string): bigint {
  const libc = koffi.load(process.platform === 'darwin' ? 'libSystem.dylib' : 'libc.so.6');
  const dlopen = libc.func('uintptr_t dlopen(const char*, int)');
  const dlsym = libc.func('uintptr_t dlsym(uintptr_t, const char*)');
  const at = BigInt(dlsym(dlopen(null, 2), name) as number | bigint);
  assert.notEqual(at, 0n, name);
  return at;
}

describe('the package\'s worker threads', { skip }, () => {
  test('callAsync on the pool: 100 calls in flight, each with its own argument and result', async () => {
    const m = nativeMemory();
    const strlen = libcAddress('strlen');
    const sig: Signature = { name: 'strlen', result: 'int64', params: ['pointer'] };
    const texts = Array.from({ length: 100 }, (_, i) => 'x'.repeat(i * 7 + 1));
    const ptrs = texts.map((t) => {
      const p = m.alloc(t.length + 1);
      m.copyIn(p, new TextEncoder().encode(t));
      return p;
    });
    const before = pool!.stats().calls;
    try {
      const lengths = await Promise.all(ptrs.map((p) => m.callAsync(strlen, sig, p)));
      assert.deepEqual(lengths, texts.map((t) => BigInt(t.length)));
      assert.ok(pool!.stats().calls >= before + 100, JSON.stringify(pool!.stats()));
    } finally {
      for (const p of ptrs) m.free(p);
    }
  });

  test('an int32 result keeps its sign; a void result is undefined; threads end up idle', async () => {
    const m = nativeMemory();
    const getpid: Signature = { name: 'getpid', result: 'int32', params: [] };
    assert.equal(await m.callAsync(libcAddress('getpid'), getpid), process.pid);
    // abs(-5) through an int32 parameter: the 64-bit slot's low word is what the callee reads.
    const abs: Signature = { name: 'abs', result: 'int32', params: ['int32'] };
    assert.equal(await m.callAsync(libcAddress('abs'), abs, -5), 5);
    const srand: Signature = { name: 'srand', result: 'void', params: ['int32'] };
    assert.equal(await m.callAsync(libcAddress('srand'), srand, 1), undefined);
    const s = pool!.stats();
    assert.ok(s.threads >= 1 && s.started >= s.threads, JSON.stringify(s));
  });
});
