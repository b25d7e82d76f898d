/**
 * The async device stream interface into flechette (src/flechette/async.ts): the handler a
 * producer pushes to, and the flechette tables it pushes. Against the C peer (test/async/peer.c: a
 * producer on its own pthread, CPU device arrays it counts), through the native ring and through
 * JS callbacks, and against the main entry's JS producer (`produceAsyncDeviceStream` of arrow-js
 * batches): values compared with what was produced, one table alive at a time unless kept, every
 * batch released once, the accounting back to zero.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Table, vectorFromArray } from 'apache-arrow';
import { produceAsyncDeviceStream } from '../../src/async/index.js';
import { asyncRing, asyncRingMissing } from '../../src/async/ring.js';
import * as F from '../../src/flechette/index.js';
import { accounting } from '../../src/memory/index.js';
import { collectUntil } from '../helpers/gc.js';
import { asyncPeer, peerMissing } from '../async/peer.js';

const ringSkip = asyncRing() ? false : `the native ring is not available: ${asyncRingMissing}`;

async function settle(): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0 && (peerMissing !== undefined || asyncPeer().liveBatches() === 0), 100);
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
}

/** Sum of x over a flechette table of struct<x: int32>. */
function sumX(t: F.ImportedTable): bigint {
  let s = 0n;
  for (const v of t.getChild('x')!.toArray() as Int32Array) s += BigInt(v);
  return s;
}

/** Sum of x over batches 0..n-1 of `rows` rows: x = 0 .. n*rows-1 (peer.c). */
const expectedSum = (n: number, rows: number): bigint => (BigInt(n * rows) * BigInt(n * rows - 1)) / 2n;

for (const nativeRing of [true, false]) {
  describe(`flechette async reader: the C peer's thread pushes (${nativeRing ? 'native ring' : 'JS callbacks'})`, { skip: peerMissing ?? (nativeRing && ringSkip) }, () => {
    test('every batch arrives as a flechette table with its metadata, zero-copy, the queue bounded; each is released as the reader moves on', async () => {
      const peer = asyncPeer();
      await (async () => {
        const reader = F.createAsyncDeviceStreamReader({ nativeRing, queueSize: 3 });
        const p = peer.produce(reader.handler, 20, 1000, -1);
        const schema = await reader.schema;
        assert.deepEqual(schema.fields.map((f) => f.name), ['x']);
        assert.equal(schema.fields[0]!.type.typeId, 2, 'flechette\'s Int type');
        const copied = accounting().copiedBytes;
        let sum = 0n;
        let n = 0;
        let previous: F.ImportedTable | null = null;
        for await (const t of reader.tasks()) {
          assert.ok(t.data instanceof F.ImportedTable);
          assert.equal(t.metadata?.get('batch'), String(n));
          if (previous !== null) assert.equal(previous.released, true, 'the table before was released when the reader moved on');
          assert.ok(peer.liveBatches() <= 4, `at most the queue and the current table live (${peer.liveBatches()})`);
          sum += sumX(t.data as F.ImportedTable);
          previous = t.data as F.ImportedTable;
          n++;
        }
        assert.equal(n, 20);
        assert.equal(sum, expectedSum(20, 1000));
        assert.equal(accounting().copiedBytes, copied, 'nothing copied');
        assert.equal(reader.additionalMetadata?.get('rows'), '20000');
        assert.ok(reader.maxQueued <= 3);
        await reader.released;
        const stats = await peer.produceWait(p);
        assert.equal(stats.extracted, 20);
      })();
      await settle();
    });

    test('a kept table outlives the reading until its release(), which releases the peer\'s batch once and detaches', async () => {
      const peer = asyncPeer();
      await (async () => {
        const reader = F.createAsyncDeviceStreamReader({ nativeRing, queueSize: 2 });
        const p = peer.produce(reader.handler, 5, 100, -1);
        let kept: F.ImportedTable | undefined;
        let n = 0;
        for await (const t of reader) {
          if (n === 2) kept = reader.keep(t as F.ImportedTable);
          n++;
        }
        await reader.released;
        await peer.produceWait(p);
        assert.equal(peer.liveBatches(), 1, 'only the kept batch is live');
        const x = kept!.getChild('x')!.data[0]!.values as Int32Array;
        assert.deepEqual([x[0], x[99]], [200, 299]);
        kept!.release();
        assert.equal(peer.liveBatches(), 0);
        assert.equal(x.byteLength, 0, 'released means detached');
      })();
      await settle();
    });

    test('an on_error instead of batch 3 rejects with an AsyncStreamError after the three batches before it', async () => {
      const peer = asyncPeer();
      await (async () => {
        const reader = F.createAsyncDeviceStreamReader({ nativeRing, queueSize: 4 });
        const p = peer.produce(reader.handler, 10, 10, 3);
        let n = 0;
        await assert.rejects(
          (async () => {
            for await (const t of reader) {
              assert.equal(sumX(t as F.ImportedTable), expectedSum(n + 1, 10) - expectedSum(n, 10));
              n++;
            }
          })(),
          (e: unknown) => e instanceof F.AsyncStreamError && /EIO: producer failed on purpose/.test(e.message),
        );
        assert.equal(n, 3);
        await reader.released;
        await peer.produceWait(p);
      })();
      await settle();
    });
  });
}

describe('flechette async reader: the main entry\'s JS producer pushes arrow-js batches', () => {
  test('the values of every batch, with per-task metadata, as flechette tables; all released at the end', async () => {
    await (async () => {
      const t = new Table({ x: vectorFromArray(Int32Array.from({ length: 1000 }, (_, i) => i * 2)), s: vectorFromArray(Array.from({ length: 1000 }, (_, i) => (i % 3 === 0 ? null : `v${i}`))) });
      const parts = [t.slice(0, 300), t.slice(300, 700), t.slice(700)].flatMap((s) => s.batches);
      const reader = F.createAsyncDeviceStreamReader({ queueSize: 2 });
      const done = produceAsyncDeviceStream(parts, reader.handler, { taskMetadata: (_b, i) => new Map([['i', String(i)]]) });
      const xs: number[] = [];
      const ss: unknown[] = [];
      const mds: string[] = [];
      for await (const r of reader.tasks()) {
        const table = r.data as F.ImportedTable;
        xs.push(...(table.getChild('x')!.toArray() as Int32Array));
        ss.push(...Array.from({ length: table.numRows }, (_, i) => table.getChild('s')!.at(i)));
        mds.push(r.metadata?.get('i') ?? '?');
      }
      assert.deepEqual(xs, Array.from({ length: 1000 }, (_, i) => i * 2));
      assert.deepEqual(ss, Array.from({ length: 1000 }, (_, i) => (i % 3 === 0 ? null : `v${i}`)));
      assert.deepEqual(mds, ['0', '1', '2']);
      assert.equal((await done).end, 'complete');
      await reader.released;
    })();
    await settle();
  });
});
