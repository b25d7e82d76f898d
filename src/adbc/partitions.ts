/**
 * `AdbcPartitionReader`: several partitions of a partitioned result read at
 * once (`AdbcConnection.readPartitions`), their batches merged into one
 * async iteration.
 *
 * Each partition in flight is read on a connection of its own, opened from
 * the database of the connection that asked: ADBC connections are not
 * thread-safe, so this module runs one call at a time per connection
 * (`Serial`), and partitions on one connection could only be read one after
 * another. Opening a connection can cost more than reading a partition (the
 * Flight SQL driver's `AdbcConnectionInit` talks to the server: tens of
 * milliseconds against Ballista here), so connections are reused from
 * partition to partition, and those whose partitions all ended cleanly are
 * kept by the asking connection for its next `readPartitions` and closed
 * with it. Every `AdbcConnectionReadPartition` and `get_next` runs
 * on a koffi worker thread (libuv's thread pool), never on the JS thread.
 *
 * What must hold, and where:
 * - At most `concurrency` partitions are read at a time (`#fill`).
 * - At most one batch per partition is outstanding: a partition's next
 *   `get_next` starts only when the consumer asks for the item after that
 *   partition's last batch (`next()` pulls the partition it handed out
 *   last), and `get_next` releases the batch before it unless kept. So the
 *   live batches never exceed the partitions in flight.
 * - The first failure cancels every other partition (`AdbcConnectionCancel`
 *   where the driver has it), waits until every call on a worker thread has
 *   returned, releases every stream and connection, and only then rejects
 *   the consumer's `next()` with one `AdbcError`: nothing is live after it.
 * - `return()` (a `break` out of `for await`), `release()` and `cancel()`
 *   do the same without an error.
 */
import { ArrowDeviceError } from '../errors.js';
import { AdbcError, AdbcStatus } from './error.js';
import type { ArrowAdbc } from './arrowjs.js';
import type { AdbcTypes } from './target.js';
import { releaseImport } from '../array/owned.js';
import type { QueryOptions } from './statement.js';
import { reasonOf } from './abort.js';

/** Options of `AdbcConnection.readPartitions`: those of every partition's reader, and how they are read together. */
export interface ReadPartitionsOptions extends QueryOptions {
  /**
   * How many partitions are read at a time, each on a connection of its own
   * (an integer from 1). Default 4: libuv's thread pool, where every
   * driver call of this module runs, has 4 threads unless
   * `UV_THREADPOOL_SIZE` says otherwise, and more calls than threads only
   * wait for one (holding back the process's other pool work: file system,
   * DNS). Raise both together for an engine with many partitions far away.
   */
  concurrency?: number;
  /**
   * Hand out every batch of partition 0, then of partition 1, and so on
   * (the partitions after the one handed out are still read ahead, one
   * batch each). Default false: batches in the order they arrive.
   */
  ordered?: boolean;
}

/** One item of an `AdbcPartitionReader`: a batch and the partition it came from. */
export interface PartitionBatch<T extends AdbcTypes = ArrowAdbc> {
  /** The index of the partition in the descriptors given to `readPartitions`. */
  partition: number;
  /** The batch: zero-copy, alive until the reader's next step unless kept (`reader.keep(batch)`). */
  batch: T['batch'];
}

/** What the reader needs of the connection that made it. */
export interface PartitionSource<T extends AdbcTypes = ArrowAdbc> {
  /** A connection of the same database: one kept from an earlier read, else a new one. */
  connect(): Promise<PartitionConnection<T>>;
  /** Takes back a connection whose partitions all ended cleanly, for the next read (or closes it). */
  recycle(conn: PartitionConnection<T>): void;
}

/** The part of `AdbcConnection` this module uses (it cannot import the class: the class imports this module). */
export interface PartitionConnection<T extends AdbcTypes = ArrowAdbc> {
  readPartition(descriptor: Uint8Array, options?: QueryOptions): Promise<T['reader']>;
  cancel(): boolean;
  close(): Promise<void>;
}

/** A partition being read. */
interface Slot<T extends AdbcTypes> {
  readonly partition: number;
  conn: PartitionConnection<T> | undefined;
  reader: T['reader'] | undefined;
  it: AsyncIterator<T['batch']> | undefined;
  /** The call running on a worker thread for it (connect, `readPartition`, `get_next`), settled when it returns. */
  busy: Promise<void>;
  /** Its batch, read and not handed out yet. */
  ready: T['batch'] | undefined;
}

/** A failed partition's error, as one `AdbcError` naming the partition (the original as `cause`). */
function partitionError(e: unknown, partition: number, total: number): AdbcError {
  const where = `readPartitions: partition ${partition} of ${total}`;
  if (e instanceof AdbcError) {
    return new AdbcError('readPartitions', { status: e.status, message: `${where}: ${e.message}`, vendorCode: e.vendorCode, sqlState: e.sqlState, details: e.details }, { cause: e });
  }
  // An import refused (ArrowDeviceError): the driver's data was not what its schema says.
  const status = e instanceof ArrowDeviceError ? AdbcStatus.INVALID_DATA : AdbcStatus.INTERNAL;
  return new AdbcError('readPartitions', { status, message: `${where}: ${e instanceof Error ? e.message : String(e)}` }, { cause: e });
}

/**
 * Partitions of one result read at once, from `AdbcConnection.readPartitions`:
 * `for await (const { partition, batch } of reader)`. Batches come as they
 * arrive (or in partition order with `ordered`), each with the index of its
 * partition. Memory stays bounded: at most `concurrency` partitions are read
 * at a time, and each has at most one batch outstanding (the batch handed
 * out is released at the reader's next step unless kept). The first failure
 * of any partition cancels and releases the others and is thrown once, as
 * an `AdbcError` (operation `readPartitions`, the message naming the
 * partition, the partition's error as `cause`); a `break` releases
 * everything. Connections are opened from the database of the connection
 * that asked (its own connection stays free) and closed at the end.
 *
 * @example
 * const { partitions } = await conn.executePartitions('SELECT k, count(*) AS n FROM t GROUP BY k');
 * let rows = 0;
 * for await (const { partition, batch } of await conn.readPartitions(partitions, { concurrency: 8 })) {
 *   rows += batch.numRows; // `partition`: the index of the descriptor it came from
 * }
 */
export class AdbcPartitionReader<T extends AdbcTypes = ArrowAdbc> implements AsyncIterableIterator<PartitionBatch<T>>, AsyncDisposable {
  readonly #descriptors: readonly Uint8Array[];
  readonly #source: PartitionSource<T>;
  readonly #options: QueryOptions;
  readonly #concurrency: number;
  readonly #ordered: boolean;
  /** Partitions in flight, by index. */
  readonly #slots = new Map<number, Slot<T>>();
  /** Connections whose partition ended, for the next partition. */
  readonly #idle: PartitionConnection<T>[] = [];
  /** The next partition to start. */
  #next = 0;
  /** The partition whose batch was handed out last: pulled again at the next step. */
  #handed: Slot<T> | undefined;
  /** The first failure. */
  #error: AdbcError | undefined;
  /** The error was thrown to the consumer (it is thrown once). */
  #thrown = false;
  /** Released: by the end, a failure, `return()`, `release()` or `cancel()`. */
  #closed = false;
  /** The release, once begun (every call awaits the same one). */
  #closing: Promise<void> | undefined;
  /** Wakes a consumer waiting for a batch, an end or a failure. */
  #wake: (() => void) | undefined;
  #schema: T['schema'] | undefined;
  #batches = 0;
  #queue: Promise<unknown> = Promise.resolve();
  /** `options.signal`: an abort cancels every partition, releases everything, and rejects the step with its reason. */
  readonly #signal: AbortSignal | undefined;
  #onAbort: (() => void) | undefined;
  /** Partitions with a batch ready, in the order the batches arrived. */
  readonly #arrived: Slot<T>[] = [];

  /** @internal Use `AdbcConnection.readPartitions`. */
  constructor(descriptors: readonly Uint8Array[], source: PartitionSource<T>, options: ReadPartitionsOptions = {}) {
    const { concurrency = 4, ordered = false, signal, ...rest } = options;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new AdbcError('readPartitions', { status: AdbcStatus.INVALID_ARGUMENT, message: `readPartitions: options.concurrency must be an integer from 1, got ${String(concurrency)}` });
    }
    this.#descriptors = [...descriptors];
    this.#source = source;
    this.#options = rest;
    this.#concurrency = concurrency;
    this.#ordered = ordered;
    this.#signal = signal;
    if (signal !== undefined) {
      // Held weakly: a long-lived signal must not keep a dropped reader from the collector.
      const ref = new WeakRef(this);
      this.#onAbort = () => void ref.deref()?.cancel();
      signal.addEventListener('abort', this.#onAbort, { once: true });
    }
  }

  /**
   * @internal Starts the first partitions and returns: it does not wait for them to open, as a server
   * may answer a partition only when its first rows exist, and the caller needs the reader to cancel.
   */
  start(): this {
    this.#fill();
    return this;
  }

  /** The result's schema: that of the first partition whose stream opened (undefined before, and with no partitions). */
  get schema(): T['schema'] | undefined {
    return this.#schema;
  }

  /** How many partitions are being read now: never more than `concurrency`. */
  get inFlight(): number {
    return this.#slots.size;
  }

  /** How many batches have been handed out. */
  get batchesRead(): number {
    return this.#batches;
  }

  /** Whether every stream and connection has been released (the end, a failure, `break`, `release()`, `cancel()`). */
  get released(): boolean {
    return this.#closed && this.#slots.size === 0 && this.#idle.length === 0;
  }

  /** Starts partitions until `concurrency` are in flight or none is left. */
  #fill(): void {
    while (!this.#closed && this.#error === undefined && this.#slots.size < this.#concurrency && this.#next < this.#descriptors.length) {
      const partition = this.#next++;
      const slot: Slot<T> = { partition, conn: undefined, reader: undefined, it: undefined, busy: Promise.resolve(), ready: undefined };
      this.#slots.set(partition, slot);
      slot.busy = this.#start(slot);
    }
  }

  /** Opens the partition's stream (a connection, then `AdbcConnectionReadPartition`), then reads its first batch. */
  async #start(slot: Slot<T>): Promise<void> {
    try {
      slot.conn = this.#idle.pop() ?? (await this.#source.connect());
      if (this.#closed || this.#error) return; // released meanwhile: #releaseAll closes what the slot holds
      slot.reader = await slot.conn.readPartition(this.#descriptors[slot.partition]!, this.#options);
      this.#schema ??= slot.reader.schema;
      if (this.#closed || this.#error) return;
      slot.it = slot.reader[Symbol.asyncIterator]();
      await this.#read(slot);
    } catch (e) {
      this.#fail(e, slot);
    }
  }

  /** Reads the partition's next batch (a `get_next` on a worker thread); the batch handed out before goes back first, unless kept. */
  async #read(slot: Slot<T>): Promise<void> {
    const r = await slot.it!.next();
    if (this.#closed || this.#error) return;
    if (r.done) {
      this.#finish(slot);
    } else {
      slot.ready = r.value;
      if (!this.#ordered) this.#arrived.push(slot);
    }
    this.#wake?.();
  }

  #pull(slot: Slot<T>): void {
    slot.busy = this.#read(slot).catch((e: unknown) => this.#fail(e, slot));
  }

  /** A partition read to its end: its connection serves the next one. */
  #finish(slot: Slot<T>): void {
    this.#slots.delete(slot.partition);
    if (slot.conn) this.#idle.push(slot.conn);
    this.#fill();
  }

  #fail(e: unknown, slot: Slot<T>): void {
    if (this.#error || this.#closed) return; // the first failure is the one to report; the cancelled ones follow from it
    this.#error = partitionError(e, slot.partition, this.#descriptors.length);
    // Every other partition told to stop now, so that a call waiting on the network returns.
    for (const s of this.#slots.values()) if (s !== slot) this.#stop(s);
    this.#wake?.();
  }

  /**
   * Asks the driver to stop the partition's running call (`AdbcConnectionCancel`, thread-safe in
   * ADBC): its stream's `get_next`, or `AdbcConnectionReadPartition` itself while the stream is
   * not open yet (a server may wait for the first rows before it answers).
   */
  #stop(slot: Slot<T>): void {
    if (slot.reader) slot.reader.cancel();
    else slot.conn?.cancel();
  }

  /** The item to hand out now, if one is ready (in order: only the lowest partition in flight's). */
  #take(): Slot<T> | undefined {
    if (this.#ordered) {
      let first: Slot<T> | undefined;
      for (const s of this.#slots.values()) if (!first || s.partition < first.partition) first = s;
      return first?.ready ? first : undefined;
    }
    for (let s = this.#arrived.shift(); s; s = this.#arrived.shift()) if (s.ready) return s;
    return undefined;
  }

  /**
   * The next batch and its partition. The batch handed out before is
   * released first unless kept. Rejects with the first failure (once, after
   * everything was released); resolves `done` at the end.
   */
  next(): Promise<IteratorResult<PartitionBatch<T>, undefined>> {
    // One step at a time (a caller that does not await each next() still gets them in turn).
    const p = this.#queue.then(() => this.#step());
    this.#queue = p.then(
      () => undefined,
      () => undefined,
    );
    return p;
  }

  /** Releases everything, then throws the failure if there is one not thrown yet; else the end. */
  async #end(): Promise<IteratorResult<PartitionBatch<T>, undefined>> {
    await this.#release();
    if (this.#error && !this.#thrown) {
      this.#thrown = true;
      throw this.#error;
    }
    return { done: true, value: undefined };
  }

  async #step(): Promise<IteratorResult<PartitionBatch<T>, undefined>> {
    const handed = this.#handed;
    this.#handed = undefined;
    if (handed && !this.#closed && !this.#error) this.#pull(handed);
    for (;;) {
      // Aborted: the reason at once; the release (begun by the abort) goes on without the caller.
      if (this.#signal?.aborted) throw reasonOf(this.#signal);
      if (this.#error || this.#closed) return this.#end();
      const slot = this.#take();
      if (slot) {
        const batch = slot.ready!;
        slot.ready = undefined;
        this.#handed = slot;
        this.#batches++;
        return { done: false, value: { partition: slot.partition, batch } };
      }
      if (this.#slots.size === 0 && this.#next >= this.#descriptors.length) return this.#end();
      await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#wake = undefined;
    }
  }

  /** Leaves the iteration (`break`): cancels the partitions in flight and releases everything. */
  async return(): Promise<IteratorResult<PartitionBatch<T>, undefined>> {
    await this.cancel();
    return { done: true, value: undefined };
  }

  /** As `return()`. */
  async throw(): Promise<IteratorResult<PartitionBatch<T>, undefined>> {
    return this.return();
  }

  /** The reader is its own async iterator: `for await (const { partition, batch } of reader)`. */
  [Symbol.asyncIterator](): this {
    return this;
  }

  /**
   * Keeps `batch` (the one handed out last) alive past the next step: it is
   * the caller's from now on (`batch.release()`, or the garbage collector).
   */
  keep<U extends T['batch']>(batch: U): U {
    const reader = this.#handed?.reader;
    return reader ? (reader as unknown as { keep(b: U): U }).keep(batch) : batch;
  }

  /**
   * Stops: asks the driver to cancel every partition in flight
   * (`AdbcConnectionCancel`, where it has it), waits for the calls running
   * on worker threads to return, and releases every stream and connection.
   * Idempotent.
   */
  async cancel(): Promise<void> {
    if (!this.#closed) for (const s of this.#slots.values()) this.#stop(s);
    await this.#release();
  }

  /** Releases every stream and connection (after the calls running on worker threads return), without cancelling. Idempotent. */
  async release(): Promise<void> {
    await this.#release();
  }

  #release(): Promise<void> {
    return (this.#closing ??= this.#releaseAll());
  }

  async #releaseAll(): Promise<void> {
    this.#closed = true;
    if (this.#onAbort) this.#signal!.removeEventListener('abort', this.#onAbort);
    this.#onAbort = undefined;
    this.#handed = undefined;
    this.#wake?.();
    // A stream is released only after its running get_next returns (the stream import waits), and a
    // connection after its stream: wait for every call on a worker thread, then close.
    const slots = [...this.#slots.values()];
    this.#arrived.length = 0;
    await Promise.all(slots.map((s) => s.busy.catch(() => undefined)));
    const errors: unknown[] = [];
    for (const s of slots) {
      try {
        s.reader?.release();
      } catch (e) {
        errors.push(e);
      }
    }
    this.#slots.clear();
    // Connections whose partitions ended cleanly serve the next read; one that was cancelled or failed,
    // or had a stream released in mid-read, is closed: its state after a cancel is the driver's business.
    for (const c of this.#idle.splice(0)) this.#source.recycle(c);
    for (const c of slots.map((s) => s.conn)) {
      if (!c) continue;
      try {
        await c.close();
      } catch (e) {
        errors.push(e);
      }
    }
    // A release that fails with no failure to report is reported; after a failure, the failure is.
    if (errors.length > 0 && !this.#error) {
      const e = errors[0];
      this.#error = e instanceof AdbcError ? e : new AdbcError('readPartitions', { status: AdbcStatus.INTERNAL, message: `readPartitions: a release failed: ${String(e)}` }, { cause: e });
    }
  }

  /** `release()`: what the end of an `await using` scope calls. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.#release();
  }
}
