/**
 * The fuzzer's flechette reader (test/fuzz/flechette.ts), on cases laid out
 * by the fuzz producer: flechette's known limits (date64 and month-day-nano
 * nanoseconds past 2^53) are read as null and counted, never thrown, and
 * nothing else is hidden; a row past the budget is not materialized; a row
 * whose offsets point outside its child is said, not read.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { importColumn } from '../../src/flechette/index.js';
import type { ADesc, Case, SDesc } from './cases.js';
import { flechetteLimits, readFlechette } from './flechette.js';
import { layOut, producerMissing } from './producer.js';
import { runOne } from './runner.js';

const skip = producerMissing ?? false;
const b64 = (a: ArrayBufferView): string => Buffer.from(a.buffer, a.byteOffset, a.byteLength).toString('base64');
const S = (format: string, children: SDesc[] = []): SDesc => ({ format, name: 'f', flags: '2', metadata: null, children, dictionary: null });
const A = (length: number, buffers: (ArrayBufferView | null)[], children: ADesc[] = []): ADesc => ({
  length: String(length), offset: '0', nullCount: '0', buffers: buffers.map((b) => (b ? b64(b) : null)), children, dictionary: null,
});
const kase = (schema: SDesc, arrays: ADesc[], level: Case['level'], mutations: string[] = []): Case => ({
  origin: 'flechette.test.ts', mutations, driver: 'flechetteColumn', level, expand: false, copy: false, schema, arrays,
});
let ids = 1;
const column = (c: Case) => {
  const l = layOut(c, ids);
  ids += l.ids.length;
  return importColumn(l.arrays[0]!, l.schema, { validate: c.level, useBigInt: true, useDecimalInt: true, useBigIntTimestamp: true });
};
const FAR = 2n ** 60n;

describe('the fuzzer reads flechette imports', { skip }, () => {
  test('date64 past 2^53 (below full, which refuses it) and month-day-nano nanoseconds past 2^53 are counted, not thrown', async () => {
    const date = kase(S('tdm'), [A(2, [null, new BigInt64Array([86_400_000n, FAR])])], 'default');
    const mdn = kase(S('tin'), [A(2, [null, new BigInt64Array([(2n << 32n) | 1n, 5n, 0n, FAR])])], 'full');
    for (const c of [date, mdn]) {
      const before = flechetteLimits.values;
      assert.deepEqual(await runOne(c, ids), []);
      ids += 100;
      assert.equal(flechetteLimits.values - before, 2, `${c.schema.format}: the far value, by at() and by toArray()`);
      const col = column(c);
      readFlechette(col, 10, 100);
      assert.equal(col.at(1), null, 'read as null on the instance the reader guarded');
      assert.notEqual(col.at(0), null);
    }
    // Without the guard, flechette throws: the limit is flechette's.
    assert.throws(() => column(date).at(1), /BigInt exceeds integer number representation/);
  });

  test('a list row past the budget is not read; offsets outside the child are said (what runLaid reports at full)', () => {
    const list = (offsets: number[], child: number) => kase(S('+l', [S('i')]), [A(offsets.length - 1, [null, new Int32Array(offsets)], [A(child, [null, new Int32Array(child)])])], 'minimal', ['x']);
    const big = column(list([0, 100_000], 100_000));
    readFlechette(big, 10, 1000); // over budget: not materialized, no throw
    assert.throws(() => readFlechette(column(list([0, 1_000_000_000, 2], 4)), 10, 1000), /column 0 row 0: its offsets point outside the child/);
  });
});
