/**
 * Arguments checked at the public boundary (src/args.ts): each mistake a
 * caller makes gives an ArrowDeviceError of kind 'invalid' naming the
 * parameter, what it expected and what came, instead of a TypeError from deep
 * inside, a silent wrong result, or a crash. Plus the wasm growth rule: a
 * view detached by a growth of the module's memory throws when read through
 * our objects.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Field, Int32, Schema, tableFromArrays, type RecordBatch } from 'apache-arrow';
import {
  accounting, ArrowDeviceError, exportArray, exportRecordBatch, exportSchema, exportTable, freeArrowArray, freeArrowSchema,
  importArrayStream, importData, importDeviceArray, importRecordBatch, importSchema, importTable, importVector,
  releaseArrowArray, releaseArrowSchema, wasmMemory, type WasmMemory,
} from '../../src/index.js';
import { describeValue } from '../../src/args.js';

function batch(): RecordBatch {
  return tableFromArrays({ id: Int32Array.from([1, 2, 3]) }).batches[0]!;
}

/** Matches an 'invalid' error with this exact message (path first, as thrown). */
function invalidError(message: string | RegExp): (e: unknown) => boolean {
  return (e: unknown) => {
    assert.ok(e instanceof ArrowDeviceError, `an ArrowDeviceError, got ${String(e)}`);
    assert.equal(e.kind, 'invalid');
    if (typeof message === 'string') assert.equal(e.message, message);
    else assert.match(e.message, message);
    return true;
  };
}

/** A wasm32 memory of one page, a bump allocator that grows it, and a growable table. */
function wasm(): { mem: WasmMemory; memory: WebAssembly.Memory } {
  const memory = new WebAssembly.Memory({ initial: 1 });
  let top = 1024;
  const malloc = (n: number, align: number): number => {
    top = Math.ceil(top / align) * align;
    const p = top;
    top += n;
    if (top > memory.buffer.byteLength) memory.grow(Math.ceil((top - memory.buffer.byteLength) / 65536));
    return p;
  };
  const table = new WebAssembly.Table({ initial: 1, element: 'anyfunc' });
  return { mem: wasmMemory({ memory, malloc, free: () => {}, table }), memory };
}

describe('arguments checked at the boundary', () => {
  test('describeValue says what came', () => {
    assert.equal(describeValue(undefined), 'undefined');
    assert.equal(describeValue(null), 'null');
    assert.equal(describeValue(7), 'the number 7');
    assert.equal(describeValue(0x10n), 'the pointer 0x10');
    assert.equal(describeValue('abc'), 'a string ("abc")');
    assert.equal(describeValue([1n, 2n]), 'an array of 2');
    assert.equal(describeValue(new Field('x', new Int32())), 'a Field');
    assert.equal(describeValue({}), 'an object');
  });

  test('a number where a pointer goes: names the parameter and says to pass a BigInt', () => {
    assert.throws(() => importSchema(123 as never), invalidError('ptr: expected a pointer (bigint) to an ArrowSchema, got the number 123: pass BigInt(123)'));
    assert.throws(() => importRecordBatch(5 as never, batch().schema), invalidError('ptr: expected a pointer (bigint) to an ArrowArray, got the number 5: pass BigInt(5)'));
    assert.throws(() => releaseArrowArray(5 as never), invalidError(/^ptr: expected a pointer \(bigint\) to an ArrowArray, got the number 5/));
    assert.throws(() => importArrayStream(7 as never), invalidError(/^ptr: expected a pointer \(bigint\) to an ArrowArrayStream, got the number 7/));
    assert.throws(() => importDeviceArray(9 as never, new Int32()), invalidError(/^ptr: expected a pointer \(bigint\) to an ArrowDeviceArray, got the number 9/));
    assert.throws(() => exportArray(batch(), { into: 5 as never }), invalidError(/^opts\.into: expected a pointer \(bigint\) to an ArrowArray, got the number 5/));
    assert.throws(() => exportRecordBatch(batch(), { schemaInto: 1.5 as never }), invalidError('opts.schemaInto: expected a pointer (bigint) to an ArrowSchema, got the number 1.5'));
    assert.throws(() => importVector(undefined as never, new Int32()), invalidError('ptr: expected a pointer (bigint) to an ArrowArray, got undefined'));
  });

  test('importTable(field): the first argument must be an array of pointers', () => {
    assert.throws(() => importTable(new Field('a', new Int32()) as never, undefined as never), invalidError('ptrs: expected an array of pointers (bigint[]) to ArrowArrays, got a Field'));
  });

  test('importTable(one pointer, schema) is refused, and the array is left to the caller', () => {
    const live = accounting().liveExports;
    const { schema, arrays } = exportTable(tableFromArrays({ id: Int32Array.from([1, 2]) }));
    assert.throws(() => importTable(arrays[0] as never, schema), invalidError(/^ptrs: expected an array of pointers \(bigint\[\]\) to ArrowArrays, got the pointer 0x[0-9a-f]+$/));
    // Not consumed: the caller still owns it (before, this made an empty table and leaked it).
    assert.ok(accounting().liveExports > live);
    for (const p of arrays) freeArrowArray(p);
    freeArrowSchema(schema);
  });

  test('a Field where a schema goes: named, and the arrays are consumed as import promises', () => {
    const { schema, arrays } = exportTable(tableFromArrays({ id: Int32Array.from([1, 2]) }));
    const live = accounting().liveExports;
    assert.throws(
      () => importTable(arrays, new Field('a', new Int32()) as never),
      invalidError('schema: expected an arrow-js Schema, a SchemaNode or a pointer (bigint) to an ArrowSchema, got a Field'),
    );
    assert.ok(accounting().liveExports < live, 'the arrays were released');
    assert.throws(
      () => importData(exportArray(batch()), 'int32' as never),
      invalidError(/^schema: expected an arrow-js Schema, Field or DataType, a SchemaNode or a pointer \(bigint\) to an ArrowSchema, got a string \("int32"\)$/),
    );
    for (const p of arrays) freeArrowArray(p);
    freeArrowSchema(schema);
  });

  test('a pointer into wasm memory passed without { memory } is refused, not read natively', () => {
    const { mem } = wasm();
    const { schema, array } = exportRecordBatch(batch(), { memory: mem });
    assert.ok(array < 0x10000n, 'a wasm pointer is small');
    // Read as native memory this would crash the process.
    assert.throws(
      () => importRecordBatch(array, schema),
      invalidError(
        `ptr: expected a pointer to an ArrowArray in native memory: invalid address 0x${array.toString(16)} (80 bytes), ` +
          "below 64 KiB where no native memory is mapped: is it a pointer into a WebAssembly module's memory? Pass { memory: wasmMemory(...) }",
      ),
    );
    assert.throws(() => releaseArrowSchema(schema), invalidError(/^ptr: expected a pointer to an ArrowSchema in native memory: .*WebAssembly/));
    // With { memory } the same pointers import.
    const back = importRecordBatch(array, schema, { memory: mem });
    assert.deepEqual([...back.getChild('id')!], [1, 2, 3]);
  });

  test('a pointer past the end of the given wasm memory is refused', () => {
    const { mem, memory } = wasm();
    const beyond = BigInt(memory.buffer.byteLength + 64);
    assert.throws(
      () => importRecordBatch(beyond, batch().schema, { memory: mem }),
      invalidError(`ptr: expected a pointer to an ArrowArray in wasm32 memory: address 0x${beyond.toString(16)} (64 bytes) is outside the wasm memory of 65536 bytes`),
    );
    assert.throws(() => importSchema(2n ** 33n, { memory: mem }), invalidError(/^ptr: expected a pointer to an ArrowSchema in wasm32 memory: address 0x200000000 is not a wasm32 address$/));
  });

  test("importTable checks a schema pointer under the name schema, and consumes the arrays it refuses with", () => {
    const { mem, memory } = wasm();
    const { array } = exportRecordBatch(batch(), { memory: mem });
    const { array: array2, schema } = exportRecordBatch(batch(), { memory: mem });
    const beyond = BigInt(memory.buffer.byteLength + 64);
    assert.throws(
      () => importTable([array], beyond, { memory: mem }),
      invalidError(`schema: expected a pointer to an ArrowSchema in wasm32 memory: address 0x${beyond.toString(16)} (48 bytes) is outside the wasm memory of ${memory.buffer.byteLength} bytes`),
    );
    assert.throws(() => importRecordBatch(array, batch().schema, { memory: mem }), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released');
    // An array is the pointer form even when it carries a protocol method: its elements are the pointers.
    const ptrs = Object.assign([array2], { [Symbol.for('arrow.c_stream')]: () => assert.fail('probed as an exportable') });
    const t = importTable(ptrs, schema, { memory: mem });
    assert.deepEqual([...t.getChild('id')!], [1, 2, 3]);
    t.release();
  });

  test('a view of wasm memory detached by a growth throws when read through the Data, never reads as empty', () => {
    const { mem, memory } = wasm();
    const { schema, array } = exportRecordBatch(batch(), { memory: mem });
    const back = importRecordBatch(array, exportSchema(new Schema(batch().schema.fields), { memory: mem }), { memory: mem });
    freeArrowSchema(schema, { memory: mem });
    const col = back.getChild('id')!;
    assert.deepEqual([...col], [1, 2, 3], 'read (and viewed) before the growth');
    memory.grow(1);
    assert.throws(
      () => [...col],
      (e: unknown) =>
        e instanceof ArrowDeviceError && e.kind === 'memory' && e.path === 'array.children[0].values' &&
        e.message === "array.children[0].values: this buffer was viewed in a WebAssembly module's memory before the memory grew, which detached the view; " +
          'read the data after the module is done growing its memory, or import with { copy: true }',
    );
    assert.throws(() => col.get(0), ArrowDeviceError);
  });
});
