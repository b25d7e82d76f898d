/**
 * Arrow C++ as an independent peer for tests: a koffi binding of
 * test/peers/arrow-cpp/shim.cc, a small C shim over the libarrow of the
 * pyarrow wheel (built by test/peers/arrow-cpp/setup.sh into
 * .build/arrow-cpp/libarrow_shim.so). It knows nothing of src/: it hands out
 * and takes raw native addresses (bigint) of the C structs, so a test can
 * check our importer/exporter against the reference implementation.
 *
 * Ownership. Arrow C++ imports *move* the structs handed to it (release is
 * NULL afterwards, on success and on failure); exports write into structs the
 * caller provides (`callocStruct`), which the caller releases (or hands to a
 * consumer that does) and frees with `freeStruct`. A `Batches` handle keeps
 * Arrow's references to what it read or imported until `free()`; exports
 * from it stay valid after that (Arrow keeps the buffers for them).
 *
 * Threading. Importing a stream calls the producer's `get_next` on the
 * calling thread; Arrow's async producer runs on a thread the shim starts,
 * and Arrow's async consumer extracts data on Arrow's CPU thread pool. When
 * the other side is JS (koffi-registered callbacks), those calls are queued
 * to the JS thread, so the JS thread must not sit in a synchronous native
 * call that waits for them: the stream and async paths use koffi's async
 * form (`fn.async`, on a koffi worker thread) and return promises.
 *
 * Known deviations of Arrow C++ (26.0.1) from the spec, tolerated by the
 * tests and not to be copied (CDeviceDataInterface.rst, async section):
 * - `ArrowAsyncProducer.cancel` ends with `on_error(EINVAL, ...)`, though a
 *   successful cancel should not call `on_error`;
 * - `ArrowAsyncTask.extract_data` always returns 0;
 * - `ArrowAsyncProducer.request` does not reject `n <= 0` through `on_error`;
 * - on import, Arrow never waits on an `ArrowDeviceArray`'s `sync_event`;
 * - found here: the `release` of a handler made by
 *   `CreateAsyncDeviceStreamHandler` does not mark the handler released (it
 *   leaves `release` set, so a second call frees twice); the shim wraps it.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import type { KoffiFunc } from 'koffi';

/** Where setup.sh puts the shim (override with env ARROW_CPP_SHIM_PATH). */
export const ARROW_CPP_SHIM_PATH: string =
  process.env.ARROW_CPP_SHIM_PATH ?? fileURLToPath(new URL('../../../.build/arrow-cpp/libarrow_shim.so', import.meta.url));

/** The command that builds the shim. */
export const ARROW_CPP_SETUP = 'test/peers/arrow-cpp/setup.sh (or npm run setup:arrow-cpp)';

// Struct sizes on 64-bit targets (arrow/c/abi.h).
export const SIZEOF = {
  ArrowSchema: 72,
  ArrowArray: 80,
  ArrowDeviceArray: 128,
  ArrowArrayStream: 40,
  ArrowDeviceArrayStream: 48,
  ArrowAsyncDeviceStreamHandler: 48,
} as const;

// koffi runs `fn.async` calls on stacks of its own (128 KiB by default); Arrow's
// recursive import of nested types is happier with more. Only possible before
// the first library is loaded in the process; src/memory/native.ts does the same.
try {
  if ((koffi.config().async_stack_size ?? 0) < 8 << 20) koffi.config({ async_stack_size: 8 << 20 });
} catch {
  // a library was loaded first: keep koffi's setting
}

type Ptr = bigint | null; // koffi 3: pointers are bigint, NULL is null
type Fn<T extends (...args: never[]) => unknown> = KoffiFunc<T>;
type Err = Ptr; // a malloc'd error string, or NULL

function bind(path: string) {
  const lib = koffi.load(path);
  const libc = koffi.load('libc.so.6');
  // Handles and structs are all `void *` here: koffi type names are process-wide.
  return {
    calloc: libc.func('void *calloc(size_t nmemb, size_t size)') as Fn<(n: number, size: number) => Ptr>,
    free: libc.func('void free(void *ptr)') as Fn<(p: bigint) => void>,

    free_error: lib.func('void arrow_shim_free_error(void *error)') as Fn<(e: bigint) => void>,
    version: lib.func('const char *arrow_shim_arrow_version()') as Fn<() => string>,
    pool_bytes: lib.func('int64_t arrow_shim_pool_bytes()') as Fn<() => number>,

    batches_free: lib.func('void arrow_shim_batches_free(void *h)') as Fn<(h: bigint) => void>,
    batches_count: lib.func('int64_t arrow_shim_batches_count(void *h)') as Fn<(h: bigint) => number>,
    read_ipc_file: lib.func('void *arrow_shim_read_ipc_file(const char *path, _Out_ void **out)') as Fn<
      (path: string, out: [Ptr]) => Err
    >,
    import: lib.func('void *arrow_shim_import(void *schema, void **arrays, int64_t n, _Out_ void **out)') as Fn<
      (schema: bigint, arrays: bigint[], n: number, out: [Ptr]) => Err
    >,
    import_device: lib.func(
      'void *arrow_shim_import_device(void *schema, void **arrays, int64_t n, _Out_ void **out)',
    ) as Fn<(schema: bigint, arrays: bigint[], n: number, out: [Ptr]) => Err>,
    import_stream: lib.func('void *arrow_shim_import_stream(void *stream, _Out_ void **out)') as Fn<
      (stream: bigint, out: [Ptr]) => Err
    >,
    import_device_stream: lib.func('void *arrow_shim_import_device_stream(void *stream, _Out_ void **out)') as Fn<
      (stream: bigint, out: [Ptr]) => Err
    >,
    export_schema: lib.func('void *arrow_shim_export_schema(void *h, void *out)') as Fn<(h: bigint, out: bigint) => Err>,
    export_batch: lib.func('void *arrow_shim_export_batch(void *h, int64_t i, void *out)') as Fn<
      (h: bigint, i: number, out: bigint) => Err
    >,
    export_device_batch: lib.func('void *arrow_shim_export_device_batch(void *h, int64_t i, void *out)') as Fn<
      (h: bigint, i: number, out: bigint) => Err
    >,
    export_stream: lib.func('void *arrow_shim_export_stream(void *h, void *out)') as Fn<(h: bigint, out: bigint) => Err>,
    export_device_stream: lib.func('void *arrow_shim_export_device_stream(void *h, void *out)') as Fn<
      (h: bigint, out: bigint) => Err
    >,
    equals: lib.func('void *arrow_shim_equals(void *expected, void *actual, int exact_batches)') as Fn<
      (e: bigint, a: bigint, exactBatches: number) => Err
    >,
    slice: lib.func('void *arrow_shim_slice(void *h, int64_t offset, int64_t length, _Out_ void **out)') as Fn<
      (h: bigint, offset: number, length: number, out: [Ptr]) => Err
    >,
    to_string: lib.func('void *arrow_shim_batches_to_string(void *h)') as Fn<(h: bigint) => Ptr>,

    async_produce: lib.func('void *arrow_shim_async_produce(void *h, void *handler, _Out_ void **out)') as Fn<
      (h: bigint, handler: bigint, out: [Ptr]) => Err
    >,
    async_producer_wait: lib.func('void *arrow_shim_async_producer_wait(void *p)') as Fn<(p: bigint) => Err>,
    async_consumer_new: lib.func('void *arrow_shim_async_consumer_new(uint64_t queue_size, _Out_ void **out)') as Fn<
      (queueSize: number, out: [Ptr]) => Err
    >,
    async_consumer_handler: lib.func('void *arrow_shim_async_consumer_handler(void *c)') as Fn<(c: bigint) => Ptr>,
    async_consumer_collect: lib.func('void *arrow_shim_async_consumer_collect(void *c, _Out_ void **out)') as Fn<
      (c: bigint, out: [Ptr]) => Err
    >,
    async_consumer_free: lib.func('void arrow_shim_async_consumer_free(void *c)') as Fn<(c: bigint) => void>,
  };
}

type Native = ReturnType<typeof bind>;
let native: Native | undefined;
let loadError: Error | undefined;

function lib(): Native {
  if (native) return native;
  if (loadError) throw loadError;
  try {
    native = bind(ARROW_CPP_SHIM_PATH);
    return native;
  } catch (e) {
    loadError = new Error(`cannot load ${ARROW_CPP_SHIM_PATH}: ${(e as Error).message}`);
    throw loadError;
  }
}

/** Why the Arrow C++ peer cannot be used (no shim built, or it does not load), or undefined when it can. */
export function arrowCppMissing(): string | undefined {
  if (!existsSync(ARROW_CPP_SHIM_PATH)) return `Arrow C++ shim not built (${ARROW_CPP_SHIM_PATH}); run ${ARROW_CPP_SETUP}`;
  try {
    lib();
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Whether the shim is built and loads (see `arrowCppMissing` for the reason when not). */
export function arrowCppAvailable(): boolean {
  return arrowCppMissing() === undefined;
}

/** The Arrow C++ version of the wheel, e.g. "26.0.1". */
export function arrowCppVersion(): string {
  return lib().version();
}

/** Bytes allocated in Arrow's default memory pool (Arrow's exports keep their private data there too). */
export function arrowCppPoolBytes(): number {
  return Number(lib().pool_bytes());
}

/** A zeroed native block (calloc) for a struct, e.g. `callocStruct(SIZEOF.ArrowSchema)`. */
export function callocStruct(size: number): bigint {
  const p = lib().calloc(1, size);
  if (p === null) throw new Error(`calloc(${size}) failed`);
  return p;
}

/** Frees a block from callocStruct. Does not call `release`. */
export function freeStruct(ptr: bigint): void {
  lib().free(ptr);
}

const ReleaseProto = koffi.proto('void', ['void *']); // void (*release)(struct X *)
const RELEASE_OFFSET = { ArrowSchema: 56, ArrowArray: 64, ArrowDeviceArray: 64, ArrowArrayStream: 24, ArrowDeviceArrayStream: 32 };

/** Calls the struct's release callback if it is set (a struct not handed to any consumer), then frees it. */
export function releaseAndFree(ptr: bigint, kind: keyof typeof RELEASE_OFFSET): void {
  const release = koffi.decode(ptr, RELEASE_OFFSET[kind], 'void *') as Ptr;
  if (release !== null) koffi.call(release, ReleaseProto, ptr);
  freeStruct(ptr);
}

/** Throws the shim's error message, if any, and frees it. */
function check(err: Err, what: string): void {
  if (err === null) return;
  const message = koffi.decode.string(err);
  lib().free_error(err);
  throw new ArrowCppError(`${what}: ${message}`);
}

/** An error reported by Arrow C++ (its Status text). */
export class ArrowCppError extends Error {
  override name = 'ArrowCppError';
}

function callAsync<A extends unknown[], R>(fn: KoffiFunc<(...args: A) => R>, ...args: A): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    (fn.async as (...a: unknown[]) => void)(...args, (err: unknown, res: R) => (err ? reject(err) : resolve(res)));
  });
}

function handleOut(out: [Ptr], what: string): bigint {
  if (out[0] === null) throw new Error(`${what}: no handle returned`);
  return out[0];
}

/**
 * A schema and its record batches held by Arrow C++: read from an IPC file or
 * imported from C structs. Free it with `free()` (exports made from it stay valid).
 */
export class Batches {
  #h: bigint | null;

  private constructor(h: bigint) {
    this.#h = h;
  }

  get handle(): bigint {
    if (this.#h === null) throw new Error('Arrow C++ batches handle used after free()');
    return this.#h;
  }

  /** Reads an Arrow IPC file (file format, `.arrow_file`) with arrow::ipc::RecordBatchFileReader. */
  static readIpcFile(path: string): Batches {
    const out: [Ptr] = [null];
    check(lib().read_ipc_file(path, out), `reading ${path}`);
    return new Batches(handleOut(out, 'read_ipc_file'));
  }

  /**
   * Imports an `ArrowSchema` and struct `ArrowArray`s (arrow::ImportSchema,
   * arrow::ImportRecordBatch). Moves every struct (release NULL afterwards),
   * also on failure; the struct memory stays the caller's.
   */
  static import(schema: bigint, arrays: readonly bigint[]): Batches {
    const out: [Ptr] = [null];
    check(lib().import(schema, [...arrays], arrays.length, out), 'Arrow C++ import');
    return new Batches(handleOut(out, 'import'));
  }

  /** The same for `ArrowDeviceArray`s on the CPU (arrow::ImportDeviceRecordBatch). */
  static importDevice(schema: bigint, arrays: readonly bigint[]): Batches {
    const out: [Ptr] = [null];
    check(lib().import_device(schema, [...arrays], arrays.length, out), 'Arrow C++ device import');
    return new Batches(handleOut(out, 'import_device'));
  }

  /** Reads a whole `ArrowArrayStream` (arrow::ImportRecordBatchReader) and releases it. */
  static async importStream(stream: bigint): Promise<Batches> {
    const out: [Ptr] = [null];
    check(await callAsync(lib().import_stream, stream, out), 'Arrow C++ stream import');
    return new Batches(handleOut(out, 'import_stream'));
  }

  /** Reads a whole `ArrowDeviceArrayStream` (arrow::ImportDeviceRecordBatchReader) and releases it. */
  static async importDeviceStream(stream: bigint): Promise<Batches> {
    const out: [Ptr] = [null];
    check(await callAsync(lib().import_device_stream, stream, out), 'Arrow C++ device stream import');
    return new Batches(handleOut(out, 'import_device_stream'));
  }

  /** Number of record batches. */
  get count(): number {
    return Number(lib().batches_count(this.handle));
  }

  /** Exports the schema (arrow::ExportSchema) into `into`, or a new block (free with freeStruct). */
  exportSchema(into: bigint = callocStruct(SIZEOF.ArrowSchema)): bigint {
    check(lib().export_schema(this.handle, into), 'Arrow C++ ExportSchema');
    return into;
  }

  /** Exports batch `i` as a struct `ArrowArray` (arrow::ExportRecordBatch). */
  exportBatch(i: number, into: bigint = callocStruct(SIZEOF.ArrowArray)): bigint {
    check(lib().export_batch(this.handle, i, into), 'Arrow C++ ExportRecordBatch');
    return into;
  }

  /** Exports batch `i` as an `ArrowDeviceArray` on the CPU (arrow::ExportDeviceRecordBatch, sync_event NULL). */
  exportDeviceBatch(i: number, into: bigint = callocStruct(SIZEOF.ArrowDeviceArray)): bigint {
    check(lib().export_device_batch(this.handle, i, into), 'Arrow C++ ExportDeviceRecordBatch');
    return into;
  }

  /** Exports all batches as an `ArrowArrayStream` (arrow::ExportRecordBatchReader). */
  exportStream(into: bigint = callocStruct(SIZEOF.ArrowArrayStream)): bigint {
    check(lib().export_stream(this.handle, into), 'Arrow C++ ExportRecordBatchReader');
    return into;
  }

  /** Exports all batches as an `ArrowDeviceArrayStream` (arrow::ExportDeviceRecordBatchReader). */
  exportDeviceStream(into: bigint = callocStruct(SIZEOF.ArrowDeviceArrayStream)): bigint {
    check(lib().export_device_stream(this.handle, into), 'Arrow C++ ExportDeviceRecordBatchReader');
    return into;
  }

  /**
   * Compares with `actual` by Arrow's own Equals (schema with metadata, then
   * each batch; NaN equals NaN): the first difference, or undefined. With
   * `exactBatches: false`, different batch counts are compared as tables (the
   * same values in any chunking are equal: a file with no batches equals one
   * empty batch).
   */
  diff(actual: Batches, { exactBatches = true }: { exactBatches?: boolean } = {}): string | undefined {
    const err = lib().equals(this.handle, actual.handle, exactBatches ? 1 : 0);
    if (err === null) return undefined;
    const message = koffi.decode.string(err);
    lib().free_error(err);
    return message;
  }

  /**
   * A new handle with every batch sliced by Arrow (RecordBatch::Slice,
   * zero-copy), so its exports carry a non-zero `offset`. Clamped to each batch.
   */
  slice(offset: number, length: number): Batches {
    const out: [Ptr] = [null];
    check(lib().slice(this.handle, offset, length, out), 'Arrow C++ Slice');
    return new Batches(handleOut(out, 'slice'));
  }

  /** Arrow's printout of the schema and every batch. */
  toString(): string {
    const p = lib().to_string(this.handle);
    if (p === null) return '';
    const s = koffi.decode.string(p);
    lib().free_error(p);
    return s;
  }

  /**
   * Drops Arrow's references. Buffers imported from a JS producer are released
   * now, on this thread, unless an export made from them still holds them.
   */
  free(): void {
    if (this.#h === null) return;
    const h = this.#h;
    this.#h = null;
    lib().batches_free(h);
  }
}

/**
 * Starts Arrow's async producer (arrow::ExportAsyncRecordBatchReader) on a
 * new thread, producing `batches` into `handler` (an
 * `ArrowAsyncDeviceStreamHandler` the caller made, e.g. in JS). Returns a
 * promise of the end of production: it rejects with the status of Arrow's
 * future when the producer fails (or is cancelled, see the deviations above).
 * `batches` may be freed at once.
 */
export function asyncProduce(batches: Batches, handler: bigint): Promise<void> {
  const out: [Ptr] = [null];
  check(lib().async_produce(batches.handle, handler, out), 'Arrow C++ async produce');
  const p = handleOut(out, 'async_produce');
  return callAsync(lib().async_producer_wait, p).then((err) => check(err, 'Arrow C++ ExportAsyncRecordBatchReader'));
}

/**
 * Arrow's async consumer (arrow::CreateAsyncDeviceStreamHandler, Arrow's CPU
 * thread pool as executor). Give `handler` to a producer, then `collect()`.
 */
export class AsyncConsumer {
  #c: bigint | null;
  /** The `ArrowAsyncDeviceStreamHandler*` to hand to a producer. */
  readonly handler: bigint;

  constructor(queueSize = 5) {
    const out: [Ptr] = [null];
    check(lib().async_consumer_new(queueSize, out), 'Arrow C++ CreateAsyncDeviceStreamHandler');
    this.#c = handleOut(out, 'async_consumer_new');
    this.handler = lib().async_consumer_handler(this.#c)!;
  }

  /** Waits for the schema and every batch up to the end of the stream (or the producer's error). */
  async collect(): Promise<Batches> {
    if (this.#c === null) throw new Error('AsyncConsumer used after free()');
    const out: [Ptr] = [null];
    check(await callAsync(lib().async_consumer_collect, this.#c, out), 'Arrow C++ async consumer');
    return batchesFromHandle(handleOut(out, 'async_consumer_collect'));
  }

  /**
   * Frees the consumer (releasing its handler if no producer did). Only once
   * no producer can still call the handler: after `collect()` and the end of
   * production, or when the handler was never handed out.
   */
  free(): void {
    if (this.#c === null) return;
    const c = this.#c;
    this.#c = null;
    lib().async_consumer_free(c);
  }
}

// Batches' constructor is private; this module may still build one from a handle.
const batchesFromHandle = (h: bigint): Batches =>
  new (Batches as unknown as new (h: bigint) => Batches)(h);
