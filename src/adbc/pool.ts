/**
 * `AdbcPool`: connections of one database, opened on demand up to `max`,
 * handed out in the order they were asked for and reused.
 *
 * What must hold, and where:
 * - At most `max` connections exist, counting those being opened (`#dispatch`).
 * - Waiters are served first come, first served: a connection given back goes
 *   to the oldest waiter, never to a later `connect()` (every request queues
 *   behind the waiters, `connect`).
 * - A connection is handed out only when nothing of its last lease is still
 *   open: a reader of a `queryStream` keeps it out of the pool until the reader
 *   is released (the connection counts its open results), so two leases never
 *   share a result in flight.
 * - A connection whose call failed with an error that says the connection is
 *   gone (`isConnectionFault`: a server restarted, a socket closed) is closed
 *   when it comes back, never handed out again; a waiter then gets a new one.
 * - `close()` refuses new requests and the waiters, closes the idle
 *   connections, waits for those in use to come back, closes them, and
 *   resolves when none is left.
 */
import { checkSignal, reasonOf } from './abort.js';
import { connectionInternals, type AdbcConnection, type AnyConnection } from './connection.js';
import { AdbcError, AdbcStatus } from './error.js';
import type { ArrowAdbc } from './arrowjs.js';
import type { QueryOptions, SignalOption } from './statement.js';
import type { AdbcTypes, AsyncBatchSource, BindSource } from './target.js';
import type { IngestOptions } from './types.js';

/** Options of `AdbcDatabase.pool()`. */
export interface PoolOptions {
  /** The most connections open at once (an integer from 1). Default 10. */
  max?: number;
  /** How long a connection may sit idle before it is closed, in milliseconds; 0 keeps it. Default 10,000. */
  idleTimeoutMillis?: number;
  /**
   * How long `connect()` waits for a connection before it rejects with an `AdbcError` of status
   * TIMEOUT, in milliseconds; 0 waits as long as it takes. Default 0.
   */
  acquireTimeoutMillis?: number;
}

/** One `connect()` waiting for a connection. */
interface Waiter {
  resolve(c: AnyConnection): void;
  reject(e: unknown): void;
  /** Undoes the waiter's timer and abort listener. */
  done(): void;
}

type Timer = ReturnType<typeof setTimeout>;

/** A timer that does not keep the process alive (Node and Bun: `unref`; elsewhere the timer as it is). */
function unrefTimer(t: Timer): Timer {
  (t as { unref?: () => void }).unref?.();
  return t;
}

function nonNegative(op: string, name: string, v: number | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !(v >= 0) || !Number.isFinite(v)) {
    throw new AdbcError(op, { status: AdbcStatus.INVALID_ARGUMENT, message: `${op}: options.${name} must be a finite number from 0, got ${String(v)}` });
  }
  return v;
}

/**
 * A pool of connections of one database (`db.pool(options)`): what a service
 * runs its many small queries through. `query`, `queryStream`, `execute` and
 * `ingest` take a connection for the call and give it back; `connect()` hands
 * one out for several calls (a transaction), given back by `release()`,
 * `close()` or `await using`. Every call takes `{ signal }`: an abort while it
 * waits for a connection, or while the query runs, rejects it at once with the
 * signal's reason.
 *
 * @example
 * await using pool = db.pool({ max: 16 });
 * const table = await pool.query('SELECT 42 AS answer');
 * await using conn = await pool.connect(); // given back at the end of the scope
 * await conn.execute('UPDATE counters SET n = n + 1');
 */
export class AdbcPool<T extends AdbcTypes = ArrowAdbc> implements AsyncDisposable {
  readonly #open: (onClose: (c: AdbcConnection<T>) => void) => Promise<AdbcConnection<T>>;
  readonly #max: number;
  readonly #idleTimeout: number;
  readonly #acquireTimeout: number;
  /** Every connection of the pool that is open (idle, leased or draining). */
  readonly #all = new Set<AdbcConnection<T>>();
  /** Idle connections, the most recently used last (taken from the end: the warm ones are reused, the cold ones time out). */
  readonly #idle: AdbcConnection<T>[] = [];
  readonly #idleTimers = new Map<AdbcConnection<T>, Timer>();
  readonly #leased = new Set<AdbcConnection<T>>();
  /** Given back with a reader (or a call) still open: reusable once it is released. */
  readonly #draining = new Set<AdbcConnection<T>>();
  readonly #waiters: Waiter[] = [];
  #opening = 0;
  /** Connections being released (`AdbcConnectionRelease` on a worker thread): `close()` waits for them. */
  #releasing = 0;
  #closing = false;
  #closed: Promise<void> | undefined;
  #resolveClosed: (() => void) | undefined;
  readonly #giveBack = (c: AdbcConnection<T>): void => this.#return(c);

  /** @internal Use `AdbcDatabase.pool()`. */
  constructor(open: (onClose: (c: AdbcConnection<T>) => void) => Promise<AdbcConnection<T>>, options: PoolOptions = {}) {
    const max = options.max ?? 10;
    if (!Number.isInteger(max) || max < 1) {
      throw new AdbcError('pool', { status: AdbcStatus.INVALID_ARGUMENT, message: `pool: options.max must be an integer from 1, got ${String(max)}` });
    }
    this.#open = open;
    this.#max = max;
    this.#idleTimeout = nonNegative('pool', 'idleTimeoutMillis', options.idleTimeoutMillis, 10_000);
    this.#acquireTimeout = nonNegative('pool', 'acquireTimeoutMillis', options.acquireTimeoutMillis, 0);
  }

  /** Connections open now, and being opened (at most `max`). */
  get totalCount(): number {
    return this.#all.size + this.#opening;
  }

  /** Connections waiting in the pool to be handed out. */
  get idleCount(): number {
    return this.#idle.length;
  }

  /** Connections handed out, and given back with a reader still open. */
  get inUseCount(): number {
    return this.#leased.size + this.#draining.size;
  }

  /** `connect()` calls waiting for a connection. */
  get waitingCount(): number {
    return this.#waiters.length;
  }

  /**
   * A connection of the pool for several calls: an idle one, a new one while fewer than `max` are
   * open, else the first to come back (waiters in order). Give it back with `release()`, `close()` or
   * `await using`. Rejects with the signal's reason on an abort, with an `AdbcError` of status TIMEOUT
   * after `acquireTimeoutMillis`, and with INVALID_STATE once the pool is closing.
   *
   * @example
   * const conn = await pool.connect({ signal: AbortSignal.timeout(1000) });
   * try {
   *   conn.setAutoCommit(false);
   *   await conn.execute("INSERT INTO log VALUES ('a')");
   *   await conn.commit();
   * } finally {
   *   conn.release();
   * }
   */
  connect(options: SignalOption = {}): Promise<AdbcConnection<T>> {
    const { signal } = options;
    try {
      checkSignal('connect', signal);
      this.#check('connect');
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<AdbcConnection<T>>((resolve, reject) => {
      let timer: Timer | undefined;
      let onAbort: (() => void) | undefined;
      const waiter: Waiter = {
        resolve,
        reject,
        done: () => {
          if (timer !== undefined) clearTimeout(timer);
          if (onAbort !== undefined) signal!.removeEventListener('abort', onAbort);
        },
      };
      const leave = (e: unknown): void => {
        const i = this.#waiters.indexOf(waiter);
        if (i < 0) return; // served already
        this.#waiters.splice(i, 1);
        waiter.done();
        reject(e);
      };
      if (this.#acquireTimeout > 0) {
        // Not unref'd: a caller awaits it (an idle connection's timer is, below: nobody waits on that one).
        timer = setTimeout(() => leave(new AdbcError('connect', {
          status: AdbcStatus.TIMEOUT,
          message: `connect: no connection of the pool within ${this.#acquireTimeout} ms (${this.inUseCount} in use of at most ${this.#max}, ${this.#waiters.length} waiting)`,
        })), this.#acquireTimeout);
      }
      if (signal !== undefined) {
        onAbort = () => leave(reasonOf(signal));
        signal.addEventListener('abort', onAbort, { once: true });
      }
      this.#waiters.push(waiter);
      this.#dispatch();
    });
  }

  /**
   * `conn.query` on a connection of the pool, given back after it (also on a failure or an abort).
   *
   * @example
   * const t = await pool.query('SELECT * FROM people WHERE id = $1', tableFromArrays({ id: Int32Array.of(1) }));
   */
  async query(sql: string, params?: BindSource<T> | AsyncBatchSource<T>, options: QueryOptions = {}): Promise<T['table']> {
    return this.#with(options.signal, (c) => c.query(sql, params, options));
  }

  /**
   * `conn.queryStream` on a connection of the pool: the connection comes back to the pool when the
   * reader is released (at its end, on `break`, `release()`, `cancel()`, an abort, or by the collector).
   *
   * @example
   * for await (const batch of await pool.queryStream('SELECT * FROM events')) console.log(batch.numRows);
   */
  async queryStream(sql: string, params?: BindSource<T> | AsyncBatchSource<T>, options: QueryOptions = {}): Promise<T['reader']> {
    return this.#with(options.signal, (c) => c.queryStream(sql, params, options));
  }

  /**
   * `conn.execute` on a connection of the pool: the rows affected (-1: unknown).
   *
   * @example
   * await pool.execute("DELETE FROM sessions WHERE expires < now()");
   */
  async execute(sql: string, params?: BindSource<T> | AsyncBatchSource<T>, options: SignalOption = {}): Promise<number> {
    return this.#with(options.signal, (c) => c.execute(sql, params, options));
  }

  /**
   * `conn.ingest` on a connection of the pool: the rows ingested (-1: unknown).
   *
   * @example
   * await pool.ingest('events', table, { mode: IngestMode.Append });
   */
  async ingest(tableName: string, data: BindSource<T> | AsyncBatchSource<T>, options: IngestOptions = {}): Promise<number> {
    return this.#with(options.signal, (c) => c.ingest(tableName, data, options));
  }

  /**
   * Closes the pool: new requests and the waiters are refused (INVALID_STATE), idle connections are
   * closed, and those in use are closed as they come back; resolves when none is left. Idempotent.
   *
   * @example
   * await pool.close();
   */
  close(): Promise<void> {
    if (this.#closed) return this.#closed;
    this.#closing = true;
    this.#closed = new Promise<void>((resolve) => (this.#resolveClosed = resolve));
    const refused = new AdbcError('connect', { status: AdbcStatus.INVALID_STATE, message: 'connect: the pool is closed' });
    for (const w of this.#waiters.splice(0)) {
      w.done();
      w.reject(refused);
    }
    for (const c of this.#idle.splice(0)) this.#destroy(c);
    this.#settleClose();
    return this.#closed;
  }

  /** `close()`: what the end of an `await using` scope calls. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #check(op: string): void {
    if (this.#closing) throw new AdbcError(op, { status: AdbcStatus.INVALID_STATE, message: `${op}: the pool is closed` });
  }

  /** Runs `f` on a connection of the pool and gives it back, whatever `f` does. */
  async #with<R>(signal: AbortSignal | undefined, f: (c: AdbcConnection<T>) => Promise<R>): Promise<R> {
    const c = await this.connect({ signal });
    try {
      return await f(c);
    } finally {
      this.#return(c);
    }
  }

  /** Serves the waiters in order: idle connections first, then new ones while fewer than `max` exist. */
  #dispatch(): void {
    while (this.#waiters.length > 0 && this.#idle.length > 0) this.#hand(this.#idle.pop()!, this.#waiters.shift()!);
    // One connection opening per waiter not served, within max.
    while (!this.#closing && this.#opening < this.#waiters.length && this.totalCount < this.#max) {
      this.#opening++;
      this.#open(this.#giveBack).then(
        (c) => {
          this.#opening--;
          this.#all.add(c);
          if (this.#closing) this.#destroy(c);
          else this.#idleOrHand(c);
        },
        (e: unknown) => {
          this.#opening--;
          // The oldest waiter gets the failure (a connection refused, an authentication failure): a
          // request never waits on a database that cannot be reached. The others are retried.
          const w = this.#waiters.shift();
          if (w !== undefined) {
            w.done();
            w.reject(e);
          }
          this.#dispatch();
          this.#settleClose();
        },
      );
    }
  }

  #hand(c: AdbcConnection<T>, w: Waiter): void {
    const t = this.#idleTimers.get(c);
    if (t !== undefined) {
      clearTimeout(t);
      this.#idleTimers.delete(c);
    }
    w.done();
    connectionInternals().park(c, false);
    this.#leased.add(c);
    w.resolve(c);
  }

  /** A connection free for the next lease: to the oldest waiter, else idle (closed after the idle timeout). */
  #idleOrHand(c: AdbcConnection<T>): void {
    const w = this.#waiters.shift();
    if (w !== undefined) {
      this.#hand(c, w);
      return;
    }
    connectionInternals().park(c, true);
    this.#idle.push(c);
    if (this.#idleTimeout > 0) {
      this.#idleTimers.set(c, unrefTimer(setTimeout(() => {
        this.#idleTimers.delete(c);
        const i = this.#idle.indexOf(c);
        if (i >= 0) {
          this.#idle.splice(i, 1);
          this.#destroy(c);
        }
      }, this.#idleTimeout)));
    }
  }

  /** A lease ends (`release()`, `close()`, `await using` of a pooled connection, or the end of a pool call). */
  #return(c: AdbcConnection<T>): void {
    if (!this.#leased.delete(c)) return; // given back already
    const ci = connectionInternals();
    ci.park(c, true);
    this.#draining.add(c);
    ci.whenFree(c, () => {
      this.#draining.delete(c);
      if (this.#closing || ci.fault(c) !== undefined) this.#destroy(c);
      else this.#idleOrHand(c);
      this.#dispatch();
    });
  }

  /** Closes a connection for good (it leaves the pool); a waiter may get a new one in its place. */
  #destroy(c: AdbcConnection<T>): void {
    this.#all.delete(c);
    const t = this.#idleTimers.get(c);
    if (t !== undefined) {
      clearTimeout(t);
      this.#idleTimers.delete(c);
    }
    // The release on a worker thread (close()): the pool's close resolves once every release has returned.
    this.#releasing++;
    connectionInternals().closeNow(c).catch(() => {
      // A release that fails has no caller to tell: the connection is gone from the pool either way.
    }).finally(() => {
      this.#releasing--;
      this.#settleClose();
    });
  }

  #settleClose(): void {
    if (this.#closing && this.#all.size === 0 && this.#opening === 0 && this.#releasing === 0) this.#resolveClosed?.();
  }
}
