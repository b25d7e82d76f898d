/**
 * A protocol peer written by hand, as another library would write one
 * without this package (PROTOCOL.md): raw koffi calls, `Symbol.for`, struct
 * offsets from the C header (test/include/arrow_c_abi.h, 64-bit). Nothing
 * here imports from src/.
 *
 * - `handmadeProducer()`: protocol objects over the counting C producer
 *   (test/ownership/counting.c), whose counters say what was released and
 *   whether anything was released twice.
 * - `handmadeConsume*()`: consumers that take the struct out of a handle
 *   with a memcpy, mark the handle's struct released, dispose the handle,
 *   and give their copy to the counting library's C consumers.
 */
import koffi from 'koffi';

// The global registry's keys: the same symbols as the library's, without it.
const C_SCHEMA = Symbol.for('arrow.c_schema');
const C_ARRAY = Symbol.for('arrow.c_array');
const C_STREAM = Symbol.for('arrow.c_stream');
const C_DEVICE_ARRAY = Symbol.for('arrow.c_device_array');
const C_DEVICE_STREAM = Symbol.for('arrow.c_device_stream');

/** sizeof and offsetof(release) of the structs on a 64-bit target (arrow_c_abi.h). */
export const ABI = {
  ArrowSchema: { size: 72, release: 56 },
  ArrowArray: { size: 80, release: 64 },
  ArrowArrayStream: { size: 40, release: 24 },
  ArrowDeviceArray: { size: 128, release: 64 },
  ArrowDeviceArrayStream: { size: 48, release: 32 },
} as const;
type Kind = keyof typeof ABI;

// The C runtime by its name on each OS (Windows: the UCRT, as src/memory/native.ts takes it).
const libc = koffi.load(process.platform === 'win32' ? 'ucrtbase.dll' : process.platform === 'darwin' ? 'libSystem.B.dylib' : 'libc.so.6');
// koffi gives a uintptr_t as a number when it fits: addresses are bigint here, as the protocol says.
const callocRaw = libc.func('uintptr_t calloc(size_t, size_t)') as (n: number, size: number) => number | bigint;
const calloc = (n: number, size: number): bigint => BigInt(callocRaw(n, size));
const free = libc.func('void free(uintptr_t)') as (p: bigint) => void;
const memcpy = libc.func('uintptr_t memcpy(uintptr_t, uintptr_t, size_t)') as (d: bigint, s: bigint, n: number) => unknown;
const releaseProto = koffi.proto('void handmade_release(uintptr_t)');

const readPtr = (p: bigint): bigint => BigInt(koffi.decode(p, 'uintptr_t') as number | bigint);
const writePtr = (p: bigint, v: bigint): void => void koffi.encode(p, 'uintptr_t', v);
const readI64 = (p: bigint): bigint => BigInt(koffi.decode(p, 'int64_t') as number | bigint);

/** Calls a struct's release if it is live (a C function pointer, called through koffi). */
function releaseIfLive(p: bigint, kind: Kind): void {
  const rel = readPtr(p + BigInt(ABI[kind].release));
  if (rel !== 0n) koffi.call(rel, releaseProto, p);
}

export interface HandmadeHandle {
  readonly address: bigint;
  [Symbol.dispose](): void;
}

/** A handle as PROTOCOL.md describes it: dispose releases an unmoved struct, frees it, once. */
function handle(kind: Kind, fill: (p: bigint) => number, stats: { disposed: number }): HandmadeHandle {
  const p = calloc(1, ABI[kind].size);
  const rc = fill(p);
  if (rc !== 0) {
    free(p);
    throw new Error(`counting producer failed: ${rc}`);
  }
  let disposed = false;
  return {
    address: p,
    [Symbol.dispose]() {
      if (disposed) return;
      disposed = true;
      stats.disposed++;
      releaseIfLive(p, kind);
      free(p);
    },
  };
}

function pair(schema: HandmadeHandle, array: HandmadeHandle) {
  return {
    schema,
    array,
    [Symbol.dispose]() {
      array[Symbol.dispose]();
      schema[Symbol.dispose]();
    },
  };
}

export interface HandmadeOptions {
  /** Rows per batch. */
  rows?: number;
  /** Batches of a stream. */
  batches?: number;
  /** Called with each array handle before it is returned (a test corrupts one). */
  tamper?: (array: bigint) => void;
}

/**
 * A protocol object over the counting C producer: struct<x: int32> batches
 * of `rows` rows, x = 0, 1, ... `calls` counts each method's calls and
 * `stats.disposed` the handles disposed; `requested` records each
 * requested schema given (the producer ignores it, as PyCapsuleInterface.rst allows).
 */
export function handmadeProducer(lib: string, opts: HandmadeOptions = {}) {
  const cp = koffi.load(lib);
  const mkSchema = cp.func('int cp_make_schema(uintptr_t out)') as (p: bigint) => number;
  const mkBatch = cp.func('int cp_make_batch(uintptr_t out, int64_t rows, int32_t start)') as (p: bigint, r: number, s: number) => number;
  const mkDevBatch = cp.func('int cp_make_device_batch(uintptr_t out, int64_t rows, int32_t start)') as (p: bigint, r: number, s: number) => number;
  const mkStream = cp.func('int cp_make_stream(uintptr_t out, int64_t n, int64_t rows)') as (p: bigint, n: number, r: number) => number;
  const mkDevStream = cp.func('int cp_make_device_stream(uintptr_t out, int64_t n, int64_t rows)') as (p: bigint, n: number, r: number) => number;
  const rows = opts.rows ?? 4;
  const batches = opts.batches ?? 3;
  const stats = { disposed: 0, requested: [] as unknown[] };
  const calls = { schema: 0, array: 0, stream: 0, deviceArray: 0, deviceStream: 0 };
  const object = {
    [C_SCHEMA]() {
      calls.schema++;
      return handle('ArrowSchema', mkSchema, stats);
    },
    [C_ARRAY](requestedSchema?: unknown) {
      calls.array++;
      stats.requested.push(requestedSchema);
      const schema = handle('ArrowSchema', mkSchema, stats);
      const array = handle('ArrowArray', (p) => mkBatch(p, rows, 0), stats);
      opts.tamper?.(array.address);
      return pair(schema, array);
    },
    [C_STREAM](requestedSchema?: unknown) {
      calls.stream++;
      stats.requested.push(requestedSchema);
      return handle('ArrowArrayStream', (p) => mkStream(p, batches, rows), stats);
    },
    [C_DEVICE_ARRAY](requestedSchema?: unknown, options?: Record<string, unknown>) {
      calls.deviceArray++;
      stats.requested.push(requestedSchema);
      if (options && Object.values(options).some((v) => v !== undefined)) throw new Error('unsupported option');
      const schema = handle('ArrowSchema', mkSchema, stats);
      return pair(schema, handle('ArrowDeviceArray', (p) => mkDevBatch(p, rows, 0), stats));
    },
    [C_DEVICE_STREAM](requestedSchema?: unknown) {
      calls.deviceStream++;
      stats.requested.push(requestedSchema);
      return handle('ArrowDeviceArrayStream', (p) => mkDevStream(p, batches, rows), stats);
    },
  };
  return { object, calls, stats };
}

/** Moves the struct out of a handle into a new allocation of ours: memcpy, then the source's release set to NULL. */
function moveOut(h: HandmadeHandle, kind: Kind): bigint {
  const mine = calloc(1, ABI[kind].size);
  memcpy(mine, h.address, ABI[kind].size);
  writePtr(h.address + BigInt(ABI[kind].release), 0n);
  return mine;
}

interface Consumers {
  consume: (schema: bigint, array: bigint) => number;
  consumeStream: (stream: bigint) => number | bigint;
}

function consumers(lib: string): Consumers {
  const cp = koffi.load(lib);
  return {
    consume: cp.func('int cp_consume(uintptr_t schema, uintptr_t array)') as Consumers['consume'],
    consumeStream: cp.func('int64_t cp_consume_stream(uintptr_t stream)') as Consumers['consumeStream'],
  };
}

/**
 * A consumer of `arrow.c_array`: moves both structs out, disposes the
 * handles, then hands its copies to `cp_consume` (which reads the length
 * and releases both). Returns the array's length as read from the copy.
 */
export function handmadeConsumeArray(lib: string, source: object): number {
  const method = (source as Record<symbol, unknown>)[C_ARRAY];
  if (typeof method !== 'function') throw new Error('not an arrow.c_array producer');
  const handles = method.call(source) as { schema: HandmadeHandle; array: HandmadeHandle };
  let schema = 0n;
  let array = 0n;
  try {
    schema = moveOut(handles.schema, 'ArrowSchema');
    array = moveOut(handles.array, 'ArrowArray');
  } finally {
    handles.array[Symbol.dispose]();
    handles.schema[Symbol.dispose]();
  }
  const length = Number(readI64(array));
  const rc = consumers(lib).consume(schema, array);
  free(schema);
  free(array);
  if (rc !== 0) throw new Error(`cp_consume: ${rc}`);
  return length;
}

/**
 * A consumer that fails midway: moves the schema out, then throws before
 * taking the array. As a consumer must, it releases what it moved before
 * the error leaves, and its `finally` disposes the handles: the array is
 * released by the dispose.
 */
export function handmadeConsumeArrayAndFail(source: object): never {
  const handles = (source as Record<symbol, () => { schema: HandmadeHandle; array: HandmadeHandle }>)[C_ARRAY]!.call(source);
  try {
    const schema = moveOut(handles.schema, 'ArrowSchema');
    try {
      throw new Error('the consumer failed after taking the schema');
    } finally {
      releaseIfLive(schema, 'ArrowSchema');
      free(schema);
    }
  } finally {
    handles.array[Symbol.dispose]();
    handles.schema[Symbol.dispose]();
  }
}

/**
 * A consumer of `arrow.c_stream`: moves the stream out, disposes the handle,
 * and reads the copy with `cp_consume_stream` (every batch, then release).
 * With `async`, through koffi's async call form (for a stream whose
 * callbacks run JavaScript). Returns the number of batches.
 */
export async function handmadeConsumeStream(lib: string, source: object, { async = false } = {}): Promise<number> {
  const method = (source as Record<symbol, unknown>)[C_STREAM];
  if (typeof method !== 'function') throw new Error('not an arrow.c_stream producer');
  const h = method.call(source) as HandmadeHandle;
  let stream: bigint;
  try {
    stream = moveOut(h, 'ArrowArrayStream');
  } finally {
    h[Symbol.dispose]();
  }
  const fn = consumers(lib).consumeStream as Consumers['consumeStream'] & { async: (...a: unknown[]) => void };
  const n = async
    ? await new Promise<number | bigint>((resolve, reject) => fn.async(stream, (err: unknown, r: number | bigint) => (err ? reject(err) : resolve(r))))
    : fn(stream);
  free(stream);
  return Number(n);
}

/** Reads the `length` of the `ArrowArray` a handle holds (no move): for tests that look before consuming. */
export function peekLength(h: HandmadeHandle): number {
  return Number(readI64(h.address));
}

/** Writes `n_children` (offset 32) of the `ArrowArray` at `p`: a malformed struct for a consumer to refuse. */
export function corruptChildren(p: bigint, n: bigint): void {
  koffi.encode(p + 32n, 'int64_t', n);
}

/**
 * An owned handle over a struct another library filled (DuckDB's, Arrow
 * C++'s), as that library's protocol glue would make one: dispose releases
 * it if nobody moved it out, then frees it with `freeFn`, once.
 */
export function wrapStruct(address: bigint, kind: Kind, freeFn: (p: bigint) => void): HandmadeHandle {
  let disposed = false;
  return {
    address,
    [Symbol.dispose]() {
      if (disposed) return;
      disposed = true;
      releaseIfLive(address, kind);
      freeFn(address);
    },
  };
}
