/**
 * Export: `ArrayView` -> `ArrowArray` in a Memory, zero-copy.
 *
 * The JS buffers leave without copying where the memory can point at them
 * (native); they stay pinned, held by the export's record, until the
 * consumer calls `release`. A wasm32 memory cannot point into the JS heap, so
 * there the bytes are copied into the module's memory and freed on release.
 * Each node owns one allocation: its buffers array, its children pointer
 * array, its children's and dictionary's structs. A child has its own record
 * and can be moved out by the consumer and released on its own
 * (CDataInterface.rst, "Moving child arrays").
 */
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import { encodePointers, StructWriter } from '../memory/struct.js';
import type { ArrayView } from './view.js';

interface ArrayRecord {
  block: Ptr;
  /** JS buffers the consumer may read through our pointers. */
  pins: Uint8Array[];
  pinnedBytes: number;
  /** Allocations in the memory holding copies (wasm32), freed on release. */
  copies: Ptr[];
  children: Ptr[];
  dictionary: Ptr;
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

function releaseArray(mem: Memory, ptr: Ptr): void {
  const o = mem.layouts.ArrowArray.offsets;
  const id = Number(mem.readPtr(ptr + BigInt(o.private_data!)));
  const rec = records.take(id);
  if (!rec) return; // not ours or already released: never twice
  for (const c of rec.children) releaseIfLive(mem, c);
  if (rec.dictionary !== 0n) releaseIfLive(mem, rec.dictionary);
  for (const c of rec.copies) mem.free(c);
  mem.free(rec.block);
  rec.pins.length = 0;
  liveCounters.pinnedBytes -= rec.pinnedBytes;
  liveCounters.liveExports--;
  mem.writePtr(ptr + BigInt(o.release!), 0n);
}

function releaseIfLive(mem: Memory, ptr: Ptr): void {
  const rel = mem.readPtr(ptr + BigInt(mem.layouts.ArrowArray.offsets.release!));
  if (rel === 0n) return; // the consumer moved this child out and releases it itself
  if (rel === arrayReleaseCallback(mem)) releaseArray(mem, ptr);
  else mem.call(rel, RELEASE_SIG, ptr);
}

/** The one C release callback shared by every array export on `mem`. */
export const arrayReleaseCallback = defineCallback('array.release', RELEASE_SIG, (mem, p) => releaseArray(mem, p as bigint));

/** Writes `view` into the `ArrowArray` at `into` (memory the caller owns). */
export function writeArrayView(mem: Memory, view: ArrayView, into: Ptr): void {
  const L = mem.layouts.ArrowArray;
  const ps = mem.target.pointerSize;
  const nb = view.buffers.length;
  const nc = view.children.length;
  const ptrBytes = (k: number): number => Math.ceil((k * ps) / 8) * 8;
  const structs = nc + (view.dictionary ? 1 : 0);
  const headBytes = ptrBytes(nb) + ptrBytes(nc);
  const block = mem.alloc(headBytes + structs * L.size);
  const buffersPtr = block;
  const childrenPtr = block + BigInt(ptrBytes(nb));
  const structsPtr = block + BigInt(headBytes);
  const rec: ArrayRecord = { block, pins: [], pinnedBytes: 0, copies: [], children: [], dictionary: 0n };
  try {
    const bufferPtrs: Ptr[] = [];
    for (let i = 0; i < nb; i++) {
      const b = view.buffers[i];
      let p: Ptr = 0n;
      if (b && b.byteLength > 0) {
        const direct = mem.addressOf(b);
        if (direct !== undefined) {
          p = direct;
          rec.pins.push(b);
          rec.pinnedBytes += b.byteLength;
        } else {
          p = mem.alloc(b.byteLength);
          mem.copyIn(p, b);
          rec.copies.push(p);
          liveCounters.copiedBytes += b.byteLength;
        }
      } else if (b) {
        p = emptyBuffer(mem);
      }
      bufferPtrs.push(p);
    }
    const childPtrs = view.children.map((_, i) => structsPtr + BigInt(i * L.size));
    // The buffers and children pointer arrays in one copy; the child structs follow, written below.
    const head = new Uint8Array(headBytes);
    encodePointers(mem, bufferPtrs, head, 0);
    encodePointers(mem, childPtrs, head, ptrBytes(nb));
    mem.copyIn(block, head);
    for (let i = 0; i < nc; i++) {
      writeArrayView(mem, view.children[i]!, childPtrs[i]!);
      rec.children.push(childPtrs[i]!);
    }
    if (view.dictionary) {
      rec.dictionary = structsPtr + BigInt(nc * L.size);
      writeArrayView(mem, view.dictionary, rec.dictionary);
    }
  } catch (e) {
    for (const c of rec.children) releaseIfLive(mem, c);
    if (rec.dictionary !== 0n) releaseIfLive(mem, rec.dictionary);
    for (const c of rec.copies) mem.free(c);
    mem.free(block);
    throw e;
  }
  const id = records.add(rec);
  liveCounters.pinnedBytes += rec.pinnedBytes;
  liveCounters.liveExports++;
  new StructWriter(L)
    .i64('length', view.length)
    .i64('null_count', view.nullCount)
    .i64('offset', view.offset)
    .i64('n_buffers', nb)
    .i64('n_children', nc)
    .ptr('buffers', nb > 0 ? buffersPtr : 0n)
    .ptr('children', nc > 0 ? childrenPtr : 0n)
    .ptr('dictionary', rec.dictionary)
    .ptr('private_data', BigInt(id))
    .ptr('release', arrayReleaseCallback(mem))
    .writeTo(mem, into);
}
