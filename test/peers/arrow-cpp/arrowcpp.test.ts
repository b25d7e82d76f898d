/**
 * arrow-device against Arrow C++ (the libarrow of the pyarrow wheel), the
 * reference implementation of the C Data Interface, through the shim in this
 * folder. For gold files of ../shared/testdata/arrow-testing:
 * - Arrow C++ reads the IPC file and exports -> we import -> the result equals
 *   arrow-js's read of the same file;
 * - we export arrow-js's read -> Arrow C++ imports -> Arrow's `Equals` finds it
 *   equal to Arrow's own read of the file;
 * and the same through `ArrowDeviceArray` (CPU) and `ArrowArrayStream` /
 * `ArrowDeviceArrayStream`, plus Arrow's async producer and consumer driven
 * from JS. After every case Arrow's memory pool is back at its starting size
 * and our accounting at zero.
 *
 * Skips (with the reason) when the shim is not built: run
 * test/peers/arrow-cpp/setup.sh (npm run setup:arrow-cpp) first.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import koffi from 'koffi';
import { Field, Schema, Struct, Table, tableFromIPC, type RecordBatch } from 'apache-arrow';
import {
  accounting, DeviceType, Errno, exportArray, exportSchema, exportTable, importArrayView, importSchemaNode, importTable,
  nativeMemory, type ArrayView, type SchemaNode,
} from '../../../src/index.js';
import { collectUntil } from '../../helpers/gc.js';
import { diffTables, type Tabular } from '../../helpers/compare.js';
import {
  arrowCppMissing, arrowCppPoolBytes, arrowCppVersion, asyncProduce, AsyncConsumer, Batches, callocStruct, freeStruct,
  releaseAndFree, SIZEOF,
} from './arrowcpp.js';

const GOLD = new URL('../../../../shared/testdata/arrow-testing/', import.meta.url);
const goldFile = (name: string): string => fileURLToPath(new URL(`${name}.arrow_file`, GOLD));

const missing = arrowCppMissing();
// npm run test:arrow-cpp sets ARROW_CPP_REQUIRED=1: there a missing shim is a failure, not a skip.
const required = process.env.ARROW_CPP_REQUIRED === '1';
if (missing && !required) console.log(`# Arrow C++ peer skipped: ${missing}`);
if (missing && required) test('the Arrow C++ shim is built and loads', () => assert.fail(missing));
const skip = missing ?? false;

/** Gold cases arrow-js can read (list_view and run_end_encoded it cannot: see ARRAY_VIEW_CASES). */
const CASES = [
  'generated_primitive', 'generated_primitive_zerolength', 'generated_primitive_no_batches', 'generated_null',
  'generated_binary', 'generated_binary_view', 'generated_large_binary', 'generated_decimal', 'generated_decimal256',
  'generated_datetime', 'generated_duration', 'generated_interval_mdn', 'generated_nested', 'generated_recursive_nested',
  'generated_map', 'generated_union', 'generated_dictionary', 'generated_nested_dictionary', 'generated_custom_metadata',
  'generated_duplicate_fieldnames', 'generated_extension',
];
const ARRAY_VIEW_CASES = ['generated_list_view', 'generated_run_end_encoded'];

const mem = nativeMemory();
const L = mem.layouts;
const freeOurs = (p: bigint): void => mem.free(p);

/**
 * Runs one case in a function of its own (so its locals are unreachable after
 * it returns), then checks that our accounting is at zero and Arrow's pool is
 * back where it started.
 */
async function leakChecked(fn: () => Promise<void> | void): Promise<void> {
  await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0);
  const start = arrowCppPoolBytes();
  await fn();
  const clean = await collectUntil(
    () => accounting().liveImports === 0 && accounting().liveExports === 0 && arrowCppPoolBytes() === start,
    100,
  );
  assert.ok(clean, `leak: our accounting ${JSON.stringify(accounting())}, Arrow's pool ${arrowCppPoolBytes() - start} bytes above its start`);
}

/**
 * arrow-js's read of a gold file. Its table schema can be wrong when field
 * names repeat (generated_duplicate_fieldnames); the batches' struct type is
 * right, so the comparison takes the schema from there.
 */
function arrowJsRead(name: string): Table {
  return tableFromIPC(readFileSync(goldFile(name)));
}
function asTabular(t: Table): Tabular {
  const first = t.batches[0];
  const schema = first ? new Schema((first.data.type as Struct).children, t.schema.metadata) : t.schema;
  return { schema, numRows: t.numRows, numCols: schema.fields.length, getChildAt: (i) => t.getChildAt(i) };
}

/**
 * Arrow C++ writes an extension type's metadata back as ARROW:extension:name
 * then ARROW:extension:metadata; the gold file has the other order (see
 * tools/peers/arrow-cpp.ts). Same pairs: compare with the expected order.
 */
function extensionMetadataOrderOf(expected: Tabular, actual: Tabular): Tabular {
  const fields = actual.schema.fields.map((f, i) => {
    const e = expected.schema.fields[i];
    if (!e?.metadata.has('ARROW:extension:name') || e.metadata.size !== f.metadata.size) return f;
    if (![...e.metadata].every(([k, v]) => f.metadata.get(k) === v)) return f;
    return new Field(f.name, f.type, f.nullable, new Map(e.metadata));
  });
  return { ...actual, schema: new Schema(fields, actual.schema.metadata), getChildAt: (i) => actual.getChildAt(i) };
}

/** Arrow C++ reads `name` and exports its schema and every batch into new structs. */
function arrowExport(name: string): { schema: bigint; arrays: bigint[]; count: number } {
  const file = Batches.readIpcFile(goldFile(name));
  try {
    const schema = file.exportSchema();
    const arrays = Array.from({ length: file.count }, (_, i) => file.exportBatch(i));
    return { schema, arrays, count: file.count };
  } finally {
    file.free(); // the exports keep what they need
  }
}

/** Arrow C++ compares `got` with its own read of `name` (Arrow's Equals); frees both. */
function assertArrowEquals(name: string, got: Batches, exactBatches = true): void {
  const file = Batches.readIpcFile(goldFile(name));
  try {
    const d = file.diff(got, { exactBatches });
    assert.equal(d, undefined, `Arrow C++ finds a difference with its read of ${name}: ${d}`);
  } finally {
    file.free();
    got.free();
  }
}

describe(`Arrow C++ peer${missing ? '' : ` (Arrow C++ ${arrowCppVersion()})`}`, { skip }, () => {
  describe('C Data Interface: Arrow C++ exports, we import', () => {
    for (const name of CASES) {
      test(`imports Arrow C++'s export of ${name} as arrow-js equal to arrow-js's read of the file`, () =>
        leakChecked(() => {
          const { schema, arrays } = arrowExport(name);
          let table: Table;
          try {
            table = importTable(arrays, schema);
          } finally {
            freeStruct(schema);
            for (const p of arrays) freeStruct(p);
          }
          assert.equal(mem.readPtr(schema + BigInt(L.ArrowSchema.offsets.release!)), 0n, 'import consumed the schema');
          const expected = asTabular(arrowJsRead(name));
          const d = diffTables(expected, extensionMetadataOrderOf(expected, asTabular(table)));
          assert.equal(d, undefined, d);
        }));
    }
  });

  describe('C Data Interface: we export, Arrow C++ imports', () => {
    for (const name of CASES) {
      test(`exports arrow-js's read of ${name} and Arrow C++ finds it Equals its own read`, () =>
        leakChecked(() => {
          const { schema, arrays } = exportTable(arrowJsRead(name));
          let got: Batches;
          try {
            got = Batches.import(schema, arrays);
          } finally {
            freeOurs(schema);
            for (const p of arrays) freeOurs(p);
          }
          // arrow-js reads a file with no batches as one empty batch: compare values, not batch counts.
          assertArrowEquals(name, got, !name.endsWith('_no_batches'));
        }));
    }
  });

  describe('C Data Interface: sliced arrays (non-zero offset)', () => {
    const SLICED = ['generated_primitive', 'generated_binary_view', 'generated_nested', 'generated_union',
      'generated_dictionary', 'generated_map', 'generated_decimal', 'generated_recursive_nested'];
    for (const name of SLICED) {
      test(`imports Arrow C++'s slices [1, 1 + 5) of ${name}'s batches and matches arrow-js's slices`, () =>
        leakChecked(() => {
          const file = Batches.readIpcFile(goldFile(name));
          const sliced = file.slice(1, 5);
          file.free();
          const schema = sliced.exportSchema();
          const arrays = Array.from({ length: sliced.count }, (_, i) => sliced.exportBatch(i));
          sliced.free();
          // ExportRecordBatch writes a struct of offset 0 whose columns carry the slice's offset.
          const firstColumnOffset = (p: bigint): bigint =>
            mem.readI64(mem.readPtr(mem.readPtr(p + BigInt(L.ArrowArray.offsets.children!))) + BigInt(L.ArrowArray.offsets.offset!));
          assert.ok(arrays.some((p) => firstColumnOffset(p) === 1n), 'Arrow exports columns with offset 1');
          let table: Table;
          try {
            table = importTable(arrays, schema, { validate: 'full' });
          } finally {
            freeStruct(schema);
            for (const p of arrays) freeStruct(p);
          }
          const t = arrowJsRead(name);
          const expected = new Table(t.batches.map((b) => b.slice(1, Math.min(6, b.numRows))));
          const d = diffTables(asTabular(expected), asTabular(table));
          assert.equal(d, undefined, d);
        }));

      test(`exports arrow-js's slices [1, 1 + 5) of ${name}'s batches and Arrow C++ finds them Equals its own slices`, () =>
        leakChecked(() => {
          const t = arrowJsRead(name);
          const { schema, arrays } = exportTable(new Table(t.batches.map((b) => b.slice(1, Math.min(6, b.numRows)))));
          let got: Batches;
          try {
            got = Batches.import(schema, arrays);
          } finally {
            freeOurs(schema);
            for (const p of arrays) freeOurs(p);
          }
          const file = Batches.readIpcFile(goldFile(name));
          const expected = file.slice(1, 5);
          file.free();
          try {
            const d = expected.diff(got);
            assert.equal(d, undefined, d);
          } finally {
            expected.free();
            got.free();
          }
        }));
    }
  });

  describe('C Data Interface as ArrayView (types arrow-js lacks)', () => {
    for (const name of ARRAY_VIEW_CASES) {
      test(`imports Arrow C++'s ${name} as ArrayViews, exports them back, and Arrow C++ finds them Equals its read`, () =>
        leakChecked(() => {
          const { schema, arrays } = arrowExport(name);
          let node: SchemaNode;
          let views: ArrayView[];
          try {
            node = importSchemaNode(schema);
            views = arrays.map((p) => importArrayView(p, node, { validate: 'full' }));
          } finally {
            freeStruct(schema);
            for (const p of arrays) freeStruct(p);
          }
          assert.ok(views.length > 0);
          const ours = { schema: exportSchema(node), arrays: views.map((v) => exportArray(v)) };
          let got: Batches;
          try {
            got = Batches.import(ours.schema, ours.arrays);
          } finally {
            freeOurs(ours.schema);
            for (const p of ours.arrays) freeOurs(p);
          }
          assertArrowEquals(name, got);
        }));
    }
  });

  describe('C Device Data Interface (CPU)', () => {
    const DA = L.ArrowDeviceArray;
    const at = (p: bigint, field: string): bigint => p + BigInt(DA.offsets[field]!);

    for (const name of ['generated_primitive', 'generated_nested', 'generated_dictionary']) {
      test(`imports Arrow C++'s ArrowDeviceArray export of ${name}: CPU, device_id -1, no sync event`, () =>
        leakChecked(() => {
          const file = Batches.readIpcFile(goldFile(name));
          const schema = file.exportSchema();
          const devs = Array.from({ length: file.count }, (_, i) => file.exportDeviceBatch(i));
          file.free();
          const arrays: bigint[] = [];
          try {
            assert.equal(DA.size, SIZEOF.ArrowDeviceArray);
            for (const d of devs) {
              assert.equal(mem.readI32(at(d, 'device_type')), DeviceType.CPU);
              assert.equal(mem.readI64(at(d, 'device_id')), -1n);
              assert.equal(mem.readPtr(at(d, 'sync_event')), 0n);
              arrays.push(at(d, 'array')); // the ArrowArray is the first member
            }
            const table = importTable(arrays, schema);
            const expected = asTabular(arrowJsRead(name));
            assert.equal(diffTables(expected, asTabular(table)), undefined);
          } finally {
            freeStruct(schema);
            for (const d of devs) freeStruct(d);
          }
        }));

      test(`exports ${name} as ArrowDeviceArrays (CPU) and Arrow C++ ImportDeviceRecordBatch finds them Equals its read`, () =>
        leakChecked(() => {
          const t = arrowJsRead(name);
          const schema = exportSchema(asTabular(t).schema);
          const devs = t.batches.map((b: RecordBatch) => {
            const d = mem.alloc(DA.size);
            exportArray(b, { into: at(d, 'array') });
            mem.writeI64(at(d, 'device_id'), -1n);
            mem.writeI32(at(d, 'device_type'), DeviceType.CPU);
            return d;
          });
          let got: Batches;
          try {
            got = Batches.importDevice(schema, devs);
          } finally {
            freeOurs(schema);
            for (const d of devs) freeOurs(d);
          }
          assertArrowEquals(name, got);
        }));
    }
  });

  describe('C Stream Interface', () => {
    for (const device of [false, true]) {
      const what = device ? 'ArrowDeviceArrayStream' : 'ArrowArrayStream';
      test(`consumes Arrow C++'s ${what} of generated_nested from JS and matches arrow-js's read`, () =>
        leakChecked(() => {
          const file = Batches.readIpcFile(goldFile('generated_nested'));
          const stream = device ? file.exportDeviceStream() : file.exportStream();
          file.free();
          const table = consumeStream(stream, device);
          assert.equal(diffTables(asTabular(arrowJsRead('generated_nested')), asTabular(table)), undefined);
        }));

      test(`Arrow C++ reads a JS-produced ${what} on a koffi worker thread and finds it Equals its read`, () =>
        leakChecked(async () => {
          const t = arrowJsRead('generated_nested');
          const stream = jsStream(t, device);
          try {
            const got = await (device ? Batches.importDeviceStream(stream.ptr) : Batches.importStream(stream.ptr));
            assert.ok(stream.calls.get_next >= t.batches.length + 1, 'read to the end');
            assert.equal(stream.calls.release, 1, 'released once');
            assertArrowEquals('generated_nested', got);
          } finally {
            stream.dispose();
          }
        }));
    }
  });

  describe('async device stream (Arrow C++ >= 19)', () => {
    test("Arrow C++'s async producer feeds Arrow C++'s async consumer through handlers driven from JS", () =>
      leakChecked(async () => {
        const consumer = new AsyncConsumer(2);
        try {
          const file = Batches.readIpcFile(goldFile('generated_primitive'));
          const produced = asyncProduce(file, consumer.handler);
          file.free();
          const got = await consumer.collect();
          await produced;
          assertArrowEquals('generated_primitive', got);
        } finally {
          consumer.free();
        }
      }));

    test("a JS handler receives Arrow C++'s async stream on Arrow's thread, and Arrow finds it Equals its read", () =>
      leakChecked(async () => {
        const file = Batches.readIpcFile(goldFile('generated_nested'));
        const h = jsHandler({ onSchema: (p) => p.request(1), onTask: (p) => p.request(1) });
        try {
          const produced = asyncProduce(file, h.ptr);
          file.free();
          await produced;
          await h.released;
          assert.deepEqual(h.events.at(-1), 'release');
          assert.equal(h.errors.length, 0, JSON.stringify(h.errors));
          assert.equal(h.extractCodes.every((c) => c === 0), true);
          assert.ok(h.views.length > 0);
          const ours = { schema: exportSchema(h.schema!), arrays: h.views.map((v) => exportArray(v)) };
          let got: Batches;
          try {
            got = Batches.import(ours.schema, ours.arrays);
          } finally {
            freeOurs(ours.schema);
            for (const p of ours.arrays) freeOurs(p);
          }
          assertArrowEquals('generated_nested', got);
        } finally {
          h.dispose();
        }
      }));

    test('Arrow C++ deviation: cancel ends with on_error(EINVAL) before release (the spec: no on_error after a cancel)', () =>
      leakChecked(async () => {
        const file = Batches.readIpcFile(goldFile('generated_nested'));
        const h = jsHandler({ onSchema: (p) => p.cancel() });
        try {
          const produced = asyncProduce(file, h.ptr).then(
            () => 'resolved',
            (e: Error) => e.message,
          );
          file.free();
          await h.released;
          await produced;
          assert.equal(h.events.at(-1), 'release');
          assert.deepEqual(h.errors.map((e) => e.code), [Errno.EINVAL], `on_error calls: ${JSON.stringify(h.errors)}`);
        } finally {
          h.dispose();
        }
      }));

    test('Arrow C++ deviation: request(0) is not rejected through on_error (the spec: n <= 0 is an error)', () =>
      leakChecked(async () => {
        const file = Batches.readIpcFile(goldFile('generated_primitive'));
        let asked = false;
        const h = jsHandler({
          onSchema: (p) => {
            p.request(0);
            // Give a wrong producer time to report, then read on as usual.
            setTimeout(() => ((asked = true), p.request(10)), 20);
          },
        });
        try {
          const produced = asyncProduce(file, h.ptr);
          file.free();
          await produced;
          await h.released;
          assert.ok(asked);
          assert.equal(h.errors.length, 0, `on_error calls: ${JSON.stringify(h.errors)}`);
          assert.equal(h.views.length, 2, 'the whole stream still arrives');
        } finally {
          h.dispose();
        }
      }));
  });
});

// --- a test-only JS ArrowAsyncDeviceStreamHandler (the async layer of src/ is not written yet)

const OnSchema = koffi.proto('int arrow_cpp_test_on_schema(void *, void *)');
const OnNextTask = koffi.proto('int arrow_cpp_test_on_next_task(void *, void *, void *)');
const OnError = koffi.proto('void arrow_cpp_test_on_error(void *, int, const char *, void *)');
const HandlerRelease = koffi.proto('void arrow_cpp_test_handler_release(void *)');
const Request = koffi.proto('void arrow_cpp_test_request(void *, int64_t)');
const Cancel = koffi.proto('void arrow_cpp_test_cancel(void *)');
const ExtractData = koffi.proto('int arrow_cpp_test_extract_data(void *, void *)');

interface ProducerCalls {
  request(n: number): void;
  cancel(): void;
}

/**
 * A JS handler. Its callbacks come from Arrow's producer thread (queued by
 * koffi to the JS thread); `request`/`cancel` are called later, outside them.
 * Each task's data is extracted at once and imported as an ArrayView.
 */
function jsHandler(opts: { onSchema?: (p: ProducerCalls) => void; onTask?: (p: ProducerCalls) => void }) {
  const H = L.ArrowAsyncDeviceStreamHandler;
  const P = L.ArrowAsyncProducer;
  const T = L.ArrowAsyncTask;
  const ptr = mem.alloc(H.size);
  const events: string[] = [];
  const errors: { code: number; message: string | null }[] = [];
  const extractCodes: number[] = [];
  const views: ArrayView[] = [];
  let schema: SchemaNode | undefined;
  let markReleased!: () => void;
  const released = new Promise<void>((r) => (markReleased = r));
  const producer = (): ProducerCalls => {
    const p = mem.readPtr(ptr + BigInt(H.offsets.producer!));
    const fn = (f: string): bigint => mem.readPtr(p + BigInt(P.offsets[f]!));
    return {
      request: (n) => void koffi.call(fn('request'), Request, p, n),
      cancel: () => void koffi.call(fn('cancel'), Cancel, p),
    };
  };
  const later = (f?: (p: ProducerCalls) => void): void => {
    if (f) setImmediate(() => f(producer()));
  };
  const callbacks = [
    ['on_schema', koffi.register((_self: bigint, s: bigint) => {
      events.push('schema');
      schema = importSchemaNode(s);
      later(opts.onSchema);
      return 0;
    }, koffi.pointer(OnSchema))],
    ['on_next_task', koffi.register((_self: bigint, task: bigint | null) => {
      if (task === null) {
        events.push('end');
        return 0;
      }
      events.push('task');
      const dev = mem.alloc(L.ArrowDeviceArray.size);
      try {
        const extract = mem.readPtr(task + BigInt(T.offsets.extract_data!));
        extractCodes.push(koffi.call(extract, ExtractData, task, dev) as number);
        views.push(importArrayView(dev, schema!, { validate: 'full', copy: true }));
      } finally {
        mem.free(dev);
      }
      later(opts.onTask);
      return 0;
    }, koffi.pointer(OnNextTask))],
    ['on_error', koffi.register((_self: bigint, code: number, message: string | null) => {
      events.push('error');
      errors.push({ code, message });
    }, koffi.pointer(OnError))],
    ['release', koffi.register((self: bigint) => {
      events.push('release');
      mem.writePtr(self + BigInt(H.offsets.release!), 0n);
      markReleased();
    }, koffi.pointer(HandlerRelease))],
  ] as const;
  for (const [field, cb] of callbacks) mem.writePtr(ptr + BigInt(H.offsets[field]!), BigInt(cb));
  return {
    ptr,
    events,
    errors,
    extractCodes,
    views,
    get schema() {
      return schema;
    },
    released,
    dispose() {
      for (const [, cb] of callbacks) koffi.unregister(cb);
      mem.free(ptr);
    },
  };
}

// --- test-only stream plumbing (the stream layer of src/ is not written yet) ------------

const streamLayout = (device: boolean) => (device ? L.ArrowDeviceArrayStream : L.ArrowArrayStream);
const GetSchema = koffi.proto('int arrow_cpp_test_get_schema(void *, void *)');
const GetNext = koffi.proto('int arrow_cpp_test_get_next(void *, void *)');
const GetLastError = koffi.proto('const char *arrow_cpp_test_get_last_error(void *)');
const Release = koffi.proto('void arrow_cpp_test_release(void *)');

/** Reads a whole C stream with its own callbacks, importing each array with our library; releases and frees it. */
function consumeStream(stream: bigint, device: boolean): Table {
  const S = streamLayout(device);
  const fn = (field: string): bigint => mem.readPtr(stream + BigInt(S.offsets[field]!));
  const check = (rc: number, what: string): void => {
    if (rc !== 0) throw new Error(`${what} returned ${rc}: ${koffi.call(fn('get_last_error'), GetLastError, stream)}`);
  };
  const schema = callocStruct(SIZEOF.ArrowSchema);
  const structs: bigint[] = []; // every struct get_next wrote, the end-of-stream one included
  try {
    if (device) assert.equal(mem.readI32(stream + BigInt(S.offsets.device_type!)), DeviceType.CPU);
    check(koffi.call(fn('get_schema'), GetSchema, stream, schema) as number, 'get_schema');
    const size = device ? SIZEOF.ArrowDeviceArray : SIZEOF.ArrowArray;
    for (;;) {
      const out = callocStruct(size);
      structs.push(out);
      check(koffi.call(fn('get_next'), GetNext, stream, out) as number, 'get_next');
      if (mem.readPtr(out + BigInt(L.ArrowArray.offsets.release!)) === 0n) break; // end of stream
      if (device) {
        assert.equal(mem.readI32(out + BigInt(L.ArrowDeviceArray.offsets.device_type!)), DeviceType.CPU);
        assert.equal(mem.readPtr(out + BigInt(L.ArrowDeviceArray.offsets.sync_event!)), 0n);
      }
    }
    // In an ArrowDeviceArray the ArrowArray is the first member.
    return importTable(structs.slice(0, -1), schema);
  } finally {
    releaseAndFree(stream, device ? 'ArrowDeviceArrayStream' : 'ArrowArrayStream');
    freeStruct(schema);
    for (const p of structs) freeStruct(p);
  }
}

/** A minimal C stream over a table's batches, written with our exporters, counting its calls. */
function jsStream(t: Table, device: boolean): { ptr: bigint; calls: { get_schema: number; get_next: number; release: number }; dispose(): void } {
  const S = streamLayout(device);
  const ptr = mem.alloc(S.size);
  const calls = { get_schema: 0, get_next: 0, release: 0 };
  let next = 0;
  const schema = asTabular(t).schema;
  const callbacks = [
    ['get_schema', koffi.register((_self: bigint, out: bigint) => {
      calls.get_schema++;
      exportSchema(schema, { into: out });
      return 0;
    }, koffi.pointer(GetSchema))],
    ['get_next', koffi.register((_self: bigint, out: bigint) => {
      calls.get_next++;
      const b = t.batches[next++];
      if (!b) {
        mem.writePtr(out + BigInt(L.ArrowArray.offsets.release!), 0n); // end of stream
        return 0;
      }
      exportArray(b, { into: out });
      if (device) {
        mem.writeI64(out + BigInt(L.ArrowDeviceArray.offsets.device_id!), -1n);
        mem.writeI32(out + BigInt(L.ArrowDeviceArray.offsets.device_type!), DeviceType.CPU);
      }
      return 0;
    }, koffi.pointer(GetNext))],
    ['get_last_error', koffi.register(() => null, koffi.pointer(GetLastError))],
    ['release', koffi.register((self: bigint) => {
      calls.release++;
      mem.writePtr(self + BigInt(S.offsets.release!), 0n);
    }, koffi.pointer(Release))],
  ] as const;
  if (device) mem.writeI32(ptr + BigInt(S.offsets.device_type!), DeviceType.CPU);
  for (const [field, cb] of callbacks) mem.writePtr(ptr + BigInt(S.offsets[field]!), BigInt(cb));
  return {
    ptr,
    calls,
    dispose() {
      for (const [, cb] of callbacks) koffi.unregister(cb);
      mem.free(ptr);
    },
  };
}
