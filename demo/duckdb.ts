/**
 * The few DuckDB C API calls the demo needs, bound with koffi: what an
 * application writes to hand Arrow data to a native library and back. It
 * uses arrow-device's public API for everything Arrow (struct allocation,
 * reading out-parameters), and nothing of the test suite.
 *
 * libduckdb.so comes from the npm package @duckdb/node-bindings-linux-x64
 * (Linux x64): `npm run setup:duckdb` installs it into .build/duckdb, or set
 * DUCKDB_LIBRARY_PATH. The signatures are DuckDB's duckdb.h (v1.5).
 *
 * Every call that runs a query goes through koffi's async form: DuckDB runs
 * queries on its own threads, and when a query scans a stream exported from
 * JS those threads call back into JS, which koffi can only deliver while the
 * JS thread is free.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import { allocArrowArray, allocArrowSchema, freeArrowArray, freeArrowSchema, nativeMemory, type Ptr } from '../src/index.js';

const LIB = '.build/duckdb/node_modules/@duckdb/node-bindings-linux-x64/libduckdb.so';

/** $DUCKDB_LIBRARY_PATH, else .build/duckdb in the working directory or above this file (it also runs compiled, from .build/run). */
export function duckdbLibraryPath(): string | undefined {
  if (process.env.DUCKDB_LIBRARY_PATH) return process.env.DUCKDB_LIBRARY_PATH;
  const dirs = [process.cwd()];
  for (let d = dirname(fileURLToPath(import.meta.url)); dirname(d) !== d; d = dirname(d)) dirs.push(d);
  return dirs.map((d) => join(d, LIB)).find((p) => existsSync(p));
}

/** A bound function's async form: the arguments, then a node-style callback. */
type Fn = { async: (...args: unknown[]) => unknown };
const DUCKDB_RESULT_SIZE = 48; // struct duckdb_result: 6 x 8 bytes
const DuckDBSuccess = 0;

function bind(path: string) {
  const lib = koffi.load(path);
  // duckdb_fetch_chunk takes struct duckdb_result by value. Anonymous: koffi type names are process-wide.
  const result = koffi.struct({ a: 'uint64_t', b: 'uint64_t', c: 'uint64_t', d: 'void *', e: 'void *', internal_data: 'void *' });
  return {
    result,
    open: lib.func('int duckdb_open(const char *path, void *out_database)'),
    connect: lib.func('int duckdb_connect(void *database, void *out_connection)'),
    disconnect: lib.func('void duckdb_disconnect(void **connection)'),
    close: lib.func('void duckdb_close(void **database)'),
    query: lib.func('int duckdb_query(void *connection, const char *query, void *out_result)'),
    resultError: lib.func('const char *duckdb_result_error(void *result)'),
    destroyResult: lib.func('void duckdb_destroy_result(void *result)'),
    columnCount: lib.func('uint64_t duckdb_column_count(void *result)'),
    columnName: lib.func('const char *duckdb_column_name(void *result, uint64_t col)'),
    columnType: lib.func('void *duckdb_column_logical_type(void *result, uint64_t col)'),
    destroyType: lib.func('void duckdb_destroy_logical_type(void **type)'),
    arrowOptions: lib.func('void *duckdb_result_get_arrow_options(void *result)'),
    destroyArrowOptions: lib.func('void duckdb_destroy_arrow_options(void **arrow_options)'),
    fetchChunk: lib.func('duckdb_fetch_chunk', 'void *', [result]),
    destroyChunk: lib.func('void duckdb_destroy_data_chunk(void **chunk)'),
    toArrowSchema: lib.func('void *duckdb_to_arrow_schema(void *arrow_options, void **types, const char **names, uint64_t column_count, void *out_schema)'),
    chunkToArrow: lib.func('void *duckdb_data_chunk_to_arrow(void *arrow_options, void *chunk, void *out_arrow_array)'),
    errorMessage: lib.func('const char *duckdb_error_data_message(void *error_data)'),
    destroyError: lib.func('void duckdb_destroy_error_data(void **error_data)'),
    // Deprecated in duckdb.h, but the C API's one entry that takes an ArrowArrayStream.
    arrowScan: lib.func('int duckdb_arrow_scan(void *connection, const char *table_name, void *arrow)'),
  };
}

function callAsync(fn: Fn, ...args: unknown[]): Promise<unknown> {
  return new Promise((resolve, reject) => fn.async(...args, (err: unknown, res: unknown) => (err ? reject(err) : resolve(res))));
}

/** One in-memory database and one connection; calls are serialised (a connection is single-threaded). */
export class DuckDB {
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly c: ReturnType<typeof bind>,
    private readonly db: bigint,
    private readonly con: bigint,
  ) {}

  static async open(threads: number): Promise<DuckDB> {
    const path = duckdbLibraryPath();
    if (!path) throw new Error('libduckdb.so not found: run `npm run setup:duckdb` (Linux x64) or set DUCKDB_LIBRARY_PATH');
    const c = bind(path);
    const mem = nativeMemory();
    const slot = mem.alloc(8);
    try {
      if ((await callAsync(c.open, null, slot)) !== DuckDBSuccess) throw new Error('duckdb_open failed');
      const db = mem.readPtr(slot);
      if ((await callAsync(c.connect, db, slot)) !== DuckDBSuccess) throw new Error('duckdb_connect failed');
      const duck = new DuckDB(c, db, mem.readPtr(slot));
      await duck.run(`SET threads = ${threads}`);
      return duck;
    } finally {
      mem.free(slot);
    }
  }

  #exclusive<T>(f: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(f, f);
    this.#queue = next.catch(() => undefined);
    return next;
  }

  /** Runs `sql` into a new duckdb_result, passed to `use`, then destroyed. */
  async #query<T>(sql: string, use: (res: bigint) => Promise<T>): Promise<T> {
    const mem = nativeMemory();
    const res = mem.alloc(DUCKDB_RESULT_SIZE);
    try {
      if ((await callAsync(this.c.query, this.con, sql, res)) !== DuckDBSuccess) {
        throw new Error((this.c.resultError(res) as string | null) ?? 'duckdb_query failed');
      }
      return await use(res);
    } finally {
      this.c.destroyResult(res);
      mem.free(res);
    }
  }

  run(sql: string): Promise<void> {
    return this.#exclusive(() => this.#query(sql, async () => undefined));
  }

  /**
   * Runs `sql` and returns its result as C Data Interface structs: one
   * ArrowSchema and one ArrowArray per DuckDB chunk, in structs allocated
   * with arrow-device (DuckDB fills them; the arrays own copies of the data).
   * Hand them to `importTable`, then free the structs with freeArrowArray / freeArrowSchema.
   */
  queryArrow(sql: string): Promise<{ schema: Ptr; arrays: Ptr[] }> {
    return this.#exclusive(() =>
      this.#query(sql, async (res) => {
        const c = this.c;
        const check = (err: unknown, what: string): void => {
          if (err === null) return;
          const message = c.errorMessage(err) as string;
          c.destroyError([err]);
          throw new Error(`${what}: ${message}`);
        };
        const n = Number(c.columnCount(res));
        const names = Array.from({ length: n }, (_, i) => c.columnName(res, i) as string);
        const types = Array.from({ length: n }, (_, i) => c.columnType(res, i) as bigint);
        const options = c.arrowOptions(res) as bigint;
        const schema = allocArrowSchema();
        const arrays: Ptr[] = [];
        try {
          check(c.toArrowSchema(options, types, names, n, schema), 'duckdb_to_arrow_schema');
          for (;;) {
            const chunk = (await callAsync(c.fetchChunk, koffi.decode(res, c.result))) as bigint | null;
            if (chunk === null) break;
            arrays.push(allocArrowArray());
            try {
              check(c.chunkToArrow(options, chunk, arrays.at(-1)!), 'duckdb_data_chunk_to_arrow');
            } finally {
              c.destroyChunk([chunk]);
            }
          }
          return { schema, arrays };
        } catch (e) {
          for (const a of arrays) freeArrowArray(a);
          freeArrowSchema(schema);
          throw e;
        } finally {
          c.destroyArrowOptions([options]);
          for (const t of types) c.destroyType([t]);
        }
      }),
    );
  }

  /**
   * Makes view `name` over the ArrowArrayStream at `stream`. DuckDB never
   * releases the stream and reads it from its threads while a query scans the
   * view: release it (freeArrowArrayStream) once the queries are done.
   */
  arrowScan(name: string, stream: Ptr): Promise<void> {
    return this.#exclusive(async () => {
      if ((await callAsync(this.c.arrowScan, this.con, name, stream)) !== DuckDBSuccess) throw new Error(`duckdb_arrow_scan(${name}) failed`);
    });
  }

  close(): void {
    this.c.disconnect([this.con]);
    this.c.close([this.db]);
  }
}
