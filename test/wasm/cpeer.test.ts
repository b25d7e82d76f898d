/**
 * Import from and export to a wasm32 module through its own memory: the C
 * peer of this folder (peer.c, built with clang --target=wasm32 at test time)
 * produces arrays whose release counts its calls, and consumes ours, calling
 * our release from wasm through its function table.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Int32, makeData, RecordBatch, Schema, Field, Struct, Utf8, vectorFromArray, Vector } from 'apache-arrow';
import {
  accounting, ArrowDeviceError, exportRecordBatch, freeArrowArray, freeArrowSchema, importVector, importData,
} from '../../src/index.js';
import { isDetached } from '../../src/memory/wasm.js';
import { collectUntil } from '../helpers/gc.js';
import { cPeer, cPeerSkip, type CPeer } from './modules.js';

const skip = cPeerSkip;
if (skip) console.log(`# skipping the wasm32 C peer tests: ${skip}`);

/** The values make_int32 produces: i * 3 - 7, every 5th null when `nulls`. */
function expected(n: number, nulls: boolean): (number | null)[] {
  return Array.from({ length: n }, (_, i) => (nulls && i % 5 === 4 ? null : i * 3 - 7));
}

/** An int32 array and its schema produced by the peer into structs we allocate in its memory. */
function produce(p: CPeer, n: number, nulls = true, misalign = 0): { array: bigint; schema: bigint } {
  const array = p.mem.alloc(p.mem.layouts.ArrowArray.size);
  const schema = p.mem.alloc(p.mem.layouts.ArrowSchema.size);
  p.exports.make_int32(Number(array), n, nulls ? 1 : 0, misalign);
  p.exports.make_int32_schema(Number(schema));
  return { array, schema };
}

/** A record batch of single-chunk columns (arrow-js's RecordBatch takes Data, not Vectors). */
function batchOf(cols: Record<string, Vector>): RecordBatch {
  return new RecordBatch(Object.fromEntries(Object.entries(cols).map(([k, v]) => [k, v.data[0]!])));
}

function sumOf(values: (number | null)[]): bigint {
  return values.reduce<bigint>((s, v) => s + BigInt(v ?? 0), 0n);
}

describe('wasm32 C peer', { skip }, () => {
  // The release after collection needs the owner to track wasm views themselves (they all share the
  // memory's one ArrayBuffer, which never dies): src/array/owner.ts change proposed in issue 8.
  test('imports an int32 array zero-copy from the module memory and releases it once, through the table', async () => {
    const p = cPeer();
    const base = p.exports.live_allocations();
    const { array, schema } = produce(p, 100);
    let v: Vector | undefined = importVector(array, schema, { memory: p.mem });
    assert.deepEqual(v.toArray().length, 100);
    assert.deepEqual([...v].map((x) => x ?? null), expected(100, true));
    assert.equal(v.data[0]!.values.buffer, p.exports.memory.buffer, 'the values are a view of the module memory');
    assert.equal(p.exports.schema_release_count(), 1, 'importing the schema released it');
    assert.equal(p.exports.array_release_count(), 0, 'the array lives while a view can reach it');
    assert.equal(p.mem.readPtr(array + BigInt(p.mem.layouts.ArrowArray.offsets.release!)), 0n, 'the source struct was moved out');
    p.mem.free(array);
    p.mem.free(schema);
    v = undefined;
    assert.ok(await collectUntil(() => p.exports.array_release_count() === 1), 'the producer release ran after the views were collected');
    assert.equal(p.exports.array_release_count(), 1);
    assert.equal(p.exports.live_allocations(), base, 'everything the peer and we allocated in the module is freed');
    assert.deepEqual(p.mem.allocations, { count: 0, bytes: 0 });
  });

  test('copy: true copies into JS memory and releases through the table at once', () => {
    const p = cPeer();
    const { array, schema } = produce(p, 37, false);
    const d = importData(array, schema, { memory: p.mem, copy: true });
    assert.equal(p.exports.array_release_count(), 1);
    assert.notEqual(d.values.buffer, p.exports.memory.buffer);
    assert.deepEqual([...new Vector([d])], expected(37, false));
    p.mem.free(array);
    p.mem.free(schema);
  });

  test('a values buffer that is not 4-aligned in the module memory is copied, and counted', () => {
    const p = cPeer();
    const { array, schema } = produce(p, 10, false, 2);
    const copied = accounting().copiedBuffers;
    const v = importVector(array, schema, { memory: p.mem });
    assert.deepEqual([...v], expected(10, false));
    assert.equal(accounting().copiedBuffers, copied + 1);
    p.mem.free(array);
    p.mem.free(schema);
  });

  test('memory growth: buffers first read after a growth see the new memory; views read before are detached, and reading them through the Data throws', () => {
    const p = cPeer();
    const { array, schema } = produce(p, 50);
    const lazy = importVector(array, schema, { memory: p.mem });
    const early = importVector(...Object.values(produce(p, 50)) as [bigint, bigint], { memory: p.mem });
    const earlyValues = early.data[0]!.values; // viewed now, before the growth
    const copied = importVector(...Object.values(produce(p, 50)) as [bigint, bigint], { memory: p.mem, copy: true });
    const pages = p.exports.memory.buffer.byteLength / 65536;
    const big = p.exports.malloc(4 << 20); // the module grows its own memory
    assert.ok(p.exports.memory.buffer.byteLength / 65536 > pages, 'the module memory grew');
    // Imported but not read yet: the views are made now, in the new buffer.
    assert.deepEqual([...lazy].map((x) => x ?? null), expected(50, true));
    assert.equal(lazy.data[0]!.values.buffer, p.exports.memory.buffer);
    // Read before the growth: detached by the engine, length 0; no stale bytes. A typed
    // array the caller kept is plain JS (isDetached tells); through the Data, a read throws
    // rather than reading as empty.
    assert.equal(isDetached(earlyValues), true);
    assert.equal(earlyValues.length, 0);
    const detached = (e: unknown): boolean =>
      e instanceof ArrowDeviceError && e.kind === 'memory' && /^array(\.children\[\d+\])?\.values$/.test(e.path) && /memory grew, which detached the view/.test(e.message);
    assert.throws(() => early.data[0]!.values, detached);
    assert.throws(() => [...early], detached);
    assert.throws(() => early.get(0), detached);
    // Copied: unaffected.
    assert.deepEqual([...copied].map((x) => x ?? null), expected(50, true));
    p.exports.free(big);
    p.mem.free(array);
    p.mem.free(schema);
  });

  test('exports a record batch into the module memory; the C consumer sums it and calls our release from wasm', async () => {
    const p = cPeer();
    const ints = vectorFromArray([1, 2, null, 40, -5, null, 1000], new Int32());
    const strs = vectorFromArray(['a', 'bb', null, 'dddd', '', 'f', 'g'], new Utf8());
    const batch = batchOf({ s: strs, n: ints });
    // Warm up: the shared empty buffer and the release callback are made once per memory.
    freeArrowArray(exportRecordBatch(batch, { memory: p.mem }).array, { memory: p.mem });
    const base = { peer: p.exports.live_allocations(), ours: p.mem.allocations.count, table: p.exports.__indirect_function_table.length };
    const live = accounting().liveExports;
    const { schema, array } = exportRecordBatch(batch, { memory: p.mem });
    assert.equal(p.exports.__indirect_function_table.length, base.table, 'no callback registered per export');
    assert.ok(accounting().liveExports > live);
    const sum = p.exports.sum_int32_column(Number(schema), Number(array), 1);
    assert.equal(sum, 1038n);
    assert.equal(accounting().liveExports, live, 'the consumer released every exported node');
    assert.equal(p.mem.readPtr(array + BigInt(p.mem.layouts.ArrowArray.offsets.release!)), 0n);
    p.exports.release_array_ptr(Number(array)); // a second release attempt: release is NULL, nothing happens
    freeArrowArray(array, { memory: p.mem });
    freeArrowSchema(schema, { memory: p.mem });
    assert.equal(p.mem.allocations.count, base.ours, 'every allocation of the export is freed');
    assert.equal(p.exports.live_allocations(), base.peer);
  });

  test('exports a sliced column: the consumer honours the offsets', () => {
    const p = cPeer();
    const values = Array.from({ length: 100 }, (_, i) => (i % 7 === 3 ? null : i - 50));
    const col = vectorFromArray(values, new Int32()).slice(13, 77);
    const type = new Struct([new Field('x', new Int32(), true)]);
    const batch = new RecordBatch(new Schema(type.children), makeData({ type, length: col.length, children: [col.data[0]!] }));
    const { schema, array } = exportRecordBatch(batch, { memory: p.mem });
    assert.equal(p.exports.sum_int32_column(Number(schema), Number(array), 0), sumOf(values.slice(13, 77)));
    freeArrowArray(array, { memory: p.mem });
    freeArrowSchema(schema, { memory: p.mem });
  });

  test('an export large enough to grow the module memory while it is written is still right', () => {
    const p = cPeer();
    const n = 1_000_000;
    const values = Int32Array.from({ length: n }, (_, i) => (i % 1000) - 500);
    const batch = batchOf({ v: vectorFromArray(values) });
    const growths = p.mem.growths;
    const { schema, array } = exportRecordBatch(batch, { memory: p.mem });
    assert.ok(p.mem.growths > growths, 'the memory grew during the export');
    assert.equal(p.exports.sum_int32_column(Number(schema), Number(array), 0), values.reduce((s, v) => s + BigInt(v), 0n));
    freeArrowArray(array, { memory: p.mem });
    freeArrowSchema(schema, { memory: p.mem });
  });
});
