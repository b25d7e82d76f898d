/**
 * Writing `ArrowDeviceArray`s.
 *
 * - `writeDeviceFields`: the fields after the embedded `ArrowArray`
 *   (`device_id`, `device_type`, `sync_event`, `reserved` zeroed), in one copy.
 * - `writeRawTree`: an `ArrowArray` tree whose buffers are addresses this
 *   library allocated on a device (not JS buffers: src/array/export.ts covers
 *   those). Each node has its own record, like src/array/export.ts, so a
 *   consumer may move a child out and release it on its own; the device
 *   allocation and the event are shared by the tree's records and freed
 *   when the last of them is released. One C release callback serves every
 *   such export, keyed by `private_data`.
 */
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import { encodePointers, StructWriter } from '../memory/struct.js';

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
  const o = mem.layouts.ArrowArray.offsets;
  const rec = records.take(Number(mem.readPtr(ptr + BigInt(o.private_data!))));
  if (!rec) return;
  for (const c of rec.children) releaseIfLive(mem, c);
  if (rec.dictionary !== 0n) releaseIfLive(mem, rec.dictionary);
  mem.free(rec.block);
  liveCounters.liveExports--;
  mem.writePtr(ptr + BigInt(o.release!), 0n);
  if (--rec.shared.refs === 0) {
    try {
      rec.shared.dispose();
    } catch (e) {
      releaseErrors.push(e);
    }
  }
}

function releaseIfLive(mem: Memory, ptr: Ptr): void {
  const rel = mem.readPtr(ptr + BigInt(mem.layouts.ArrowArray.offsets.release!));
  if (rel === 0n) return;
  if (rel === rawReleaseCallback(mem)) releaseRaw(mem, ptr);
  else mem.call(rel, RELEASE_SIG, ptr);
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
  new StructWriter(L)
    .i64('length', node.length)
    .i64('null_count', node.nullCount)
    .i64('offset', node.offset)
    .i64('n_buffers', nb)
    .i64('n_children', nc)
    .ptr('buffers', nb > 0 ? block : 0n)
    .ptr('children', nc > 0 ? childrenPtr : 0n)
    .ptr('dictionary', rec.dictionary)
    .ptr('private_data', BigInt(id))
    .ptr('release', rawReleaseCallback(mem))
    .writeTo(mem, into);
}

/**
 * Writes the fields of the `ArrowDeviceArray` at `into` that follow its
 * `ArrowArray`: device id and type, sync event, and `reserved` zeroed (the
 * padding after `device_type` too).
 */
export function writeDeviceFields(mem: Memory, into: Ptr, deviceType: number, deviceId: number | bigint, syncEvent: Ptr): void {
  const L = mem.layouts.ArrowDeviceArray;
  const start = L.offsets.device_id!;
  const tail = new Uint8Array(L.size - start);
  const dv = new DataView(tail.buffer);
  dv.setBigInt64(L.offsets.device_id! - start, BigInt(deviceId), true);
  dv.setInt32(L.offsets.device_type! - start, deviceType, true);
  const se = L.offsets.sync_event! - start;
  if (mem.target.pointerSize === 8) dv.setBigUint64(se, syncEvent, true);
  else dv.setUint32(se, Number(syncEvent), true);
  // reserved[3] stays zero, as the spec requires of a producer.
  mem.copyIn(into + BigInt(start), tail);
}
