/**
 * Writing `ArrowDeviceArray`s.
 *
 * - `writeDeviceFields`: the fields after the embedded `ArrowArray`
 *   (`device_id`, `device_type`, `sync_event`, `reserved` zeroed), in one copy
 *   (src/memory/cstruct.ts, where the array layer's hand-on uses it too; re-exported here).
 * - `writeRawTree`: an `ArrowArray` tree whose buffers are addresses this
 *   library allocated on a device (not JS buffers: src/array/export.ts covers
 *   those). Each node has its own record, like src/array/export.ts, so a
 *   consumer may move a child out and release it on its own; the device
 *   allocation and the event are shared by the tree's records and freed
 *   when the last of them is released. One C release callback serves every
 *   such export, keyed by `private_data`.
 */
import { access } from '../abi/accessors.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { arena, rawOf, readField, reserve, writeField } from '../memory/raw.js';
import { callRelease, defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import { encodePointers } from '../memory/struct.js';

export { writeDeviceFields } from '../memory/cstruct.js';

/** Device resources a tree of records shares: freed when the last record is released. */
export interface SharedResources {
  refs: number;
  /** Frees the device memory, destroys the event. Must not throw (it runs inside a C callback). */
  dispose(): void;
}

interface RawRecord {
  block: Ptr;
  children: Ptr[];
  dictionary: Ptr;
  shared: SharedResources;
}

/** A node to write: buffer addresses on the device (0n: NULL). */
export interface RawNode {
  readonly length: number;
  readonly offset: number;
  readonly nullCount: number;
  readonly buffers: readonly Ptr[];
  readonly children: readonly RawNode[];
  readonly dictionary: RawNode | null;
}

const records = new HandleTable<RawRecord>();

/** Errors raised while freeing device resources inside a release callback (which must not throw), newest last. */
export const releaseErrors: unknown[] = [];

function releaseRaw(mem: Memory, ptr: Ptr): void {
  const A = access(mem.target).ArrowArray;
  const rec = records.take(readField(mem, A.private_data, ptr));
  if (!rec) return;
  for (const c of rec.children) releaseIfLive(mem, c);
  if (rec.dictionary !== 0n) releaseIfLive(mem, rec.dictionary);
  mem.free(rec.block);
  liveCounters.liveExports--;
  writeField(mem, A.release, ptr, 0);
  if (--rec.shared.refs === 0) {
    try {
      rec.shared.dispose();
    } catch (e) {
      releaseErrors.push(e);
    }
  }
}

function releaseIfLive(mem: Memory, ptr: Ptr): void {
  const rel = readField(mem, access(mem.target).ArrowArray.release, ptr);
  if (rel === 0) return;
  if (rel === Number(rawReleaseCallback(mem))) releaseRaw(mem, ptr);
  else callRelease(mem, rel, Number(ptr));
}

/** The one C release callback of every device-memory export on `mem`. */
export const rawReleaseCallback = defineCallback('device.array.release', RELEASE_SIG, (mem, p) => releaseRaw(mem, p as bigint));

/**
 * Writes `root` as an `ArrowArray` at `into`. Every node written holds one
 * reference to `shared`. On failure nothing is left allocated and `shared`
 * is not disposed (the caller disposes it).
 */
export function writeRawTree(mem: Memory, root: RawNode, into: Ptr, shared: SharedResources): void {
  // A guard reference: releasing partly written subtrees on failure must not dispose `shared`.
  shared.refs++;
  try {
    writeRawNode(mem, root, into, shared);
  } finally {
    shared.refs--;
  }
}

function writeRawNode(mem: Memory, node: RawNode, into: Ptr, shared: SharedResources): void {
  const L = mem.layouts.ArrowArray;
  const ps = mem.target.pointerSize;
  const nb = node.buffers.length;
  const nc = node.children.length;
  const ptrBytes = (k: number): number => Math.ceil((k * ps) / 8) * 8;
  const headBytes = ptrBytes(nb) + ptrBytes(nc);
  const structs = nc + (node.dictionary ? 1 : 0);
  const block = mem.alloc(headBytes + structs * L.size);
  const childrenPtr = block + BigInt(ptrBytes(nb));
  const structsPtr = block + BigInt(headBytes);
  const rec: RawRecord = { block, children: [], dictionary: 0n, shared };
  try {
    const childPtrs = node.children.map((_, i) => structsPtr + BigInt(i * L.size));
    const head = new Uint8Array(headBytes);
    encodePointers(mem, node.buffers, head, 0);
    encodePointers(mem, childPtrs, head, ptrBytes(nb));
    mem.copyIn(block, head);
    for (let i = 0; i < nc; i++) {
      writeRawNode(mem, node.children[i]!, childPtrs[i]!, shared);
      rec.children.push(childPtrs[i]!);
    }
    if (node.dictionary) {
      const d = structsPtr + BigInt(nc * L.size);
      writeRawNode(mem, node.dictionary, d, shared);
      rec.dictionary = d;
    }
  } catch (e) {
    for (const c of rec.children) releaseIfLive(mem, c);
    if (rec.dictionary !== 0n) releaseIfLive(mem, rec.dictionary);
    mem.free(block);
    throw e;
  }
  const id = records.add(rec);
  shared.refs++;
  liveCounters.liveExports++;
  // The struct in scratch space (fresh arena bytes are zero), through the typed accessors, then one copy.
  const A = access(mem.target).ArrowArray;
  const off = reserve(A.$size);
  const dv = arena.dv;
  A.length.set(dv, off, node.length);
  A.null_count.set(dv, off, node.nullCount);
  A.offset.set(dv, off, node.offset);
  A.n_buffers.set(dv, off, nb);
  A.n_children.set(dv, off, nc);
  A.buffers.setBig(dv, off, nb > 0 ? block : 0n);
  A.children.setBig(dv, off, nc > 0 ? childrenPtr : 0n);
  A.dictionary.setBig(dv, off, rec.dictionary);
  A.private_data.set(dv, off, id);
  A.release.setBig(dv, off, rawReleaseCallback(mem));
  rawOf(mem).writeFrom(Number(into), arena, off, A.$size);
}
