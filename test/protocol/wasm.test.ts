/**
 * The exchange protocol with a WebAssembly module (PROTOCOL.md, "Memory"):
 * handles whose struct lives in the module's linear memory carry `memory`
 * (the module's memory, function table and allocator).
 *
 * - A protocol object written by hand over the wasm32 C peer (test/wasm/peer.c,
 *   clang-built): plain JS on the module's exports, nothing from this
 *   package; our importers take the structs over in the module's memory and
 *   release them through its table, exactly once.
 * - Our export into the module's memory, consumed by a consumer written by
 *   hand: it moves the structs into its own allocations in the module, and
 *   the module's C code reads them and calls our release from wasm.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Field, Int32, makeData, RecordBatch, Schema, Struct, vectorFromArray } from 'apache-arrow';
import {
  accounting, ArrowDeviceError, ArrowSymbols, arrowExportable, importVector, importType, nativeMemory,
  type ArrowArrayExportable, type ArrowSchemaExportable,
} from '../../src/index.js';
import { cPeer, cPeerSkip, type CPeerExports } from '../wasm/modules.js';

const skip = cPeerSkip;

/** sizeof and offsetof(release) of the structs on wasm32 (arrow_c_abi.h with 4-byte pointers). */
const WASM32 = { ArrowSchema: { size: 48, release: 40 }, ArrowArray: { size: 64, release: 52 } } as const;

/**
 * A protocol object over the peer, as a wasm module's JS glue would write it:
 * `make_int32` arrays of `n` values (i * 3 - 7, every 5th null) and their schema.
 */
function peerExportable(ex: CPeerExports, n: number) {
  // One object for every handle: consumers cache per `memory` object.
  const memory = { memory: ex.memory, table: ex.__indirect_function_table, malloc: ex.malloc, free: ex.free };
  const stats = { disposed: 0 };
  const handle = (kind: keyof typeof WASM32, fill: (p: number) => void) => {
    const { size, release } = WASM32[kind];
    const p = ex.malloc(size);
    new Uint8Array(ex.memory.buffer, p, size).fill(0);
    fill(p);
    let disposed = false;
    return {
      address: BigInt(p),
      memory,
      [Symbol.dispose]() {
        if (disposed) return;
        disposed = true;
        stats.disposed++;
        const rel = new DataView(ex.memory.buffer).getUint32(p + release, true);
        if (rel !== 0) (ex.__indirect_function_table.get(rel) as (s: number) => void)(p);
        ex.free(p);
      },
    };
  };
  const object = {
    [Symbol.for('arrow.c_schema')]: () => handle('ArrowSchema', (p) => ex.make_int32_schema(p)),
    [Symbol.for('arrow.c_array')]: () => {
      const schema = handle('ArrowSchema', (p) => ex.make_int32_schema(p));
      const array = handle('ArrowArray', (p) => ex.make_int32(p, n, 1, 0));
      return {
        schema,
        array,
        [Symbol.dispose]() {
          array[Symbol.dispose]();
          schema[Symbol.dispose]();
        },
      };
    },
  };
  return { object: object as unknown as ArrowArrayExportable & ArrowSchemaExportable, stats, memory };
}

function expected(n: number): (number | null)[] {
  return Array.from({ length: n }, (_, i) => (i % 5 === 4 ? null : i * 3 - 7));
}

describe('the exchange protocol with a wasm32 module', { skip }, () => {
  test('a hand-written protocol object over the module: imported zero-copy from its memory, released once through its table', () => {
    const p = cPeer();
    const ex = p.exports;
    const base = ex.live_allocations();
    const { object, stats } = peerExportable(ex, 12);
    const v = importVector(object);
    assert.equal(stats.disposed, 2);
    assert.deepEqual([...v].map((x) => x ?? null), expected(12));
    assert.equal(v.data[0]!.values.buffer, ex.memory.buffer, 'a view of the module memory');
    assert.equal(ex.schema_release_count(), 1, 'the schema was read and released');
    assert.equal(ex.array_release_count(), 0);
    v.release();
    assert.equal(ex.array_release_count(), 1, 'released once, through the module table');
    assert.equal(ex.live_allocations(), base, 'everything allocated in the module is freed');
    assert.equal(String(importType(object)), 'Int32', 'arrow.c_schema through the module memory too');
    assert.equal(ex.schema_release_count(), 2);
  });

  test('an import from the module handed on: the struct moves within the module memory, released once', () => {
    const p = cPeer();
    const ex = p.exports;
    const base = ex.live_allocations();
    const { object } = peerExportable(ex, 7);
    const first = importVector(object);
    const pair = first[ArrowSymbols.array]();
    assert.equal(pair.array.memory?.memory, ex.memory, 'the handle is in the module memory');
    assert.equal(first.released, true);
    const second = importVector({ [ArrowSymbols.array]: () => pair });
    assert.deepEqual([...second].map((x) => x ?? null), expected(7));
    assert.equal(ex.array_release_count(), 0);
    second.release();
    assert.equal(ex.array_release_count(), 1, 'once, by the last owner, through the table');
    assert.equal(ex.live_allocations(), base);
  });

  test('a handle disposed without being consumed releases through the table, once', () => {
    const p = cPeer();
    const ex = p.exports;
    const base = ex.live_allocations();
    const { object } = peerExportable(ex, 3);
    const pair = object[ArrowSymbols.array]();
    pair[Symbol.dispose]();
    pair[Symbol.dispose]();
    assert.equal(ex.array_release_count(), 1);
    assert.equal(ex.schema_release_count(), 1);
    assert.equal(ex.live_allocations(), base);
  });

  test('a handle whose options.memory is another memory is refused, and disposed', () => {
    const p = cPeer();
    const ex = p.exports;
    const { object, stats } = peerExportable(ex, 3);
    assert.throws(
      () => importVector(object, { memory: nativeMemory() }),
      (e: unknown) => e instanceof ArrowDeviceError && e.path === 'opts.memory' && /wasm32 memory, but options\.memory is native/.test(e.message),
    );
    assert.equal(stats.disposed, 2);
    assert.equal(ex.array_release_count(), 1, 'the unconsumed array was released by its dispose');
  });

  test('our export into the module memory: the handles carry it; a hand-written consumer in the module takes and releases them', async () => {
    const p = cPeer();
    const ex = p.exports;
    const type = new Struct([new Field('n', new Int32(), true)]);
    const col = vectorFromArray([1, 2, null, 40, -5], new Int32());
    const batch = new RecordBatch(new Schema(type.children), makeData({ type, length: 5, children: [col.data[0]!] }));
    const exportable = arrowExportable(batch, { memory: p.mem });
    // Warm up (the callbacks and the shared empty buffer are made once per memory).
    exportable[ArrowSymbols.array]()[Symbol.dispose]();
    const base = { peer: ex.live_allocations(), ours: p.mem.allocations.count, exports: accounting().liveExports, handles: accounting().liveHandles };

    const pair = exportable[ArrowSymbols.array]();
    assert.equal(pair.array.memory?.memory, ex.memory, "the handle names the module's memory");
    assert.equal(pair.array.memory?.table, ex.__indirect_function_table);
    assert.equal(pair.schema.memory, pair.array.memory, 'one object per memory');
    // The consumer: its own structs in the module, a bitwise move, the sources marked released.
    const u8 = () => new Uint8Array(ex.memory.buffer);
    const take = (h: { address: bigint }, kind: keyof typeof WASM32): number => {
      const mine = ex.malloc(WASM32[kind].size);
      u8().copyWithin(mine, Number(h.address), Number(h.address) + WASM32[kind].size);
      new DataView(ex.memory.buffer).setUint32(Number(h.address) + WASM32[kind].release, 0, true);
      return mine;
    };
    const s = take(pair.schema, 'ArrowSchema');
    const a = take(pair.array, 'ArrowArray');
    pair[Symbol.dispose]();
    assert.equal(accounting().liveHandles, base.handles, 'the handles are disposed');
    assert.ok(accounting().liveExports > base.exports, 'the consumer holds the exports');
    assert.equal(ex.sum_int32_column(s, a, 0), 38n, 'the module summed it and released both');
    ex.free(s);
    ex.free(a);
    await pair.released;
    assert.equal(accounting().liveExports, base.exports);
    assert.equal(p.mem.allocations.count, base.ours, 'our allocations in the module are freed');
    assert.equal(ex.live_allocations(), base.peer);
  });
});
