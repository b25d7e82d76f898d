/**
 * A JS source that fails is reported through the C interface (the failing
 * get_next's code and get_last_error), also where the export reads ahead:
 * a device stream reads its first item at export to learn its device_type,
 * and a source failing there threw out of exportDeviceArrayStream instead
 * (found by the fuzzer's thread mode, issue 18).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Int32, RecordBatch, Schema, Field, tableFromArrays } from 'apache-arrow';
import {
  accounting, exportArrayStream, exportDeviceArrayStream, freeArrowArrayStream, freeArrowDeviceArrayStream, importArrayStream,
  importDeviceArrayStream, StreamProducerError,
} from '../../src/index.js';

const schema = new Schema([new Field('x', new Int32(), true)]);
const batch = tableFromArrays({ x: Int32Array.of(1, 2) }).batches[0]!;

for (const device of [false, true]) {
  const name = device ? 'device stream' : 'array stream';
  for (const at of [0, 1]) {
    test(`${device ? 'a' : 'an'} ${name} whose source fails at batch ${at} exports, and fails the get_next that meets it`, () => {
      const live = accounting().liveExports;
      let closed = false;
      function* source(): Generator<RecordBatch> {
        try {
          for (let i = 0; ; i++) {
            if (i === at) throw new Error(`source broke at ${i}`);
            yield batch;
          }
        } finally {
          closed = true;
        }
      }
      const ptr = device ? exportDeviceArrayStream(source(), { schema }) : exportArrayStream(source(), { schema });
      const reader = device ? importDeviceArrayStream(ptr, { toHost: true }) : importArrayStream(ptr);
      const got: number[] = [];
      assert.throws(
        () => {
          for (const b of reader) got.push((b as RecordBatch).numRows);
        },
        (e: unknown) => e instanceof StreamProducerError && e.operation === 'get_next' && e.producerMessage === `source broke at ${at}`,
      );
      assert.deepEqual(got, at === 0 ? [] : [2]);
      assert.ok(closed, 'the source was closed');
      reader.release();
      if (device) freeArrowDeviceArrayStream(ptr);
      else freeArrowArrayStream(ptr);
      assert.equal(accounting().liveExports, live);
    });
  }
}
