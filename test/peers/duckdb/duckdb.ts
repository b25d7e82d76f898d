/**
 * DuckDB as an independent Arrow C Data Interface peer for tests.
 *
 * A deliberately small koffi binding to DuckDB's C API (libduckdb.so from
 * @duckdb/node-bindings-linux-x64, DuckDB v1.5.6, installed by setup.sh here). It knows nothing of src/:
 * it hands out and takes raw native addresses (bigint) of `struct ArrowSchema`
 * (72 bytes) and `struct ArrowArray` (80 bytes), so a test can check our
 * importer/exporter against a producer/consumer we did not write.
 *
 * Every declaration below is copied from DuckDB's public header
 * src/include/duckdb.h (branch v1.5-variegata, the branch v1.5.6 is cut from);
 * the Arrow functions used here are all "stable: v1.5.6" there.
 *
 * Threading. DuckDB runs queries on its own worker threads, and a JS function
 * (for example our exporter's `release` callback, registered with koffi) may be
 * called from inside DuckDB. koffi runs such a callback on the JS thread, so the
 * JS thread must not sit in a synchronous native call that waits for another
 * thread to finish. Hence every call that runs a query or may release caller
 * data goes through `callAsync` (koffi's `fn.async`, on a koffi worker thread),
 * and calls on one connection are serialised with a promise chain.
 *
 * Stack size. koffi runs a native call on a stack koffi allocates itself, and
 * for `fn.async` that stack is only 128 KiB by default: a DuckDB query with ~100
 * nested expressions overflows it and the process dies with SIGSEGV. We raise
 * it to 8 MiB (DuckDB's own threads get the 8 MiB pthread default). koffi
 * refuses `koffi.config()` once any library has been loaded in the process, so
 * this must run before anything else calls `koffi.load` (import this module
 * first). If it is too late, we fall back to synchronous calls, which are safe
 * for the paths used here (see DUCKDB_ASYNC_CALLS), and warn once.
 */
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import type { KoffiFunc } from 'koffi';

// ---------------------------------------------------------------------------
// Library location and koffi configuration

const PACKAGE_LIB = 'node_modules/@duckdb/node-bindings-linux-x64/libduckdb.so';

/**
 * Where libduckdb.so is: $DUCKDB_LIBRARY_PATH, else .build/duckdb (where
 * test/peers/duckdb/setup.sh installs the package) in this module's directory
 * or an ancestor (the module also runs compiled, from .build/run), else a
 * node_modules copy. Returns the first place looked when none exists.
 */
function resolveLibrary(): string {
  const fromEnv = process.env.DUCKDB_LIBRARY_PATH;
  if (fromEnv) return fromEnv;
  const candidates: string[] = [];
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    candidates.push(join(dir, '.build/duckdb', PACKAGE_LIB));
    if (dirname(dir) === dir) break;
  }
  try {
    const require = createRequire(import.meta.url);
    candidates.push(join(dirname(require.resolve('@duckdb/node-bindings-linux-x64/package.json')), 'libduckdb.so'));
  } catch {
    // not in node_modules: the usual case since it left package.json
  }
  return candidates.find((c) => existsSync(c)) ?? join(process.cwd(), '.build/duckdb', PACKAGE_LIB);
}

/** Resolved path to libduckdb.so (override with env DUCKDB_LIBRARY_PATH). */
export const DUCKDB_LIBRARY_PATH: string = resolveLibrary();

/** Why the DuckDB tests skip when libduckdb.so is missing, and how to get it. */
export const DUCKDB_MISSING = `libduckdb.so not available at ${DUCKDB_LIBRARY_PATH}: run \`npm run setup:duckdb\` (Linux x64 only) or set DUCKDB_LIBRARY_PATH`;

const ASYNC_STACK_SIZE = 8 << 20;

function raiseAsyncStack(): boolean {
  if ((koffi.config().async_stack_size ?? 0) >= ASYNC_STACK_SIZE) return true;
  try {
    koffi.config({ async_stack_size: ASYNC_STACK_SIZE });
    return true;
  } catch {
    return false; // "Cannot change Koffi configuration once a library has been loaded"
  }
}

/**
 * true: calls that run queries or may release caller data use koffi's async form.
 * false: koffi's async stack could not be raised (a library was loaded before this
 * module), so they run synchronously on koffi's 2 MiB sync stack instead. That is
 * safe here because, on these paths, DuckDB calls `release` only on the thread that
 * called it (duckdb_destroy_data_chunk, or duckdb_data_chunk_from_arrow on error).
 */
export const DUCKDB_ASYNC_CALLS: boolean = raiseAsyncStack();
if (!DUCKDB_ASYNC_CALLS) {
  process.emitWarning(
    `koffi's async stack is ${koffi.config().async_stack_size} bytes and can no longer be raised ` +
      '(a library was loaded first): the DuckDB test peer falls back to synchronous calls',
  );
}

// ---------------------------------------------------------------------------
// Bindings

const ARROW_SCHEMA_SIZE = 72;
const ARROW_ARRAY_SIZE = 80;
const SCHEMA_RELEASE_OFFSET = 56;
const ARRAY_RELEASE_OFFSET = 64;
const DUCKDB_RESULT_SIZE = 48; // struct duckdb_result: 6 x 8 bytes
const DuckDBSuccess = 0;

type Ptr = bigint | null; // koffi 3: pointers are bigint, NULL comes back as null
type DuckDBResultValue = Record<string, unknown>; // struct duckdb_result as koffi decodes it
type Fn<T extends (...args: never[]) => unknown> = KoffiFunc<T>;

function bind(path: string) {
  const lib = koffi.load(path);
  const libc = koffi.load('libc.so.6');
  // struct duckdb_result (duckdb.h) is passed by value to duckdb_fetch_chunk. Types
  // stay anonymous: koffi type names are process-wide and src/ uses koffi too.
  const duckdb_result = koffi.struct({
    deprecated_column_count: 'uint64_t',
    deprecated_row_count: 'uint64_t',
    deprecated_rows_changed: 'uint64_t',
    deprecated_columns: 'void *',
    deprecated_error_message: 'void *',
    internal_data: 'void *',
  });
  // Handles (duckdb_database, duckdb_connection, ...) are all `struct {void*} *`:
  // declared as void * here. idx_t is uint64_t; duckdb_state and duckdb_type are int enums.
  return {
    duckdb_result,
    calloc: libc.func('void *calloc(size_t nmemb, size_t size)') as Fn<(n: number, size: number) => Ptr>,
    free: libc.func('void free(void *ptr)') as Fn<(p: bigint) => void>,

    duckdb_library_version: lib.func('const char *duckdb_library_version()') as Fn<() => string>,
    duckdb_open: lib.func('int duckdb_open(const char *path, void *out_database)') as Fn<
      (path: string | null, out: bigint) => number
    >,
    duckdb_close: lib.func('void duckdb_close(void **database)') as Fn<(db: [bigint]) => void>,
    duckdb_connect: lib.func('int duckdb_connect(void *database, void *out_connection)') as Fn<
      (db: bigint, out: bigint) => number
    >,
    duckdb_disconnect: lib.func('void duckdb_disconnect(void **connection)') as Fn<(con: [bigint]) => void>,

    duckdb_query: lib.func('int duckdb_query(void *connection, const char *query, void *out_result)') as Fn<
      (con: bigint, sql: string, outResult: bigint) => number
    >,
    duckdb_destroy_result: lib.func('void duckdb_destroy_result(void *result)') as Fn<(res: bigint) => void>,
    duckdb_result_error: lib.func('const char *duckdb_result_error(void *result)') as Fn<
      (res: bigint) => string | null
    >,
    duckdb_column_count: lib.func('uint64_t duckdb_column_count(void *result)') as Fn<(res: bigint) => number>,
    duckdb_column_name: lib.func('const char *duckdb_column_name(void *result, uint64_t col)') as Fn<
      (res: bigint, col: number) => string | null
    >,
    duckdb_column_logical_type: lib.func('void *duckdb_column_logical_type(void *result, uint64_t col)') as Fn<
      (res: bigint, col: number) => Ptr
    >,
    duckdb_result_get_arrow_options: lib.func('void *duckdb_result_get_arrow_options(void *result)') as Fn<
      (res: bigint) => Ptr
    >,
    duckdb_destroy_arrow_options: lib.func('void duckdb_destroy_arrow_options(void **arrow_options)') as Fn<
      (opts: [bigint]) => void
    >,
    duckdb_fetch_chunk: lib.func('duckdb_fetch_chunk', 'void *', [duckdb_result]) as Fn<
      (res: DuckDBResultValue) => Ptr
    >,

    duckdb_data_chunk_get_size: lib.func('uint64_t duckdb_data_chunk_get_size(void *chunk)') as Fn<
      (chunk: bigint) => number
    >,
    duckdb_data_chunk_get_column_count: lib.func('uint64_t duckdb_data_chunk_get_column_count(void *chunk)') as Fn<
      (chunk: bigint) => number
    >,
    duckdb_data_chunk_get_vector: lib.func('void *duckdb_data_chunk_get_vector(void *chunk, uint64_t col_idx)') as Fn<
      (chunk: bigint, col: number) => Ptr
    >,
    duckdb_destroy_data_chunk: lib.func('void duckdb_destroy_data_chunk(void **chunk)') as Fn<
      (chunk: [bigint]) => void
    >,
    duckdb_vector_get_column_type: lib.func('void *duckdb_vector_get_column_type(void *vector)') as Fn<
      (vec: bigint) => Ptr
    >,
    duckdb_vector_get_data: lib.func('void *duckdb_vector_get_data(void *vector)') as Fn<(vec: bigint) => Ptr>,
    duckdb_vector_get_validity: lib.func('uint64_t *duckdb_vector_get_validity(void *vector)') as Fn<
      (vec: bigint) => Ptr
    >,

    // Logical types, for turning a converted chunk's column types into SQL.
    duckdb_destroy_logical_type: lib.func('void duckdb_destroy_logical_type(void **type)') as Fn<
      (t: [bigint]) => void
    >,
    duckdb_get_type_id: lib.func('int duckdb_get_type_id(void *type)') as Fn<(t: bigint) => number>,
    duckdb_decimal_width: lib.func('uint8_t duckdb_decimal_width(void *type)') as Fn<(t: bigint) => number>,
    duckdb_decimal_scale: lib.func('uint8_t duckdb_decimal_scale(void *type)') as Fn<(t: bigint) => number>,
    duckdb_enum_dictionary_size: lib.func('uint32_t duckdb_enum_dictionary_size(void *type)') as Fn<
      (t: bigint) => number
    >,
    duckdb_enum_dictionary_value: lib.func('void *duckdb_enum_dictionary_value(void *type, uint64_t index)') as Fn<
      (t: bigint, i: number) => Ptr
    >,
    duckdb_list_type_child_type: lib.func('void *duckdb_list_type_child_type(void *type)') as Fn<(t: bigint) => Ptr>,
    duckdb_array_type_child_type: lib.func('void *duckdb_array_type_child_type(void *type)') as Fn<
      (t: bigint) => Ptr
    >,
    duckdb_array_type_array_size: lib.func('uint64_t duckdb_array_type_array_size(void *type)') as Fn<
      (t: bigint) => number
    >,
    duckdb_map_type_key_type: lib.func('void *duckdb_map_type_key_type(void *type)') as Fn<(t: bigint) => Ptr>,
    duckdb_map_type_value_type: lib.func('void *duckdb_map_type_value_type(void *type)') as Fn<(t: bigint) => Ptr>,
    duckdb_struct_type_child_count: lib.func('uint64_t duckdb_struct_type_child_count(void *type)') as Fn<
      (t: bigint) => number
    >,
    duckdb_struct_type_child_name: lib.func('void *duckdb_struct_type_child_name(void *type, uint64_t index)') as Fn<
      (t: bigint, i: number) => Ptr
    >,
    duckdb_struct_type_child_type: lib.func('void *duckdb_struct_type_child_type(void *type, uint64_t index)') as Fn<
      (t: bigint, i: number) => Ptr
    >,
    duckdb_union_type_member_count: lib.func('uint64_t duckdb_union_type_member_count(void *type)') as Fn<
      (t: bigint) => number
    >,
    duckdb_union_type_member_name: lib.func('void *duckdb_union_type_member_name(void *type, uint64_t index)') as Fn<
      (t: bigint, i: number) => Ptr
    >,
    duckdb_union_type_member_type: lib.func('void *duckdb_union_type_member_type(void *type, uint64_t index)') as Fn<
      (t: bigint, i: number) => Ptr
    >,
    duckdb_free: lib.func('void duckdb_free(void *ptr)') as Fn<(p: bigint) => void>,

    // Errors (duckdb_error_data: NULL means "no error" for the Arrow functions).
    duckdb_error_data_has_error: lib.func('bool duckdb_error_data_has_error(void *error_data)') as Fn<
      (e: bigint) => boolean
    >,
    duckdb_error_data_message: lib.func('const char *duckdb_error_data_message(void *error_data)') as Fn<
      (e: bigint) => string | null
    >,
    duckdb_destroy_error_data: lib.func('void duckdb_destroy_error_data(void **error_data)') as Fn<
      (e: [bigint]) => void
    >,

    // Arrow <-> DuckDB (duckdb.h "Functions for arrow").
    duckdb_to_arrow_schema: lib.func(
      'void *duckdb_to_arrow_schema(void *arrow_options, void **types, const char **names, uint64_t column_count, void *out_schema)',
    ) as Fn<(opts: bigint, types: bigint[], names: string[], n: number, out: bigint) => Ptr>,
    duckdb_data_chunk_to_arrow: lib.func(
      'void *duckdb_data_chunk_to_arrow(void *arrow_options, void *chunk, void *out_arrow_array)',
    ) as Fn<(opts: bigint, chunk: bigint, out: bigint) => Ptr>,
    duckdb_schema_from_arrow: lib.func(
      'void *duckdb_schema_from_arrow(void *connection, void *schema, void *out_types)',
    ) as Fn<(con: bigint, schema: bigint, out: bigint) => Ptr>,
    duckdb_data_chunk_from_arrow: lib.func(
      'void *duckdb_data_chunk_from_arrow(void *connection, void *arrow_array, void *converted_schema, void *out_chunk)',
    ) as Fn<(con: bigint, array: bigint, converted: bigint, out: bigint) => Ptr>,
    duckdb_destroy_arrow_converted_schema: lib.func(
      'void duckdb_destroy_arrow_converted_schema(void **arrow_converted_schema)',
    ) as Fn<(s: [bigint]) => void>,

    // Appender.
    duckdb_appender_create: lib.func(
      'int duckdb_appender_create(void *connection, const char *schema, const char *table, void *out_appender)',
    ) as Fn<(con: bigint, schema: string | null, table: string, out: bigint) => number>,
    duckdb_appender_error_data: lib.func('void *duckdb_appender_error_data(void *appender)') as Fn<
      (app: bigint) => Ptr
    >,
    duckdb_append_data_chunk: lib.func('int duckdb_append_data_chunk(void *appender, void *chunk)') as Fn<
      (app: bigint, chunk: bigint) => number
    >,
    duckdb_appender_close: lib.func('int duckdb_appender_close(void *appender)') as Fn<(app: bigint) => number>,
    duckdb_appender_destroy: lib.func('int duckdb_appender_destroy(void **appender)') as Fn<
      (app: [bigint]) => number
    >,
  };
}

type Native = ReturnType<typeof bind>;
let native: Native | undefined;
let loadError: unknown;

function lib(): Native {
  if (native) return native;
  if (loadError !== undefined) throw loadError;
  try {
    native = bind(DUCKDB_LIBRARY_PATH);
    return native;
  } catch (e) {
    loadError = e;
    throw e;
  }
}

/** Whether libduckdb.so exists and loads. */
export function duckdbAvailable(): boolean {
  if (!existsSync(DUCKDB_LIBRARY_PATH)) return false;
  try {
    lib();
    return true;
  } catch {
    return false;
  }
}

/** The version string of the loaded library, e.g. "v1.5.6". */
export function duckdbVersion(): string {
  return lib().duckdb_library_version();
}

// ---------------------------------------------------------------------------
// Small helpers

/** A zeroed native block (calloc), e.g. 72 bytes for an ArrowSchema, 80 for an ArrowArray. */
export function mallocStruct(size: number): bigint {
  const p = lib().calloc(1, size);
  if (p === null) throw new Error(`calloc(${size}) failed`);
  return p;
}

/** Frees a block from mallocStruct (or handed out by queryArrow). Does not call `release`. */
export function freeStruct(ptr: bigint): void {
  lib().free(ptr);
}

function readPtr(p: bigint, offset = 0): bigint | null {
  return koffi.decode(p, offset, 'void *') as bigint | null;
}

function callAsync<A extends unknown[], R>(fn: KoffiFunc<(...args: A) => R>, ...args: A): Promise<R> {
  if (!DUCKDB_ASYNC_CALLS) return new Promise<R>((resolve) => resolve(fn(...args)));
  return new Promise<R>((resolve, reject) => {
    const done = (err: unknown, res: R) => (err ? reject(err) : resolve(res));
    (fn.async as (...a: unknown[]) => void)(...args, done);
  });
}

/** Throws DuckDB's message if `err` (a duckdb_error_data) holds an error; always destroys it. */
function checkErrorData(err: bigint | null, what: string): void {
  if (err === null) return;
  const n = lib();
  const message = n.duckdb_error_data_has_error(err) ? n.duckdb_error_data_message(err) : null;
  n.duckdb_destroy_error_data([err]);
  if (message !== null) throw new Error(`${what}: ${message}`);
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function takeDuckString(p: bigint | null): string {
  if (p === null) throw new Error('DuckDB returned NULL for a name');
  const s = koffi.decode.string(p);
  lib().duckdb_free(p);
  return s;
}

/** Runs `f` with a logical type and destroys the type afterwards. */
function withType<T>(type: bigint | null, f: (t: bigint) => T): T {
  if (type === null) throw new Error('DuckDB returned a NULL logical type');
  try {
    return f(type);
  } finally {
    lib().duckdb_destroy_logical_type([type]);
  }
}

// DUCKDB_TYPE (duckdb.h) -> SQL spelling, for types that have no parameters.
const SIMPLE_TYPES: Record<number, string> = {
  1: 'BOOLEAN', 2: 'TINYINT', 3: 'SMALLINT', 4: 'INTEGER', 5: 'BIGINT',
  6: 'UTINYINT', 7: 'USMALLINT', 8: 'UINTEGER', 9: 'UBIGINT', 10: 'FLOAT', 11: 'DOUBLE',
  12: 'TIMESTAMP', 13: 'DATE', 14: 'TIME', 15: 'INTERVAL', 16: 'HUGEINT', 17: 'VARCHAR',
  18: 'BLOB', 20: 'TIMESTAMP_S', 21: 'TIMESTAMP_MS', 22: 'TIMESTAMP_NS', 27: 'UUID',
  29: 'BIT', 30: 'TIMETZ', 31: 'TIMESTAMPTZ', 32: 'UHUGEINT', 35: 'BIGNUM',
  // SQLNULL (Arrow "n"): a column cannot be of type NULL; CREATE TABLE AS makes it INTEGER too.
  36: 'INTEGER',
  39: 'TIME_NS', 40: 'GEOMETRY', 41: 'VARIANT',
};

/**
 * SQL spelling of a logical type, rebuilt from duckdb_get_type_id and the
 * type accessors: the C API has no "logical type to string". Aliases (e.g. JSON)
 * are ignored, the column gets the underlying type and the appender casts.
 */
function sqlType(t: bigint): string {
  const n = lib();
  const id = n.duckdb_get_type_id(t);
  const simple = SIMPLE_TYPES[id];
  if (simple !== undefined) return simple;
  const members = (
    count: number,
    name: (i: number) => bigint | null,
    type: (i: number) => bigint | null,
  ): string => {
    const parts: string[] = [];
    for (let i = 0; i < count; i++) parts.push(`${quoteIdent(takeDuckString(name(i)))} ${withType(type(i), sqlType)}`);
    return parts.join(', ');
  };
  switch (id) {
    case 19: // DECIMAL
      return `DECIMAL(${n.duckdb_decimal_width(t)}, ${n.duckdb_decimal_scale(t)})`;
    case 23: { // ENUM
      const values: string[] = [];
      const size = n.duckdb_enum_dictionary_size(t);
      for (let i = 0; i < size; i++) values.push(`'${takeDuckString(n.duckdb_enum_dictionary_value(t, i)).replaceAll("'", "''")}'`);
      return `ENUM(${values.join(', ')})`;
    }
    case 24: // LIST
      return `${withType(n.duckdb_list_type_child_type(t), sqlType)}[]`;
    case 33: // ARRAY (fixed size)
      return `${withType(n.duckdb_array_type_child_type(t), sqlType)}[${n.duckdb_array_type_array_size(t)}]`;
    case 25: // STRUCT
      return `STRUCT(${members(
        n.duckdb_struct_type_child_count(t),
        (i) => n.duckdb_struct_type_child_name(t, i),
        (i) => n.duckdb_struct_type_child_type(t, i),
      )})`;
    case 28: // UNION
      return `UNION(${members(
        n.duckdb_union_type_member_count(t),
        (i) => n.duckdb_union_type_member_name(t, i),
        (i) => n.duckdb_union_type_member_type(t, i),
      )})`;
    case 26: // MAP
      return `MAP(${withType(n.duckdb_map_type_key_type(t), sqlType)}, ${withType(n.duckdb_map_type_value_type(t), sqlType)})`;
    default:
      throw new Error(`no SQL spelling for DuckDB type id ${id}`);
  }
}

/** Reads one flat VARCHAR vector of `count` rows (duckdb_string_t is 16 bytes: length, then inline data or prefix+pointer). */
function readVarcharVector(vector: bigint, count: number): (string | null)[] {
  const n = lib();
  const out: (string | null)[] = [];
  if (count === 0) return out;
  const data = n.duckdb_vector_get_data(vector);
  const validityPtr = n.duckdb_vector_get_validity(vector); // NULL: all valid
  if (data === null) throw new Error('VARCHAR vector without data');
  const strings = Buffer.from(koffi.view(data, 16 * count));
  const validity = validityPtr === null ? null : Buffer.from(koffi.view(validityPtr, 8 * Math.ceil(count / 64)));
  for (let row = 0; row < count; row++) {
    if (validity !== null && (validity[row >> 3] & (1 << (row & 7))) === 0) {
      out.push(null);
      continue;
    }
    const at = row * 16;
    const len = strings.readUInt32LE(at);
    if (len <= 12) {
      out.push(strings.toString('utf8', at + 4, at + 4 + len));
    } else {
      const ptr = strings.readBigUInt64LE(at + 8);
      out.push(Buffer.from(koffi.view(ptr, len)).toString('utf8'));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// The peer

export interface OpenOptions {
  /** Runs `SET threads = n` after opening (DuckDB defaults to the number of cores). */
  threads?: number;
}

/** One in-memory DuckDB database and one connection to it. */
export class DuckDB {
  #db: bigint;
  #con: bigint;
  #closed = false;
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(db: bigint, con: bigint) {
    this.#db = db;
    this.#con = con;
  }

  static async open(options: OpenOptions = {}): Promise<DuckDB> {
    const n = lib();
    const slot = mallocStruct(8);
    try {
      // duckdb_open starts DuckDB's thread pool: async, like everything that touches threads.
      if ((await callAsync(n.duckdb_open, null, slot)) !== DuckDBSuccess) throw new Error('duckdb_open failed');
      const db = readPtr(slot)!;
      if ((await callAsync(n.duckdb_connect, db, slot)) !== DuckDBSuccess) {
        n.duckdb_close([db]);
        throw new Error('duckdb_connect failed');
      }
      const duck = new DuckDB(db, readPtr(slot)!);
      if (options.threads !== undefined) await duck.run(`SET threads = ${Math.trunc(options.threads)}`);
      return duck;
    } finally {
      freeStruct(slot);
    }
  }

  /** Serialises operations: a DuckDB connection must not be used by two threads at once. */
  #exclusive<T>(f: () => Promise<T>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error('DuckDB peer is closed'));
    const next = this.#queue.then(f, f);
    this.#queue = next.catch(() => undefined);
    return next;
  }

  /** duckdb_query into a fresh duckdb_result; rejects with DuckDB's message. Caller destroys and frees it. */
  async #query(sql: string): Promise<bigint> {
    const n = lib();
    const res = mallocStruct(DUCKDB_RESULT_SIZE);
    const state = await callAsync(n.duckdb_query, this.#con, sql, res);
    if (state !== DuckDBSuccess) {
      const message = n.duckdb_result_error(res) ?? 'duckdb_query failed';
      n.duckdb_destroy_result(res);
      freeStruct(res);
      throw new Error(message);
    }
    return res;
  }

  static #dropResult(res: bigint): void {
    lib().duckdb_destroy_result(res);
    freeStruct(res);
  }

  /** Runs `sql`, discarding any result. Rejects with DuckDB's error message on failure. */
  run(sql: string): Promise<void> {
    return this.#exclusive(async () => DuckDB.#dropResult(await this.#query(sql)));
  }

  /**
   * Rows of `sql` with every value as DuckDB's own text (its VARCHAR cast), null for SQL NULL.
   * `sql` is wrapped as `SELECT COLUMNS(*)::VARCHAR FROM (sql)`, so it must be usable as a
   * subquery (SELECT, VALUES, FROM ..., DESCRIBE, SHOW, SUMMARIZE, PIVOT, ...).
   */
  queryText(sql: string): Promise<(string | null)[][]> {
    return this.#exclusive(async () => {
      const n = lib();
      const inner = sql.trim().replace(/;+\s*$/, '');
      const res = await this.#query(`SELECT COLUMNS(*)::VARCHAR FROM (\n${inner}\n)`);
      const rows: (string | null)[][] = [];
      try {
        const columns = n.duckdb_column_count(res);
        for (;;) {
          const chunk = await callAsync(n.duckdb_fetch_chunk, koffi.decode(res, n.duckdb_result) as DuckDBResultValue);
          if (chunk === null) break;
          try {
            const count = n.duckdb_data_chunk_get_size(chunk);
            const cols: (string | null)[][] = [];
            for (let c = 0; c < columns; c++) cols.push(readVarcharVector(n.duckdb_data_chunk_get_vector(chunk, c)!, count));
            for (let r = 0; r < count; r++) rows.push(cols.map((col) => col[r]));
          } finally {
            n.duckdb_destroy_data_chunk([chunk]);
          }
        }
      } finally {
        DuckDB.#dropResult(res);
      }
      return rows;
    });
  }

  /**
   * Runs `sql` and hands the result out as Arrow C structs allocated with malloc:
   * one ArrowSchema (a struct "+s" with one child per column) and one ArrowArray
   * (a struct array) per DuckDB data chunk (up to 2048 rows each), made by
   * duckdb_to_arrow_schema / duckdb_data_chunk_to_arrow with the result's own
   * arrow options (duckdb_result_get_arrow_options, i.e. the connection settings).
   * Ownership of each struct passes to the caller: the caller calls the struct's
   * release callback (or hands it to a consumer that does) and must call
   * `freeStruct(ptr)` afterwards to free the 72/80 bytes. The arrays own copies of
   * the data: they stay valid after the result and the connection are gone.
   */
  queryArrow(sql: string): Promise<{ schema: bigint; arrays: bigint[] }> {
    return this.#exclusive(async () => {
      const n = lib();
      const res = await this.#query(sql);
      const types: bigint[] = [];
      let options: bigint | null = null;
      let schema: bigint | null = null;
      const arrays: bigint[] = [];
      let ok = false;
      try {
        const columns = n.duckdb_column_count(res);
        const names: string[] = [];
        for (let c = 0; c < columns; c++) {
          names.push(n.duckdb_column_name(res, c) ?? '');
          types.push(n.duckdb_column_logical_type(res, c)!);
        }
        options = n.duckdb_result_get_arrow_options(res);
        if (options === null) throw new Error('duckdb_result_get_arrow_options returned NULL');
        schema = mallocStruct(ARROW_SCHEMA_SIZE);
        checkErrorData(n.duckdb_to_arrow_schema(options, types, names, columns, schema), 'duckdb_to_arrow_schema');
        for (;;) {
          const chunk = await callAsync(n.duckdb_fetch_chunk, koffi.decode(res, n.duckdb_result) as DuckDBResultValue);
          if (chunk === null) break;
          const array = mallocStruct(ARROW_ARRAY_SIZE);
          arrays.push(array);
          try {
            // Copies the chunk into buffers the ArrowArray owns.
            checkErrorData(n.duckdb_data_chunk_to_arrow(options, chunk, array), 'duckdb_data_chunk_to_arrow');
          } finally {
            n.duckdb_destroy_data_chunk([chunk]);
          }
        }
        ok = true;
        return { schema, arrays };
      } finally {
        if (!ok) {
          // Release whatever was produced before the failure.
          for (const a of arrays) releaseAndFree(a, ARRAY_RELEASE_OFFSET);
          if (schema !== null) releaseAndFree(schema, SCHEMA_RELEASE_OFFSET);
        }
        if (options !== null) n.duckdb_destroy_arrow_options([options]);
        for (const t of types) n.duckdb_destroy_logical_type([t]);
        DuckDB.#dropResult(res);
      }
    });
  }

  /**
   * Creates table `name` (one identifier, quoted) from Arrow C structs: `schema`
   * goes through duckdb_schema_from_arrow, each array through
   * duckdb_data_chunk_from_arrow, and the chunks are appended with an appender.
   * Column names come from the schema's children; column types are the converted
   * chunk's logical types, spelled as SQL (see sqlType). At least one array is
   * needed (the converted schema does not expose its types). Each array must be a
   * struct array with one child per column and offset 0: DuckDB applies the parent
   * offset to the children's validity but not to their data, and ignores the
   * parent's own validity.
   *
   * Ownership, from DuckDB's src/main/capi/arrow-c.cpp (v1.5):
   * - `schema` is only read. DuckDB neither releases nor keeps it: the caller still
   *   owns it afterwards (release it, then freeStruct it).
   * - duckdb_data_chunk_from_arrow *moves* the ArrowArray: it copies the 80-byte
   *   struct into the chunk (ArrowArrayScanState::owned_data) and sets the caller's
   *   `release` to NULL; the chunk's vectors point into the Arrow buffers (zero
   *   copy for fixed-width types and strings). DuckDB calls the original `release`,
   *   on its own copy of the struct, when that chunk is destroyed
   *   (duckdb_destroy_data_chunk, which this function does right after appending;
   *   the appender copies the rows). On a conversion error DuckDB has already
   *   moved and released the array. So an exporter's `release` must not depend on
   *   the struct's address, and may run on the thread that destroys the chunk.
   *
   * State on return, success or failure: every array (with at least one child)
   * that was passed to duckdb_data_chunk_from_arrow has `release == NULL` and its
   * data has been released; arrays after a failure are untouched. The 72/80 bytes of every
   * struct remain the caller's: call release if it is not NULL, then freeStruct.
   */
  createTableFromArrow(name: string, schema: bigint, arrays: bigint[]): Promise<void> {
    return this.#exclusive(async () => {
      const n = lib();
      if (arrays.length === 0) throw new Error('createTableFromArrow needs at least one ArrowArray');
      const slot = mallocStruct(8);
      let converted: bigint | null = null;
      let appender: bigint | null = null;
      let chunk: bigint | null = null;
      try {
        checkErrorData(await callAsync(n.duckdb_schema_from_arrow, this.#con, schema, slot), 'duckdb_schema_from_arrow');
        converted = readPtr(slot)!;
        const toChunk = async (array: bigint): Promise<bigint> => {
          const err = await callAsync(n.duckdb_data_chunk_from_arrow, this.#con, array, converted!, slot);
          checkErrorData(err, 'duckdb_data_chunk_from_arrow');
          return readPtr(slot)!;
        };
        const dropChunk = async (): Promise<void> => {
          const c = chunk!;
          chunk = null;
          // May call the Arrow producer's release callback (possibly JS): async.
          await callAsync(n.duckdb_destroy_data_chunk, [c]);
        };
        const appenderError = (what: string): Error => {
          const err = n.duckdb_appender_error_data(appender!);
          checkErrorData(err, what);
          return new Error(`${what} failed`);
        };

        chunk = await toChunk(arrays[0]);
        const columns = n.duckdb_data_chunk_get_column_count(chunk);
        const childCount = Number(koffi.decode(schema, 32, 'int64_t'));
        const children = readPtr(schema, 40);
        if (childCount !== columns || children === null) throw new Error(`schema has ${childCount} children, chunk ${columns} columns`);
        const defs: string[] = [];
        for (let c = 0; c < columns; c++) {
          const child = readPtr(children, 8 * c)!;
          const colName = (koffi.decode(child, 8, 'const char *') as string | null) || `column${c}`;
          const type = withType(n.duckdb_vector_get_column_type(n.duckdb_data_chunk_get_vector(chunk, c)!), sqlType);
          defs.push(`${quoteIdent(colName)} ${type}`);
        }
        const create = await this.#query(`CREATE TABLE ${quoteIdent(name)} (${defs.join(', ')})`);
        DuckDB.#dropResult(create);

        koffi.encode(slot, 'void *', null);
        const created = await callAsync(n.duckdb_appender_create, this.#con, null, name, slot);
        appender = readPtr(slot); // set even on failure, and must be destroyed then too
        if (created !== DuckDBSuccess) throw appenderError('duckdb_appender_create');
        for (let i = 0; ; ) {
          if ((await callAsync(n.duckdb_append_data_chunk, appender!, chunk!)) !== DuckDBSuccess) {
            throw appenderError('duckdb_append_data_chunk');
          }
          await dropChunk();
          if (++i === arrays.length) break;
          chunk = await toChunk(arrays[i]);
        }
        if ((await callAsync(n.duckdb_appender_close, appender!)) !== DuckDBSuccess) throw appenderError('duckdb_appender_close');
      } finally {
        if (chunk !== null) await callAsync(n.duckdb_destroy_data_chunk, [chunk]);
        if (appender !== null) await callAsync(n.duckdb_appender_destroy, [appender]);
        if (converted !== null) n.duckdb_destroy_arrow_converted_schema([converted]);
        freeStruct(slot);
      }
    });
  }

  /**
   * duckdb_arrow_scan (deprecated in duckdb.h, but the C API's only entry that
   * takes an ArrowArrayStream): creates view `name` over the stream at `stream`.
   * The query is called with koffi's async form, like every call that may run
   * caller callbacks.
   *
   * Ownership and threads, from DuckDB's src/main/capi/arrow-c.cpp (v1.5):
   * - DuckDB never releases the stream. Each scan of the view copies the
   *   struct (FactoryGetNext: `*stream`, with its own no-op release) and calls
   *   get_next on that copy, under a lock but from its worker threads. So the
   *   caller's struct and everything it points at must stay alive and
   *   unreleased while the view may be scanned; release it afterwards.
   * - DuckDB calls get_schema once here and once per query that binds the view,
   *   and never releases the root ArrowSchema it gets (it nulls `release`):
   *   one schema leaks per call. A JS exporter sees them as live exports.
   * - The stream can be scanned once: a second scan of the view sees its end.
   */
  arrowScan(name: string, stream: bigint): Promise<void> {
    return this.#exclusive(async () => {
      const n = streamLib();
      const state = await callAsync(n.duckdb_arrow_scan, this.#con, name, stream);
      if (state !== DuckDBSuccess) throw new Error(`duckdb_arrow_scan(${name}) failed`);
    });
  }

  /** Disconnects and closes the database. Do not call while an operation is pending. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    const n = lib();
    n.duckdb_disconnect([this.#con]);
    n.duckdb_close([this.#db]);
  }
}

const ReleaseProto = koffi.proto('void', ['void *']); // void (*release)(struct ArrowSchema * / struct ArrowArray *)

/** Calls the struct's release callback (at `releaseOffset`) if set, then frees the struct. */
function releaseAndFree(struct: bigint, releaseOffset: number): void {
  const release = readPtr(struct, releaseOffset);
  if (release !== null) koffi.call(release, ReleaseProto, struct);
  freeStruct(struct);
}

// ---------------------------------------------------------------------------
// Arrow streams (added for test/stream; bound separately so `bind` stays as it is)

function bindStreams(path: string) {
  const lib = koffi.load(path);
  return {
    // duckdb_state duckdb_arrow_scan(duckdb_connection connection, const char *table_name, duckdb_arrow_stream arrow);
    duckdb_arrow_scan: lib.func('int duckdb_arrow_scan(void *connection, const char *table_name, void *arrow)') as Fn<
      (con: bigint, name: string, stream: bigint) => number
    >,
  };
}

let streams: ReturnType<typeof bindStreams> | undefined;

function streamLib(): ReturnType<typeof bindStreams> {
  lib(); // the same library, loaded and checked first
  streams ??= bindStreams(DUCKDB_LIBRARY_PATH);
  return streams;
}
