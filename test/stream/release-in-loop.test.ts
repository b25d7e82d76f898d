/**
 * A stream reader released inside the loop that reads it: the loop's next
 * step sees the end of the stream, as it does when `release()` comes while
 * an off-thread `get_next` runs, so a consumer that stops a read from inside
 * its loop (a cancel button, a row limit) needs no flag of its own. Only
 * that one step ends: a step after it, or after a `release()` before any
 * batch was read, throws (test/stream/stream.test.ts).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Int32, makeData, RecordBatch, Schema, Field, Struct } from 'apache-arrow';
import { accounting, ArrowDeviceError, exportArrayStream, freeArrowArrayStream, importArrayStream } from '../../src/index.js';
import { collectUntil } from '../helpers/gc.js';

const schema = new Schema([new Field('x', new Int32(), false)]);

/** Three batches of two rows, exported as our own ArrowArrayStream and imported again. */
function reader(offThread: boolean): ReturnType<typeof importArrayStream> {
  const batches = [0, 1, 2].map((i) => {
    const x = makeData({ type: new Int32(), length: 2, data: Int32Array.of(2 * i, 2 * i + 1) });
    return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 2, children: [x] }));
  });
  const ptr = exportArrayStream(batches, { schema });
  try {
    return importArrayStream(ptr, { offThread });
  } finally {
    freeArrowArrayStream(ptr);
  }
}

async function nothingLive(): Promise<void> {
  await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  assert.deepEqual({ imports: accounting().liveImports, exports: accounting().liveExports }, { imports: 0, exports: 0 });
}

/** Reads `r` with the loop `how`, releasing it inside the loop after the first batch: the rows the loop saw. */
async function readReleasingInside(r: ReturnType<typeof importArrayStream>, how: 'for...of' | 'for await'): Promise<number> {
  let seen = 0;
  if (how === 'for...of') {
    for (const b of r) {
      seen += b.numRows;
      r.release();
    }
  } else {
    for await (const b of r) {
      seen += b.numRows;
      r.release();
    }
  }
  return seen;
}

describe('a stream reader released inside its own loop', () => {
  const cases = [
    { how: 'for...of', offThread: false },
    { how: 'for await', offThread: false },
    { how: 'for await', offThread: true },
  ] as const;
  for (const { how, offThread } of cases) {
    test(`${how}${offThread ? ' (offThread)' : ''} ends after release()`, async () => {
      const r = reader(offThread);
      try {
        assert.equal(await readReleasingInside(r, how), 2, 'one batch read, then the loop ended');
        assert.equal(r.released, true);
        if (how === 'for...of') assert.throws(() => r.next(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released', 'only the one step after release() ends');
        else await assert.rejects(r[Symbol.asyncIterator]().next(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released', 'only the one step after release() ends');
      } finally {
        r.release();
        await nothingLive();
      }
    });
  }
});
