/**
 * The async device stream interface against a C peer with real threads
 * (test/async/peer.c): a producer pushing from its own pthread into our
 * handler, and a consumer whose worker thread extracts our tasks and calls
 * request() from that thread.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RecordBatch, Table, vectorFromArray, Int32, Field, Schema } from 'apache-arrow';
import { accounting, Errno } from '../../src/index.js';
import { AsyncStreamError, createAsyncDeviceStreamReader, produceAsyncDeviceStream } from '../../src/async/index.js';
import { collectUntil } from '../helpers/gc.js';
import { asyncPeer, peerMissing } from './peer.js';

const skip = peerMissing ?? false;

/** Sum of x over batches 0..n-1 of `rows` rows: x = 0 .. n*rows-1. */
const expectedSum = (n: number, rows: number): bigint => (BigInt(n * rows) * BigInt(n * rows - 1)) / 2n;

async function settle(): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0 && asyncPeer().liveBatches() === 0, 100);
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}, peer batches ${asyncPeer().liveBatches()}`);
}

function sumOf(batch: RecordBatch): bigint {
  let s = 0n;
  const col = batch.getChildAt(0)!;
  for (let i = 0; i < col.length; i++) if (col.isValid(i)) s += BigInt(col.get(i) as number);
  return s;
}

const decodeMd = (m: Map<string, string> | null): Record<string, string> => Object.fromEntries(m ?? []);

describe('async consumer: a C producer thread pushes to our handler', { skip }, () => {
  test('receives every batch with its metadata, and never queues more than it requested', async () => {
    const peer = asyncPeer();
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ queueSize: 3 });
      const p = peer.produce(reader.handler, 20, 1000, -1);
      const schema = await reader.schema;
      assert.deepEqual(schema.fields.map((f) => `${f.name}: ${f.type}`), ['x: Int32']);
      let sum = 0n;
      let n = 0;
      for await (const t of reader.tasks()) {
        assert.ok(t.data instanceof RecordBatch);
        assert.deepEqual(decodeMd(t.metadata), { batch: String(n) });
        sum += sumOf(t.data);
        n++;
      }
      assert.equal(n, 20);
      assert.equal(sum, expectedSum(20, 1000));
      assert.deepEqual(decodeMd(reader.additionalMetadata), { rows: '20000' });
      assert.equal(reader.deviceType, 1);
      await reader.released;
      const stats = await peer.produceWait(p);
      assert.equal(stats.produced, 20);
      assert.equal(stats.extracted, 20);
      assert.ok(stats.maxCredit <= 3, `the producer never had more than 3 batches of credit (had ${stats.maxCredit})`);
      assert.ok(reader.maxQueued <= 3, `queued at most 3 (queued ${reader.maxQueued})`);
    })();
    await settle();
  });

  test('a slow reader keeps the queue bounded', async () => {
    const peer = asyncPeer();
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ queueSize: 2 });
      const p = peer.produce(reader.handler, 30, 10, -1);
      let n = 0;
      for await (const b of reader) {
        await new Promise((r) => setTimeout(r, 3)); // slower than the producer
        assert.ok(b instanceof RecordBatch);
        n++;
      }
      assert.equal(n, 30);
      const stats = await peer.produceWait(p);
      assert.ok(stats.maxCredit <= 2, `credit stayed <= 2 (was ${stats.maxCredit})`);
      assert.ok(reader.maxQueued <= 2, `queue stayed <= 2 (was ${reader.maxQueued})`);
    })();
    await settle();
  });

  test('works as a WHATWG ReadableStream', async () => {
    const peer = asyncPeer();
    await (async () => {
      const reader = createAsyncDeviceStreamReader();
      const p = peer.produce(reader.handler, 5, 100, -1);
      let sum = 0n;
      const stream = reader.toReadableStream();
      const r = stream.getReader();
      for (;;) {
        const { done, value } = await r.read();
        if (done) break;
        sum += sumOf(value as RecordBatch);
      }
      assert.equal(sum, expectedSum(5, 100));
      await peer.produceWait(p);
    })();
    await settle();
  });

  for (const errorAt of [-2, 0, 1, 7, 19]) {
    test(`an on_error ${errorAt === -2 ? 'before the schema' : `instead of batch ${errorAt}`} rejects with the code, message and metadata`, async () => {
      const peer = asyncPeer();
      await (async () => {
        const reader = createAsyncDeviceStreamReader({ queueSize: 4 });
        const p = peer.produce(reader.handler, 20, 10, errorAt);
        let n = 0;
        const err = await (async () => {
          try {
            for await (const _ of reader) n++;
          } catch (e) {
            return e;
          }
          return undefined;
        })();
        assert.ok(err instanceof AsyncStreamError, `rejected with an AsyncStreamError, got ${String(err)}`);
        assert.equal(err.errno, Errno.EIO);
        assert.equal(err.code, 'EIO');
        if (errorAt === -2) {
          assert.match(err.message, /EIO: producer failed before the schema/);
          await assert.rejects(reader.schema, AsyncStreamError);
        } else {
          assert.match(err.message, /EIO: producer failed on purpose/);
          assert.deepEqual(decodeMd(err.metadata), { batch: String(errorAt) });
          assert.equal(n, errorAt, 'every batch before the error was delivered');
        }
        await reader.released;
        await peer.produceWait(p);
      })();
      await settle();
    });
  }

  for (const after of [0, 1, 5, 19]) {
    test(`break after ${after} batches cancels the producer, which cleans up every task and releases without on_error`, async () => {
      const peer = asyncPeer();
      await (async () => {
        const reader = createAsyncDeviceStreamReader({ queueSize: 4 });
        const p = peer.produce(reader.handler, 20, 10, -1);
        let n = 0;
        if (after === 0) {
          await reader.schema;
          reader.cancel();
        } else {
          for await (const _ of reader) if (++n === after) break;
        }
        await reader.released;
        const stats = await peer.produceWait(p);
        assert.equal(stats.cancelled, true);
        assert.equal(stats.extracted + stats.extractedNull, stats.produced, 'every task handed over was extracted (data or NULL)');
        assert.equal(stats.extracted, after);
        assert.equal(reader.errorAfterCancelled, null, 'no on_error after a successful cancel');
      })();
      await settle();
    });
  }

  test('10,000 batches', async () => {
    const peer = asyncPeer();
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ queueSize: 8 });
      const t0 = performance.now();
      const p = peer.produce(reader.handler, 10_000, 4, -1);
      let n = 0;
      let sum = 0n;
      for await (const b of reader) {
        n++;
        sum += sumOf(b as RecordBatch);
      }
      const ms = performance.now() - t0;
      assert.equal(n, 10_000);
      assert.equal(sum, expectedSum(10_000, 4));
      const stats = await peer.produceWait(p);
      assert.ok(stats.maxCredit <= 8);
      console.log(`# 10,000 batches from a C producer thread in ${ms.toFixed(0)} ms (${((ms * 1000) / n).toFixed(1)} us per batch)`);
    })();
    await settle();
  });
});

describe('async producer: we push to a C consumer whose worker thread requests', { skip }, () => {
  const batches = (n: number, rows: number): RecordBatch[] =>
    Array.from({ length: n }, (_, b) => new Table({ x: vectorFromArray(Int32Array.from({ length: rows }, (_, i) => b * rows + i)) }).batches[0]!);

  test('delivers every batch; the consumer checks each value', async () => {
    const peer = asyncPeer();
    await (async () => {
      const h = peer.consumer(2, -1, false);
      const result = await produceAsyncDeviceStream(batches(50, 100), h, { additionalMetadata: new Map([['rows', '5000']]) });
      const stats = await peer.consumerWait(h, 10_000);
      assert.equal(result.end, 'complete');
      assert.equal(result.batches, 50);
      assert.equal(stats.timedOut, false);
      assert.equal(stats.batches, 50);
      assert.equal(stats.rows, 5000);
      assert.equal(stats.sum, expectedSum(50, 100));
      assert.equal(stats.errors, 0);
      assert.equal(stats.released, 1, 'release called exactly once');
      assert.equal(stats.endOfStream, true);
      assert.equal(stats.bad, 0);
      assert.equal(stats.schemaFormat, '+s');
      assert.equal(stats.schemaChildren, 1);
      const md = stats.additionalMetadata;
      assert.equal(new TextDecoder().decode(md.subarray(8, 12)), 'rows', 'additional_metadata reached the consumer');
    })();
    await settle();
  });

  test('from an async generator and a ReadableStream', async () => {
    const peer = asyncPeer();
    async function* gen(): AsyncGenerator<RecordBatch> {
      for (const b of batches(7, 10)) {
        await new Promise((r) => setTimeout(r, 1));
        yield b;
      }
    }
    await (async () => {
      const h = peer.consumer(1, -1, false);
      await produceAsyncDeviceStream(gen(), h);
      assert.equal((await peer.consumerWait(h, 10_000)).sum, expectedSum(7, 10));
      const h2 = peer.consumer(1, -1, false);
      const list = batches(4, 10);
      const rs = new ReadableStream<RecordBatch>({
        pull(c) {
          const b = list.shift();
          if (b) c.enqueue(b);
          else c.close();
        },
      });
      await produceAsyncDeviceStream(rs, h2);
      assert.equal((await peer.consumerWait(h2, 10_000)).sum, expectedSum(4, 10));
    })();
    await settle();
  });

  test('a cancel stops production and releases, with no on_error', async () => {
    const peer = asyncPeer();
    await (async () => {
      const h = peer.consumer(1, 5, false);
      const result = await produceAsyncDeviceStream(batches(100, 10), h);
      const stats = await peer.consumerWait(h, 10_000);
      assert.equal(result.end, 'cancelled');
      assert.equal(result.cancelled, true);
      assert.ok(result.batches < 100, `stopped early (${result.batches} batches)`);
      assert.equal(stats.errors, 0, 'no on_error after a cancel');
      assert.equal(stats.released, 1);
      assert.equal(stats.batches, 5);
    })();
    await settle();
  });

  test('request(0) is an error reported through on_error(EINVAL)', async () => {
    const peer = asyncPeer();
    await (async () => {
      const h = peer.consumer(1, -1, true);
      const result = await produceAsyncDeviceStream(batches(3, 10), h);
      const stats = await peer.consumerWait(h, 10_000);
      assert.equal(result.end, 'error');
      assert.equal(stats.errors, 1);
      assert.equal(stats.errorCode, Errno.EINVAL);
      assert.match(stats.message, /n must be > 0/);
      assert.equal(stats.released, 1);
    })();
    await settle();
  });

  test('an error in the source becomes on_error with its message, then release', async () => {
    const peer = asyncPeer();
    async function* failing(): AsyncGenerator<RecordBatch> {
      yield* batches(3, 10);
      throw new Error('the source broke');
    }
    await (async () => {
      const h = peer.consumer(4, -1, false);
      const result = await produceAsyncDeviceStream(failing(), h);
      const stats = await peer.consumerWait(h, 10_000);
      assert.equal(result.end, 'error');
      assert.equal(stats.batches, 3);
      assert.equal(stats.errors, 1);
      assert.equal(stats.errorCode, Errno.EIO);
      assert.match(stats.message, /the source broke/);
      assert.equal(stats.released, 1);
    })();
    await settle();
  });
});

describe('async: our producer into our consumer', () => {
  test('round-trips a table through the handler, with per-task metadata', async () => {
    await (async () => {
      const t = new Table({ x: vectorFromArray(Int32Array.from({ length: 1000 }, (_, i) => i)) });
      const parts = [t.slice(0, 300), t.slice(300, 700), t.slice(700)].flatMap((s) => s.batches);
      const reader = createAsyncDeviceStreamReader({ queueSize: 2 });
      const done = produceAsyncDeviceStream(parts, reader.handler, { taskMetadata: (_b, i) => new Map([['i', String(i)]]) });
      const got: number[] = [];
      const mds: string[] = [];
      for await (const r of reader.tasks()) {
        got.push(...(r.data as RecordBatch).getChildAt(0)!.toArray());
        mds.push(r.metadata?.get('i') ?? '?');
      }
      assert.deepEqual(got, Array.from({ length: 1000 }, (_, i) => i));
      assert.deepEqual(mds, ['0', '1', '2']);
      assert.equal((await done).end, 'complete');
    })();
    const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
    assert.ok(ok, JSON.stringify(accounting()));
  });

  test('needs a schema for an empty source', async () => {
    const reader = createAsyncDeviceStreamReader();
    const result = await produceAsyncDeviceStream([], reader.handler, {});
    assert.equal(result.end, 'error');
    await assert.rejects(reader.schema, /no batch to take the schema from/);
    const reader2 = createAsyncDeviceStreamReader();
    const r2 = await produceAsyncDeviceStream([], reader2.handler, { schema: new Schema([new Field('x', new Int32())]) });
    assert.equal(r2.end, 'complete');
    const all: RecordBatch[] = [];
    for await (const b of reader2) all.push(b as RecordBatch);
    assert.equal(all.length, 0);
    assert.deepEqual((await reader2.schema).fields.map((f) => f.name), ['x']);
  });
});
