/**
 * arrow-device/flechette/adbc: the ADBC driver manager of `arrow-device/adbc`
 * with flechette as its target (src/adbc/target.ts). Results are flechette
 * `Table`s over the driver's memory, zero-copy: `query` and the metadata
 * calls give one `Table`; `queryStream`, `executeQuery` and `readPartition`
 * a reader of one `Table` per record batch; schemas are flechette `Schema`s;
 * `bind`, `ingest` and the `params` of a query take flechette `Table`s (and
 * iterables of them, and any `arrow.c_stream` object), exported zero-copy.
 * Everything else (discovery, options, the pool, `AbortSignal`, the
 * statement cache, the release order, the threads) is the driver manager's,
 * the same for both targets. Loads no apache-arrow.
 *
 * @module arrow-device/flechette/adbc
 */
import { Column, Table, type Schema } from '@uwdata/flechette';
import { isArrowExportable } from '../abi/protocol.js';
import { AdbcDatabaseBase } from '../adbc/database.js';
import type { AdbcResultReader } from '../adbc/result.js';
import type { AdbcTarget } from '../adbc/target.js';
import type { ConnectOptions } from '../adbc/types.js';
import type { SignalOption } from '../adbc/statement.js';
import {
  exportArrayStream, exportRecordBatch, flechetteSchema, flechetteStreamTarget, type ExtractionOptions, type FlechetteStreamSource, type ImportedTable,
} from './core.js';
import { viewsOfTable } from './view.js';

/** The flechette target's types: a batch is a `Table` of one record batch; a result a `Table`; a reader `AdbcTableReader`. */
export interface FlechetteAdbc {
  /** A batch of a result: a flechette `Table` of one record batch over the driver's memory, releasable. */
  batch: ImportedTable;
  /** A result as one flechette `Table` of every batch over the driver's memory, releasable (`table.release()`). */
  table: ImportedTable;
  /** A result's schema: a flechette `Schema`. */
  schema: Schema;
  /** What `queryStream`, `executeQuery` and `readPartition` resolve to: `AdbcTableReader`. */
  reader: AdbcTableReader;
  /** What `bind`, `ingest` and `params` take: a flechette `Table`, or an iterable of tables of one schema. */
  bind: FlechetteStreamSource;
  /** What `ingestStream` and `bindStream` take: an async iterable of tables of one schema. */
  asyncBind: AsyncIterable<Table> & {
    /** The tables' schema where the source has it before the first table; else the first table's. */
    schema?: Schema;
  };
}

/**
 * A query result read batch by batch, each a flechette `Table` of one record batch (zero-copy, one
 * alive at a time unless kept): `for await` (each `get_next` on a worker thread), `for...of` (on the JS
 * thread), `toTableAsync()` / `toTable()` (one `Table` of every batch), `readAll()`, `schema`
 * (flechette's), `keep`, `cancel`, `release` / `using`. The driver manager's reader, as it is.
 *
 * @example
 * for await (const batch of await conn.queryStream('SELECT * FROM events')) total += batch.numRows;
 */
export type AdbcTableReader = AdbcResultReader<{
  /** Each batch: a flechette `Table` of one record batch. */
  batch: ImportedTable;
  /** Every batch as one flechette `Table` (`toTable`, `toTableAsync`). */
  table: ImportedTable;
  /** The result's schema: a flechette `Schema`. */
  schema: Schema;
}>;

async function collect(data: AsyncIterable<Table>): Promise<{ tables: Table[]; schema: Schema | undefined }> {
  const tables: Table[] = [];
  for await (const t of data) tables.push(t);
  return { tables, schema: (data as { schema?: Schema }).schema ?? tables[0]?.schema };
}

/** The flechette target (src/adbc/target.ts). */
export const FLECHETTE_TARGET: AdbcTarget<FlechetteAdbc> = {
  stream: flechetteStreamTarget({}),
  reader: (r) => r as AdbcTableReader,
  schema: (node) => flechetteSchema(node),
  exports(data) {
    if (data instanceof Table) {
      return {
        single: viewsOfTable(data).batches.length === 1 ? () => exportRecordBatch(data) : undefined,
        stream: () => exportArrayStream(data),
      };
    }
    // An iterable of tables (a flechette Table is itself iterable, over its rows: tested above first).
    if (typeof data === 'object' && data !== null && Symbol.iterator in data && !isArrowExportable(data)) {
      return { stream: () => exportArrayStream(data as Iterable<Table>) };
    }
    return undefined;
  },
  isAsync: (data) => typeof data === 'object' && data !== null && Symbol.asyncIterator in data && !(Symbol.iterator in data) && !isArrowExportable(data),
  async collect(data) {
    const { tables, schema } = await collect(data as AsyncIterable<Table>);
    return tables.length > 0 || schema === undefined ? tables : emptyTable(schema);
  },
  isBatch: (x) => x instanceof Table,
  async emptyOf(data) {
    const { schema } = await collect(data as AsyncIterable<Table>);
    return schema === undefined ? undefined : emptyTable(schema);
  },
  accepts: 'a flechette Table, an iterable or async iterable of Tables, or an arrow.c_stream object',
};

/** A table of `schema` with no rows: a column of no batches per field (exported as a stream with no batches). */
function emptyTable(schema: Schema): Table {
  return new Table(schema, schema.fields.map((f) => new Column([], f.type)));
}

/**
 * A database (`AdbcDatabase`) through an ADBC driver, as `arrow-device/adbc`'s (the same options,
 * discovery and API), its results flechette `Table`s.
 *
 * @example
 * import { AdbcDatabase } from 'arrow-device/flechette/adbc';
 * await using db = new AdbcDatabase({ driver: 'duckdb' });
 * await using conn = await db.connect();
 * const table = await conn.query('SELECT 42 AS answer');   // a flechette Table
 * table.getChild('answer').at(0);
 */
export class AdbcDatabase extends AdbcDatabaseBase<FlechetteAdbc> {
  /**
   * Finds and loads the driver, then makes and initialises its database, as `arrow-device/adbc`'s
   * `AdbcDatabase`. `options.extraction`: flechette's extraction options for every result of its
   * connections (`useBigInt`, `useDate`, `useDecimalInt`, `useMap`, ...: how flechette reads values).
   */
  constructor(options: FlechetteConnectOptions) {
    const { extraction, ...rest } = options;
    super(rest as ConnectOptions, extraction === undefined ? FLECHETTE_TARGET : { ...FLECHETTE_TARGET, stream: flechetteStreamTarget(extraction) });
  }

  /**
   * The constructor's work with `AdbcDatabaseInit` on a worker thread, as `arrow-device/adbc`'s
   * `AdbcDatabase.open`: the JS thread never waits on the driver's init.
   *
   * @example
   * import { AdbcDatabase } from 'arrow-device/flechette/adbc';
   * await using db = await AdbcDatabase.open({ driver: 'duckdb' });
   */
  static open(options: FlechetteConnectOptions, opts?: SignalOption): Promise<AdbcDatabase> {
    return AdbcDatabaseBase.openWith<FlechetteAdbc, AdbcDatabase>(() => new AdbcDatabase(options), opts);
  }
}

/** `ConnectOptions` (arrow-device/adbc's), and how flechette reads the values of every result. */
export type FlechetteConnectOptions = ConnectOptions & {
  /** flechette's extraction options for every result (e.g. `{ useBigInt: true }` to read int64 beyond 2^53). */
  extraction?: ExtractionOptions;
};

export { AdbcDatabaseBase, type DriverInfo } from '../adbc/database.js';
export { AdbcConnection } from '../adbc/connection.js';
export { AdbcPool, type PoolOptions } from '../adbc/pool.js';
export { AdbcStatement, type QueryOptions, type SignalOption, type PartitionedResult } from '../adbc/statement.js';
export { AdbcPartitionReader, type PartitionBatch, type ReadPartitionsOptions } from '../adbc/partitions.js';
export { AdbcError, AdbcStatus, type AdbcErrorCode, type AdbcErrorInit } from '../adbc/error.js';
export {
  LoadFlags, ObjectDepth, InfoCode, IngestMode, StatisticKey,
  type ConnectOptions, type ConnectOptionsBase, type IngestOptions, type GetObjectsOptions, type QueryDefaults,
} from '../adbc/types.js';
export { defaultEntrypoint, platformTuple } from '../adbc/discovery.js';
export type { AdbcTarget, AdbcTypes, BindSource, AsyncBatchSource } from '../adbc/target.js';
