/**
 * The Arrow JS exchange protocol's vocabulary (PROTOCOL.md): the five
 * well-known symbols and the shapes of what their methods return. It is an
 * ABI of JavaScript objects, as the structs of src/abi/layout.ts are an ABI
 * of C memory, so it sits here, below every layer: array/, stream/ and
 * device/ recognise protocol objects and hand their own objects on without
 * depending on the protocol/ layer above them.
 *
 * The protocol is the JavaScript twin of Arrow's PyCapsule interface
 * (PyCapsuleInterface.rst): a method per struct kind returning owned handles
 * (the capsules) whose dispose releases a struct nobody moved out (the
 * capsule destructor). Nothing here depends on this package: another library
 * implements the protocol with `Symbol.for` and plain objects.
 */
import type { Ptr } from '../memory/memory.js';

/** `Symbol.for('arrow.c_schema')`: a method returning an owned `ArrowSchema` handle. */
const C_SCHEMA: unique symbol = Symbol.for('arrow.c_schema');
/** `Symbol.for('arrow.c_array')`: a method returning owned `ArrowSchema` and `ArrowArray` handles. */
const C_ARRAY: unique symbol = Symbol.for('arrow.c_array');
/** `Symbol.for('arrow.c_stream')`: a method returning an owned `ArrowArrayStream` handle. */
const C_STREAM: unique symbol = Symbol.for('arrow.c_stream');
/** `Symbol.for('arrow.c_device_array')`: a method returning owned `ArrowSchema` and `ArrowDeviceArray` handles. */
const C_DEVICE_ARRAY: unique symbol = Symbol.for('arrow.c_device_array');
/** `Symbol.for('arrow.c_device_stream')`: a method returning an owned `ArrowDeviceArrayStream` handle. */
const C_DEVICE_STREAM: unique symbol = Symbol.for('arrow.c_device_stream');

/**
 * The five symbols of the exchange protocol (PROTOCOL.md), from the global
 * symbol registry: `ArrowSymbols.stream === Symbol.for('arrow.c_stream')`,
 * so a library that implements the protocol without this package uses the
 * same keys. An object implements the protocol for a struct kind when it
 * has a method under that kind's symbol.
 *
 * @example
 * const exportable = arrowExportable(table);
 * if (typeof exportable[ArrowSymbols.stream] === 'function') {
 *   using handle = exportable[ArrowSymbols.stream]();   // an owned ArrowArrayStream
 *   nativeLib.consume_stream(handle.address);           // the consumer moves it out or releases it
 * }
 */
export const ArrowSymbols = Object.freeze({
  /** `Symbol.for('arrow.c_schema')`: `() => ArrowHandle` of an `ArrowSchema`. */
  schema: C_SCHEMA,
  /** `Symbol.for('arrow.c_array')`: `(requestedSchema?) => { schema, array }` handles. */
  array: C_ARRAY,
  /** `Symbol.for('arrow.c_stream')`: `(requestedSchema?) => ArrowHandle` of an `ArrowArrayStream`. */
  stream: C_STREAM,
  /** `Symbol.for('arrow.c_device_array')`: `(requestedSchema?, options?) => { schema, array }`, the array an `ArrowDeviceArray`. */
  deviceArray: C_DEVICE_ARRAY,
  /** `Symbol.for('arrow.c_device_stream')`: `(requestedSchema?, options?) => ArrowHandle` of an `ArrowDeviceArrayStream`. */
  deviceStream: C_DEVICE_STREAM,
});

/** One of the five protocol symbols. */
export type ArrowSymbol = (typeof ArrowSymbols)[keyof typeof ArrowSymbols];

/** The registry key of each symbol, for messages: `arrow.c_stream`. */
export function symbolName(sym: ArrowSymbol): string {
  return sym.description ?? String(sym);
}

/**
 * The part of a `WebAssembly.Table` a consumer uses to call a struct's
 * `release` (a wasm function pointer is an index into the table).
 * Structural, so the published types need no DOM lib.
 */
export interface ArrowWasmTable {
  /** The number of entries: a function pointer is an index below it. */
  readonly length: number;
  /** The function at `index` (`WebAssembly.Table.prototype.get`). */
  get(index: number): unknown;
  /** Adds `delta` entries set to `value`, returns the old length (`WebAssembly.Table.prototype.grow`). */
  grow(delta: number, value?: unknown): number;
}

/**
 * Where a handle's struct lives when it is not in the process's own memory:
 * a wasm32 module's linear memory, with what a consumer needs to take the
 * struct over (PROTOCOL.md, "Memory"). A consumer moves the struct into an
 * allocation of its own in that same memory (the struct's `release` is
 * module code that reads module addresses), calls `release` through the
 * module's function table, and frees its allocation when done.
 *
 * These are the module's own exports: C (clang/wasm-ld) `memory`,
 * `__indirect_function_table`, `malloc`, `free`; wasm-bindgen `memory`, the
 * glue's function table, `__wbindgen_malloc`, `__wbindgen_free`;
 * Emscripten `wasmMemory`, `wasmTable`, `_malloc`, `_free`. A producer
 * returns the same object from every call: consumers cache per object.
 */
export interface ArrowWasmMemory {
  /** The module's `WebAssembly.Memory` (wasm32: 4-byte pointers). */
  readonly memory: {
    /** The memory's current bytes; a growth replaces (and detaches) it. */
    readonly buffer: ArrayBuffer;
    /** Grows the memory by `delta` 64 KiB pages; returns the old size in pages. */
    grow(delta: number): number;
  };
  /** The module's indirect function table: `release` and the stream callbacks are indices into it. */
  readonly table: ArrowWasmTable;
  /** The module's allocator: the address of `size` bytes aligned to `align`, 0 on failure. A C `malloc(size)` fits (wasm ignores extra arguments). */
  malloc(size: number, align: number): number;
  /** Frees what `malloc` returned, given what `malloc` was given. A C `free(ptr)` fits. */
  free(ptr: number, size: number, align: number): void;
}

/**
 * An owned handle to one C struct (the protocol's capsule): `address` is the
 * struct, in the process's memory, or in `memory` when given. A consumer
 * moves the struct out (a bitwise copy, then the source's `release` set to
 * NULL: CDataInterface.rst, "Moving an array") and then disposes the handle.
 * Disposing releases a struct that was not moved out (and frees the
 * producer's allocation of it); a second dispose does nothing.
 */
export interface ArrowHandle {
  /** The struct's address. */
  readonly address: Ptr;
  /** The wasm32 memory the struct lives in; absent: the process's own address space. */
  readonly memory?: ArrowWasmMemory;
  /** Releases the struct if it was not moved out, and frees the producer's allocation of it. Idempotent; never throws. */
  [Symbol.dispose](): void;
}

/**
 * What `arrow.c_array` and `arrow.c_device_array` return: the schema and the
 * array, as two handles by name (not a `[schema, array]` pair: the C
 * interfaces' import functions take the array first, PyCapsule's tuple has
 * the schema first, names cannot be swapped). Disposing the pair disposes
 * both, so `using pair = x[ArrowSymbols.array]()` works.
 */
export interface ArrowArrayHandles {
  /** The `ArrowSchema` of the array. */
  readonly schema: ArrowHandle;
  /** An `ArrowArray` (`arrow.c_array`) or an `ArrowDeviceArray` (`arrow.c_device_array`). */
  readonly array: ArrowHandle;
  /** Disposes both handles (each releases its struct if nobody moved it out). Idempotent; never throws. */
  [Symbol.dispose](): void;
}

/**
 * Extra options of the device methods (PyCapsule's `**kwargs`): none is
 * defined yet. A producer throws for a name it does not know whose value
 * is not `undefined`, so that options can be added later.
 */
export type ArrowDeviceExportOptions = { readonly [name: string]: unknown };

/** An object that can export its schema (type, field or schema) as an `ArrowSchema`. */
export interface ArrowSchemaExportable {
  /** `arrow.c_schema`: a new owned `ArrowSchema` handle on every call. */
  [ArrowSymbols.schema](): ArrowHandle;
}

/** An object that can export itself as an `ArrowSchema` and an `ArrowArray`. */
export interface ArrowArrayExportable {
  /**
   * `arrow.c_array`: new owned `ArrowSchema` and `ArrowArray` handles. A producer may cast to
   * `requestedSchema` (PyCapsuleInterface.rst, "Schema Requests") or ignore it.
   */
  [ArrowSymbols.array](requestedSchema?: ArrowSchemaExportable | null): ArrowArrayHandles;
}

/** An object that can export itself as an `ArrowArrayStream`. */
export interface ArrowStreamExportable {
  /** `arrow.c_stream`: a new owned `ArrowArrayStream` handle; `requestedSchema` as for `arrow.c_array`. */
  [ArrowSymbols.stream](requestedSchema?: ArrowSchemaExportable | null): ArrowHandle;
}

/** An object that can export itself as an `ArrowSchema` and an `ArrowDeviceArray`. */
export interface ArrowDeviceArrayExportable {
  /** `arrow.c_device_array`: new owned `ArrowSchema` and `ArrowDeviceArray` handles; `options` as {@link ArrowDeviceExportOptions} says. */
  [ArrowSymbols.deviceArray](requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ArrowArrayHandles;
}

/** An object that can export itself as an `ArrowDeviceArrayStream`. */
export interface ArrowDeviceStreamExportable {
  /** `arrow.c_device_stream`: a new owned `ArrowDeviceArrayStream` handle. */
  [ArrowSymbols.deviceStream](requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ArrowHandle;
}

/** An object that implements at least one method of the protocol. */
export type ArrowExportable =
  | ArrowSchemaExportable
  | ArrowArrayExportable
  | ArrowStreamExportable
  | ArrowDeviceArrayExportable
  | ArrowDeviceStreamExportable;

const ALL: readonly ArrowSymbol[] = [C_SCHEMA, C_ARRAY, C_STREAM, C_DEVICE_ARRAY, C_DEVICE_STREAM];

/** Whether `x` has a method under `sym` (PROTOCOL.md, "Detecting the protocol"). */
export function hasArrowMethod(x: unknown, sym: ArrowSymbol): boolean {
  return (typeof x === 'object' || typeof x === 'function') && x !== null && typeof (x as Record<symbol, unknown>)[sym] === 'function';
}

/**
 * Whether `x` implements any method of the exchange protocol (a function
 * under one of the five `ArrowSymbols`).
 *
 * @example
 * let table: Table | undefined;
 * if (isArrowExportable(value)) table = importTable(value as ArrowStreamExportable);
 */
export function isArrowExportable(x: unknown): x is ArrowExportable {
  if ((typeof x !== 'object' && typeof x !== 'function') || x === null) return false;
  for (const s of ALL) if (typeof (x as Record<symbol, unknown>)[s] === 'function') return true;
  return false;
}

/** The registry keys of the methods `x` implements, for messages: "arrow.c_schema, arrow.c_stream", or "none". */
export function describeArrowMethods(x: unknown): string {
  const names = ALL.filter((s) => hasArrowMethod(x, s)).map(symbolName);
  return names.length > 0 ? names.join(', ') : 'none';
}
