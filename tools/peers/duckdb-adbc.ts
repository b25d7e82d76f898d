/**
 * DuckDB's ADBC driver (`duckdb_adbc_init` in libduckdb.so) driven by the raw
 * ADBC calls of src/adbc/driver.ts, for the conformance runner's `--peer
 * duckdb --via stream`: DuckDB ingests an `ArrowArrayStream` of ours
 * (`adbc.ingest.*` options, `AdbcStatementBindStream`, then
 * `AdbcStatementExecuteQuery` on a worker thread, because DuckDB calls the
 * stream's `get_next` from its own threads and koffi runs those calls on
 * the JS thread) and hands out its query results as its own
 * `ArrowArrayStream`.
 *
 * Raw calls rather than arrow-device/adbc's `AdbcConnection`: the peer-first
 * direction needs the pointer of DuckDB's result stream itself (we import it
 * as any consumer would), and the module's reader never hands its stream on
 * (ADBC requires the stream to go before its statement, which only the
 * module's own release order guarantees). Both directions must reach one
 * database (DuckDB compares its copy with ours in SQL), so ingestion goes
 * through the same raw connection; it makes the calls the module's
 * `ingest` makes (`AdbcStatementBindStream` of an exported stream).
 *
 * Leaks. Once DuckDB's ingesting statement is released, DuckDB has no
 * reason to hold anything of ours: every struct it took (the stream, each
 * schema from `get_schema`, each array from `get_next`) must have been
 * released by it. Each ingestion counts our live exports before the
 * hand-over and after that release; what is still live then is held by
 * DuckDB (`heldExports`): its leak, told apart from ours in the runner's
 * accounting. (That this count is DuckDB's rests on our release callbacks
 * counting down whenever a consumer releases, which the self and arrow-cpp
 * peers prove at zero on the same route.) DuckDB's one known leak on
 * Arrow streams, a root schema per statement over `duckdb_arrow_scan`
 * (test/stream/duckdb.test.ts), is not on this route: DuckDB 1.5.6's ADBC
 * ingestion releases every schema it reads.
 */
import { accounting, allocArrowArrayStream, freeArrowArrayStream, importArrayStream, NULL, type Ptr } from '../../src/index.js';
import { allocHandle, Driver, freeNative, loadLibrary } from '../../src/adbc/driver.js';
import { collectUntil } from '../../test/helpers/gc.js';

export class DuckDBAdbc {
  readonly #driver: Driver;
  readonly #db: Ptr;
  readonly #conn: Ptr;
  /** ADBC connections are not thread-safe: one call at a time. */
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;
  #held = 0;

  private constructor(driver: Driver, db: Ptr, conn: Ptr) {
    this.#driver = driver;
    this.#db = db;
    this.#conn = conn;
  }

  /** An in-memory database of DuckDB's ADBC driver in `library`, and one connection to it. */
  static async open(library: string, options: Record<string, string> = {}): Promise<DuckDBAdbc> {
    const d = Driver.init(loadLibrary(library), 'duckdb_adbc_init', `${library}, duckdb_adbc_init`);
    const db = allocHandle();
    const conn = allocHandle();
    let made = 0;
    try {
      d.call('DatabaseNew', db);
      made = 1;
      for (const [k, v] of Object.entries({ path: ':memory:', ...options })) d.call('DatabaseSetOption', db, k, v);
      await d.callAsync('DatabaseInit', db); // starts DuckDB's thread pool
      d.call('ConnectionNew', conn);
      made = 2;
      await d.callAsync('ConnectionInit', conn, db);
      return new DuckDBAdbc(d, db, conn);
    } catch (e) {
      if (made >= 2) d.call('ConnectionRelease', conn);
      if (made >= 1) d.call('DatabaseRelease', db);
      freeNative(conn);
      freeNative(db);
      d.release();
      throw e;
    }
  }

  #exclusive<T>(f: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error('the DuckDB ADBC peer is closed'));
    const next = this.#queue.then(f, f);
    // The queue keeps no result alive (a result holding imports would count as a leak until the next call).
    this.#queue = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /** A new statement, `f` run with it, the statement released after (whatever `f` did). */
  async #withStatement<T>(f: (stmt: Ptr) => Promise<T>): Promise<T> {
    const d = this.#driver;
    const stmt = allocHandle();
    try {
      d.call('StatementNew', this.#conn, stmt);
    } catch (e) {
      freeNative(stmt);
      throw e;
    }
    try {
      return await f(stmt);
    } finally {
      try {
        d.call('StatementRelease', stmt);
      } finally {
        freeNative(stmt);
      }
    }
  }

  /**
   * Creates table `table` from the `ArrowArrayStream` at `stream` (ADBC bulk
   * ingestion, mode create). The driver takes the stream by `BindStream`
   * (a move: our struct is released-marked then) and releases it; the
   * struct's memory is freed here in every case.
   */
  ingest(table: string, stream: Ptr): Promise<void> {
    return this.#exclusive(async () => {
      // The stream we hand over is one of our live exports: with nothing held, one fewer after.
      const before = accounting().liveExports;
      try {
        await this.#withStatement(async (stmt) => {
          const d = this.#driver;
          try {
            d.call('StatementSetOption', stmt, 'adbc.ingest.target_table', table);
            d.call('StatementSetOption', stmt, 'adbc.ingest.mode', 'adbc.ingest.mode.create');
            d.call('StatementBindStream', stmt, stream);
          } finally {
            // Moved out by the driver: this frees our struct only; not moved (a failure above): released too.
            freeArrowArrayStream(stream);
          }
          await d.callAsync('StatementExecuteQuery', stmt, NULL, NULL);
        });
      } finally {
        // A release DuckDB's threads make may reach the JS thread just after: give it a moment.
        await collectUntil(() => accounting().liveExports <= before - 1, 10);
        this.#held += Math.max(0, accounting().liveExports - (before - 1));
      }
    });
  }

  /** Structs of ours DuckDB took in an ingestion and had not released once its statement was (see the file comment). */
  get heldExports(): number {
    return this.#held;
  }

  /**
   * Runs `sql` and hands DuckDB's result stream to `read`, which consumes it
   * (imports it, or leaves it). The stream is released (if `read` did not)
   * and its struct freed before the statement is released, as ADBC requires.
   */
  query<T>(sql: string, read: (stream: Ptr) => Promise<T> | T): Promise<T> {
    return this.#exclusive(() =>
      this.#withStatement(async (stmt) => {
        const d = this.#driver;
        d.call('StatementSetSqlQuery', stmt, sql);
        const stream = allocArrowArrayStream();
        try {
          await d.callAsync('StatementExecuteQuery', stmt, stream, NULL);
          return await read(stream);
        } finally {
          freeArrowArrayStream(stream);
        }
      }),
    );
  }

  /** Rows of `sql`, every value cast to text by DuckDB (`COLUMNS(*)::VARCHAR`), null for SQL NULL. */
  queryText(sql: string): Promise<(string | null)[][]> {
    return this.query(`SELECT COLUMNS(*)::VARCHAR FROM (${sql})`, (stream) => {
      const reader = importArrayStream(stream);
      const rows: (string | null)[][] = [];
      for (const batch of reader) {
        for (let r = 0; r < batch.numRows; r++) {
          rows.push(batch.schema.fields.map((_, c) => (batch.getChildAt(c)?.get(r) as string | null | undefined) ?? null));
        }
      }
      return rows;
    });
  }

  /** Releases the connection, the database and the driver (after every call queued). */
  async close(): Promise<void> {
    if (this.#closed) return;
    await this.#queue;
    this.#closed = true;
    const d = this.#driver;
    try {
      d.call('ConnectionRelease', this.#conn);
      d.call('DatabaseRelease', this.#db);
    } finally {
      freeNative(this.#conn);
      freeNative(this.#db);
      d.release();
    }
  }
}
