/**
 * Export: arrow-js `Schema`/`Field`/`DataType` (or a `SchemaNode`) ->
 * `ArrowSchema` in a Memory.
 *
 * One allocation holds an exported tree (see `writeSchemaNode`); each node
 * has its own record, so a consumer may move a child out and release it on
 * its own (CDataInterface.rst, "Moving child arrays" applies to schemas
 * too). One registered release callback serves all schema exports;
 * `private_data` holds the id of the node's record.
 */
import { DataType, Dictionary, Field, Schema, Type, type Map_ } from 'apache-arrow';
import { Flag } from '../abi/constants.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import type { StructLayout } from '../abi/layout.js';
import { typeInfoOf } from './arrowjs.js';
import { formatOf } from './format.js';
import { encodeMetadata } from './metadata.js';
import type { SchemaNode } from './node.js';

/** The one allocation of an exported schema tree, freed when its last live node is released. */
interface Tree {
  block: Ptr;
  /** Nodes of the tree whose `release` has not run yet. */
  live: number;
}

interface SchemaRecord {
  tree: Tree;
  /** Where this node's children's structs start (then the dictionary's), in the tree's block. */
  structs: Ptr;
  nChildren: number;
  hasDictionary: boolean;
}

const records = new HandleTable<SchemaRecord>();
const encoder = new TextEncoder();

/** The release callback: `ptr` is the struct the consumer releases (ours, a moved copy, or a child in place). */
function releaseSchema(mem: Memory, ptr: Ptr): void {
  const L = mem.layouts.ArrowSchema;
  const rec = records.take(Number(mem.readPtr(ptr + BigInt(L.offsets.private_data!))));
  if (!rec) return; // not ours, or already released: never twice
  const tree = rec.tree;
  const inPlace: Ptr[] = [];
  releaseRecord(mem, L, rec, inPlace);
  // Children released with their parent live in the tree's block: mark them released only while
  // the block is still allocated. (A child in place outlives its parent's release only when the
  // consumer released it directly, and then its parent, in the same block, is still live.)
  if (tree.live > 0) for (const c of inPlace) mem.writePtr(c + BigInt(L.offsets.release!), 0n);
  mem.writePtr(ptr + BigInt(L.offsets.release!), 0n);
}

/** Releases a taken record and its children not moved out (one read of their structs). */
function releaseRecord(mem: Memory, L: StructLayout, rec: SchemaRecord, inPlace: Ptr[]): void {
  const n = rec.nChildren + (rec.hasDictionary ? 1 : 0);
  if (n > 0) {
    const b = mem.read(rec.structs, n * L.size);
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    const wide = mem.target.pointerSize === 8;
    const ptrAt = (at: number): Ptr => (wide ? dv.getBigUint64(at, true) : BigInt(dv.getUint32(at, true)));
    const ours = releaseCallback(mem);
    for (let k = 0; k < n; k++) {
      const rel = ptrAt(k * L.size + L.offsets.release!);
      if (rel === 0n) continue; // moved out by the consumer, who releases it
      const child = rec.structs + BigInt(k * L.size);
      if (rel === ours) {
        const r = records.take(Number(ptrAt(k * L.size + L.offsets.private_data!)));
        if (r) {
          releaseRecord(mem, L, r, inPlace);
          inPlace.push(child);
        }
      } else {
        mem.call(rel, RELEASE_SIG, child);
      }
    }
  }
  liveCounters.liveExports--;
  if (--rec.tree.live === 0) mem.free(rec.tree.block);
}

const releaseCallback = defineCallback('schema.release', RELEASE_SIG, (mem, p) => releaseSchema(mem, p as bigint));

/** A node's encoded strings and metadata. */
interface Encoded {
  format: Uint8Array;
  name: Uint8Array | null;
  metadata: Uint8Array | null;
}

const align8 = (n: number): number => Math.ceil(n / 8) * 8;

/** Encodes every node (depth first, children then dictionary) and returns the tree's size below `node`'s struct. */
function encodeTree(node: SchemaNode, ps: number, structSize: number, out: Encoded[]): number {
  const e: Encoded = {
    format: encoder.encode(node.format + '\0'),
    name: node.name === null ? null : encoder.encode(node.name + '\0'),
    metadata: encodeMetadata(node.metadata),
  };
  out.push(e);
  const n = node.children.length;
  let size = align8(n * ps) + (n + (node.dictionary ? 1 : 0)) * structSize;
  size += align8((e.metadata?.length ?? 0)) + align8(e.format.length + (e.name?.length ?? 0));
  for (const c of node.children) size += encodeTree(c, ps, structSize, out);
  if (node.dictionary) size += encodeTree(node.dictionary, ps, structSize, out);
  return size;
}

interface WriteContext {
  readonly L: StructLayout;
  readonly ps: number;
  readonly tree: Tree;
  readonly base: bigint;
  readonly bytes: Uint8Array;
  readonly dv: DataView;
  readonly encoded: Encoded[];
  /** Next node to write in `encoded`, and next free byte of the tree. */
  node: number;
  next: number;
  readonly recs: SchemaRecord[];
  /** Where each record's struct is, for its id once every record is made. */
  readonly at: { w: StructBytes; off: number }[];
  readonly release: Ptr;
}

/** A struct's bytes being written: the tree's, or the root's. */
interface StructBytes {
  dv: DataView;
}

function writePtr(dv: DataView, at: number, v: Ptr, ps: number): void {
  if (ps === 8) dv.setBigUint64(at, v, true);
  else dv.setUint32(at, Number(v), true);
}

function writeNode(ctx: WriteContext, node: SchemaNode, w: StructBytes, off: number): void {
  const { L, ps, base, dv } = ctx;
  const e = ctx.encoded[ctx.node++]!;
  const n = node.children.length;
  const childrenAt = ctx.next;
  const structsAt = childrenAt + align8(n * ps);
  const mdAt = structsAt + (n + (node.dictionary ? 1 : 0)) * L.size;
  const formatAt = mdAt + align8(e.metadata?.length ?? 0);
  const nameAt = formatAt + e.format.length;
  ctx.next = formatAt + align8(e.format.length + (e.name?.length ?? 0));
  if (e.metadata) ctx.bytes.set(e.metadata, mdAt);
  ctx.bytes.set(e.format, formatAt);
  if (e.name) ctx.bytes.set(e.name, nameAt);
  const rec: SchemaRecord = { tree: ctx.tree, structs: base + BigInt(structsAt), nChildren: n, hasDictionary: node.dictionary !== null };
  ctx.recs.push(rec);
  ctx.at.push({ w, off });
  const o = L.offsets;
  const s = w.dv;
  writePtr(s, off + o.format!, base + BigInt(formatAt), ps);
  writePtr(s, off + o.name!, e.name ? base + BigInt(nameAt) : 0n, ps);
  writePtr(s, off + o.metadata!, e.metadata ? base + BigInt(mdAt) : 0n, ps);
  s.setBigInt64(off + o.flags!, BigInt(node.flags), true);
  s.setBigInt64(off + o.n_children!, BigInt(n), true);
  writePtr(s, off + o.children!, n > 0 ? base + BigInt(childrenAt) : 0n, ps);
  writePtr(s, off + o.dictionary!, node.dictionary ? base + BigInt(structsAt + n * L.size) : 0n, ps);
  writePtr(s, off + o.release!, ctx.release, ps);
  const tw: StructBytes = { dv };
  for (let i = 0; i < n; i++) {
    const at = structsAt + i * L.size;
    writePtr(dv, childrenAt + i * ps, base + BigInt(at), ps);
    writeNode(ctx, node.children[i]!, tw, at);
  }
  if (node.dictionary) writeNode(ctx, node.dictionary, tw, structsAt + n * L.size);
}

/**
 * Writes `node` into the `ArrowSchema` at `into` (memory the caller owns).
 * One allocation holds the whole tree below the root struct: every node's
 * children pointer array, its children's and dictionary's structs, its
 * metadata and strings, filled in JS and written with one copy (the root
 * struct is a second). Each node keeps its own record and `private_data`,
 * so a child can be moved out and released on its own; the allocation is
 * freed when the tree's last live node is released.
 */
export function writeSchemaNode(mem: Memory, node: SchemaNode, into: Ptr): void {
  const L = mem.layouts.ArrowSchema;
  const ps = mem.target.pointerSize;
  mem.checkAddress(into, L.size); // before anything is allocated or recorded
  const encoded: Encoded[] = [];
  const size = encodeTree(node, ps, L.size, encoded);
  const block = mem.alloc(size);
  const tree: Tree = { block, live: 0 };
  const bytes = new Uint8Array(size);
  const root = new Uint8Array(L.size);
  const ctx: WriteContext = {
    L, ps, tree, base: block, bytes, dv: new DataView(bytes.buffer), encoded, node: 0, next: 0, recs: [], at: [],
    release: releaseCallback(mem),
  };
  writeNode(ctx, node, { dv: new DataView(root.buffer) }, 0);
  // Every record now exists: give each its id, then write the tree and the root in one copy each.
  ctx.recs.forEach((rec, i) => {
    const { w, off } = ctx.at[i]!;
    writePtr(w.dv, off + L.offsets.private_data!, BigInt(records.add(rec)), ps);
  });
  tree.live = ctx.recs.length;
  liveCounters.liveExports += ctx.recs.length;
  mem.copyIn(block, bytes);
  mem.copyIn(into, root);
}

// --- arrow-js -> SchemaNode ---------------------------------------------------------

/** The `SchemaNode` of an arrow-js type with the given name, nullability and metadata. */
export function typeToNode(
  type: DataType,
  name: string | null,
  nullable: boolean,
  metadata: ReadonlyMap<string, string> | null,
  path = 'schema',
): SchemaNode {
  {
    const info = typeInfoOf(type, path);
    let flags = nullable ? Flag.NULLABLE : 0;
    let children: SchemaNode[] = [];
    let dictionary: SchemaNode | null = null;
    if (type.typeId === Type.Dictionary) {
      const d = type as Dictionary;
      if (d.isOrdered) flags |= Flag.DICTIONARY_ORDERED;
      dictionary = typeToNode(d.dictionary, null, true, null, `${path}.dictionary`);
    } else {
      if (type.typeId === Type.Map && (type as Map_).keysSorted) flags |= Flag.MAP_KEYS_SORTED;
      children = (type.children ?? []).map((f: Field, i: number) => fieldToNode(f, `${path}.children[${i}]`));
    }
    return {
      format: formatOf(info),
      type: info,
      name,
      metadata: metadata && metadata.size > 0 ? new Map(metadata) : null,
      flags,
      children,
      dictionary,
    };
  }
}

export function fieldToNode(field: Field, path = 'schema'): SchemaNode {
  return typeToNode(field.type, field.name, field.nullable, field.metadata, path);
}

/** A schema is exported as a struct ("+s") whose children are its fields. */
export function schemaToNode(schema: Schema): SchemaNode {
  return {
    format: '+s',
    type: { id: 'struct' },
    name: '',
    metadata: schema.metadata && schema.metadata.size > 0 ? new Map(schema.metadata) : null,
    flags: 0,
    children: schema.fields.map((f, i) => fieldToNode(f, `schema.children[${i}]`)),
    dictionary: null,
  };
}

/** `SchemaNode` of any of the JS schema forms. */
export function toSchemaNode(s: Schema | Field | DataType | SchemaNode): SchemaNode {
  if (s instanceof Schema) return schemaToNode(s);
  if (s instanceof Field) return fieldToNode(s);
  if (s instanceof DataType) return typeToNode(s, '', true, null);
  return s;
}
