/**
 * The arrow-js target of `arrow-device/adbc` (src/adbc/target.ts): results
 * are arrow-js `Table`s and `RecordBatch`es, readers arrow-js
 * `RecordBatchReader`s (reader.ts), and `bind` / `ingest` take arrow-js
 * tables, batches, readers and iterables of batches, exported zero-copy.
 */
import { RecordBatch, RecordBatchReader, Table, type Schema } from 'apache-arrow';
import { exportRecordBatch } from '../array/api.js';
import type { ImportedRecordBatch, ImportedTable } from '../array/build.js';
import { isArrowExportable } from '../abi/protocol.js';
import { nodeToSchema } from '../schema/arrowjs.js';
import { exportArrayStream, type RecordBatchSource } from '../stream/export.js';
import '../stream/arrowjs.js'; // the stream readers' arrow-js batches
import { AdbcDatabaseBase } from './database.js';
import { AdbcRecordBatchReader } from './reader.js';
import type { ConnectOptions } from './types.js';
import type { AdbcTarget } from './target.js';
import type { SignalOption } from './statement.js';

/** The arrow-js target's types. */
export interface ArrowAdbc {
  /** A batch of a result: an arrow-js `RecordBatch` over the driver's memory, releasable. */
  batch: ImportedRecordBatch;
  /** A result as one arrow-js `Table` over the driver's memory, releasable (`table.release()`). */
  table: ImportedTable;
  /** A result's schema: an arrow-js `Schema`. */
  schema: Schema;
  /** What `queryStream`, `executeQuery` and `readPartition` resolve to: an arrow-js `RecordBatchReader`. */
  reader: AdbcRecordBatchReader;
  /** What `bind`, `ingest` and `params` take: a `Table`, `RecordBatch`, synchronous `RecordBatchReader` or iterable of batches. */
  bind: RecordBatchSource | RecordBatch;
  /** What `ingestStream` and `bindStream` take: an async arrow-js `RecordBatchReader` or an async iterable of batches. */
  asyncBind: AsyncIterable<RecordBatch> & {
    /** The batches' schema where the source has it before the first batch (an async arrow-js reader); else the first batch's is used. */
    schema?: Schema;
  };
}

/** Reads an async source into batches (the schema from the source when it yields none). */
async function collect(data: AsyncIterable<RecordBatch>): Promise<{ batches: RecordBatch[]; schema: Schema | undefined }> {
  if (data instanceof RecordBatchReader) await data.open();
  const batches: RecordBatch[] = [];
  for await (const b of data) batches.push(b);
  return { batches, schema: (data as { schema?: Schema }).schema ?? batches[0]?.schema };
}

export const ARROW_TARGET: AdbcTarget<ArrowAdbc> = {
  stream: undefined,
  reader: (r) => new AdbcRecordBatchReader(r),
  schema: (node) => nodeToSchema(node),
  exports(data) {
    const single = data instanceof RecordBatch ? data : data instanceof Table && data.batches.length === 1 ? data.batches[0]! : undefined;
    const source = data instanceof RecordBatch ? [data] : data;
    const exportable = source instanceof Table || source instanceof RecordBatchReader || (typeof source === 'object' && source !== null && Symbol.iterator in source);
    if (!exportable) return undefined;
    return {
      single: single === undefined ? undefined : () => exportRecordBatch(single),
      stream: () => exportArrayStream(source as RecordBatchSource),
    };
  },
  isAsync(data) {
    if (typeof data !== 'object' || data === null) return false;
    if (data instanceof RecordBatchReader) return data.isAsync();
    return Symbol.asyncIterator in data && !(Symbol.iterator in data) && !isArrowExportable(data);
  },
  async collect(data) {
    const { batches, schema } = await collect(data as AsyncIterable<RecordBatch>);
    return schema ? new Table(schema, batches) : batches;
  },
  isBatch: (x) => x instanceof RecordBatch,
  async emptyOf(data) {
    const { schema } = await collect(data as AsyncIterable<RecordBatch>);
    return schema ? new Table(schema) : undefined;
  },
  accepts: 'a Table, RecordBatch, RecordBatchReader, an iterable or async iterable of RecordBatch, or an arrow.c_stream object',
};

/**
 * A database (`AdbcDatabase`) through an ADBC driver, found as the ADBC
 * driver manager finds drivers: a short name through manifests, a path, a
 * URI naming the driver, or a connection profile (see `ConnectOptions`).
 * The constructor loads the driver and initialises the database
 * synchronously, and throws an `AdbcError` naming every place it looked
 * when the driver cannot be found. The same API as the official
 * `@apache-arrow/adbc-driver-manager`: switch by changing the import.
 * Results are arrow-js objects (`arrow-device/flechette/adbc` gives flechette's).
 *
 * @example
 * import { AdbcDatabase } from 'arrow-device/adbc';
 * await using db = new AdbcDatabase({ driver: 'sqlite', databaseOptions: { uri: ':memory:' } });
 * await using conn = await db.connect();
 * const table = await conn.query('SELECT 1 AS one');
 */
export class AdbcDatabase extends AdbcDatabaseBase<ArrowAdbc> {
  /**
   * Finds and loads the driver (see `ConnectOptions` for every form `driver` takes), then makes and
   * initialises its database (`AdbcDatabaseNew`, `AdbcDatabaseSetOption`, `AdbcDatabaseInit`), on the
   * JS thread. Throws an `AdbcError` (`NOT_FOUND` with every place tried, for a driver not found).
   */
  constructor(options: ConnectOptions) {
    super(options, ARROW_TARGET);
  }

  /**
   * The constructor's work with `AdbcDatabaseInit` on a worker thread, so the JS thread never waits on
   * the driver's init (PostgreSQL's connects to the server and reads its type catalog there, tens of
   * milliseconds; DuckDB's and SQLite's open their file). Rejects with the constructor's errors, and with
   * the signal's reason on an abort (the database is then released when the init returns).
   *
   * @example
   * import { AdbcDatabase } from 'arrow-device/adbc';
   * await using db = await AdbcDatabase.open({ driver: 'sqlite', databaseOptions: { uri: ':memory:' } });
   */
  static open(options: ConnectOptions, opts?: SignalOption): Promise<AdbcDatabase> {
    return AdbcDatabaseBase.openWith<ArrowAdbc, AdbcDatabase>(() => new AdbcDatabase(options), opts);
  }
}
