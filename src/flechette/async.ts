/**
 * The async device stream interface's consumer side into flechette (issue 52): a handler
 * (`ArrowAsyncDeviceStreamHandler`) for a producer that pushes, and the flechette tables it pushes,
 * one per task. The main entry's reader (src/async/consumer.ts: back-pressure by `queueSize`, the
 * native ring, cancel, `on_error` as `AsyncStreamError`) with its items built by the flechette
 * target (`flechetteStreamTarget`, src/flechette/index.ts), as a stream's are. Ownership is its:
 * one table alive at a time unless kept (`keep(table)`, `{ keep: true }`), each released by
 * `release()`, `using` or the collector.
 *
 * Loads no apache-arrow. Imports src/flechette/index.ts, which re-exports it: neither uses the
 * other at load.
 */
import type { Schema } from '@uwdata/flechette';
import { AsyncDeviceStreamReader, type AsyncConsumerOptions } from '../async/consumer.js';
import type { DeviceArray } from '../device/device-array.js';
import { flechetteStreamTarget, type FlechetteImportOptions, type ImportedTable } from './core.js';

/** Options of the flechette async reader: the flechette importers', and the reader's (`queueSize`, `keep`, `toHost`, `nativeRing`, ...). */
export interface FlechetteAsyncOptions extends FlechetteImportOptions, Omit<AsyncConsumerOptions, 'view' | 'target' | 'expand'> {}

/**
 * A reader of what an async producer pushes, as flechette tables (`DeviceArray`s for memory the
 * CPU cannot read, unless `toHost`); `schema` resolves to flechette's `Schema`.
 */
export type FlechetteAsyncReader<T extends object = ImportedTable | DeviceArray> = AsyncDeviceStreamReader<T, Schema>;

/**
 * Creates a handler for a producer of the async device stream interface and the reader of the
 * flechette tables it pushes. Give `reader.handler` to the producer; read with `for await`,
 * `next()` (with each task's metadata) or `toReadableStream()`.
 *
 * @example
 * const reader = createAsyncDeviceStreamReader({ queueSize: 4 });
 * nativeLib.start_producing(reader.handler);     // the producer pushes from its own thread
 * for await (const table of reader) total += table.numRows;   // released as the loop moves on
 */
export function createAsyncDeviceStreamReader(opts: FlechetteAsyncOptions & { toHost: true }): FlechetteAsyncReader<ImportedTable>;
export function createAsyncDeviceStreamReader(opts?: FlechetteAsyncOptions): FlechetteAsyncReader;
export function createAsyncDeviceStreamReader(opts: FlechetteAsyncOptions = {}): FlechetteAsyncReader {
  return new AsyncDeviceStreamReader<ImportedTable | DeviceArray, Schema>({ ...opts, target: flechetteStreamTarget(opts) });
}
