/**
 * What `arrow-device/adbc` builds its results with and takes as data: a
 * target (the arrow-js one, src/adbc/arrowjs.ts, behind `arrow-device/adbc`;
 * the flechette one, src/flechette/adbc.ts, behind
 * `arrow-device/flechette/adbc`). The driver manager itself (database,
 * connection, statement, pool, partitions, result reader) knows no Arrow
 * library: it reads driver streams through the target's stream reader
 * items, and hands bound or ingested data to the target to export. A
 * database takes its target when it is made and its connections, statements
 * and readers keep it.
 */
import type { ArrowStreamExportable } from '../abi/protocol.js';
import type { Ptr } from '../memory/memory.js';
import type { SchemaNode } from '../schema/node.js';
import type { StreamTarget } from '../stream/import.js';
import type { ArrowAdbc } from './arrowjs.js';
import type { AdbcResultReader, ResultTypes } from './result.js';

/** The types a target gives and takes: a result's batch, table and schema, its reader, and what binds. */
export interface AdbcTypes extends ResultTypes {
  /** What `queryStream`, `executeQuery` and `readPartition` resolve to. */
  reader: ResultReaderLike;
  /** What `bind`, `ingest` and the `params` of a query take besides an `arrow.c_stream` object. */
  bind: unknown;
  /** The async sources they take (read into memory for a bind; ingested batch by batch). */
  asyncBind: unknown;
}

/**
 * What can be bound to a statement or ingested: the target's data (arrow-js: a `Table`, `RecordBatch`,
 * synchronous `RecordBatchReader` or iterable of batches; flechette: a `Table` or an iterable of them),
 * exported zero-copy, or any object of the exchange protocol with `arrow.c_stream` (its stream is moved
 * to the driver).
 */
export type BindSource<T extends AdbcTypes = ArrowAdbc> = T['bind'] | ArrowStreamExportable;

/** What `ingestStream` and `bindStream` take besides a `BindSource`: an async source (an async arrow-js reader, an async iterable of batches). */
export type AsyncBatchSource<T extends AdbcTypes = ArrowAdbc> = T['asyncBind'];

/** What the driver manager uses of a target's reader (both targets' readers have it: result.ts). */
export interface ResultReaderLike {
  /** The result's schema, in the target's type. */
  readonly schema: object;
  /** Reads every remaining batch off the JS thread into one table (what `query` resolves to). */
  toTableAsync(): Promise<object>;
  /** Releases the driver's stream now, then the statement if it was closed. Idempotent. */
  release(): void;
  /** Asks the driver to cancel the query, and releases the stream. Idempotent. */
  cancel(): void;
  /** The batches, each `get_next` on a worker thread. */
  [Symbol.asyncIterator](): AsyncIterator<object>;
}

/** Bound or ingested data as exports: one record batch (for `AdbcStatementBind`), or a stream. */
export interface BindExports {
  /** The data as one record batch, where it is one. */
  single?: () => {
    /** The batch's `ArrowSchema` (a struct, `+s`). */
    schema: Ptr;
    /** The batch's struct `ArrowArray`. */
    array: Ptr;
  };
  /** The data as an `ArrowArrayStream` (zero-copy; the consumer releases it). */
  stream(): Ptr;
}

/**
 * A target of the driver manager: how it builds the results (readers, schemas) of the Arrow library
 * `T` names, and how it exports that library's data to bind or ingest. `AdbcDatabaseBase` takes one;
 * the package's two (arrow-js behind `arrow-device/adbc`, flechette behind
 * `arrow-device/flechette/adbc`) are what their `AdbcDatabase` passes. Its `stream` member (the stream
 * reader's items) is internal to the package, so a target is the package's own.
 */
export interface AdbcTarget<T extends AdbcTypes = AdbcTypes> {
  /**
   * @internal The items of every result reader (undefined: arrow-js batches, the stream reader's
   * own): the stream reader's internal target (src/stream/import.ts), not in the public API.
   */
  readonly stream: StreamTarget<T['batch'], T['table'], T['schema']> | undefined;
  /** A result handed out: the neutral reader as the target's reader. */
  reader(r: AdbcResultReader<T>): T['reader'];
  /** A schema the driver gave (`getTableSchema`, `executeSchema`, a partitioned result's). */
  schema(node: SchemaNode): T['schema'];
  /** `data` as exports, or undefined where it is none of this target's objects (then an `arrow.c_stream` object is tried). */
  exports(data: unknown): BindExports | undefined;
  /** Whether `data` is an async source (read into memory before a bind; ingested batch by batch). */
  isAsync(data: unknown): boolean;
  /** An async source read into memory, as data to bind. */
  collect(data: unknown): Promise<unknown>;
  /** Whether an async source's item is a batch of this target (`ingestStream`). */
  isBatch(x: unknown): boolean;
  /** The data of no rows of an async source's schema, once it is read; undefined where it has none. */
  emptyOf(data: unknown): Promise<unknown>;
  /** What `bind` takes, in this target's words (for its error message). */
  readonly accepts: string;
}
