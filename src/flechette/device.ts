/**
 * Device arrays into flechette (issue 52): an `ArrowDeviceArray` the CPU reads in place (CPU,
 * CUDA_HOST, CUDA_MANAGED, after waiting on its `sync_event`) as a flechette `Table`, zero-copy;
 * any other as a `DeviceArray` handle (or, with `toHost`, a flechette table over a host copy); and
 * `ArrowDeviceArrayStream`s as readers of flechette tables.
 *
 * One mechanism: the device import of every target (src/device/import.ts `importDeviceWith`: the
 * device fields checked, the event waited on, the tree read once through the plan), its result
 * built by the flechette reader's item (`flechetteStreamTarget`, src/flechette/index.ts), as a
 * stream batch is. Ownership is every import's: one owner, `release()` / `using` / the collector,
 * released means detached; a `DeviceArray` is released by its own `release()`.
 *
 * Loads no apache-arrow (test/flechette/loads.test.ts): the device layer's neutral modules only. It
 * imports src/flechette/index.ts, which re-exports it: neither uses the other at load.
 */
import type { Schema } from '@uwdata/flechette';
import { isArrowExportable } from '../abi/protocol.js';
import { isSchemaNode } from '../args.js';
import { memoryOf } from '../array/core.js';
import { PlanOf, quietly, readSchemaPtr } from '../array/importer.js';
import { owned } from '../array/owned.js';
import { planOfNode } from '../array/plan.js';
import { DeviceArray, type ToHostOptions } from '../device/device-array.js';
import { importDeviceWith, viaDeviceArray, type DeviceArraySource, type DeviceImportOptions } from '../device/import.js';
import { invalid } from '../errors.js';
import { releaseStruct } from '../memory/cstruct.js';
import type { Memory, Ptr } from '../memory/memory.js';
import type { SchemaNode } from '../schema/node.js';
import { importDeviceArrayStream as importDeviceStream } from '../stream/device.js';
import type { AnyStreamHandOn, DeviceStreamSource, RecordBatchStreamImport } from '../stream/import.js';
import {
  flechetteRequest, flechetteStreamTarget, ImportedTable, type FlechetteExchangeOptions, type FlechetteImportOptions, type FlechetteStreamOptions,
} from './core.js';
import { schemaNodeOfSchema } from './types.js';

/** Options of the flechette device importers: the flechette importers', and the device's (`toHost`, `stream`). */
export interface FlechetteDeviceOptions extends FlechetteImportOptions, Pick<DeviceImportOptions, 'toHost' | 'stream'> {}

/** The record batch schema of a device import: a pointer (read and released), a flechette `Schema`, or a `SchemaNode`; on a failure the array is released. */
function batchNodeOf(m: Memory, ptr: Ptr, schema: Schema | SchemaNode | Ptr): SchemaNode {
  try {
    let node: SchemaNode;
    if (typeof schema === 'bigint') node = readSchemaPtr(m, schema, false, 'schema', 'schema');
    else if (isSchemaNode(schema)) node = schema;
    else if (typeof schema === 'object' && schema !== null && Array.isArray((schema as Schema).fields)) node = schemaNodeOfSchema(schema as Schema);
    else throw invalid('schema', 'expected a flechette Schema, a SchemaNode or a pointer (bigint) to an ArrowSchema');
    if (node.type.id !== 'struct') throw invalid('schema.format', `a schema (record batch) must be a struct ("+s"), got "${node.format}"`);
    return node;
  } catch (e) {
    // Import consumes its input: the array too.
    if (typeof ptr === 'bigint' && ptr !== 0n) quietly(() => releaseStruct(m, 'ArrowDeviceArray', ptr));
    throw e;
  }
}

/**
 * Imports a struct `ArrowDeviceArray` (a record batch) as a flechette `Table` where the CPU can
 * read its memory: CPU, and CUDA_HOST or CUDA_MANAGED after waiting on its `sync_event`, zero-copy.
 * Memory the CPU cannot read (CUDA device memory, a WebGPU buffer, an opaque device) gives a
 * `DeviceArray` handle, or with `toHost: true` a table over a host copy (the device array
 * released at once). `schema`: its `ArrowSchema` (a pointer, read and released), a flechette
 * `Schema` or a `SchemaNode`; `source` may implement `arrow.c_device_array` (or, for CPU data,
 * `arrow.c_array`) in place of both pointers. Import consumes: the struct is moved, the
 * producer's `release` called once (at `release()`, `using`, or when nothing can reach the table).
 *
 * @example
 * using t = importDeviceRecordBatch(deviceArrayPtr, schemaPtr, { toHost: true });
 * t.getChild('x')?.toArray();
 *
 * @example
 * const x = importDeviceRecordBatch(deviceArrayPtr, schemaPtr);
 * if (x instanceof DeviceArray) x.release();   // device memory: pass it on, copy it, or release it
 * else aq.fromArrow(x);                         // a flechette Table over the producer's memory
 */
export function importDeviceRecordBatch(source: DeviceArraySource, opts: FlechetteDeviceOptions & FlechetteExchangeOptions & { toHost: true }): ImportedTable;
export function importDeviceRecordBatch(source: DeviceArraySource, opts?: FlechetteDeviceOptions & FlechetteExchangeOptions): ImportedTable | DeviceArray;
export function importDeviceRecordBatch(ptr: Ptr, schema: Schema | SchemaNode | Ptr, opts: FlechetteDeviceOptions & { toHost: true }): ImportedTable;
export function importDeviceRecordBatch(ptr: Ptr, schema: Schema | SchemaNode | Ptr, opts?: FlechetteDeviceOptions): ImportedTable | DeviceArray;
export function importDeviceRecordBatch(
  ptr: Ptr | DeviceArraySource,
  schema?: Schema | SchemaNode | Ptr | (FlechetteDeviceOptions & FlechetteExchangeOptions),
  opts: FlechetteDeviceOptions = {},
): ImportedTable | DeviceArray {
  if (isArrowExportable(ptr)) {
    // A flechette requestedSchema made a SchemaNode first, as the flechette importers do.
    const o = typeof schema === 'object' && schema !== null ? flechetteRequest(schema as FlechetteExchangeOptions) : schema;
    return viaDeviceArray(ptr, o, 'importDeviceRecordBatch', (p, s, oo) => importDeviceRecordBatch(p, s, oo as FlechetteDeviceOptions));
  }
  const node = batchNodeOf(memoryOf(opts), ptr, schema as Schema | SchemaNode | Ptr);
  const target = flechetteStreamTarget(opts);
  return importDeviceWith(ptr, node, opts, PlanOf.Array, (read) => target.item(read, read.plan));
}

/**
 * A flechette `Table` over a host copy of a struct `DeviceArray` (a device stream's item, an
 * `importDeviceArray` of device memory): one batched read of the sizes still unknown, one of the
 * buffers, after the producer's event. The `DeviceArray` stays live (release it when done); the
 * table owns nothing (`release()` is allowed and does nothing to the device array).
 *
 * @example
 * for (const item of importDeviceArrayStream(cudaStreamPtr)) {
 *   using t = item instanceof DeviceArray ? toHostTable(item) : item;
 *   if (item instanceof DeviceArray) item.release();
 * }
 */
export function toHostTable(dev: DeviceArray, opts: ToHostOptions & FlechetteImportOptions = {}): ImportedTable {
  if (!(dev instanceof DeviceArray)) throw invalid('dev', 'expected a DeviceArray');
  if (dev.schema.type.id !== 'struct') throw invalid('schema.format', `a record batch needs a struct ("+s"), got "${dev.schema.format}"`);
  const plan = planOfNode(dev.schema, opts);
  // A host copy: nothing to release (owned by no import), but releasable like every import.
  return owned(flechetteStreamTarget(opts).item(DeviceArray.hostCopy(dev, opts, plan), plan), []);
}

/** Options of the flechette `importDeviceArrayStream`: the flechette reader's, and the device's (`toHost`, `stream`). */
export interface FlechetteDeviceStreamOptions extends FlechetteStreamOptions, Pick<DeviceImportOptions, 'toHost' | 'stream'> {}

/**
 * A reader of an `ArrowDeviceArrayStream` as flechette tables, one per record batch: the
 * flechette reader of `importArrayStream` over a device stream. Its items are tables where the CPU
 * reads the memory (zero-copy, after each array's event), `DeviceArray`s where it cannot (or, with
 * `toHost`, tables over host copies). It hands the rest of the stream on as `arrow.c_device_stream` (or
 * `arrow.c_stream`, for a producer's plain stream).
 */
export type FlechetteDeviceStreamReader<T extends object = ImportedTable | DeviceArray> = RecordBatchStreamImport<T, ImportedTable, Schema> & AnyStreamHandOn;

/**
 * Imports an `ArrowDeviceArrayStream` (a pointer, or an object implementing `arrow.c_device_stream`,
 * or only `arrow.c_stream`: CPU data) as a reader of flechette tables, under the rules of the
 * flechette `importArrayStream` (one batch alive at a time unless kept; `toTable()` of a stream
 * whose items are all tables). Every array's `device_type` is checked against the stream's.
 *
 * @example
 * using reader = importDeviceArrayStream(deviceStreamPtr, { toHost: true });
 * for (const t of reader) total += t.numRows;
 */
export function importDeviceArrayStream(ptr: Ptr | DeviceStreamSource, opts: FlechetteDeviceStreamOptions & { toHost: true }): FlechetteDeviceStreamReader<ImportedTable>;
export function importDeviceArrayStream(ptr: Ptr | DeviceStreamSource, opts?: FlechetteDeviceStreamOptions): FlechetteDeviceStreamReader;
export function importDeviceArrayStream(ptr: Ptr | DeviceStreamSource, opts: FlechetteDeviceStreamOptions = {}): FlechetteDeviceStreamReader {
  return importDeviceStream(ptr, { ...flechetteRequest(opts), target: flechetteStreamTarget(opts) }) as unknown as FlechetteDeviceStreamReader;
}
