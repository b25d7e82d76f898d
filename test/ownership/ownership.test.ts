/**
 * Ownership rules (docs/architecture.md#ownership-and-release), proven once for every importer
 * against one C producer that counts what it hands out (counting.c):
 * exactly one release whichever of release(), using, the garbage collector
 * or the end of a stream comes first; released means unreadable; streams
 * keep a bounded number of batches outstanding; our own allocations are
 * tracked.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Int32, Table, type Field, vectorFromArray, type RecordBatch } from 'apache-arrow';
import {
  accounting, ArrowDeviceError, createAsyncDeviceStreamReader, exportRecordBatch, exportTable, freeArrowArray,
  freeArrowArrayStream, freeArrowSchema, freeDeviceArray, freeArrowDeviceArrayStream, importArrayStream, importArrayView,
  importData, importDeviceArray, importDeviceArrayStream, importDeviceData, importDeviceRecordBatch, importRecordBatch,
  importSchema, importTable, importVector, nativeMemory, releaseImport, type ImportedRecordBatch, type Memory, type Ptr,
} from '../../src/index.js';
import { collectUntil } from '../helpers/gc.js';
import { pendingHolderCount } from '../../src/array/owner.js';
import { asyncPeer, peerMissing } from '../async/peer.js';
import { counting, countingMissing } from './counting.js';

const skip = countingMissing;
const m = nativeMemory();
const RELEASED = /read of a released import: its release\(\) \(or \[Symbol\.dispose\]\) was called/;

/** Runs `fn` and checks that the producer and our accounting are back where they were. */
async function balanced(fn: () => void | Promise<void>): Promise<void> {
  const c = counting();
  const before = { out: c.outstanding(), live: accounting().liveImports, dbl: c.doubleReleases() };
  await fn();
  await collectUntil(() => c.outstanding() === before.out && accounting().liveImports === before.live);
  assert.equal(c.outstanding(), before.out, 'every array handed out was released');
  assert.equal(accounting().liveImports, before.live, 'no import left live');
  assert.equal(c.doubleReleases(), before.dbl, 'nothing released twice');
}

function xValues(b: RecordBatch): number[] {
  return [...(b.getChild('x')!.toArray() as Int32Array)];
}

describe('one release per import, whichever way comes first', { skip }, () => {
  const c = (): ReturnType<typeof counting> => counting();

  test('importRecordBatch: release() after values were read detaches the views and releases once', () =>
    balanced(() => {
      const schema = importSchema(c().schema());
      const a = c().batch(100, 7);
      const batch = importRecordBatch(a, schema);
      m.free(a);
      assert.equal(c().outstanding() > 0, true);
      const values = batch.getChild('x')!.toArray() as Int32Array;
      assert.equal(values[0], 7);
      const releases = c().releases();
      batch.release();
      assert.equal(c().releases(), releases + 1, 'released now, by release()');
      assert.equal(batch.released, true);
      assert.equal(values.length, 0, 'an escaped typed array reads as empty, never as freed memory');
      assert.equal(values.buffer.byteLength, 0);
      assert.throws(() => batch.getChild('x')!.get(0), RELEASED);
      assert.throws(() => batch.getChild('x')!.get(0), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released');
      batch.release();
      batch[Symbol.dispose]();
      assert.equal(c().releases(), releases + 1, 'a second release does nothing');
    }));

  test('importRecordBatch: `using` releases at the end of the scope', () =>
    balanced(() => {
      const schema = importSchema(c().schema());
      const releases = c().releases();
      let escaped: Int32Array;
      {
        const a = c().batch(10, 1);
        using batch = importRecordBatch(a, schema);
        m.free(a);
        escaped = batch.getChild('x')!.toArray() as Int32Array;
        assert.equal(escaped[9], 10);
      }
      assert.equal(c().releases(), releases + 1);
      assert.equal(escaped.length, 0);
    }));

  test('importRecordBatch: the garbage collector releases a batch nobody released, exactly once', () =>
    balanced(() => {
      const schema = importSchema(c().schema());
      (() => {
        const a = c().batch(50);
        const b = importRecordBatch(a, schema);
        m.free(a);
        assert.equal(xValues(b)[49], 49);
      })();
    }));

  test('an import released before its holder is registered leaves nothing pending; one registered is unregistered', () =>
    balanced(async () => {
      const schema = importSchema(c().schema());
      await Promise.resolve(); // whatever an earlier test left pending is registered first
      const base = pendingHolderCount();
      // Import and release in one synchronous step, as a stream reader does: nothing stays pending (a
      // loop of them used to keep up to 4,096 released imports from the garbage collector).
      for (let i = 0; i < 100; i++) {
        const a = c().batch(3, i);
        const b = importRecordBatch(a, schema);
        m.free(a);
        assert.equal(xValues(b)[0], i);
        b.release();
        assert.equal(pendingHolderCount(), base, `import ${i} left nothing pending`);
      }
      const three = (): ImportedRecordBatch[] =>
        [1, 2, 3].map((k) => {
          const a = c().batch(2, k);
          const b = importRecordBatch(a, schema);
          m.free(a);
          return b;
        });
      // Released last-in first-out: each is the last pending one when released.
      const lifo = three();
      assert.equal(pendingHolderCount(), base + 3);
      for (const b of [...lifo].reverse()) b.release();
      assert.equal(pendingHolderCount(), base);
      // Released first-in first-out (as table.release() releases its batches): each leaves the list too.
      const fifo = three();
      for (const [k, b] of fifo.entries()) {
        b.release();
        assert.equal(pendingHolderCount(), base + 2 - k, `batch ${k} left the list at its release`);
      }
      await Promise.resolve();
      assert.equal(pendingHolderCount(), 0);
      // Registered (a microtask passed), then released: unregistered, so the collector never releases
      // it again (balanced() counts double releases).
      const a = c().batch(4, 9);
      const kept = importRecordBatch(a, schema);
      m.free(a);
      assert.equal(xValues(kept)[3], 12);
      await Promise.resolve();
      assert.equal(pendingHolderCount(), 0, 'registered at the microtask');
      const releases = c().releases();
      kept.release();
      assert.equal(c().releases(), releases + 1);
    }));

  test('importData, importVector and importArrayView release on release() / releaseImport', () =>
    balanced(() => {
      // importData of the whole struct array, as Data of its struct type
      const a1 = c().batch(5, 1);
      const data = importData(a1, c().schema());
      m.free(a1);
      assert.equal(data.children[0]!.values[4], 5);
      data.release();
      assert.throws(() => data.children[0]!.values, RELEASED);
      const a2 = c().batch(5, 1);
      const vec = importVector(a2, c().schema());
      m.free(a2);
      assert.equal(vec.data[0]!.children[0]!.values[0], 1);
      using _v = vec;
      const a3 = c().batch(3, 2);
      const view = importArrayView(a3, c().schema());
      m.free(a3);
      const x = view.children[0]!.buffers[1]!;
      assert.equal(new Int32Array(x.buffer, x.byteOffset, 3)[0], 2);
      releaseImport(view);
      assert.equal(x.byteLength, 0, 'the byte view is detached');
      assert.throws(() => view.children[0]!.buffers, RELEASED);
    }));

  test('importTable: release() releases every batch; a failure releases the batches imported before it at once', () =>
    balanced(() => {
      const schema = importSchema(c().schema());
      const ptrs = [c().batch(4, 0), c().batch(4, 4)];
      const table = importTable(ptrs, schema);
      for (const p of ptrs) m.free(p);
      assert.equal(table.getChild('x')!.get(5), 5);
      const releases = c().releases();
      table.release();
      assert.equal(c().releases(), releases + 2);
      assert.throws(() => table.getChild('x')!.get(5), RELEASED);

      const good = c().batch(4, 0);
      const bad = m.alloc(m.layouts.ArrowArray.size); // released (release NULL): the import fails on arrays[1]
      const r2 = c().releases();
      assert.throws(() => importTable([good, bad], schema), /arrays\[1\]: the struct is released/);
      assert.equal(c().releases(), r2 + 1, 'arrays[0] was released at once, not at a later collection');
      m.free(good);
      m.free(bad);
    }));

  test('device imports: importDeviceData, importDeviceRecordBatch and DeviceArray release on release() and using', () =>
    balanced(() => {
      const schema = importSchema(c().schema());
      const d1 = c().deviceBatch(8, 3);
      const batch = importDeviceRecordBatch(d1, schema);
      m.free(d1);
      assert.ok(!('deviceType' in batch && typeof (batch as { exportTo?: unknown }).exportTo === 'function'));
      const rb = batch as Extract<typeof batch, { numRows: number }>;
      assert.equal(xValues(rb)[0], 3);
      rb.release();
      assert.throws(() => rb.getChild('x')!.get(0), RELEASED);

      const d2 = c().deviceBatch(8, 3);
      const data = importDeviceData(d2, c().schema());
      m.free(d2);
      (data as { release(): void }).release();

      const d3 = c().deviceBatch(8, 3);
      const releases = c().releases();
      {
        using dev = importDeviceArray(d3, c().schema());
        m.free(d3);
        assert.equal(dev.length, 8);
      }
      assert.equal(c().releases(), releases + 1, 'using released the DeviceArray');
    }));
});

describe('streams keep a bounded number of batches outstanding', { skip }, () => {
  const c = (): ReturnType<typeof counting> => counting();
  const N = 1000;
  const ROWS = 256 * 1024; // 1 MiB of int32 per batch

  test(`for...of over ${N} batches of 1 MiB that are not kept: at most 2 outstanding, every value read`, () =>
    balanced(() => {
      c().resetPeak();
      const s = c().stream(N, ROWS);
      const reader = importArrayStream(s);
      freeArrowArrayStream(s);
      let sum = 0;
      let n = 0;
      for (const batch of reader) {
        const x = batch.getChild('x')!.toArray() as Int32Array;
        sum += x[0]! + x[ROWS - 1]!;
        n++;
      }
      assert.equal(n, N);
      // batch k holds k*ROWS .. k*ROWS + ROWS - 1
      assert.equal(sum, ROWS * N * (N - 1) + N * (ROWS - 1));
      assert.ok(c().peak() <= 2, `peak outstanding ${c().peak()}`);
      assert.equal(c().outstanding(), 0, 'the last batch is released when the reading ends');
    }));

  test(`for await...of over ${N} device-stream batches: at most 2 outstanding`, () =>
    balanced(async () => {
      c().resetPeak();
      const s = c().deviceStream(N, ROWS);
      const reader = importDeviceArrayStream(s, { toHost: true });
      freeArrowDeviceArrayStream(s);
      let n = 0;
      let last = -1;
      for await (const batch of reader) {
        last = (batch.getChild('x')!.get(0) as number);
        n++;
      }
      assert.equal(n, N);
      assert.equal(last, (N - 1) * ROWS);
      assert.ok(c().peak() <= 2, `peak outstanding ${c().peak()}`);
    }));

  test('a batch the reader released throws a clear error; keep() and { keep: true } keep batches', () =>
    balanced(() => {
      const s = c().stream(3, 4);
      const reader = importArrayStream(s);
      freeArrowArrayStream(s);
      const first = reader.next().value!;
      const second = reader.keep(reader.next().value!);
      assert.throws(
        () => first.getChild('x')!.get(0),
        /the stream reader released it when its next\(\) was called again .*reader\.keep\(batch\), the \{ keep: true \} option or reader\.toTable\(\)/,
      );
      const third = reader.next().value!;
      assert.equal(reader.next().done, true);
      assert.throws(() => third.getChild('x')!.get(0), /the stream reader released it when its next\(\) was called again/);
      assert.equal(second.getChild('x')!.get(0), 4, 'a kept batch stays readable');
      second.release();

      const s2 = c().stream(3, 4);
      const all: RecordBatch[] = [];
      for (const b of importArrayStream(s2, { keep: true })) all.push(b);
      freeArrowArrayStream(s2);
      assert.deepEqual(all.map((b) => b.getChild('x')!.get(0)), [0, 4, 8]);
      for (const b of all) releaseImport(b);

      const s3 = c().stream(3, 4);
      const table = importArrayStream(s3).toTable();
      freeArrowArrayStream(s3);
      assert.equal(table.getChild('x')!.get(11), 11);
      table.release();
    }));

  test('break releases the stream and the current batch at once', () =>
    balanced(() => {
      const s = c().stream(10, 4);
      const reader = importArrayStream(s);
      freeArrowArrayStream(s);
      const streams = c().streamReleases();
      for (const b of reader) if (b.getChild('x')!.get(0) === 8) break;
      assert.equal(c().streamReleases(), streams + 1);
      assert.equal(c().outstanding(), 0);
    }));

  test('the async reader keeps at most one batch it handed out (plus its request queue)', { skip: peerMissing }, async () => {
    const p = asyncPeer();
    const reader = createAsyncDeviceStreamReader({ queueSize: 2 });
    const prod = p.produce(reader.handler, 300, 64 * 1024, -1);
    let peak = 0;
    let n = 0;
    for await (const b of reader) {
      assert.ok('numRows' in b);
      n++;
      peak = Math.max(peak, p.liveBatches());
    }
    await p.produceWait(prod);
    await reader.released;
    assert.equal(n, 300);
    // queueSize tasks not extracted yet hold no batch; one handed out is live, and the one being read.
    assert.ok(peak <= 2, `peak live batches ${peak}`);
    assert.equal(p.liveBatches(), 0);
  });
});

describe('drift bugs of the four import paths, fixed by the one path', { skip }, () => {
  const c = (): ReturnType<typeof counting> => counting();

  test('importDeviceRecordBatch releases the schema when the import fails before reading it', () =>
    balanced(() => {
      const schemas = c().schemaReleases();
      assert.throws(() => importDeviceRecordBatch(0n, c().schema()), /device_array: NULL pointer/);
      assert.equal(c().schemaReleases(), schemas + 1, 'the schema pointer was consumed');
      const released = m.alloc(m.layouts.ArrowDeviceArray.size);
      assert.throws(() => importDeviceRecordBatch(released, c().schema()), /the struct is released/);
      assert.equal(c().schemaReleases(), schemas + 2);
      m.free(released);
      const d = c().deviceBatch(2);
      assert.throws(() => importDeviceRecordBatch(d, c().schema(), { validate: 'bogus' as never }), /unknown validation level/);
      assert.equal(c().schemaReleases(), schemas + 3);
      m.free(d);
    }));

  test('exportTable leaks nothing when an allocation fails midway', () => {
    const base = nativeMemory();
    let allocs = 0;
    let failAt = Infinity;
    const live = new Set<Ptr>();
    const failing: Memory = new Proxy(base, {
      get(target, key, recv) {
        if (key === 'alloc') {
          return (size: number): Ptr => {
            if (++allocs >= failAt) throw new ArrowDeviceError('nomem', '', 'test: allocation refused');
            const p = target.alloc(size);
            live.add(p);
            return p;
          };
        }
        if (key === 'free') return (p: Ptr): void => { live.delete(p); target.free(p); };
        const v = Reflect.get(target, key, recv) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const t = new Table({ a: vectorFromArray([1, 2, 3], new Int32()) });
    const table = new Table([t.batches[0]!, t.batches[0]!, t.batches[0]!]);
    // Count the allocations of a full export, then fail at each one in turn.
    const ok = exportTable(table, { memory: failing });
    const total = allocs;
    for (const a of ok.arrays) freeArrowArray(a, { memory: failing });
    freeArrowSchema(ok.schema, { memory: failing });
    assert.equal(live.size, 0);
    for (let k = 2; k <= total; k++) {
      const before = accounting();
      allocs = 0;
      failAt = k;
      assert.throws(() => exportTable(table, { memory: failing }), /allocation refused/);
      assert.equal(live.size, 0, `nothing left allocated when allocation ${k} of ${total} fails`);
      assert.equal(accounting().liveExports, before.liveExports);
      assert.equal(accounting().pinnedBytes, before.pinnedBytes);
    }
    failAt = Infinity;
  });

  test('exportRecordBatch + importRecordBatch with expand keeps the schema (the plan is made from the producer schema)', () =>
    balanced(() => {
      const t = new Table({ a: vectorFromArray([1, 2, 3], new Int32()) });
      const { schema, array } = exportRecordBatch(t.batches[0]!);
      const b = importRecordBatch(array, schema, { expand: true });
      freeArrowArray(array);
      freeArrowSchema(schema);
      assert.deepEqual(b.schema.fields.map((f: Field) => f.name), ['a']);
      b.release();
    }));
});

describe('our allocations are tracked', () => {
  test('free of a pointer freed already, or never allocated by us, is a typed error (not an abort)', () => {
    const p = m.alloc(m.layouts.ArrowArray.size);
    freeArrowArray(p);
    assert.throws(() => freeArrowArray(p), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && /was not allocated by this library's native memory, or was freed already/.test(e.message));
    const s = m.alloc(m.layouts.ArrowSchema.size);
    assert.throws(() => freeArrowSchema(s + 8n), /was not allocated by this library/);
    freeArrowSchema(s);
    assert.throws(() => freeDeviceArray(0x1000n), /was not allocated by this library/);
  });
});

