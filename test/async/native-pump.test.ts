/**
 * The native pump PROTOTYPE (test/async/native-pump.c, not shipped) into the
 * C consumer of test/async/peer.c, whose worker thread extracts each task,
 * releases the batch and requests from its own thread: it must deliver what
 * produceAsyncDeviceStream delivers (every value, back-pressure, cancel,
 * request(0) as on_error(EINVAL), release once, every export released)
 * while the consumer never waits for the JS thread.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Table, vectorFromArray, type RecordBatch } from 'apache-arrow';
import { accounting, Errno } from '../../src/index.js';
import { collectUntil } from '../helpers/gc.js';
import { asyncPeer, peerMissing } from './peer.js';
import { nativePumpMissing, produceViaPump } from './native-pump.js';

const missing = peerMissing ?? nativePumpMissing;
const expectedSum = (n: number, rows: number): bigint => (BigInt(n * rows) * BigInt(n * rows - 1)) / 2n;
const batches = (n: number, rows: number): RecordBatch[] =>
  Array.from({ length: n }, (_, b) => new Table({ x: vectorFromArray(Int32Array.from({ length: rows }, (_, i) => b * rows + i)) }).batches[0]!);

async function settle(): Promise<void> {
  const ok = await collectUntil(() => accounting().liveExports === 0, 100);
  assert.ok(ok, `every export released: ${JSON.stringify(accounting())}`);
}

describe('native pump prototype: our batches into a C consumer thread, no call of its waiting for JS', { skip: missing ?? false }, () => {
  test('every batch and value, release once, with fewer wake-ups of JS than batches', async () => {
    const peer = asyncPeer();
    const h = peer.consumer(8, -1, false);
    const r = await produceViaPump(batches(2000, 10), h);
    const stats = await peer.consumerWait(h, 10_000);
    assert.equal(r.end, 'complete');
    assert.equal(r.batches, 2000);
    assert.equal(stats.batches, 2000);
    assert.equal(stats.sum, expectedSum(2000, 10));
    assert.equal(stats.released, 1);
    assert.equal(stats.endOfStream, true);
    assert.equal(stats.bad, 0);
    assert.equal(stats.callsOnCreatorThread, 0, 'the handler was called from the pump\'s thread, never the JS thread');
    assert.ok(r.doorbells < 2000, `JS was woken ${r.doorbells} times for 2000 batches`);
    await settle();
  });

  test('a cancel stops production and releases without on_error', async () => {
    const peer = asyncPeer();
    const h = peer.consumer(1, 5, false);
    const r = await produceViaPump(batches(100, 10), h);
    const stats = await peer.consumerWait(h, 10_000);
    assert.equal(r.end, 'cancelled');
    assert.ok(r.batches < 100);
    assert.equal(stats.errors, 0);
    assert.equal(stats.released, 1);
    assert.equal(stats.batches, 5);
    await settle();
  });

  test('request(0) is reported through on_error(EINVAL)', async () => {
    const peer = asyncPeer();
    const h = peer.consumer(1, -1, true);
    const r = await produceViaPump(batches(3, 10), h);
    const stats = await peer.consumerWait(h, 10_000);
    assert.equal(r.end, 'error');
    assert.equal(stats.errors, 1);
    assert.equal(stats.errorCode, Errno.EINVAL);
    assert.equal(stats.released, 1);
    await settle();
  });
});
