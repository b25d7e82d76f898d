/**
 * The target-neutral core of the array layer's public face: the options
 * every function takes (which memory), and export of the neutral forms
 * (`ArrayView`, `SchemaNode`) into C structs. api.ts (arrow-js) and
 * src/flechette/ (flechette) build on it; nothing here knows an Arrow
 * library.
 */
import { optionalPtrArg } from '../args.js';
import { invalid } from '../errors.js';
import { ExportHandle } from '../memory/handle.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import type { SchemaNode } from '../schema/node.js';
import { writeNodeCached } from '../schema/write.js';
import { writeArrayView } from './export.js';
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
