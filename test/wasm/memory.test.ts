/**
 * The wasm32 Memory backend on its own: a WebAssembly.Memory with a bump
 * allocator written in JS and a table made here, so none of it needs a
 * toolchain. The C peer and parquet-wasm tests prove it against real modules.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WASM32 } from '../../src/abi/index.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { isDetached, trampolineModule, wasmMemory, type WasmMemory } from '../../src/memory/wasm.js';
import type { Signature } from '../../src/memory/memory.js';
import { exportArray, freeArrowArray } from '../../src/index.js';
import { liveArrayRecords } from '../../src/array/export.js';
import { accounting } from '../../src/memory/accounting.js';
import { Dictionary, Int32, Table, Utf8, vectorFromArray } from 'apache-arrow';

/** A memory of `pages` pages and a bump allocator that grows it, with a free that records what it got. */
function fixture(pages = 1, table?: WebAssembly.Table): { mem: WasmMemory; memory: WebAssembly.Memory; freed: [number, number, number][] } {
  const memory = new WebAssembly.Memory({ initial: pages });
  let top = 1024;
  const freed: [number, number, number][] = [];
  const malloc = (n: number, align: number): number => {
    top = Math.ceil(top / align) * align;
    const p = top;
    top += n;
    if (top > memory.buffer.byteLength) memory.grow(Math.ceil((top - memory.buffer.byteLength) / 65536));
    new Uint8Array(memory.buffer, p, n).fill(0xab); // garbage: alloc must zero it
    return p;
  };
  const free = (p: number, n: number, a: number): void => void freed.push([p, n, a]);
  return { mem: wasmMemory({ memory, malloc, free, table }), memory, freed };
}

const isMemoryError = (re: RegExp) => (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'memory' && re.test(e.message);

describe('wasm32 memory', () => {
  test('is a WASM32 memory with 4-byte pointers', () => {
    const { mem } = fixture();
    assert.equal(mem.target, WASM32);
    assert.equal(mem.layouts.ArrowArray.size, 64);
    assert.equal(mem.addressOf(new Uint8Array(8)), undefined, 'the JS heap is not in the module memory');
  });

  test('reads back every integer and float width it writes, little-endian in the module memory', () => {
    const { mem, memory } = fixture();
    const p = mem.alloc(64);
    mem.writeI8(p, -3);
    assert.equal(mem.readU8(p), 253);
    mem.writeI16(p + 2n, -300);
    assert.equal(mem.readU16(p + 2n), 65236);
    mem.writeI32(p + 4n, -70000);
    assert.equal(new DataView(memory.buffer).getInt32(Number(p) + 4, true), -70000);
    mem.writeU32(p + 8n, 0xfffffff0);
    assert.equal(mem.readI32(p + 8n), -16);
    mem.writeI64(p + 16n, -(2n ** 62n));
    assert.equal(mem.readI64(p + 16n), -(2n ** 62n));
    mem.writeU64(p + 24n, 2n ** 64n - 1n);
    assert.equal(mem.readI64(p + 24n), -1n);
    mem.writeF32(p + 32n, 1.5);
    assert.equal(mem.readF32(p + 32n), 1.5);
    mem.writeF64(p + 40n, Math.PI);
    assert.equal(mem.readF64(p + 40n), Math.PI);
    mem.writePtr(p + 48n, 0xfffffff8n);
    assert.equal(mem.readPtr(p + 48n), 0xfffffff8n, 'pointers are unsigned 32-bit');
    assert.equal(mem.readU32(p + 52n), 0, 'a pointer write is 4 bytes wide');
    assert.throws(() => mem.writePtr(p, 1n << 32n), isMemoryError(/does not fit in 32 bits/));
  });

  test('alloc returns zeroed 16-aligned memory through the module allocator; free passes back size and alignment', () => {
    const { mem, freed } = fixture();
    const p = mem.alloc(40);
    assert.equal(p % 16n, 0n);
    assert.ok(mem.view(p, 40).every((b) => b === 0));
    assert.deepEqual(mem.allocations, { count: 1, bytes: 40 });
    mem.free(p);
    assert.deepEqual(freed, [[Number(p), 40, 16]]);
    assert.deepEqual(mem.allocations, { count: 0, bytes: 0 });
    assert.throws(() => mem.free(p), isMemoryError(/did not allocate \(or freed already\)/), 'a double free never reaches the module');
    mem.free(0n);
  });

  test('refuses an allocator that does not align to 8', () => {
    const memory = new WebAssembly.Memory({ initial: 1 });
    const freed: number[] = [];
    const mem = wasmMemory({ memory, malloc: () => 1028, free: (p) => void freed.push(p) });
    assert.throws(() => mem.alloc(8), (e: unknown) => e instanceof ArrowDeviceError && /not 8-byte aligned/.test(e.message));
    assert.deepEqual(freed, [1028]);
  });

  test('NULL and out-of-range addresses throw a typed memory error', () => {
    const { mem, memory } = fixture();
    const size = BigInt(memory.buffer.byteLength);
    assert.throws(() => mem.readI32(0n), isMemoryError(/^NULL pointer$/));
    assert.throws(() => mem.view(0n, 4), isMemoryError(/NULL pointer/));
    assert.throws(() => mem.readI64(size - 4n), isMemoryError(/outside the wasm memory of 65536 bytes/));
    assert.throws(() => mem.readU8(size), isMemoryError(/outside the wasm memory/));
    assert.throws(() => mem.view(size - 8n, 16), isMemoryError(/outside the wasm memory/));
    assert.throws(() => mem.copyIn(size - 1n, new Uint8Array(2)), isMemoryError(/outside the wasm memory/));
    assert.throws(() => mem.readPtr(1n << 40n), isMemoryError(/not a wasm32 address/));
    assert.throws(() => mem.checkAddress(size - 2n, 4), isMemoryError(/outside/));
    assert.throws(() => mem.view(16n, -1), isMemoryError(/invalid length/));
    assert.equal(mem.readU8(size - 1n), 0, 'the last byte is in range');
    assert.equal(mem.view(0n, 0).byteLength, 0, 'a view of 0 bytes never touches the address');
  });

  test('reads C strings, rejecting invalid UTF-8, missing terminators and strings that run off the memory', () => {
    const { mem, memory } = fixture();
    const p = mem.alloc(16);
    mem.copyIn(p, new TextEncoder().encode('tsu:UTC\0'));
    assert.equal(mem.readCString(p), 'tsu:UTC');
    mem.copyIn(p, new Uint8Array([0x66, 0xff, 0xfe, 0]));
    assert.throws(() => mem.readCString(p), /not valid UTF-8/);
    mem.copyIn(p, new TextEncoder().encode('abcdefgh'));
    assert.throws(() => mem.readCString(p, 4), /no NUL terminator within 4 bytes/);
    const end = BigInt(memory.buffer.byteLength);
    mem.copyIn(end - 3n, new Uint8Array([0x61, 0x62, 0x63]));
    assert.throws(() => mem.readCString(end - 3n), isMemoryError(/runs off the end of the wasm memory/));
  });

  test('views are zero-copy subarrays of the module memory', () => {
    const { mem, memory } = fixture();
    const p = mem.alloc(32);
    const v = mem.view(p, 32);
    assert.equal(v.buffer, memory.buffer);
    assert.equal(v.byteOffset, Number(p));
    v[5] = 99;
    assert.equal(mem.readU8(p + 5n), 99);
    const c = mem.copyOut(p, 32);
    c[5] = 0;
    assert.equal(mem.readU8(p + 5n), 99, 'copyOut does not alias');
  });

  test('memory growth: reads use the new buffer, old views are detached (length 0, never stale), new views work', () => {
    const { mem, memory } = fixture(1);
    const p = mem.alloc(16);
    mem.writeI32(p, 1234);
    const before = mem.view(p, 16);
    const typed = new Int32Array(before.buffer, before.byteOffset, 4);
    assert.equal(typed[0], 1234);
    assert.equal(isDetached(before), false);
    const oldBuffer = memory.buffer;
    memory.grow(2); // what any allocation inside the module may do
    assert.notEqual(memory.buffer, oldBuffer);
    // The old views are detached by the engine: nothing stale can be read through them.
    assert.equal(isDetached(before), true);
    assert.equal(before.byteLength, 0);
    assert.equal(typed.length, 0);
    assert.equal(typed[0], undefined);
    assert.throws(() => before.slice(), TypeError, 'typed-array methods on a detached view throw');
    // The memory follows the new buffer: the data is where it was, and the new pages are reachable.
    assert.equal(mem.readI32(p), 1234);
    assert.equal(mem.growths, 1);
    const after = mem.view(p, 16);
    assert.equal(after.buffer, memory.buffer);
    assert.equal(new Int32Array(after.buffer, after.byteOffset, 4)[0], 1234);
    mem.writeI32(BigInt(3 * 65536 - 4), 7);
    assert.equal(mem.readI32(BigInt(3 * 65536 - 4)), 7, 'the grown pages are in range');
    // An allocation that grows the memory inside alloc is zeroed in the new buffer.
    const big = mem.alloc(200_000);
    assert.equal(mem.growths, 2);
    assert.ok(mem.view(big, 200_000).every((b) => b === 0));
  });

  test('a shared memory is not detached by growth: old views stay valid', () => {
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 4, shared: true });
    let top = 1024;
    const mem = wasmMemory({ memory, malloc: (n) => ((top += n), top - n), free: () => {} });
    const p = mem.alloc(16);
    const v = mem.view(p, 16);
    memory.grow(1);
    mem.writeU8(p, 42);
    assert.equal(v[0], 42);
    assert.equal(isDetached(v), false);
    mem.writeU8(BigInt(2 * 65536 - 1), 1);
    assert.equal(mem.readU8(BigInt(2 * 65536 - 1)), 1);
  });

  test('the trampoline module is valid wasm for every signature the interfaces use', () => {
    const sigs: Signature[] = [
      { name: 'release', result: 'void', params: ['pointer'] },
      { name: 'get_next', result: 'int32', params: ['pointer', 'pointer'] },
      { name: 'get_last_error', result: 'pointer', params: ['pointer'] },
      { name: 'request', result: 'void', params: ['pointer', 'int64'] },
      { name: 'none', result: 'void', params: [] },
    ];
    for (const s of sigs) assert.ok(WebAssembly.validate(trampolineModule(s)), s.name);
  });

  test('registerCallback puts a wasm function into the table; call reaches it with bigint pointers and int64', () => {
    const table = new WebAssembly.Table({ initial: 1, element: 'anyfunc' });
    const { mem } = fixture(1, table);
    const seen: unknown[] = [];
    const sig: Signature = { name: 'request', result: 'int64', params: ['pointer', 'int64', 'int32'] };
    const fp = mem.registerCallback(sig, (p, n, k) => {
      seen.push(p, n, k);
      return (n as bigint) * 2n;
    });
    assert.equal(fp, 1n, 'the callback is at a new index of the table');
    assert.equal(table.length, 2);
    assert.equal(typeof table.get(1), 'function');
    const r = mem.call(fp, sig, 0xfffffff0n, -(2n ** 40n), -5);
    assert.deepEqual(seen, [0xfffffff0n, -(2n ** 40n), -5], 'a pointer above 2^31 arrives unsigned');
    assert.equal(r, -(2n ** 41n));
    const ptrSig: Signature = { name: 'get_last_error', result: 'pointer', params: ['pointer'] };
    const fp2 = mem.registerCallback(ptrSig, () => 0xfffffff0n);
    assert.equal(mem.call(fp2, ptrSig, 16n), 0xfffffff0n);
  });

  test('call refuses NULL, out-of-table and empty function pointers with typed errors', () => {
    const table = new WebAssembly.Table({ initial: 3, element: 'anyfunc' });
    const { mem } = fixture(1, table);
    const sig: Signature = { name: 'release', result: 'void', params: ['pointer'] };
    assert.throws(() => mem.call(0n, sig, 8n), isMemoryError(/NULL function pointer \(release\)/));
    assert.throws(() => mem.call(9n, sig, 8n), isMemoryError(/outside the module's function table of 3 entries/));
    assert.throws(() => mem.call(2n, sig, 8n), isMemoryError(/empty slot/));
  });

  test('without a table, or with one that cannot grow, callbacks fail with a clear unsupported error', () => {
    const sig: Signature = { name: 'release', result: 'void', params: ['pointer'] };
    const { mem } = fixture();
    assert.throws(() => mem.registerCallback(sig, () => {}), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported' && /--export-table/.test(e.message));
    assert.throws(() => mem.call(1n, sig, 8n), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported');
    const fixed = new WebAssembly.Table({ initial: 1, maximum: 1, element: 'anyfunc' });
    const { mem: m2 } = fixture(1, fixed);
    assert.throws(() => m2.registerCallback(sig, () => {}), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported' && /growable-table/.test(e.message));
  });

  test('an export whose buffer copy cannot be allocated leaves nothing: no record, no allocation, no struct written', () => {
    // A wasm32 memory cannot point at JS buffers: export copies each into the module, node by
    // node, so an allocation can fail with some of the tree's nodes written and their records made.
    const memory = new WebAssembly.Memory({ initial: 1 });
    const table = new WebAssembly.Table({ initial: 1, element: 'anyfunc' });
    let top = 1024;
    let calls = 0;
    let failAt = Infinity;
    const malloc = (n: number, align: number): number => {
      if (++calls >= failAt) return 0;
      top = Math.ceil(top / align) * align;
      const p = top;
      top += n;
      if (top > memory.buffer.byteLength) memory.grow(Math.ceil((top - memory.buffer.byteLength) / 65536));
      return p;
    };
    const mem = wasmMemory({ memory, malloc, free: () => {}, table });
    const batch = new Table({
      a: vectorFromArray([1, 2, null], undefined),
      s: vectorFromArray(['x', 'yy', 'zzz'], new Utf8()),
    }).batches[0]!;
    const into = mem.alloc(mem.layouts.ArrowArray.size);
    const recordsBefore = liveArrayRecords();
    // A full export first: how many allocations it makes.
    calls = 0;
    freeArrowArray(exportArray(batch, { memory: mem }), { memory: mem });
    const total = calls;
    assert.ok(total >= 4, `an export of 2 columns allocates its tree and each buffer's copy (${total} allocations)`);
    // Into a struct of the caller's, the export allocates all but that struct.
    for (let k = 1; k < total; k++) {
      const records = liveArrayRecords();
      const allocations = mem.allocations.count;
      const exports = accounting().liveExports;
      calls = 0;
      failAt = k;
      assert.throws(() => exportArray(batch, { memory: mem, into }), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'nomem', `allocation ${k} of ${total}`);
      failAt = Infinity;
      assert.equal(liveArrayRecords(), records, `no record left when allocation ${k} of ${total} fails`);
      assert.equal(mem.allocations.count, allocations, `no allocation left when allocation ${k} of ${total} fails`);
      assert.equal(accounting().liveExports, exports);
      assert.equal(mem.readPtr(into + BigInt(mem.layouts.ArrowArray.offsets.release!)), 0n, 'the caller\'s struct is not written');
    }
    calls = 0;
    failAt = total;
    exportArray(batch, { memory: mem, into });
    assert.equal(liveArrayRecords(), 3 + recordsBefore, 'the struct and its two children');
    freeArrowArray(into, { memory: mem });
    assert.equal(liveArrayRecords(), recordsBefore);
  });

  test("an export's struct holds no stale bytes in its padding (a wasm32 ArrowArray ends with 4)", () => {
    // A native export of a dictionary array leaves a 64-bit dictionary pointer in the scratch space
    // roots are written in; its high half sits where a wasm32 struct has padding.
    const dict = vectorFromArray(['a', 'b', 'a'], new Dictionary(new Utf8(), new Int32())).data[0]!;
    const native = exportArray(dict);
    const { mem } = fixture(1, new WebAssembly.Table({ initial: 1, element: 'anyfunc' }));
    const size = mem.layouts.ArrowArray.size;
    assert.equal(size, 64);
    const into = mem.alloc(size);
    mem.copyIn(into, new Uint8Array(size).fill(0xee));
    exportArray(vectorFromArray([1, 2], new Int32()).data[0]!, { memory: mem, into });
    assert.deepEqual([...mem.read(into + 60n, 4)], [0, 0, 0, 0]);
    freeArrowArray(into, { memory: mem });
    freeArrowArray(native);
  });

  test('the same module gives the same Memory object', () => {
    const memory = new WebAssembly.Memory({ initial: 1 });
    const malloc = (): number => 1024;
    const free = (): void => {};
    assert.equal(wasmMemory({ memory, malloc, free }), wasmMemory({ memory, malloc, free }));
  });
});
