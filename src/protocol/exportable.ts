/**
 * The producer side of the exchange protocol for arrow-js objects
 * (PROTOCOL.md): `arrowExportable(x)` gives a `Table`, `RecordBatch`,
 * `Vector`, `Data`, schema, `ArrayView`, `RecordBatchReader` or iterable of
 * batches the protocol's methods, built on the exporters (exportSchema,
 * exportArray, exportArrayStream, exportDeviceArray,
 * exportDeviceArrayStream): every method call exports anew, zero-copy, into
 * owned handles (`ExportHandle`) whose `released` says when the consumer let
 * go. The arrow-js object itself is not changed and stays readable; its
 * buffers are pinned until every consumer has released what it took.
 *
 * This is the top layer: it imports from array/, stream/ and device/, and
 * nothing imports from it but src/index.ts.
 */
import { Data, DataType, Field, RecordBatch, RecordBatchReader, Schema, Table, Vector } from 'apache-arrow';
import { isArrowType } from '../schema/arrowjs.js';
import {
  ArrowSymbols, isArrowExportable, type ArrowDeviceExportOptions, type ArrowExportable, type ArrowSchemaExportable,
} from '../abi/protocol.js';
import { exportArray, exportRecordBatch, exportSchema, type MemoryOption } from '../array/api.js';
import { dataToView } from '../array/arrowjs.js';
import { checkDeviceExportOptions, checkRequestedSchema } from '../array/exchange.js';
import type { ArrayView } from '../array/view.js';
import { exportDeviceArray, exportDeviceRecordBatch } from '../device/api.js';
import { invalid } from '../errors.js';
import { ArrayExportHandles, type ExportHandle } from '../memory/handle.js';
import { batchNodeOf, schemaNodeOf } from '../schema/export.js';
import type { SchemaNode } from '../schema/node.js';
import { exportArrayStream, type RecordBatchSource, type StreamExportItem } from '../stream/export.js';
import { exportDeviceArrayStream } from '../stream/device.js';

/** Options of `arrowExportable`. */
export interface ExportableOptions extends MemoryOption {
  /**
   * The schema of an iterable of batches: needed for an empty one, and for
   * `arrow.c_schema` (which a reader or table has without it).
   */
  schema?: Schema | SchemaNode;
}

/** `arrow.c_schema` of this library's objects: an owned `ExportHandle`. */
export interface SchemaExportMethod {
  /** `arrow.c_schema`: the schema (or type) as a new owned `ArrowSchema` handle. */
  [ArrowSymbols.schema](): ExportHandle;
}
/** `arrow.c_array` and `arrow.c_device_array` of this library's objects: owned `ArrayExportHandles`. */
export interface ArrayExportMethods {
  /** `arrow.c_array`: a zero-copy export as new `ArrowSchema` and `ArrowArray` handles; the object stays readable. */
  [ArrowSymbols.array](requestedSchema?: ArrowSchemaExportable | null): ArrayExportHandles;
  /** `arrow.c_device_array`: the same as a CPU `ArrowDeviceArray` (`device_id` -1, `sync_event` NULL). */
  [ArrowSymbols.deviceArray](requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ArrayExportHandles;
}
/** `arrow.c_stream` and `arrow.c_device_stream` of this library's objects: an owned `ExportHandle`. */
export interface StreamExportMethods {
  /** `arrow.c_stream`: the batches as a new owned `ArrowArrayStream` handle, zero-copy. */
  [ArrowSymbols.stream](requestedSchema?: ArrowSchemaExportable | null): ExportHandle;
  /** `arrow.c_device_stream`: the same as an `ArrowDeviceArrayStream` of CPU arrays. */
  [ArrowSymbols.deviceStream](requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ExportHandle;
}

/** What `arrowExportable` gives a `Table`: its schema and its batches as a stream (CPU or device stream). */
export type TableExportable = SchemaExportMethod & StreamExportMethods;
/** What `arrowExportable` gives a `RecordBatch`: schema, struct array (plain or device) and a stream of one batch. */
export type RecordBatchExportable = SchemaExportMethod & ArrayExportMethods & StreamExportMethods;
/** What `arrowExportable` gives `Data` or an `ArrayView`: its type and the array (plain or device). */
export type ArrayExportable = SchemaExportMethod & ArrayExportMethods;
/**
 * What `arrowExportable` gives a `Vector`: its type, its chunks as a stream
 * and, for a Vector of one chunk only, the array (`arrow.c_array`,
 * `arrow.c_device_array`: absent on a Vector of several chunks).
 */
export type VectorExportable = SchemaExportMethod & StreamExportMethods & Partial<ArrayExportMethods>;
/** What `arrowExportable` gives a reader or an iterable of batches: a stream, handed out once (and its schema when known). */
export type ReaderExportable = StreamExportMethods & Partial<SchemaExportMethod>;

type Method = (...args: never[]) => unknown;

/** A frozen object with the given protocol methods (over `source`, which they close over). */
function exportable<T>(_source: unknown, methods: [symbol, Method][]): T {
  const o: Record<PropertyKey, unknown> = {};
  for (const [k, f] of methods) o[k] = f;
  return Object.freeze(o) as T;
}

/** `{ schema, array }` handles of `x` (one array), plain or CPU device. */
function arrayHandles(node: SchemaNode, x: Data | Vector | ArrayView, device: boolean, mem: MemoryOption): ArrayExportHandles {
  const schema = exportSchema(node, { memory: mem.memory, handle: true });
  try {
    const array = device ? exportDeviceArray(x, { memory: mem.memory, handle: true }) : exportArray(x, { memory: mem.memory, handle: true });
    return new ArrayExportHandles(schema, array);
  } catch (e) {
    schema[Symbol.dispose]();
    throw e;
  }
}

/** A stream's two methods over `open()` (called per hand-out), checked against `node` when known. */
function streamMethods(node: SchemaNode | undefined, open: () => RecordBatchSource, opts: ExportableOptions, what: string): [symbol, Method][] {
  const schema = opts.schema;
  return [
    [
      ArrowSymbols.stream,
      (requestedSchema?: ArrowSchemaExportable | null): ExportHandle => {
        if (node) checkRequestedSchema(requestedSchema, node, `${what}[arrow.c_stream]`);
        return exportArrayStream(open(), { memory: opts.memory, schema, handle: true });
      },
    ],
    [
      ArrowSymbols.deviceStream,
      (requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ExportHandle => {
        checkDeviceExportOptions(options, `${what}[arrow.c_device_stream]`);
        if (node) checkRequestedSchema(requestedSchema, node, `${what}[arrow.c_device_stream]`);
        return exportDeviceArrayStream(open(), { memory: opts.memory, schema, handle: true });
      },
    ],
  ];
}

function schemaMethod(node: SchemaNode, opts: MemoryOption): [symbol, Method] {
  return [ArrowSymbols.schema, (): ExportHandle => exportSchema(node, { memory: opts.memory, handle: true })];
}

function isArrayView(v: unknown): v is ArrayView {
  const o = v as Partial<ArrayView> | null;
  return typeof o === 'object' && o !== null && typeof o.length === 'number' && typeof o.schema === 'object' && o.schema !== null && Array.isArray(o.children);
}

function isSchemaNode(v: unknown): v is SchemaNode {
  const o = v as Partial<SchemaNode> | null;
  return typeof o === 'object' && o !== null && typeof o.format === 'string' && Array.isArray(o.children) && !isArrayView(v);
}

/**
 * Gives an arrow-js object the exchange protocol (PROTOCOL.md), so that any
 * consumer of the protocol (another library, a wasm module's glue, this
 * library's `import*` functions) can take it without depending on
 * arrow-js. Each method call exports anew, zero-copy, into owned handles;
 * the object stays readable and its buffers stay pinned until the
 * consumer releases what it took.
 *
 * | object | methods |
 * | --- | --- |
 * | `Table` | `arrow.c_schema`, `arrow.c_stream`, `arrow.c_device_stream` (CPU) |
 * | `RecordBatch` | those, and `arrow.c_array`, `arrow.c_device_array` (a struct array) |
 * | `Vector` | `arrow.c_schema` (its type), `arrow.c_stream`, `arrow.c_device_stream` (one array per chunk); `arrow.c_array`, `arrow.c_device_array` when it has one chunk |
 * | `Data`, `ArrayView` | `arrow.c_schema`, `arrow.c_array`, `arrow.c_device_array` |
 * | `Schema`, `Field`, `DataType`, `SchemaNode` | `arrow.c_schema` |
 * | `RecordBatchReader` (sync), `Iterable<RecordBatch>` | `arrow.c_stream`, `arrow.c_device_stream`, once (a reader is read once); `arrow.c_schema` when the schema is known |
 *
 * An object that implements the protocol already (this library's imports,
 * readers and device arrays, or another library's objects) is returned as
 * it is. A requested schema is honoured as PyCapsuleInterface.rst allows:
 * ignored (the data leaves in its own schema) unless its number of fields
 * differs from the data's, which is an `invalid` error. `memory` puts the
 * structs in a wasm module's memory (the handles then carry it).
 *
 * @example
 * const exportable = arrowExportable(table);
 * const copy = importTable(exportable);           // any protocol consumer can read it
 * using stream = exportable[ArrowSymbols.stream](); // or take a handle yourself
 * nativeLib.consume_stream(stream.address);
 */
export function arrowExportable<T extends ArrowExportable>(x: T): T;
export function arrowExportable(x: Table, opts?: ExportableOptions): TableExportable;
export function arrowExportable(x: RecordBatch, opts?: ExportableOptions): RecordBatchExportable;
export function arrowExportable(x: Vector, opts?: ExportableOptions): VectorExportable;
export function arrowExportable(x: Data | ArrayView, opts?: ExportableOptions): ArrayExportable;
export function arrowExportable(x: Schema | Field | DataType | SchemaNode, opts?: ExportableOptions): SchemaExportMethod;
export function arrowExportable(x: RecordBatchReader | Iterable<StreamExportItem>, opts?: ExportableOptions): ReaderExportable;
export function arrowExportable(x: unknown, opts: ExportableOptions = {}): ArrowExportable {
  if (isArrowExportable(x)) return x;
  if (x instanceof Table) {
    const first = x.batches[0];
    // The schema as the batches' data says (arrow-js can misreport table.schema when names repeat).
    const node = first ? batchNodeOf({ data: first.data, schema: x.schema }) : schemaNodeOf(x.schema);
    return exportable(x, [schemaMethod(node, opts), ...streamMethods(node, () => x, { ...opts, schema: node }, 'table')]);
  }
  if (x instanceof RecordBatch) {
    const node = batchNodeOf(x);
    const mem = { memory: opts.memory };
    return exportable(x, [
      schemaMethod(node, opts),
      [
        ArrowSymbols.array,
        (requestedSchema?: ArrowSchemaExportable | null): ArrayExportHandles => {
          checkRequestedSchema(requestedSchema, node, 'batch[arrow.c_array]');
          return exportRecordBatch(x, { ...mem, handle: true });
        },
      ],
      [
        ArrowSymbols.deviceArray,
        (requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ArrayExportHandles => {
          checkDeviceExportOptions(options, 'batch[arrow.c_device_array]');
          checkRequestedSchema(requestedSchema, node, 'batch[arrow.c_device_array]');
          return exportDeviceRecordBatch(x, { ...mem, handle: true });
        },
      ],
      ...streamMethods(node, () => [x], { ...opts, schema: node }, 'batch'),
    ]);
  }
  if (x instanceof Vector) {
    const node = schemaNodeOf(x.type);
    const views = (): ArrayView[] => x.data.map((d) => dataToView(d, node));
    const methods: [symbol, Method][] = [schemaMethod(node, opts), ...streamMethods(node, views, { ...opts, schema: node }, 'vector')];
    if (x.data.length === 1) methods.push(...arrayMethods(node, x.data[0]!, opts, 'vector'));
    return exportable(x, methods);
  }
  if (x instanceof Data || isArrayView(x)) {
    const node = x instanceof Data ? schemaNodeOf(x.type) : x.schema;
    return exportable(x, [schemaMethod(node, opts), ...arrayMethods(node, x, opts, x instanceof Data ? 'data' : 'view')]);
  }
  if (x instanceof Schema || x instanceof Field || isArrowType(x) || isSchemaNode(x)) {
    return exportable(x, [schemaMethod(schemaNodeOf(x), opts)]);
  }
  if (x instanceof RecordBatchReader || (typeof x === 'object' && x !== null && typeof (x as Iterable<unknown>)[Symbol.iterator] === 'function')) {
    const given = opts.schema ?? (x instanceof RecordBatchReader && x.schema ? x.schema : undefined);
    const node = given === undefined ? undefined : schemaNodeOf(given);
    let handedOut = false;
    const once = (): RecordBatchSource => {
      // A reader, a generator: read once. Handing it out twice would give two consumers halves.
      if (handedOut) throw invalid('source', 'a reader or iterable is handed out once (its batches are read by the first consumer)');
      handedOut = true;
      return x as RecordBatchSource;
    };
    const methods = streamMethods(node, once, { ...opts, schema: node }, 'reader');
    if (node) methods.push(schemaMethod(node, opts));
    return exportable(x, methods);
  }
  throw invalid(
    'x',
    'expected an arrow-js Table, RecordBatch, Vector, Data, Schema, Field, DataType, a SchemaNode or ArrayView, a RecordBatchReader or an iterable of batches',
  );
}

/** `arrow.c_array` and `arrow.c_device_array` of one array. */
function arrayMethods(node: SchemaNode, x: Data | ArrayView, opts: MemoryOption, what: string): [symbol, Method][] {
  return [
    [
      ArrowSymbols.array,
      (requestedSchema?: ArrowSchemaExportable | null): ArrayExportHandles => {
        checkRequestedSchema(requestedSchema, node, `${what}[arrow.c_array]`);
        return arrayHandles(node, x, false, opts);
      },
    ],
    [
      ArrowSymbols.deviceArray,
      (requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ArrayExportHandles => {
        checkDeviceExportOptions(options, `${what}[arrow.c_device_array]`);
        checkRequestedSchema(requestedSchema, node, `${what}[arrow.c_device_array]`);
        return arrayHandles(node, x, true, opts);
      },
    ],
  ];
}
