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
  #busy = 0;
  #closing = false;
  #released = false;
  /** Whether the release was asked for by `closeAsync` (and so runs `releaseAsync` where there is one). */
  #async = false;
  /** The release on a worker thread, once started: settles when it returned (it never rejects). */
  #done: Promise<void> | undefined;
  /** The error of a deferred release (it has no caller to throw to). */
  releaseError: unknown;

  constructor(
    /** What it is, for messages: `connection`, `statement`, ... */
    readonly what: string,
    readonly parent: Lifetime | null,
    readonly release: () => void,
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
    this.#closing = true;
    return this.#settle();
  }

  /**
   * `close()` where the release may run on a worker thread (`releaseAsync`): resolves when it has
   * returned, or at once while objects under it keep it (their last release starts it, as for `close`).
   * Rejects with the release's error.
   */
  async closeAsync(): Promise<void> {
    this.#closing = true;
    if (!this.#released) this.#async = true;
    const err = this.#settle();
    if (err !== undefined) throw err;
    if (this.#done !== undefined) {
      await this.#done;
      if (this.releaseError !== undefined) throw this.releaseError;
    }
  }

  #settle(): unknown {
    if (!this.#closing || this.#released || this.#children > 0 || this.#busy > 0) return undefined;
    this.#released = true;
    if (this.#async && this.releaseAsync !== undefined) {
      // Never rejects: a release started by a child's has no caller, its error stays in releaseError.
      this.#done = this.releaseAsync().then(
        () => this.#afterRelease(),
        (e: unknown) => {
          this.releaseError = e;
          this.#afterRelease();
        },
      );
      return undefined;
    }
    let err: unknown;
    try {
      this.release();
    } catch (e) {
      err = this.releaseError = e;
    }
    this.#afterRelease();
    return err;
  }

  /** After the release: the parent may go. */
  #afterRelease(): void {
    if (this.parent) {
      this.parent.#children--;
      this.parent.#settle();
    }
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

  /** `close()` through `Lifetime.closeAsync`: for an object whose release runs on a worker thread (the database's). */
  protected async closeOffThread(): Promise<void> {
    closables.unregister(this);
    await this.#life.closeAsync();
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
