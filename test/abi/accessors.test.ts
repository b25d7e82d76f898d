/**
 * The typed accessors (src/abi/accessors.ts) are generated from the ABI
 * tables: every field of every struct, on both targets, at the offset the
 * layout (proven against the C compiler in layout.test.ts) gives, reading
 * and writing the C type the definition declares.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { access } from '../../src/abi/accessors.js';
import { ALL_STRUCTS, layoutsFor, NATIVE64, WASM32 } from '../../src/abi/layout.js';

for (const target of [NATIVE64, WASM32]) {
  describe(`accessors for ${target.name}`, () => {
    const A = access(target);
    const L = layoutsFor(target);

    test('every field of every struct has an accessor at its layout offset, and every struct its size', () => {
      for (const def of ALL_STRUCTS) {
        const sa = (A as unknown as Record<string, Record<string, { offset: number } | number>>)[def.name]!;
        const layout = (L as unknown as Record<string, { size: number; offsets: Record<string, number> }>)[def.name]!;
        assert.equal(sa.$size, layout.size, `${def.name} size`);
        for (const f of def.fields) {
          assert.equal((sa[f.name] as { offset: number }).offset, layout.offsets[f.name], `${def.name}.${f.name}`);
        }
        assert.equal(Object.keys(sa).length, def.fields.length + 1, `${def.name}: one accessor per field`);
      }
    });

    test('int64 fields read exactly within 2^53 and as +-Infinity beyond, with the exact value from big()', () => {
      const dv = new DataView(new ArrayBuffer(256));
      const f = A.ArrowArray.length;
      for (const v of [0, 1, -1, 2 ** 40 + 3, -(2 ** 52), Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER]) {
        f.set(dv, 16, v);
        assert.equal(f.get(dv, 16), v);
        assert.equal(f.big(dv, 16), BigInt(v));
        assert.equal(dv.getBigInt64(16 + f.offset, true), BigInt(v), 'little-endian int64 at the field');
      }
      dv.setBigInt64(16 + f.offset, 2n ** 60n, true);
      assert.equal(f.get(dv, 16), Infinity);
      assert.equal(f.big(dv, 16), 2n ** 60n);
      dv.setBigInt64(16 + f.offset, -(2n ** 60n), true);
      assert.equal(f.get(dv, 16), -Infinity);
    });

    test('pointers are the target width, and int32 fields are signed', () => {
      const dv = new DataView(new ArrayBuffer(256));
      const p = A.ArrowArray.release;
      const addr = target.pointerSize === 8 ? 0x7fff_1234_5678 : 0xfedc_ba98;
      p.set(dv, 8, addr);
      assert.equal(p.get(dv, 8), addr);
      assert.equal(p.big(dv, 8), BigInt(addr));
      assert.equal(
        target.pointerSize === 8 ? dv.getBigUint64(8 + p.offset, true) : BigInt(dv.getUint32(8 + p.offset, true)),
        BigInt(addr),
      );
      const t = A.ArrowDeviceArray.device_type;
      t.set(dv, 0, -5);
      assert.equal(t.get(dv, 0), -5);
      assert.equal(dv.getInt32(t.offset, true), -5);
    });

    test('array fields index their elements; a struct member has no value of its own', () => {
      const dv = new DataView(new ArrayBuffer(256));
      const r = A.ArrowDeviceArray.reserved;
      r.set(dv, 0, 7, 2);
      assert.equal(r.get(dv, 0, 2), 7);
      assert.equal(dv.getBigInt64(r.offset + 16, true), 7n);
      assert.throws(() => r.get(dv, 0, 3), RangeError);
      assert.throws(() => A.ArrowDeviceArray.array.get(dv, 0), TypeError);
      // @ts-expect-error: a field the struct does not have is a compile error
      assert.equal(A.ArrowArray.lenght, undefined);
    });
  });
}
