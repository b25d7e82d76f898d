/**
 * Bitmaps past the bit positions arrow-js can compute (MAX_BITMAP_BITS,
 * src/array/import.ts): a validity bitmap with nulls or boolean values whose
 * offset + length is past 2^31 - 1 is refused as `unsupported`, with its
 * place, at every level; at the limit it imports and arrow-js reads its last
 * bit. Found by the fuzzer (seed 20261125 case 64582: a fixed-size list of
 * 2^31 rows, null_count -1, passed full validation and then overflowed the
 * stack in arrow-js's null count). The bitmaps are 256 MiB calloc'd
 * allocations: untouched pages cost no memory.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Vector } from 'apache-arrow';
import { importData, type ArrayImportOptions } from '../../src/array/api.js';
import { MAX_BITMAP_BITS } from '../../src/array/read.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { liveCounters } from '../../src/memory/accounting.js';
import { nativeMemory } from '../../src/memory/index.js';
import { Builder, type ArraySpec, type SchemaSpec } from './malformed/builder.js';

const b = new Builder();
after(() => b.freeAll());

const LEVELS: ArrayImportOptions['validate'][] = ['minimal', 'default', 'full'];
/** A zeroed bitmap of `bits` bits. */
const bits = (n: number) => b.alloc(Math.ceil(n / 8));
/** Sets bit `k` of the bitmap at `p`. */
function setBit(p: bigint, k: number): void {
  nativeMemory().copyIn(p + BigInt(Math.floor(k / 8)), new Uint8Array([1 << (k % 8)]));
}

function refused(fn: () => unknown, path: string, end: number, what: string): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ArrowDeviceError, String(e));
    assert.equal(e.kind, 'unsupported');
    assert.equal(e.message, `${path}: the ${what} bitmap's offset + length is ${end}: arrow-js reads bits with 32-bit integers, up to ${MAX_BITMAP_BITS}`);
    return true;
  });
}

describe('bitmaps arrow-js cannot address', () => {
  assert.equal(MAX_BITMAP_BITS, 2 ** 31 - 1);
  // A fixed-size list of size 0: rows that need no child values, only a validity bitmap.
  const fsl: SchemaSpec = { format: '+w:0', children: [{ format: 'c', name: 'item' }] };
  const list = (length: number, offset: number, nullCount: number, validity: bigint | null): ArraySpec => ({
    length, offset, nullCount, buffers: [validity], children: [{ length: 0, buffers: [null, new Int8Array(0)] }],
  });
  const imp = (a: ArraySpec, validate: ArrayImportOptions['validate']) => importData(b.array(a).ptr, b.schema(fsl).ptr, { validate });

  test('a validity bitmap with nulls (known or not) past 2^31 - 1 is refused at every level, the offset counted', () => {
    const v = bits(2 ** 31 + 8);
    for (const validate of LEVELS) {
      refused(() => imp(list(2 ** 31, 0, -1, v), validate), 'array.buffers[0]', 2 ** 31, 'validity');
      refused(() => imp(list(8, 2 ** 31 - 7, 3, v), validate), 'array.buffers[0]', 2 ** 31 + 1, 'validity');
    }
    // Refused before the bitmap is copied (256 MiB).
    const copied = liveCounters.copiedBytes;
    refused(() => importData(b.array(list(2 ** 31, 0, -1, v)).ptr, b.schema(fsl).ptr, { copy: true }), 'array.buffers[0]', 2 ** 31, 'validity');
    assert.equal(liveCounters.copiedBytes, copied);
  });

  test('at the limit it imports at every level, and arrow-js counts the nulls and reads the last bit', () => {
    const v = bits(MAX_BITMAP_BITS);
    setBit(v, MAX_BITMAP_BITS - 1);
    for (const validate of LEVELS) assert.equal(imp(list(MAX_BITMAP_BITS, 0, -1, v), validate).length, MAX_BITMAP_BITS);
    const vec = new Vector([imp(list(MAX_BITMAP_BITS, 0, -1, v), 'full')]);
    assert.equal(vec.nullCount, MAX_BITMAP_BITS - 1);
    assert.equal(vec.isValid(MAX_BITMAP_BITS - 1), true);
    assert.equal(vec.isValid(MAX_BITMAP_BITS - 2), false);
  });

  test('a validity bitmap with null_count 0 is never read by arrow-js: any length passes', () => {
    const d = imp(list(2 ** 31 + 8, 0, 0, bits(2 ** 31 + 8)), 'full');
    assert.equal(d.length, 2 ** 31 + 8);
    assert.equal(new Vector([d]).isValid(2 ** 31 + 7), true);
  });

  test('boolean values past 2^31 - 1 are refused at every level; at the limit the last value reads', () => {
    const bool = (length: number, values: bigint): ArraySpec => ({ length, buffers: [null, values] });
    const over = bits(2 ** 31);
    for (const validate of LEVELS) {
      refused(() => importData(b.array(bool(2 ** 31, over)).ptr, b.schema({ format: 'b' }).ptr, { validate }), 'array.buffers[1]', 2 ** 31, 'values');
    }
    const at = bits(MAX_BITMAP_BITS);
    setBit(at, MAX_BITMAP_BITS - 1);
    const vec = new Vector([importData(b.array(bool(MAX_BITMAP_BITS, at)).ptr, b.schema({ format: 'b' }).ptr, { validate: 'full' })]);
    assert.equal(vec.get(MAX_BITMAP_BITS - 1), true);
    assert.equal(vec.get(MAX_BITMAP_BITS - 2), false);
  });
});
