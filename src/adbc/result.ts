/**
 * The reader of a query's result, for every target: the driver's
 * `ArrowArrayStream` imported by arrow-device (zero-copy batches, one alive
 * at a time unless kept, `get_next` off the JS thread under `for await`),
 * tied into the ADBC release order: its stream is a `Lifetime` under the
 * statement that made it, so the statement is released only after the
 * stream. Target-neutral: its batches are the target's (arrow-js
 * `RecordBatch`es, flechette `Table`s), built by the stream reader it wraps.
 * The arrow-js target hands it out as an arrow-js `RecordBatchReader`
 * (reader.ts); the flechette target as it is.
 */
import { ArrowSymbols } from '../abi/protocol.js';
import { releaseImport } from '../array/owned.js';
import type { ExportHandle } from '../memory/handle.js';
import type { SchemaNode } from '../schema/node.js';
import type { RecordBatchStreamImport } from '../stream/import.js';
import { abortable, reasonOf, throwIfAborted } from './abort.js';
import type { Lifetime, Serial } from './lifetime.js';

/** A registry entry: what to release when a reader is collected unreleased. */
interface Held {
  inner: RecordBatchStreamImport<object, unknown, unknown>;
  life: Lifetime;
  /** The connection's order of calls (it holds nothing of the connection's). */
  serial: Serial;
}

const registry = new FinalizationRegistry<Held>(({ inner, life, serial }) => {
  const release = (): void => {
    try {
      inner.release();
    } finally {
      if (inner.released) life.close();
    }
  };
  // As `release()`: never beside a call the connection runs on a worker thread.
  serial.whenIdle(release)?.catch(() => undefined);
});

/** The types of a target's result: its batch, its table and its schema. */
export interface ResultTypes {
  /** A batch of a result, as a reader hands it out (arrow-js: a `RecordBatch`; flechette: a `Table` of one record batch). */
  batch: object;
  /** A result as one table (`query`, `toTable`, `toTableAsync`, the metadata calls). */
  table: object;
  /** A result's schema (`reader.schema`, `getTableSchema`, `executeSchema`). */
  schema: object;
}

/**
 * A query result, read batch by batch: `for await (const batch of reader)`
 * (each `get_next` on a worker thread, the event loop free), `for (const
 * batch of reader)` (on the JS thread), `toTable()` / `toTableAsync()`,
 * `readAll()`, `reader.schema`. Batches are the target's, over the driver's
 * memory (zero-copy); the reader keeps one alive at a time (the one handed
 * out last) unless kept (`keep(batch)`, `readAll`, `toTable`). The driver's
 * stream is released at its end, on an error, on `break`, `release()`,
 * `cancel()` or `using`, or by the garbage collector; its statement after it.
 *
 * @example
 * let total = 0;
 * const reader = await conn.queryStream('SELECT * FROM events');
 * for await (const batch of reader) total += batch.numRows;
 */
export class AdbcResultReader<R extends ResultTypes> implements IterableIterator<R['batch']>, AsyncIterable<R['batch']> {
  readonly #inner: RecordBatchStreamImport<R['batch'], R['table'], R['schema']>;
  readonly #life: Lifetime;
  readonly #serial: Serial;
  readonly #cancel: () => void;
  #async: AsyncIterator<R['batch']> | undefined;
  /** Released by `release()` / `cancel()`: a loop still running over it ends instead of failing. */
  #closed = false;
  /** The query's `AbortSignal`, until the stream is released. */
  #signal: AbortSignal | undefined;
  #onAbort: (() => void) | undefined;
  /** `release()` came while a call ran on the connection: the stream's release waits for it in the connection's order. */
  #releaseQueued = false;

  /** @internal Made by `AdbcStatement.executeQuery` and the connection's readers. */
  constructor(inner: RecordBatchStreamImport<R['batch'], R['table'], R['schema']>, life: Lifetime, serial: Serial, cancel: () => void, signal?: AbortSignal) {
    this.#inner = inner;
    this.#life = life;
    this.#serial = serial;
    this.#cancel = cancel;
    registry.register(this, { inner: inner as RecordBatchStreamImport<object, unknown, unknown>, life, serial }, this);
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
  get schema(): R['schema'] {
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

  /** How many batches have been read. */
  get batchesRead(): number {
    return this.#inner.batchesRead;
  }

  /** After every step: a stream that is released releases its place in the order (and its statement, if that was closed). */
  #after(): void {
    if (this.#inner.released) this.#detach();
  }

  /** The result is released (or its release queued): no collector entry, no abort listener, its place in the order closed. */
  #detach(): void {
    registry.unregister(this);
    if (this.#onAbort) this.#signal!.removeEventListener('abort', this.#onAbort);
    this.#onAbort = undefined;
    this.#life.close();
  }

  /** The reader is its own iterator: `for (const batch of reader)` calls `next()`. */
  [Symbol.iterator](): this {
    return this;
  }

  /**
   * The next batch, with `get_next` on the JS thread (it blocks until the
   * driver returns). The batch handed out before is released first unless kept.
   */
  next(): IteratorResult<R['batch'], undefined> {
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
  [Symbol.asyncIterator](): AsyncIterableIterator<R['batch']> {
    const it = (this.#async ??= this.#inner[Symbol.asyncIterator]());
    const step = (f: () => Promise<IteratorResult<R['batch'], undefined>>): Promise<IteratorResult<R['batch'], undefined>> =>
      this.#serial.run(f).finally(() => this.#after());
    const next = (): Promise<IteratorResult<R['batch'], undefined>> => {
      const signal = this.#signal;
      if (signal?.aborted) return Promise.reject(reasonOf(signal));
      if (this.#closed) return Promise.resolve({ done: true as const, value: undefined });
      const pending = step(() => it.next() as Promise<IteratorResult<R['batch'], undefined>>);
      if (signal === undefined) return pending;
      // An abort during the get_next rejects this step at once (the constructor's listener cancels and
      // releases); a batch the step still gives is released.
      return abortable('next', signal, () => pending, () => undefined, (r) => {
        if (!r.done) releaseImport(r.value);
      });
    };
    return {
      next,
      return: () => step(() => it.return!() as Promise<IteratorResult<R['batch'], undefined>>),
      throw: () => step(() => it.return!() as Promise<IteratorResult<R['batch'], undefined>>),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** Keeps `batch` (one this reader returned) alive past the next step: it is the caller's (`batch.release()`). */
  keep<U extends R['batch']>(batch: U): U {
    return this.#inner.keep(batch);
  }

  /** Leaves the iteration: releases the stream. */
  return(): IteratorResult<R['batch'], undefined> {
    this.release();
    return { done: true, value: undefined };
  }

  /** As `return()`. */
  throw(): IteratorResult<R['batch'], undefined> {
    return this.return();
  }

  /** Reads every remaining batch on the JS thread and keeps them all. */
  readAll(): R['batch'][] {
    throwIfAborted(this.#signal);
    try {
      this.#serial.checkIdle('readAll', 'connection');
      return this.#inner.readAll();
    } finally {
      this.#after();
    }
  }

  /** Reads every remaining batch on the JS thread into a zero-copy `Table` (`table.release()` gives the memory back). */
  toTable(): R['table'] {
    throwIfAborted(this.#signal);
    try {
      this.#serial.checkIdle('toTable', 'connection');
      return this.#inner.toTable();
    } finally {
      this.#after();
    }
  }

  /** `readAll()` with every `get_next` on a worker thread. */
  async readAllAsync(): Promise<R['batch'][]> {
    const out: R['batch'][] = [];
    try {
      for await (const b of this) out.push(this.keep(b));
    } catch (e) {
      for (const b of out) releaseImport(b);
      throw e;
    }
    return out;
  }

  /** `toTable()` with every `get_next` on a worker thread. */
  async toTableAsync(): Promise<R['table']> {
    throwIfAborted(this.#signal);
    const read = (): Promise<R['table']> => this.#serial.run(() => this.#inner.toTableAsync()).finally(() => this.#after());
    // An abort rejects at once; the reader's own listener has cancelled the query and released the stream.
    return this.#signal === undefined ? read() : abortable('toTableAsync', this.#signal, read, () => undefined, (t) => releaseImport(t));
  }

  /**
   * Stops the query: asks the driver to cancel what runs (`AdbcStatementCancel`,
   * where it has it) and releases the stream (after a `get_next` that runs
   * on a worker thread returns). Idempotent.
   */
  cancel(): void {
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
    if (this.#releaseQueued) return;
    if (this.#serial.busy && !this.#inner.released) {
      // A connection is not thread-safe (adbc.h): while a call of its runs on a worker thread (another
      // statement's, or this stream's own get_next), the stream is released after it, in its order of calls.
      // The result counts as released from now on: whatever comes after it on this connection (the
      // statement's next execution or its release, a pool's next lease) is queued behind that release in
      // the same order, so it still runs first. Its error, if it has one, has no caller to go to (as with
      // the collector's release).
      this.#releaseQueued = true;
      const inner = this.#inner;
      this.#serial.run(() => inner.release()).catch(() => undefined);
      this.#detach();
      return;
    }
    this.#releaseNow();
  }

  #releaseNow(): void {
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
