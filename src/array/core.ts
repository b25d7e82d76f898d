/**
 * The target-neutral core of the array layer's public face: the options
 * every function takes (which memory), and export of the neutral forms
 * (`ArrayView`, `SchemaNode`) into C structs. api.ts (arrow-js) and
 * src/flechette/ (flechette) build on it; nothing here knows an Arrow
 * library.
 */
import { arrayPtrArg, optionalPtrArg, schemaPtrArg } from '../args.js';
import { access } from '../abi/accessors.js';
import { checkOwned, moveStruct, releaseStruct } from '../memory/cstruct.js';
import { readField } from '../memory/raw.js';
import { invalid } from '../errors.js';
import { ArrayExportHandles, ExportHandle, TableExportHandles } from '../memory/handle.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import type { SchemaNode } from '../schema/node.js';
import { writeNodeCached } from '../schema/write.js';
import { arrayReleaseCallback, writeArrayView } from './export.js';
import type { ArrayView } from './view.js';

/** The option every function of the package takes: which memory its structs live in. */
export interface MemoryOption {
  /** The memory the structs live in; the process's own (native) by default. */
  memory?: Memory;
}

/** Options of `exportSchema` and `exportArray`: where the struct is written, and whether to return an owned handle. */
export interface ExportOptions extends MemoryOption {
  /** Write into this struct (the consumer's memory) instead of allocating one. */
  into?: Ptr;
  /**
   * Return an owned handle (`ExportHandle`: `address`, `released`,
   * `[Symbol.dispose]`) instead of the bare address: its dispose releases
   * the struct if the consumer did not take it, and frees it. Not with `into`.
   */
  handle?: boolean;
}

/** `handle: true` needs our own allocation: a struct the consumer gave (`into`) is its. */
export function handleArg(opts: { handle?: boolean }, into: Ptr | undefined, param = 'opts.into'): boolean {
  if (!opts.handle) return false;
  if (into !== undefined) throw invalid(param, 'a handle owns its struct (dispose frees it): { handle: true } writes into an allocation of its own, not into');
  return true;
}

/** The memory `o` names, else the process's own. */
export const memoryOf = (o: MemoryOption | undefined): Memory => o?.memory ?? nativeMemory();

/**
 * Exports a `SchemaNode` as an `ArrowSchema` (into `opts.into`, else a new
 * allocation; with `handle`, an owned handle).
 */
export function exportSchemaNode(node: SchemaNode, opts: ExportOptions = {}): Ptr | ExportHandle {
  const m = memoryOf(opts);
  optionalPtrArg(opts.into, 'opts.into', m, m.layouts.ArrowSchema.size, 'an ArrowSchema');
  const handle = handleArg(opts, opts.into);
  const into = opts.into ?? m.alloc(m.layouts.ArrowSchema.size);
  try {
    writeNodeCached(m, node, into);
  } catch (e) {
    if (opts.into === undefined) m.free(into);
    throw e;
  }
  return handle ? ExportHandle.adopt(m, 'ArrowSchema', into) : into;
}

/**
 * Exports an `ArrayView` as an `ArrowArray`, zero-copy where the memory can
 * point at its buffers (see export.ts); `ours`: its buffers were made for
 * this export (the view's arrays are ours to keep).
 */
export function exportArrayView(view: ArrayView, opts: ExportOptions = {}, ours = false): Ptr | ExportHandle {
  const m = memoryOf(opts);
  optionalPtrArg(opts.into, 'opts.into', m, m.layouts.ArrowArray.size, 'an ArrowArray');
  const handle = handleArg(opts, opts.into);
  const into = opts.into ?? m.alloc(m.layouts.ArrowArray.size);
  try {
    writeArrayView(m, view, into, ours);
  } catch (e) {
    if (opts.into === undefined) m.free(into);
    throw e;
  }
  return handle ? ExportHandle.adopt(m, 'ArrowArray', into) : into;
}

/** Options of a record batch's or a table's export: the memory, the consumer's structs, or owned handles. */
export interface BatchExportOptions extends MemoryOption {
  /** Write the `ArrowSchema` into this struct (the consumer's memory) instead of allocating one. */
  schemaInto?: Ptr;
  /** Write the struct `ArrowArray` into this struct (the consumer's memory) instead of allocating one. */
  arrayInto?: Ptr;
  /**
   * Return two owned handles (`ArrayExportHandles`) instead of the bare addresses: disposing the
   * pair releases what the consumer did not take, and frees both. Not with `schemaInto` or `arrayInto`.
   */
  handle?: boolean;
}

/**
 * A record batch out as its schema and its struct array (`ours`: the view was made for this
 * export); both or neither: a failure of the array releases and frees the schema.
 */
export function exportBatchView(node: SchemaNode, view: ArrayView, ours: boolean, opts: BatchExportOptions = {}): { schema: Ptr; array: Ptr } | ArrayExportHandles {
  const m = memoryOf(opts);
  optionalPtrArg(opts.schemaInto, 'opts.schemaInto', m, m.layouts.ArrowSchema.size, 'an ArrowSchema');
  optionalPtrArg(opts.arrayInto, 'opts.arrayInto', m, m.layouts.ArrowArray.size, 'an ArrowArray');
  if (handleArg(opts, opts.schemaInto ?? opts.arrayInto, opts.schemaInto !== undefined ? 'opts.schemaInto' : 'opts.arrayInto')) {
    const schema = exportSchemaNode(node, { memory: opts.memory, handle: true }) as ExportHandle;
    try {
      return new ArrayExportHandles(schema, exportArrayView(view, { memory: opts.memory, handle: true }, ours) as ExportHandle);
    } catch (e) {
      schema[Symbol.dispose]();
      throw e;
    }
  }
  const schema = exportSchemaNode(node, { memory: opts.memory, into: opts.schemaInto }) as Ptr;
  try {
    return { schema, array: exportArrayView(view, { memory: opts.memory, into: opts.arrayInto }, ours) as Ptr };
  } catch (e) {
    releaseArrowSchema(schema, opts);
    if (opts.schemaInto === undefined) m.free(schema);
    throw e;
  }
}

/**
 * A table out as one schema and an array per record batch (`view(i)` makes batch i's view;
 * `ours`: made for this export). Nothing is handed out on a failure: what was exported is undone.
 */
export function exportTableViews(
  node: SchemaNode, n: number, view: (i: number) => ArrayView, ours: boolean, opts: MemoryOption & { handle?: boolean } = {},
): { schema: Ptr; arrays: Ptr[] } | TableExportHandles {
  const m = memoryOf(opts);
  if (opts.handle) {
    const { schema, arrays } = exportTableViews(node, n, view, ours, { memory: opts.memory }) as { schema: Ptr; arrays: Ptr[] };
    // A failed adopt releases and frees its own struct; those adopted are disposed, the rest freed.
    const handles: ExportHandle[] = [];
    let tried = 0;
    try {
      tried++;
      const s = ExportHandle.adopt(m, 'ArrowSchema', schema);
      handles.push(s);
      for (const a of arrays) {
        tried++;
        handles.push(ExportHandle.adopt(m, 'ArrowArray', a));
      }
      return new TableExportHandles(s, handles.slice(1));
    } catch (e) {
      for (const h of handles) h[Symbol.dispose]();
      for (const a of arrays.slice(tried - 1)) freeArrowArray(a, opts);
      throw e;
    }
  }
  const schema = exportSchemaNode(node, { memory: opts.memory }) as Ptr;
  const arrays: Ptr[] = [];
  try {
    for (let i = 0; i < n; i++) arrays.push(exportArrayView(view(i), { memory: opts.memory }, ours) as Ptr);
  } catch (e) {
    // Nothing was handed out yet: undo what was exported, so a failure midway leaks nothing.
    for (const a of arrays) freeArrowArray(a, opts);
    releaseStruct(m, 'ArrowSchema', schema);
    m.free(schema);
    throw e;
  }
  return { schema, arrays };
}

// --- struct helpers --------------------------------------------------------------------

/**
 * Allocates a zeroed `ArrowSchema` for a producer to fill.
 *
 * @example
 * const schema = allocArrowSchema();
 * const array = allocArrowArray();
 * nativeLib.produce(schema, array);                // the producer fills both
 * using batch = importRecordBatch(array, schema);  // moves the array out, releases the schema
 * freeArrowSchema(schema);                         // our structs, now empty
 * freeArrowArray(array);
 */
export function allocArrowSchema(opts: MemoryOption = {}): Ptr {
  const m = memoryOf(opts);
  return m.alloc(m.layouts.ArrowSchema.size);
}

/**
 * Allocates a zeroed `ArrowArray` for a producer to fill.
 *
 * @example
 * const array = allocArrowArray();
 * nativeLib.produce_array(array);                 // the producer fills it
 * using data = importData(array, new Int32());    // the array is moved out of our struct
 * freeArrowArray(array);
 */
export function allocArrowArray(opts: MemoryOption = {}): Ptr {
  const m = memoryOf(opts);
  return m.alloc(m.layouts.ArrowArray.size);
}

/**
 * Calls the `ArrowArray`'s release if it is not released yet (its `release` is not NULL), and leaves
 * the struct allocated: the owner of a struct releases it once (CDataInterface.rst, "Release callback
 * semantics -- for consumers").
 *
 * @example
 * const array = allocArrowArray();
 * nativeLib.produce_array(array);
 * releaseArrowArray(array);   // not wanted after all: the producer's release, once
 * freeArrowArray(array);      // the struct's memory
 */
export function releaseArrowArray(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseStruct(memoryOf(opts), 'ArrowArray', arrayPtrArg(ptr, 'ptr', memoryOf(opts)));
}

/**
 * Calls the `ArrowSchema`'s release if it is not released yet, and leaves the struct allocated.
 *
 * @example
 * const schema = allocArrowSchema();
 * nativeLib.produce_schema(schema);
 * const node = importSchemaNode(schema, { keep: true }); // read, left live
 * releaseArrowSchema(schema);                             // released once, by its owner
 * freeArrowSchema(schema);
 */
export function releaseArrowSchema(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseStruct(memoryOf(opts), 'ArrowSchema', schemaPtrArg(ptr, 'ptr', memoryOf(opts)));
}

/**
 * Releases (if still live) and frees an `ArrowArray` struct allocated by this library. A pointer this
 * library did not allocate, or freed already, is an `ArrowDeviceError`, never a double free.
 *
 * @example
 * const array = exportArray(batch);
 * nativeLib.consume_array(array);   // the consumer moves it out or releases it
 * freeArrowArray(array);            // releases it first if the consumer did neither
 */
export function freeArrowArray(ptr: Ptr, opts: MemoryOption = {}): void {
  checkOwned(memoryOf(opts), ptr, 'freeArrowArray');
  releaseArrowArray(ptr, opts);
  memoryOf(opts).free(ptr);
}

/**
 * Releases (if still live) and frees an `ArrowSchema` struct allocated by this library; as
 * `freeArrowArray`, a pointer that is not ours is an error.
 *
 * @example
 * const schema = exportSchema(table.schema);
 * nativeLib.consume_schema(schema);
 * freeArrowSchema(schema);
 */
export function freeArrowSchema(ptr: Ptr, opts: MemoryOption = {}): void {
  checkOwned(memoryOf(opts), ptr, 'freeArrowSchema');
  releaseArrowSchema(ptr, opts);
  memoryOf(opts).free(ptr);
}

/**
 * Moves a struct as the spec says (CDataInterface.rst, "Moving an array"):
 * a bitwise copy into `dst`, then the source marked released.
 *
 * @example
 * const dst = allocArrowArray();
 * moveArrowArray(arrayPtr, dst);   // dst owns the data now; arrayPtr's release is NULL
 * using data = importData(dst, schema);
 * freeArrowArray(dst);
 */
export function moveArrowArray(src: Ptr, dst: Ptr, opts: MemoryOption = {}): void {
  const m = memoryOf(opts);
  moveStruct(m, 'ArrowArray', arrayPtrArg(src, 'src', m), arrayPtrArg(dst, 'dst', m));
}

/**
 * Moves an `ArrowSchema` (bitwise copy, then the source marked released), as `moveArrowArray`.
 *
 * @example
 * const dst = allocArrowSchema();
 * moveArrowSchema(schemaPtr, dst);  // dst owns the schema now
 * const schema = importSchema(dst);  // read and released
 * freeArrowSchema(dst);
 */
export function moveArrowSchema(src: Ptr, dst: Ptr, opts: MemoryOption = {}): void {
  const m = memoryOf(opts);
  moveStruct(m, 'ArrowSchema', schemaPtrArg(src, 'src', m), schemaPtrArg(dst, 'dst', m));
}

/**
 * Whether `ptr` is an `ArrowArray` exported by this library (its release is ours).
 *
 * @example
 * const ptr = exportArray(batch);
 * isOurArrowArray(ptr);       // true
 * isOurArrowArray(arrayPtr);  // false: a native producer's
 * freeArrowArray(ptr);
 */
export function isOurArrowArray(ptr: Ptr, opts: MemoryOption = {}): boolean {
  const m = memoryOf(opts);
  arrayPtrArg(ptr, 'ptr', m);
  return readField(m, access(m.target).ArrowArray.release, ptr) === Number(arrayReleaseCallback(m));
}
