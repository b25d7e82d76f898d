/**
 * No silent hangs (docs/architecture.md#runtimes-and-platforms): whatever fails,
 * an async stream falls back or fails loudly, and a program ends when its
 * work is done.
 *
 * - A reader refused for its options, or a producer refused for its source,
 *   leaves nothing that keeps the process alive (a child process that must
 *   exit by itself).
 * - A doorbell that is accepted and never rings (Bun 1.4.5's `net.Socket`
 *   over a pipe, reproduced here by src/async/doorbell.ts's `silent`
 *   mechanism) does not stall the stream: the watchdog finds it dead, the
 *   stream polls to its end, and later streams use JS callbacks, saying why.
 * - Environment variables that may not be read (Deno without --allow-env)
 *   mean defaults, not an exception.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RecordBatch, Table, vectorFromArray } from 'apache-arrow';
import { createAsyncDeviceStreamReader, produceAsyncDeviceStream } from '../../src/async/index.js';
import { doorbellFailure, setDoorbellForTests } from '../../src/async/doorbell.js';
import { asyncRing, asyncRingMissing } from '../../src/async/ring.js';
import { childSkip, runChild } from '../helpers/child.js';
import { asyncPeer, peerMissing } from './peer.js';

const ringSkip = peerMissing ?? (asyncRing() ? false : `the native ring is not available: ${asyncRingMissing}`);

/** A child that hangs is killed after this long: it then fails the test (no timing is measured). */
const HANG = 60_000;

/** Asserts that a child ran to its end by itself and printed `expected`. */
function exitedWith(r: ReturnType<typeof runChild>, expected: string): void {
  assert.equal(r.signal, null, `the child was killed (${r.signal}): it did not exit by itself\n${r.stdout}${r.stderr}`);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.equal(r.stdout.trim(), expected, r.stderr);
}

describe('a refused stream keeps nothing alive', { skip: childSkip }, () => {
  test('createAsyncDeviceStreamReader({ queueSize: 0 }) throws, and the process exits', () => {
    const r = runChild(
      `
      import { createAsyncDeviceStreamReader } from '@/src/async/index.js';
      try {
        createAsyncDeviceStreamReader({ queueSize: 0 });
        console.log('accepted');
      } catch (e) {
        console.log('refused ' + e.kind + ' ' + e.path);
      }
      `,
      HANG,
    );
    exitedWith(r, 'refused invalid options.queueSize');
  });

  test('produceAsyncDeviceStream with a source that is not one rejects, and the process exits', () => {
    const r = runChild(
      `
      import { createAsyncDeviceStreamReader, produceAsyncDeviceStream } from '@/src/async/index.js';
      // In a function: the child runs as CommonJS, without top-level await.
      void (async () => {
        const reader = createAsyncDeviceStreamReader({ nativeRing: false });
        try {
          await produceAsyncDeviceStream(42, reader.handler);
          console.log('accepted');
        } catch (e) {
          console.log('refused ' + e.constructor.name);
        }
        reader.dispose(); // never handed to a producer: freed, and the reader lets the process go
      })();
      `,
      HANG,
    );
    exitedWith(r, 'refused TypeError');
  });
});

const makeBatches = (n: number, rows: number): RecordBatch[] =>
  Array.from({ length: n }, (_, b) => new Table({ x: vectorFromArray(Int32Array.from({ length: rows }, (_, i) => b * rows + i)) }).batches[0]!);

describe("a doorbell that never rings (as Bun 1.4.5's socket over a pipe)", { skip: ringSkip }, () => {
  test('a C producer thread into our reader: the stream ends, polling; later readers use JS callbacks and say why', { timeout: HANG }, async () => {
    const peer = asyncPeer();
    setDoorbellForTests('silent');
    try {
      const reader = createAsyncDeviceStreamReader({ queueSize: 4 });
      assert.equal(reader.nativeRing, true);
      const p = peer.produce(reader.handler, 40, 10, -4); // -4: the end waits for go()
      let rows = 0;
      for (let i = 0; i < 40; i++) rows += ((await reader.next())!.data as RecordBatch).numRows;
      // Every batch is read and the end is not sent: the reader waits on the doorbell now, armed, and
      // only the doorbell (or what stands in for a dead one) can tell it that the end came.
      const end = reader.next();
      peer.go(p);
      assert.equal(await end, undefined, 'the end of the stream');
      await reader.released;
      const stats = await peer.produceWait(p);
      assert.equal(rows, 400, 'every batch arrived');
      assert.equal(stats.produced, 40);
      assert.equal(reader.doorbellMechanism, 'poll', `the dead doorbell was replaced by polling (${reader.doorbells} rung)`);
      const failure = doorbellFailure();
      assert.match(failure ?? '', /native ring.*never heard/);

      const later = createAsyncDeviceStreamReader();
      assert.equal(later.nativeRing, false, 'after a dead doorbell, readers use JS callbacks');
      assert.equal(later.nativeRingMissing, failure, 'and say why');
      later.dispose();
    } finally {
      setDoorbellForTests(undefined);
    }
  });

  test('our producer into a C consumer thread: the stream ends, polling; later producers use JS callbacks and say why', { timeout: HANG }, async () => {
    const peer = asyncPeer();
    setDoorbellForTests('silent');
    try {
      // One request at a time, from the consumer's thread after each batch: the producer waits on the
      // doorbell for nearly every credit, and for the release at the end.
      const h = peer.consumer(1, -1, false);
      const result = await produceAsyncDeviceStream(makeBatches(30, 10), h);
      const stats = await peer.consumerWait(h, HANG);
      assert.equal(result.nativeRing, true);
      assert.equal(result.end, 'complete');
      assert.equal(stats.batches, 30, 'every batch arrived');
      assert.equal(stats.released, 1);
      const failure = doorbellFailure();
      assert.match(failure ?? '', /native pump.*never heard/);

      const h2 = peer.consumer(2, -1, false);
      const second = await produceAsyncDeviceStream(makeBatches(3, 10), h2);
      assert.equal((await peer.consumerWait(h2, HANG)).batches, 3);
      assert.equal(second.nativeRing, false, 'after a dead doorbell, producers use JS callbacks');
      assert.equal(second.nativeRingMissing, failure);
    } finally {
      setDoorbellForTests(undefined);
    }
  });
});

test('environment variables that may not be read (Deno without --allow-env) mean defaults: the ring still loads', { skip: childSkip || ringSkip }, () => {
  const r = runChild(
    `
    // Deno throws NotCapable for each variable outside --allow-env; here, for every variable the
    // library may read (the runtime's own reads go on).
    const real = process.env;
    const ours = (k) => typeof k === 'string' && /^(ARROW_DEVICE_|CUDA_|VIRTUAL_ENV|CONDA_PREFIX)/.test(k);
    const deny = (k) => {
      if (ours(k)) throw new Error('NotCapable: Requires env access to "' + String(k) + '"');
    };
    Object.defineProperty(process, 'env', {
      configurable: true,
      value: new Proxy(real, { get: (t, k) => (deny(k), Reflect.get(t, k)), has: (t, k) => (deny(k), Reflect.has(t, k)) }),
    });
    let denied = false;
    try {
      void process.env.ARROW_DEVICE_ASYNC_RING;
    } catch {
      denied = true;
    }
    void (async () => {
      const { createAsyncDeviceStreamReader } = await import('@/src/async/index.js');
      const { cudaAvailable } = await import('@/src/index.js');
      const reader = createAsyncDeviceStreamReader();
      console.log(denied + ' ' + reader.nativeRing + ' ' + reader.nativeRingMissing);
      reader.dispose();
      const cuda = cudaAvailable(); // reads CUDA_* and ARROW_DEVICE_CUDART: denied reads are unset ones
      if (!cuda.ok && /NotCapable/.test(cuda.reason)) console.log('cuda: ' + cuda.reason);
    })();
    `,
    HANG,
  );
  exitedWith(r, 'true true undefined');
});
