/**
 * The native ring PROTOTYPE (test/async/native-ring.c, not shipped) against
 * the C producer thread of test/async/peer.c: it must deliver what the real
 * reader delivers (every value, the metadata, back-pressure, cancel, errors)
 * while the producer never waits for the JS thread but once per burst.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Errno } from '../../src/index.js';
import { AsyncStreamError } from '../../src/async/consumer.js';
import { asyncPeer, peerMissing } from './peer.js';
import { NativeRingReader, nativeRingMissing } from './native-ring.js';

const missing = peerMissing ?? nativeRingMissing;
const expectedSum = (n: number, rows: number): bigint => (BigInt(n * rows) * BigInt(n * rows - 1)) / 2n;

describe('native ring prototype: a C producer thread pushes into a ring, JS drains it per burst', { skip: missing ?? false }, () => {
  test('every batch and value, within the requested credit, with fewer wake-ups of JS than batches', async () => {
    const peer = asyncPeer();
    const reader = new NativeRingReader(8);
    const p = peer.produce(reader.handler, 2000, 10, -1);
    let n = 0;
    let sum = 0n;
    for await (const b of reader) {
      const x = b.getChildAt(0)!;
      for (let i = 0; i < x.length; i++) sum += BigInt(x.get(i) as number);
      n++;
    }
    const stats = await peer.produceWait(p);
    assert.equal(n, 2000);
    assert.equal(sum, expectedSum(2000, 10));
    assert.equal(stats.extracted, 2000);
    assert.ok(stats.maxCredit <= 8, `credit never above the queue size (was ${stats.maxCredit})`);
    assert.ok(reader.doorbells < n, `JS was woken ${reader.doorbells} times for ${n} batches`);
    assert.equal(peer.liveBatches(), 0);
  });

  test('a break cancels; every task handed over is extracted, with data or NULL', async () => {
    const peer = asyncPeer();
    const reader = new NativeRingReader(4);
    const p = peer.produce(reader.handler, 100, 10, -1);
    let n = 0;
    for await (const _ of reader) if (++n === 5) break;
    const stats = await peer.produceWait(p);
    assert.equal(stats.cancelled, true);
    assert.equal(stats.extracted, 5);
    assert.equal(stats.extracted + stats.extractedNull, stats.produced);
    assert.equal(reader.discarded, stats.extractedNull);
    assert.equal(peer.liveBatches(), 0);
  });

  test("the producer's on_error reaches the reader after the batches before it", async () => {
    const peer = asyncPeer();
    const reader = new NativeRingReader(4);
    const p = peer.produce(reader.handler, 20, 10, 7);
    let n = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of reader) n++;
      })(),
      (e: unknown) => e instanceof AsyncStreamError && e.errno === Errno.EIO && /failed on purpose/.test(e.message),
    );
    assert.equal(n, 7);
    await peer.produceWait(p);
    assert.equal(peer.liveBatches(), 0);
  });
});
