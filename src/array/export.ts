/**
 * Export: `ArrayView` -> `ArrowArray` in a Memory, zero-copy.
 *
 * The JS buffers leave without copying where the memory can point at them
 * (native); they stay pinned, held by the export's record, until the
 * consumer calls `release`. A wasm32 memory cannot point into the JS heap, so
 * there the bytes are copied into the module's memory and freed on release.
 * One allocation holds a whole exported tree: every node's buffers array,
 * children pointer array and its children's and dictionary's structs,
 * filled in JS and written with one copy (the root struct, in memory the
 * caller owns, is a second copy). Each node still has its own record (its
 * pins, and its `private_data` id), so a child can be moved out by the
 * consumer and released on its own (CDataInterface.rst, "Moving child
 * arrays"); the tree's allocation is counted by its live nodes and freed
 * when the last one is released.
 */
import { ArrowDeviceError } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { newArena, rawOf, setPtr, type Addr, type Arena, type RawAccess } from '../memory/raw.js';
import { defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import { releaseTreeNode, type Tree, type TreeRecord, type TreeRelease } from '../memory/tree.js';
import { access, type Access } from '../abi/accessors.js';
import type { ArrayView } from './view.js';

interface ArrayRecord extends TreeRecord {
  /**
   * What keeps the JS buffers the consumer may read through our pointers
   * reachable: the node's array of buffers where the view was made for this
   * export, else a copy of it (a caller's ArrayView may change its own
   * later); null once released.
   */
  pins: readonly unknown[] | null;
  pinnedBytes: number;
  /** Allocations in the memory holding copies (wasm32), freed on release; null when none. */
  copies: Ptr[] | null;
  /** Its id in `records` (its struct's `private_data`): taken back if the export fails after all. */
  id: number;
}

const records = new HandleTable<ArrayRecord>();

/** Records of exported array nodes not released yet (for tests: a failed export must leave none). */
export function liveArrayRecords(): number {
  return records.size;
}

/** What export and release need of a memory, made once per memory. */
interface ExportMem extends TreeRelease<ArrayRecord> {
  /** The typed accessors of `ArrowArray` (src/abi/accessors.ts). */
  readonly A: Access['ArrowArray'];
  readonly wide: boolean;
  readonly ps: number;
  /** Our release callback, as the C pointer (`releaseN`: as a number). */
  readonly release: Ptr;
  /** A 64-byte zeroed allocation that empty buffers point at, so no mandatory buffer is NULL; 0 until made. */
  empty: Addr;
}

const exportMems = new WeakMap<Memory, ExportMem>();
function exportMem(mem: Memory): ExportMem {
  let e = exportMems.get(mem);
  if (e === undefined) {
    const release = arrayReleaseCallback(mem);
    const ps = mem.target.pointerSize;
    const A = access(mem.target).ArrowArray;
    e = { mem, raw: rawOf(mem), A, wide: ps === 8, ps, release, releaseN: Number(release), empty: 0, records, freeRecord: freeArrayRecord };
    exportMems.set(mem, e);
  }
  return e;
}

function emptyBuffer(e: ExportMem): Addr {
  if (e.empty === 0) e.empty = Number(e.mem.alloc(64));
  return e.empty;
}

/**
 * The native address of a JS buffer's bytes, by its ArrayBuffer: an
 * ArrayBuffer's backing store never moves once it is off the V8 heap (and
 * reading `.buffer` puts it there), so its address is asked of the memory
 * once per ArrayBuffer, not once per export (a table exported again, a
 * dictionary shared by batches). A detached buffer has no bytes and is
 * never asked for (empty buffers point at `emptyBuffer`).
 */
const bufferBases = new WeakMap<ArrayBufferLike, number>();
function addressOf(mem: Memory, b: ArrayBufferView): Addr | undefined {
  const ab = b.buffer;
  let base = bufferBases.get(ab);
  if (base === undefined) {
    const a = mem.addressOf(b);
    if (a === undefined) return undefined;
    base = Number(a) - b.byteOffset;
    bufferBases.set(ab, base);
  }
  return base + b.byteOffset;
}

/** Frees what a released node holds besides its tree: its copies, its pins. */
function freeArrayRecord(mem: Memory, rec: ArrayRecord): void {
  if (rec.copies) for (const c of rec.copies) mem.free(c);
  rec.pins = null;
  liveCounters.pinnedBytes -= rec.pinnedBytes;
}

/** The release callback: `ptr` is the struct the consumer releases (ours, a moved copy, or a child in place). */
function releaseArray(mem: Memory, ptr: Addr): void {
  releaseTreeNode(exportMem(mem), ptr);
}

/** The one C release callback shared by every array export on `mem`. */
export const arrayReleaseCallback = defineCallback(
  'array.release',
  RELEASE_SIG,
  (mem, p) => releaseArray(mem, Number(p)),
  // Our own imports release our own exports through here: numbers, no FFI trip.
  releaseArray,
);

/** Bytes of an array of `k` pointers, rounded up to 8. */
function ptrBytes(k: number, ps: number): number {
  return Math.ceil((k * ps) / 8) * 8;
}

/** Bytes of the tree below `view`'s struct: its arrays, its children's structs, and theirs. */
function treeBytes(view: ArrayView, ps: number, structSize: number): number {
  treeNodes++;
  const nc = view.children.length;
  let n = ptrBytes(view.buffers.length, ps) + ptrBytes(nc, ps) + (nc + (view.dictionary ? 1 : 0)) * structSize;
  for (let i = 0; i < nc; i++) n += treeBytes(view.children[i]!, ps, structSize);
  if (view.dictionary) n += treeBytes(view.dictionary, ps, structSize);
  return n;
}

/** Nodes counted by the last `treeBytes` (reset before each export): the export's arrays are made of that size. */
let treeNodes = 0;

/** An export being written: the tree's bytes in JS, and the records made so far. */
interface WriteContext {
  readonly e: ExportMem;
  readonly tree: Tree;
  /** The tree's address. */
  readonly base: Addr;
  /** Where the tree is written: `dv` from `o0` (scratch from 0, or the tree's own memory where JS writes it in place). */
  readonly dv: DataView;
  readonly o0: number;
  /** Next free byte of the tree. */
  next: number;
  /** Records made so far. */
  count: number;
  /** The views were made for this export (dataToExportView): their buffer arrays are ours to keep. */
  readonly ownViews: boolean;
  /** Records made so far, each in `records` already (its id written into its struct). */
  readonly recs: ArrayRecord[];
}

/** Writes node `view`'s struct at `off` of `sdv`, and its arrays and children into the tree's bytes. */
function writeNode(ctx: WriteContext, view: ArrayView, sdv: DataView, off: number): void {
  const { e, dv } = ctx;
  const { mem, A, ps, wide } = e;
  const size = A.$size;
  const buffers = view.buffers;
  const nb = buffers.length;
  const nc = view.children.length;
  const dict = view.dictionary;
  const buffersAt = ctx.next;
  const childrenAt = buffersAt + ptrBytes(nb, ps);
  const structsAt = childrenAt + ptrBytes(nc, ps);
  ctx.next = structsAt + (nc + (dict ? 1 : 0)) * size;
  const rec: ArrayRecord = {
    tree: ctx.tree,
    pins: nb === 0 ? null : ctx.ownViews ? buffers : buffers.slice(),
    pinnedBytes: 0,
    copies: null,
    structs: ctx.base + structsAt,
    nChildren: nc,
    hasDictionary: dict !== null,
    id: 0,
  };
  // In the table at once (`undoWrite` takes it back if the export fails): its id goes into its struct.
  rec.id = records.add(rec);
  ctx.recs[ctx.count++] = rec;
  A.private_data.set(sdv, off, rec.id);
  for (let i = 0; i < nb; i++) {
    // Any typed array over the bytes (dataToExportView), not only Uint8Array.
    const b = buffers[i] as ArrayBufferView | null | undefined;
    let p: Addr = 0;
    if (b && b.byteLength > 0) {
      const direct = addressOf(mem, b);
      if (direct !== undefined) {
        p = direct;
        rec.pinnedBytes += b.byteLength;
      } else {
        const c = mem.alloc(b.byteLength);
        (rec.copies ??= []).push(c);
        // The writer's views may be any typed array (dataToExportView): copy their bytes.
        mem.copyIn(c, b instanceof Uint8Array ? b : new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
        liveCounters.copiedBytes += b.byteLength;
        p = Number(c);
      }
    } else if (b) {
      p = emptyBuffer(e);
    }
    setPtr(dv, ctx.o0 + buffersAt + i * ps, p, wide);
  }
  const base = ctx.base;
  A.length.set(sdv, off, view.length);
  A.null_count.set(sdv, off, view.nullCount);
  A.offset.set(sdv, off, view.offset);
  A.n_buffers.set(sdv, off, nb);
  A.n_children.set(sdv, off, nc);
  // Every field is written (the root's scratch struct is not zeroed first): NULL where there is none.
  A.buffers.set(sdv, off, nb > 0 ? base + buffersAt : 0);
  A.children.set(sdv, off, nc > 0 ? base + childrenAt : 0);
  A.dictionary.set(sdv, off, dict ? base + structsAt + nc * size : 0);
  A.release.set(sdv, off, e.releaseN);
  const o0 = ctx.o0;
  for (let i = 0; i < nc; i++) {
    const at = structsAt + i * size;
    setPtr(dv, o0 + childrenAt + i * ps, base + at, wide);
    writeNode(ctx, view.children[i]!, dv, o0 + at);
  }
  if (dict) writeNode(ctx, dict, dv, o0 + structsAt + nc * size);
}

/** Takes back what a failed export made: its records (none was released: the consumer has none yet), its copies, its tree. */
function undoWrite(ctx: WriteContext, mem: Memory, raw: RawAccess, block: Addr): void {
  for (let k = 0; k < ctx.count; k++) {
    const rec = ctx.recs[k]!;
    records.take(rec.id);
    if (rec.copies) for (const c of rec.copies) mem.free(c);
  }
  raw.free(block);
}

const SCRATCH_TREE = 16 * 1024;
/** Scratch space the tree and the root struct are written in, then copied to memory in one call each. */
const scratchTree = newArena(SCRATCH_TREE);
const scratchRoot = newArena(256);

/**
 * Writes `view` into the `ArrowArray` at `into` (memory the caller owns).
 * `ownViews`: the views were made for this export alone (dataToExportView),
 * so each node's record may keep the node's own array of buffers as its pins
 * (otherwise a copy: a caller's ArrayView may change its array later).
 */
export function writeArrayView(mem: Memory, view: ArrayView, into: Ptr, ownViews = false): void {
  const e = exportMem(mem);
  const { A, ps, raw } = e;
  treeNodes = 0;
  const size = treeBytes(view, ps, A.$size);
  const nodes = treeNodes;
  const block = raw.alloc(size);
  if (block + size > Number.MAX_SAFE_INTEGER) {
    raw.free(block);
    throw new ArrowDeviceError('memory', '', `allocation at 0x${block.toString(16)} is above 2^53`);
  }
  const tree: Tree = { block, live: 0 };
  // The tree is written where it lives when JS can write that memory in place (our own small
  // allocations, zeroed: src/memory/slab.ts); else in JS scratch space (a fresh backing store per
  // export cost about as much as the rest of a small export), then copied in one call. The root
  // struct, the caller's, is written in scratch space and copied once everything succeeded. This
  // function makes no call that could re-enter it before the copies.
  const inPlace = raw.inPlace !== undefined && size > 0 && !mem.viewsShareBuffer ? raw.inPlace(block, size) : null;
  const bytes: Arena = inPlace ?? (size <= SCRATCH_TREE ? scratchTree : newArena(size));
  const o0 = inPlace ? block - inPlace.addr : 0;
  if (!inPlace) bytes.u8.fill(0, 0, size);
  // The root's scratch struct is not zeroed: writeNode writes each of its fields. A wasm32 struct
  // has 4 bytes of padding at its end, where a 64-bit export may have left a pointer's high half:
  // zeroed there, so that no byte of a native address reaches a module's memory.
  if (!e.wide) scratchRoot.u8.fill(0, 0, A.$size);
  // An array of the number of nodes (a push-grown one starts at 16 slots).
  const ctx: WriteContext = { e, tree, base: block, dv: bytes.dv, o0, next: 0, count: 0, ownViews, recs: new Array(nodes) };
  try {
    writeNode(ctx, view, scratchRoot.dv, 0);
    // The tree and the root struct, one copy each.
    if (size > 0 && !inPlace) raw.writeFrom(block, bytes, 0, size);
    raw.writeFrom(Number(into), scratchRoot, 0, A.$size);
  } catch (err) {
    undoWrite(ctx, mem, raw, block);
    throw err;
  }
  const n = ctx.count;
  let pinned = 0;
  for (let k = 0; k < n; k++) pinned += ctx.recs[k]!.pinnedBytes;
  tree.live = n;
  liveCounters.pinnedBytes += pinned;
  liveCounters.liveExports += n;
}
