/**
 * The consumer side of the exchange protocol (PROTOCOL.md), for every
 * importer: `importRecordBatch(source)`, `importArrayStream(source)`, ...
 * take an object implementing the protocol in place of the pointers.
 *
 * One path: call the producer's method, check the handles, run the pointer
 * importer on their addresses in the memory they name (the importer moves
 * the array or stream into our ownership and reads and releases the
 * schema, on success and on failure: the one import path of importer.ts),
 * then dispose the handles, on every path. Whatever the importer did not
 * take (it failed before it could, or a handle was malformed) is released
 * by the dispose, the capsule destructor of the protocol: nothing leaks and
 * nothing is released twice (a moved or released struct has a NULL
 * `release`, which dispose leaves alone).
 *
 * Also here: requested schemas (PyCapsuleInterface.rst, "Schema Requests"),
 * both the consumer's (`requestedSchema` option) and the producer's check,
 * and the move of an import's struct into a handle that hands it on
 * (`moveToHandle`), which every target's imports share.
 */
import {
  ArrowSymbols, describeArrowMethods, hasArrowMethod, symbolName,
  type ArrowDeviceExportOptions, type ArrowSchemaExportable, type ArrowSymbol,
} from '../abi/protocol.js';
import { describeValue } from '../args.js';
import { DeviceType } from '../abi/constants.js';
import { ArrowDeviceError, invalid, unsupported } from '../errors.js';
import { writeDeviceFields } from '../memory/cstruct.js';
import { ExportHandle, disposeHandle, takeHandle } from '../memory/handle.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import type { WasmMemory } from '../memory/wasm.js';
import type { SchemaNode } from '../schema/node.js';
import type { ImportedTable } from './build.js';
import { readSchemaPtr, type ImportCoreOptions } from './importer.js';
import type { ImportOwner } from './owner.js';
import type { SchemaLike } from '../schema/export.js';
import { nodeOfSchemaLike, writeNodeCached } from '../schema/write.js';

/** Options of an import from a protocol object. */
export interface ExchangeImportOptions {
  /**
   * The schema to ask the producer for (PyCapsuleInterface.rst, "Schema
   * Requests"): an object implementing `arrow.c_schema`, or an arrow-js
   * `Schema`/`Field`/`DataType` or `SchemaNode` (exported for the producer
   * to read). The producer may ignore it: the data is always read by the
   * schema the producer returns.
   */
  requestedSchema?: ArrowSchemaExportable | SchemaLike;
  /** The memory the structs live in: taken from the handles; if given, it must be theirs. */
  memory?: Memory;
}

/** `x` given where a pointer form has its schema argument: the options of a protocol call, checked. */
export function exchangeOptions<O extends object>(x: unknown, fn: string): O & ExchangeImportOptions {
  if (x === undefined) return {} as O;
  if (typeof x === 'object' && x !== null && !Array.isArray(x) && !isSchemaArg(x)) return x as O;
  throw invalid(
    'opts',
    `${fn}(source, opts): a protocol object carries its own schema, so the second argument is the options; got ${describeValue(x)}` +
      ' (to ask the producer for a schema, pass { requestedSchema })',
  );
}

function isSchemaArg(x: object): boolean {
  const n = x as Partial<SchemaNode> & { fields?: unknown; typeId?: unknown; type?: unknown };
  return (typeof n.format === 'string' && Array.isArray(n.children)) || Array.isArray(n.fields) || typeof n.typeId === 'number' || (typeof n.name === 'string' && typeof n.type === 'object');
}

/** A schema as an object implementing `arrow.c_schema` (each call exports it anew, in native memory). */
export function schemaExportable(s: SchemaLike): ArrowSchemaExportable {
  const node = nodeOfSchemaLike(s, 'opts.requestedSchema');
  return { [ArrowSymbols.schema]: () => schemaHandle(nativeMemory(), node) };
}

/** `node` exported as an `ArrowSchema` in a new allocation of `mem`, as an owned handle. */
export function schemaHandle(mem: Memory, node: SchemaNode): ExportHandle {
  const p = mem.alloc(mem.layouts.ArrowSchema.size);
  try {
    writeNodeCached(mem, node, p);
  } catch (e) {
    mem.free(p);
    throw e;
  }
  return ExportHandle.adopt(mem, 'ArrowSchema', p);
}

function requestedOf(opts: ExchangeImportOptions): ArrowSchemaExportable | null {
  const r = opts.requestedSchema;
  if (r === undefined || r === null) return null;
  return hasArrowMethod(r, ArrowSymbols.schema) ? (r as ArrowSchemaExportable) : schemaExportable(r as SchemaLike);
}

/** Calls `source[sym](...args)`; a producer's own exception becomes a `producer` error naming the call (ours pass through). */
function callMethod(source: object, sym: ArrowSymbol, path: string, args: unknown[]): unknown {
  const f = (source as Record<symbol, unknown>)[sym];
  if (typeof f !== 'function') {
    throw invalid('source', `expected an object implementing ${symbolName(sym)}, got ${describeValue(source)} (implements ${describeArrowMethods(source)})`);
  }
  try {
    return (f as (...a: unknown[]) => unknown).apply(source, args);
  } catch (e) {
    if (e instanceof ArrowDeviceError) throw e;
    throw new ArrowDeviceError('producer', path, `the producer threw: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
}

/** The memory to read the handles' structs through: theirs; `given` (options.memory) must agree. */
function memoryFor(given: Memory | undefined, theirs: Memory, path: string): Memory {
  if (given === undefined || given === theirs) return theirs;
  const a = (given as Partial<WasmMemory>).memory;
  if (a !== undefined && a === (theirs as Partial<WasmMemory>).memory) return theirs;
  throw invalid('opts.memory', `the producer's handles (${path}) are in ${theirs.name} memory, but options.memory is ${given.name} memory`);
}

/** Disposes the handles of a result; the first error a dispose threw, if any. */
function disposeAll(handles: unknown[]): unknown {
  let first: unknown;
  for (const h of handles) first ??= disposeHandle(h);
  return first;
}

function afterDispose<R>(result: R, err: unknown, path: string, release: (r: R) => void): R {
  if (err === undefined) return result;
  try {
    release(result);
  } catch {
    // The dispose error is the one to report.
  }
  throw new ArrowDeviceError('producer', `${path}[Symbol.dispose]`, `a handle's dispose threw (it must not): ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}

/**
 * Imports what `source[sym]()` returns as an `{ schema, array }` pair
 * (`arrow.c_array`, `arrow.c_device_array`): `fn` gets the array's and the
 * schema's addresses and their memory, and consumes both. The handles are
 * disposed on every path; if a dispose throws, `release` undoes the import.
 */
export function importFromArrayHandles<R>(
  source: object,
  sym: typeof ArrowSymbols.array | typeof ArrowSymbols.deviceArray,
  opts: ExchangeImportOptions,
  fn: (array: Ptr, schema: Ptr, mem: Memory) => R,
  release: (r: R) => void,
  deviceOptions?: ArrowDeviceExportOptions,
): R {
  const path = `source[${symbolName(sym)}]()`;
  const args: unknown[] = sym === ArrowSymbols.deviceArray ? [requestedOf(opts), deviceOptions] : [requestedOf(opts)];
  const pair = callMethod(source, sym, path, args);
  const parts = typeof pair === 'object' && pair !== null ? [(pair as { array?: unknown }).array, (pair as { schema?: unknown }).schema] : [];
  let result: R;
  try {
    if (parts.length === 0) throw invalid(path, `expected { schema, array } handles, got ${describeValue(pair)}`);
    const s = takeHandle(parts[1], `${path}.schema`);
    const a = takeHandle(parts[0], `${path}.array`);
    if (s.mem !== a.mem) throw invalid(path, `the schema is in ${s.mem.name} memory and the array in ${a.mem.name} memory`);
    result = fn(a.address, s.address, memoryFor(opts.memory, a.mem, path));
  } catch (e) {
    disposeAll(parts);
    throw e;
  }
  return afterDispose(result, disposeAll(parts), path, release);
}

/**
 * Imports what `source[sym]()` returns as one handle (`arrow.c_schema`,
 * `arrow.c_stream`, `arrow.c_device_stream`): `fn` gets its address and
 * memory and consumes it. The handle is disposed on every path.
 */
export function importFromHandle<R>(
  source: object,
  sym: typeof ArrowSymbols.schema | typeof ArrowSymbols.stream | typeof ArrowSymbols.deviceStream,
  opts: ExchangeImportOptions,
  fn: (ptr: Ptr, mem: Memory) => R,
  release: (r: R) => void,
): R {
  const path = `source[${symbolName(sym)}]()`;
  const args: unknown[] = sym === ArrowSymbols.schema ? [] : sym === ArrowSymbols.deviceStream ? [requestedOf(opts), undefined] : [requestedOf(opts)];
  const h = callMethod(source, sym, path, args);
  let result: R;
  try {
    const t = takeHandle(h, path);
    result = fn(t.address, memoryFor(opts.memory, t.mem, path));
  } catch (e) {
    disposeHandle(h);
    throw e;
  }
  return afterDispose(result, disposeHandle(h), path, release);
}

type StreamTableImporter = (source: object, opts: ImportCoreOptions & ExchangeImportOptions) => ImportedTable;
let streamTable: StreamTableImporter | undefined;

/**
 * `importTable(source)` of an object implementing `arrow.c_stream` reads the
 * stream, which is the stream layer's (above this one): it registers how
 * here when it loads (stream/import.ts).
 */
export function setStreamTableImporter(fn: StreamTableImporter): void {
  streamTable = fn;
}

/** The stream layer's table import, once it has loaded. */
export function streamTableImporter(): StreamTableImporter | undefined {
  return streamTable;
}

/** Reads the schema an object exports (`arrow.c_schema`), releasing and disposing what it returned. */
export function readExportableSchema(source: object, path: string): SchemaNode {
  return importFromHandle(source, ArrowSymbols.schema, {}, (ptr, mem) => readSchemaPtr(mem, ptr, false, path), () => undefined);
}

// --- producer side -------------------------------------------------------------------

/**
 * The producer's answer to a requested schema (PyCapsuleInterface.rst,
 * "Schema Requests"), for every exporter of this library: nothing to do
 * when none is asked for. A request whose root has a different number of
 * children (fields) than the data is not another representation of the
 * same data: an `invalid` error, as the spec says. Any other request is
 * ignored (the spec lets a producer do so): the data leaves in its own
 * schema, also when the request equals it. This library converts nothing
 * on export; the consumer reads the schema it is given.
 */
export function checkRequestedSchema(requested: unknown, ours: SchemaNode, path: string): void {
  if (requested === undefined || requested === null) return;
  if (!hasArrowMethod(requested, ArrowSymbols.schema)) {
    throw invalid(`${path}.requestedSchema`, `expected an object implementing arrow.c_schema (or nothing), got ${describeValue(requested)}`);
  }
  const asked = readExportableSchema(requested as object, `${path}.requestedSchema`);
  if (asked.children.length !== ours.children.length) {
    throw invalid(
      `${path}.requestedSchema`,
      `${asked.children.length} children ("${asked.format}") where the data has ${ours.children.length} ("${ours.format}"): ` +
        'a requested schema may only ask for another representation of the same data',
    );
  }
}

/**
 * The device methods' options (PyCapsule's `**kwargs`): none is known, so
 * any name whose value is not `undefined` is refused (PROTOCOL.md).
 */
export function checkDeviceExportOptions(options: unknown, path: string): void {
  if (options === undefined || options === null) return;
  if (typeof options !== 'object') throw invalid(`${path}.options`, `expected an options object, got ${describeValue(options)}`);
  const unknown = Object.keys(options).filter((k) => (options as Record<string, unknown>)[k] !== undefined);
  if (unknown.length > 0) throw unsupported(`${path}.options`, `unsupported option(s): ${unknown.join(', ')}`);
}

// --- hand-on: an import's struct moved into a handle ------------------------------------------

/** The struct a handle carries: a plain array, or a device array. */
export type ArrayHandleKind = 'ArrowArray' | 'ArrowDeviceArray';

/**
 * Moves the struct `owner` holds into a new handle of kind `want`; the
 * owner is released (reason `moved`). A plain array asked as a device array
 * is wrapped as a CPU one; a device array asked as a plain array gives its
 * `ArrowArray` (the caller has checked that the CPU reads it, and synchronised).
 */
export function moveToHandle(owner: ImportOwner, want: ArrayHandleKind): ExportHandle {
  const mem = owner.mem;
  const size = want === 'ArrowDeviceArray' || owner.kind === 'ArrowDeviceArray' ? mem.layouts.ArrowDeviceArray.size : mem.layouts.ArrowArray.size;
  const p = mem.alloc(size);
  try {
    // The ArrowArray of an ArrowDeviceArray is at offset 0 (CDeviceDataInterface.rst): moving a
    // plain array to the start of a device array, or taking a device array's start as an array, is a move.
    owner.moveTo(p);
    if (want === 'ArrowDeviceArray' && owner.kind === 'ArrowArray') writeDeviceFields(mem, p, DeviceType.CPU, -1, 0n);
  } catch (e) {
    mem.free(p);
    throw e;
  }
  return ExportHandle.adopt(mem, want, p);
}
