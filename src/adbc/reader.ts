/**
 * The arrow-js target's reader of a query's result: the target-neutral
 * reader (result.ts: the release order, the one-call-at-a-time rule, abort)
 * handed out as an arrow-js `RecordBatchReader` (a subclass): code written
 * for the official driver manager, whose readers are arrow-js readers,
 * type-checks and passes `instanceof RecordBatchReader` unchanged. arrow-js
 * keeps a reader's behaviour in a private implementation object; the
 * public members are overridden here (`STREAM_IMPL` answers the rest), so
 * what arrow-js's own helpers call (`RecordBatchReader.readAll`,
 * `toNodeStream`, `pipe`) reads this stream.
 */
import { RecordBatchReader, type Schema } from 'apache-arrow';
import { ArrowSymbols } from '../abi/protocol.js';
import type { ImportedRecordBatch, ImportedTable } from '../array/build.js';
import type { ExportHandle } from '../memory/handle.js';
import type { SchemaNode } from '../schema/node.js';
import type { AdbcResultReader } from './result.js';

/** The arrow-js target's result types. */
export interface ArrowResult {
  batch: ImportedRecordBatch;
  table: ImportedTable;
  schema: Schema;
}

/**
 * A query result, read batch by batch: `for await (const batch of reader)`
 * (each `get_next` on a worker thread, the event loop free), `for (const
 * batch of reader)` (on the JS thread), `toTable()` / `toTableAsync()`,
 * `readAll()`, `reader.schema`. Batches are arrow-js `RecordBatch`es over
 * the driver's memory (zero-copy); the reader keeps one alive at a time
 * (the one handed out last) unless kept (`keep(batch)`, `readAll`, `toTable`).
 * The driver's stream is released at its end, on an error, on `break`,
 * `release()`, `cancel()` or `using`, or by the garbage collector; its
 * statement after it.
 *
 * @example
 * let total = 0;
 * const reader = await conn.queryStream('SELECT * FROM events');
 * for await (const batch of reader) total += batch.numRows;
 */
export class AdbcRecordBatchReader extends RecordBatchReader implements IterableIterator<ImportedRecordBatch>, AsyncIterable<ImportedRecordBatch> {
  readonly #r: AdbcResultReader<ArrowResult>;

  /** @internal Made by the arrow-js target (src/adbc/arrowjs.ts) over the connection's reader. */
  constructor(r: AdbcResultReader<ArrowResult>) {
    // arrow-js's constructor takes its implementation object, whose type it does not export.
    super(STREAM_IMPL as never);
    this.#r = r;
  }

  /** The result's schema (from the stream's `get_schema`). */
  override get schema(): Schema {
    return this.#r.schema;
  }

  /** The same schema with every type of the Arrow spec (arrow-js lacks a few). */
  get schemaNode(): SchemaNode {
    return this.#r.schemaNode;
  }

  /** Whether the driver's stream has been released (ended, failed, cancelled or released). */
  get released(): boolean {
    return this.#r.released;
  }

  /** arrow-js `RecordBatchReader` spelling of `released`. */
  override get closed(): boolean {
    return this.#r.released;
  }

  /** How many batches have been read. */
  get batchesRead(): number {
    return this.#r.batchesRead;
  }

  /** arrow-js `RecordBatchReader`: the batches read so far (a stream's count is known only at its end). */
  override get numRecordBatches(): number {
    return this.#r.batchesRead;
  }

  /** arrow-js `RecordBatchReader`: true (the stream is released at its end, on an error or a `break`). */
  override get autoDestroy(): boolean {
    return true;
  }

  /** arrow-js `RecordBatchReader`: an empty map; a C stream's dictionaries travel inside each batch (CDataInterface.rst, "Dictionary-encoded arrays"). */
  override get dictionaries(): Map<number, never> {
    return new Map<number, never>();
  }

  /** arrow-js `RecordBatchReader`: 0 (see `dictionaries`). */
  override get numDictionaries(): number {
    return 0;
  }

  /** arrow-js `RecordBatchReader`: null, not an IPC file. */
  override get footer(): null {
    return null;
  }

  /** arrow-js `RecordBatchReader.open()`: the reader is open already. */
  override open(): this {
    return this;
  }

  /**
   * arrow-js `RecordBatchReader.reset()`: nothing to do. arrow-js resets a reader to read the next of
   * several IPC streams in one byte stream; a driver's stream is one stream, read once.
   */
  override reset(): this {
    return this;
  }

  /** arrow-js `RecordBatchReader`: null, a stream has no random access. */
  override readRecordBatch(): null {
    return null;
  }

  /** The reader is its own iterator: `for (const batch of reader)` calls `next()`. */
  override [Symbol.iterator](): this {
    return this;
  }

  /**
   * The next batch, with `get_next` on the JS thread (it blocks until the
   * driver returns). The batch handed out before is released first unless kept.
   */
  override next(): IteratorResult<ImportedRecordBatch, undefined> {
    return this.#r.next();
  }

  /** Batches with each `get_next` on a worker thread: the event loop runs while the driver works. */
  override [Symbol.asyncIterator](): AsyncIterableIterator<ImportedRecordBatch> {
    return this.#r[Symbol.asyncIterator]();
  }

  /** Keeps `batch` (one this reader returned) alive past the next step: it is the caller's (`batch.release()`). */
  keep<U extends ImportedRecordBatch>(batch: U): U {
    return this.#r.keep(batch);
  }

  /** Leaves the iteration: releases the stream. */
  override return(): IteratorResult<ImportedRecordBatch, undefined> {
    return this.#r.return();
  }

  /** As `return()`. */
  override throw(): IteratorResult<ImportedRecordBatch, undefined> {
    return this.#r.throw();
  }

  /** Reads every remaining batch on the JS thread and keeps them all. */
  readAll(): ImportedRecordBatch[] {
    return this.#r.readAll();
  }

  /** Reads every remaining batch on the JS thread into a zero-copy `Table` (`table.release()` gives the memory back). */
  toTable(): ImportedTable {
    return this.#r.toTable();
  }

  /** `readAll()` with every `get_next` on a worker thread. */
  readAllAsync(): Promise<ImportedRecordBatch[]> {
    return this.#r.readAllAsync();
  }

  /** `toTable()` with every `get_next` on a worker thread. */
  toTableAsync(): Promise<ImportedTable> {
    return this.#r.toTableAsync();
  }

  /**
   * Stops the query: asks the driver to cancel what runs (`AdbcStatementCancel`,
   * where it has it) and releases the stream (after a `get_next` that runs
   * on a worker thread returns). Idempotent.
   */
  override cancel(): void {
    this.#r.cancel();
  }

  /**
   * Releases the driver's stream now (or when a running `get_next` returns),
   * then the statement if it was closed; the batch handed out last is
   * released too unless kept. Idempotent.
   */
  release(): void {
    this.#r.release();
  }

  /** `release()`: what the end of a `using` scope calls. */
  [Symbol.dispose](): void {
    this.#r.release();
  }

  /** `release()`: what the end of an `await using` scope calls. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.#r.release();
  }

  /** Exchange protocol: the result's schema as an owned `ArrowSchema` handle. */
  [ArrowSymbols.schema](): ExportHandle {
    return this.#r[ArrowSymbols.schema]();
  }
}

/**
 * The implementation object arrow-js's `RecordBatchReader` constructor keeps. arrow-js reads it only in
 * the base class's members; every one of them is overridden by the reader but the four predicates, whose
 * type-predicate signatures (over types arrow-js does not export) an override could not restate.
 */
const STREAM_IMPL = { isSync: () => true, isAsync: () => false, isFile: () => false, isStream: () => true };
