/**
 * The arrow-js side of the import plan (plan.ts is target-neutral): the
 * plans found by arrow-js objects (`Schema`, `Field`, `DataType`), the
 * arrow-js `Schema` a reader hands out, and, handed to plan.ts at load, how
 * a plan's arrow-js form is made. Every module that builds arrow-js objects
 * from an import reaches this one, so a plan's arrow-js form is there
 * whenever an arrow-js object is asked for; the flechette target never
 * loads it, nor apache-arrow.
 */
import { Field, Schema, Struct, type DataType } from 'apache-arrow';
import { describeValue, isSchemaNode } from '../args.js';
import { invalid } from '../errors.js';
import { isArrowType, nodeToSchema, nodeToType } from '../schema/arrowjs.js';
import { schemaNodeOf, typeNodeOf } from '../schema/export.js';
import type { SchemaNode } from '../schema/node.js';
import { planGiven, plansOf, setArrowForms, type Plan } from './plan.js';

setArrowForms({
  type: (node, path, opts) => nodeToType(node, path, opts),
  schema: (node, path, opts) => nodeToSchema(node, path, opts),
  struct: (schema) => new Struct(schema.fields),
  planOfArg,
});

/**
 * The plan of the schema argument of an import (src/array/importer.ts
 * `planOf`, after a pointer): an arrow-js `Schema`, or for an array import
 * also a `Field` or `DataType`; null for a `SchemaNode`; anything else is
 * the caller's mistake, named.
 */
function planOfArg(schema: unknown, batch: boolean): Plan | null {
  if (schema instanceof Schema) return planOfSchema(schema);
  if (!batch && (schema instanceof Field || isArrowType(schema))) return planOfType(schema);
  if (isSchemaNode(schema)) return null;
  throw invalid(
    'schema',
    batch
      ? `expected an arrow-js Schema, a SchemaNode or a pointer (bigint) to an ArrowSchema, got ${describeValue(schema)}`
      : `expected an arrow-js Schema, Field or DataType, a SchemaNode or a pointer (bigint) to an ArrowSchema, got ${describeValue(schema)}`,
  );
}

/**
 * The plan of an arrow-js `Schema`: imports against it carry this `Schema`
 * object (and its fields' types). Made once per object: arrays are read by
 * its types, which never change (its metadata maps may, which only exports
 * follow: `schemaNodeOf`).
 */
export function planOfSchema(schema: Schema): Plan {
  const ps = plansOf(schema);
  return ps[0] ?? ps[1] ?? planGiven(schema, schemaNodeOf(schema), schema, false, 'schema', true);
}

/**
 * The plan of an arrow-js `DataType` or `Field`: imports carry its type as
 * given. Found by the node made for it before (`typeNodeOf`), whatever its
 * metadata maps hold now, as a `Schema`'s is: a type is also the key of
 * `planWithType`'s plans, which read by other nodes.
 */
export function planOfType(t: DataType | Field): Plan {
  return planGiven(t, typeNodeOf(t), t instanceof Field ? t.type : t, false, 'schema', false);
}

/**
 * The plan of `node` whose arrow-js type is `type` (a plain view converted
 * with a given type, as after an expansion).
 */
export function planWithType(node: SchemaNode, type: DataType, expand: boolean, path: string): Plan {
  return planGiven(type, node, type, expand, path, false);
}

/** The `Schema` of `plan` as a record batch, remembered so that imports against it find this plan. */
export function batchSchemaOf(plan: Plan, path = 'schema'): Schema {
  const s = plan.batch(path).schema;
  plansOf(s)[plan.expand ? 1 : 0] ??= plan;
  return s;
}
