/**
 * The reader of a query's result: the driver's `ArrowArrayStream` imported
 * by arrow-device (zero-copy batches, one alive at a time unless kept,
 * `get_next` off the JS thread under `for await`), tied into the ADBC
 * release order: its stream is a `Lifetime` under the statement that made
 * it, so the statement is released only after the stream.
 *
 * It is an arrow-js `RecordBatchReader` (a subclass): code written for the
 * official driver manager, whose readers are arrow-js readers, type-checks
 * and passes `instanceof RecordBatchReader` unchanged. arrow-js keeps a
 * reader's behaviour in a private implementation object; the public
 * members are overridden here (`STREAM_IMPL` answers the rest), so what
 * arrow-js's own helpers call (`RecordBatchReader.readAll`, `toNodeStream`,
 * `pipe`) reads this stream.
 */
import { RecordBatchReader, type Schema } from 'apache-arrow';
import { ArrowSymbols } from '../abi/protocol.js';
import type { ImportedRecordBatch, ImportedTable } from '../array/build.js';
import type { ExportHandle } from '../memory/handle.js';
import type { SchemaNode } from '../schema/node.js';
import type { RecordBatchStreamImport } from '../stream/import.js';
import { abortable, reasonOf, throwIfAborted } from './abort.js';
import type { Lifetime, Serial } from './lifetime.js';

/** A registry entry: what to release when a reader is collected unreleased. */
interface Held {
  inner: RecordBatchStreamImport<ImportedRecordBatch>;
  life: Lifetime;
}

const registry = new FinalizationRegistry<Held>(({ inner, life }) => {
  try {
    inner.release();
  } finally {
    if (inner.released) life.close();
  }
});

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
  readonly #inner: RecordBatchStreamImport<ImportedRecordBatch>;
  readonly #life: Lifetime;
  readonly #serial: Serial;
  readonly #cancel: () => void;
  #async: AsyncIterator<ImportedRecordBatch> | undefined;
  /** Released by `release()` / `cancel()`: a loop still running over it ends instead of failing. */
  #closed = false;
  /** The query's `AbortSignal`, until the stream is released. */
  #signal: AbortSignal | undefined;
  #onAbort: (() => void) | undefined;

  /** @internal Made by `AdbcStatement.executeQuery` and the connection's readers. */
  constructor(inner: RecordBatchStreamImport<ImportedRecordBatch>, life: Lifetime, serial: Serial, cancel: () => void, signal?: AbortSignal) {
    // arrow-js's constructor takes its implementation object, whose type it does not export.
    super(STREAM_IMPL as never);
    this.#inner = inner;
    this.#life = life;
    this.#serial = serial;
    this.#cancel = cancel;
    registry.register(this, { inner, life }, this);
    if (signal !== undefined && !inner.released) {
      // The listener holds the reader weakly: a signal that lives long (a server's) must not keep
      // readers from the collector. An abort cancels the query and releases the stream.
      const ref = new WeakRef(this);
      this.#signal = signal;
      this.#onAbort = () => ref.deref()?.cancel();
      if (signal.aborted) this.cancel();
      else signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  /** The result's schema (from the stream's `get_schema`). */
  override get schema(): Schema {
    return this.#inner.schema;
  }

  /** The same schema with every type of the Arrow spec (arrow-js lacks a few). */
  get schemaNode(): SchemaNode {
    return this.#inner.schemaNode;
  }

  /** Whether the driver's stream has been released (ended, failed, cancelled or released). */
  get released(): boolean {
    return this.#inner.released;
  }

  /** arrow-js `RecordBatchReader` spelling of `released`. */
  override get closed(): boolean {
    return this.#inner.released;
  }

  /** How many batches have been read. */
  get batchesRead(): number {
    return this.#inner.batchesRead;
  }

  /** arrow-js `RecordBatchReader`: the batches read so far (a stream's count is known only at its end). */
  override get numRecordBatches(): number {
    return this.#inner.batchesRead;
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

  /** After every step: a stream that is released releases its place in the order (and its statement, if that was closed). */
  #after(): void {
    if (this.#inner.released) {
      registry.unregister(this);
      if (this.#onAbort) this.#signal!.removeEventListener('abort', this.#onAbort);
      this.#onAbort = undefined;
      this.#life.close();
    }
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
    throwIfAborted(this.#signal);
    if (this.#closed) return { done: true, value: undefined };
    try {
      this.#serial.checkIdle('next', 'connection');
      return this.#inner.next();
    } finally {
      this.#after();
    }
  }

  /** Batches with each `get_next` on a worker thread: the event loop runs while the driver works. */
  override [Symbol.asyncIterator](): AsyncIterableIterator<ImportedRecordBatch> {
    const it = (this.#async ??= this.#inner[Symbol.asyncIterator]());
    const step = (f: () => Promise<IteratorResult<ImportedRecordBatch, undefined>>): Promise<IteratorResult<ImportedRecordBatch, undefined>> =>
      this.#serial.run(f).finally(() => this.#after());
    const next = (): Promise<IteratorResult<ImportedRecordBatch, undefined>> => {
      const signal = this.#signal;
      if (signal?.aborted) return Promise.reject(reasonOf(signal));
      if (this.#closed) return Promise.resolve({ done: true as const, value: undefined });
      const pending = step(() => it.next() as Promise<IteratorResult<ImportedRecordBatch, undefined>>);
      if (signal === undefined) return pending;
      // An abort during the get_next rejects this step at once (the constructor's listener cancels and
      // releases); a batch the step still gives is released.
      return abortable('next', signal, () => pending, () => undefined, (r) => {
        if (!r.done) r.value.release();
      });
    };
    return {
      next,
      return: () => step(() => it.return!() as Promise<IteratorResult<ImportedRecordBatch, undefined>>),
      throw: () => step(() => it.return!() as Promise<IteratorResult<ImportedRecordBatch, undefined>>),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** Keeps `batch` (one this reader returned) alive past the next step: it is the caller's (`batch.release()`). */
  keep<U extends ImportedRecordBatch>(batch: U): U {
    return this.#inner.keep(batch);
  }

  /** Leaves the iteration: releases the stream. */
  override return(): IteratorResult<ImportedRecordBatch, undefined> {
    this.release();
    return { done: true, value: undefined };
  }

  /** As `return()`. */
  override throw(): IteratorResult<ImportedRecordBatch, undefined> {
    return this.return();
  }

  /** Reads every remaining batch on the JS thread and keeps them all. */
  readAll(): ImportedRecordBatch[] {
    throwIfAborted(this.#signal);
    try {
      this.#serial.checkIdle('readAll', 'connection');
      return this.#inner.readAll();
    } finally {
      this.#after();
    }
  }

  /** Reads every remaining batch on the JS thread into a zero-copy `Table` (`table.release()` gives the memory back). */
  toTable(): ImportedTable {
    throwIfAborted(this.#signal);
    try {
      this.#serial.checkIdle('toTable', 'connection');
      return this.#inner.toTable();
    } finally {
      this.#after();
    }
  }

  /** `readAll()` with every `get_next` on a worker thread. */
  async readAllAsync(): Promise<ImportedRecordBatch[]> {
    const out: ImportedRecordBatch[] = [];
    try {
      for await (const b of this) out.push(this.keep(b));
    } catch (e) {
      for (const b of out) b.release();
      throw e;
    }
    return out;
  }

  /** `toTable()` with every `get_next` on a worker thread. */
  async toTableAsync(): Promise<ImportedTable> {
    throwIfAborted(this.#signal);
    const read = (): Promise<ImportedTable> => this.#serial.run(() => this.#inner.toTableAsync()).finally(() => this.#after());
    // An abort rejects at once; the reader's own listener has cancelled the query and released the stream.
    return this.#signal === undefined ? read() : abortable('toTableAsync', this.#signal, read, () => undefined, (t) => t.release());
  }

  /**
   * Stops the query: asks the driver to cancel what runs (`AdbcStatementCancel`,
   * where it has it) and releases the stream (after a `get_next` that runs
   * on a worker thread returns). Idempotent.
   */
  override cancel(): void {
    if (!this.#inner.released) this.#cancel();
    this.release();
  }

  /**
   * Releases the driver's stream now (or when a running `get_next` returns),
   * then the statement if it was closed; the batch handed out last is
   * released too unless kept. Idempotent.
   */
  release(): void {
    this.#closed = true;
    try {
      this.#inner.release();
    } finally {
      this.#after();
    }
  }

  /** `release()`: what the end of a `using` scope calls. */
  [Symbol.dispose](): void {
    this.release();
  }

  /** `release()`: what the end of an `await using` scope calls. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.release();
  }

  /** Exchange protocol: the result's schema as an owned `ArrowSchema` handle. */
  [ArrowSymbols.schema](): ExportHandle {
    return this.#inner[ArrowSymbols.schema]();
  }
}

/**
 * The implementation object arrow-js's `RecordBatchReader` constructor keeps. arrow-js reads it only in
 * the base class's members; every one of them is overridden by the reader but the four predicates, whose
 * type-predicate signatures (over types arrow-js does not export) an override could not restate.
 */
const STREAM_IMPL = { isSync: () => true, isAsync: () => false, isFile: () => false, isStream: () => true };
