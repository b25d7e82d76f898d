/**
 * The release of an exported tree (src/array/export.ts, src/schema/export.ts): one allocation per
 * tree and one record per node (its struct's `private_data` id), so a child moved out by the consumer
 * is released on its own (CDataInterface.rst, "Moving child arrays"); the tree's allocation is
 * freed when its last live node is released.
 */
import type { FieldAccess } from '../abi/accessors.js';
import { liveCounters } from './accounting.js';
import type { Memory } from './memory.js';
import { stage, staged, type Addr, type RawAccess } from './raw.js';
import { callRelease, type HandleTable } from './registry.js';

/** The one allocation of an exported tree, freed when its last live node is released. */
export interface Tree {
  block: Addr;
  /** Nodes of the tree whose `release` has not run yet. */
  live: number;
}

/** What the release of a node needs of its record. */
export interface TreeRecord {
  readonly tree: Tree;
  /** Where this node's children's structs start (then the dictionary's), in the tree's block. */
  readonly structs: Addr;
  readonly nChildren: number;
  readonly hasDictionary: boolean;
}

/** What the release of one kind of exported struct needs on one memory (made once per memory). */
export interface TreeRelease<R extends TreeRecord> {
  readonly mem: Memory;
  readonly raw: RawAccess;
  /** The struct's accessors: its size, `release` and `private_data`. */
  readonly A: { readonly $size: number; readonly release: FieldAccess; readonly private_data: FieldAccess };
  /** Our release callback of these structs, as a number. */
  readonly releaseN: Addr;
  /** The records of the nodes not released yet, by their struct's `private_data`. */
  readonly records: HandleTable<R>;
  /** Frees what a record holds besides its tree (after its children are released); null when nothing. */
  readonly freeRecord: ((mem: Memory, rec: R) => void) | null;
}

/** The release callback: `ptr` is the struct the consumer releases (ours, a moved copy, or a child in place). */
export function releaseTreeNode<R extends TreeRecord>(t: TreeRelease<R>, ptr: Addr): void {
  const { A, raw } = t;
  const at = stage(raw, ptr, A.$size);
  const rec = t.records.take(A.private_data.get(staged.dv, at));
  if (!rec) return; // not ours, or already released: never twice
  const tree = rec.tree;
  const inPlace: Addr[] = [];
  releaseRecord(t, rec, inPlace);
  // Children released with their parent live in the tree's block: mark them released only while
  // the block is still allocated. (A child in place outlives its parent's release only when the
  // consumer released it directly, and then its parent, in the same block, is still live.)
  const relOff = A.release.offset;
  if (tree.live > 0) for (const c of inPlace) raw.writeWord(c + relOff, 0);
  raw.writeWord(ptr + relOff, 0);
}

/** Releases a taken record: its children not moved out (one read of their structs), what it holds, its share of the tree. */
function releaseRecord<R extends TreeRecord>(t: TreeRelease<R>, rec: R, inPlace: Addr[]): void {
  const n = rec.nChildren + (rec.hasDictionary ? 1 : 0);
  const { A, raw } = t;
  if (n > 0) {
    const size = A.$size;
    let at = stage(raw, rec.structs, n * size);
    let from = staged;
    for (let k = 0; k < n; k++) {
      // A foreign child's release (below) may grow a wasm module's memory, detaching bytes read
      // there in place (a detached view has no bytes): read them again then.
      if (from.u8.byteLength === 0) {
        at = stage(raw, rec.structs, n * size);
        from = staged;
      }
      const dv = from.dv;
      const rel = A.release.get(dv, at + k * size);
      if (rel === 0) continue; // the consumer moved this child out and releases it itself
      const child = rec.structs + k * size;
      if (rel === t.releaseN) {
        const r = t.records.take(A.private_data.get(dv, at + k * size));
        if (r) {
          releaseRecord(t, r, inPlace);
          inPlace.push(child);
        }
      } else {
        callRelease(t.mem, rel, child);
      }
    }
  }
  if (t.freeRecord !== null) t.freeRecord(t.mem, rec);
  liveCounters.liveExports--;
  if (--rec.tree.live === 0) raw.free(rec.tree.block);
}
