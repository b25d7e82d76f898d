/**
 * ArrowArrayStream and CPU ArrowDeviceArrayStream, both directions: import
 * of a foreign stream (test/stream/producer.ts, made to fail on demand),
 * export of arrow-js sources read by a raw consumer (plain C calls through
 * the memory backend), and self round trips of every gold file, with the
 * accounting back to zero.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import {
  Field, Int32, Int64, RecordBatch, RecordBatchReader, Schema, Table, tableFromArrays, tableFromIPC, tableToIPC, Utf8,
  vectorFromArray,
} from 'apache-arrow';
import {
  accounting, ArrowDeviceError, DeviceType, Errno, importRecordBatch, importSchema, nativeMemory, type Ptr,
} from '../../src/index.js';
import {
  allocArrowArrayStream, exportArrayStream, exportDeviceArrayStream, freeArrowArrayStream, freeArrowDeviceArrayStream,
  importArrayStream, importDeviceArrayStream, isArrowArrayStreamReleased, RecordBatchStreamImport, releaseArrowArrayStream,
  StreamProducerError,
} from '../../src/stream/index.js';
import { diffTables } from '../helpers/compare.js';
import { collectUntil } from '../helpers/gc.js';
import { ARROW_JS_UNREADABLE, GOLD, goldFiles } from '../helpers/gold.js';
import { makeProducer } from './producer.js';

const m = nativeMemory();
const S = m.layouts.ArrowArrayStream.offsets;

async function settle(): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
}

/**
 * Runs a test body, then proves the accounting is back to zero. The body is a
 * synchronous function of its own: an async test function would keep its locals
 * (readers, batches) alive until it returns, and with them the imports.
 */
async function checked(body: () => void): Promise<void> {
  body();
  await settle();
}

/** Five batches of 3 rows: x = 0..14, s = "v0".."v14". */
function fiveBatches(): RecordBatch[] {
  const out: RecordBatch[] = [];
  for (let b = 0; b < 5; b++) {
    const xs = Int32Array.from({ length: 3 }, (_, i) => b * 3 + i);
    out.push(new Table({ x: vectorFromArray(xs), s: vectorFromArray([...xs].map((v) => `v${v}`), new Utf8()) }).batches[0]!);
  }
  return out;
}
const batchSchema = (): Schema => fiveBatches()[0]!.schema;
/** The x values of every batch, each read while the batch is current (a reader keeps one batch alive at a time). */
const xs = (batches: Iterable<RecordBatch>): number[] => {
  const out: number[] = [];
  for (const b of batches) out.push(...(b.getChild('x')!.toArray() as Int32Array));
  return out;
};

// --- raw consumer calls, for the export side ------------------------------------------

const INT2 = { name: 'raw_int2', result: 'int32', params: ['pointer', 'pointer'] } as const;
const LAST = { name: 'raw_last', result: 'pointer', params: ['pointer'] } as const;
const REL = { name: 'release', result: 'void', params: ['pointer'] } as const;

function rawGetNext(stream: Ptr, out: Ptr): number {
  return m.call(m.readPtr(stream + BigInt(S.get_next!)), INT2, stream, out) as number;
}
function rawGetSchema(stream: Ptr, out: Ptr): number {
  return m.call(m.readPtr(stream + BigInt(S.get_schema!)), INT2, stream, out) as number;
}
function rawLastError(stream: Ptr): { ptr: Ptr; text: string | null } {
  const p = m.call(m.readPtr(stream + BigInt(S.get_last_error!)), LAST, stream) as Ptr;
  return { ptr: p, text: p === 0n ? null : m.readCString(p) };
}
function rawRelease(stream: Ptr): void {
  m.call(m.readPtr(stream + BigInt(S.release!)), REL, stream);
}

describe('importArrayStream', () => {
  test('reads the schema first, then batches on demand, and releases at the end', () =>
    checked(() => {
      const p = makeProducer({ schema: batchSchema(), batches: fiveBatches() });
      (() => {
        const reader = importArrayStream(p.ptr);
        assert.equal(isArrowArrayStreamReleased(p.ptr), true, 'the source struct is moved out');
        assert.deepEqual(reader.schema.fields.map((f) => f.name), ['x', 's']);
        assert.equal(p.calls.getSchema, 1);
        assert.equal(p.calls.getNext, 0, 'no batch read before asked');
        const first = reader.next();
        assert.equal(first.done, false);
        assert.equal(p.calls.getNext, 1);
        const rest = reader.readAll();
        assert.deepEqual(xs([first.value!, ...rest]), Array.from({ length: 15 }, (_, i) => i));
        assert.equal(reader.released, true);
        assert.equal(reader.batchesRead, 5);
        assert.equal(p.calls.release, 1);
      })();
      p.free();
    }));

  test('is an Iterable<RecordBatch> arrow-js takes: new Table(reader) with { keep: true }, for...of', () =>
    checked(() => {
      const p1 = makeProducer({ schema: batchSchema(), batches: fiveBatches() });
      const p2 = makeProducer({ schema: batchSchema(), batches: fiveBatches() });
      (() => {
        const t = new Table(importArrayStream(p1.ptr, { keep: true }));
        assert.equal(t.numRows, 15);
        assert.deepEqual(t.getChild('s')!.toArray().slice(0, 2), ['v0', 'v1']);
        let n = 0;
        for (const b of importArrayStream(p2.ptr)) n += b.numRows;
        assert.equal(n, 15);
      })();
      assert.equal(p1.calls.release, 1);
      assert.equal(p2.calls.release, 1);
      p1.free();
      p2.free();
    }));

  test('an empty stream gives a table of its schema', () =>
    checked(() => {
      const p = makeProducer({ schema: batchSchema(), batches: [] });
      const t = importArrayStream(p.ptr).toTable();
      assert.equal(t.numRows, 0);
      assert.deepEqual(t.schema.fields.map((f) => f.name), ['x', 's']);
      assert.equal(p.calls.release, 1);
      p.free();
    }));

  for (const [where, at] of [['first', 0], ['middle', 2], ['last', 4]] as const) {
    test(`an error on the ${where} batch is a StreamProducerError with the errno and message; earlier batches stay valid`, () =>
      checked(() => {
        const p = makeProducer({
          schema: batchSchema(),
          batches: fiveBatches(),
          failAt: { at, code: Errno.EINVAL },
          message: new TextEncoder().encode(`bad batch ${at}`),
        });
        const got: RecordBatch[] = [];
        const reader = importArrayStream(p.ptr);
        let err: unknown;
        try {
          for (const b of reader) got.push(reader.keep(b));
        } catch (e) {
          err = e;
        }
        assert.ok(err instanceof StreamProducerError, String(err));
        assert.ok(err instanceof ArrowDeviceError);
        assert.equal(err.kind, 'producer');
        assert.equal(err.errno, Errno.EINVAL);
        assert.equal(err.code, 'EINVAL');
        assert.equal(err.operation, 'get_next');
        assert.equal(err.producerMessage, `bad batch ${at}`);
        assert.equal(err.message, `stream.get_next: the producer returned EINVAL (22) for batch ${at}: bad batch ${at}`);
        assert.equal(got.length, at);
        assert.deepEqual(xs(got), Array.from({ length: at * 3 }, (_, i) => i));
        assert.equal(p.calls.release, 1, 'released once, at the error');
        assert.equal(reader.released, true);
        assert.throws(() => reader.next(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released');
        p.free();
      }));
  }

  test('the error text is copied at once (the producer overwrites it on release)', () =>
    checked(() => {
      const p = makeProducer({ schema: batchSchema(), batches: fiveBatches(), failAt: { at: 1, code: Errno.EIO }, message: new TextEncoder().encode('disk gone') });
      const reader = importArrayStream(p.ptr);
      reader.next();
      assert.throws(() => reader.next(), (e: unknown) => e instanceof StreamProducerError && e.producerMessage === 'disk gone' && e.code === 'EIO');
      assert.equal(p.calls.getLastError, 1);
      p.free();
    }));

  test('an unknown error code keeps its number and is named E<code>', () =>
    checked(() => {
      const p = makeProducer({ schema: batchSchema(), batches: [], failAt: { at: 0, code: 1234 }, message: new TextEncoder().encode('odd') });
      const reader = importArrayStream(p.ptr);
      assert.throws(() => reader.next(), (e: unknown) => e instanceof StreamProducerError && e.errno === 1234 && e.code === 'E1234');
      p.free();
    }));

  test('a NULL get_last_error callback, a NULL message and invalid UTF-8 are handled', () =>
    checked(() => {
      const cases = [
        { message: 'no-callback' as const, expect: null },
        { message: 'null' as const, expect: null },
        { message: Uint8Array.from([0x62, 0x61, 0x64, 0x20, 0xff, 0xfe, 0x21]), expect: 'bad \ufffd\ufffd!' },
      ];
      for (const c of cases) {
        const p = makeProducer({ schema: batchSchema(), batches: [], failAt: { at: 0, code: Errno.ENOMEM }, message: c.message });
        const reader = importArrayStream(p.ptr);
        assert.throws(
          () => reader.next(),
          (e: unknown) =>
            e instanceof StreamProducerError &&
            e.producerMessage === c.expect &&
            e.code === 'ENOMEM' &&
            (c.expect === null ? /with no error message$/.test(e.message) : e.message.endsWith(c.expect)),
        );
        assert.equal(p.calls.getLastError, c.message === 'no-callback' ? 0 : 1);
        assert.equal(p.calls.release, 1);
        p.free();
      }
    }));

  test('a get_schema error fails the import, with the message, and releases the stream', () =>
    checked(() => {
      const p = makeProducer({ schema: batchSchema(), batches: [], schemaError: Errno.EIO, message: new TextEncoder().encode('no schema today') });
      assert.throws(
        () => importArrayStream(p.ptr),
        (e: unknown) =>
          e instanceof StreamProducerError &&
          e.operation === 'get_schema' &&
          e.message === 'stream.get_schema: the producer returned EIO (5): no schema today',
      );
      assert.equal(p.calls.release, 1);
      assert.equal(p.calls.getNext, 0);
      p.free();
    }));

  test('a schema that is not a struct is refused with its path, and the stream released', () =>
    checked(() => {
      const p = makeProducer({ schema: new Int32(), batches: [] });
      assert.throws(
        () => importArrayStream(p.ptr),
        (e: unknown) => e instanceof ArrowDeviceError && e.path === 'stream.schema.format' && /not a stream of record batches/.test(e.message),
      );
      assert.equal(p.calls.release, 1);
      p.free();
    }));

  test('a batch that does not match the schema fails with the batch path; array and stream released', () =>
    checked(() => {
      const wrong = new Table({ x: vectorFromArray(['a', 'b'], new Utf8()) }).batches[0]!; // 3 buffers where int32 has 2
      const p = makeProducer({ schema: new Schema([new Field('x', new Int32())]), batches: [tableFromArrays({ x: Int32Array.from([1]) }).batches[0]!, wrong] });
      const before = accounting();
      const reader = importArrayStream(p.ptr);
      reader.next();
      assert.throws(() => reader.next(), (e: unknown) => e instanceof ArrowDeviceError && e.path.startsWith('stream.batches[1]'));
      assert.equal(p.calls.release, 1);
      assert.ok(accounting().releasedImports >= before.releasedImports + 1);
      p.free();
    }));

  test('leaving a for...of early by break, return or throw releases the stream once', () =>
    checked(() => {
      const viaBreak = makeProducer({ schema: batchSchema(), batches: fiveBatches() });
      for (const b of importArrayStream(viaBreak.ptr)) {
        assert.equal(b.numRows, 3);
        break;
      }
      assert.equal(viaBreak.calls.release, 1);
      assert.equal(viaBreak.calls.getNext, 1);

      const viaReturn = makeProducer({ schema: batchSchema(), batches: fiveBatches() });
      const firstX = ((): number => {
        for (const b of importArrayStream(viaReturn.ptr)) return b.getChild('x')!.get(0) as number;
        return -1;
      })();
      assert.equal(firstX, 0);
      assert.equal(viaReturn.calls.release, 1);

      const viaThrow = makeProducer({ schema: batchSchema(), batches: fiveBatches() });
      assert.throws(() => {
        for (const b of importArrayStream(viaThrow.ptr)) if (b.numRows > 0) throw new Error('stop');
      }, /stop/);
      assert.equal(viaThrow.calls.release, 1);
      for (const p of [viaBreak, viaReturn, viaThrow]) p.free();
    }));

  test('double release attempts release once; any use after release is an error', () =>
    checked(() => {
      const p = makeProducer({ schema: batchSchema(), batches: fiveBatches() });
      const reader = importArrayStream(p.ptr);
      reader.release();
      reader.release();
      reader.return();
      reader[Symbol.dispose]();
      releaseArrowArrayStream(p.ptr); // the caller's struct was moved out: nothing to release
      assert.equal(p.calls.release, 1);
      assert.throws(() => reader.next(), /stream: the stream is released \(it was released\)/);
      assert.throws(() => reader.readAll(), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released');
      assert.throws(() => [...reader], (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released');
      assert.throws(() => importArrayStream(p.ptr), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'released');
      assert.throws(() => importArrayStream(0n), /stream: NULL pointer/);
      p.free();
    }));

  test('an import dropped without being read is released when collected', async () => {
    const p = makeProducer({ schema: batchSchema(), batches: fiveBatches() });
    (() => {
      importArrayStream(p.ptr);
    })();
    assert.ok(await collectUntil(() => p.calls.release === 1), 'released by the FinalizationRegistry');
    p.free();
    await settle();
  });
});

describe('exportArrayStream', () => {
  test('a raw consumer reads schema, batches and the end; exported arrays outlive the stream', () =>
    checked(() => {
      const stream = exportArrayStream(new Table(fiveBatches()));
      const schema = m.alloc(m.layouts.ArrowSchema.size);
      const arrays: Ptr[] = [];
      assert.equal(rawGetSchema(stream, schema), 0);
      for (;;) {
        const a = m.alloc(m.layouts.ArrowArray.size);
        assert.equal(rawGetNext(stream, a), 0);
        if (m.readPtr(a + BigInt(m.layouts.ArrowArray.offsets.release!)) === 0n) {
          m.free(a);
          break;
        }
        arrays.push(a);
      }
      assert.equal(arrays.length, 5);
      // The end is sticky.
      const again = m.alloc(m.layouts.ArrowArray.size);
      assert.equal(rawGetNext(stream, again), 0);
      assert.equal(m.readPtr(again + BigInt(m.layouts.ArrowArray.offsets.release!)), 0n);
      m.free(again);
      freeArrowArrayStream(stream); // released before the arrays are read
      const s = importSchema(schema);
      (() => {
        const batches = arrays.map((a) => importRecordBatch(a, s));
        assert.deepEqual(xs(batches), Array.from({ length: 15 }, (_, i) => i));
      })();
      for (const a of arrays) m.free(a);
      m.free(schema);
    }));

  test('into a consumer-allocated struct; the release callback marks it released and runs once', () =>
    checked(() => {
      let closed = 0;
      function* gen(): Generator<RecordBatch> {
        try {
          yield* fiveBatches();
        } finally {
          closed++;
        }
      }
      const into = allocArrowArrayStream();
      assert.equal(exportArrayStream(gen(), { into }), into);
      const first = m.alloc(m.layouts.ArrowArray.size);
      assert.equal(rawGetNext(into, first), 0); // starts the generator: its try block is entered
      m.call(m.readPtr(first + BigInt(m.layouts.ArrowArray.offsets.release!)), REL, first);
      m.free(first);
      const before = accounting().liveExports;
      rawRelease(into);
      assert.equal(isArrowArrayStreamReleased(into), true);
      assert.equal(accounting().liveExports, before - 1);
      assert.equal(closed, 1, 'the generator was closed (its finally ran)');
      // A consumer's stale copy calling in after release gets EINVAL, not a crash.
      m.writePtr(into + BigInt(S.release!), 1n); // pretend it is live to reach get_next
      const out = m.alloc(m.layouts.ArrowArray.size);
      assert.equal(rawGetNext(into, out), Errno.EINVAL);
      assert.equal(rawLastError(into).ptr, 0n);
      m.writePtr(into + BigInt(S.release!), 0n);
      m.free(out);
      m.free(into);
    }));

  test('an exception in the source becomes EIO with its message, sticky; the message lives until the next call', () =>
    checked(() => {
      function* gen(): Generator<RecordBatch> {
        yield fiveBatches()[0]!;
        throw new TypeError('source exploded');
      }
      const stream = exportArrayStream(gen());
      const a = m.alloc(m.layouts.ArrowArray.size);
      assert.equal(rawGetNext(stream, a), 0);
      m.call(m.readPtr(a + BigInt(m.layouts.ArrowArray.offsets.release!)), REL, a);
      assert.equal(rawGetNext(stream, a), Errno.EIO);
      const e1 = rawLastError(stream);
      assert.equal(e1.text, 'source exploded');
      assert.equal(rawLastError(stream).ptr, e1.ptr, 'the same string until the next call');
      assert.equal(rawGetNext(stream, a), Errno.EIO, 'the failure is final');
      assert.equal(rawLastError(stream).text, 'source exploded');
      // Through our own importer: a typed error with the text.
      freeArrowArrayStream(stream);
      m.free(a);
      function* bad(): Generator<RecordBatch> {
        throw new ArrowDeviceError('invalid', 'somewhere', 'bad input');
      }
      const reader = importArrayStream(exportArrayStream(bad(), { schema: batchSchema() }));
      assert.throws(
        () => reader.next(),
        (e: unknown) => e instanceof StreamProducerError && e.code === 'EINVAL' && e.producerMessage === 'somewhere: bad input',
      );
    }));

  test('a batch of another layout, or something not a RecordBatch, is EINVAL', () =>
    checked(() => {
      const other = new Table({ x: vectorFromArray(BigInt64Array.from([1n])), s: vectorFromArray(['a'], new Utf8()) }).batches[0]!;
      const r1 = importArrayStream(exportArrayStream([fiveBatches()[0]!, other] as RecordBatch[]));
      r1.next();
      assert.throws(() => r1.next(), (e: unknown) => e instanceof StreamProducerError && e.code === 'EINVAL' && /does not match the stream's schema: schema.children\[0\].format: "l" where the stream has "i"/.test(e.message));
      const r2 = importArrayStream(exportArrayStream([42] as unknown as RecordBatch[], { schema: batchSchema() }));
      assert.throws(() => r2.next(), /yielded a number, not an arrow-js RecordBatch/);
    }));

  test('an empty iterable needs a schema: get_schema fails without one', () =>
    checked(() => {
      assert.throws(
        () => importArrayStream(exportArrayStream([])),
        (e: unknown) => e instanceof StreamProducerError && e.operation === 'get_schema' && e.code === 'EINVAL' && /no schema was given/.test(e.message),
      );
      const t = importArrayStream(exportArrayStream([], { schema: new Schema([new Field('a', new Int64())]) })).toTable();
      assert.equal(t.numRows, 0);
      assert.equal(String(t.schema.fields[0]!.type), 'Int64');
    }));

  test('an AsyncIterable is refused with a pointer to the async interface', () => {
    async function* agen(): AsyncGenerator<RecordBatch> {
      yield fiveBatches()[0]!;
    }
    assert.throws(
      () => exportArrayStream(agen() as unknown as Iterable<RecordBatch>),
      (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported' && /async interface/.test(e.message),
    );
    assert.throws(() => exportArrayStream(42 as unknown as Iterable<RecordBatch>), /expected a Table, a RecordBatchReader or an Iterable<RecordBatch>/);
  });

  test('a synchronous RecordBatchReader is a source', () =>
    checked(() => {
      const table = new Table(fiveBatches());
      const reader = RecordBatchReader.from(tableToIPC(table, 'stream'));
      const back = importArrayStream(exportArrayStream(reader)).toTable();
      assert.equal(diffTables(table, back), undefined);
    }));
});

describe('ArrowDeviceArrayStream (CPU)', () => {
  test('round trips a table; arrays carry device_type CPU, device_id -1, NULL sync_event, zero reserved', () =>
    checked(() => {
      const table = new Table(fiveBatches());
      const stream = exportDeviceArrayStream(table);
      assert.equal(m.readI32(stream + BigInt(m.layouts.ArrowDeviceArrayStream.offsets.device_type!)), DeviceType.CPU);
      // Peek at one array's header through a raw get_next.
      const D = m.layouts.ArrowDeviceArrayStream.offsets;
      const A = m.layouts.ArrowDeviceArray;
      const out = m.alloc(A.size);
      m.copyIn(out, new Uint8Array(A.size).fill(0xee));
      const schema = m.alloc(m.layouts.ArrowSchema.size);
      assert.equal(m.call(m.readPtr(stream + BigInt(D.get_schema!)), INT2, stream, schema), 0);
      m.call(m.readPtr(schema + BigInt(m.layouts.ArrowSchema.offsets.release!)), REL, schema);
      assert.equal(m.call(m.readPtr(stream + BigInt(D.get_next!)), INT2, stream, out), 0);
      assert.equal(m.readI64(out + BigInt(A.offsets.device_id!)), -1n);
      assert.equal(m.readI32(out + BigInt(A.offsets.device_type!)), DeviceType.CPU);
      assert.equal(m.readPtr(out + BigInt(A.offsets.sync_event!)), 0n);
      for (let k = 0; k < 3; k++) assert.equal(m.readI64(out + BigInt(A.offsets.reserved! + 8 * k)), 0n);
      m.call(m.readPtr(out + BigInt(m.layouts.ArrowArray.offsets.release!)), REL, out);
      m.free(out);
      m.free(schema);
      // The rest through our importer.
      const reader = importDeviceArrayStream(stream, { toHost: true });
      assert.equal(reader.deviceType, DeviceType.CPU);
      assert.deepEqual(xs(reader), Array.from({ length: 12 }, (_, i) => i + 3));
      freeArrowDeviceArrayStream(stream);
    }));

  const headerCases = [
    { name: "an array whose device_type differs from the stream's", header: { deviceType: DeviceType.CUDA }, path: 'device_stream.batches[0].device_type', text: /the array is on CUDA \(2\) but the stream's device_type is CPU \(1\)/ },
    { name: 'a CPU array with a sync_event', header: { syncEvent: 0x1234n }, path: 'device_stream.batches[0].sync_event', text: /must be NULL/ },
    { name: 'non-zero reserved bytes', header: { reserved: [0n, 0n, 7n] as [bigint, bigint, bigint] }, path: 'device_stream.batches[0].reserved[2]', text: /must be zero/ },
  ];
  for (const c of headerCases) {
    test(`${c.name} is refused; the array and the stream are released`, () =>
      checked(() => {
        const p = makeProducer({ device: true, schema: batchSchema(), batches: fiveBatches(), header: c.header });
        const reader = importDeviceArrayStream(p.ptr);
        const before = accounting().liveExports;
        assert.throws(() => reader.next(), (e: unknown) => e instanceof ArrowDeviceError && e.path === c.path && c.text.test(e.message));
        assert.equal(accounting().liveExports, before, 'the refused array (exported by the producer in this call) was released');
        assert.equal(p.calls.release, 1);
        p.free();
      }));
  }

  test('a stream of CUDA device memory yields DeviceArrays, and an empty one ends at once', () =>
    checked(() => {
      const p = makeProducer({ device: true, deviceType: DeviceType.CUDA, schema: batchSchema(), batches: [] });
      const reader = importDeviceArrayStream(p.ptr);
      assert.equal(reader.deviceType, DeviceType.CUDA);
      assert.equal(reader.next().done, true);
      assert.equal(p.calls.release, 1);
      p.free();
    }));

  test('errors on a device stream carry errno and message', () =>
    checked(() => {
      const p = makeProducer({ device: true, schema: batchSchema(), batches: fiveBatches(), failAt: { at: 2, code: Errno.EIO }, message: new TextEncoder().encode('device lost') });
      const reader = importDeviceArrayStream(p.ptr);
      assert.throws(() => reader.readAll(), (e: unknown) => e instanceof StreamProducerError && e.message === 'device_stream.get_next: the producer returned EIO (5) for batch 2: device lost');
      assert.equal(p.calls.release, 1);
      p.free();
    }));
});


describe('gold files through exported + imported streams', { skip: goldFiles.length ? false : `no gold files at ${GOLD.pathname}` }, () => {
  for (const f of goldFiles) {
    const skip = ARROW_JS_UNREADABLE.has(f) ? 'arrow-js 21 cannot read this IPC file (covered by tools/integration)' : false;
    for (const kind of ['stream', 'device-stream'] as const) {
      test(`${f.replace('.arrow_file', '')} via ${kind}`, { skip }, () =>
        checked(() => {
          (() => {
            const table = tableFromIPC(readFileSync(new URL(f, GOLD)));
            const ptr = kind === 'stream' ? exportArrayStream(table) : exportDeviceArrayStream(table);
            const reader: RecordBatchStreamImport =
              kind === 'stream' ? importArrayStream(ptr, { validate: 'full' }) : importDeviceArrayStream(ptr, { validate: 'full', toHost: true });
            m.free(ptr); // moved out at import
            const batches = reader.readAll();
            assert.equal(batches.length, table.batches.length);
            const back = batches.length > 0 ? new Table(batches) : new Table(reader.schema);
            assert.equal(diffTables(table, back), undefined);
          })();
        }));
    }
  }
});
