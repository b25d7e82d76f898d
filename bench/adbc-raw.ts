/**
 * What bench/adbc.bench.ts and bench/adbc-peers.bench.ts share: a database
 * as the benches open it, the raw ADBC calls of src/adbc/driver.ts (a
 * driver's own floor: its stream drained by hand, nothing imported), and
 * the peak resident size of this process around one run (Linux).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { allocArrowArrayStream, freeArrowArrayStream, nativeMemory, NULL, type Ptr, type Signature } from '../src/index.js';
import { AdbcDatabase, defaultEntrypoint, type ConnectOptions } from '../src/adbc/index.js';
import { allocHandle, Driver, freeNative, loadLibrary } from '../src/adbc/driver.js';
import type { DriverSpec } from '../test/adbc/drivers.js';

const mem = nativeMemory();
const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

/** A database as the bench opens it: a driver library and string options (every driver here takes that form). */
export interface BenchDb {
  driver: string;
  entrypoint?: string;
  databaseOptions: Record<string, string>;
}

export const open = (o: BenchDb): AdbcDatabase => new AdbcDatabase(o as ConnectOptions);

/** The spec's options in the bench's form (the specs give a driver path and string options). */
export function benchDb(spec: DriverSpec, uri: string | undefined, databaseOptions?: Record<string, string>): BenchDb {
  const o = spec.options(uri) as { driver?: unknown; entrypoint?: string; databaseOptions?: Record<string, string> };
  if (typeof o.driver !== 'string') throw new Error(`the ${spec.name} spec gives no driver path`);
  return { driver: o.driver, entrypoint: o.entrypoint, databaseOptions: databaseOptions ?? o.databaseOptions ?? {} };
}

// ---------------------------------------------------------------------------------------------
// Memory of this process

export const kib = (field: 'VmRSS' | 'VmHWM'): number => {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync('/proc/self/status', 'utf8'));
  if (!m) throw new Error(`no ${field} in /proc/self/status`);
  return Number(m[1]) * 1024;
};

/** Resets the peak resident size to the current one (Linux 4.0+); false where it cannot. */
export function resetPeak(): boolean {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
    return kib('VmHWM') <= kib('VmRSS') + (1 << 20);
  } catch {
    return false;
  }
}

/** Runs `f` once: its peak resident size over the size just before (after a full collection). */
export async function peakOf<T>(f: () => Promise<T>): Promise<{ peak: number; base: number; value: T; exact: boolean }> {
  gc();
  const exact = resetPeak();
  const base = kib('VmRSS');
  const before = exact ? base : kib('VmHWM');
  const value = await f();
  return { peak: Math.max(0, kib('VmHWM') - (exact ? base : Math.max(base, before))), base, value, exact };
}

// ---------------------------------------------------------------------------------------------
// The raw ADBC calls

const GET_NEXT: Signature = { name: 'get_next', result: 'int32', params: ['pointer', 'pointer'] };
const RELEASE: Signature = { name: 'release', result: 'void', params: ['pointer'] };

/** A database and connection through the raw ADBC calls of src/adbc/driver.ts (no module object). */
export async function rawConnection(options: BenchDb): Promise<{ d: Driver; conn: Ptr; close: () => void }> {
  const library = options.driver;
  const entry = options.entrypoint ?? defaultEntrypoint(library);
  const d = Driver.init(loadLibrary(library), entry, 'bench');
  const db = allocHandle();
  const conn = allocHandle();
  d.call('DatabaseNew', db);
  for (const [k, v] of Object.entries(options.databaseOptions)) d.call('DatabaseSetOption', db, k, v);
  await d.callAsync('DatabaseInit', db);
  d.call('ConnectionNew', conn);
  await d.callAsync('ConnectionInit', conn, db);
  return {
    d,
    conn,
    close: () => {
      d.call('ConnectionRelease', conn);
      d.call('DatabaseRelease', db);
      freeNative(conn);
      freeNative(db);
      d.release();
    },
  };
}

/** A raw statement: `f` with it, then released. */
export async function withStatement<T>(d: Driver, conn: Ptr, f: (stmt: Ptr) => Promise<T>): Promise<T> {
  const stmt = allocHandle();
  d.call('StatementNew', conn, stmt);
  try {
    return await f(stmt);
  } finally {
    d.call('StatementRelease', stmt);
    freeNative(stmt);
  }
}

/**
 * The query floor: the driver's stream drained by hand, `get_next` on a
 * worker thread as our reader's (or on the JS thread: `sync`), each array
 * released as it comes, or all kept and released at the end (`keep`), as a
 * Table keeps them. Returns the batch count.
 */
export async function drain(d: Driver, conn: Ptr, sql: string, { keep, sync }: { keep: boolean; sync: boolean }): Promise<number> {
  const lay = mem.layouts.ArrowArrayStream.offsets;
  const arr = mem.layouts.ArrowArray;
  return withStatement(d, conn, async (stmt) => {
    d.call('StatementSetSqlQuery', stmt, sql);
    const stream = allocArrowArrayStream();
    const kept: Ptr[] = [];
    let n = 0;
    try {
      await d.callAsync('StatementExecuteQuery', stmt, stream, NULL);
      const getNext = mem.readPtr(stream + BigInt(lay.get_next!));
      for (;;) {
        const out = mem.alloc(arr.size);
        const rc = (sync ? mem.call(getNext, GET_NEXT, stream, out) : await mem.callAsync(getNext, GET_NEXT, stream, out)) as number;
        const release = mem.readPtr(out + BigInt(arr.offsets.release!));
        if (rc !== 0 || release === NULL) {
          mem.free(out);
          if (rc !== 0) throw new Error(`get_next: ${rc}`);
          break;
        }
        n++;
        if (keep) kept.push(out);
        else {
          mem.call(release, RELEASE, out);
          mem.free(out);
        }
      }
    } finally {
      for (const out of kept) {
        mem.call(mem.readPtr(out + BigInt(arr.offsets.release!)), RELEASE, out);
        mem.free(out);
      }
      freeArrowArrayStream(stream);
    }
    return n;
  });
}
