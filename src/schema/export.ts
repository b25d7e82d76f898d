/**
 * Export: arrow-js `Schema`/`Field`/`DataType` (or a `SchemaNode`) ->
 * `ArrowSchema` in a Memory.
 *
 * Each exported node owns one allocation holding its children pointer array,
 * its children's and dictionary's structs, its metadata blob and its
 * strings. A child's own allocation is separate, so a consumer may move a
 * child out and release it on its own (CDataInterface.rst, "Moving child
 * arrays" applies to schemas too). One registered release callback serves all
 * schema exports; `private_data` holds the id of the node's record.
 */
import { DataType, Dictionary, Field, Schema, Type, type Map_ } from 'apache-arrow';
import { Flag } from '../abi/constants.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { defineCallback, HandleTable, RELEASE_SIG } from '../memory/registry.js';
import { encodePointers, StructWriter } from '../memory/struct.js';
import { typeInfoOf } from './arrowjs.js';
import { formatOf } from './format.js';
import { encodeMetadata } from './metadata.js';
import type { SchemaNode } from './node.js';

interface SchemaRecord {
  mem: Memory;
  block: Ptr;
  children: Ptr[];
  dictionary: Ptr;
}

const records = new HandleTable<SchemaRecord>();
const encoder = new TextEncoder();

function releaseSchema(mem: Memory, ptr: Ptr): void {
  const o = mem.layouts.ArrowSchema.offsets;
  const id = Number(mem.readPtr(ptr + BigInt(o.private_data!)));
  const rec = records.take(id);
  if (!rec) return; // not ours, or already released: never free twice
  for (const child of rec.children) releaseIfLive(mem, child);
  if (rec.dictionary !== 0n) releaseIfLive(mem, rec.dictionary);
  mem.free(rec.block);
  mem.writePtr(ptr + BigInt(o.release!), 0n);
  liveCounters.liveExports--;
}

/** Releases a child struct the consumer did not move out. */
function releaseIfLive(mem: Memory, ptr: Ptr): void {
  const rel = mem.readPtr(ptr + BigInt(mem.layouts.ArrowSchema.offsets.release!));
  if (rel === 0n) return; // moved out by the consumer, who releases it
  if (rel === releaseCallback(mem)) releaseSchema(mem, ptr);
  else mem.call(rel, RELEASE_SIG, ptr);
}

const releaseCallback = defineCallback('schema.release', RELEASE_SIG, (mem, p) => releaseSchema(mem, p as bigint));

/** Writes `node` into the `ArrowSchema` at `into` (memory the caller owns). */
export function writeSchemaNode(mem: Memory, node: SchemaNode, into: Ptr): void {
  const L = mem.layouts.ArrowSchema;
  const ps = mem.target.pointerSize;
  const n = node.children.length;
  const format = encoder.encode(node.format + '\0');
  const name = node.name === null ? null : encoder.encode(node.name + '\0');
  const metadata = encodeMetadata(node.metadata);
  const structs = n + (node.dictionary ? 1 : 0);
  const ptrsBytes = Math.ceil((n * ps) / 8) * 8;
  const structsBytes = structs * L.size;
  const mdBytes = metadata ? Math.ceil(metadata.length / 8) * 8 : 0;
  const tailStart = ptrsBytes + structsBytes;
  const size = tailStart + mdBytes + format.length + (name?.length ?? 0);
  const block = mem.alloc(size);
  const childPtrs = node.children.map((_, i) => block + BigInt(ptrsBytes + i * L.size));
  const dictionary: Ptr = node.dictionary ? block + BigInt(ptrsBytes + n * L.size) : 0n;
  // Pointer array, metadata and strings in one copy; the child structs between them are written below.
  const head = new Uint8Array(ptrsBytes);
  encodePointers(mem, childPtrs, head);
  const tail = new Uint8Array(size - tailStart);
  if (metadata) tail.set(metadata, 0);
  tail.set(format, mdBytes);
  if (name) tail.set(name, mdBytes + format.length);
  mem.copyIn(block, head);
  mem.copyIn(block + BigInt(tailStart), tail);
  const mdPtr: Ptr = metadata ? block + BigInt(tailStart) : 0n;
  const formatPtr = block + BigInt(tailStart + mdBytes);
  const namePtr: Ptr = name ? formatPtr + BigInt(format.length) : 0n;
  const written: Ptr[] = [];
  try {
    for (let i = 0; i < n; i++) {
      writeSchemaNode(mem, node.children[i]!, childPtrs[i]!);
      written.push(childPtrs[i]!);
    }
    if (node.dictionary) writeSchemaNode(mem, node.dictionary, dictionary);
  } catch (e) {
    for (const c of written) releaseIfLive(mem, c);
    mem.free(block);
    throw e;
  }
  const id = records.add({ mem, block, children: childPtrs, dictionary });
  new StructWriter(L)
    .ptr('format', formatPtr)
    .ptr('name', namePtr)
    .ptr('metadata', mdPtr)
    .i64('flags', node.flags)
    .i64('n_children', n)
    .ptr('children', n > 0 ? block : 0n)
    .ptr('dictionary', dictionary)
    .ptr('private_data', BigInt(id))
    .ptr('release', releaseCallback(mem))
    .writeTo(mem, into);
  liveCounters.liveExports++;
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
