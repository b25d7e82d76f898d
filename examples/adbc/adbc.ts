/**
 * A small ADBC binding over koffi: enough of the ADBC C API (Arrow Database
 * Connectivity, adbc.h, ADBC 1.1.0) to query a database into arrow-js and
 * to ingest arrow-js tables, through any ADBC driver's shared library, with
 * no driver manager: the driver's init function fills an `AdbcDriver`
 * function table, and every call goes through it. DuckDB's driver
 * (`duckdb_adbc_init` in libduckdb.so) and the SQLite driver
 * (`AdbcDriverSqliteInit` in libadbc_driver_sqlite.so) both work this way.
 *
 * What arrow-device does here (the rest is ADBC bookkeeping):
 * - `importArrayStreamFrom` allocates the `ArrowArrayStream` that
 *   `AdbcStatementExecuteQuery` fills, imports it, and releases and frees it
 *   on every error path (`Statement.executeQuery` is the fill function);
 * - `onProducerError` lets `AdbcDriver.errorFromArrayStream` ask the driver
 *   (`AdbcErrorFromArrayStream`) about a failed stream while it is live;
 * - `offThread` reads batches with the driver's blocking `get_next` on a
 *   worker thread, so the event loop keeps running;
 * - `exportArrayStream` hands an arrow-js table to `AdbcStatementBindStream`
 *   for bulk ingestion; `importSchemaFrom` reads `ConnectionGetTableSchema`.
 *
 * Threads. Calls that run a query (`ExecuteQuery`) use koffi's async form,
 * on a koffi worker thread: the JS thread stays free, and a driver that
 * reads a bound JS stream from other threads can call back into JS (koffi
 * queues those calls to the JS thread, which a synchronous call would keep
 * busy: a deadlock). The quick calls (options, init, release) are
 * synchronous. DuckDB 1.5 and SQLite read a bound stream on the thread that
 * called `ExecuteQuery` (test/examples/adbc.test.ts proves it for each with a
 * synchronous call in a child process, DuckDB with 4 threads).
 *
 * The struct layouts are written here from adbc.h (field order as there);
 * nothing of the header is copied.
 */
import koffi from 'koffi';
import type { Schema } from 'apache-arrow';
import {
  exportArrayStream, freeArrowArrayStream, importArrayStreamFrom, importSchemaFrom, nativeMemory, NULL,
  type ImportedRecordBatch, type ImportedTable, type Ptr, type RecordBatchSource, type RecordBatchStreamImport,
  type StreamImportOptions, type StreamProducerError,
} from '../../src/index.js';

/** Options of the readers of query results: arrow-device's stream options, batches as arrow-js record batches. */
export type QueryOptions = Omit<StreamImportOptions, 'view'>;

// arrow-device's native memory first: it raises koffi's async stack size (DuckDB needs more than
// koffi's 128 KiB on its worker threads), which koffi only allows before the first library loads.
const mem = nativeMemory();

// --- constants (adbc.h) ----------------------------------------------------------------------------

export const ADBC_VERSION_1_0_0 = 1_000_000;
export const ADBC_VERSION_1_1_0 = 1_001_000;

/** `AdbcStatusCode` values (adbc.h, "Error Handling"). */
export const AdbcStatus = {
  OK: 0, UNKNOWN: 1, NOT_IMPLEMENTED: 2, NOT_FOUND: 3, ALREADY_EXISTS: 4, INVALID_ARGUMENT: 5, INVALID_STATE: 6,
  INVALID_DATA: 7, INTEGRITY: 8, INTERNAL: 9, IO: 10, CANCELLED: 11, TIMEOUT: 12, UNAUTHENTICATED: 13, UNAUTHORIZED: 14,
} as const;
const statusNames = new Map<number, string>(Object.entries(AdbcStatus).map(([k, v]) => [v, k]));

/** `ADBC_ERROR_VENDOR_CODE_PRIVATE_DATA`: a 1.1.0 `AdbcError` whose `private_data` the driver may use. */
const VENDOR_CODE_PRIVATE_DATA = -0x8000_0000;

/** Ingestion modes (`ADBC_INGEST_OPTION_MODE_*`). */
export type IngestMode = 'create' | 'append' | 'replace' | 'create_append';

// --- struct layouts (adbc.h), 64-bit ---------------------------------------------------------------

/** `struct AdbcError { char* message; int32_t vendor_code; char sqlstate[5]; void (*release)(struct AdbcError*); void* private_data; struct AdbcDriver* private_driver; }` */
const ERROR = { message: 0n, vendor_code: 8n, sqlstate: 12n, release: 24n, private_data: 32n, private_driver: 40n, size: 48 } as const;
/** `struct AdbcDatabase`, `AdbcConnection`, `AdbcStatement`: `{ void* private_data; struct AdbcDriver* private_driver; }` */
const HANDLE_SIZE = 16;
/** `struct AdbcErrorDetail { const char* key; const uint8_t* value; size_t value_length; }`, returned by value. */
const ErrorDetail = koffi.struct({ key: 'uintptr_t', value: 'uintptr_t', value_length: 'size_t' });

/**
 * `struct AdbcDriver`: `private_data`, `private_manager`, then function pointers, in adbc.h's order.
 * The 1.0.0 table ends at `StatementSetSubstraitPlan`; 1.1.0 adds the rest (the struct is 58 pointers).
 */
const DRIVER_FIELDS = [
  'private_data', 'private_manager', 'release',
  'DatabaseInit', 'DatabaseNew', 'DatabaseSetOption', 'DatabaseRelease',
  'ConnectionCommit', 'ConnectionGetInfo', 'ConnectionGetObjects', 'ConnectionGetTableSchema', 'ConnectionGetTableTypes',
  'ConnectionInit', 'ConnectionNew', 'ConnectionSetOption', 'ConnectionReadPartition', 'ConnectionRelease', 'ConnectionRollback',
  'StatementBind', 'StatementBindStream', 'StatementExecuteQuery', 'StatementExecutePartitions', 'StatementGetParameterSchema',
  'StatementNew', 'StatementPrepare', 'StatementRelease', 'StatementSetOption', 'StatementSetSqlQuery', 'StatementSetSubstraitPlan',
  // ADBC 1.1.0
  'ErrorGetDetailCount', 'ErrorGetDetail', 'ErrorFromArrayStream',
  'DatabaseGetOption', 'DatabaseGetOptionBytes', 'DatabaseGetOptionDouble', 'DatabaseGetOptionInt',
  'DatabaseSetOptionBytes', 'DatabaseSetOptionDouble', 'DatabaseSetOptionInt',
  'ConnectionCancel', 'ConnectionGetOption', 'ConnectionGetOptionBytes', 'ConnectionGetOptionDouble', 'ConnectionGetOptionInt',
  'ConnectionGetStatistics', 'ConnectionGetStatisticNames', 'ConnectionSetOptionBytes', 'ConnectionSetOptionDouble',
  'ConnectionSetOptionInt',
  'StatementCancel', 'StatementExecuteSchema', 'StatementGetOption', 'StatementGetOptionBytes', 'StatementGetOptionDouble',
  'StatementGetOptionInt', 'StatementSetOptionBytes', 'StatementSetOptionDouble', 'StatementSetOptionInt',
] as const;
type DriverField = (typeof DRIVER_FIELDS)[number];
const DRIVER_SIZE = DRIVER_FIELDS.length * 8;
const driverOffset = (f: DriverField): bigint => BigInt(DRIVER_FIELDS.indexOf(f) * 8);

// The C signatures of the entries we call. Pointers travel as uintptr_t (bigint), strings as const char*.
const P = 'uintptr_t';
const PROTOS = {
  release: koffi.proto('uint8_t', [P, P]),
  DatabaseNew: koffi.proto('uint8_t', [P, P]),
  DatabaseSetOption: koffi.proto('uint8_t', [P, 'const char *', 'const char *', P]),
  DatabaseInit: koffi.proto('uint8_t', [P, P]),
  DatabaseRelease: koffi.proto('uint8_t', [P, P]),
  ConnectionNew: koffi.proto('uint8_t', [P, P]),
  ConnectionInit: koffi.proto('uint8_t', [P, P, P]),
  ConnectionRelease: koffi.proto('uint8_t', [P, P]),
  ConnectionGetTableSchema: koffi.proto('uint8_t', [P, 'const char *', 'const char *', 'const char *', P, P]),
  StatementNew: koffi.proto('uint8_t', [P, P, P]),
  StatementSetSqlQuery: koffi.proto('uint8_t', [P, 'const char *', P]),
  StatementSetOption: koffi.proto('uint8_t', [P, 'const char *', 'const char *', P]),
  StatementBindStream: koffi.proto('uint8_t', [P, P, P]),
  StatementExecuteQuery: koffi.proto('uint8_t', [P, P, P, P]),
  StatementRelease: koffi.proto('uint8_t', [P, P]),
  ErrorGetDetailCount: koffi.proto('int', [P]),
  ErrorGetDetail: koffi.proto(ErrorDetail, [P, 'int']),
  ErrorFromArrayStream: koffi.proto(P, [P, P]),
  ErrorRelease: koffi.proto('void', [P]),
} as const;
type Called = keyof typeof PROTOS;

/** A C function through koffi: callable, and `.async(...args, callback)` on a worker thread. */
type CFunction = ((...args: unknown[]) => unknown) & { async: (...args: unknown[]) => void };

function cFunction(addr: Ptr, proto: Called): CFunction {
  return koffi.decode(addr, PROTOS[proto]) as CFunction;
}

// --- errors ----------------------------------------------------------------------------------------

/** Everything an `AdbcError` carries, copied into JS. */
export interface AdbcErrorInfo {
  /** The `AdbcStatusCode`. */
  status: number;
  message: string | null;
  /** The vendor code, or null when the driver gave none (0, or the 1.1.0 marker). */
  vendorCode: number | null;
  /** The SQLSTATE (5 characters), or null. */
  sqlstate: string | null;
  /** ADBC 1.1.0 error details (`AdbcErrorGetDetail`): key -> bytes. */
  details: Map<string, Uint8Array>;
}

/** A failed ADBC call: the status code and the driver's `AdbcError`, copied at once. */
export class AdbcStatusError extends Error implements AdbcErrorInfo {
  override name = 'AdbcStatusError';
  readonly status: number;
  readonly vendorCode: number | null;
  readonly sqlstate: string | null;
  readonly details: Map<string, Uint8Array>;
  /** The driver's message, unprefixed. */
  readonly driverMessage: string | null;

  constructor(readonly operation: string, info: AdbcErrorInfo, cause?: unknown) {
    super(`${operation}: ${statusNames.get(info.status) ?? 'status'} (${info.status})${info.message ? `: ${info.message}` : ''}`, cause === undefined ? undefined : { cause });
    this.status = info.status;
    this.driverMessage = info.message;
    this.vendorCode = info.vendorCode;
    this.sqlstate = info.sqlstate;
    this.details = info.details;
  }

  /** A detail as text (ADBC details are bytes; most drivers put UTF-8 there). */
  detail(key: string): string | undefined {
    const v = this.details.get(key);
    return v === undefined ? undefined : new TextDecoder().decode(v);
  }
}

// --- the driver ------------------------------------------------------------------------------------

/**
 * An ADBC driver loaded from its shared library: its `AdbcDriver` function
 * table, filled by its init function (`AdbcDriverInitFunc`), asked for ADBC
 * 1.1.0 first, then 1.0.0.
 */
export class AdbcDriver {
  /** The ADBC version the driver accepted (`ADBC_VERSION_1_1_0` or `ADBC_VERSION_1_0_0`). */
  readonly version: number;
  readonly #table: Ptr;
  readonly #fns = new Map<DriverField, CFunction | null>();
  #released = false;
  /**
   * The loaded library, held for as long as the driver: koffi unloads a
   * library (dlclose) when its object is garbage collected, and the table's
   * function pointers do not hold it, so a driver whose library object was
   * dropped ran code that a collection could unmap mid-call (a SIGSEGV at an
   * unmapped pc, seen in a long synchronous ingest).
   */
  readonly #lib: object;

  private constructor(lib: object, table: Ptr, version: number) {
    this.#lib = lib;
    this.#table = table;
    this.version = version;
  }

  /**
   * Loads `path` and calls its init function `entrypoint` (DuckDB:
   * `duckdb_adbc_init`; SQLite: `AdbcDriverSqliteInit`, or the generic `AdbcDriverInit`).
   */
  static load(path: string, entrypoint: string): AdbcDriver {
    const lib = koffi.load(path);
    const init = lib.func(entrypoint, 'uint8_t', ['int', P, P]) as CFunction;
    let last: AdbcStatusError | undefined;
    for (const version of [ADBC_VERSION_1_1_0, ADBC_VERSION_1_0_0]) {
      const table = mem.alloc(DRIVER_SIZE);
      const err = newError();
      try {
        const status = init(version, table, err) as number;
        if (status === AdbcStatus.OK) return new AdbcDriver(lib, table, version);
        last = new AdbcStatusError(`${entrypoint}(version ${version})`, takeError(err, status, null));
      } finally {
        freeError(err);
      }
      mem.free(table);
    }
    throw last!;
  }

  /** The table entry `f`, or null when the driver leaves it NULL (or its version lacks it). */
  fn(f: DriverField, proto: Called = f as Called): CFunction | null {
    if (this.#released) throw new Error('the ADBC driver is released');
    let fn = this.#fns.get(f);
    if (fn === undefined) {
      const at = driverOffset(f);
      const addr = this.version < ADBC_VERSION_1_1_0 && at >= driverOffset('ErrorGetDetailCount') ? NULL : mem.readPtr(this.#table + at);
      fn = addr === NULL ? null : cFunction(addr, proto);
      this.#fns.set(f, fn);
    }
    return fn;
  }

  /** Calls entry `f` synchronously; throws an `AdbcStatusError` unless it returns ADBC_STATUS_OK. */
  call(f: DriverField, ...args: unknown[]): void {
    const fn = this.fn(f);
    if (!fn) throw new AdbcStatusError(f, { status: AdbcStatus.NOT_IMPLEMENTED, message: 'the driver does not provide it', vendorCode: null, sqlstate: null, details: new Map() });
    const err = newError();
    try {
      const status = fn(...args, err) as number;
      if (status !== AdbcStatus.OK) throw new AdbcStatusError(f, takeError(err, status, this));
    } finally {
      freeError(err);
    }
  }

  /**
   * Calls entry `f` on a koffi worker thread (the JS thread stays free, and
   * callbacks the driver makes into JS meanwhile can run); rejects with an
   * `AdbcStatusError` unless it returns ADBC_STATUS_OK.
   */
  callAsync(f: DriverField, ...args: unknown[]): Promise<number> {
    const fn = this.fn(f);
    if (!fn) return Promise.reject(new AdbcStatusError(f, { status: AdbcStatus.NOT_IMPLEMENTED, message: 'the driver does not provide it', vendorCode: null, sqlstate: null, details: new Map() }));
    const err = newError();
    return new Promise<number>((resolve, reject) => {
      fn.async(...args, err, (e: unknown, status: number) => {
        try {
          if (e) reject(e instanceof Error ? e : new Error(String(e)));
          else if (status !== AdbcStatus.OK) reject(new AdbcStatusError(f, takeError(err, status, this)));
          else resolve(status);
        } finally {
          freeError(err);
        }
      });
    });
  }

  /** Whether the driver implements `AdbcErrorFromArrayStream` (ADBC 1.1.0). */
  get hasErrorFromArrayStream(): boolean {
    return this.fn('ErrorFromArrayStream') !== null;
  }

  /**
   * `AdbcErrorFromArrayStream(stream, &status)`: what the driver knows about
   * the last error of a stream it made, which must be live (the
   * `onProducerError` hook of arrow-device's readers gives it so). Returns
   * an `AdbcStatusError` with the driver's status, message, SQLSTATE, vendor
   * code and details (and `cause` the stream error), or undefined when the
   * driver does not implement it or has nothing for this stream: the shape of
   * an `onProducerError` hook.
   */
  errorFromArrayStream(stream: Ptr, cause?: StreamProducerError): AdbcStatusError | undefined {
    const fn = this.fn('ErrorFromArrayStream');
    if (!fn) return undefined;
    const statusSlot = mem.alloc(8);
    try {
      const errPtr = BigInt(fn(stream, statusSlot) as bigint | number);
      if (errPtr === NULL) return undefined;
      // The error belongs to the stream (adbc.h: "The caller MUST NOT release the error").
      const info = readError(errPtr, mem.readU8(statusSlot), this);
      return new AdbcStatusError('AdbcErrorFromArrayStream', info, cause);
    } finally {
      mem.free(statusSlot);
    }
  }

  /** Opens a database: `AdbcDatabaseNew`, `AdbcDatabaseSetOption` for each option, `AdbcDatabaseInit`. */
  open(options: Record<string, string> = {}): Database {
    const db = mem.alloc(HANDLE_SIZE);
    try {
      this.call('DatabaseNew', db);
    } catch (e) {
      mem.free(db);
      throw e;
    }
    try {
      for (const [k, v] of Object.entries(options)) this.call('DatabaseSetOption', db, k, v);
      this.call('DatabaseInit', db);
    } catch (e) {
      releaseHandle(this, 'DatabaseRelease', db);
      throw e;
    }
    return new Database(this, db);
  }

  /** Calls the driver's `release`, if it has one. The driver is unusable after. */
  release(): void {
    if (this.#released) return;
    try {
      if (this.fn('release')) this.call('release', this.#table);
    } finally {
      this.#released = true;
      mem.free(this.#table);
    }
  }

  [Symbol.dispose](): void {
    this.release();
  }
}

function releaseHandle(d: AdbcDriver, f: 'DatabaseRelease' | 'ConnectionRelease' | 'StatementRelease', h: Ptr): void {
  try {
    d.call(f, h);
  } finally {
    mem.free(h);
  }
}

/** A zeroed `AdbcError` marked as ADBC 1.1.0 (so the driver may attach details). */
function newError(): Ptr {
  const e = mem.alloc(ERROR.size);
  mem.writeI32(e + ERROR.vendor_code, VENDOR_CODE_PRIVATE_DATA);
  return e;
}

function freeError(e: Ptr): void {
  mem.free(e);
}

/** Copies an error we own, then releases it (its `release`, if set). */
function takeError(e: Ptr, status: number, d: AdbcDriver | null): AdbcErrorInfo {
  try {
    return readError(e, status, d);
  } finally {
    const release = mem.readPtr(e + ERROR.release);
    if (release !== NULL) cFunction(release, 'ErrorRelease')(e);
  }
}

/** Copies an `AdbcError` into JS (the message, vendor code, SQLSTATE, and 1.1.0 details when the driver gives them). */
function readError(e: Ptr, status: number, d: AdbcDriver | null): AdbcErrorInfo {
  const msg = mem.readPtr(e + ERROR.message);
  const message = msg === NULL ? null : new TextDecoder().decode(mem.readCStringBytes(msg, 1 << 20));
  const code = mem.readI32(e + ERROR.vendor_code);
  const state = new TextDecoder().decode(mem.read(e + ERROR.sqlstate, 5)).replace(/\0+$/, '');
  const details = new Map<string, Uint8Array>();
  if (code === VENDOR_CODE_PRIVATE_DATA && d) {
    const count = d.fn('ErrorGetDetailCount');
    const get = d.fn('ErrorGetDetail');
    const n = count ? (count(e) as number) : 0;
    for (let i = 0; get && i < n; i++) {
      const det = get(e, i) as { key: bigint | number; value: bigint | number; value_length: bigint | number };
      const key = BigInt(det.key);
      if (key === NULL) continue;
      const len = Number(det.value_length);
      details.set(mem.readCString(key), len > 0 ? mem.copyOut(BigInt(det.value), len) : new Uint8Array());
    }
  }
  return { status, message, vendorCode: code === 0 || code === VENDOR_CODE_PRIVATE_DATA ? null : code, sqlstate: state === '' ? null : state, details };
}

// --- database, connection, statement ---------------------------------------------------------------

/** An `AdbcDatabase`. */
export class Database {
  #ptr: Ptr;
  constructor(readonly driver: AdbcDriver, ptr: Ptr) {
    this.#ptr = ptr;
  }

  /** A new connection: `AdbcConnectionNew`, `AdbcConnectionInit`. */
  connect(): Connection {
    const d = this.driver;
    const conn = mem.alloc(HANDLE_SIZE);
    try {
      d.call('ConnectionNew', conn);
    } catch (e) {
      mem.free(conn);
      throw e;
    }
    try {
      d.call('ConnectionInit', conn, this.#ptr);
    } catch (e) {
      releaseHandle(d, 'ConnectionRelease', conn);
      throw e;
    }
    return new Connection(d, conn);
  }

  /** `AdbcDatabaseRelease` (after every connection of it is released). */
  release(): void {
    if (this.#ptr === NULL) return;
    const p = this.#ptr;
    this.#ptr = NULL;
    releaseHandle(this.driver, 'DatabaseRelease', p);
  }

  [Symbol.dispose](): void {
    this.release();
  }
}

/** An `AdbcConnection`. */
export class Connection {
  #ptr: Ptr;
  constructor(readonly driver: AdbcDriver, ptr: Ptr) {
    this.#ptr = ptr;
  }

  /** A new statement (`AdbcStatementNew`), with its SQL set if given. */
  statement(sql?: string): Statement {
    const d = this.driver;
    const stmt = mem.alloc(HANDLE_SIZE);
    try {
      d.call('StatementNew', this.#ptr, stmt);
    } catch (e) {
      mem.free(stmt);
      throw e;
    }
    const s = new Statement(d, stmt);
    if (sql !== undefined) {
      try {
        s.setSqlQuery(sql);
      } catch (e) {
        s.release();
        throw e;
      }
    }
    return s;
  }

  /**
   * Runs `sql` and reads its whole result into an arrow-js Table (zero-copy:
   * `table.release()` gives the driver's memory back). Execution and every
   * `get_next` run on a worker thread; a driver error while streaming is
   * enriched by `AdbcErrorFromArrayStream` where the driver has it.
   */
  async query(sql: string, opts: QueryOptions = {}): Promise<ImportedTable> {
    const stmt = this.statement(sql);
    try {
      const reader = await stmt.query(opts);
      return await reader.toTableAsync();
    } finally {
      stmt.release();
    }
  }

  /** Runs a statement that returns no rows (DDL, INSERT ...); resolves to the rows affected (-1: unknown). */
  async execute(sql: string): Promise<number> {
    const stmt = this.statement(sql);
    try {
      return await stmt.executeUpdate();
    } finally {
      stmt.release();
    }
  }

  /**
   * Bulk ingestion of arrow-js data into table `target` (`adbc.ingest.target_table`,
   * `adbc.ingest.mode`): the data leaves as an `ArrowArrayStream`
   * (`exportArrayStream`, zero-copy) bound with `AdbcStatementBindStream`,
   * then `AdbcStatementExecuteQuery` with no result stream. Resolves to the
   * rows the driver says it ingested (-1: unknown).
   */
  async ingest(data: RecordBatchSource, target: string, mode: IngestMode = 'create'): Promise<number> {
    const stmt = this.statement();
    try {
      stmt.setOption('adbc.ingest.target_table', target);
      stmt.setOption('adbc.ingest.mode', `adbc.ingest.mode.${mode}`);
      stmt.bindStream(data);
      return await stmt.executeUpdate();
    } finally {
      stmt.release();
    }
  }

  /** `AdbcConnectionGetTableSchema`: the arrow-js Schema of table `name`. */
  tableSchema(name: string, catalog: string | null = null, dbSchema: string | null = null): Schema {
    return importSchemaFrom((out) => this.driver.call('ConnectionGetTableSchema', this.#ptr, catalog, dbSchema, name, out));
  }

  /** `AdbcConnectionRelease`. */
  release(): void {
    if (this.#ptr === NULL) return;
    const p = this.#ptr;
    this.#ptr = NULL;
    releaseHandle(this.driver, 'ConnectionRelease', p);
  }

  [Symbol.dispose](): void {
    this.release();
  }
}

/** An `AdbcStatement`. */
export class Statement {
  #ptr: Ptr;
  constructor(readonly driver: AdbcDriver, ptr: Ptr) {
    this.#ptr = ptr;
  }

  get ptr(): Ptr {
    if (this.#ptr === NULL) throw new Error('the ADBC statement is released');
    return this.#ptr;
  }

  /** `AdbcStatementSetSqlQuery`. */
  setSqlQuery(sql: string): void {
    this.driver.call('StatementSetSqlQuery', this.ptr, sql);
  }

  /** `AdbcStatementSetOption`. */
  setOption(key: string, value: string): void {
    this.driver.call('StatementSetOption', this.ptr, key, value);
  }

  /**
   * `AdbcStatementBindStream`: binds arrow-js data (any source
   * `exportArrayStream` takes) as the statement's parameters or, with the
   * ingestion options set, as the rows to ingest. The driver moves the
   * stream out of our struct; it releases it when done with it (at the
   * latest, `AdbcStatementRelease`).
   */
  bindStream(data: RecordBatchSource): void {
    const stream = exportArrayStream(data);
    try {
      this.driver.call('StatementBindStream', this.ptr, stream);
    } finally {
      freeArrowArrayStream(stream); // moved out by the driver: this only frees our struct (or releases it, if the bind failed)
    }
  }

  /**
   * `AdbcStatementExecuteQuery(statement, out, NULL, &error)` on a koffi
   * worker thread: the fill function for `importArrayStreamFrom`. Resolves to
   * ADBC_STATUS_OK (0) once the driver has filled `out`; rejects with an
   * `AdbcStatusError` carrying the driver's message.
   */
  executeQuery(out: Ptr): Promise<number> {
    return this.driver.callAsync('StatementExecuteQuery', this.ptr, out, NULL);
  }

  /**
   * Executes and returns the result as an arrow-device stream reader: the
   * stream is allocated, filled by `executeQuery` and imported by
   * `importArrayStreamFrom`; batches are read off the JS thread
   * (`offThread`), and a stream error is enriched by
   * `AdbcErrorFromArrayStream` (`onProducerError`). Read it before releasing
   * the statement.
   */
  query(opts: QueryOptions = {}): Promise<RecordBatchStreamImport<ImportedRecordBatch>> {
    return importArrayStreamFrom((out) => this.executeQuery(out), {
      offThread: true,
      onProducerError: (stream, error) => this.driver.errorFromArrayStream(stream, error),
      ...opts,
    });
  }

  /** `AdbcStatementExecuteQuery` with no result stream, on a worker thread: the rows affected (-1: unknown). */
  async executeUpdate(): Promise<number> {
    const rows = mem.alloc(8);
    try {
      await this.driver.callAsync('StatementExecuteQuery', this.ptr, NULL, rows);
      return Number(mem.readI64(rows));
    } finally {
      mem.free(rows);
    }
  }

  /** `AdbcStatementRelease` (releases what is still bound). */
  release(): void {
    if (this.#ptr === NULL) return;
    const p = this.#ptr;
    this.#ptr = NULL;
    releaseHandle(this.driver, 'StatementRelease', p);
  }

  [Symbol.dispose](): void {
    this.release();
  }
}
