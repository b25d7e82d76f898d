/**
 * The off-thread reader (`importArrayStream(ptr, { offThread: true })`):
 * `for await` runs each `get_next` on a koffi worker thread, so a producer
 * that blocks in `get_next` (test/ownership/counting.c's slow stream sleeps
 * in it, as a database driver runs its query there) leaves the event loop
 * free. Proven with a JS timer that ticks while the producer sleeps, and the
 * C producer's count of calls made on a thread other than the one that made
 * the stream; ownership as for the synchronous reader (one batch alive at a
 * time, the stream released exactly once on every way out), counted by the C
 * producer.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { tableFromArrays } from 'apache-arrow';
import {
  accounting, ArrowDeviceError, exportArrayStream, freeArrowArrayStream, importArrayStream, StreamProducerError,
} from '../../src/index.js';
import { collectUntil } from '../helpers/gc.js';
import { counting, countingMissing } from '../ownership/counting.js';

const SLEEP_MS = 40;

/** Counts timer ticks (every 2 ms) until stopped. */
function ticker(): { ticks: () => number; stop: () => void } {
  let n = 0;
  const t = setInterval(() => n++, 2);
  return { ticks: () => n, stop: () => clearInterval(t) };
}

async function settled(before: { out: number; dbl: number }): Promise<void> {
  const c = counting();
  await collectUntil(() => accounting().liveImports === 0 && c.outstanding() === before.out);
  assert.equal(c.outstanding(), before.out, 'every batch the producer handed out was released');
  assert.equal(c.doubleReleases(), before.dbl, 'none twice');
  assert.equal(accounting().liveImports, 0, 'no import left live');
}

describe('off-thread stream reader', { skip: countingMissing }, () => {
  test('for await with offThread: the event loop runs while get_next blocks, every batch right, each on a worker thread', async () => {
    const c = counting();
    const before = { out: c.outstanding(), dbl: c.doubleReleases(), streams: c.streamReleases(), off: c.offThreadCalls() };
    const ptr = c.slowStream(5, 4, { sleepMs: SLEEP_MS });
    const reader = importArrayStream(ptr, { offThread: true });
    freeArrowArrayStream(ptr);
    const t = ticker();
    const ticksAtBatch: number[] = [];
    const xs: number[] = [];
    try {
      for await (const batch of reader) {
        ticksAtBatch.push(t.ticks());
        xs.push(...(batch.getChild('x')!.toArray() as Int32Array));
        assert.ok(c.outstanding() - before.out <= 1, 'one batch alive at a time');
      }
    } finally {
      t.stop();
    }
    assert.deepEqual(xs, Array.from({ length: 20 }, (_, i) => i));
    // The timer fired during every get_next (each sleeps SLEEP_MS): the JS thread was free.
    let prev = 0;
    for (const [i, n] of ticksAtBatch.entries()) {
      assert.ok(n > prev, `the timer ticked while batch ${i} was produced (${prev} -> ${n})`);
      prev = n;
    }
    assert.equal(c.offThreadCalls() - before.off, 6, 'five batches and the end, each get_next on another thread');
    assert.equal(c.streamReleases() - before.streams, 1, 'the stream released once, at its end');
    assert.equal(reader.released, true);
    await settled(before);
  });

  test('without offThread, for await calls get_next on the JS thread and timers wait for the whole loop', async () => {
    const c = counting();
    const before = { out: c.outstanding(), dbl: c.doubleReleases(), off: c.offThreadCalls() };
    const ptr = c.slowStream(3, 2, { sleepMs: 10 });
    const reader = importArrayStream(ptr);
    freeArrowArrayStream(ptr);
    const t = ticker();
    const seen: number[] = [];
    try {
      for await (const batch of reader) {
        assert.equal(batch.numRows, 2);
        seen.push(t.ticks());
      }
    } finally {
      t.stop();
    }
    assert.deepEqual(seen, [0, 0, 0], 'no timer ran during the read (the steps resolve as microtasks)');
    assert.equal(c.offThreadCalls() - before.off, 0, 'every get_next on the JS thread');
    await settled(before);
  });

  test('break releases the stream once; the batch it held is released', async () => {
    const c = counting();
    const before = { out: c.outstanding(), dbl: c.doubleReleases(), streams: c.streamReleases() };
    const ptr = c.slowStream(10, 3, { sleepMs: 5 });
    const reader = importArrayStream(ptr, { offThread: true });
    freeArrowArrayStream(ptr);
    let n = 0;
    for await (const batch of reader) {
      assert.equal(batch.getChild('x')!.get(0), n * 3);
      if (++n === 3) break;
    }
    assert.equal(reader.released, true);
    assert.equal(c.streamReleases() - before.streams, 1);
    assert.equal(c.outstanding(), before.out, 'the last batch read was released by the break');
    await settled(before);
  });

  test('kept batches stay readable after the stream ended', async () => {
    const c = counting();
    const before = { out: c.outstanding(), dbl: c.doubleReleases() };
    const ptr = c.slowStream(4, 2, { sleepMs: 1 });
    const reader = importArrayStream(ptr, { offThread: true });
    freeArrowArrayStream(ptr);
    const kept = [];
    for await (const batch of reader) kept.push(reader.keep(batch));
    assert.equal(c.outstanding() - before.out, 4, 'every kept batch still held');
    assert.deepEqual(kept.map((b) => b.getChild('x')!.get(1)), [1, 3, 5, 7]);
    for (const b of kept) b.release();
    await settled(before);
  });

  test('release() while get_next runs off-thread takes effect when it returns: its batch and the stream released once', async () => {
    const c = counting();
    const before = { out: c.outstanding(), dbl: c.doubleReleases(), streams: c.streamReleases() };
    const ptr = c.slowStream(5, 2, { sleepMs: 60 });
    const reader = importArrayStream(ptr, { offThread: true });
    freeArrowArrayStream(ptr);
    const it = reader[Symbol.asyncIterator]();
    const first = await it.next();
    assert.equal(first.done, false);
    const pending = it.next(); // get_next #2 is now sleeping on a worker thread
    await new Promise((r) => setTimeout(r, 10));
    assert.throws(() => reader.next(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && /running off the JS thread/.test(e.message));
    reader.release();
    assert.equal(c.streamReleases() - before.streams, 0, 'not released while the producer is inside get_next');
    const r = await pending;
    assert.equal(r.done, true, 'the pending next ends the iteration');
    assert.equal(c.streamReleases() - before.streams, 1, 'released once the call returned');
    assert.equal(c.outstanding(), before.out, 'the batch that call produced was released, and the one before');
    await assert.rejects(it.next(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released');
    await settled(before);
  });

  test('a producer error off-thread is a StreamProducerError; onProducerError sees the live stream', async () => {
    const c = counting();
    const before = { out: c.outstanding(), dbl: c.doubleReleases(), streams: c.streamReleases() };
    const ptr = c.slowStream(5, 2, { sleepMs: 5, failAt: 2, failCode: 71 });
    let detail: string | null = null;
    let releasedInHook = -1;
    const reader = importArrayStream(ptr, {
      offThread: true,
      onProducerError: (stream) => {
        releasedInHook = c.streamReleases() - before.streams;
        detail = c.streamErrorDetail(stream);
      },
    });
    freeArrowArrayStream(ptr);
    let n = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of reader) n++;
      })(),
      (e: unknown) => e instanceof StreamProducerError && e.errno === 71 && e.operation === 'get_next' && e.producerMessage === 'cp: batch 2 failed',
    );
    assert.equal(n, 2);
    assert.equal(releasedInHook, 0, 'the hook ran before the release');
    assert.equal(detail, 'detail of batch 2: code 71, from the live stream');
    assert.equal(c.streamReleases() - before.streams, 1);
    await settled(before);
  });

  test('toTableAsync reads every batch off-thread into a table that keeps them; readAllAsync releases what it read on an error', async () => {
    const c = counting();
    const before = { out: c.outstanding(), dbl: c.doubleReleases(), streams: c.streamReleases(), off: c.offThreadCalls() };
    const ptr = c.slowStream(3, 4, { sleepMs: 1 });
    const table = await importArrayStream(ptr, { offThread: true }).toTableAsync();
    freeArrowArrayStream(ptr);
    assert.equal(c.offThreadCalls() - before.off, 4);
    assert.deepEqual([...(table.getChild('x')!.toArray() as Int32Array)], Array.from({ length: 12 }, (_, i) => i));
    assert.equal(c.outstanding() - before.out, 3, 'the table holds every batch');
    table.release();
    assert.equal(c.outstanding(), before.out);

    const failing = c.slowStream(4, 2, { failAt: 2, failCode: 5 });
    const reader = importArrayStream(failing, { offThread: true });
    freeArrowArrayStream(failing);
    await assert.rejects(reader.readAllAsync(), StreamProducerError);
    assert.equal(c.outstanding(), before.out, 'the two batches read before the error were released');
    assert.equal(c.streamReleases() - before.streams, 2);
    await settled(before);
  });

  test('our own exported stream read with offThread: called on the JS thread, values right', async () => {
    const table = tableFromArrays({ x: Int32Array.from({ length: 12 }, (_, i) => i * 2) });
    const batches = [table.slice(0, 5), table.slice(5, 12)].flatMap((t) => t.batches);
    const ptr = exportArrayStream(batches);
    const reader = importArrayStream(ptr, { offThread: true });
    const xs: number[] = [];
    for await (const b of reader) xs.push(...(b.getChild('x')!.toArray() as Int32Array));
    freeArrowArrayStream(ptr);
    assert.deepEqual(xs, Array.from({ length: 12 }, (_, i) => i * 2));
    await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
    assert.equal(accounting().liveExports, 0);
    assert.equal(accounting().liveImports, 0);
  });
});
