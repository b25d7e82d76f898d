/**
 * 64-bit dictionary indices (format "l" / "L" with a dictionary): valid Arrow that arrow-js 21
 * builds but cannot read (its get() mixes a BigInt index with numbers: "Cannot mix BigInt and other
 * types", an untyped TypeError found by the hostile-input work, issue 18). Converting such an array
 * to arrow-js is refused with a typed error that says what to do; `expand` narrows the indices to
 * int32 (checked); the ArrayView form reads them as they are.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ArrowDeviceError, importArrayView, importVector } from '../../src/index.js';
import { Builder, releaseCount } from './malformed/builder.js';

function dict64(b: Builder, format: 'l' | 'L', indices: bigint[]): { schema: bigint; array: bigint; id: number } {
  const s = b.schema({ format, name: 'd', flags: 2, dictionary: { format: 'u', flags: 2 } });
  const values = format === 'l' ? BigInt64Array.from(indices) : BigUint64Array.from(indices);
  const a = b.array({
    length: indices.length,
    buffers: [null, values],
    dictionary: { length: 3, buffers: [null, new Int32Array([0, 1, 2, 3]), new TextEncoder().encode('abc')] },
  });
  return { schema: s.ptr, array: a.ptr, id: a.root.id };
}

test('64-bit dictionary indices: refused (typed) for arrow-js, narrowed to int32 with expand, read as they are by ArrayView', () => {
  const b = new Builder();
  try {
    for (const format of ['l', 'L'] as const) {
      const refused = dict64(b, format, [0n, 1n, 0n, 2n]);
      assert.throws(
        () => importVector(refused.array, refused.schema),
        (e: unknown) =>
          e instanceof ArrowDeviceError &&
          e.kind === 'unsupported' &&
          e.message === `schema.format: arrow-js cannot read 64-bit dictionary indices ("${format}"); import as an ArrayView, or pass { expand: true } to narrow them to int32`,
      );
      assert.equal(releaseCount(refused.id), 1, 'the array is released at once');

      const expanded = dict64(b, format, [0n, 1n, 0n, 2n]);
      const v = importVector(expanded.array, expanded.schema, { expand: true, validate: 'full' });
      assert.deepEqual([...v], ['a', 'b', 'a', 'c'], 'every value reads');
      v.release();

      const view = dict64(b, format, [2n, 1n]);
      const av = importArrayView(view.array, view.schema, { validate: 'full' });
      const idx = av.buffers[1]!;
      assert.deepEqual([...new BigInt64Array(idx.buffer, idx.byteOffset, 2)], [2n, 1n]);
    }
    const tooBig = dict64(b, 'l', [0n, 5_000_000_000n]);
    assert.throws(
      () => importVector(tooBig.array, tooBig.schema, { expand: true }),
      /array\.buffers\[1\]: dictionary index 5000000000 at 1 does not fit the int32 that \{ expand: true \} narrows 64-bit indices to/,
    );
  } finally {
    b.freeAll();
  }
});
