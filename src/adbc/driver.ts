/**
 * An ADBC driver loaded from its shared library: its `struct AdbcDriver`
 * function table, filled by its init function (`AdbcDriverInitFunc`), and
 * the calls through it (adbc.h, ADBC 1.1.0; a 1.0.0 driver works without
 * the 1.1.0 entries). The struct layouts are written here from adbc.h
 * (field order as there, 64-bit); nothing of the header is copied.
 *
 * Libraries are loaded once per path and never unloaded: the release
 * callbacks of every array a driver produced live in its library, and an
 * imported batch may outlive the database it came from (the ADBC driver
 * manager does not unload drivers either).
 */
import type { LibraryHandle } from 'koffi';
import { NULL, type Ptr } from '../memory/memory.js';
import { koffi, nativeMemory, nativeWorkers } from '../memory/native.js';
import type { StreamProducerError } from '../stream/import.js';
import { AdbcError, AdbcStatus, type AdbcErrorInit } from './error.js';
import { JOB, RunStep, type RunFunction } from './run.js';

// koffi and the native memory are the library's one instance of each (src/memory/native.ts), made on
// first use, not at load: importing arrow-device/adbc loads neither. `koffi()` raises koffi's async
// stack size as it loads it (DuckDB needs more than koffi's 128 KiB on its worker threads), which koffi
// only allows before the first library loads, so every koffi call here goes through it.
const mem = nativeMemory;

export const ADBC_VERSION_1_0_0 = 1_000_000;
export const ADBC_VERSION_1_1_0 = 1_001_000;

/** `ADBC_ERROR_VENDOR_CODE_PRIVATE_DATA`: a 1.1.0 `AdbcError` whose `private_data` the driver may use. */
const VENDOR_CODE_PRIVATE_DATA = -0x8000_0000;

/** `struct AdbcError { char* message; int32_t vendor_code; char sqlstate[5]; void (*release)(struct AdbcError*); void* private_data; struct AdbcDriver* private_driver; }` */
export const ERROR = { message: 0n, vendor_code: 8n, sqlstate: 12n, release: 24n, private_data: 32n, size: 48 } as const;
/**
 * `struct AdbcPartitions { size_t num_partitions; const uint8_t** partitions; const size_t* partition_lengths;
 * void* private_data; void (*release)(struct AdbcPartitions*); }` (adbc.h, "Partitioned Results").
 */
const PARTITIONS = { num_partitions: 0n, partitions: 8n, partition_lengths: 16n, release: 32n, size: 40 } as const;
/** `struct AdbcDatabase`, `AdbcConnection`, `AdbcStatement`: `{ void* private_data; struct AdbcDriver* private_driver; }` */
export const HANDLE_SIZE = 16;

/** `struct AdbcDriver`: `private_data`, `private_manager`, then function pointers in adbc.h's order (1.0.0 ends at `StatementSetSubstraitPlan`). */
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

// The C signatures of the entries called. Pointers (strings included: they are allocated here) travel as uintptr_t.
const P = 'uintptr_t';
/** koffi's prototypes of the entries: made on the first call of an entry (`PROTOS`), not at load. */
function makeProtos(k: typeof import('koffi')) {
  /** `struct AdbcErrorDetail { const char* key; const uint8_t* value; size_t value_length; }`, returned by value. */
  const ErrorDetail = k.struct({ key: 'uintptr_t', value: 'uintptr_t', value_length: 'size_t' });
  return {
    release: k.proto('uint8_t', [P, P]),
    DatabaseNew: k.proto('uint8_t', [P, P]),
    DatabaseSetOption: k.proto('uint8_t', [P, P, P, P]),
    DatabaseSetOptionInt: k.proto('uint8_t', [P, P, 'int64_t', P]),
    DatabaseSetOptionDouble: k.proto('uint8_t', [P, P, 'double', P]),
    DatabaseInit: k.proto('uint8_t', [P, P]),
    DatabaseRelease: k.proto('uint8_t', [P, P]),
    ConnectionNew: k.proto('uint8_t', [P, P]),
    ConnectionInit: k.proto('uint8_t', [P, P, P]),
    ConnectionSetOption: k.proto('uint8_t', [P, P, P, P]),
    ConnectionCommit: k.proto('uint8_t', [P, P]),
    ConnectionRollback: k.proto('uint8_t', [P, P]),
    ConnectionCancel: k.proto('uint8_t', [P, P]),
    ConnectionGetInfo: k.proto('uint8_t', [P, P, 'size_t', P, P]),
    ConnectionGetObjects: k.proto('uint8_t', [P, 'int', P, P, P, P, P, P, P]),
    ConnectionGetTableSchema: k.proto('uint8_t', [P, P, P, P, P, P]),
    ConnectionGetTableTypes: k.proto('uint8_t', [P, P, P]),
    ConnectionRelease: k.proto('uint8_t', [P, P]),
    ConnectionReadPartition: k.proto('uint8_t', [P, P, 'size_t', P, P]),
    StatementNew: k.proto('uint8_t', [P, P, P]),
    StatementSetSqlQuery: k.proto('uint8_t', [P, P, P]),
    StatementSetOption: k.proto('uint8_t', [P, P, P, P]),
    StatementSetSubstraitPlan: k.proto('uint8_t', [P, P, 'size_t', P]),
    StatementPrepare: k.proto('uint8_t', [P, P]),
    StatementBind: k.proto('uint8_t', [P, P, P, P]),
    StatementBindStream: k.proto('uint8_t', [P, P, P]),
    StatementExecuteQuery: k.proto('uint8_t', [P, P, P, P]),
    StatementExecuteSchema: k.proto('uint8_t', [P, P, P]),
    StatementExecutePartitions: k.proto('uint8_t', [P, P, P, P, P]),
    StatementCancel: k.proto('uint8_t', [P, P]),
    StatementRelease: k.proto('uint8_t', [P, P]),
    // Options: the getters (ADBC 1.1.0) and the typed setters, on each of the three handles.
    DatabaseGetOption: k.proto('uint8_t', [P, P, P, P, P]),
    DatabaseGetOptionBytes: k.proto('uint8_t', [P, P, P, P, P]),
    DatabaseGetOptionInt: k.proto('uint8_t', [P, P, P, P]),
    DatabaseGetOptionDouble: k.proto('uint8_t', [P, P, P, P]),
    DatabaseSetOptionBytes: k.proto('uint8_t', [P, P, P, 'size_t', P]),
    ConnectionGetOption: k.proto('uint8_t', [P, P, P, P, P]),
    ConnectionGetOptionBytes: k.proto('uint8_t', [P, P, P, P, P]),
    ConnectionGetOptionInt: k.proto('uint8_t', [P, P, P, P]),
    ConnectionGetOptionDouble: k.proto('uint8_t', [P, P, P, P]),
    ConnectionSetOptionBytes: k.proto('uint8_t', [P, P, P, 'size_t', P]),
    ConnectionSetOptionInt: k.proto('uint8_t', [P, P, 'int64_t', P]),
    ConnectionSetOptionDouble: k.proto('uint8_t', [P, P, 'double', P]),
    StatementGetOption: k.proto('uint8_t', [P, P, P, P, P]),
    StatementGetOptionBytes: k.proto('uint8_t', [P, P, P, P, P]),
    StatementGetOptionInt: k.proto('uint8_t', [P, P, P, P]),
    StatementGetOptionDouble: k.proto('uint8_t', [P, P, P, P]),
    StatementSetOptionBytes: k.proto('uint8_t', [P, P, P, 'size_t', P]),
    StatementSetOptionInt: k.proto('uint8_t', [P, P, 'int64_t', P]),
    StatementSetOptionDouble: k.proto('uint8_t', [P, P, 'double', P]),
    ConnectionGetStatistics: k.proto('uint8_t', [P, P, P, P, 'int8_t', P, P]), // approximate: a C char, 0 or 1
    ConnectionGetStatisticNames: k.proto('uint8_t', [P, P, P]),
    StatementGetParameterSchema: k.proto('uint8_t', [P, P, P]),
    ErrorGetDetailCount: k.proto('int', [P]),
    ErrorGetDetail: k.proto(ErrorDetail, [P, 'int']),
    ErrorFromArrayStream: k.proto(P, [P, P]),
    ErrorRelease: k.proto('void', [P]),
    PartitionsRelease: k.proto('void', [P]),
  } as const;
}
let PROTOS: ReturnType<typeof makeProtos> | undefined;
export type Called = keyof ReturnType<typeof makeProtos>;

/** Where a driver call ran: on the JS thread (`call`) or on a worker thread (`callAsync`). */
export type CallThread = 'js' | 'worker';

/** The call log's listener, if one is set (tests): every entry called, by name, and where it ran. */
let callLog: ((f: Called, thread: CallThread) => void) | undefined;

/**
 * @internal Sets (or clears, with undefined) the listener of every driver call: what a test asserts the
 * thread of each call by, by name, not by time.
 */
export function logDriverCalls(listener: ((f: Called, thread: CallThread) => void) | undefined): void {
  callLog = listener;
}

/** An argument of a call: a pointer, a number, or a string (copied into C memory for the call; null is NULL). */
export type CArg = bigint | number | string | null | undefined | { list: readonly string[] | undefined };

/** A C function through koffi: callable, and `.async(...args, callback)` on a worker thread. */
type CFunction = ((...args: unknown[]) => unknown) & { async: (...args: unknown[]) => void };

function cFunction(addr: Ptr, proto: Called): CFunction {
  const k = koffi();
  return k.decode(addr, (PROTOS ??= makeProtos(k))[proto]) as CFunction;
}

/** A call on the package's worker threads, answered as koffi's async form answers (`cb(error, result)`). */
function onPool(call: Promise<number>, cb: (e: unknown, ret: number) => void): void {
  call.then((ret) => cb(null, ret), (e: unknown) => cb(e, 0));
}

/** Libraries loaded, by the path given to the loader: loaded once, never unloaded (see the file comment). */
const libraries = new Map<string, LibraryHandle>();

/**
 * Loads a shared library (cached). Throws koffi's error (the `dlopen`
 * message) when it cannot.
 */
export function loadLibrary(path: string): LibraryHandle {
  let lib = libraries.get(path);
  if (!lib) {
    lib = koffi().load(path);
    libraries.set(path, lib);
  }
  return lib;
}

/** C strings for the duration of a call: allocated on demand, freed together. */
class CStrings {
  readonly #ptrs: Ptr[] = [];

  str(s: string | null | undefined): Ptr {
    if (s === null || s === undefined) return NULL;
    const bytes = new TextEncoder().encode(s);
    if (bytes.includes(0)) throw new AdbcError('argument', { status: AdbcStatus.INVALID_ARGUMENT, message: `a string passed to the driver contains a NUL byte: ${JSON.stringify(s)}` });
    const p = mem().alloc(bytes.byteLength + 1); // zeroed: the NUL is there
    mem().copyIn(p, bytes);
    this.#ptrs.push(p);
    return p;
  }

  /** A NULL-terminated `const char**`, or NULL for undefined. */
  list(items: readonly string[] | undefined): Ptr {
    if (items === undefined) return NULL;
    const p = mem().alloc((items.length + 1) * 8);
    this.#ptrs.push(p);
    items.forEach((s, i) => mem().writePtr(p + BigInt(i * 8), this.str(s)));
    return p;
  }

  free(): void {
    for (const p of this.#ptrs.splice(0)) mem().free(p);
  }
}

function args(strings: CStrings, a: readonly CArg[]): unknown[] {
  return a.map((v) => (typeof v === 'object' && v !== null ? strings.list(v.list) : typeof v === 'string' || v === null || v === undefined ? strings.str(v) : v));
}

/**
 * A driver's function table. `call` and `callAsync` turn every non-OK status
 * into an `AdbcError` carrying the driver's message, SQLSTATE, vendor code
 * and details.
 */
export class Driver {
  /** The ADBC version the driver accepted (`ADBC_VERSION_1_1_0` or `ADBC_VERSION_1_0_0`). */
  readonly version: number;
  /** The library's path and init function, for messages. */
  readonly label: string;
  readonly #table: Ptr;
  readonly #fns = new Map<DriverField, CFunction | null>();
  /** Entry addresses for calls on the package's worker threads (read from the table once each). */
  readonly #addrs = new Map<Called, Ptr>();
  #released = false;

  private constructor(table: Ptr, version: number, label: string) {
    this.#table = table;
    this.version = version;
    this.label = label;
  }

  /**
   * Calls the init function at `init` (of the library at `path`) for ADBC
   * 1.1.0, then 1.0.0; throws the driver's `AdbcError` when neither is accepted.
   */
  static init(lib: LibraryHandle, entrypoint: string, label: string): Driver {
    const init = lib.func(entrypoint, 'uint8_t', ['int', P, P]) as CFunction;
    let last: AdbcError | undefined;
    for (const version of [ADBC_VERSION_1_1_0, ADBC_VERSION_1_0_0]) {
      const table = mem().alloc(DRIVER_SIZE);
      const err = newError();
      try {
        const status = (init(version, table, err) as number) & 0xff;
        if (status === AdbcStatus.OK) return new Driver(table, version, label);
        last = new AdbcError(`${entrypoint}(version ${version})`, takeError(err, status, null));
      } finally {
        mem().free(err);
      }
      mem().free(table);
    }
    throw last!;
  }

  /** The table entry `f`, or null when the driver leaves it NULL (or its version lacks it). */
  fn(f: DriverField): CFunction | null {
    if (this.#released) throw new AdbcError(f, { status: AdbcStatus.INVALID_STATE, message: `the ADBC driver (${this.label}) is released` });
    let fn = this.#fns.get(f);
    if (fn === undefined) {
      const at = driverOffset(f);
      const addr = this.version < ADBC_VERSION_1_1_0 && at >= driverOffset('ErrorGetDetailCount') ? NULL : mem().readPtr(this.#table + at);
      fn = addr === NULL ? null : cFunction(addr, f as Called);
      this.#fns.set(f, fn);
    }
    return fn;
  }

  has(f: Called): boolean {
    return this.fn(f as DriverField) !== null;
  }

  #entry(f: Called): CFunction {
    const fn = this.fn(f as DriverField);
    if (!fn) throw new AdbcError(`Adbc${f}`, { status: AdbcStatus.NOT_IMPLEMENTED, message: `Adbc${f}: the driver (${this.label}) does not implement it` });
    return fn;
  }

  /** Calls entry `f` synchronously (quick calls: options, new, release); throws an `AdbcError` unless it returns OK. */
  call(f: Called, ...a: CArg[]): void {
    callLog?.(f, 'js');
    const fn = this.#entry(f);
    const strings = new CStrings();
    const err = newError();
    try {
      const status = (fn(...args(strings, a), err) as number) & 0xff;
      if (status !== AdbcStatus.OK) throw new AdbcError(`Adbc${f}`, takeError(err, status, this));
    } finally {
      mem().free(err);
      strings.free();
    }
  }

  /**
   * Calls entry `f` on a worker thread (the package's, else koffi's): the JS thread stays free (and
   * callbacks the driver makes into JS meanwhile, such as a bound stream's
   * `get_next`, can run). Rejects with an `AdbcError` unless it returns OK.
   */
  callAsync(f: Called, ...a: CArg[]): Promise<void> {
    callLog?.(f, 'worker');
    // The pool needs the entry's address only, koffi's async form the bound function.
    let pool: ReturnType<typeof nativeWorkers>;
    let fn: CFunction | undefined;
    let addr = NULL;
    const strings = new CStrings();
    let argv: unknown[];
    try {
      pool = nativeWorkers(); // throws where ARROW_DEVICE_WORKERS is not a setting: a rejection, not a throw
      if (pool === null) fn = this.#entry(f);
      else addr = this.#address(f);
      argv = args(strings, a);
    } catch (e) {
      strings.free();
      return Promise.reject(e);
    }
    return this.#onWorker(strings, (err, cb) => (pool === null ? fn!.async(...argv, err, cb) : onPool(pool.call(addr, [...(argv as (bigint | number)[]), err]), cb)), (ret) => {
      const status = ret & 0xff;
      return status !== AdbcStatus.OK ? { failed: f, status } : { value: undefined };
    });
  }

  /**
   * The end of every call on a worker thread (`callAsync`, `run`): starts it with a fresh `AdbcError` of
   * ours, and when it returns turns what it returned into the driver's `AdbcError` (`failed`: the entry
   * whose error it is) or the value; the error and the call's strings are freed whatever happens.
   */
  #onWorker<R>(
    strings: CStrings,
    start: (err: Ptr, cb: (e: unknown, ret: number | bigint) => void) => void,
    outcome: (ret: number) => { failed: Called; status: number } | { value: R },
  ): Promise<R> {
    const err = newError();
    return new Promise<R>((resolve, reject) => {
      start(err, (e, ret) => {
        try {
          if (e) {
            reject(e instanceof Error ? e : new Error(String(e)));
            return;
          }
          const o = outcome(Number(ret));
          if ('failed' in o) reject(new AdbcError(`Adbc${o.failed}`, takeError(err, o.status, this)));
          else resolve(o.value);
        } catch (x) {
          reject(x);
        } finally {
          mem().free(err);
          strings.free();
        }
      });
    });
  }

  /**
   * @internal One native run (src/adbc/run.ts, native/adbc-run.c) on a worker thread: with `sql`,
   * `AdbcStatementSetSqlQuery` first, then `AdbcStatementExecuteQuery` and the stream calls the job
   * asks for. Rejects with the driver's `AdbcError` when either driver call fails (the call log names
   * each, on a worker thread); resolves to where the run stopped otherwise.
   */
  run(run: RunFunction, job: Ptr, stmt: Ptr, sql: string | undefined): Promise<RunResult> {
    const strings = new CStrings();
    try {
      if (sql !== undefined) callLog?.('StatementSetSqlQuery', 'worker');
      callLog?.('StatementExecuteQuery', 'worker');
      mem().writePtr(job + JOB.set_sql, sql === undefined ? NULL : this.#address('StatementSetSqlQuery'));
      mem().writePtr(job + JOB.execute, this.#address('StatementExecuteQuery'));
      mem().writePtr(job + JOB.statement, stmt);
      mem().writePtr(job + JOB.sql, sql === undefined ? NULL : strings.str(sql));
    } catch (e) {
      strings.free();
      return Promise.reject(e);
    }
    return this.#onWorker<RunResult>(strings, (err, cb) => {
      mem().writePtr(job + JOB.error, err);
      const pool = run.address === undefined ? null : nativeWorkers();
      if (pool === null) run.async(job, cb);
      else onPool(pool.call(run.address!, [job]), cb);
    }, (step) => {
      const status = Number(mem().readI64(job + JOB.status));
      if (step === RunStep.SetSql) return { failed: 'StatementSetSqlQuery', status: status & 0xff };
      if (step === RunStep.Execute) return { failed: 'StatementExecuteQuery', status: status & 0xff };
      return { value: { step, status, filled: Number(mem().readI64(job + JOB.filled)) } };
    });
  }

  /**
   * @internal `AdbcStatementRelease`'s address, for a run that releases `count` statements before its
   * query (src/adbc/run.ts): the call log names each release, on a worker thread.
   */
  releaseAddress(count: number): Ptr {
    const addr = this.#address('StatementRelease');
    for (let i = 0; i < count; i++) callLog?.('StatementRelease', 'worker');
    return addr;
  }

  /** The address of table entry `f`; NOT_IMPLEMENTED where the driver leaves it NULL. */
  #address(f: Called): Ptr {
    let addr = this.#addrs.get(f);
    if (addr === undefined || this.#released) {
      this.#entry(f); // the checks and the error of a missing entry (and of a released driver)
      addr = mem().readPtr(this.#table + driverOffset(f as DriverField));
      this.#addrs.set(f, addr);
    }
    return addr;
  }

  /**
   * `AdbcErrorFromArrayStream(stream, &status)` on a live stream the driver
   * made: an `AdbcError` with the driver's status, message, SQLSTATE, vendor
   * code and details (`cause`: the stream error), or undefined when the
   * driver does not implement it or has nothing for this stream. The shape
   * of an `onProducerError` hook.
   */
  errorFromArrayStream(stream: Ptr, cause?: StreamProducerError): AdbcError | undefined {
    const fn = this.fn('ErrorFromArrayStream');
    if (!fn) return undefined;
    const statusSlot = mem().alloc(8);
    try {
      const errPtr = BigInt(fn(stream, statusSlot) as bigint | number);
      if (errPtr === NULL) return undefined;
      // The error belongs to the stream (adbc.h: "The caller MUST NOT release the error").
      return new AdbcError('AdbcErrorFromArrayStream', readError(errPtr, mem().readU8(statusSlot), this), { cause });
    } finally {
      mem().free(statusSlot);
    }
  }

  /** Calls the driver's `release`, if it has one. The driver is unusable after. Idempotent. */
  release(): void {
    if (this.#released) return;
    try {
      if (this.fn('release')) this.call('release', this.#table);
    } finally {
      this.#released = true;
      mem().free(this.#table);
    }
  }
}

/** Where a native run stopped (`RunStep`), that step's status, and the `get_next` calls that returned 0. */
interface RunResult {
  readonly step: number;
  readonly status: number;
  readonly filled: number;
}

/** A zeroed `AdbcError` marked as ADBC 1.1.0 (so the driver may attach details). */
function newError(): Ptr {
  const e = mem().alloc(ERROR.size);
  mem().writeI32(e + ERROR.vendor_code, VENDOR_CODE_PRIVATE_DATA);
  return e;
}

/** Copies an error we own, then releases it (its `release`, if set). */
function takeError(e: Ptr, status: number, d: Driver | null): AdbcErrorInit {
  try {
    return readError(e, status, d);
  } finally {
    const release = mem().readPtr(e + ERROR.release);
    if (release !== NULL) cFunction(release, 'ErrorRelease')(e);
  }
}

const lenient = new TextDecoder('utf-8', { fatal: false });

/** Copies an `AdbcError` into JS: the message, vendor code, SQLSTATE, and 1.1.0 details when the driver gives them. */
function readError(e: Ptr, status: number, d: Driver | null): AdbcErrorInit {
  const msg = mem().readPtr(e + ERROR.message);
  const message = msg === NULL ? null : lenient.decode(mem().readCStringBytes(msg, 1 << 20));
  const code = mem().readI32(e + ERROR.vendor_code);
  const state = lenient.decode(mem().read(e + ERROR.sqlstate, 5)).replace(/\0+$/, '');
  const details = new Map<string, Uint8Array>();
  // Details only where the driver attached them: the vendor code still ours is not enough, as the ADBC
  // driver manager also requires private_data (adbc_driver_manager.cc, AdbcErrorGetDetailCount; its
  // private_driver, the manager's own bookkeeping, is `d` here). PostgreSQL's driver 1.13.0 fails
  // AdbcStatementExecutePartitions with a message and no private_data: its ErrorGetDetailCount would then
  // read through NULL (SIGSEGV).
  const attached = mem().readPtr(e + ERROR.private_data) !== NULL;
  if (code === VENDOR_CODE_PRIVATE_DATA && d && attached) {
    const count = d.fn('ErrorGetDetailCount');
    const get = d.fn('ErrorGetDetail');
    const n = count ? (count(e) as number) : 0;
    for (let i = 0; get && i < n; i++) {
      const det = get(e, i) as { key: bigint | number; value: bigint | number; value_length: bigint | number };
      const key = BigInt(det.key);
      if (key === NULL) continue;
      const len = Number(det.value_length);
      details.set(lenient.decode(mem().readCStringBytes(key, 1 << 16)), len > 0 ? mem().copyOut(BigInt(det.value), len) : new Uint8Array());
    }
  }
  return {
    status,
    message,
    vendorCode: code === 0 || code === VENDOR_CODE_PRIVATE_DATA ? undefined : code,
    sqlState: state === '' || state === '00000' ? undefined : state,
    details,
  };
}

/** Allocates a zeroed ADBC handle struct (`AdbcDatabase`, `AdbcConnection`, `AdbcStatement`). */
export function allocHandle(): Ptr {
  return mem().alloc(HANDLE_SIZE);
}

/** Frees a handle struct or any allocation of this module's memory. */
export function freeNative(p: Ptr): void {
  mem().free(p);
}

/**
 * The two releases of a database's or a connection's handle, `Lifetime`'s: on the JS thread (`closeSync()`,
 * `using`, the garbage collector) and on a worker thread (`close()`); either frees the handle after.
 */
export function handleReleases(driver: Driver, f: 'DatabaseRelease' | 'ConnectionRelease', ptr: Ptr): [() => void, () => Promise<void>] {
  return [
    () => {
      try {
        driver.call(f, ptr);
      } finally {
        freeNative(ptr);
      }
    },
    () => driver.callAsync(f, ptr).finally(() => freeNative(ptr)),
  ];
}

/** Allocates a zeroed `struct AdbcPartitions` for `AdbcStatementExecutePartitions` to fill (`takePartitions` empties it). */
export function allocPartitions(): Ptr {
  return mem().alloc(PARTITIONS.size);
}

/**
 * Copies the descriptors out of a filled `struct AdbcPartitions`, then calls
 * its `release` (adbc.h: the descriptors belong to the struct until then),
 * whether or not the copy succeeded. An unfilled struct (`release` NULL:
 * the call failed) gives no descriptors. Does not free `p`.
 */
export function takePartitions(p: Ptr): Uint8Array[] {
  const release = mem().readPtr(p + PARTITIONS.release);
  if (release === NULL) return [];
  try {
    const n = Number(mem().readI64(p + PARTITIONS.num_partitions));
    const ptrs = mem().readPtr(p + PARTITIONS.partitions);
    const lengths = mem().readPtr(p + PARTITIONS.partition_lengths);
    const out: Uint8Array[] = [];
    for (let i = 0; i < n; i++) {
      const at = mem().readPtr(ptrs + BigInt(i * 8));
      const len = Number(mem().readI64(lengths + BigInt(i * 8)));
      out.push(len > 0 ? mem().copyOut(at, len) : new Uint8Array());
    }
    return out;
  } finally {
    cFunction(release, 'PartitionsRelease')(p);
  }
}

/** Copies `bytes` into new native memory (at least one byte, so that an empty input is still a valid pointer). */
export function bytesIn(bytes: Uint8Array): Ptr {
  const p = mem().alloc(Math.max(1, bytes.byteLength));
  if (bytes.byteLength > 0) mem().copyIn(p, bytes);
  return p;
}

/** Reads an int64 out-parameter. */
export function readI64(p: Ptr): bigint {
  return mem().readI64(p);
}

/** Writes an int64 (an out-parameter's default). */
export function writeI64(p: Ptr, v: bigint): void {
  mem().writeI64(p, v);
}

/** Allocates `n` zeroed bytes. */
export function allocNative(n: number): Ptr {
  return mem().alloc(n);
}

/** Writes a `uint32_t` array (for `AdbcConnectionGetInfo`'s codes) into new memory. */
export function u32Array(values: readonly number[]): Ptr {
  const p = mem().alloc(Math.max(4, values.length * 4));
  values.forEach((v, i) => mem().writeU32(p + BigInt(i * 4), v));
  return p;
}
