/**
 * The async device stream interface against Arrow C++
 * (CreateAsyncDeviceStreamHandler, ExportAsyncRecordBatchReader) through
 * the test shim: both directions, and Arrow C++'s known deviation on cancel.
 * Skipped, with the reason, when the shim is not built (npm run setup:arrow-cpp).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RecordBatch, tableFromIPC } from 'apache-arrow';
import { readFileSync } from 'node:fs';
import { accounting, createAsyncDeviceStreamReader, produceAsyncDeviceStream } from '../../src/index.js';
import { asyncRing } from '../../src/async/ring.js';
import { collectUntil } from '../helpers/gc.js';
import { diffTables } from '../helpers/compare.js';
import { arrowCppMissing, arrowCppPoolBytes, AsyncConsumer, asyncProduce, Batches } from '../peers/arrow-cpp/arrowcpp.js';

const GOLD = new URL('../../../shared/testdata/arrow-testing/', import.meta.url);
const missing = arrowCppMissing();
const skip = missing ? `Arrow C++ shim not available: ${missing}` : false;

async function settle(pool: number): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0 && arrowCppPoolBytes() === pool, 100);
  assert.ok(ok, `accounting ${JSON.stringify(accounting())}, Arrow pool ${arrowCppPoolBytes() - pool} bytes over`);
}

describe('async device streams with Arrow C++', { skip }, () => {
  for (const [name, nativeRing] of [
    ['generated_primitive', true], ['generated_nested', true], ['generated_dictionary', true], ['generated_binary_view', true],
    // The JS-callback ways too (the reader's handler and our producer's calls), where the native library is not used
    ['generated_primitive', false], ['generated_nested', false],
  ] as const) {
    test(`${name}: Arrow's producer thread into our reader, then ours into Arrow's handler (${nativeRing ? 'native ring and pump' : 'JS callbacks'})`, async () => {
      const pool = arrowCppPoolBytes();
      await (async () => {
        const path = new URL(`${name}.arrow_file`, GOLD).pathname;
        const expected = tableFromIPC(readFileSync(path));
        const file = Batches.readIpcFile(path);
        const reader = createAsyncDeviceStreamReader({ queueSize: 2, validate: 'full', keep: true, toHost: true, nativeRing });
        const producing = asyncProduce(file, reader.handler);
        const got: RecordBatch[] = [];
        for await (const b of reader) got.push(b);
        await producing;
        assert.equal(got.length, expected.batches.length);
        for (let i = 0; i < got.length; i++) assert.equal(diffTables(expected.batches[i]!, got[i]!), undefined, `batch ${i}`);
        const consumer = new AsyncConsumer(3);
        try {
          const collected = consumer.collect();
          const r = await produceAsyncDeviceStream(got, consumer.handler, { nativeRing });
          assert.equal(r.end, 'complete');
          assert.equal(r.batches, got.length);
          if (!nativeRing || asyncRing()) assert.equal(r.nativeRing, nativeRing, 'served the way asked for');
          if (!nativeRing || asyncRing()) assert.equal(reader.nativeRing, nativeRing);
          const back = await collected;
          try {
            assert.equal(file.diff(back), undefined, "Arrow's Equals against its own read of the file");
          } finally {
            back.free();
          }
        } finally {
          consumer.free();
          file.free();
        }
      })();
      await settle(pool);
    });
  }

  test("cancel: Arrow C++ ends a cancelled stream with on_error(EINVAL), which we record but do not throw", async () => {
    const pool = arrowCppPoolBytes();
    await (async () => {
      const path = new URL('generated_primitive.arrow_file', GOLD).pathname;
      const file = Batches.readIpcFile(path);
      const reader = createAsyncDeviceStreamReader({ queueSize: 1 });
      const producing = asyncProduce(file, reader.handler).catch((e: unknown) => e);
      for await (const _ of reader) break; // cancel after the first batch
      await reader.released;
      const ended = await producing;
      // The spec says a successful cancel must not call on_error; Arrow C++ 26 does (EINVAL).
      if (reader.errorAfterCancelled) assert.equal(reader.errorAfterCancelled.code, 'EINVAL');
      void ended;
      file.free();
    })();
    await settle(pool);
  });
});
