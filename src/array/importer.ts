/**
 * The one import path. Every importer (arrays, record batches, tables,
 * device arrays read in place, stream batches, async tasks) is a thin front
 * end over these functions:
 *
 * 1. `consume`: checks the pointer and the struct, resolves the schema and
 *    the options; import consumes its inputs, so on any failure here the
 *    array and a schema given as a pointer are both released.
 * 2. an `ImportOwner` takes the struct (moved, or adopted when it is our
 *    own allocation, as a stream's `get_next` output is).
 * 3. `build`: reads the array tree (validated at the asked level) and
 *    builds the JS objects over it; on failure the owner releases at once,
 *    no view having escaped; on success the objects are recorded as owned.
 *
 * What a record batch import needs of its schema is made once per arrow-js
 * `Schema` object (`batchPlan`), as nanoarrow builds an array view from a
 * schema once: a stream or a driver that sends the schema once pays for it once.
 */
import { DataType, Field, Schema, Struct } from 'apache-arrow';
import { batchSchemaArg, ptrArg, schemaLikeArg, schemaPtrArg } from '../args.js';
import { ArrowDeviceError, invalid } from '../errors.js';
import { isReleased, releaseOffset, releaseStruct, type CStructKind } from '../memory/cstruct.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nodeToSchema, nodeToType, type ToArrowOptions } from '../schema/arrowjs.js';
import { schemaToNode, toSchemaNode } from '../schema/export.js';
import { readSchemaNode, type SchemaNode } from '../schema/node.js';
import { viewToBatch, viewToData } from './arrowjs.js';
import { doneReading, importContext, readArrayView, validationLevel, type ValidationLevel } from './import.js';
import { ptrAt, rawOf, stage, staged, type Arena } from '../memory/raw.js';
import { asImportedBatch, importedData, owned, type ImportedData, type ImportedRecordBatch } from './imported.js';
import { ImportOwner, type OwnedStruct } from './owner.js';
import type { ArrayView } from './view.js';

/** Options every array import takes. */
export interface ImportCoreOptions extends ToArrowOptions {
  /** Copy every buffer into JS memory and release the producer at once. */
  copy?: boolean;
  /** How much of the foreign input to check; `default` unless set. See `ValidationLevel`. */
  validate?: ValidationLevel;
}

/** Anything that describes a type: arrow-js objects or a `SchemaNode`. */
export type SchemaLike = Schema | Field | DataType | SchemaNode;

/** What a record batch import needs of its schema, made once per schema. */
export interface BatchPlan {
  readonly node: SchemaNode;
  readonly arrow: Schema;
  readonly struct: Struct;
}

const plans = new WeakMap<Schema, BatchPlan>();

/** The plan of an arrow-js `Schema` (cached: arrow-js schemas are immutable). */
export function planOfSchema(schema: Schema): BatchPlan {
  let p = plans.get(schema);
  if (!p) {
    p = { node: schemaToNode(schema), arrow: schema, struct: new Struct(schema.fields) };
    plans.set(schema, p);
  }
  return p;
}

const nodePlans = new WeakMap<SchemaNode, { expand: boolean; plan: BatchPlan }>();

/**
 * The plan of a `SchemaNode` read from a producer (record batches need a
 * struct, "+s"), cached per node object and `expand` option: a stream, an
 * async reader or a device array converts its schema once.
 */
export function planOfNode(node: SchemaNode, opts: ToArrowOptions, path = 'schema'): BatchPlan {
  const expand = opts.expand ?? false;
  const hit = nodePlans.get(node);
  if (hit && hit.expand === expand) return hit.plan;
  const arrow = nodeToSchema(node, path, opts);
  const p = { node, arrow, struct: new Struct(arrow.fields) };
  // Cache it under its arrow-js schema too, so that importing more arrays against
  // `reader.schema` / `plan.arrow` reuses it.
  plans.set(arrow, p);
  nodePlans.set(node, { expand, plan: p });
  return p;
}

/** Reads (and releases) an `ArrowSchema` pointer into a `SchemaNode`; `param` names the pointer in argument errors. */
export function readSchemaPtr(m: Memory, ptr: Ptr, keep = false, path = 'schema', param = 'ptr'): SchemaNode {
  schemaPtrArg(ptr, param, m);
  if (ptr === 0n) throw invalid(path, 'NULL pointer');
  if (isReleased(m, 'ArrowSchema', ptr)) throw new ArrowDeviceError('released', path, 'the struct is released (release is NULL)');
  try {
    return readSchemaNode(m, ptr, path);
  } finally {
    // Import consumes the struct, on success and on failure (a released child
    // deeper down does not make the root released).
    if (!keep) releaseStruct(m, 'ArrowSchema', ptr);
  }
}

/** A schema argument as a `SchemaNode` (a pointer is read and released). */
export function nodeOf(m: Memory, schema: SchemaLike | Ptr): SchemaNode {
  schemaLikeArg(schema, 'schema', m, m.layouts.ArrowSchema.size);
  return typeof schema === 'bigint' ? readSchemaPtr(m, schema) : toSchemaNode(schema);
}

/** A schema argument as a batch plan (a pointer is read and released). */
export function planOf(m: Memory, schema: Schema | SchemaNode | Ptr, opts: ToArrowOptions): BatchPlan {
  // A pointer straight to the read, which checks it as batchSchemaArg would (same parameter name):
  // run cold, the class tests cost more than the rest of the argument checks (\`instanceof\` on a
  // bigint still looks up Schema's Symbol.hasInstance: 5-8 us of a 1M-row import from parquet-wasm).
  if (typeof schema === 'bigint') return planOfRead(readSchemaPtr(m, schema, false, 'schema', 'schema'), opts);
  if (schema instanceof Schema) return planOfSchema(schema);
  batchSchemaArg(schema, 'schema', m, m.layouts.ArrowSchema.size);
  return planOfNode(schema as SchemaNode, opts);
}

/**
 * Plans of schemas read from pointers, by content: a producer that hands a
 * new `ArrowSchema` with every array (the PyCapsule protocol's `c_array`, an
 * ADBC driver per query, a wasm module per call) describes the same schema
 * each time, and converting it to arrow-js types cost more than reading it.
 * The struct is still read and checked every time (that is the validation);
 * what is shared is what is built from it, so imports of equal schemas share
 * one arrow-js `Schema`, as a stream's batches do. Bounded: the oldest entry
 * goes when a new one would exceed `MAX_CONTENT_PLANS`.
 */
const contentPlans = new Map<string, BatchPlan>();
const MAX_CONTENT_PLANS = 64;
/** Schemas whose key would be longer are converted every time (the key costs as much as the plan). */
const MAX_KEY_LENGTH = 1 << 16;

function planOfRead(node: SchemaNode, opts: ToArrowOptions): BatchPlan {
  // A node read before (readSchemaNode returns the last node read when the struct matches it).
  const same = nodePlans.get(node);
  if (same && same.expand === (opts.expand ?? false)) return same.plan;
  const key = contentKey(node, opts.expand ? 'e' : 'p');
  if (key.length > MAX_KEY_LENGTH) return planOfNode(node, opts);
  const hit = contentPlans.get(key);
  if (hit) return hit;
  const p = planOfNode(node, opts);
  if (contentPlans.size >= MAX_CONTENT_PLANS) contentPlans.delete(contentPlans.keys().next().value!);
  contentPlans.set(key, p);
  return p;
}

/**
 * Everything of a node that its arrow-js conversion depends on, each string
 * prefixed by its length so that no two different schemas give one key.
 */
function contentKey(n: SchemaNode, key: string): string {
  key += `(${n.format.length}:${n.format}${n.name === null ? '-' : `${n.name.length}:${n.name}`}f${n.flags}`;
  if (n.metadata !== null) {
    key += `m${n.metadata.size}`;
    for (const [k, v] of n.metadata) key += `${k.length}:${k}${v.length}:${v}`;
  }
  for (const c of n.children) {
    key = contentKey(c, key);
    if (key.length > MAX_KEY_LENGTH) return key;
  }
  if (n.dictionary !== null) key = contentKey(n.dictionary, `${key}d`);
  return `${key})`;
}

/** The arrow-js type of a schema argument. */
export function typeOf(schema: SchemaLike | Ptr, node: SchemaNode, opts: ToArrowOptions): DataType {
  return schema instanceof DataType ? schema : schema instanceof Field ? schema.type : nodeToType(node, 'schema', opts);
}

/**
 * Step 1: checks the struct at `ptr` and runs `prepare` (the schema and the
 * options). Import consumes: on any failure the array is released (unless
 * it was NULL or released already) and so is `schema` when it is a pointer
 * not read yet. Returns `prepare`'s result and the validation level.
 */
export function consume<T>(
  m: Memory,
  kind: OwnedStruct,
  ptr: Ptr,
  schema: unknown,
  opts: ImportCoreOptions,
  path: string,
  prepare: () => T,
): { prepared: T; level: number; staged: Arena; at: number } {
  let schemaTaken = false;
  try {
    ptrArg(ptr, 'ptr', m, m.layouts[kind].size, `an ${kind}`);
    if (ptr === 0n) throw invalid(path, 'NULL pointer');
    // The struct, read once: the released check here, then the move (ImportOwner.move) and the
    // first read of the array take these bytes instead of reading the struct again.
    const at = stage(rawOf(m), Number(ptr), m.layouts[kind].size);
    const from = staged;
    if (ptrAt(from.dv, at + releaseOffset(m, kind), m.target.pointerSize === 8) === 0) {
      throw new ArrowDeviceError('released', path, `the struct is released (${kind === 'ArrowArray' ? '' : 'array.'}release is NULL)`);
    }
    const level = validationLevel(opts.validate);
    schemaTaken = true;
    const prepared = prepare();
    return { prepared, level, staged: from, at };
  } catch (e) {
    // Consume what can be consumed; a pointer that is itself the problem (bad address) must not
    // turn the error the caller needs into another one.
    if (!schemaTaken && typeof schema === 'bigint' && schema !== 0n) quietly(() => releaseStruct(m, 'ArrowSchema', schema));
    if (typeof ptr === 'bigint' && ptr !== 0n) quietly(() => releaseStruct(m, kind as CStructKind, ptr));
    throw e;
  }
}

/** Runs a cleanup whose failure must not replace the error being thrown. */
function quietly(fn: () => unknown): void {
  try {
    fn();
  } catch {
    // The original error says what went wrong; this one only follows from it.
  }
}

/**
 * Steps 2 and 3: reads the array the owner holds and builds `fn(view)`;
 * records the result (an object) as owned. On failure the owner has released.
 */
export function build<T>(owner: ImportOwner, node: SchemaNode, opts: ImportCoreOptions, level: number, path: string, fn: (view: ArrayView) => T): T {
  let result: T;
  owner.schema = node;
  try {
    const ctx = importContext(owner, opts.copy ?? false, level);
    try {
      // Our copy of the struct is read in place (src/memory/slab.ts) where the memory allows.
      const view = readArrayView(ctx, owner.arrayAddr, node, path, 0);
      result = fn(view);
    } finally {
      // The views keep the context: not the table of addresses it read, nor the node states.
      doneReading(ctx);
    }
  } catch (e) {
    owner.release('failed');
    throw e;
  }
  owner.done();
  if (typeof result === 'object' && result !== null) owned(result, owner);
  return result;
}

/** A record batch over the owner's struct array. */
export function buildBatch(owner: ImportOwner, plan: BatchPlan, opts: ImportCoreOptions, level: number, path: string): ImportedRecordBatch {
  return build(owner, plan.node, opts, level, path, (view) =>
    asImportedBatch(viewToBatch(view, plan, path, opts), owner),
  );
}

/** arrow-js Data over the owner's array. */
export function buildData(owner: ImportOwner, node: SchemaNode, type: DataType, opts: ImportCoreOptions, level: number, path: string): ImportedData {
  return build(owner, node, opts, level, path, (view) => importedData(viewToData(view, type, path, opts), owner));
}
