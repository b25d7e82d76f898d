/**
 * A query's driver calls in one thread hop: `AdbcStatementSetSqlQuery`
 * (when the SQL is new to the statement), `AdbcStatementExecuteQuery`, the
 * stream's `get_schema` and its first `get_next` calls, made one after the
 * other on one worker thread by the package's native library
 * (native/adbc-run.c, `adbc_run`), where the plain path makes one hop per
 * call (`Driver.callAsync`, the stream import's off-thread `get_next`).
 * What the run read is handed to the stream import as if the reader had
 * read it (`StreamPrefetch`), so the results, errors and releases are the
 * same on both paths; test/adbc/run.test.ts holds them side by side.
 *
 * The library is the async ring's (src/platform/prebuilt.ts): shipped for
 * Linux and macOS. Where it is missing (Windows, another libc), or with
 * `ARROW_DEVICE_ADBC_RUN=0`, every call takes the plain path.
 */
import type { Ptr } from '../memory/memory.js';
import { koffi, nativeMemory } from '../memory/native.js';
import { isReleased, releaseStruct } from '../memory/cstruct.js';
import { envVar, runtimeName } from '../platform/node.js';
import { findPrebuilt } from '../platform/prebuilt.js';
import { invalid } from '../errors.js';
import { importArrayStreamPrefetched, type PrefetchedItem, type RecordBatchStreamImport, type StreamImportOptions, type StreamItem } from '../stream/import.js';
import { ERROR, freeNative, type Driver } from './driver.js';
import type { Serial } from './lifetime.js';
import { AdbcError, AdbcStatus } from './error.js';

/** `struct adbc_run_job` (native/adbc-run.c): every field 8 bytes, in this order. */
export const JOB = {
  set_sql: 0n, execute: 8n, statement: 16n, sql: 24n, error: 32n, stream: 40n, schema: 48n, arrays: 56n, max: 64n,
  step: 72n, status: 80n, filled: 88n, ended: 96n, rows_affected: 104n,
  release: 112n, releases: 120n, release_status: 128n, nreleases: 136n, release_error: 144n, releases_done: 152n, size: 160,
} as const;

/** A statement let go, waiting for its connection's next run to release it. */
export interface LetGoItem {
  readonly ptr: Ptr;
  /** Called when the release has returned: no argument when it returned OK, else the error. */
  readonly done: (e?: unknown) => void;
}

/**
 * The statements a connection let go after a query (`query`, `execute`: one the cache does not keep, one
 * it pushes out, the cache emptied before a DDL statement), released at the start of the connection's
 * next run, on its worker thread and in its turn (native/adbc-run.c): off the JS thread, where Flight
 * SQL's driver closes a prepared statement on the server, and without a thread hop of their own. What no
 * run takes is released when the connection closes (or is collected), and so is what comes after that
 * (a statement whose call was still running). Holds nothing of the connection.
 */
export class LetGo {
  #items: LetGoItem[] = [];
  #closed = false;

  constructor(
    readonly driver: Driver,
    readonly serial: Serial,
  ) {}

  get size(): number {
    return this.#items.length;
  }

  /** Queues the statement at `ptr`; `done` is called when it has been released (with the release's error). */
  add(ptr: Ptr, done: (e?: unknown) => void): void {
    if (this.#closed) this.#settleOffThread({ ptr, done }).catch(() => undefined);
    else this.#items.push({ ptr, done });
  }

  /** Every statement queued, for a run to release; `putBack` returns those it did not. */
  take(): LetGoItem[] {
    return this.#items.splice(0);
  }

  putBack(items: readonly LetGoItem[]): void {
    if (!this.#closed) this.#items.unshift(...items);
    else for (const it of items) this.#settleOffThread(it).catch(() => undefined);
  }

  /** The connection's `close()`: each queued statement released on a worker thread in its turn (and any that comes later). */
  closeOffThread(): Promise<void>[] {
    this.#closed = true;
    return this.take().map((it) => this.#settleOffThread(it));
  }

  /**
   * A synchronous close of the connection, or the collector's: each queued statement released on the JS
   * thread, after the call the connection runs if one does (the connection's release waits for them).
   */
  closeNow(): void {
    this.#closed = true;
    const items = this.take();
    if (items.length === 0) return;
    const { driver } = this;
    const now = (): void => {
      for (const it of items) {
        try {
          driver.call('StatementRelease', it.ptr);
          it.done();
        } catch (e) {
          it.done(e);
        } finally {
          freeNative(it.ptr);
        }
      }
    };
    this.serial.whenIdle(now)?.catch(() => undefined);
  }

  #settleOffThread(it: LetGoItem): Promise<void> {
    return releaseStatementInTurn(this.driver, this.serial, it.ptr).then(
      () => it.done(),
      (e: unknown) => {
        it.done(e);
        throw e;
      },
    );
  }
}

/** `AdbcStatementRelease` of the statement at `ptr` on a worker thread in its connection's order of calls, then its handle freed. */
export function releaseStatementInTurn(driver: Driver, serial: Serial, ptr: Ptr): Promise<void> {
  return serial.run(() => driver.callAsync('StatementRelease', ptr)).finally(() => freeNative(ptr));
}

/** Where a run stopped (`job.step`). */
export const RunStep = { Done: 0, SetSql: 1, Execute: 2, GetSchema: 3, GetNext: 4 } as const;

/** `adbc_run` through koffi: `.async(job, callback)` runs it on a worker thread. */
export type RunFunction = ((job: Ptr) => unknown) & {
  async: (job: Ptr, cb: (e: unknown, step: number | bigint) => void) => void;
  /** `adbc_run`'s address, for the package's worker threads (src/memory/workers.ts); absent from an older library. */
  address?: bigint;
};

let loaded: RunFunction | null | undefined;
let enabled = true;
/** Why runs are not used, when they are not (for tests and benchmarks to print). */
export let queryRunMissing: string | undefined;
/** @internal How many runs this thread made (tests tell the two paths apart by it). */
export const runCounters = { runs: 0 };

/** The native run, loaded once; null where it is not available (`queryRunMissing` says why) or turned off. */
export function queryRun(): RunFunction | null {
  if (loaded === undefined) loaded = load();
  return enabled ? loaded : null;
}

/** @internal Turns the native run off (false) or back on where it loads (true): tests compare both paths in one process. */
export function useQueryRun(on: boolean): void {
  enabled = on;
}

function load(): RunFunction | null {
  if (envVar('ARROW_DEVICE_ADBC_RUN') === '0') {
    queryRunMissing = 'turned off (ARROW_DEVICE_ADBC_RUN=0)';
    return null;
  }
  if (process.platform === 'win32') {
    queryRunMissing = 'no prebuilt library for Windows';
    return null;
  }
  const found = findPrebuilt();
  if ('missing' in found) {
    queryRunMissing = found.missing;
    return null;
  }
  try {
    const l = koffi().load(found.path);
    const size = Number(l.func('int64_t adbc_run_job_size(void)')() as number | bigint);
    if (size !== JOB.size) {
      queryRunMissing = `${found.path} has ${size}-byte runs; this package writes ${JOB.size}`;
      return null;
    }
    const f = l.func('int64_t adbc_run(uintptr_t job)') as unknown as RunFunction;
    try {
      f.address = BigInt(l.func('uintptr_t adbc_run_fn(void)')() as number | bigint);
    } catch {
      // A library from before the worker threads: its runs go through koffi's async form.
    }
    return f;
  } catch (e) {
    // An older library without adbc_run, one for another libc, or a Deno without --allow-ffi.
    queryRunMissing = `${found.path} gives no query run on ${runtimeName}: ${(e as Error).message}`;
    return null;
  }
}

/**
 * Executes the statement at `stmt`, which returns no rows, in one run: its SQL set first when `sql` is
 * given. Resolves to the rows affected (-1: unknown); rejects with the driver's `AdbcError`.
 */
export async function runUpdate(run: RunFunction, driver: Driver, stmt: Ptr, sql: string | undefined, letGo?: LetGo): Promise<number> {
  const m = nativeMemory();
  const job = m.alloc(JOB.size);
  let releases: { settle(): void } | undefined;
  try {
    releases = withReleases(driver, job, letGo);
    runCounters.runs++;
    await driver.run(run, job, stmt, sql);
    return Number(m.readI64(job + JOB.rows_affected));
  } finally {
    releases?.settle();
    m.free(job);
  }
}

/**
 * Hands the statements `letGo` holds to the run at `job` (AdbcStatementRelease of each, first); `settle()`,
 * once the run has returned (or failed to start), settles each released one, frees its handle, and puts
 * back the rest for the next run.
 */
function withReleases(driver: Driver, job: Ptr, letGo: LetGo | undefined): { settle(): void } {
  const items = letGo === undefined || letGo.size === 0 ? [] : letGo.take();
  if (items.length === 0) return { settle() {} };
  const m = nativeMemory();
  const list = m.alloc(items.length * 16); // the handles, then a status each
  const statuses = list + BigInt(items.length * 8);
  const error = m.alloc(ERROR.size); // zeroed: an ADBC 1.0 error, no details
  try {
    items.forEach((it, i) => m.writePtr(list + BigInt(i * 8), it.ptr));
    m.writePtr(job + JOB.release, driver.releaseAddress(items.length));
    m.writePtr(job + JOB.releases, list);
    m.writePtr(job + JOB.release_status, statuses);
    m.writeI64(job + JOB.nreleases, BigInt(items.length));
    m.writePtr(job + JOB.release_error, error);
  } catch (e) {
    m.free(list);
    m.free(error);
    letGo!.putBack(items);
    throw e;
  }
  return {
    settle() {
      try {
        const done = Number(m.readI64(job + JOB.releases_done));
        letGo!.putBack(items.slice(done));
        for (let i = 0; i < done; i++) {
          const status = Number(m.readI64(statuses + BigInt(i * 8))) & 0xff;
          try {
            freeNative(items[i]!.ptr);
          } finally {
            // The driver's message was given back in the run: the status is what is left to say.
            items[i]!.done(status === AdbcStatus.OK ? undefined : new AdbcError('AdbcStatementRelease', { status, message: `AdbcStatementRelease: status ${status}` }));
          }
        }
      } finally {
        m.free(list);
        m.free(error);
      }
    },
  };
}

/**
 * Executes the statement at `stmt` in one run: its SQL set first when `sql` is given, then the
 * execution, the schema and up to `readAhead` batches, and imports the result stream with what was
 * read. Rejects with the driver's `AdbcError` when setting the SQL or the execution fails (nothing is
 * left to release then); a failed `get_schema` fails the import as it would on the plain path, a failed
 * `get_next` fails the reader's step that reaches it.
 */
export async function runAndImport(
  run: RunFunction, driver: Driver, stmt: Ptr, sql: string | undefined, readAhead: number, opts: StreamImportOptions, letGo?: LetGo,
): Promise<RecordBatchStreamImport<StreamItem>> {
  const m = nativeMemory();
  const L = m.layouts;
  const stream = m.alloc(L.ArrowArrayStream.size);
  const schema = m.alloc(L.ArrowSchema.size);
  const arrays: Ptr[] = [];
  const job = m.alloc(JOB.size);
  const list = m.alloc(Math.max(1, readAhead) * 8);
  let taken = 0; // arrays handed to the import (the rest are freed here)
  let schemaTaken = false;
  let releases: { settle(): void } | undefined;
  try {
    releases = withReleases(driver, job, letGo);
    for (let i = 0; i < readAhead; i++) {
      const a = m.alloc(L.ArrowArray.size);
      arrays.push(a);
      m.writePtr(list + BigInt(i * 8), a);
    }
    m.writePtr(job + JOB.schema, schema);
    m.writePtr(job + JOB.stream, stream);
    m.writePtr(job + JOB.arrays, list);
    m.writeI64(job + JOB.max, BigInt(readAhead));
    runCounters.runs++;
    const r = await driver.run(run, job, stmt, sql);
    if (isReleased(m, 'ArrowArrayStream', stream)) {
      // The words of the plain path's fill-and-import (src/fill/fill.ts), so that both paths say the same.
      throw invalid('stream', 'the fill function succeeded but left the ArrowArrayStream unfilled (its release is NULL)');
    }
    const items: PrefetchedItem[] = [];
    if (r.step === RunStep.Done || r.step === RunStep.GetNext) {
      for (let i = 0; i < r.filled; i++) items.push({ out: arrays[i]!, rc: 0 });
      if (r.step === RunStep.GetNext) items.push({ out: arrays[r.filled]!, rc: r.status });
    }
    taken = items.length;
    schemaTaken = true;
    // The import owns the schema and the items from here, and moves the stream out of `stream`.
    return importArrayStreamPrefetched(stream, opts, { schema: { slot: schema, rc: r.step === RunStep.GetSchema ? r.status : 0 }, items });
  } catch (e) {
    // The execution failed (the driver left the stream unfilled), or the stream came unfilled: a stream
    // the driver did fill anyway is released here, once.
    if (!schemaTaken) releaseStruct(m, 'ArrowArrayStream', stream);
    throw e;
  } finally {
    releases?.settle();
    if (!schemaTaken) m.free(schema);
    for (let i = taken; i < arrays.length; i++) m.free(arrays[i]!);
    m.free(list);
    m.free(job);
    m.free(stream);
  }
}
