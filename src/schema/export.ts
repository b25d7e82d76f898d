/**
 * Export of arrow-js schemas: arrow-js `Schema`/`Field`/`DataType` (or a
 * `SchemaNode`) -> `SchemaNode` -> `ArrowSchema` (the writer: write.ts).
 *
 * The `SchemaNode` of an arrow-js object is made once and used again while
 * its metadata maps hold what they held (`schemaNodeOf`); an exported node is
 * encoded once per pointer width (write.ts). Imports against an arrow-js
 * schema find and make their plan by the same nodes (src/array/plan-arrowjs.ts).
 */
import { DataType, Dictionary, Field, Schema, Type, type Map_, type Struct } from 'apache-arrow';
import { Flag } from '../abi/constants.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { isArrowType, typeInfoOf } from './arrowjs.js';
import { formatOf } from './format.js';
import type { SchemaNode } from './node.js';
import { setTargetSchemaNodes, writeNodeCached } from './write.js';

export { encodeSchema, writeSchemaNode, type EncodedSchema } from './write.js';

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
/** Writes the schema `s` into the `ArrowSchema` at `into` (`writeSchemaNode`), encoded once per node. */
export function writeSchema(mem: Memory, s: SchemaLike, into: Ptr): void {
  writeNodeCached(mem, schemaNodeOf(s), into);
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

// The neutral code that takes "a schema" (src/schema/write.ts `nodeOfSchemaLike`) takes arrow-js ones too.
setTargetSchemaNodes((s) => (s instanceof Schema || s instanceof Field || isArrowType(s) ? schemaNodeOf(s) : undefined));
