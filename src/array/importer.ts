/**
 * The one import path. Every importer (arrays, record batches, tables,
 * device arrays, stream batches, async tasks) is a thin front end over these:
 *
 * 1. `consume`: checks the pointer and the struct, finds the plan of the
 *    schema and the options; import consumes its inputs, so on any failure
 *    here the array and a schema given as a pointer are both released.
 * 2. an `ImportOwner` takes the struct (moved, or adopted when it is our
 *    own allocation, as a stream's `get_next` output is).
 * 3. `importWith`: reads the array tree through the plan (read.ts) at the
 *    asked level and builds the JS objects over the record; on failure the
 *    owner releases at once, no view having escaped; on success the
 *    objects are recorded as owned.
 */
import { describeValue, isSchemaNode, ptrArg, schemaPtrArg } from '../args.js';
import { ArrowDeviceError, invalid } from '../errors.js';
import { isReleased, releaseOffset, releaseStruct, type CStructKind } from '../memory/cstruct.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { ptrAt, rawOf, stage, staged, type Arena } from '../memory/raw.js';
import type { ToArrowOptions } from '../schema/arrowjs.js';
import { readSharedSchema, type SchemaNode } from '../schema/node.js';
import { owned } from './owned.js';
import { ImportOwner, type OwnedStruct } from './owner.js';
import { type SchemaLike } from '../schema/export.js';
import { arrowPlanOfArg, planOfNode, type Plan } from './plan.js';

export type { SchemaLike };
import { readArray, validationLevel, type DeviceReader, type ValidationLevel } from './read.js';
import { ImportRead } from './record.js';

/** Options every array import takes. */
export interface ImportCoreOptions extends ToArrowOptions {
  /** Copy every buffer into JS memory and release the producer at once. */
  copy?: boolean;
  /** How much of the foreign input to check; `default` unless set. See `ValidationLevel`. */
  validate?: ValidationLevel;
}


/**
 * Reads (and releases, unless `keep`) an `ArrowSchema` pointer into a
 * `SchemaNode`; `param` names the pointer in argument errors. A schema
 * equal to one read before comes back as that node (src/schema/node.ts
 * `readSharedSchema`), so arrays imported against either share one plan.
 */
export function readSchemaPtr(m: Memory, ptr: Ptr, keep = false, path = 'schema', param = 'ptr'): SchemaNode {
  schemaPtrArg(ptr, param, m);
  if (ptr === 0n) throw invalid(path, 'NULL pointer');
  if (isReleased(m, 'ArrowSchema', ptr)) throw new ArrowDeviceError('released', path, 'the struct is released (release is NULL)');
  try {
    return readSharedSchema(m, ptr, path);
  } finally {
    // Import consumes the struct, on success and on failure (a released child
    // deeper down does not make the root released).
    if (!keep) releaseStruct(m, 'ArrowSchema', ptr);
  }
}

/**
 * The plan of a schema argument: a pointer is read and released; an
 * arrow-js `Schema`, `Field` or `DataType` gives its own types to the
 * import (where the arrow-js target is loaded: plan-arrowjs.ts); a
 * `SchemaNode` is converted once (plan.ts caches every plan). Another
 * target converts its schemas to a `SchemaNode` before it calls here.
 */
export function planOf(m: Memory, schema: SchemaLike | Ptr, opts: ToArrowOptions, batch = false): Plan {
  // A pointer straight to the read, which checks it under the same parameter name.
  if (typeof schema === 'bigint') return planOfNode(readSchemaPtr(m, schema, false, 'schema', 'schema'), opts);
  const arrow = arrowPlanOfArg();
  if (arrow !== null) {
    const p = arrow(schema, batch);
    if (p !== null) return p;
  } else if (!isSchemaNode(schema)) {
    throw invalid('schema', `expected a SchemaNode or a pointer (bigint) to an ArrowSchema, got ${describeValue(schema)}`);
  }
  return planOfNode(schema as SchemaNode, opts);
}

/** What `consume` found. */
export interface Consumed {
  /** The plan of the schema (null when `consume` was given none to find). */
  readonly plan: Plan | null;
  readonly level: number;
  /** Where the struct's bytes were staged (the move takes them from there). */
  readonly staged: Arena;
  readonly at: number;
}

/** How `consume` finds the plan of a schema argument. */
export const enum PlanOf {
  /** The schema was read already (a table's arrays, a stream's items): find none. */
  None,
  /** An array's, read as it is (an `ArrayView`, a `DeviceArray`). */
  Array,
  /** An array's, its arrow-js type made (arrow-js `Data`). */
  Data,
  /** A record batch's: a struct, its arrow-js form made. */
  Batch,
}

/**
 * Step 1: checks the struct at `ptr` (its place: `path`, or `path[index]`)
 * and finds the plan of `schema`. Import consumes: on any failure the array
 * is released (unless it was NULL or released already) and so is `schema`
 * when it is a pointer not read yet.
 */
export function consume(
  m: Memory,
  kind: OwnedStruct,
  ptr: Ptr,
  schema: SchemaLike | Ptr | undefined,
  opts: ImportCoreOptions,
  path: string,
  plan: PlanOf,
  index = -1,
): Consumed {
  let schemaTaken = false;
  try {
    ptrArg(ptr, 'ptr', m, m.layouts[kind].size, `an ${kind}`);
    if (ptr === 0n) throw invalid(index < 0 ? path : `${path}[${index}]`, 'NULL pointer');
    const at = stage(rawOf(m), Number(ptr), m.layouts[kind].size);
    const from = staged;
    if (ptrAt(from.dv, at + releaseOffset(m, kind), m.target.pointerSize === 8) === 0) {
      throw new ArrowDeviceError('released', index < 0 ? path : `${path}[${index}]`, `the struct is released (${kind === 'ArrowArray' ? '' : 'array.'}release is NULL)`);
    }
    const level = validationLevel(opts.validate);
    schemaTaken = true;
    let p: Plan | null = null;
    if (plan !== PlanOf.None) {
      p = planOf(m, schema!, opts, plan === PlanOf.Batch);
      // A type arrow-js lacks is refused here, while the array is still the caller's to consume.
      if (plan === PlanOf.Batch) p.batch();
      else if (plan === PlanOf.Data) p.type();
    }
    return { plan: p, level, staged: from, at };
  } catch (e) {
    // Consume what can be consumed; a pointer that is itself the problem (bad address) must not
    // turn the error the caller needs into another one.
    if (!schemaTaken && typeof schema === 'bigint' && schema !== 0n) quietly(() => releaseStruct(m, 'ArrowSchema', schema));
    if (typeof ptr === 'bigint' && ptr !== 0n) quietly(() => releaseStruct(m, kind as CStructKind, ptr));
    throw e;
  }
}

/** Runs a cleanup whose failure must not replace the error being thrown. */
export function quietly(fn: () => unknown): void {
  try {
    fn();
  } catch {
    // The original error says what went wrong; this one only follows from it.
  }
}

/**
 * Steps 2 and 3: reads the array the owner holds through `plan` (at `level`;
 * `device`: how buffer bytes are read where the host cannot read them) and
 * builds `fn(read)`; records the result as owned by `owner`. On failure the
 * owner has released. `index`: the array's place in a list (`path[index]`).
 */
export function importWith<T extends object>(
  owner: ImportOwner,
  plan: Plan,
  opts: ImportCoreOptions,
  level: number,
  path: string,
  fn: (read: ImportRead) => T,
  device: DeviceReader | null = null,
  index = -1,
): T {
  const copy = opts.copy ?? false;
  owner.schema = plan.node;
  const read = new ImportRead(plan, copy ? null : owner, owner.mem, path, level, copy, index);
  let result: T;
  try {
    readArray(read, owner.arrayAddr, device);
    result = fn(read);
  } catch (e) {
    owner.release('failed');
    throw e;
  }
  // The record keeps the producer's memory while anything that can still view it is reachable.
  if (read.holds && !copy) owner.hold(read);
  owner.done();
  return owned(result, owner);
}
