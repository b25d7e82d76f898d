/**
 * The schema writer: a `SchemaNode` -> `ArrowSchema` in a Memory.
 * Target-neutral (arrow-js schemas become nodes in export.ts first; a
 * flechette schema in src/flechette/).
 *
 * One allocation holds an exported tree (see `writeSchemaNode`); each node
 * has its own record, so a consumer may move a child out and release it on
 * its own (CDataInterface.rst, "Moving child arrays" applies to schemas
 * too). One registered release callback serves all schema exports;
 * `private_data` holds the id of the node's record. An exported node is
 * encoded once per pointer width (`writeNodeCached`).
 */
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import { releaseTreeNode, type Tree, type TreeRecord, type TreeRelease } from '../memory/tree.js';
import { access, type Access } from '../abi/accessors.js';
import { newArena, rawOf, setPtr, type Addr, type Arena } from '../memory/raw.js';
import { encodeMetadata } from './metadata.js';
import { ArrowDeviceError } from '../errors.js';
import { isSchemaNode, type SchemaNode } from './node.js';


/** A schema node's record is its place in its tree: it holds nothing else to free. */
const records = new HandleTable<TreeRecord>();
const encoder = new TextEncoder();

/** The release callback: `ptr` is the struct the consumer releases (ours, a moved copy, or a child in place). */
function releaseSchema(mem: Memory, ptr: Addr): void {
  releaseTreeNode(schemaRelease(mem), ptr);
}

const releaseCallback = defineCallback(
  'schema.release',
  RELEASE_SIG,
  (mem, p) => releaseSchema(mem, Number(p)),
  // Our own imports release our own exports through here: numbers, no FFI trip.
  releaseSchema,
);

const schemaReleases = new WeakMap<Memory, TreeRelease<TreeRecord>>();
/** What the release of a schema export needs of `mem`, made once per memory. */
function schemaRelease(mem: Memory): TreeRelease<TreeRecord> {
  let t = schemaReleases.get(mem);
  if (t === undefined) {
    t = { mem, raw: rawOf(mem), A: access(mem.target).ArrowSchema, releaseN: Number(releaseCallback(mem)), records, freeRecord: null };
    schemaReleases.set(mem, t);
  }
  return t;
}

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

const SCRATCH_TREE = 4096;
const scratchTree = newArena(SCRATCH_TREE);
const scratchRoot = newArena(256);

/** A schema tree encoded for `writeSchemaNode`: each node's strings and metadata, and the tree's size. */
export interface EncodedSchema {
  readonly encoded: readonly Encoded[];
  readonly size: number;
}

/** Encodes `node`'s tree for `writeSchemaNode` on a target of `ps`-byte pointers and `structSize`-byte structs. */
export function encodeSchema(node: SchemaNode, ps: number, structSize: number): EncodedSchema {
  const encoded: Encoded[] = [];
  const size = encodeTree(node, ps, structSize, encoded);
  return { encoded, size };
}

interface WriteContext {
  readonly A: Access['ArrowSchema'];
  readonly ps: number;
  readonly tree: Tree;
  readonly base: Addr;
  readonly bytes: Uint8Array;
  readonly dv: DataView;
  readonly encoded: readonly Encoded[];
  /** Next node to write in `encoded`, and next free byte of the tree. */
  node: number;
  next: number;
  readonly recs: TreeRecord[];
  /** Where each record's struct is (its bytes and offset), for its id once every record is made. */
  readonly atDv: DataView[];
  readonly atOff: number[];
  readonly release: Addr;
}

function writeNode(ctx: WriteContext, node: SchemaNode, s: DataView, off: number): void {
  const { A, ps, base, dv } = ctx;
  const size = A.$size;
  const e = ctx.encoded[ctx.node++]!;
  const n = node.children.length;
  const childrenAt = ctx.next;
  const structsAt = childrenAt + align8(n * ps);
  const mdAt = structsAt + (n + (node.dictionary ? 1 : 0)) * size;
  const formatAt = mdAt + align8(e.metadata?.length ?? 0);
  const nameAt = formatAt + e.format.length;
  ctx.next = formatAt + align8(e.format.length + (e.name?.length ?? 0));
  if (e.metadata) ctx.bytes.set(e.metadata, mdAt);
  ctx.bytes.set(e.format, formatAt);
  if (e.name) ctx.bytes.set(e.name, nameAt);
  const rec: TreeRecord = { tree: ctx.tree, structs: base + structsAt, nChildren: n, hasDictionary: node.dictionary !== null };
  ctx.recs.push(rec);
  ctx.atDv.push(s);
  ctx.atOff.push(off);
  A.format.set(s, off, base + formatAt);
  A.name.set(s, off, e.name ? base + nameAt : 0);
  A.metadata.set(s, off, e.metadata ? base + mdAt : 0);
  A.flags.set(s, off, node.flags);
  A.n_children.set(s, off, n);
  A.children.set(s, off, n > 0 ? base + childrenAt : 0);
  A.dictionary.set(s, off, node.dictionary ? base + structsAt + n * size : 0);
  A.release.set(s, off, ctx.release);
  for (let i = 0; i < n; i++) {
    const at = structsAt + i * size;
    setPtr(dv, childrenAt + i * ps, base + at, ps === 8);
    writeNode(ctx, node.children[i]!, dv, at);
  }
  if (node.dictionary) writeNode(ctx, node.dictionary, dv, structsAt + n * size);
}

/**
 * Writes `node` into the `ArrowSchema` at `into` (memory the caller owns);
 * `schema`: its encoding (`encodeSchema`), which the plan of a schema keeps
 * (src/array/plan.ts), so a schema exported again is not encoded again.
 * The tree's one allocation holds every node's children pointer array, its
 * children's and dictionary's structs, its metadata and strings, filled in
 * JS and written with one copy (the root struct is a second).
 */
export function writeSchemaNode(mem: Memory, node: SchemaNode, into: Ptr, schema?: EncodedSchema): void {
  const A = access(mem.target).ArrowSchema;
  const ps = mem.target.pointerSize;
  const raw = rawOf(mem);
  mem.checkAddress(into, A.$size); // before anything is allocated or recorded
  const { encoded, size } = schema ?? encodeSchema(node, ps, A.$size);
  const block = raw.alloc(size);
  const tree: Tree = { block, live: 0 };
  // Scratch space reused by every export (nothing runs between filling it and writing it out);
  // zeroed, so padding carries nothing of an earlier export.
  let bytes: Arena;
  if (size <= SCRATCH_TREE) {
    bytes = scratchTree;
    bytes.u8.fill(0, 0, size);
  } else {
    bytes = newArena(size);
  }
  const root = scratchRoot; // every field of the root is written below
  const ctx: WriteContext = {
    A, ps, tree, base: block, bytes: bytes.u8, dv: bytes.dv, encoded, node: 0, next: 0, recs: [], atDv: [], atOff: [],
    release: schemaRelease(mem).releaseN,
  };
  writeNode(ctx, node, root.dv, 0);
  // Every record now exists: give each its id, then write the tree and the root in one copy each.
  for (let i = 0; i < ctx.recs.length; i++) A.private_data.set(ctx.atDv[i]!, ctx.atOff[i]!, records.add(ctx.recs[i]!));
  tree.live = ctx.recs.length;
  liveCounters.liveExports += ctx.recs.length;
  if (size > 0) raw.writeFrom(block, bytes, 0, size);
  raw.writeFrom(Number(into), root, 0, A.$size);
}

// --- arrow-js -> SchemaNode ---------------------------------------------------------

const encodings = new WeakMap<SchemaNode, { ps: number; encoded: EncodedSchema }>();

/** `writeSchemaNode` with the node's encoding kept for the next export of the same node. */
export function writeNodeCached(mem: Memory, node: SchemaNode, into: Ptr): void {
  const ps = mem.target.pointerSize;
  let e = encodings.get(node);
  if (e === undefined || e.ps !== ps) encodings.set(node, (e = { ps, encoded: encodeSchema(node, ps, mem.layouts.ArrowSchema.size) }));
  writeSchemaNode(mem, node, into, e.encoded);
}

/**
 * How a schema object of a target becomes a `SchemaNode`, given by the target when it loads (the
 * arrow-js target's `schemaNodeOf`, src/schema/export.ts): the neutral code that takes "a schema"
 * (a requested schema, a stream's given schema) takes a node, or what a loaded target knows.
 */
let targetNodeOf: ((s: object) => SchemaNode | undefined) | null = null;

/** Called once by src/schema/export.ts (the arrow-js target). */
export function setTargetSchemaNodes(f: (s: object) => SchemaNode | undefined): void {
  targetNodeOf = f;
}

/** The `SchemaNode` of `s`: a node as it is, else what a loaded target makes of it; `path` names the argument. */
export function nodeOfSchemaLike(s: unknown, path: string): SchemaNode {
  if (isSchemaNode(s)) return s;
  const n = typeof s === 'object' && s !== null && targetNodeOf !== null ? targetNodeOf(s) : undefined;
  if (n !== undefined) return n;
  throw new ArrowDeviceError('invalid', path, targetNodeOf === null ? 'expected a SchemaNode' : 'expected an arrow-js Schema, Field or DataType or a SchemaNode');
}
