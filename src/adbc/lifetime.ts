/**
 * The order of releases ADBC requires, enforced: a result stream is released
 * before its statement, statements before their connection, connections
 * before their database, the database before its driver (adbc.h; releasing
 * a statement whose stream is live crashes real drivers). Each ADBC object
 * is a `Lifetime` node that counts the nodes under it and the native calls
 * running on it; `close()` asks for the release, which happens when nothing
 * is left under it and no call runs, then tells its parent. So closing in
 * any order is safe: a statement closed while its reader is open is
 * released when the reader is; the garbage collector (a FinalizationRegistry
 * of each public object) closes through the same path.
 *
 * `Serial` keeps the native calls of one connection (its statements' and
 * readers' too) one at a time: ADBC connections are not thread-safe, and an
 * async call runs on a worker thread.
 */
import { AdbcError, AdbcStatus } from './error.js';

export class Lifetime {
  #children = 0;
  /** Of `#children`, those whose release has started on a worker thread (closed: nothing of theirs is open). */
  #releasing = 0;
  #busy = 0;
  #closing = false;
  #released = false;
  /** Whether the release was asked for by `closeAsync` (and so runs `releaseAsync` where there is one). */
  #async = false;
  /** The release on a worker thread, once started: settles when it returned (it never rejects). */
  #done: Promise<void> | undefined;
  /** The release `closeAsync` was given: one made at close time (a statement's runs in its connection's order). */
  #releaseOffThread: (() => Promise<void>) | undefined;
  /** `closeAsync` is settling this node now (not a child's release or a call's end, later). */
  #settlingInClose = false;
  /** The release `closeQueued` was given: it queues the release, and says when it has returned. */
  #queuedRelease: ((done: (e?: unknown) => void) => void) | undefined;
  /** Settles after the release and the parent's count (made when a `closeAsync` waits for children's releases). */
  #finished: { promise: Promise<void>; resolve: () => void } | undefined;
  /** The error of a deferred release (it has no caller to throw to). */
  releaseError: unknown;
  /**
   * What the first close asks of the node before its release waits for what is under it (a connection's:
   * the statements it let go that no run took, released then). Called once.
   */
  onClose: (() => void) | undefined;

  constructor(
    /** What it is, for messages: `connection`, `statement`, ... */
    readonly what: string,
    readonly parent: Lifetime | null,
    /**
     * The release. It may return a promise instead: the release was deferred (a statement's, until the
     * call running on its connection returns), and the parent waits for it as for one off the thread.
     */
    readonly release: () => void | Promise<void>,
    /**
     * The same release made off the JS thread, for `closeAsync` (a database's: DuckDB's writes its
     * file there). The parent is released after it returns, not before: the order holds.
     */
    readonly releaseAsync?: () => Promise<void>,
  ) {
    if (parent) {
      if (!parent.open) throw new AdbcError(`new ${what}`, { status: AdbcStatus.INVALID_STATE, message: `the ${parent.what} is closed` });
      parent.#children++;
    }
  }

  /** Not closed (nor released). */
  get open(): boolean {
    return !this.#closing;
  }

  get released(): boolean {
    return this.#released;
  }

  /** Throws INVALID_STATE unless open. */
  check(op: string): void {
    if (this.#closing) throw new AdbcError(op, { status: AdbcStatus.INVALID_STATE, message: `${op}: the ${this.what} is closed` });
  }

  /** Marks a native call running on it; the returned function ends it. */
  enter(): () => void {
    this.#busy++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#busy--;
      this.#settle();
    };
  }

  /**
   * Asks for the release. Returns the release's error when it ran now and
   * failed; later releases keep theirs in `releaseError`.
   */
  close(): unknown {
    this.#beginClosing();
    return this.#settle();
  }

  #beginClosing(): void {
    // Before closing: what it releases now must not settle this node from inside (its error would be lost).
    const f = this.onClose;
    this.onClose = undefined;
    f?.();
    this.#closing = true;
  }

  /**
   * `close()` whose release `queue` hands to someone else to make (a statement its connection let go: the
   * connection's next run releases it), now or, while objects under it keep it, when the last is released;
   * `queue` calls its `done` when the release has returned (with its error, if it failed), and the parent
   * waits till then.
   */
  closeQueued(queue: (done: (e?: unknown) => void) => void): void {
    if (!this.#released) this.#queuedRelease = queue;
    this.#beginClosing();
    this.#settle();
  }

  /**
   * `close()` where the release may run on a worker thread (`releaseAsync`): resolves when it has
   * returned, or at once while objects under it keep it (their last release starts it, as for `close`).
   * Rejects with the release's error.
   */
  async closeAsync(releaseAsync?: () => Promise<void>): Promise<void> {
    this.#beginClosing();
    if (!this.#released) {
      this.#async = true;
      // Given here, not at construction: a closure kept from the start would hold what it captures (a
      // connection's call order, and through it the connection) for as long as the registry holds this.
      if (releaseAsync !== undefined) this.#releaseOffThread = releaseAsync;
    }
    this.#settlingInClose = true;
    let err: unknown;
    try {
      err = this.#settle();
    } finally {
      this.#settlingInClose = false;
    }
    if (err !== undefined) throw err;
    if (!this.#released && this.#busy === 0 && this.#children === this.#releasing) {
      // Nothing under it is open, only releases on worker threads: this one follows them, and the caller
      // waits for it (an `await conn.close()` must not resolve before its statements' releases have run).
      if (this.#finished === undefined) {
        let resolve!: () => void;
        const promise = new Promise<void>((r) => {
          resolve = r;
        });
        this.#finished = { promise, resolve };
      }
      await this.#finished.promise;
      if (this.releaseError !== undefined) throw this.releaseError;
      return;
    }
    if (this.#done !== undefined) {
      await this.#done;
      if (this.releaseError !== undefined) throw this.releaseError;
    }
  }

  #settle(): unknown {
    if (!this.#closing || this.#released || this.#children > 0 || this.#busy > 0) return undefined;
    this.#released = true;
    const queue = this.#queuedRelease;
    if (queue !== undefined) {
      this.#queuedRelease = undefined;
      this.#releaseOffThread = undefined;
      queue(this.#releaseStarted());
      return undefined;
    }
    // A release given at close time runs in the parent's order of calls (a statement's in its connection's
    // Serial), which makes the parent's synchronous calls refuse to run beside it. Started by the close, the
    // caller awaits it; started later (the last reader released, a call ended) while the parent is open,
    // nobody has a promise to await before such a call: that release runs here, on the JS thread, as before.
    const given = this.#releaseOffThread;
    this.#releaseOffThread = undefined;
    const offThread = given !== undefined && (this.#settlingInClose || this.parent === null || !this.parent.open) ? given : this.releaseAsync;
    if (this.#async && offThread !== undefined) {
      let started: Promise<void>;
      try {
        started = offThread();
      } catch {
        // Never under way (no worker thread could be had: ARROW_DEVICE_WORKERS unreadable): nothing runs on
        // it, so it is released here, on the JS thread, rather than not at all.
        started = new Promise<void>((resolve, reject) => {
          try {
            resolve(this.release());
          } catch (e) {
            reject(e);
          }
        });
      }
      this.#awaitRelease(started);
      return undefined;
    }
    let err: unknown;
    let deferred: void | Promise<void> = undefined;
    try {
      deferred = this.release();
    } catch (e) {
      err = this.releaseError = e;
    }
    if (deferred !== undefined) {
      this.#awaitRelease(deferred);
      return undefined;
    }
    this.#afterRelease();
    return err;
  }

  /** A release under way: the parent counts it until it has returned. */
  #awaitRelease(started: Promise<void>): void {
    const done = this.#releaseStarted();
    started.then(
      () => done(),
      (e: unknown) => done(e ?? new Error('the release failed')),
    );
  }

  /** Starts a release made elsewhere: the parent counts it until the returned `done` is called (once). */
  #releaseStarted(): (e?: unknown) => void {
    if (this.parent) this.parent.#releasing++;
    let resolve!: () => void;
    // Never rejects: a release started by a child's has no caller, its error stays in releaseError.
    this.#done = new Promise<void>((r) => {
      resolve = r;
    });
    let called = false;
    return (e?: unknown) => {
      if (called) return;
      called = true;
      if (e !== undefined) this.releaseError = e;
      this.#afterRelease();
      resolve();
    };
  }

  /** After the release: the parent may go. */
  #afterRelease(): void {
    if (this.parent) {
      this.parent.#children--;
      if (this.#done !== undefined) this.parent.#releasing--;
      this.parent.#settle();
    }
    this.#finished?.resolve();
  }
}

/** One native call at a time, in order of request. */
export class Serial {
  #tail: Promise<unknown> = Promise.resolve();
  #running = 0;

  /** `onError`: sees every call's failure (a connection records those that break it, for its pool). */
  constructor(readonly onError?: (e: unknown) => void) {}

  /** Whether a call runs (or waits) now. */
  get busy(): boolean {
    return this.#running > 0;
  }

  /** Runs `f` after every call requested before it. */
  run<T>(f: () => Promise<T> | T): Promise<T> {
    this.#running++;
    const p = this.#tail.then(f).finally(() => {
      this.#running--;
    });
    // The tail keeps no value: a resolved value held here would stay reachable until the next call. Its
    // rejection handler, there anyway, is where `onError` sees the failure (no promise more per call).
    const seen = this.onError;
    this.#tail = p.then(
      () => undefined,
      (e: unknown) => {
        seen?.(e);
      },
    );
    return p;
  }

  /**
   * Runs `f` on the JS thread now when no call of this order waits or runs, else after them (never beside
   * a call on a worker thread: ADBC connections are not thread-safe). Returns the promise of a deferred
   * `f`, undefined when it ran now (and threw, if it threw).
   */
  whenIdle(f: () => void): Promise<void> | undefined {
    if (this.#running > 0) return this.run(f);
    f();
    return undefined;
  }

  /** Throws INVALID_STATE when an async call runs: a synchronous call must not run beside it. */
  checkIdle(op: string, what: string): void {
    if (this.#running > 0) {
      throw new AdbcError(op, {
        status: AdbcStatus.INVALID_STATE,
        message: `${op}: a call on this ${what} is running on a worker thread; await it first (ADBC connections are not thread-safe)`,
      });
    }
  }
}

const closables = new FinalizationRegistry<Lifetime>((life) => life.close());

/**
 * What a database, a connection and a statement share: `close()` (and
 * `using` / `await using`) asks their `Lifetime` for the release, and the
 * garbage collector does when one is dropped open.
 */
export class Closable {
  readonly #life: Lifetime;

  constructor(life: Lifetime) {
    this.#life = life;
    closables.register(this, life, this);
  }

  /** Whether the ADBC object has been released (after everything under it). */
  get released(): boolean {
    return this.#life.released;
  }

  /**
   * Releases the ADBC object, or, while objects under it are open (a
   * statement's reader, a connection's statements, a database's
   * connections), once they are released. Idempotent.
   *
   * @example
   * await conn.close();
   */
  async close(): Promise<void> {
    this.closeSync();
  }

  /**
   * `close()`, synchronously (what `using` calls).
   *
   * @example
   * stmt.closeSync();
   */
  closeSync(): void {
    closables.unregister(this);
    const err = this.#life.close();
    if (err !== undefined) throw err;
  }

  /**
   * `close()` through `Lifetime.closeAsync`: for an object whose release runs on a worker thread (a
   * database's, a connection's; a statement's, in its connection's order, is `releaseAsync`).
   */
  protected async closeOffThread(releaseAsync?: () => Promise<void>): Promise<void> {
    closables.unregister(this);
    await this.#life.closeAsync(releaseAsync);
  }

  /** `close()` through `Lifetime.closeQueued`: the release made by someone else, now or later. */
  protected closeQueued(queue: (done: (e?: unknown) => void) => void): void {
    closables.unregister(this);
    this.#life.closeQueued(queue);
  }

  /** `closeSync()`: what the end of a `using` scope calls. */
  [Symbol.dispose](): void {
    this.closeSync();
  }

  /** `close()`: what the end of an `await using` scope calls. */
  async [Symbol.asyncDispose](): Promise<void> {
    this.closeSync();
  }
}
