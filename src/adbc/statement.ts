/**
 * `AdbcStatement`: one ADBC statement, and what binds data to it: the
 * target's data leaves as a zero-copy stream export (the JS callbacks run
 * on the JS thread while the driver reads it from the worker thread that
 * runs the execution), or as one record batch where it is one; an object of
 * the exchange protocol as its own stream, moved to the driver.
 * Target-neutral (src/adbc/target.ts).
 */
// The internal modules of the public names used, not ../index.js: a query loads no device, async or protocol code.
import { ArrowSymbols, isArrowExportable, type ArrowStreamExportable } from '../abi/protocol.js';
import { allocArrowSchema, freeArrowArray, freeArrowSchema } from '../array/core.js';
import { readSchemaPtr } from '../array/importer.js';
import { importArrayStreamFrom, importSchemaNodeFrom } from '../fill/fill.js';
import { NULL, type Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { freeArrowArrayStream } from '../stream/export.js';
import type { RecordBatchStreamImport, StreamImportOptions } from '../stream/import.js';
import { allocNative, allocPartitions, bytesIn, freeNative, readI64, takePartitions, writeI64, type Driver } from './driver.js';
import { AdbcError, AdbcStatus } from './error.js';
import { Closable, Lifetime, type Serial } from './lifetime.js';
import * as options from './options.js';
import { AdbcResultReader } from './result.js';
import { queryRun, releaseStatementInTurn, runAndImport, runUpdate, type LetGo } from './run.js';
import type { AdbcTarget, AdbcTypes, AsyncBatchSource, BindSource } from './target.js';
import type { ArrowAdbc } from './arrowjs.js';
import { isReleased } from '../memory/cstruct.js';
import { abortable, throwIfAborted } from './abort.js';
import type { QueryDefaults } from './types.js';

/**
 * Options of the readers of query results: arrow-device's stream import
 * options (validation, `keep`, ...). `offThread` is true unless given: each
 * `get_next` of `for await`, `toTableAsync` and `query` runs on a worker
 * thread, and the event loop turns meanwhile. `{ offThread: false }` reads
 * on the JS thread instead, one thread hop less per batch (what it saves is
 * printed by `npm run bench:adbc`), while the event loop waits for the
 * whole read: only for an in-process driver whose `get_next` computes and
 * returns (DuckDB's, SQLite's), never for one that waits on the network or
 * reads data bound from JavaScript during `get_next`.
 */
export type QueryOptions = Omit<StreamImportOptions, 'view' | 'memory'> & SignalOption;

/**
 * `signal`: an `AbortSignal` that stops the call. Aborted already, the call starts nothing; aborted
 * while it runs, the driver is asked to cancel (`AdbcStatementCancel` / `AdbcConnectionCancel`) and the
 * call rejects at once with the signal's reason (an `AbortError` `DOMException` by default), whether or
 * not the driver can cancel; what it still produces is released when it arrives. A reader made with a
 * signal ends the same way: its pending step rejects with the reason and its stream is released.
 */
export interface SignalOption {
  /** Stops the call (see `SignalOption`). */
  signal?: AbortSignal;
}

export type { AsyncBatchSource, BindSource } from './target.js';

/**
 * A result split into partitions (`AdbcStatementExecutePartitions`): its
 * schema and one opaque descriptor per partition, copied out of the driver's
 * `AdbcPartitions` (which is released before this is returned).
 * A descriptor is plain bytes: `AdbcConnection.readPartition` reads it on
 * any connection of the same driver and database, in this process or
 * another one it is sent to (adbc.h, "Partitioned Results").
 */
export interface PartitionedResult<T extends AdbcTypes = ArrowAdbc> {
  /**
   * The schema every partition's stream has, or undefined where the driver
   * does not know it before a partition is read (ADBC's Flight SQL driver
   * against a server whose `FlightInfo` carries no schema).
   */
  schema: T['schema'] | undefined;
  /** One descriptor per partition, in the driver's order (a distributed engine's endpoints). */
  partitions: Uint8Array[];
  /** Rows affected, -1 where the driver does not know (the usual case for a query). */
  rowsAffected: number;
}

/** @internal What a statement shares with its connection. */
export interface ConnectionCore {
  readonly driver: Driver;
  readonly serial: Serial;
  readonly life: Lifetime;
  /** The database's `queryOptions`: what every reader of the connection starts from. */
  readonly queryDefaults: QueryDefaults;
  /** The database's `statementOptions`: set on every statement of the connection as it is made. */
  readonly statementOptions: readonly (readonly [string, string])[];
  /** What results are built with and bound data exported by (the database's). */
  readonly target: AdbcTarget<AdbcTypes>;
  /** Statements the connection let go, released by its next run (src/adbc/run.ts). */
  readonly letGo: LetGo;
  /** A result stream of the connection opens (a reader's); the returned function is called once when it is released. */
  resultOpened(): () => void;
  ptr(op: string): Ptr;
}

/**
 * One ADBC statement (`AdbcStatement`) of a connection: SQL, options,
 * bound data, execution. Results are read from an `AdbcRecordBatchReader`;
 * the statement is released after its reader (`close()` may come first).
 *
 * @example
 * await using stmt = await conn.createStatement();
 * await stmt.setSqlQuery('SELECT * FROM t WHERE id = ?');
 * await stmt.bind(tableFromArrays({ id: Int32Array.of(42) }));
 * const reader = await stmt.executeQuery();
 * for await (const batch of reader) console.log(batch.numRows);
 */
export class AdbcStatement<T extends AdbcTypes = ArrowAdbc> extends Closable {
  readonly #conn: ConnectionCore;
  readonly #ptr: Ptr;
  readonly #life: Lifetime;
  /** The open result's place in the release order (not the reader: a statement kept must not keep its reader from the collector). */
  #result: Lifetime | undefined;

  /** @internal Use `AdbcConnection.createStatement()`. */
  constructor(conn: ConnectionCore, ptr: Ptr) {
    const { driver, serial } = conn;
    const release = (): void => {
      try {
        driver.call('StatementRelease', ptr);
      } finally {
        freeNative(ptr);
      }
    };
    // A connection is not thread-safe (adbc.h): while a call of its runs on a worker thread (another
    // statement's execution, a reader's get_next), the release waits in its order of calls, then runs here.
    const life = new Lifetime('statement', conn.life, () => serial.whenIdle(release));
    super(life);
    this.#conn = conn;
    this.#ptr = ptr;
    this.#life = life;
  }

  /** @internal A new statement on `conn`: `AdbcStatementNew`. */
  static create<T extends AdbcTypes = ArrowAdbc>(conn: ConnectionCore): AdbcStatement<T> {
    const cptr = conn.ptr('createStatement');
    const p = allocNative(16);
    try {
      conn.driver.call('StatementNew', cptr, p);
    } catch (e) {
      freeNative(p);
      throw e;
    }
    const stmt = new AdbcStatement<T>(conn, p);
    try {
      for (const [key, value] of conn.statementOptions) conn.driver.call('StatementSetOption', p, key, value);
    } catch (e) {
      stmt.closeSync();
      throw e;
    }
    return stmt;
  }

  /**
   * Releases the statement (`AdbcStatementRelease`) on a worker thread, in its connection's order of
   * calls: Flight SQL's driver closes the server's prepared statement there, a round trip. While its
   * reader is open it resolves at once and the reader's release starts it. `closeSync()`, `using` and the
   * garbage collector release on the JS thread. Idempotent.
   *
   * @example
   * await stmt.close();
   */
  override async close(): Promise<void> {
    const { driver, serial } = this.#conn;
    const ptr = this.#ptr;
    await this.closeOffThread(() => releaseStatementInTurn(driver, serial, ptr));
  }

  /** `close()`: what the end of an `await using` scope calls. */
  override async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * @internal Closed by its connection after a query: released by the connection's next run, on its
   * worker thread before that run's query (src/adbc/run.ts, `LetGo`), or when the connection closes; while
   * its reader is open, queued so when the reader is released. Its error has no caller.
   */
  letGo(): void {
    const ptr = this.#ptr;
    const { letGo, serial } = this.#conn;
    // Queued in the connection's order when a call of it waits or runs: a reader's stream release queued
    // there (its result counts as released at once) must run before a run can take the statement.
    this.closeQueued((done) => void serial.whenIdle(() => letGo.add(ptr, done))?.catch(() => undefined));
  }

  /** @internal Whether a result of this statement is still open (a cached statement is reused only when not). */
  get resultOpen(): boolean {
    return this.#result !== undefined && !this.#result.released;
  }

  /** The statement for a synchronous call: open, and no async call of its connection running. */
  #use(op: string): Ptr {
    this.#life.check(op);
    this.#conn.serial.checkIdle(op, 'connection');
    return this.#ptr;
  }

  /** The statement for an async call (queued behind the connection's running calls). */
  #queued(op: string): Ptr {
    this.#life.check(op);
    return this.#ptr;
  }

  /**
   * Sets the SQL (`AdbcStatementSetSqlQuery`, on a worker thread: DuckDB's driver parses and prepares
   * the statement inside it, which blocks for as long as that takes and takes the database's locks).
   *
   * @example
   * await stmt.setSqlQuery('SELECT 1 AS one');
   */
  async setSqlQuery(query: string): Promise<void> {
    const p = this.#queued('setSqlQuery');
    await this.#run(() => this.#conn.driver.callAsync('StatementSetSqlQuery', p, query));
  }

  /**
   * Sets a serialized Substrait plan (`substrait.Plan` bytes) to execute instead of SQL
   * (`AdbcStatementSetSubstraitPlan`; the bytes are copied for the call). NOT_IMPLEMENTED where the
   * driver takes no Substrait (DuckDB's, SQLite's, PostgreSQL's); Flight SQL's sends the plan to the
   * server at execution, which may refuse it there.
   *
   * @example
   * await stmt.setSubstraitPlan(planBytes);
   * const table = await (await stmt.executeQuery()).toTableAsync();
   */
  async setSubstraitPlan(plan: Uint8Array): Promise<void> {
    const p = this.#queued('setSubstraitPlan');
    await this.#run(async () => {
      const bytes = bytesIn(plan);
      try {
        await this.#conn.driver.callAsync('StatementSetSubstraitPlan', p, bytes, plan.byteLength);
      } finally {
        freeNative(bytes);
      }
    });
  }

  /**
   * Sets an option (`AdbcStatementSetOption`): `adbc.ingest.target_table`, a driver's own keys.
   *
   * @example
   * stmt.setOption('adbc.sqlite.query.batch_rows', '65536');
   */
  setOption(key: string, value: string): void {
    this.#conn.driver.call('StatementSetOption', this.#use('setOption'), key, value);
  }

  /**
   * Sets a bytes option (`AdbcStatementSetOptionBytes`, ADBC 1.1.0; NOT_IMPLEMENTED where the driver lacks it).
   *
   * @example
   * stmt.setOptionBytes('adbc.my_driver.token', new TextEncoder().encode('secret'));
   */
  setOptionBytes(key: string, value: Uint8Array): void {
    options.setOptionBytes(this.#conn.driver, 'Statement', this.#use('setOptionBytes'), key, value);
  }

  /**
   * Sets an integer option (`AdbcStatementSetOptionInt`, ADBC 1.1.0): a bigint, or a number that is a safe integer.
   *
   * @example
   * stmt.setOptionInt('adbc.postgresql.batch_size_hint_bytes', 65536);
   */
  setOptionInt(key: string, value: bigint | number): void {
    options.setOptionInt(this.#conn.driver, 'Statement', this.#use('setOptionInt'), key, value);
  }

  /**
   * Sets a floating-point option (`AdbcStatementSetOptionDouble`, ADBC 1.1.0).
   *
   * @example
   * stmt.setOptionDouble('adbc.flight.sql.rpc.timeout_seconds.query', 60);
   */
  setOptionDouble(key: string, value: number): void {
    options.setOptionDouble(this.#conn.driver, 'Statement', this.#use('setOptionDouble'), key, value);
  }

  /**
   * Reads a string option (`AdbcStatementGetOption`, ADBC 1.1.0): NOT_FOUND for a key the driver does
   * not know, NOT_IMPLEMENTED where the driver has no getters.
   *
   * @example
   * const table = stmt.getOption('adbc.ingest.target_table');
   */
  getOption(key: string): string {
    return options.getOption(this.#conn.driver, 'Statement', this.#use('getOption'), key);
  }

  /**
   * Reads a bytes option (`AdbcStatementGetOptionBytes`, ADBC 1.1.0).
   *
   * @example
   * const token = stmt.getOptionBytes('adbc.my_driver.token');
   */
  getOptionBytes(key: string): Uint8Array {
    return options.getOptionBytes(this.#conn.driver, 'Statement', this.#use('getOptionBytes'), key);
  }

  /**
   * Reads an integer option (`AdbcStatementGetOptionInt`, ADBC 1.1.0), as a bigint (int64).
   *
   * @example
   * const hint = stmt.getOptionInt('adbc.postgresql.batch_size_hint_bytes');
   */
  getOptionInt(key: string): bigint {
    return options.getOptionInt(this.#conn.driver, 'Statement', this.#use('getOptionInt'), key);
  }

  /**
   * Reads a floating-point option (`AdbcStatementGetOptionDouble`, ADBC 1.1.0).
   *
   * @example
   * const progress = stmt.getOptionDouble('adbc.statement.exec.progress');
   */
  getOptionDouble(key: string): number {
    return options.getOptionDouble(this.#conn.driver, 'Statement', this.#use('getOptionDouble'), key);
  }

  /**
   * Sets several options on the connection's queue (after the calls running
   * on it), where `setOption` refuses to run beside them.
   *
   * @example
   * await stmt.setOptions({ 'adbc.ingest.target_table': 't', 'adbc.ingest.mode': IngestMode.Append });
   */
  async setOptions(options: Record<string, string>): Promise<void> {
    const p = this.#queued('setOptions');
    await this.#run(() => {
      for (const [k, v] of Object.entries(options)) this.#conn.driver.call('StatementSetOption', p, k, v);
    });
  }

  /**
   * Prepares the statement (`AdbcStatementPrepare`), for repeated execution with bound parameters.
   *
   * @example
   * await stmt.prepare();
   */
  async prepare(): Promise<void> {
    const p = this.#queued('prepare');
    await this.#run(() => this.#conn.driver.callAsync('StatementPrepare', p));
  }

  /**
   * Binds data as parameters, or as rows to ingest (with the ingestion
   * options set): `AdbcStatementBindStream`. Zero-copy: the data leaves as
   * an `ArrowArrayStream` that the driver reads during execution. An async
   * source is read first.
   *
   * @example
   * await stmt.bind(tableFromArrays({ id: Int32Array.of(1, 2) }));
   */
  async bind(data: BindSource<T> | AsyncBatchSource<T>): Promise<void> {
    return this.bindStream(data);
  }

  /**
   * `bind` under the official package's name for streams: any `BindSource`
   * (a synchronous reader is read by the driver batch by batch, while it
   * executes), or an async source (read into memory first: a C stream's
   * `get_next` cannot wait for a promise).
   *
   * @example
   * await stmt.bindStream(RecordBatchReader.from(ipcBytes));
   */
  async bindStream(data: BindSource<T> | AsyncBatchSource<T>): Promise<void> {
    this.#life.check('bindStream');
    const target = this.#conn.target;
    if (target.isAsync(data)) return this.bindStream((await target.collect(data)) as BindSource<T>);
    const p = this.#queued('bindStream');
    await this.#run(() => bindTo(this.#conn.driver, target, p, data));
  }

  /**
   * `f` on the connection's queue, the statement busy from now (not from when `f` starts): a close while
   * the call waits its turn must wait for it, or the release would free what the queued call then uses.
   */
  async #run<T>(f: () => Promise<T> | T): Promise<T> {
    const leave = this.#life.enter();
    try {
      return await this.#conn.serial.run(f);
    } finally {
      leave();
    }
  }

  /**
   * Executes the statement and returns its result (`AdbcStatementExecuteQuery`
   * on a worker thread): a reader of the driver's stream, zero-copy.
   * A statement has one result open at a time: release (or read to the
   * end) the reader before executing again.
   *
   * @example
   * const reader = await stmt.executeQuery();
   * const table = await reader.toTableAsync();
   */
  async executeQuery(options: QueryOptions = {}): Promise<T['reader']> {
    return this.runQuery(undefined, 0, options);
  }

  /**
   * @internal `executeQuery`, with the SQL set first when `sql` is given (a statement made for it), and
   * up to `readAhead` batches read in the same worker-thread call (src/adbc/run.ts): for a reader nobody
   * else holds, since those batches are read before it asks (`AdbcConnection.query` reads them all).
   * Where the native run is missing, the same calls one hop each.
   */
  async runQuery(sql: string | undefined, readAhead: number, options: QueryOptions = {}): Promise<T['reader']> {
    const p = this.#queued('executeQuery');
    if (this.#result && !this.#result.released) {
      throw new AdbcError('executeQuery', { status: AdbcStatus.INVALID_STATE, message: "executeQuery: the statement's previous result is still open: read it to the end or release it first" });
    }
    const { signal, ...importOptions } = options;
    throwIfAborted(signal);
    const { driver, serial } = this.#conn;
    const closed = this.#conn.resultOpened();
    const stream = new Lifetime('result stream', this.#life, closed);
    this.#result = stream;
    const target = this.#conn.target;
    const execute = async (): Promise<T['reader']> => {
      let inner: RecordBatchStreamImport<T['batch'], T['table'], T['schema']>;
      try {
        const opts: StreamImportOptions = {
          offThread: true,
          onProducerError: (s, e) => driver.errorFromArrayStream(s, e),
          ...this.#conn.queryDefaults,
          ...importOptions,
          target: target.stream,
        };
        const run = queryRun();
        inner = await this.#run(async () => {
          if (run !== null) return runAndImport(run, driver, p, sql, readAhead, opts, this.#conn.letGo);
          if (sql !== undefined) await driver.callAsync('StatementSetSqlQuery', p, sql);
          return importArrayStreamFrom((out) => driver.callAsync('StatementExecuteQuery', p, out, NULL), opts);
        }) as unknown as RecordBatchStreamImport<T['batch'], T['table'], T['schema']>;
      } catch (e) {
        stream.close();
        throw e;
      }
      return target.reader(new AdbcResultReader(inner, stream, serial, () => this.cancel(), signal) as never) as T['reader'];
    };
    return abortable('executeQuery', signal, execute, () => this.cancel(), (reader) => (reader as { release(): void }).release());
  }

  /**
   * Executes a statement that returns no rows (DDL, DML, ingestion) on a
   * worker thread; resolves to the rows affected (-1: unknown).
   *
   * @example
   * const n = await stmt.executeUpdate();
   */
  async executeUpdate(options: SignalOption = {}): Promise<number> {
    return this.runUpdate(undefined, options);
  }

  /**
   * @internal `executeUpdate`, with the SQL set first when `sql` is given (a statement made for it), in
   * one worker-thread call where the native run loads (src/adbc/run.ts).
   */
  async runUpdate(sql: string | undefined, options: SignalOption = {}): Promise<number> {
    const p = this.#queued('executeUpdate');
    throwIfAborted(options.signal);
    const { driver } = this.#conn;
    const execute = async (): Promise<number> => {
      const run = queryRun();
      if (run !== null) return this.#run(() => runUpdate(run, driver, p, sql, this.#conn.letGo));
      const rows = allocNative(8);
      try {
        // -1 (unknown) unless the driver writes the count, as the native run does.
        writeI64(rows, -1n);
        await this.#run(async () => {
          if (sql !== undefined) await driver.callAsync('StatementSetSqlQuery', p, sql);
          await driver.callAsync('StatementExecuteQuery', p, NULL, rows);
        });
        return Number(readI64(rows));
      } finally {
        freeNative(rows);
      }
    };
    return abortable('executeUpdate', options.signal, execute, () => this.cancel(), () => undefined);
  }

  /**
   * Executes the statement as a partitioned result (`AdbcStatementExecutePartitions`
   * on a worker thread): the schema and the partition descriptors, to read
   * with `AdbcConnection.readPartition`, here or elsewhere, one at a time or
   * several at once. Nothing stays open on the statement. ADBC leaves
   * partitioning optional: a driver without it (SQLite's, PostgreSQL's,
   * DuckDB's) rejects with an `AdbcError` of status `NOT_IMPLEMENTED`.
   *
   * @example
   * await stmt.setSqlQuery('SELECT * FROM events');
   * const { schema, partitions } = await stmt.executePartitions();
   * for (const descriptor of partitions) {
   *   for await (const batch of await conn.readPartition(descriptor)) console.log(batch.numRows);
   * }
   */
  async executePartitions(options: SignalOption = {}): Promise<PartitionedResult<T>> {
    const p = this.#queued('executePartitions');
    throwIfAborted(options.signal);
    // The descriptors are plain bytes copied out of the driver: a late result has nothing to release.
    return abortable('executePartitions', options.signal, () => this.#executePartitions(p), () => this.cancel(), () => undefined);
  }

  async #executePartitions(p: Ptr): Promise<PartitionedResult<T>> {
    const { driver } = this.#conn;
    const schemaOut = allocArrowSchema();
    const parts = allocPartitions();
    const rows = allocNative(8);
    try {
      let partitions: Uint8Array[] = [];
      await this.#run(async () => {
        try {
          await driver.callAsync('StatementExecutePartitions', p, schemaOut, parts, rows);
        } finally {
          // Copied and released on every path: the struct is the driver's until its release.
          partitions = takePartitions(parts);
        }
      });
      // A driver may not know the schema before a partition is read: Flight SQL's fills it only when the
      // server's FlightInfo carries one (arrow-go's example server sends none for a query).
      const schema = isReleased(nativeMemory(), 'ArrowSchema', schemaOut) ? undefined : this.#conn.target.schema(readSchemaPtr(nativeMemory(), schemaOut)) as T['schema'];
      return { schema, partitions, rowsAffected: Number(readI64(rows)) };
    } finally {
      freeNative(rows);
      freeNative(parts);
      freeArrowSchema(schemaOut); // releases what the read did not (one that failed), then frees
    }
  }

  /**
   * The schema the result would have, without executing (`AdbcStatementExecuteSchema`, ADBC 1.1.0; NOT_IMPLEMENTED where the driver lacks it).
   *
   * @example
   * const schema = await stmt.executeSchema();
   */
  async executeSchema(): Promise<T['schema']> {
    const p = this.#queued('executeSchema');
    return this.#schemaFrom((out) => this.#conn.driver.callAsync('StatementExecuteSchema', p, out));
  }

  /**
   * The schema of the statement's parameters (`AdbcStatementGetParameterSchema`, ADBC 1.1.0), after
   * `prepare()`: one field per parameter in order, named where the driver knows the name (else ''),
   * typed where it knows the type (else Null). NOT_IMPLEMENTED where the driver cannot tell.
   *
   * @example
   * await stmt.setSqlQuery('SELECT * FROM people WHERE id = ? AND name = ?');
   * await stmt.prepare();
   * const params = await stmt.getParameterSchema(); // two fields
   */
  async getParameterSchema(): Promise<T['schema']> {
    const p = this.#queued('getParameterSchema');
    return this.#schemaFrom((out) => this.#conn.driver.callAsync('StatementGetParameterSchema', p, out));
  }

  async #schemaFrom(fill: (out: Ptr) => Promise<void>): Promise<T['schema']> {
    return this.#conn.target.schema(await this.#run(async () => importSchemaNodeFrom(fill))) as T['schema'];
  }

  /**
   * Asks the driver to stop what runs on this statement (`AdbcStatementCancel`,
   * thread-safe in ADBC; nothing where the driver lacks it). Returns whether it was asked.
   *
   * @example
   * setTimeout(() => stmt.cancel(), 1000);
   */
  cancel(): boolean {
    if (this.#life.released || !this.#conn.driver.has('StatementCancel')) return false;
    try {
      this.#conn.driver.call('StatementCancel', this.#ptr);
      return true;
    } catch {
      return false;
    }
  }

}

/**
 * Binds `data` to statement `p`: one batch (a `RecordBatch`, a `Table` of one batch) with
 * `AdbcStatementBind`, the rest with `AdbcStatementBindStream`. adbc.h gives both; with one array the
 * driver reads the parameters where they are during the execution, where a stream is pulled through
 * `get_next` callbacks, which run on the JS thread while the driver's worker thread waits for each
 * (`npm run bench:service` prints what that costs a one-row query: its floor binds one array). A driver
 * that lacks `AdbcStatementBind`, or refuses it (NOT_IMPLEMENTED), gets the stream.
 */
function bindTo(driver: Driver, target: AdbcTarget<AdbcTypes>, p: Ptr, data: unknown): void {
  const ex = target.exports(data);
  if (ex?.single !== undefined && driver.has('StatementBind')) {
    const { schema, array } = ex.single();
    try {
      driver.call('StatementBind', p, array, schema);
      return;
    } catch (e) {
      if (!(e instanceof AdbcError && e.status === AdbcStatus.NOT_IMPLEMENTED)) throw e;
    } finally {
      freeArrowArray(array); // moved to the driver (adbc.h: it releases them): this frees our structs, or releases them if refused
      freeArrowSchema(schema);
    }
  }
  if (ex === undefined && isArrowExportable(data) && ArrowSymbols.stream in data) {
    const h = (data as ArrowStreamExportable)[ArrowSymbols.stream]();
    try {
      if (h.memory !== undefined) throw new AdbcError('bindStream', { status: AdbcStatus.INVALID_ARGUMENT, message: 'bindStream: the stream lives in a WebAssembly memory; a native driver cannot read it' });
      driver.call('StatementBindStream', p, h.address); // moves the stream out: the dispose then only frees the handle
    } finally {
      h[Symbol.dispose]();
    }
    return;
  }
  if (ex === undefined) {
    throw new AdbcError('bindStream', {
      status: AdbcStatus.INVALID_ARGUMENT,
      message: `bindStream: expected ${target.accepts}; got ${data === null ? 'null' : typeof data}`,
    });
  }
  const stream = ex.stream();
  try {
    driver.call('StatementBindStream', p, stream);
  } finally {
    freeArrowArrayStream(stream); // moved out by the driver: this frees our struct (or releases it, if the bind failed)
  }
}
