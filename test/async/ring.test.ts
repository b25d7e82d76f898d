/**
 * The prebuilt native ring (native/async-ring.c, src/async/ring.ts): the
 * async handler a native producer calls from its own thread without waiting
 * for ours. test/async/async.test.ts runs every C-producer case through it
 * and through JS callbacks; here what only the ring does.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { RecordBatch } from 'apache-arrow';
import { accounting } from '../../src/index.js';
import { createAsyncDeviceStreamReader } from '../../src/async/index.js';
import { asyncRing, asyncRingMissing } from '../../src/async/ring.js';
import { cCompiler, tempDir, which } from '../helpers/tools.js';
import { childSkip, runChild } from '../helpers/child.js';
import { asyncPeer, peerMissing } from './peer.js';

// What npm test's pretest does, for a run of this file alone: a no-op when the library is up to date.
// Not in an emulated run (tools/test-runtime.mjs node-arm64): the runner cross-built the library first,
// and an emulated process cannot start another one.
const built = childSkip
  ? { status: 0 }
  : spawnSync(process.execPath, ['tools/build-native.mjs', '--optional'], { stdio: 'inherit' });
const cc = cCompiler() ?? which('clang');

/** The descriptors this process has open on pipes (Linux: /proc/self/fd). */
function openPipes(): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('pipe:')) n++;
    } catch {
      // closed while listing
    }
  }
  return n;
}

const busyWait = (ms: number): void => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

describe('the native ring', () => {
  test('loads where a C compiler could build it (else the reason is printed)', (t) => {
    assert.equal(built.status, 0, 'tools/build-native.mjs --optional');
    const ring = asyncRing();
    if (!cc) {
      t.skip(`no C compiler here, so no prebuilt library: ${asyncRingMissing}`);
      return;
    }
    assert.ok(ring, `a C compiler is here, but the ring is not available: ${asyncRingMissing}`);
    const reader = createAsyncDeviceStreamReader();
    assert.equal(reader.nativeRing, true, 'readers use it by default');
    reader.dispose();
    const plain = createAsyncDeviceStreamReader({ nativeRing: false });
    assert.equal(plain.nativeRing, false);
    plain.dispose();
  });

  test('on Windows it says why it is not there, and a C producer thread reaches the reader through JS callbacks, to the end', { skip: peerMissing ?? false }, async () => {
    // Elsewhere the same fallback, asked for: the path Windows takes is the one proven here too.
    const windows = process.platform === 'win32';
    if (windows) {
      assert.equal(asyncRing(), null);
      assert.match(asyncRingMissing ?? '', /not built for Windows .*JS callbacks/);
    }
    const reader = createAsyncDeviceStreamReader(windows ? {} : { nativeRing: false });
    assert.equal(reader.nativeRing, false);
    assert.match(reader.nativeRingMissing ?? '', windows ? /not built for Windows/ : /turned off/);
    const peer = asyncPeer();
    const p = peer.produce(reader.handler, 12, 50, -1);
    let rows = 0;
    for await (const b of reader) rows += (b as RecordBatch).numRows;
    await reader.released;
    const stats = await peer.produceWait(p);
    assert.equal(rows, 12 * 50);
    assert.equal(stats.produced, 12);
    assert.equal(stats.callsAfterRelease, 0);
  });

  test('a producer ahead of the reader pushes a whole window without waiting for the JS thread: one doorbell', { skip: peerMissing ?? (asyncRing() ? false : `no ring: ${asyncRingMissing}`) }, async () => {
    const peer = asyncPeer();
    const reader = createAsyncDeviceStreamReader({ queueSize: 16 });
    const p = peer.produce(reader.handler, 16, 10, -1);
    await reader.schema; // on_schema is answered (it waits for JS); the reader has asked for 16
    // The JS thread is busy: with JS callbacks the producer's first on_next_task would wait here for
    // it (one hop per task, each queued as it comes). With the ring it pushes all 16 and rings once,
    // at the first push; the end needs one more request (the peer takes a credit for it), and the end
    // and the release may ring once each.
    // Waited for by the producer's own count, not a fixed time: a loaded machine may not run the
    // producer thread at once. The JS thread still does not yield until then.
    const deadline = performance.now() + 10_000;
    while (peer.produced(p) < 16 && performance.now() < deadline) busyWait(1);
    assert.equal(peer.produced(p), 16, 'the producer pushed its whole window while the JS thread was busy');
    let n = 0;
    let sum = 0;
    for await (const b of reader) {
      n++;
      sum += (b as RecordBatch).numRows;
    }
    await reader.released;
    const stats = await peer.produceWait(p);
    assert.equal(n, 16);
    assert.equal(sum, 160);
    assert.equal(stats.produced, 16);
    assert.equal(reader.maxQueued, 16, 'the whole window was there when the reader first took');
    assert.ok(reader.doorbells <= 3, `${reader.doorbells} doorbells: one for the window, at most two more for the end and the release`);
  });

  test('calls nothing of the producer once it has released the handler, though its release only queued', { skip: peerMissing ?? (asyncRing() ? false : `no ring: ${asyncRingMissing}`) }, async () => {
    // The spec lets a producer free its ArrowAsyncProducer once it has called release. Through the ring
    // that call returns at once, before JS has taken it: JS must not request (or cancel) after it.
    const peer = asyncPeer();
    const reader = createAsyncDeviceStreamReader({ queueSize: 4 });
    const p = peer.produce(reader.handler, 1, 3, -4); // -4: the end waits for go()
    const first = await reader.next(); // the one batch; its replacement is owed, not yet requested
    assert.ok(first);
    peer.go(p);
    // The JS thread does not yield: the end and the release sit in the ring, untaken.
    const end = performance.now() + 5000;
    while (!peer.released(p) && performance.now() < end);
    assert.ok(peer.released(p), 'the producer released the handler');
    assert.equal(await reader.next(), undefined, 'the end');
    await reader.released;
    const stats = await peer.produceWait(p);
    assert.equal(stats.callsAfterRelease, 0, 'a request or cancel reached the producer after its release');
  });

  test('keeps at most queueSize requested ahead of the reader, taking the requests in bursts', { skip: peerMissing ?? (asyncRing() ? false : `no ring: ${asyncRingMissing}`) }, async () => {
    const peer = asyncPeer();
    for (const q of [1, 2, 5, 8]) {
      const reader = createAsyncDeviceStreamReader({ queueSize: q });
      const p = peer.produce(reader.handler, 200, 3, -1);
      let n = 0;
      for await (const _ of reader) {
        n++;
        if (n % 7 === 0) busyWait(1); // a slower reader now and then: the producer runs ahead to its limit
      }
      await reader.released;
      const stats = await peer.produceWait(p);
      assert.equal(n, 200, `queue ${q}`);
      assert.ok(stats.maxCredit <= q, `queue ${q}: the producer held ${stats.maxCredit} requests`);
      assert.ok(reader.maxQueued <= q, `queue ${q}: ${reader.maxQueued} queued at once`);
    }
  });

  test('a reader disposed before any producer frees its ring and closes its doorbell pipe', { skip: asyncRing() && process.platform === 'linux' ? false : 'needs the ring and /proc' }, async () => {
    const pipes = openPipes();
    const exportsBefore = accounting().liveExports;
    const readers = Array.from({ length: 20 }, () => createAsyncDeviceStreamReader());
    try {
      // Both ends are in this process; Bun's read of the doorbell (src/async/doorbell.ts) holds one more.
      assert.ok(openPipes() >= pipes + 40, `one doorbell pipe per reader: ${openPipes() - pipes} pipe descriptors for 20 readers`);
    } finally {
      for (const r of readers) r.dispose(); // a reader left alive keeps the process alive
    }
    // The descriptors close on the loop's next turns (a socket's close, Bun's cancelled read).
    // Waited for with a deadline, not a count of turns: Bun settles a cancelled read on its own time.
    const deadline = performance.now() + 10_000;
    while (openPipes() !== pipes && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    assert.equal(openPipes(), pipes, 'every pipe closed');
    assert.equal(accounting().liveExports, exportsBefore);
  });

  test('a library that does not load (another CPU, another libc, not a library) leaves JS callbacks, and the reason', { skip: childSkip }, () => {
    const junk = join(tempDir('ring'), 'libarrow-device-async.so');
    writeFileSync(junk, 'not a shared library');
    const libs = [junk];
    // The package's other prebuilt (tools/build-native.mjs --release): the library an arm64 machine would find on x64.
    const other = join('prebuilds', `linux-${process.arch === 'x64' ? 'arm64' : 'x64'}`, 'libarrow-device-async.so');
    if (process.platform === 'linux' && existsSync(other)) libs.push(join(process.cwd(), other));
    for (const lib of libs) {
      const r = runChild(
        `
        import { createAsyncDeviceStreamReader } from '@/src/async/index.js';
        const reader = createAsyncDeviceStreamReader();
        console.log(reader.nativeRing + ' ' + reader.nativeRingMissing);
        reader.dispose();
        `,
        30_000,
        { ARROW_DEVICE_ASYNC_RING: lib },
      );
      assert.equal(r.status, 0, r.stderr);
      assert.ok(r.stdout.startsWith(`false ${lib} does not load on `), r.stdout);
    }
  });
});
