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
import { defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import type { StructLayout } from '../abi/layout.js';
import type { ArrayView } from './view.js';

/** The one allocation of an exported tree, freed when its last live node is released. */
interface Tree {
  block: Ptr;
  /** Nodes of the tree whose `release` has not run yet. */
  live: number;
}

interface ArrayRecord {
  tree: Tree;
  /** JS buffers the consumer may read through our pointers. */
  pins: Uint8Array[];
  pinnedBytes: number;
  /** Allocations in the memory holding copies (wasm32), freed on release; null when none. */
  copies: Ptr[] | null;
  /** Where this node's children's structs start (then the dictionary's), in the tree's block. */
  structs: Ptr;
  nChildren: number;
  hasDictionary: boolean;
}

const records = new HandleTable<ArrayRecord>();

/** A 64-byte zeroed allocation per memory that empty buffers point at, so no mandatory buffer is NULL. */
const emptyBuffers = new WeakMap<Memory, Ptr>();
function emptyBuffer(mem: Memory): Ptr {
  let p = emptyBuffers.get(mem);
  if (p === undefined) {
    p = mem.alloc(64);
    emptyBuffers.set(mem, p);
  }
  return p;
}

function readPtrAt(dv: DataView, at: number, wide: boolean): Ptr {
  return wide ? dv.getBigUint64(at, true) : BigInt(dv.getUint32(at, true));
}

function writePtrAt(dv: DataView, at: number, v: Ptr, wide: boolean): void {
  if (wide) dv.setBigUint64(at, v, true);
  else dv.setUint32(at, Number(v), true);
}

const TWO_32 = 4294967296;

/** Writes an int64 given as a safe integer number (no BigInt made): low word, then high word. */
function writeI64At(dv: DataView, at: number, v: number): void {
  dv.setUint32(at, v >>> 0, true);
  dv.setInt32(at + 4, Math.floor(v / TWO_32), true);
}

/** Writes the address `base + off`, `base` a safe integer number (see WriteContext.base). */
function writeAddrAt(dv: DataView, at: number, base: number, off: number, wide: boolean): void {
  const v = base + off;
  if (wide) writeI64At(dv, at, v);
  else dv.setUint32(at, v, true);
}

/** The release callback: `ptr` is the struct the consumer releases (ours, a moved copy, or a child in place). */
function releaseArray(mem: Memory, ptr: Ptr): void {
  const L = mem.layouts.ArrowArray;
  const id = Number(mem.readPtr(ptr + BigInt(L.offsets.private_data!)));
  const rec = records.take(id);
  if (!rec) return; // not ours or already released: never twice
  const tree = rec.tree;
  const inPlace: Ptr[] = [];
  releaseRecord(mem, L, rec, inPlace);
  // Children released with their parent live in the tree's block: mark them released
  // only while the block is still allocated (another node of the tree is still live).
  if (tree.live > 0) for (const c of inPlace) mem.writePtr(c + BigInt(L.offsets.release!), 0n);
  mem.writePtr(ptr + BigInt(L.offsets.release!), 0n);
}

/** Releases a taken record: its children not moved out (one read of their structs), its copies and pins. */
function releaseRecord(mem: Memory, L: StructLayout, rec: ArrayRecord, inPlace: Ptr[]): void {
  const n = rec.nChildren + (rec.hasDictionary ? 1 : 0);
  if (n > 0) {
    const wide = mem.target.pointerSize === 8;
    const relOff = L.offsets.release!;
    const idOff = L.offsets.private_data!;
    const b = mem.readTransient ? mem.readTransient(rec.structs, n * L.size) : mem.read(rec.structs, n * L.size);
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const ours = arrayReleaseCallback(mem);
    for (let k = 0; k < n; k++) {
      const rel = readPtrAt(dv, k * L.size + relOff, wide);
      if (rel === 0n) continue; // the consumer moved this child out and releases it itself
      const child = rec.structs + BigInt(k * L.size);
      if (rel === ours) {
        const r = records.take(Number(readPtrAt(dv, k * L.size + idOff, wide)));
        if (r) {
          releaseRecord(mem, L, r, inPlace);
          inPlace.push(child);
        }
      } else {
        mem.call(rel, RELEASE_SIG, child);
      }
    }
  }
  if (rec.copies) for (const c of rec.copies) mem.free(c);
  rec.pins.length = 0;
  liveCounters.pinnedBytes -= rec.pinnedBytes;
  liveCounters.liveExports--;
  if (--rec.tree.live === 0) mem.free(rec.tree.block);
}

/** The one C release callback shared by every array export on `mem`. */
export const arrayReleaseCallback = defineCallback('array.release', RELEASE_SIG, (mem, p) => releaseArray(mem, p as bigint));

/** Bytes of an array of `k` pointers, rounded up to 8. */
function ptrBytes(k: number, ps: number): number {
  return Math.ceil((k * ps) / 8) * 8;
}

/** Bytes of the tree below `view`'s struct: its arrays, its children's structs, and theirs. */
function treeBytes(view: ArrayView, ps: number, structSize: number): number {
  const nc = view.children.length;
  let n = ptrBytes(view.buffers.length, ps) + ptrBytes(nc, ps) + (nc + (view.dictionary ? 1 : 0)) * structSize;
  for (let i = 0; i < nc; i++) n += treeBytes(view.children[i]!, ps, structSize);
  if (view.dictionary) n += treeBytes(view.dictionary, ps, structSize);
  return n;
}

/** An export being written: the tree's bytes in JS, and the records made so far. */
interface WriteContext {
  readonly mem: Memory;
  readonly L: StructLayout;
  readonly ps: number;
  readonly wide: boolean;
  readonly tree: Tree;
  /** The tree's address as a number: addresses fit in 53 bits on every target we run on (checked). */
  readonly base: number;
  readonly dv: DataView;
  /** Next free byte of the tree. */
  next: number;
  readonly recs: ArrayRecord[];
  /** Where each record's struct is: its bytes and offset, for its id once every record is made. */
  readonly at: { dv: DataView; off: number }[];
  readonly release: Ptr;
}

/** Writes node `view`'s struct at `off` of `sdv`, and its arrays and children into the tree's bytes. */
function writeNode(ctx: WriteContext, view: ArrayView, sdv: DataView, off: number): void {
  const { mem, L, ps, wide, dv } = ctx;
  const block = ctx.tree.block;
  const buffers = view.buffers;
  const nb = buffers.length;
  const nc = view.children.length;
  const dict = view.dictionary;
  const buffersAt = ctx.next;
  const childrenAt = buffersAt + ptrBytes(nb, ps);
  const structsAt = childrenAt + ptrBytes(nc, ps);
  ctx.next = structsAt + (nc + (dict ? 1 : 0)) * L.size;
  const rec: ArrayRecord = {
    tree: ctx.tree,
    pins: [],
    pinnedBytes: 0,
    copies: null,
    structs: block + BigInt(structsAt),
    nChildren: nc,
    hasDictionary: dict !== null,
  };
  ctx.recs.push(rec);
  ctx.at.push({ dv: sdv, off });
  for (let i = 0; i < nb; i++) {
    const b = buffers[i];
    let p: Ptr = 0n;
    if (b && b.byteLength > 0) {
      const direct = mem.addressOf(b);
      if (direct !== undefined) {
        p = direct;
        rec.pins.push(b);
        rec.pinnedBytes += b.byteLength;
      } else {
        p = mem.alloc(b.byteLength);
        (rec.copies ??= []).push(p);
        mem.copyIn(p, b);
        liveCounters.copiedBytes += b.byteLength;
      }
    } else if (b) {
      p = emptyBuffer(mem);
    }
    writePtrAt(dv, buffersAt + i * ps, p, wide);
  }
  const o = L.offsets;
  const base = ctx.base;
  writeI64At(sdv, off + o.length!, view.length);
  writeI64At(sdv, off + o.null_count!, view.nullCount);
  writeI64At(sdv, off + o.offset!, view.offset);
  writeI64At(sdv, off + o.n_buffers!, nb);
  writeI64At(sdv, off + o.n_children!, nc);
  if (nb > 0) writeAddrAt(sdv, off + o.buffers!, base, buffersAt, wide);
  if (nc > 0) writeAddrAt(sdv, off + o.children!, base, childrenAt, wide);
  if (dict) writeAddrAt(sdv, off + o.dictionary!, base, structsAt + nc * L.size, wide);
  writePtrAt(sdv, off + o.release!, ctx.release, wide);
  for (let i = 0; i < nc; i++) {
    const at = structsAt + i * L.size;
    writeAddrAt(dv, childrenAt + i * ps, base, at, wide);
    writeNode(ctx, view.children[i]!, dv, at);
  }
  if (dict) writeNode(ctx, dict, dv, structsAt + nc * L.size);
}

const SCRATCH_TREE = 16 * 1024;
const scratchTree = new Uint8Array(SCRATCH_TREE);
const scratchRoot = new Uint8Array(256);

/** Writes `view` into the `ArrowArray` at `into` (memory the caller owns). */
export function writeArrayView(mem: Memory, view: ArrayView, into: Ptr): void {
  const L = mem.layouts.ArrowArray;
  const ps = mem.target.pointerSize;
  const size = treeBytes(view, ps, L.size);
  const block = mem.alloc(size);
  if (block + BigInt(size) > BigInt(Number.MAX_SAFE_INTEGER)) {
    mem.free(block);
    throw new ArrowDeviceError('memory', '', `allocation at 0x${block.toString(16)} is above 2^53`);
  }
  const tree: Tree = { block, live: 0 };
  // The tree's bytes and the root struct are written in JS, then copied in one call each. Small trees
  // use scratch space (a fresh backing store per export cost about as much as the rest of a small
  // export); this function makes no call that could re-enter it before the copies.
  const bytes = size <= SCRATCH_TREE ? scratchTree.subarray(0, size).fill(0) : new Uint8Array(size);
  const root = scratchRoot.subarray(0, L.size).fill(0);
  const rootDv = new DataView(root.buffer, root.byteOffset, root.byteLength);
  const ctx: WriteContext = {
    mem, L, ps, wide: ps === 8, tree, base: Number(block), dv: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), next: 0, recs: [], at: [],
    release: arrayReleaseCallback(mem),
  };
  const undo = (): void => {
    for (const r of ctx.recs) if (r.copies) for (const c of r.copies) mem.free(c);
    mem.free(block);
  };
  try {
    writeNode(ctx, view, rootDv, 0);
  } catch (e) {
    undo();
    throw e;
  }
  // Every record, and its id into its struct; then the tree and the root struct, one copy each.
  const idOff = L.offsets.private_data!;
  const ids: number[] = new Array(ctx.recs.length);
  for (let k = 0; k < ctx.recs.length; k++) {
    const { dv, off } = ctx.at[k]!;
    ids[k] = records.add(ctx.recs[k]!);
    writePtrAt(dv, off + idOff, BigInt(ids[k]!), ctx.wide);
  }
  try {
    if (size > 0) mem.copyIn(block, bytes);
    mem.copyIn(into, root);
  } catch (e) {
    for (const id of ids) records.take(id);
    undo();
    throw e;
  }
  let pinned = 0;
  for (const rec of ctx.recs) pinned += rec.pinnedBytes;
  tree.live = ctx.recs.length;
  liveCounters.pinnedBytes += pinned;
  liveCounters.liveExports += ctx.recs.length;
}
