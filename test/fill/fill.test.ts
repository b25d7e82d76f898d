/**
 * Fill-and-import (src/fill): a native producer fills structs we allocate,
 * we import them. Every path is checked against the C producer of
 * test/ownership/counting.c, which counts what it hands out and releases
 * (a second release is counted, never a crash): success (the struct moved
 * into the import, our allocation freed), the fill throwing or rejecting,
 * returning a non-zero status, returning 0 without filling, and the import
 * failing; in each, what the producer filled is released exactly once and
 * the allocation freed (the memory's allocation tracking says so).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Field, Int32, Schema } from 'apache-arrow';
import {
  accounting, ArrowDeviceError, Errno, importArrayStreamFrom, importDeviceArrayStreamFrom, importDeviceRecordBatchFrom,
  importRecordBatchFrom, importSchemaFrom, nativeMemory, StreamProducerError, type Ptr,
} from '../../src/index.js';
import { collectUntil } from '../helpers/gc.js';
import { counting, countingMissing } from '../ownership/counting.js';
import { makeProducer } from '../stream/producer.js';

const m = nativeMemory();

interface Before {
  out: number;
  dbl: number;
  streams: number;
  schemas: number;
}
const snapshot = (): Before => {
  const c = counting();
  return { out: c.outstanding(), dbl: c.doubleReleases(), streams: c.streamReleases(), schemas: c.schemaReleases() };
};

/** Records every struct address a fill got, to prove each was freed. */
function recorder(): { ptrs: Ptr[]; freed: () => boolean } {
  const ptrs: Ptr[] = [];
  return { ptrs, freed: () => ptrs.length > 0 && ptrs.every((p) => !m.owns!(p)) };
}

async function nothingLeft(before: Before): Promise<void> {
  const c = counting();
  await collectUntil(() => accounting().liveImports === 0 && c.outstanding() === before.out);
  assert.equal(c.outstanding(), before.out, 'every array the producer handed out was released');
  assert.equal(c.doubleReleases(), before.dbl, 'nothing released twice');
  assert.equal(accounting().liveImports, 0, 'no import left live');
}

/** The x values of every batch, each read while it is the reader's current one. */
function xsOf(batches: Iterable<{ getChild(n: string): { toArray(): unknown } | null }>): number[] {
  const out: number[] = [];
  for (const b of batches) out.push(...(b.getChild('x')!.toArray() as Int32Array));
  return out;
}

describe('fill-and-import', { skip: countingMissing }, () => {
  describe('importArrayStreamFrom', () => {
    test('a C producer fills our stream: read in full, the stream moved into the reader, our allocation freed', async () => {
      const c = counting();
      const before = snapshot();
      const r = recorder();
      const reader = importArrayStreamFrom((out) => {
        r.ptrs.push(out);
        return c.fillSlowStream(out, 3, 4);
      });
      assert.ok(r.freed(), 'the struct we allocated is freed at once (the reader owns a moved copy)');
      assert.deepEqual(xsOf(reader), Array.from({ length: 12 }, (_, i) => i));
      assert.equal(c.streamReleases() - before.streams, 1);
      await nothingLeft(before);
    });

    test('a fill typed as returning any (a koffi function) takes the synchronous form, in its types as at run time', async () => {
      const c = counting();
      const before = snapshot();
      // koffi types what its functions return as any; `npm run typecheck` checks this file: with the
      // Promise overload chosen, the reader below would be typed as a Promise and not type-check.
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const make = ((out: Ptr) => c.fillSlowStream(out, 1, 3)) as (out: Ptr) => any;
      const reader = importArrayStreamFrom((out) => make(out));
      assert.ok(!(reader instanceof Promise));
      const xs: number[] = [];
      for (const batch of reader) xs.push(...(batch.getChild('x')!.toArray() as Int32Array));
      assert.deepEqual(xs, [0, 1, 2]);
      await nothingLeft(before);
    });

    test('a non-zero status after filling: a producer error with that errno; what was filled released once, freed', async () => {
      const c = counting();
      const before = snapshot();
      const r = recorder();
      assert.throws(
        () =>
          importArrayStreamFrom((out) => {
            r.ptrs.push(out);
            c.fillSlowStream(out, 2, 2);
            return 9;
          }),
        (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'producer' && e.errno === 9 && e.path === 'fill' && /returned status 9/.test(e.message),
      );
      assert.equal(c.streamReleases() - before.streams, 1, 'the filled stream released once');
      assert.ok(r.freed());
      await nothingLeft(before);
    });

    test('a non-zero status without filling: nothing to release, the allocation freed', () => {
      const before = snapshot();
      const r = recorder();
      assert.throws(() => importArrayStreamFrom((out) => {
            r.ptrs.push(out);
            return 5;
          }), /returned status 5/);
      assert.equal(counting().streamReleases() - before.streams, 0);
      assert.ok(r.freed());
    });

    test('the fill throws after filling: its error, the stream released once', () => {
      const c = counting();
      const before = snapshot();
      const r = recorder();
      assert.throws(
        () =>
          importArrayStreamFrom((out) => {
            r.ptrs.push(out);
            c.fillSlowStream(out, 2, 2);
            throw new RangeError('binding failed');
          }),
        /binding failed/,
      );
      assert.equal(c.streamReleases() - before.streams, 1);
      assert.ok(r.freed());
    });

    test('status 0 but the stream left unfilled: a typed invalid error naming the stream', () => {
      const r = recorder();
      assert.throws(
        () => importArrayStreamFrom((out) => void r.ptrs.push(out)),
        (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'stream' && /left the ArrowArrayStream unfilled/.test(e.message),
      );
      assert.ok(r.freed());
    });

    test('the import fails (get_schema errors): the StreamProducerError, the stream released once, freed', () => {
      const p = makeProducer({ schema: new Schema([new Field('x', new Int32())]), batches: [], schemaError: Errno.EIO });
      const r = recorder();
      assert.throws(
        () =>
          importArrayStreamFrom((out) => {
            r.ptrs.push(out);
            m.copyIn(out, m.read(p.ptr, m.layouts.ArrowArrayStream.size)); // the producer's stream, moved into ours
            m.writePtr(p.ptr + BigInt(m.layouts.ArrowArrayStream.offsets.release!), 0n);
            return 0;
          }),
        (e: unknown) => e instanceof StreamProducerError && e.operation === 'get_schema',
      );
      assert.equal(p.calls.release, 1);
      assert.ok(r.freed());
      p.free();
    });

    test('a fill returning a Promise gives a Promise of the reader; stream options pass through (onProducerError, offThread)', async () => {
      const c = counting();
      const before = snapshot();
      const r = recorder();
      let hookDetail: string | null = null;
      const reader = await importArrayStreamFrom(
        async (out) => {
          r.ptrs.push(out);
          await new Promise((res) => setTimeout(res, 1));
          return c.fillSlowStream(out, 4, 2, { failAt: 3, failCode: 61, sleepMs: 1 });
        },
        { offThread: true, onProducerError: (s) => void (hookDetail = c.streamErrorDetail(s)) },
      );
      assert.ok(r.freed());
      const xs: number[] = [];
      await assert.rejects(
        (async () => {
          for await (const b of reader) xs.push(...(b.getChild('x')!.toArray() as Int32Array));
        })(),
        (e: unknown) => e instanceof StreamProducerError && e.errno === 61,
      );
      assert.deepEqual(xs, [0, 1, 2, 3, 4, 5]);
      assert.equal(hookDetail, 'detail of batch 3: code 61, from the live stream');
      assert.equal(c.streamReleases() - before.streams, 1);
      await nothingLeft(before);
    });

    test('a rejecting fill after filling: the rejection, the stream released once, freed', async () => {
      const c = counting();
      const before = snapshot();
      const r = recorder();
      await assert.rejects(
        importArrayStreamFrom(async (out) => {
          r.ptrs.push(out);
          c.fillSlowStream(out, 2, 2);
          throw new Error('query cancelled');
        }),
        /query cancelled/,
      );
      assert.equal(c.streamReleases() - before.streams, 1);
      assert.ok(r.freed());
    });

    test('a fill resolving to a non-zero status: the producer error', async () => {
      await assert.rejects(
        importArrayStreamFrom(async () => 7),
        (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'producer' && e.errno === 7,
      );
    });

    test('a fill returning something that is not a status: a typed invalid error', () => {
      assert.throws(
        () => importArrayStreamFrom((() => 'ok') as unknown as () => number),
        (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'fill' && /returned string/.test(e.message),
      );
    });

    test('fill must be a function', () => {
      assert.throws(
        () => importArrayStreamFrom(42 as unknown as () => number),
        (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'fill',
      );
    });
  });

  describe('importDeviceArrayStreamFrom', () => {
    test('a C producer fills a CPU device stream: every batch right, released once', async () => {
      const c = counting();
      const before = snapshot();
      const reader = importDeviceArrayStreamFrom((out) => c.fill.deviceStream(out, 3, 2));
      const xs: number[] = [];
      for (const b of reader) {
        assert.ok(!('deviceTypeName' in b), 'CPU data is a record batch');
        xs.push(...((b as { getChild(n: string): { toArray(): Int32Array } }).getChild('x').toArray()));
      }
      assert.deepEqual(xs, [0, 1, 2, 3, 4, 5]);
      assert.equal(c.streamReleases() - before.streams, 1);
      await nothingLeft(before);
    });
  });

  describe('importSchemaFrom', () => {
    test('the schema imported, and released once', () => {
      const c = counting();
      const before = snapshot();
      const r = recorder();
      const schema = importSchemaFrom((out) => {
        r.ptrs.push(out);
        return c.fill.schema(out);
      });
      assert.deepEqual(schema.fields.map((f) => `${f.name}: ${f.type}`), ['x: Int32']);
      assert.equal(c.schemaReleases() - before.schemas, 1);
      assert.ok(r.freed());
    });

    test('keep does not apply: the struct is ours, released and freed', () => {
      const c = counting();
      const before = snapshot();
      importSchemaFrom((out) => c.fill.schema(out), { keep: true });
      assert.equal(c.schemaReleases() - before.schemas, 1);
    });
  });

  describe('importRecordBatchFrom', () => {
    test('array and schema filled: a zero-copy batch, released by its release()', async () => {
      const c = counting();
      const before = snapshot();
      const r = recorder();
      const batch = importRecordBatchFrom((array, schema) => {
        r.ptrs.push(array, schema);
        return c.fill.schema(schema) || c.fill.batch(array, 5, 10);
      });
      assert.ok(r.freed());
      assert.deepEqual([...(batch.getChild('x')!.toArray() as Int32Array)], [10, 11, 12, 13, 14]);
      assert.equal(c.outstanding() - before.out, 1, 'zero-copy: the producer still holds the batch');
      batch.release();
      assert.equal(c.outstanding(), before.out);
      assert.equal(c.schemaReleases() - before.schemas, 1);
      await nothingLeft(before);
    });

    test('only the array filled: an invalid error naming the schema; the array released once', async () => {
      const c = counting();
      const before = snapshot();
      const r = recorder();
      assert.throws(
        () =>
          importRecordBatchFrom((array, schema) => {
            r.ptrs.push(array, schema);
            return c.fill.batch(array, 3);
          }),
        (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'schema',
      );
      assert.ok(r.freed());
      await nothingLeft(before);
    });

    test('the import fails (a malformed schema): both released once', async () => {
      const c = counting();
      const before = snapshot();
      assert.throws(
        () =>
          importRecordBatchFrom((array, schema) => {
            c.fill.batch(array, 3);
            c.fill.schema(schema);
            // Point the schema's format at "i": an int32 with a child, malformed.
            const fmt = m.alloc(2);
            m.copyIn(fmt, Uint8Array.of(0x69, 0));
            leak.push(fmt);
            m.writePtr(schema, fmt);
            return 0;
          }),
        (e: unknown) => e instanceof ArrowDeviceError && e.path.startsWith('schema'),
      );
      assert.equal(c.schemaReleases() - before.schemas, 1);
      await nothingLeft(before);
      for (const p of leak.splice(0)) m.free(p);
    });
  });

  describe('importDeviceRecordBatchFrom', () => {
    test('a CPU device array and its schema: a record batch', async () => {
      const c = counting();
      const before = snapshot();
      const batch = importDeviceRecordBatchFrom((array, schema) => c.fill.schema(schema) || c.fill.deviceBatch(array, 4, 1), { toHost: true });
      assert.deepEqual([...(batch.getChild('x')!.toArray() as Int32Array)], [1, 2, 3, 4]);
      batch.release();
      await nothingLeft(before);
    });
  });
});

const leak: Ptr[] = [];
