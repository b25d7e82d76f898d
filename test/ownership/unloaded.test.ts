/**
 * A producer's library may be unloaded by the runtime when the handle its
 * user loaded it by (`koffi.load`) is collected, while imports still hold
 * structs whose callbacks are in it. Native memory pins the library of each
 * callback an import keeps (`keepLoaded`), so a later `release` or
 * `get_next` never jumps into unmapped code (a crash before it).
 *
 * Run in a child process: the failure this guards against is a SIGSEGV.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { childSkip, runChild } from '../helpers/child.js';
import { countingLibrary, countingMissing } from './counting.js';

describe('imports outlive the handle of their producer\'s library', { skip: countingMissing || childSkip }, () => {
  test('a batch and a stream imported from a library whose koffi handle was collected: read, iterated, released', (t) => {
    const r = runChild(
      `
      import { createRequire } from 'node:module';
      import { allocArrowArray, allocArrowArrayStream, allocArrowSchema, freeArrowArray, freeArrowArrayStream, importArrayStream, importRecordBatch, importSchema } from '@/src/index.js';
      import { collectUntil } from '@/test/helpers/gc.js';

      const koffi = createRequire('@/package.json')('koffi');
      let collected = false;
      const gone = new FinalizationRegistry(() => { collected = true; });

      // The library's handle lives only in this function, as in a user's helper that loads, imports and returns.
      function produce() {
        const lib = koffi.load(process.env.COUNTING_LIB);
        gone.register(lib, 0);
        const s = allocArrowSchema();
        lib.func('int cp_make_schema(uintptr_t out)')(s);
        const a = allocArrowArray();
        lib.func('int cp_make_batch(uintptr_t out, int64_t rows, int32_t start)')(a, 10, 1);
        const st = allocArrowArrayStream();
        lib.func('int cp_make_stream(uintptr_t out, int64_t n, int64_t rows)')(st, 3, 5);
        const batch = importRecordBatch(a, importSchema(s));
        const stream = importArrayStream(st);
        freeArrowArray(a);
        freeArrowArrayStream(st);
        return { batch, stream };
      }

      // In a function: the child runs as CommonJS, without top-level await.
      void (async () => {
        const { batch, stream } = produce();
        await collectUntil(() => collected, 200);
        let rows = 0;
        for (const b of stream) rows += b.numRows; // get_next, and each item's release
        const last = batch.getChild('x').get(9);
        batch.release();
        stream.release();
        console.log(JSON.stringify({ collected, rows, last }));
      })();
      `,
      60_000,
      { COUNTING_LIB: countingLibrary() },
    );
    assert.equal(r.signal, null, `the child was killed (${r.signal}): a callback ran in unloaded code\n${r.stdout}${r.stderr}`);
    assert.equal(r.status, 0, r.stdout + r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { collected: boolean; rows: number; last: number };
    assert.deepEqual({ rows: out.rows, last: out.last }, { rows: 15, last: 10 });
    // Where the runtime never collects the handle, nothing was unloaded: the test proved nothing.
    if (!out.collected) t.skip('this runtime did not collect the koffi library handle, so nothing was unloaded');
  });
});
