/**
 * arrow-device/adbc: an ADBC driver manager for JavaScript over the Arrow C
 * Data Interface. Its API is the official `@apache-arrow/adbc-driver-manager`'s
 * (switch by changing the import); results are zero-copy imports of the
 * driver's `ArrowArrayStream`, ingested data leaves as a zero-copy
 * `exportArrayStream`, and every call that may block runs off the JS thread.
 *
 * This file is the subpath's public API, listed by hand (as src/index.ts is).
 *
 * @module arrow-device/adbc
 */
// Results are arrow-js objects: the arrow-js target (the driver manager below it is target-neutral).
export { AdbcDatabase, type ArrowAdbc } from './arrowjs.js';
export { AdbcDatabaseBase, type DriverInfo } from './database.js';
export type { AdbcTarget, AdbcTypes, BindExports, ResultReaderLike } from './target.js';
export { AdbcResultReader, type ResultTypes } from './result.js';
export { AdbcConnection } from './connection.js';
export { AdbcPool, type PoolOptions } from './pool.js';
export {
  AdbcStatement, type QueryOptions, type SignalOption, type BindSource, type AsyncBatchSource, type PartitionedResult,
} from './statement.js';
export { AdbcRecordBatchReader } from './reader.js';
export { AdbcPartitionReader, type PartitionBatch, type ReadPartitionsOptions } from './partitions.js';
export { AdbcError, AdbcStatus, type AdbcErrorCode, type AdbcErrorInit } from './error.js';
export {
  LoadFlags, ObjectDepth, InfoCode, IngestMode, StatisticKey,
  type ConnectOptions, type ConnectOptionsBase, type IngestOptions, type GetObjectsOptions, type QueryDefaults,
} from './types.js';
export { defaultEntrypoint, platformTuple } from './discovery.js';
