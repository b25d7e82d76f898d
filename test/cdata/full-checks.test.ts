/**
 * The O(length) checks of `full` validation at their edges: dictionary
 * indices of every integer width (signed and unsigned), date64 and
 * timestamp values at the 2^53 arrow-js can read, 64-bit list views, union
 * type ids. They read elements through typed arrays and 32-bit words, not a
 * DataView call or a BigInt per element (issue 18: a 4 GiB dictionary
 * index buffer took a minute to check); these tests pin down that the
 * faster reads decide exactly as the spec and arrow-js require, nulls
 * skipped where the value is never read.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Vector } from 'apache-arrow';
import { importArrayView, importData, type ArrayImportOptions } from '../../src/array/api.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { bitmap, Builder, type ArraySpec, type SchemaSpec } from './malformed/builder.js';

const FULL: ArrayImportOptions = { validate: 'full' };
const b = new Builder();
after(() => b.freeAll());

const enc = new TextEncoder();
/** A utf8 dictionary of `n` one-letter strings. */
function dict(n: number): ArraySpec {
  const offs = new Int32Array(n + 1).map((_, k) => k);
  return { length: n, buffers: [null, offs, enc.encode('abcdefghijklmnopqrstuvwxyz'.repeat(Math.ceil(n / 26) + 1)).subarray(0, n)] };
}

function importDict(format: string, indices: ArrayBufferView, dictLength: number, validity: Uint8Array | null = null) {
  const length = indices.byteLength / ({ c: 1, C: 1, s: 2, S: 2, i: 4, I: 4, l: 8, L: 8 } as Record<string, number>)[format]!;
  const schema: SchemaSpec = { format, dictionary: { format: 'u' } };
  const array: ArraySpec = { length, nullCount: validity ? 1 : 0, buffers: [validity, indices], dictionary: dict(dictLength) };
  return importArrayView(b.array(array).ptr, b.schema(schema).ptr, FULL);
}

function refused(fn: () => unknown, message: string, kind = 'invalid'): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof ArrowDeviceError, String(e));
    assert.equal(e.kind, kind);
    assert.equal(e.message, message);
    return true;
  });
}

describe('full validation: dictionary indices of every width', () => {
  const widths: [format: string, make: (v: number[]) => ArrayBufferView, min: number, max: bigint][] = [
    ['c', (v) => new Int8Array(v), -128, 127n],
    ['C', (v) => new Uint8Array(v), 0, 255n],
    ['s', (v) => new Int16Array(v), -32768, 32767n],
    ['S', (v) => new Uint16Array(v), 0, 65535n],
    ['i', (v) => new Int32Array(v), -(2 ** 31), 2n ** 31n - 1n],
    ['I', (v) => new Uint32Array(v), 0, 2n ** 32n - 1n],
    ['l', (v) => new BigInt64Array(v.map(BigInt)), -(2 ** 31), 2n ** 63n - 1n],
    ['L', (v) => new BigUint64Array(v.map(BigInt)), 0, 2n ** 64n - 1n],
  ];
  for (const [format, make, min, max] of widths) {
    test(`"${format}" indices: 0..length-1 pass, length, the type's maximum and its minimum are refused`, () => {
      const v = importDict(format, make([0, 2, 1, 2]), 3);
      assert.equal(v.length, 4);
      refused(() => importDict(format, make([0, 1, 3]), 3), 'array.buffers[1]: dictionary index 3 at 2 is outside the dictionary of length 3');
      const big = format === 'l' || format === 'L'
        ? (format === 'l' ? new BigInt64Array([0n, max]) : new BigUint64Array([0n, max]))
        : make([0, Number(max)]);
      refused(() => importDict(format, big, 3), `array.buffers[1]: dictionary index ${max} at 1 is outside the dictionary of length 3`);
      if (min < 0) {
        refused(() => importDict(format, make([1, min]), 3), `array.buffers[1]: dictionary index ${min} at 1 is outside the dictionary of length 3`);
        refused(() => importDict(format, make([-1]), 3), 'array.buffers[1]: dictionary index -1 at 0 is outside the dictionary of length 3');
      }
    });

    test(`"${format}" indices: an out-of-range index in a null slot is never read, so it passes`, () => {
      const v = importDict(format, make([1, 9, 0]), 3, bitmap(true, false, true));
      assert.equal(v.length, 3);
    });
  }

  test('"C" indices into a dictionary of 256 or more cannot be outside it', () => {
    assert.equal(importDict('C', new Uint8Array([255, 0, 128]), 256).length, 3);
  });

  test('the first offending index is named, after the array offset', () => {
    const schema: SchemaSpec = { format: 's', dictionary: { format: 'u' } };
    const array: ArraySpec = { length: 2, offset: 2, buffers: [null, new Int16Array([9, 9, 1, 7])], dictionary: dict(3) };
    refused(() => importArrayView(b.array(array).ptr, b.schema(schema).ptr, FULL), 'array.buffers[1]: dictionary index 7 at 3 is outside the dictionary of length 3');
  });
});

describe('full validation: int64 milliseconds arrow-js reads as numbers', () => {
  const MAX = 2n ** 53n - 1n;
  const one = (format: string, v: bigint, valid = true): ArraySpec => ({
    length: 2,
    nullCount: valid ? 0 : 1,
    buffers: [valid ? null : bitmap(true, false), new BigInt64Array([0n, v])],
  });
  const imp = (format: string, a: ArraySpec) => importData(b.array(a).ptr, b.schema({ format }).ptr, FULL);

  for (const format of ['tdm', 'tss:', 'tsm:UTC']) {
    test(`"${format}": +-(2^53 - 1) pass and read back; +-2^53 and the int64 extremes are refused`, () => {
      for (const v of [MAX, -MAX]) {
        const d = imp(format, one(format, v));
        const got = new Vector([d]).get(1) as number;
        // Milliseconds read back exactly; seconds are read as 1000 x (a double, as arrow-js does).
        if (format === 'tss:') assert.equal(got, 1000 * Number(v));
        else assert.equal(BigInt(got), v);
      }
      for (const v of [MAX + 1n, -MAX - 1n, 2n ** 63n - 1n, -(2n ** 63n)]) {
        refused(() => imp(format, one(format, v)), `array.buffers[1]: value ${v} at 1 is beyond the 2^53 arrow-js can read as a number`, 'unsupported');
      }
    });
  }

  test('"tsu:": whole milliseconds within 2^53 pass (the microseconds beyond), past it refused', () => {
    const edge = MAX * 1000n + 999n;
    for (const v of [edge, -edge]) {
      const d = imp('tsu:', one('tsu:', v));
      assert.equal(typeof new Vector([d]).get(1), 'number');
    }
    refused(() => imp('tsu:', one('tsu:', edge + 1n)), `array.buffers[1]: value ${MAX + 1n} at 1 is beyond the 2^53 arrow-js can read as a number`, 'unsupported');
    refused(() => imp('tsu:', one('tsu:', -edge - 1n)), `array.buffers[1]: value ${-MAX - 1n} at 1 is beyond the 2^53 arrow-js can read as a number`, 'unsupported');
  });

  test('a value past 2^53 in a null slot is never read, so it passes', () => {
    assert.equal(imp('tdm', one('tdm', 2n ** 62n, false)).length, 2);
  });
});

describe('full validation: 64-bit list views and union type ids', () => {
  const child: ArraySpec = { length: 3, buffers: [null, new Int32Array([1, 2, 3])] };
  const lv = (offs: bigint[], sizes: bigint[]): ArraySpec => ({
    length: offs.length, buffers: [null, new BigInt64Array(offs), new BigInt64Array(sizes)], children: [child],
  });
  const lvSchema: SchemaSpec = { format: '+vL', children: [{ format: 'i', name: 'item' }] };
  const imp = (a: ArraySpec) => importArrayView(b.array(a).ptr, b.schema(lvSchema).ptr, FULL);

  test('large list views inside the child pass; offsets or sizes out of it, however large, are refused with their value', () => {
    assert.equal(imp(lv([0n, 1n, 3n], [3n, 2n, 0n])).length, 3);
    refused(() => imp(lv([0n, 2n], [1n, 2n])), 'array.buffers[1]: list view 1 (offset 2, size 2) is outside the child of length 3');
    refused(() => imp(lv([-(2n ** 40n)], [1n])), `array.buffers[1]: list view 0 (offset ${-(2n ** 40n)}, size 1) is outside the child of length 3`);
    refused(() => imp(lv([0n], [2n ** 62n])), `array.buffers[1]: list view 0 (offset 0, size ${2n ** 62n}) is outside the child of length 3`);
    refused(() => imp(lv([1n], [-1n])), 'array.buffers[1]: list view 0 (offset 1, size -1) is outside the child of length 3');
  });

  test('union type ids: declared ids pass, an undeclared one (127, -128) is refused', () => {
    const schema: SchemaSpec = { format: '+us:5,127', children: [{ format: 'i', name: 'a' }, { format: 'i', name: 'b' }] };
    const u = (ids: number[]): ArraySpec => ({ length: ids.length, buffers: [new Int8Array(ids)], children: [
      { length: ids.length, buffers: [null, new Int32Array(ids.length)] }, { length: ids.length, buffers: [null, new Int32Array(ids.length)] },
    ] });
    const imp2 = (a: ArraySpec) => importArrayView(b.array(a).ptr, b.schema(schema).ptr, FULL);
    assert.equal(imp2(u([5, 127, 5])).length, 3);
    refused(() => imp2(u([5, 126])), 'array.buffers[0]: type id 126 at 1 is not one of the union\'s (5,127)');
    refused(() => imp2(u([-128])), 'array.buffers[0]: type id -128 at 0 is not one of the union\'s (5,127)');
  });
});
