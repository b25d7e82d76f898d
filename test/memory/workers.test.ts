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
import { nativeWorkersMissing, workersSetting } from '../../src/memory/workers.js';
import type { Signature } from '../../src/memory/memory.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { childSkip, childValue } from '../helpers/child.js';

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

test('ARROW_DEVICE_WORKERS: unset or empty the default cap, 0 off, 1 to 256 a cap; anything else an error naming it', () => {
  assert.deepEqual([undefined, '', '0', '1', ' 8 ', '256'].map(workersSetting), [256, 256, 0, 1, 8, 256]);
  for (const bad of ['257', 'abc', '-1', '1.5', '4 threads', '0x10']) {
    assert.throws(() => workersSetting(bad), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && e.message.startsWith('ARROW_DEVICE_WORKERS: ') && e.message.includes(JSON.stringify(bad)), bad);
  }
});

/**
 * The threads a child started for `n` calls of libc's `usleep(100 ms)` in flight at once (every result
 * checked): the pool starts a thread for a call that finds none idle, up to its cap. `setting`: the
 * child's ARROW_DEVICE_WORKERS ('' the default, whatever this process has).
 */
function peakThreads(setting: string, n: number): { threads: number; started: number } {
  return childValue<{ threads: number; started: number }>(`
    import { koffi, nativeMemory, nativeWorkers } from '@/src/memory/native.js';
  `, `
    const libc = koffi().load(process.platform === 'darwin' ? 'libSystem.dylib' : 'libc.so.6');
    const dlsym = libc.func('uintptr_t dlsym(uintptr_t, const char*)');
    const dlopen = libc.func('uintptr_t dlopen(const char*, int)');
    const usleep = BigInt(dlsym(dlopen(null, 2), 'usleep'));
    const m = nativeMemory();
    const results = await Promise.all(Array.from({ length: ${n} }, () => m.callAsync(usleep, { name: 'usleep', result: 'int32', params: ['int32'] }, 100000)));
    if (results.some((x) => x !== 0)) throw new Error('usleep: ' + results.join(','));
    const s = nativeWorkers().stats();
    return { threads: s.threads, started: s.started };
  `, 60_000, { ARROW_DEVICE_WORKERS: setting });
}

test('ARROW_DEVICE_WORKERS unreadable: an off-thread call rejects with the error naming it (no throw), every time', { skip: process.platform === 'win32' ? 'no prebuilt worker threads on Windows' : childSkip }, () => {
  const out = childValue<string[]>(`
    import { koffi, nativeMemory } from '@/src/memory/native.js';
  `, `
    const libc = koffi().load(process.platform === 'darwin' ? 'libSystem.dylib' : 'libc.so.6');
    const getpid = BigInt(libc.func('uintptr_t dlsym(uintptr_t, const char*)')(libc.func('uintptr_t dlopen(const char*, int)')(null, 2), 'getpid'));
    const m = nativeMemory();
    const out = [];
    for (let i = 0; i < 2; i++) {
      let p;
      try {
        p = m.callAsync(getpid, { name: 'getpid', result: 'int32', params: [] });
      } catch (e) {
        out.push('threw: ' + e.message);
        continue;
      }
      out.push(await p.then(() => 'resolved', (e) => 'rejected: ' + e.message));
    }
    return out;
  `, 60_000, { ARROW_DEVICE_WORKERS: 'four' });
  assert.equal(out.length, 2);
  for (const line of out) assert.match(line, /^rejected: ARROW_DEVICE_WORKERS: "four": expected 0/);
});

describe('ARROW_DEVICE_WORKERS caps the threads', { skip: skip || childSkip }, () => {
  test('eight sleeping calls at once: eight threads by default, two with ARROW_DEVICE_WORKERS=2 (each call still answered)', () => {
    const free = peakThreads('', 8);
    assert.equal(free.started, 8, JSON.stringify(free));
    const capped = peakThreads('2', 8);
    assert.equal(capped.started, 2, JSON.stringify(capped));
  });
});

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
