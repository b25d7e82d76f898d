import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { nativeMemory, NULL } from '../../src/memory/index.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { NATIVE64 } from '../../src/abi/index.js';
import { runChild } from '../helpers/child.js';

const mem = nativeMemory();

describe('native memory', () => {
  test('pointer width is a property of the memory', () => {
    assert.equal(mem.target, NATIVE64);
    assert.equal(mem.layouts.ArrowArray.size, 80);
  });

  test('checkAddress refuses the first 64 KiB and a range past 2^64, and takes the addresses between', () => {
    const refuses = (addr: bigint, size: number, detail: RegExp): void =>
      assert.throws(() => mem.checkAddress(addr, size), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'memory' && detail.test(e.detail));
    refuses(0n, 8, /NULL pointer/);
    refuses(0xfff8n, 8, /invalid address 0xfff8 \(8 bytes\)/);
    // The fast path stops below 2^62; the exact check above it.
    refuses(2n ** 64n - 8n, 16, /invalid address 0xfffffffffffffff8 \(16 bytes\)/);
    refuses(2n ** 64n, 1, /invalid address/);
    for (const [addr, size] of [[0x10000n, 8], [2n ** 62n - 8n, 2 ** 52], [2n ** 62n, 8], [2n ** 64n - 17n, 16]] as const) {
      assert.doesNotThrow(() => mem.checkAddress(addr, size), `0x${addr.toString(16)} (${size} bytes)`);
    }
  });

  test('reads back every integer and float width it writes', () => {
    const p = mem.alloc(64);
    try {
      mem.writeI8(p, -3);
      assert.equal(mem.readI8(p), -3);
      assert.equal(mem.readU8(p), 253);
      mem.writeI16(p + 2n, -300);
      assert.equal(mem.readI16(p + 2n), -300);
      assert.equal(mem.readU16(p + 2n), 65236);
      mem.writeI32(p + 4n, -70000);
      assert.equal(mem.readI32(p + 4n), -70000);
      mem.writeU32(p + 8n, 0xfffffff0);
      assert.equal(mem.readU32(p + 8n), 0xfffffff0);
      mem.writeI64(p + 16n, -(2n ** 62n));
      assert.equal(mem.readI64(p + 16n), -(2n ** 62n));
      mem.writeU64(p + 24n, 2n ** 64n - 1n);
      assert.equal(mem.readU64(p + 24n), 2n ** 64n - 1n);
      assert.equal(mem.readI64(p + 24n), -1n);
      mem.writeF32(p + 32n, 1.5);
      assert.equal(mem.readF32(p + 32n), 1.5);
      mem.writeF64(p + 40n, Math.PI);
      assert.equal(mem.readF64(p + 40n), Math.PI);
      mem.writePtr(p + 48n, p);
      assert.equal(mem.readPtr(p + 48n), p);
      mem.writePtr(p + 48n, NULL);
      assert.equal(mem.readPtr(p + 48n), 0n);
    } finally {
      mem.free(p);
    }
  });

  test('alloc returns zeroed memory and views are zero-copy', () => {
    const p = mem.alloc(32);
    try {
      const v = mem.view(p, 32);
      assert.ok(v.every((b) => b === 0));
      v[5] = 99;
      assert.equal(mem.readU8(p + 5n), 99, 'a write through the view is visible at the address');
      mem.writeU8(p + 6n, 7);
      assert.equal(v[6], 7, 'a write at the address is visible through the view');
      const copy = mem.copyOut(p, 32);
      copy[5] = 0;
      assert.equal(mem.readU8(p + 5n), 99, 'copyOut does not alias');
    } finally {
      mem.free(p);
    }
  });

  test('reads C strings and rejects invalid UTF-8 and missing terminators', () => {
    const p = mem.alloc(16);
    try {
      mem.copyIn(p, new TextEncoder().encode('tsu:UTC\0'));
      assert.equal(mem.readCString(p), 'tsu:UTC');
      mem.copyIn(p, new Uint8Array([0x66, 0xff, 0xfe, 0]));
      assert.throws(() => mem.readCString(p), (e: unknown) => e instanceof ArrowDeviceError && /not valid UTF-8/.test(e.message));
      mem.copyIn(p, new TextEncoder().encode('abcdefgh'));
      assert.throws(() => mem.readCString(p, 4), /no NUL terminator within 4 bytes/);
    } finally {
      mem.free(p);
    }
  });

  test('NULL and low addresses throw a typed error instead of crashing', () => {
    for (const fn of [
      () => mem.readI64(NULL),
      () => mem.readPtr(8n),
      () => mem.writeI32(NULL, 1),
      () => mem.view(NULL, 16),
      () => mem.readCString(NULL),
      () => mem.call(NULL, { name: 'f', result: 'void', params: [] }),
    ]) {
      assert.throws(fn, (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'memory' && e.code === 'EINVAL');
    }
    assert.equal(mem.view(NULL, 0).byteLength, 0, 'an empty view never touches the address');
  });

  test('viewing NULL in a child process does not abort it', () => {
    const r = runChild(`
      import { nativeMemory } from '@/src/memory/index.js';
      try { nativeMemory().view(0n, 64); console.log('no error'); }
      catch (e) { console.log('caught', (e as Error).message); }
    `);
    assert.equal(r.signal, null, `child died with ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /caught NULL pointer/);
  });

  test('addressOf gives the address of JS bytes, offset included', () => {
    const big = new Uint8Array(64);
    const a = mem.addressOf(big)!;
    const b = mem.addressOf(big.subarray(10))!;
    assert.equal(b - a, 10n);
    big[12] = 77;
    assert.equal(mem.readU8(a + 12n), 77);
  });

  test('registers a callback and calls function pointers', () => {
    const seen: bigint[] = [];
    const sig = { name: 'test_cb', result: 'int32', params: ['pointer', 'int64'] } as const;
    const fp = mem.registerCallback(sig, (p, n) => {
      seen.push(p as bigint, n as bigint);
      return 7;
    });
    assert.equal(mem.call(fp, sig, 0x1000n, -5n), 7);
    assert.deepEqual(seen, [0x1000n, -5n]);
  });
});
