/**
 * `AdbcConnection`: one ADBC connection, with the official driver manager's
 * conveniences (query, queryStream, execute, ingest, ingestStream, metadata,
 * transactions). Every call that may block (execution, `get_next`,
 * metadata, commit) runs on a worker thread, one at a time per connection.
 */
// The internal modules of the public names used, not ../index.js: a query loads no device, async or protocol code.
import { importArrayStreamFrom, importSchemaNodeFrom } from '../fill/fill.js';
import { NULL, type Ptr } from '../memory/memory.js';
import { allocNative, bytesIn, freeNative, handleReleases, u32Array, type Driver } from './driver.js';
import { AdbcError, AdbcStatus } from './error.js';
import { Closable, Lifetime, Serial } from './lifetime.js';
import * as options from './options.js';
import type { QueryDefaults } from './types.js';
import { AdbcPartitionReader, type ReadPartitionsOptions } from './partitions.js';
import { AdbcResultReader } from './result.js';
import { AdbcStatement, type ConnectionCore, type PartitionedResult, type QueryOptions, type SignalOption } from './statement.js';
import { LetGo, queryRun } from './run.js';
import type { AdbcTarget, AdbcTypes, AsyncBatchSource, BindSource } from './target.js';
import type { ArrowAdbc } from './arrowjs.js';
import type { RecordBatchStreamImport } from '../stream/import.js';
import { IngestMode, ObjectDepth, type GetObjectsOptions, type InfoCode, type IngestOptions } from './types.js';
import { abortable, checkSignal, throwIfAborted } from './abort.js';

/**
 * Whether `e` says the connection itself is gone, not just the call: a pool discards such a
 * connection instead of handing it out again. IO is what the drivers give for a socket closed or a
 * server gone (test/adbc/faults.test.ts); SQLSTATE class 08 is "connection exception" and 57P01-57P03
 * a server shutting down or starting (PostgreSQL's codes, which its driver passes on). An IO error of
 * an embedded database (a file not found) also discards its connection: a reconnect, not a wrong answer.
 */
export function isConnectionFault(e: unknown): boolean {
  if (!(e instanceof AdbcError)) return false;
  if (e.status === AdbcStatus.IO) return true;
  const state = e.sqlState;
  return state !== undefined && (state.startsWith('08') || state === '57P01' || state === '57P02' || state === '57P03');
}

/**
 * Statements whose SQL text says they may change what a prepared statement depends on (a table's
 * columns, the session's settings): running one closes the connection's cached statements first, and it
 * is never cached itself. A leading keyword (comments and whitespace skipped), or one of the DDL verbs
 * anywhere: conservative, as a miss only costs a prepare.
 */
const SCHEMA_CHANGING = /^(?:\s|--[^\n]*\n|\/\*[\s\S]*?\*\/|\()*(?:CREATE|ALTER|DROP|TRUNCATE|RENAME|COMMENT|GRANT|REVOKE|ATTACH|DETACH|SET|RESET|DISCARD|USE|PRAGMA|IMPORT|LOAD|INSTALL|VACUUM|ANALYZE|REINDEX|CLUSTER|REFRESH|DEALLOCATE)\b|\b(?:CREATE|ALTER|DROP|TRUNCATE|RENAME)\b/i;

/** Default of `ConnectOptionsBase.statementCacheSize`. */
const STATEMENT_CACHE_SIZE = 32;
/**
 * How many batches `query` reads in its execution's thread hop (src/adbc/run.ts): a small result (a
 * batch and the end, or a few batches) then costs one hop in all; a larger one goes on batch by batch.
 */
const READ_AHEAD = 4;

/** A connection of any target (the pool's and the database's internal view). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- internal: a connection whatever its target's types
export type AnyConnection = AdbcConnection<any>;

/** The pool's view of a connection (set in the class's static block: no public member exposes them). */
let internals: {
  /** Calls `f` once the connection has no result open (at once if it has none). */
  whenFree(c: AnyConnection, f: () => void): void;
  fault(c: AnyConnection): AdbcError | undefined;
  park(c: AnyConnection, parked: boolean): void;
  /** Releases the connection (not given back): `AdbcConnectionRelease` on a worker thread; resolves when it returned. */
  closeNow(c: AnyConnection): Promise<void>;
};

/** @internal For src/adbc/pool.ts. */
export function connectionInternals(): typeof internals {
  return internals;
}

/**
 * One connection to a database (`AdbcConnection`), from `AdbcDatabase.connect()`.
 * Results are zero-copy imports of the driver's streams; ingested data
 * leaves as zero-copy exports. `close()` (or `await using`) releases it,
 * after every statement and reader of it.
 *
 * @example
 * await using conn = await db.connect();
 * const table = await conn.query('SELECT 42 AS answer');
 * console.log(table.getChild('answer')?.get(0));
 * table.release();
 */
export class AdbcConnection<T extends AdbcTypes = ArrowAdbc> extends Closable {
  readonly #core: ConnectionCore;
  readonly #ptr: Ptr;
  /** Opens another connection of the same database (`readPartitions` reads each partition on its own). */
  readonly #sibling: () => Promise<AdbcConnection<T>>;
  /** Connections `readPartitions` opened and finished with cleanly: the next one reuses them; closed with this one. */
  readonly #partitionConnections: AdbcConnection<T>[] = [];
  /**
   * The first failure of a call that said the connection itself is gone (`isConnectionFault`). A box, not
   * a field: the order of calls records into it, and a statement's release holds that order, so the
   * recorder must not hold the connection (the statement's collector entry would keep it alive).
   */
  readonly #fault: { first: AdbcError | undefined };
  /** Given back to its pool: every call refuses until the pool hands it out again. */
  #parked = false;
  /** What `close()` does: a pooled connection's gives it back (`AdbcPool`), a plain one's releases it. */
  #onClose: ((c: AdbcConnection<T>) => void) | undefined;
  /** Result streams open (readers not released yet). */
  #openResults = 0;
  /** Waits for `#openResults` to reach 0 (the pool's). */
  #onFree: (() => void) | undefined;
  /**
   * Statements of `query`, `queryStream` and `execute` kept by SQL text for the next call with the same
   * text (least recently used first; at most `#cacheSize`): the next call skips `AdbcStatementNew`,
   * `SetSqlQuery` and `Prepare` (DuckDB's and PostgreSQL's drivers prepare there: a parse and plan, a
   * round trip). A statement is reused only when its last result is released, and dropped when a call on
   * it fails; a schema-changing statement (`SCHEMA_CHANGING`) empties the cache first.
   */
  readonly #cache = new Map<string, AdbcStatement<T>>();
  readonly #cacheSize: number;

  static {
    internals = {
      whenFree: (c, f) => {
        if (c.#openResults === 0) f();
        else c.#onFree = f;
      },
      fault: (c) => c.#fault.first,
      park: (c, parked) => {
        c.#parked = parked;
      },
      closeNow: (c) => {
        c.#onClose = undefined;
        return c.close();
      },
    };
  }

  /** @internal Use `AdbcDatabase.connect()`. */
  constructor(
    driver: Driver, ptr: Ptr, parent: Lifetime, sibling: () => Promise<AdbcConnection<T>>, target: AdbcTarget<T>, defaults: ConnectionDefaults = {},
    onClose?: (c: AdbcConnection<T>) => void,
  ) {
    const fault0: { first: AdbcError | undefined } = { first: undefined };
    const serial = new Serial(faultRecorder(fault0));
    const letGo = new LetGo(driver, serial);
    const life = connectionLifetime(driver, ptr, parent, letGo);
    super(life);
    this.#ptr = ptr;
    this.#sibling = sibling;
    this.#onClose = onClose;
    this.#cacheSize = defaults.statementCacheSize ?? STATEMENT_CACHE_SIZE;
    this.#fault = fault0;
    this.#core = {
      driver,
      serial,
      letGo,
      life,
      queryDefaults: defaults.queryDefaults ?? {},
      statementOptions: defaults.statementOptions ?? [],
      target: target as unknown as AdbcTarget<AdbcTypes>,
      resultOpened: () => {
        this.#openResults++;
        let done = false;
        return () => {
          if (done) return;
          done = true;
          if (--this.#openResults === 0 && this.#onFree !== undefined) {
            const f = this.#onFree;
            this.#onFree = undefined;
            f();
          }
        };
      },
      ptr: (op) => {
        life.check(op);
        if (this.#parked) {
          throw new AdbcError(op, { status: AdbcStatus.INVALID_STATE, message: `${op}: the connection was given back to its pool (release()); acquire one again` });
        }
        return ptr;
      },
    };
  }

  /**
   * Gives a pooled connection back to its pool (`AdbcPool.connect()`), as `close()` and `await using` do
   * for one: the pool hands it out again once its readers are released, or discards it if a call failed
   * with an error that broke it. A connection from `AdbcDatabase.connect()` is released (as by `close()`).
   *
   * @example
   * const conn = await pool.connect();
   * try { await conn.query('SELECT 1'); } finally { conn.release(); }
   */
  release(): void {
    this.closeSync();
  }

  #sync(op: string): Ptr {
    const p = this.#core.ptr(op);
    this.#core.serial.checkIdle(op, 'connection');
    return p;
  }

  /**
   * Runs `f` on the connection's queue, the connection marked busy from now (its release waits for the
   * call, queued or running: a release between the two would free what the queued call then uses).
   */
  async #run<T>(op: string, f: (p: Ptr) => Promise<T> | T): Promise<T> {
    const p = this.#core.ptr(op);
    const leave = this.#core.life.enter();
    try {
      return await this.#core.serial.run(() => f(p));
    } finally {
      leave();
    }
  }

  /**
   * A new statement (`AdbcStatementNew`).
   *
   * @example
   * await using stmt = await conn.createStatement();
   */
  async createStatement(): Promise<AdbcStatement<T>> {
    this.#core.ptr('createStatement');
    return this.#core.serial.run(() => AdbcStatement.create<T>(this.#core));
  }

  /**
   * Sets a connection option (`AdbcConnectionSetOption`).
   *
   * @example
   * conn.setOption('adbc.connection.autocommit', 'false');
   */
  setOption(key: string, value: string): void {
    this.#core.driver.call('ConnectionSetOption', this.#sync('setOption'), key, value);
  }

  /**
   * Sets a bytes option (`AdbcConnectionSetOptionBytes`, ADBC 1.1.0; NOT_IMPLEMENTED where the driver lacks it).
   *
   * @example
   * conn.setOptionBytes('adbc.my_driver.token', new TextEncoder().encode('secret'));
   */
  setOptionBytes(key: string, value: Uint8Array): void {
    options.setOptionBytes(this.#core.driver, 'Connection', this.#sync('setOptionBytes'), key, value);
  }

  /**
   * Sets an integer option (`AdbcConnectionSetOptionInt`, ADBC 1.1.0): a bigint, or a number that is a safe integer.
   *
   * @example
   * conn.setOptionInt('adbc.my_driver.batch_rows', 65536);
   */
  setOptionInt(key: string, value: bigint | number): void {
    options.setOptionInt(this.#core.driver, 'Connection', this.#sync('setOptionInt'), key, value);
  }

  /**
   * Sets a floating-point option (`AdbcConnectionSetOptionDouble`, ADBC 1.1.0).
   *
   * @example
   * conn.setOptionDouble('adbc.flight.sql.rpc.timeout_seconds.fetch', 30);
   */
  setOptionDouble(key: string, value: number): void {
    options.setOptionDouble(this.#core.driver, 'Connection', this.#sync('setOptionDouble'), key, value);
  }

  /**
   * Reads a string option (`AdbcConnectionGetOption`, ADBC 1.1.0): NOT_FOUND for a key the driver does
   * not know, NOT_IMPLEMENTED where the driver has no getters.
   *
   * @example
   * const autocommit = conn.getOption('adbc.connection.autocommit'); // 'true'
   */
  getOption(key: string): string {
    return options.getOption(this.#core.driver, 'Connection', this.#sync('getOption'), key);
  }

  /**
   * Reads a bytes option (`AdbcConnectionGetOptionBytes`, ADBC 1.1.0).
   *
   * @example
   * const bytes = conn.getOptionBytes('adbc.my_driver.token');
   */
  getOptionBytes(key: string): Uint8Array {
    return options.getOptionBytes(this.#core.driver, 'Connection', this.#sync('getOptionBytes'), key);
  }

  /**
   * Reads an integer option (`AdbcConnectionGetOptionInt`, ADBC 1.1.0), as a bigint (int64).
   *
   * @example
   * const rows = conn.getOptionInt('adbc.my_driver.batch_rows');
   */
  getOptionInt(key: string): bigint {
    return options.getOptionInt(this.#core.driver, 'Connection', this.#sync('getOptionInt'), key);
  }

  /**
   * Reads a floating-point option (`AdbcConnectionGetOptionDouble`, ADBC 1.1.0).
   *
   * @example
   * const seconds = conn.getOptionDouble('adbc.flight.sql.rpc.timeout_seconds.fetch');
   */
  getOptionDouble(key: string): number {
    return options.getOptionDouble(this.#core.driver, 'Connection', this.#sync('getOptionDouble'), key);
  }

  /**
   * Turns autocommit on or off (`adbc.connection.autocommit`).
   *
   * @example
   * conn.setAutoCommit(false);
   */
  setAutoCommit(enabled: boolean): void {
    this.setOption('adbc.connection.autocommit', enabled ? 'true' : 'false');
  }

  /**
   * Makes the connection read-only or not (`adbc.connection.readonly`).
   *
   * @example
   * conn.setReadOnly(true);
   */
  setReadOnly(enabled: boolean): void {
    this.setOption('adbc.connection.readonly', enabled ? 'true' : 'false');
  }

  /** A metadata call's stream, read whole into a Table. */
  #metadata(op: string, call: (p: Ptr, out: Ptr) => Promise<void>): Promise<T['table']> {
    const { driver, target } = this.#core;
    return this.#run(op, async (p) => {
      const reader = await importArrayStreamFrom((out) => call(p, out), {
        offThread: true,
        onProducerError: (s, e) => driver.errorFromArrayStream(s, e),
        target: target.stream,
      });
      return reader.toTableAsync() as Promise<T['table']>;
    });
  }

  /**
   * Catalogs, schemas, tables and columns (`AdbcConnectionGetObjects`), as
   * the nested Table adbc.h describes.
   *
   * @example
   * const objects = await conn.getObjects({ depth: ObjectDepth.Tables, tableName: 'people' });
   */
  async getObjects(options: GetObjectsOptions = {}): Promise<T['table']> {
    const { driver } = this.#core;
    return this.#metadata('getObjects', (p, out) =>
      driver.callAsync('ConnectionGetObjects', p, options.depth ?? ObjectDepth.All, options.catalog, options.dbSchema, options.tableName,
        { list: options.tableType }, options.columnName, out),
    );
  }

  /**
   * Driver and database information (`AdbcConnectionGetInfo`): rows of
   * `info_name` (an `InfoCode`) and a union `info_value`.
   *
   * @example
   * const info = await conn.getInfo([InfoCode.VendorName]);
   */
  async getInfo(infoCodes?: InfoCode[]): Promise<T['table']> {
    const { driver } = this.#core;
    return this.#metadata('getInfo', async (p, out) => {
      const codes = infoCodes === undefined ? NULL : u32Array(infoCodes);
      try {
        await driver.callAsync('ConnectionGetInfo', p, codes, infoCodes?.length ?? 0, out);
      } finally {
        freeNative(codes);
      }
    });
  }

  /**
   * The table types the database has (`AdbcConnectionGetTableTypes`): one column `table_type`.
   *
   * @example
   * const types = await conn.getTableTypes();
   */
  async getTableTypes(): Promise<T['table']> {
    const { driver } = this.#core;
    return this.#metadata('getTableTypes', (p, out) => driver.callAsync('ConnectionGetTableTypes', p, out));
  }

  /**
   * Statistics of tables and columns (`AdbcConnectionGetStatistics`, ADBC 1.1.0), as the nested Table
   * adbc.h describes: per catalog, `catalog_db_schemas`, each with `db_schema_statistics` rows of
   * `table_name`, `column_name` (null: the whole table), `statistic_key` (`StatisticKey` for ADBC's own,
   * 1024 and up the driver's: see `getStatisticNames`), `statistic_value` (a union of int64, uint64,
   * float64, binary) and `statistic_is_approximate`. `approximate` (true unless given) lets the driver
   * answer from its estimates; false asks for exact values, which may cost a scan or be refused. The
   * names may be patterns (`%`, `_`). NOT_IMPLEMENTED where the driver has no statistics.
   *
   * @example
   * const stats = await conn.getStatistics({ tableName: 'people' });
   * for (const catalog of stats) console.log(catalog.toJSON());
   */
  async getStatistics(options: { catalog?: string; dbSchema?: string; tableName?: string; approximate?: boolean } = {}): Promise<T['table']> {
    const { driver } = this.#core;
    return this.#metadata('getStatistics', (p, out) =>
      driver.callAsync('ConnectionGetStatistics', p, options.catalog, options.dbSchema, options.tableName, options.approximate === false ? 0 : 1, out),
    );
  }

  /**
   * The driver's own statistic names (`AdbcConnectionGetStatisticNames`, ADBC 1.1.0): rows of
   * `statistic_name` and `statistic_key`, the key `getStatistics` gives for it.
   * NOT_IMPLEMENTED where the driver has no statistics.
   *
   * @example
   * const names = await conn.getStatisticNames();
   */
  async getStatisticNames(): Promise<T['table']> {
    const { driver } = this.#core;
    return this.#metadata('getStatisticNames', (p, out) => driver.callAsync('ConnectionGetStatisticNames', p, out));
  }

  /**
   * The Arrow schema of a table (`AdbcConnectionGetTableSchema`).
   *
   * @example
   * const schema = await conn.getTableSchema({ tableName: 'people' });
   */
  async getTableSchema(options: { catalog?: string; dbSchema?: string; tableName: string }): Promise<T['schema']> {
    const { driver, target } = this.#core;
    const node = await this.#run('getTableSchema', async (p) =>
      importSchemaNodeFrom((out) => driver.callAsync('ConnectionGetTableSchema', p, options.catalog, options.dbSchema, options.tableName, out)),
    );
    return target.schema(node) as T['schema'];
  }

  /**
   * Runs a query and returns its result as a zero-copy arrow-js Table
   * (`table.release()` gives the driver's memory back; the garbage
   * collector does otherwise). With `params`, the statement is prepared,
   * then they are bound (`prepare`, `bind`): one row of parameters per
   * execution works on every driver (DuckDB's takes no more).
   *
   * @example
   * const t = await conn.query('SELECT * FROM people WHERE id = ?', tableFromArrays({ id: Int32Array.of(1) }));
   */
  async query(sql: string, params?: BindSource<T> | AsyncBatchSource<T>, options: QueryOptions = {}): Promise<T['table']> {
    // The reader is this call's alone and reads everything: its first batches come in the execution's hop.
    const reader = await this.#queryReader('query', sql, params, options, READ_AHEAD);
    try {
      return (await reader.toTableAsync()) as T['table']; // with a signal: an abort rejects it at once
    } finally {
      reader.release();
    }
  }

  /**
   * Runs a query and returns a reader of its result, batch by batch
   * (bounded memory: one batch alive at a time unless kept). The statement
   * is closed at once and released after the reader.
   *
   * @example
   * for await (const batch of await conn.queryStream('SELECT * FROM big')) console.log(batch.numRows);
   */
  async queryStream(sql: string, params?: BindSource<T> | AsyncBatchSource<T>, options: QueryOptions = {}): Promise<T['reader']> {
    return this.#queryReader('queryStream', sql, params, options, 0);
  }

  /** `queryStream`, with up to `readAhead` batches read in the execution's hop (the caller reads them all). */
  async #queryReader(op: string, sql: string, params: BindSource<T> | AsyncBatchSource<T> | undefined, options: QueryOptions, readAhead: number): Promise<T['reader']> {
    checkSignal(op, options.signal);
    const { stmt, key, sqlSet } = await this.#statementFor(sql, params, options.signal, true, false);
    let ok = false;
    try {
      const reader = await stmt.runQuery(sqlSet ? undefined : sql, readAhead, options);
      ok = true;
      return reader;
    } finally {
      this.#done(stmt, key, ok);
    }
  }

  /**
   * A statement with `sql` set and, where `params` are given, prepared and
   * then bound: the order adbc.h documents for parameters (`AdbcStatementPrepare`
   * before `AdbcStatementBindStream`). It leaves bind-without-prepare
   * driver-defined, and drivers differ: Flight SQL's takes data bound to an
   * unprepared statement as rows to ingest ("must set IngestTargetTable"), the
   * others as parameters. Prepared first, every driver tested takes them as
   * parameters. A driver that cannot prepare (NOT_IMPLEMENTED) gets the
   * parameters bound unprepared, as before.
   */
  async #statementFor(
    sql: string, params: BindSource<T> | AsyncBatchSource<T> | undefined, signal?: AbortSignal, cacheable = true, setSql = true,
  ): Promise<{ stmt: AdbcStatement<T>; key: string | undefined; sqlSet: boolean }> {
    let key: string | undefined;
    if (SCHEMA_CHANGING.test(sql)) this.#clearCache('letGo');
    else if (cacheable && this.#cacheSize > 0) {
      // Prepared (with parameters) and plain statements of one text are different statements.
      key = `${params === undefined ? 'q' : 'p'}:${sql}`;
      const hit = this.#cache.get(key);
      if (hit !== undefined && !hit.resultOpen && !hit.released) {
        this.#cache.delete(key); // taken: back in at the end, as the most recently used
        try {
          if (params !== undefined) {
            throwIfAborted(signal);
            await hit.bind(params);
          }
          throwIfAborted(signal);
          return { stmt: hit, key, sqlSet: true };
        } catch (e) {
          hit.closeSync();
          throw e;
        }
      }
      if (hit !== undefined) key = undefined; // its result is still open: this call takes a statement of its own
    }
    // Without parameters, the caller may leave the SQL to its execution's hop (`setSql` false).
    const sqlSet = setSql || params !== undefined;
    return { stmt: await this.#newStatementFor(sql, params, signal, sqlSet), key, sqlSet };
  }

  /**
   * After a call on a statement of `#statementFor`: kept for the same SQL text (success, a key), else
   * let go; so is the statement the cache pushes out.
   */
  #done(stmt: AdbcStatement<T>, key: string | undefined, ok: boolean): void {
    if (!ok || key === undefined || !this.#core.life.open || this.#cache.has(key)) {
      this.#letGo(stmt);
      return;
    }
    this.#cache.set(key, stmt);
    if (this.#cache.size > this.#cacheSize) {
      const [oldest, s] = this.#cache.entries().next().value as [string, AdbcStatement<T>];
      this.#cache.delete(oldest);
      this.#letGo(s);
    }
  }

  /**
   * A statement a query let go: released by the connection's next run, before that run's query, on its
   * worker thread (src/adbc/run.ts, `LetGo`): this is every query's path, and a release of its own on a
   * worker thread would add a wake-up of the JS thread to each (the CHANGELOG has the figures), while on
   * the JS thread Flight SQL's driver would close a prepared statement on the server there. Where there
   * are no runs (no native library), or the connection closes, it is released now, on the JS thread.
   */
  #letGo(stmt: AdbcStatement<T>): void {
    if (this.#core.life.open && queryRun() !== null) stmt.letGo();
    else stmt.closeSync();
  }

  /**
   * Closes every cached statement (each released after its open result, if it has one): `now` on the JS
   * thread, `offThread` each on a worker thread in the connection's order of calls (the promises reject
   * with a release's error), `letGo` by the next run (a DDL statement's own).
   */
  #clearCache(how: 'now' | 'offThread' | 'letGo'): Promise<void>[] {
    const closing: Promise<void>[] = [];
    for (const s of this.#cache.values()) {
      if (how === 'offThread') closing.push(s.close());
      else if (how === 'letGo') this.#letGo(s);
      else s.closeSync();
    }
    this.#cache.clear();
    return closing;
  }

  async #newStatementFor(sql: string, params: BindSource<T> | AsyncBatchSource<T> | undefined, signal: AbortSignal | undefined, setSql: boolean): Promise<AdbcStatement<T>> {
    const stmt = await this.createStatement();
    try {
      // An abort before the execution stops between steps (they are short; the execution is what waits).
      if (setSql) await stmt.setSqlQuery(sql);
      throwIfAborted(signal);
      if (params !== undefined) {
        try {
          await stmt.prepare();
        } catch (e) {
          if (!(e instanceof AdbcError && e.status === AdbcStatus.NOT_IMPLEMENTED)) throw e;
        }
        throwIfAborted(signal);
        await stmt.bind(params);
        throwIfAborted(signal);
      }
      return stmt;
    } catch (e) {
      stmt.closeSync();
      throw e;
    }
  }

  /**
   * Runs a statement that returns no rows (DDL, INSERT, UPDATE, DELETE);
   * resolves to the rows affected (-1: unknown).
   *
   * @example
   * await conn.execute('CREATE TABLE t (x INTEGER)');
   */
  async execute(sql: string, params?: BindSource<T> | AsyncBatchSource<T>, options: SignalOption = {}): Promise<number> {
    checkSignal('execute', options.signal);
    const { stmt, key, sqlSet } = await this.#statementFor(sql, params, options.signal, true, false);
    let ok = false;
    try {
      const rows = await stmt.runUpdate(sqlSet ? undefined : sql, options);
      ok = true;
      return rows;
    } finally {
      this.#done(stmt, key, ok);
    }
  }

  /**
   * Runs a query as a partitioned result (`AdbcStatementExecutePartitions`):
   * its schema and the partition descriptors, each read with `readPartition`
   * (on this connection, another one, or in another process). `params` are
   * bound as `query` binds them. NOT_IMPLEMENTED where the driver has no
   * partitioned results.
   *
   * @example
   * // Every partition at once, each on a connection of its own (one call at a time runs on a connection).
   * const { partitions } = await conn.executePartitions('SELECT * FROM events');
   * const rows = await Promise.all(partitions.map(async (descriptor) => {
   *   await using c = await db.connect();
   *   let n = 0;
   *   for await (const batch of await c.readPartition(descriptor)) n += batch.numRows;
   *   return n;
   * }));
   */
  async executePartitions(sql: string, params?: BindSource<T> | AsyncBatchSource<T>, options: SignalOption = {}): Promise<PartitionedResult<T>> {
    checkSignal('executePartitions', options.signal);
    const { stmt } = await this.#statementFor(sql, params, options.signal, false);
    let ok = false;
    try {
      const result = await stmt.executePartitions(options);
      ok = true;
      return result;
    } finally {
      // Released on a worker thread after a success (Flight SQL's release is a round trip); an error's
      // statement on the JS thread, at once, as every failed call's.
      await closeStatement(stmt, ok);
    }
  }

  /**
   * Reads one partition of a partitioned result (`AdbcConnectionReadPartition`
   * on a worker thread), from a descriptor `executePartitions` gave (here or
   * in another process, on a connection of the same driver and database):
   * the same reader `queryStream` returns, one batch alive at a time. Several
   * partitions are read at once on several connections (calls on one
   * connection run one at a time).
   *
   * @example
   * const { partitions } = await conn.executePartitions('SELECT * FROM events');
   * for await (const batch of await conn.readPartition(partitions[0]!)) console.log(batch.numRows);
   */
  async readPartition(descriptor: Uint8Array, options: QueryOptions = {}): Promise<T['reader']> {
    const { driver, serial, life, queryDefaults, target } = this.#core;
    const { signal, ...importOptions } = options;
    checkSignal('readPartition', signal);
    // The stream's place in the release order: under the connection (no statement made it).
    const stream = new Lifetime('partition stream', life, this.#core.resultOpened());
    /** The read began on a worker thread: only then is the connection's cancel this call's, not a queued one's. */
    let started = false;
    const read = async (): Promise<T['reader']> => {
      let inner: RecordBatchStreamImport<T['batch'], T['table'], T['schema']>;
      try {
        inner = await this.#run('readPartition', async (p) => {
          throwIfAborted(signal);
          started = true;
          const bytes = bytesIn(descriptor);
          try {
            return await importArrayStreamFrom((out) => driver.callAsync('ConnectionReadPartition', p, bytes, descriptor.byteLength, out), {
              offThread: true,
              onProducerError: (s, e) => driver.errorFromArrayStream(s, e),
              ...queryDefaults,
              ...importOptions,
              target: target.stream,
            }) as unknown as RecordBatchStreamImport<T['batch'], T['table'], T['schema']>;
          } finally {
            freeNative(bytes); // adbc.h: the descriptor is only read during the call
          }
        });
      } catch (e) {
        stream.close();
        throw e;
      }
      return target.reader(new AdbcResultReader(inner, stream, serial, () => this.cancel(), signal) as never) as T['reader'];
    };
    return abortable('readPartition', signal, read, () => {
      if (started) this.cancel();
    }, (reader) => reader.release());
  }

  /**
   * Reads several partitions at once (descriptors from `executePartitions`,
   * here or in another process), each on a connection of its own opened from
   * this connection's database (this connection stays free), every driver call
   * on a worker thread. Awaiting it starts the first partitions (it does not
   * wait for them: a failure to open one comes from the reader); the reader
   * yields `{ partition, batch }` as batches arrive, or in partition
   * order with `ordered: true`. Memory stays bounded: at most `concurrency`
   * partitions at a time (default 4), at most one batch outstanding per
   * partition (released at the next step unless kept). The first failure
   * cancels and releases the others and is thrown once, as an `AdbcError`
   * naming the partition; `break` releases every stream. The connections
   * it opened are kept for the next call when every partition ended cleanly
   * (opening one can cost more than reading a partition), and closed with
   * this connection. The database must stay open while it reads.
   *
   * @example
   * const { partitions } = await conn.executePartitions('SELECT k, count(*) AS n FROM t GROUP BY k');
   * const rows = new Array<number>(partitions.length).fill(0);
   * for await (const { partition, batch } of await conn.readPartitions(partitions, { concurrency: 8 })) {
   *   rows[partition]! += batch.numRows;
   * }
   */
  async readPartitions(descriptors: readonly Uint8Array[], options: ReadPartitionsOptions = {}): Promise<AdbcPartitionReader<T>> {
    this.#core.ptr('readPartitions');
    checkSignal('readPartitions', options.signal);
    const pool = this.#partitionConnections;
    const life = this.#core.life;
    const source = {
      connect: async (): Promise<AdbcConnection<T>> => pool.pop() ?? this.#sibling(),
      recycle: (c: AdbcConnection<T>): void => {
        if (life.open) pool.push(c);
        else c.closeSync();
      },
    };
    return new AdbcPartitionReader<T>(descriptors, source, options).start();
  }

  /**
   * What both closes do first: a pooled connection is given back (undefined: nothing more to do); else the
   * cached statements are closed (`offThread`: their releases on a worker thread, the promises in
   * `closing`) and the connections `readPartitions` kept are handed over to be closed.
   */
  #beginClose(offThread: boolean): { kept: AdbcConnection<T>[]; closing: Promise<void>[] } | undefined {
    if (this.#onClose !== undefined) {
      this.#onClose(this); // pooled: given back, not released
      return undefined;
    }
    const closing = this.#clearCache(offThread ? 'offThread' : 'now');
    // The statements let go that no run took: on a worker thread here, each in its turn (the rest, with a
    // synchronous close or the collector's, when the connection's Lifetime closes: connectionLifetime).
    if (offThread) closing.push(...this.#core.letGo.closeOffThread());
    return { kept: this.#partitionConnections.splice(0), closing };
  }

  /**
   * Releases the connection (after its statements and readers), and the
   * connections `readPartitions` kept for its next call. Idempotent.
   *
   * @example
   * conn.closeSync();
   */
  override closeSync(): void {
    const kept = this.#beginClose(false)?.kept;
    if (kept === undefined) return;
    let first: unknown;
    for (const c of kept) {
      try {
        c.closeSync();
      } catch (e) {
        first ??= e;
      }
    }
    super.closeSync();
    if (first !== undefined) throw first;
  }

  /**
   * `closeSync()`, with `AdbcConnectionRelease` on a worker thread: a network driver's release talks to
   * the server (PostgreSQL's sends Terminate and closes its socket), and the releases of its cached
   * statements before it, in its order of calls. Resolves when the releases have returned; while the
   * connection's statements or readers are open it resolves at once and the last one's release starts it.
   * A pooled connection is given back (`release()`). Idempotent.
   *
   * @example
   * await conn.close();
   */
  override async close(): Promise<void> {
    // The cached statements first (Flight SQL's driver closes each prepared statement on the server, a
    // round trip), then the connections readPartitions kept and this one, each on a worker thread.
    const begun = this.#beginClose(true);
    if (begun === undefined) return;
    const { kept, closing } = begun;
    for (const c of kept) closing.push(c.close());
    closing.push(this.closeOffThread());
    const results = await Promise.allSettled(closing);
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }

  /** `close()`: what the end of an `await using` scope calls. */
  override async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  #ingestOptions(tableName: string, options: IngestOptions, mode: string): Record<string, string> {
    const o: Record<string, string> = { 'adbc.ingest.target_table': tableName, 'adbc.ingest.mode': mode };
    if (options.catalog !== undefined) o['adbc.ingest.target_catalog'] = options.catalog;
    if (options.dbSchema !== undefined) o['adbc.ingest.target_db_schema'] = options.dbSchema;
    if (options.temporary === true) o['adbc.ingest.temporary'] = 'true';
    return o;
  }

  async #ingestOnce(tableName: string, data: BindSource<T>, options: IngestOptions, mode: string): Promise<number> {
    throwIfAborted(options.signal);
    const stmt = await this.createStatement();
    let ok = false;
    try {
      await stmt.setOptions(this.#ingestOptions(tableName, options, mode));
      await stmt.bindStream(data);
      const rows = await stmt.executeUpdate({ signal: options.signal });
      ok = true;
      return rows;
    } finally {
      await closeStatement(stmt, ok);
    }
  }

  /**
   * Bulk ingestion (`adbc.ingest.*` options, `AdbcStatementBindStream`,
   * `AdbcStatementExecuteQuery`): the data leaves zero-copy as an
   * `ArrowArrayStream` that the driver reads while it ingests. Resolves to
   * the rows ingested (-1: unknown).
   *
   * @example
   * await conn.ingest('people', tableFromArrays({ id: Int32Array.of(1, 2) }), { mode: IngestMode.Create });
   */
  async ingest(tableName: string, data: BindSource<T> | AsyncBatchSource<T>, options: IngestOptions = {}): Promise<number> {
    return this.ingestStream(tableName, data, options);
  }

  /**
   * Ingestion from a stream of batches. A synchronous source (an arrow-js
   * `RecordBatchReader` over IPC bytes, an `AdbcRecordBatchReader` of
   * another connection, any iterable) is read by the driver batch by batch,
   * in one execution. An async source cannot be read from a C stream (its
   * `get_next` cannot wait for a promise), so its batches are ingested as
   * they arrive, one execution each: the first with `options.mode`, the
   * rest appended (not atomic unless autocommit is off).
   *
   * @example
   * await conn.ingestStream('events', RecordBatchReader.from(ipcBytes));
   */
  async ingestStream(tableName: string, reader: BindSource<T> | AsyncBatchSource<T>, options: IngestOptions = {}): Promise<number> {
    this.#core.ptr('ingestStream');
    checkSignal('ingestStream', options.signal);
    const mode = options.mode ?? IngestMode.Create;
    const target = this.#core.target;
    if (!target.isAsync(reader)) return this.#ingestOnce(tableName, reader as BindSource<T>, options, mode);
    let total = 0;
    let first = true;
    const add = (n: number): void => {
      total = total < 0 || n < 0 ? -1 : total + n;
    };
    for await (const batch of reader as AsyncIterable<unknown>) {
      if (!target.isBatch(batch)) {
        throw new AdbcError('ingestStream', { status: AdbcStatus.INVALID_ARGUMENT, message: 'ingestStream: the async source yielded something that is not a batch' });
      }
      add(await this.#ingestOnce(tableName, batch as BindSource<T>, options, first ? mode : IngestMode.Append));
      first = false;
    }
    if (first) {
      // No batch: the table is still created (or replaced) with the source's schema, as a synchronous source would.
      const empty = await target.emptyOf(reader);
      if (empty === undefined) throw new AdbcError('ingestStream', { status: AdbcStatus.INVALID_ARGUMENT, message: 'ingestStream: the async source yielded no batch and has no schema' });
      if (mode !== IngestMode.Append) add(await this.#ingestOnce(tableName, empty as BindSource<T>, options, mode));
    }
    return total;
  }

  /**
   * Commits the transaction (autocommit off).
   *
   * @example
   * conn.setAutoCommit(false); await conn.execute('INSERT ...'); await conn.commit();
   */
  async commit(): Promise<void> {
    await this.#run('commit', (p) => this.#core.driver.callAsync('ConnectionCommit', p));
  }

  /**
   * Rolls the transaction back (autocommit off).
   *
   * @example
   * await conn.rollback();
   */
  async rollback(): Promise<void> {
    await this.#run('rollback', (p) => this.#core.driver.callAsync('ConnectionRollback', p));
  }

  /**
   * Asks the driver to stop what runs on the connection (`AdbcConnectionCancel`,
   * thread-safe in ADBC); returns whether it was asked (false where the driver lacks it).
   *
   * @example
   * setTimeout(() => conn.cancel(), 5000);
   */
  cancel(): boolean {
    const { driver, life } = this.#core;
    if (life.released || !driver.has('ConnectionCancel')) return false;
    try {
      driver.call('ConnectionCancel', this.#ptr);
      return true;
    } catch {
      return false;
    }
  }

}

/**
 * Closes a statement a call let go: on the JS thread (`closeSync`) or, `offThread`, on a worker thread,
 * the promise settling when the release has run (after its open result's), with the release's error.
 */
function closeStatement(stmt: AdbcStatement<AdbcTypes>, offThread: boolean): Promise<void> | undefined {
  if (!offThread) {
    stmt.closeSync();
    return undefined;
  }
  return stmt.close();
}

/** What a connection's order of calls does with each failure: keeps the first that says the connection is gone. */
function faultRecorder(fault: { first: AdbcError | undefined }): (e: unknown) => void {
  return (e) => {
    if (fault.first === undefined && isConnectionFault(e)) fault.first = e as AdbcError;
  };
}

/**
 * The connection's place in the release order. Made outside the constructor on purpose: the garbage
 * collector's registry holds the `Lifetime` strongly, and a release closure made in the constructor would
 * share its scope with the closures there that use `this`, which would keep the connection reachable
 * from the registry, never collected.
 */
function connectionLifetime(driver: Driver, ptr: Ptr, parent: Lifetime, letGo: LetGo): Lifetime {
  // `close()`'s release runs on a worker thread: a network driver's says goodbye to the server and closes its
  // socket (PostgreSQL's sends Terminate, Flight SQL's closes its channel).
  const life = new Lifetime('connection', parent, ...handleReleases(driver, 'ConnectionRelease', ptr));
  // Closed with statements let go that no run took (closeSync(), the collector): released then; the
  // connection's release waits for them.
  life.onClose = () => letGo.closeNow();
  return life;
}

/** @internal What a database gives each of its connections (its `ConnectOptionsBase` parts). */
export interface ConnectionDefaults {
  readonly queryDefaults?: QueryDefaults;
  readonly statementCacheSize?: number;
  readonly statementOptions?: readonly (readonly [string, string])[];
}

/** @internal `AdbcConnectionNew` + `AdbcConnectionInit` (the latter on a worker thread: it may connect over the network). */
export async function openConnection<T extends AdbcTypes>(
  driver: Driver, db: Ptr, parent: Lifetime, sibling: () => Promise<AdbcConnection<T>>, target: AdbcTarget<T>, defaults: ConnectionDefaults = {},
  onClose?: (c: AdbcConnection<T>) => void,
): Promise<AdbcConnection<T>> {
  const p = allocNative(16);
  try {
    driver.call('ConnectionNew', p);
  } catch (e) {
    freeNative(p);
    throw e;
  }
  // The database stays (its release waits) until the connection is made and counted under it.
  const leave = parent.enter();
  try {
    await driver.callAsync('ConnectionInit', p, db);
    return new AdbcConnection<T>(driver, p, parent, sibling, target, defaults, onClose);
  } catch (e) {
    try {
      driver.call('ConnectionRelease', p);
    } catch {
      // The first error is the one to report.
    } finally {
      freeNative(p);
    }
    throw e;
  } finally {
    leave();
  }
}
