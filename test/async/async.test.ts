/**
 * The async device stream interface against a C peer with real threads
 * (test/async/peer.c): a producer pushing from its own pthread into our
 * handler, and a consumer whose worker thread extracts our tasks and calls
 * request() from that thread.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RecordBatch, Table, vectorFromArray, Int32, Field, Schema } from 'apache-arrow';
import { accounting, DeviceArray, Errno, exportDeviceArray, importDeviceArray, nativeMemory, type Memory, type Ptr } from '../../src/index.js';
import { AsyncStreamError, createAsyncDeviceStreamReader, produceAsyncDeviceStream } from '../../src/async/index.js';
import { collectUntil } from '../helpers/gc.js';
import { asyncPeer, peerMissing } from './peer.js';
import { asyncRing, asyncRingMissing } from '../../src/async/ring.js';

const skip = peerMissing ?? false;
// The native ring's prebuilt library (npm test's pretest builds it; test/async/ring.test.ts fails where a
// C compiler could have built it and it is missing).
const ringSkip = asyncRing() ? false : `the native ring is not available: ${asyncRingMissing}`;

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

/** Batches of struct<x: int32>: batch b has `rows` rows, x = b * rows + i. */
const makeBatches = (n: number, rows: number): RecordBatch[] =>
  Array.from({ length: n }, (_, b) => new Table({ x: vectorFromArray(Int32Array.from({ length: rows }, (_, i) => b * rows + i)) }).batches[0]!);

/** Runs `f` counting the native memory's async calls (koffi's worker-thread form). */
async function countingAsyncCalls<T>(f: () => Promise<T>): Promise<{ result: T; asyncCalls: number }> {
  const mem = nativeMemory() as Memory;
  const original = mem.callAsync;
  let asyncCalls = 0;
  mem.callAsync = (...args) => {
    asyncCalls++;
    return original.apply(mem, args);
  };
  try {
    return { result: await f(), asyncCalls };
  } finally {
    mem.callAsync = original;
  }
}

// Both handlers a native producer can be given: the prebuilt native ring (the default where it loads,
// src/async/ring.ts) and JS callbacks (one koffi hop per call).
for (const nativeRing of [true, false]) {
describe(`async consumer: a C producer thread pushes to our handler (${nativeRing ? 'native ring' : 'JS callbacks'})`, { skip: skip || (nativeRing && ringSkip) }, () => {
  test('receives every batch with its metadata, and never queues more than it requested', async () => {
    const peer = asyncPeer();
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ nativeRing, queueSize: 3 });
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
      const reader = createAsyncDeviceStreamReader({ nativeRing, queueSize: 2 });
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
      const reader = createAsyncDeviceStreamReader({ nativeRing });
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
        const reader = createAsyncDeviceStreamReader({ nativeRing, queueSize: 4 });
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

  test('a reader that stops reading still learns of the end and the release', async () => {
    const peer = asyncPeer();
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ nativeRing, queueSize: 4 });
      // The reader waits before anything arrives (the producer needs its on_schema answered first), so
      // the batches come by a wake-up of the waiting reader, not by a take of its own; the end and the
      // release come only after it stopped reading (-4: the end waits for go()).
      const p = peer.produce(reader.handler, 2, 3, -4);
      assert.ok(await reader.next(), 'one batch read; the other stays queued');
      peer.go(p);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const timeout = new Promise<string>((r) => (timer = setTimeout(() => r('timed out'), 5000)));
      assert.equal(await Promise.race([reader.released.then(() => 'released'), timeout]), 'released');
      clearTimeout(timer);
      reader.cancel(); // the queued task, extracted with a NULL out
      const stats = await peer.produceWait(p);
      assert.equal(stats.extracted + stats.extractedNull, stats.produced);
      assert.equal(stats.callsAfterRelease, 0);
    })();
    await settle();
  });

  test('a task whose metadata pointer is invalid is delivered, the metadata replaced by the error', async () => {
    const peer = asyncPeer();
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ nativeRing, queueSize: 2 });
      const p = peer.produce(reader.handler, 3, 5, -3);
      let n = 0;
      for await (const t of reader.tasks()) {
        assert.equal((t.data as RecordBatch).numRows, 5);
        assert.match(t.metadata?.get('arrow-device:error') ?? '', /metadata/, 'the error names the metadata');
        n++;
      }
      assert.equal(n, 3);
      await reader.released;
      await peer.produceWait(p);
    })();
    await settle();
  });

  for (const after of [0, 1, 5, 19]) {
    test(`break after ${after} batches cancels the producer, which cleans up every task and releases without on_error`, async () => {
      const peer = asyncPeer();
      await (async () => {
        const reader = createAsyncDeviceStreamReader({ nativeRing, queueSize: 4 });
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
        // The producer runs on its own thread, and with the native ring it never waits for ours: after 19
        // of 20 it may have sent the last task, the end and the release before the break, and then there
        // is nothing left to cancel. Otherwise the break must have cancelled it.
        const finishedFirst = after === 19 && reader.nativeRing && stats.produced === 20 && !stats.cancelled;
        if (!finishedFirst) assert.equal(stats.cancelled, true);
        assert.equal(stats.extracted + stats.extractedNull, stats.produced, 'every task handed over was extracted (data or NULL)');
        assert.equal(stats.extracted, after);
        assert.equal(stats.callsAfterRelease, 0, 'no request or cancel after the producer released the handler');
        assert.equal(reader.errorAfterCancelled, null, 'no on_error after a successful cancel');
      })();
      await settle();
    });
  }

  test('10,000 batches', async () => {
    const peer = asyncPeer();
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ nativeRing, queueSize: 8 });
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
}

// Both ways our producer can serve a native consumer: the prebuilt native pump (the default where it loads,
// src/async/ring.ts) and JS callbacks (the handler called on koffi workers, the consumer's calls hops).
for (const nativeRing of [true, false]) {
describe(`async producer: we push to a C consumer whose worker thread requests (${nativeRing ? 'native pump' : 'JS callbacks'})`, { skip: skip || (nativeRing && ringSkip) }, () => {
  const batches = makeBatches;
  const produce: typeof produceAsyncDeviceStream = async (source, handler, opts = {}) => {
    const result = await produceAsyncDeviceStream(source, handler, { ...opts, nativeRing });
    assert.equal(result.nativeRing, nativeRing, 'the way asked for served the consumer');
    return result;
  };

  test(
    nativeRing
      ? "calls the handler from the pump's thread: no koffi call at all, none of it on the JS thread"
      : "calls a foreign handler's callbacks with the async form, never on the JS thread",
    async () => {
      const peer = asyncPeer();
      await (async () => {
        const h = peer.consumer(2, -1, false);
        const { result, asyncCalls } = await countingAsyncCalls(() => produce(batches(10, 10), h));
        const stats = await peer.consumerWait(h, 10_000);
        assert.equal(result.end, 'complete');
        assert.equal(result.batches, 10);
        assert.equal(stats.sum, expectedSum(10, 10));
        // on_schema, 10 x on_next_task, the end of stream, release: through koffi's async form, or the pump
        assert.equal(asyncCalls, nativeRing ? 0 : 13, 'how the handler callbacks were called');
        assert.equal(stats.callsOnCreatorThread, 0, 'no handler callback ran on the JS thread');
        assert.equal(stats.released, 1);
        assert.equal(stats.endOfStream, true);
      })();
      await settle();
    },
  );

  test('delivers every batch; the consumer checks each value', async () => {
    const peer = asyncPeer();
    await (async () => {
      const h = peer.consumer(2, -1, false);
      const result = await produce(batches(50, 100), h, { additionalMetadata: new Map([['rows', '5000']]) });
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
      await produce(gen(), h);
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
      await produce(rs, h2);
      assert.equal((await peer.consumerWait(h2, 10_000)).sum, expectedSum(4, 10));
    })();
    await settle();
  });

  test('per-task metadata reaches the consumer with each task', async () => {
    const peer = asyncPeer();
    await (async () => {
      const h = peer.consumer(3, -1, false);
      const result = await produce(batches(20, 4), h, { taskMetadata: (_b, i) => new Map([['i', String(i)]]) });
      const stats = await peer.consumerWait(h, 10_000);
      assert.equal(result.end, 'complete');
      assert.equal(stats.taskMetadata, 20);
      assert.equal(stats.taskMetadataSum, (19 * 20) / 2);
    })();
    await settle();
  });

  for (const failAt of [0, 6]) {
    test(`a consumer that refuses task ${failAt} (non-zero on_next_task) stops production; it gets nothing more but the release`, async () => {
      const peer = asyncPeer();
      await (async () => {
        const h = peer.consumer(8, -1, false, { failAt });
        const result = await produce(batches(40, 4), h);
        const stats = await peer.consumerWait(h, 10_000);
        assert.equal(result.end, 'consumer-stopped');
        assert.equal(result.error?.errno, Errno.EIO);
        assert.match(result.error?.message ?? '', /on_next_task/);
        assert.equal(result.batches, failAt + 1, 'the tasks handed over, the refused one last');
        assert.ok(stats.batches <= failAt, `the consumer read ${stats.batches} batches`);
        assert.equal(stats.callsAfterRefusal, 0, 'no on_next_task after the refusal (tasks already queued are cleaned up)');
        assert.equal(stats.endOfStream, false, 'no end of stream after the refusal');
        assert.equal(stats.errors, 0);
        assert.equal(stats.released, 1);
      })();
      await settle(); // every task queued behind the refused one was cleaned up, every export released
    });
  }

  test('a consumer that extracts a task again (through the struct, through a copy) gets EINVAL and nothing; its calls after the release are ignored', async () => {
    const peer = asyncPeer();
    await (async () => {
      const h = peer.consumer(4, -1, false, { misbehave: 1 | 2 });
      const result = await produce(batches(12, 5), h);
      const stats = await peer.consumerWait(h, 10_000); // then request(1) and cancel(), after the release
      assert.equal(result.end, 'complete');
      assert.equal(stats.batches, 12);
      assert.equal(stats.sum, expectedSum(12, 5));
      assert.equal(stats.badExtractsRefused, 24, 'every second extraction refused, none moved a batch twice');
    })();
    await settle(); // each batch released exactly once
  });

  // A producer that misses the failure waits for credit forever: bounded, it fails instead of hanging.
  test('a batch that cannot be exported (released before the consumer extracts it) ends the stream with on_error, then release', { timeout: 30_000 }, async () => {
    const peer = asyncPeer();
    await (async () => {
      const list = batches(5, 4);
      const schema = list[0]!.schema;
      // DeviceArrays: moved when exported, so one released early cannot be exported any more.
      const devices = list.map((b) => importDeviceArray(exportDeviceArray(b), schema));
      const h = peer.consumer(1, -1, false); // one at a time: the failure must unblock the producer
      const result = await produce(devices, h, {
        schema,
        taskMetadata: (item, i) => {
          if (i === 2) (item as DeviceArray).release();
          return null;
        },
      });
      const stats = await peer.consumerWait(h, 10_000);
      assert.equal(stats.timedOut, false);
      assert.equal(result.end, 'error');
      assert.equal(stats.batches, 2);
      assert.equal(stats.errors, 1, 'on_error followed the failed extraction (the spec)');
      assert.equal(stats.endOfStream, false);
      assert.equal(stats.released, 1);
      for (const d of devices) d.release();
    })();
    await settle();
  });

  test('a consumer that keeps every batch past the end of the stream releases them later, from its thread', async () => {
    const peer = asyncPeer();
    await (async () => {
      const h = peer.consumer(4, -1, false, { hold: true });
      const result = await produce(batches(30, 10), h);
      assert.equal(result.end, 'complete');
      // The batches are still the consumer's: our exports are alive until it releases them.
      assert.ok(accounting().liveExports > 0, 'the batches outlive the stream');
      const stats = await peer.consumerWait(h, 10_000); // the consumer's worker releases them now
      assert.equal(stats.batches, 30);
      assert.equal(stats.sum, expectedSum(30, 10));
    })();
    await settle();
  });

  test('a cancel stops production and releases, with no on_error', async () => {
    const peer = asyncPeer();
    await (async () => {
      const h = peer.consumer(1, 5, false);
      const result = await produce(batches(100, 10), h);
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
      const result = await produce(batches(3, 10), h);
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
      const result = await produce(failing(), h);
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
}

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

describe('async: our producer into our reader, on the JS thread (callbacks called directly, no koffi hop)', () => {
  /** The reader's handler callbacks in the order they ran. */
  function trace(reader: ReturnType<typeof createAsyncDeviceStreamReader>): string[] {
    const calls: string[] = [];
    const r = reader as unknown as Record<string, (...a: unknown[]) => unknown>;
    for (const [name, label] of [['onSchema', 'schema'], ['onNextTask', 'task'], ['onError', 'error'], ['onRelease', 'release']] as const) {
      const f = r[name]!.bind(reader);
      r[name] = (...a: unknown[]) => {
        calls.push(label === 'task' && a[0] === 0n ? 'end' : label);
        return f(...a);
      };
    }
    return calls;
  }

  async function settleJs(): Promise<void> {
    const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0, 100);
    assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
  }

  /** The producer's ArrowAsyncProducer `request`, called as a consumer would (once the schema arrived). */
  function requestOf(reader: ReturnType<typeof createAsyncDeviceStreamReader>): (n: bigint) => void {
    const mem = nativeMemory();
    const producer: Ptr = mem.readPtr(reader.handler + BigInt(mem.layouts.ArrowAsyncDeviceStreamHandler.offsets.producer!));
    const fn = mem.readPtr(producer + BigInt(mem.layouts.ArrowAsyncProducer.offsets.request!));
    return (n) => void mem.call(fn, { name: 'async_request', result: 'void', params: ['pointer', 'int64'] }, producer, n);
  }

  test('makes no koffi call at all, and runs the callbacks in the spec order: on_schema, on_next_task..., the end, release once', async () => {
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ queueSize: 3 });
      const calls = trace(reader);
      const { result, asyncCalls } = await countingAsyncCalls(async () => {
        const done = produceAsyncDeviceStream(makeBatches(20, 10), reader.handler, {
          additionalMetadata: new Map([['rows', '200']]),
          taskMetadata: (_b, i) => new Map([['batch', String(i)]]),
        });
        let sum = 0n;
        let n = 0;
        for await (const t of reader.tasks()) {
          assert.deepEqual(decodeMd(t.metadata), { batch: String(n) });
          sum += sumOf(t.data as RecordBatch);
          n++;
        }
        assert.equal(n, 20);
        assert.equal(sum, expectedSum(20, 10));
        return done;
      });
      assert.equal(asyncCalls, 0, 'no handler callback went through a koffi worker thread');
      assert.equal(result.end, 'complete');
      assert.equal(result.batches, 20);
      assert.deepEqual(decodeMd(reader.additionalMetadata), { rows: '200' });
      assert.equal(reader.deviceType, 1);
      await reader.released;
      assert.deepEqual(calls, ['schema', ...new Array(20).fill('task'), 'end', 'release']);
      assert.ok(reader.maxQueued <= 3, `queued at most 3 (queued ${reader.maxQueued})`);
    })();
    await settleJs();
  });

  test('back-pressure: the producer never hands over more than queueSize tasks ahead of the reader', async () => {
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ queueSize: 2 });
      let handed = 0;
      const done = produceAsyncDeviceStream(makeBatches(30, 10), reader.handler, { taskMetadata: () => (handed++, null) });
      let read = 0;
      let ahead = 0;
      for await (const _ of reader) {
        read++;
        ahead = Math.max(ahead, handed - read);
        await new Promise((r) => setTimeout(r, 1)); // slower than the producer
      }
      assert.equal(read, 30);
      assert.ok(ahead <= 2, `the producer ran at most 2 tasks ahead (ran ${ahead})`);
      assert.ok(reader.maxQueued <= 2, `queue stayed <= 2 (was ${reader.maxQueued})`);
      assert.equal((await done).end, 'complete');
    })();
    await settleJs();
  });

  test('request() never calls on_next_task itself: the tasks it allows arrive after it returns', async () => {
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ queueSize: 1 });
      let handed = 0;
      const done = produceAsyncDeviceStream(makeBatches(5, 10), reader.handler, { taskMetadata: () => (handed++, null) });
      await reader.schema;
      await new Promise((r) => setImmediate(r));
      assert.equal(handed, 1, 'the first task, as requested');
      requestOf(reader)(2n);
      assert.equal(handed, 1, 'nothing handed over from inside request');
      await new Promise((r) => setImmediate(r));
      assert.equal(handed, 3, 'the two requested tasks, once request returned');
      let n = 0;
      for await (const _ of reader) n++;
      assert.equal(n, 5);
      assert.equal((await done).end, 'complete');
    })();
    await settleJs();
  });

  test('request(0) ends the stream with on_error(EINVAL), then release', async () => {
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ queueSize: 1 });
      const calls = trace(reader);
      const done = produceAsyncDeviceStream(makeBatches(5, 10), reader.handler);
      await reader.schema;
      requestOf(reader)(0n);
      const err = await (async () => {
        try {
          for await (const _ of reader);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      assert.ok(err instanceof AsyncStreamError, `rejected with an AsyncStreamError, got ${String(err)}`);
      assert.equal(err.errno, Errno.EINVAL);
      assert.match(err.message, /n must be > 0, got 0/);
      const result = await done;
      assert.equal(result.end, 'error');
      await reader.released;
      assert.deepEqual(calls.slice(-2), ['error', 'release']);
    })();
    await settleJs();
  });

  for (const errorAt of [0, 1, 7]) {
    test(`an error in the source after ${errorAt} batches reaches the reader as an AsyncStreamError, after every batch before it`, async () => {
      await (async () => {
        async function* failing(): AsyncGenerator<RecordBatch> {
          yield* makeBatches(errorAt, 10);
          throw new Error('the source broke');
        }
        const reader = createAsyncDeviceStreamReader({ queueSize: 4 });
        const calls = trace(reader);
        const done = produceAsyncDeviceStream(failing(), reader.handler, { schema: makeBatches(1, 1)[0]!.schema });
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
        assert.match(err.message, /EIO: the source broke/);
        assert.equal(n, errorAt, 'every batch before the error was delivered');
        const result = await done;
        assert.equal(result.end, 'error');
        assert.match(String(result.error?.message), /the source broke/);
        await reader.released;
        assert.deepEqual(calls.slice(-2), ['error', 'release']);
      })();
      await settleJs();
    });
  }

  for (const after of [0, 1, 5, 19]) {
    test(`cancel after ${after} batches: the producer stops and releases without on_error, every task handed over is extracted or discarded`, async () => {
      await (async () => {
        const reader = createAsyncDeviceStreamReader({ queueSize: 4 });
        const calls = trace(reader);
        const done = produceAsyncDeviceStream(makeBatches(40, 10), reader.handler);
        let n = 0;
        if (after === 0) {
          await reader.schema;
          reader.cancel();
        } else {
          for await (const _ of reader) if (++n === after) break;
        }
        await reader.released;
        const result = await done;
        assert.equal(result.end, 'cancelled');
        assert.equal(result.cancelled, true);
        assert.ok(result.batches < 40, `stopped early (${result.batches} batches)`);
        assert.equal(reader.discardedTasks, result.batches - after, 'each task handed over and not read was extracted with a NULL out');
        assert.equal(reader.errorAfterCancelled, null, 'no on_error after a successful cancel');
        assert.ok(!calls.includes('error'));
        assert.equal(calls.at(-1), 'release');
        assert.equal(calls.filter((c) => c === 'release').length, 1);
      })();
      await settleJs();
    });
  }

  test('a long stream lets timers run while it goes', async () => {
    await (async () => {
      const reader = createAsyncDeviceStreamReader({ queueSize: 8 });
      let read = 0;
      let readWhenTimerRan = -1;
      setTimeout(() => (readWhenTimerRan = read), 0);
      const done = produceAsyncDeviceStream(makeBatches(1, 8).flatMap((b) => new Array<RecordBatch>(4000).fill(b)), reader.handler);
      for await (const _ of reader) read++;
      assert.equal(read, 4000);
      assert.ok(readWhenTimerRan >= 0 && readWhenTimerRan < 4000, `the timer ran during the stream (after ${readWhenTimerRan} batches)`);
      assert.equal((await done).end, 'complete');
    })();
    await settleJs();
  });
});

test('a reader left after the end of the stream, with tasks still queued, extracts them so the producer cleans up', async () => {
  await (async () => {
    const reader = createAsyncDeviceStreamReader({ queueSize: 8 });
    const done = produceAsyncDeviceStream(makeBatches(5, 10), reader.handler);
    assert.equal((await done).end, 'complete');
    await reader.released; // every task is queued, the end of stream arrived, the handler is released
    let n = 0;
    for await (const _ of reader) if (++n === 2) break;
    assert.equal(reader.discardedTasks, 3, 'the three tasks never read were extracted with a NULL out');
  })();
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0, 100);
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
});
