/**
 * Export: arrow-js `Schema`/`Field`/`DataType` (or a `SchemaNode`) ->
 * `ArrowSchema` in a Memory.
 *
 * One allocation holds an exported tree (see `writeSchemaNode`); each node
 * has its own record, so a consumer may move a child out and release it on
 * its own (CDataInterface.rst, "Moving child arrays" applies to schemas
 * too). One registered release callback serves all schema exports;
 * `private_data` holds the id of the node's record.
 *
 * The `SchemaNode` of an arrow-js object is made once and used again while
 * its metadata maps hold what they held (`schemaNodeOf`); an exported node is
 * encoded once per pointer width (`writeSchema`). Imports against an arrow-js
 * schema find and make their plan by the same nodes (src/array/plan.ts).
 */
import { DataType, Dictionary, Field, Schema, Type, type Map_, type Struct } from 'apache-arrow';
import { Flag } from '../abi/constants.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import { releaseTreeNode, type Tree, type TreeRecord, type TreeRelease } from '../memory/tree.js';
import { access, type Access } from '../abi/accessors.js';
import { newArena, rawOf, setPtr, type Addr, type Arena } from '../memory/raw.js';
import { isArrowType, typeInfoOf } from './arrowjs.js';
import { formatOf } from './format.js';
import { encodeMetadata } from './metadata.js';
import type { SchemaNode } from './node.js';

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

/** The `SchemaNode` of an arrow-js type with the given name, nullability and metadata. */
function typeToNode(
  type: DataType,
  name: string | null,
  nullable: boolean,
  metadata: ReadonlyMap<string, string> | null,
  path = 'schema',
): SchemaNode {
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

function fieldToNode(field: Field, path = 'schema'): SchemaNode {
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

/** `SchemaNode` of any of the JS schema forms (converted each time: src/array/plan.ts keeps them). */
export function toSchemaNode(s: Schema | Field | DataType | SchemaNode): SchemaNode {
  if (s instanceof Schema) return schemaToNode(s);
  if (s instanceof Field) return fieldToNode(s);
  if (isArrowType(s)) return typeToNode(s, '', true, null);
  return s;
}

// --- the nodes of arrow-js schemas, made once (for exports, and for the plans of imports against them) ---

/** Anything that describes a type: arrow-js objects or a `SchemaNode`. */
export type SchemaLike = Schema | Field | DataType | SchemaNode;

/**
 * A node made from an arrow-js object, with every metadata map it was made
 * from and what each held: arrow-js schemas, fields and types are immutable
 * but for the contents of their metadata maps, so the node is used again
 * while those hold what they held.
 */
interface FromArrow {
  readonly node: SchemaNode;
  readonly maps: readonly ReadonlyMap<string, string>[];
  readonly contents: readonly (readonly string[])[];
}
const nodesOfArrow = new WeakMap<object, FromArrow>();

function fromArrow(key: object, maps: () => ReadonlyMap<string, string>[], make: () => SchemaNode): SchemaNode {
  const hit = nodesOfArrow.get(key);
  if (hit !== undefined && fresh(hit)) return hit.node;
  const node = make();
  const m = maps();
  nodesOfArrow.set(key, { node, maps: m, contents: m.map(mapContents) });
  return node;
}

/** Whether the maps a node was made from hold what they held (the maps themselves are fixed: fields are immutable). */
function fresh(f: FromArrow): boolean {
  for (let i = 0; i < f.maps.length; i++) if (!sameContents(f.maps[i], f.contents[i]!)) return false;
  return true;
}

/** The encodings of exported nodes (`encodeSchema`), by node, for one pointer width. */
const encodings = new WeakMap<SchemaNode, { ps: number; encoded: EncodedSchema }>();

/** Writes the schema `s` into the `ArrowSchema` at `into` (`writeSchemaNode`), encoded once per node. */
export function writeSchema(mem: Memory, s: SchemaLike, into: Ptr): void {
  const node = schemaNodeOf(s);
  const ps = mem.target.pointerSize;
  let e = encodings.get(node);
  if (e === undefined || e.ps !== ps) encodings.set(node, (e = { ps, encoded: encodeSchema(node, ps, mem.layouts.ArrowSchema.size) }));
  writeSchemaNode(mem, node, into, e.encoded);
}

/** The `SchemaNode` of any schema form (an arrow-js object's made once: see `FromArrow`). */
export function schemaNodeOf(s: SchemaLike): SchemaNode {
  if (!(s instanceof Schema || s instanceof Field || isArrowType(s))) return s;
  return fromArrow(s, () => metadataMaps(s), () => toSchemaNode(s));
}

/**
 * The node made before for `s` (else made now), whatever its metadata maps
 * hold now: for what follows types alone, which are immutable (the export
 * writer, src/array/export.ts, reads no names or metadata; the plans of
 * imports against an arrow-js type, src/array/plan.ts).
 */
export function typeNodeOf(s: Field | DataType): SchemaNode {
  return nodesOfArrow.get(s)?.node ?? schemaNodeOf(s);
}

/**
 * The node of a record batch's schema as its data says (its struct type's
 * fields, its schema's metadata): arrow-js can give a batch a `schema`
 * that disagrees with its data where field names repeat (gold case
 * duplicate_fieldnames). Made once per struct type and schema metadata
 * (compared by contents: the batches arrow-js makes have schemas of their own).
 */
export function batchNodeOf(batch: { readonly data: { readonly type: DataType }; readonly schema: Schema }): SchemaNode {
  const struct = batch.data.type as Struct;
  const metadata = batch.schema.metadata;
  const hit = batchNodes.get(struct);
  if (hit !== undefined && sameContents(metadata, hit.metadata) && fresh(hit.fields)) return hit.fields.node;
  const node = toSchemaNode(new Schema(struct.children, metadata));
  const maps = metadataMaps(struct);
  batchNodes.set(struct, { metadata: mapContents(metadata), fields: { node, maps, contents: maps.map(mapContents) } });
  return node;
}
const batchNodes = new WeakMap<DataType, { metadata: readonly string[]; fields: FromArrow }>();

/** Every metadata map a node of `s` is made from: its own (a schema's or a field's), its fields', theirs... */
function metadataMaps(s: Schema | Field | DataType): ReadonlyMap<string, string>[] {
  const out: ReadonlyMap<string, string>[] = [];
  const ofType = (t: DataType): void => {
    if (DataType.isDictionary(t)) return ofType(t.dictionary);
    for (const f of (t.children ?? []) as Field[]) ofField(f);
  };
  const ofField = (f: Field): void => {
    out.push(f.metadata);
    ofType(f.type);
  };
  if (s instanceof Schema) {
    out.push(s.metadata);
    for (const f of s.fields) ofField(f);
  } else if (s instanceof Field) ofField(s);
  else ofType(s);
  return out;
}

function mapContents(m: ReadonlyMap<string, string> | null | undefined): string[] {
  const out: string[] = [];
  if (m) for (const [k, v] of m) out.push(k, v);
  return out;
}

function sameContents(m: ReadonlyMap<string, string> | null | undefined, c: readonly string[]): boolean {
  if ((m?.size ?? 0) * 2 !== c.length) return false;
  if (c.length === 0) return true;
  let i = 0;
  for (const [k, v] of m!) if (k !== c[i++] || v !== c[i++]) return false;
  return true;
}
