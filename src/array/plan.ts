/**
 * The import plan: what a schema says about every array of it, computed
 * once per schema (and `expand` option) and cached here, in the one place
 * that keeps schema-derived state (as nanoarrow computes an `ArrowArrayView`
 * from a schema once, then only sets arrays into it).
 *
 * A plan is a tree of `PlanNode`s, one per schema node: its layout (which
 * buffers, in which roles, how long its children must be: src/schema/layout.ts),
 * the O(length) checks `full` runs on it, and, once asked, the arrow-js type
 * and form it becomes. The reader (read.ts) follows a plan through each
 * array; the arrow-js builder (build.ts) follows it through each read.
 * Nothing of a plan depends on one array, so any number of arrays, batches,
 * stream items and async tasks share it.
 *
 * Target-neutral: the arrow-js form is made by the arrow-js target
 * (plan-arrowjs.ts), which hands its constructors here when it loads
 * (`setArrowForms`), so the flechette target plans and reads without
 * loading apache-arrow. The types named here are type-only imports.
 *
 * Plans are cached in one map, found by the schema object they were given
 * (see "the cache" below). A schema read from a pointer is a new
 * `SchemaNode` each time; equal ones (by content) are mapped to the first
 * (src/schema/node.ts `sharedNode`), so a producer that sends its schema
 * with every array shares one plan too.
 */
import type { DataType, Dictionary, Field, Schema, Struct } from 'apache-arrow';
import { ArrowDeviceError, invalid } from '../errors.js';
import type { ToArrowOptions } from '../schema/arrowjs.js';
import { Kind, layoutOf, type ArrayLayout } from '../schema/layout.js';
import { MAX_NESTING_DEPTH, type SchemaNode } from '../schema/node.js';
import { BUFFERS } from './record.js';

/** The O(length) checks of `full` (full-checks.ts), as bits of `PlanNode.full`. */
export const enum FullCheck {
  /** Offsets monotone and inside their buffer (binary, lists). */
  Offsets = 1,
  /** Views inside their data buffers (view types). */
  Views = 2,
  /** List views inside the child. */
  ListViews = 4,
  /** Union type ids declared, dense offsets inside their child. */
  Union = 8,
  /** Run ends increasing and covering the array. */
  RunEnds = 16,
  /** date64 / timestamp values arrow-js can read as numbers. */
  Millis = 32,
  /** Dictionary indices inside the dictionary. */
  Indices = 64,
}

/**
 * How an arrow-js `Data` of a node is made from its C buffers (arrow-js
 * slices values, offsets and type ids to the array's offset; only bitmaps
 * keep it).
 */
export const enum Form {
  /** Struct or fixed-size list: validity only, and the children seen through the parent's window. */
  StructOrFixedList,
  /** Null: no buffers. */
  Null,
  /** bool: the values bitmap as is. */
  Bits,
  /** Fixed width: values sliced by `stride` elements of `Ctor`. */
  Fixed,
  /** binary/utf8, list, map: int32 offsets (and data for binary). */
  Offsets32,
  /** large binary/utf8, large list: int64 offsets (and data). */
  Offsets64,
  /** binary_view/utf8_view: views and variadic buffers. */
  Views,
  /** Sparse union: type ids; children windows. */
  Sparse,
  /** Dense union: type ids and offsets. */
  Dense,
  /** Dictionary indices of `Ctor`. */
  Indices,
  /** 64-bit dictionary indices narrowed to int32 (a checked copy, under `expand`). */
  Narrowed,
  /** List view or run-end encoded: expanded into a copy (under `expand`). */
  Expanded,
}

export class PlanNode {
  readonly layout: ArrayLayout;
  /** `FullCheck` bits. */
  readonly full: number;
  readonly children: PlanNode[] = [];
  dictionary: PlanNode | null = null;
  /** The arrow-js type of the node (set when the plan's arrow-js form is made). */
  type: DataType | null = null;
  /** How its arrow-js `Data` is made (set with `type`). */
  form = Form.StructOrFixedList;
  /** Fixed: elements of `Ctor` per value. */
  stride = 0;
  /** Fixed, Indices: the typed array constructor of the values. */
  Ctor: TypedArrayCtor | null = null;
  /** Whether `expand` copies something of this subtree: a run-end encoded array or a list view in it. */
  expands = false;
  #expanded: SchemaNode | null = null;

  constructor(readonly schema: SchemaNode) {
    this.layout = layoutOf(schema.type);
    this.full = fullChecks(schema, this.layout);
  }

  /**
   * The schema of this subtree once expanded (expand.ts), what
   * `nodeToType(node, { expand: true })` describes: a run-end encoded node
   * becomes its values' (under its own name, flags and metadata), a list
   * view a list.
   */
  expanded(): SchemaNode {
    if (!this.expands) return this.schema;
    if (this.#expanded !== null) return this.#expanded;
    const node = this.schema;
    const k = this.layout.kind;
    if (k === Kind.RunEnd) {
      this.#expanded = { ...this.children[1]!.expanded(), name: node.name, flags: node.flags, metadata: node.metadata };
    } else if (k === Kind.ListView) {
      const large = this.layout.width === 8;
      this.#expanded = { ...node, format: large ? '+L' : '+l', type: { id: large ? 'large_list' : 'list' }, children: [this.children[0]!.expanded()] };
    } else {
      this.#expanded = { ...node, children: this.children.map((c) => c.expanded()), dictionary: this.dictionary?.expanded() ?? null };
    }
    return this.#expanded;
  }
}

export type TypedArrayCtor =
  | Int8ArrayConstructor | Uint8ArrayConstructor | Int16ArrayConstructor | Uint16ArrayConstructor
  | Int32ArrayConstructor | Uint32ArrayConstructor | Float32ArrayConstructor | Float64ArrayConstructor
  | BigInt64ArrayConstructor | BigUint64ArrayConstructor;

function fullChecks(s: SchemaNode, l: ArrayLayout): number {
  const t = s.type;
  let f = 0;
  if (s.dictionary) f |= FullCheck.Indices;
  switch (l.kind) {
    case Kind.Binary: case Kind.LargeBinary: case Kind.List: case Kind.LargeList: f |= FullCheck.Offsets; break;
    case Kind.View: f |= FullCheck.Views; break;
    case Kind.ListView: f |= FullCheck.ListViews; break;
    case Kind.SparseUnion: case Kind.DenseUnion: f |= FullCheck.Union; break;
    case Kind.RunEnd: f |= FullCheck.RunEnds; break;
    default:
      if ((t.id === 'date' && t.unit === 'ms') || (t.id === 'timestamp' && t.unit !== 'ns')) f |= FullCheck.Millis;
  }
  return f;
}

/** The arrow-js form of a struct root: what a record batch import needs. */
export interface BatchForm {
  readonly schema: Schema;
  readonly struct: Struct;
}

/** What the arrow-js target (plan-arrowjs.ts) hands the plans when it loads: how its forms are made. */
export interface ArrowForms {
  type(node: SchemaNode, path: string, opts: ToArrowOptions): DataType;
  schema(node: SchemaNode, path: string, opts: ToArrowOptions): Schema;
  struct(schema: Schema): Struct;
  /**
   * The plan of an arrow-js schema argument (`Schema`; `Field` or `DataType` unless `batch`); null for
   * a `SchemaNode`; throws the argument error for anything else.
   */
  planOfArg(schema: unknown, batch: boolean): Plan | null;
}

let forms: ArrowForms | null = null;

/** Called once by plan-arrowjs.ts at load. */
export function setArrowForms(f: ArrowForms): void {
  forms = f;
}

function arrowForms(path: string): ArrowForms {
  if (forms === null) throw new ArrowDeviceError('unsupported', path, 'the arrow-js target is not loaded: arrow-js objects come from the "arrow-device" entry (which needs the apache-arrow package)');
  return forms;
}

/** The arrow-js target's `planOfArg` (null when it is not loaded: then only nodes and pointers are schemas). */
export function arrowPlanOfArg(): ArrowForms['planOfArg'] | null {
  return forms === null ? null : forms.planOfArg;
}

/** Plans made since the process started (for tests: one per schema, however many arrays it has). */
let builds = 0;
export function planBuilds(): number {
  return builds;
}

export class Plan {
  readonly root: PlanNode;
  /** Whether a node is under two parents (a `SchemaNode` DAG made in JS): then no record size is known before the read. */
  readonly shared: boolean;
  /** The size of an array's record (record.ts), where the schema alone decides it (0 for view types: their buffers vary). */
  readonly recordSize: number;
  #arrow: DataType | null = null;
  #batch: BatchForm | null = null;

  constructor(
    readonly node: SchemaNode,
    /** `{ expand: true }`: types arrow-js lacks become the nearest it has. */
    readonly expand: boolean,
    /** The arrow-js types given with the schema (an arrow-js `Schema`, `Field` or `DataType`), else made from the node. */
    given: DataType | Schema | null,
    path: string,
    /** Whether `given` is a `Schema` (the caller knows; this module loads no arrow-js class to test it). */
    givenSchema = false,
  ) {
    builds++;
    const made = new Map<SchemaNode, PlanNode>();
    const seen = { shared: false };
    this.root = planNode(node, made, 0, path, seen);
    this.shared = seen.shared;
    this.recordSize = this.shared ? 0 : recordSize(this.root);
    if (given !== null && givenSchema) this.#setBatch(given as Schema, path);
    else if (given !== null) this.#setType(given as DataType, path);
  }

  get opts(): ToArrowOptions {
    return { expand: this.expand };
  }

  /** The arrow-js type of the root, made once (throws `unsupported` where arrow-js lacks a type and `expand` is off). */
  type(path = 'schema'): DataType {
    if (this.#arrow === null) this.#setType(arrowForms(path).type(this.node, path, this.opts), path);
    return this.#arrow!;
  }

  /** The arrow-js `Schema` and `Struct` of a struct root, made once. */
  batch(path = 'schema'): BatchForm {
    if (this.#batch === null) this.#setBatch(arrowForms(path).schema(this.node, path, this.opts), path);
    return this.#batch!;
  }

  /** Whether `form` is this plan's arrow-js form: its root type, or its `Schema`. */
  hasForm(form: Schema | DataType): boolean {
    return this.#arrow === form || this.#batch?.schema === form;
  }

  #setType(type: DataType, path: string): void {
    assignForms(this.root, type, path);
    this.#arrow = type;
  }

  #setBatch(schema: Schema, path: string): void {
    if (this.node.type.id !== 'struct') throw invalid(`${path}.format`, `a schema (record batch) must be a struct ("+s"), got "${this.node.format}"`);
    const struct = arrowForms(path).struct(schema);
    this.#setType(struct, path);
    this.#batch = { schema, struct };
  }
}

/**
 * The plan nodes of `node`'s tree. A `SchemaNode` made in JS may be a DAG
 * (one node object under two parents): it gets one plan node, so a plan
 * costs the number of distinct nodes; the reader, which follows the
 * producer's structs, refuses a struct reached twice.
 */
function planNode(node: SchemaNode, made: Map<SchemaNode, PlanNode>, depth: number, path: string, seen: { shared: boolean }): PlanNode {
  if (depth > MAX_NESTING_DEPTH) throw invalid(path, `nesting deeper than ${MAX_NESTING_DEPTH} levels`);
  let pn = made.get(node);
  if (pn !== undefined) {
    seen.shared = true;
    return pn;
  }
  pn = new PlanNode(node);
  made.set(node, pn);
  for (let i = 0; i < node.children.length; i++) pn.children.push(planNode(node.children[i]!, made, depth + 1, `${path}.children[${i}]`, seen));
  if (node.dictionary) pn.dictionary = planNode(node.dictionary, made, depth + 1, `${path}.dictionary`, seen);
  const k = pn.layout.kind;
  pn.expands = k === Kind.RunEnd || k === Kind.ListView || pn.children.some((c) => c.expands) || (pn.dictionary?.expands ?? false);
  return pn;
}

/** The record size of an array of `pn`'s tree (BUFFERS numbers per node, 2 per buffer), or 0 where view types make it vary. */
function recordSize(pn: PlanNode): number {
  if (pn.layout.variadic) return 0;
  let n = BUFFERS + 2 * pn.layout.nBuffers;
  for (const c of pn.children) {
    const k = recordSize(c);
    if (k === 0) return 0;
    n += k;
  }
  if (pn.dictionary !== null) {
    const k = recordSize(pn.dictionary);
    if (k === 0) return 0;
    n += k;
  }
  return n;
}

/** Sets the arrow-js type and form of every node under `pn`, `type` being its arrow-js type. */
function assignForms(pn: PlanNode, type: DataType, path: string): void {
  pn.type = type;
  const l = pn.layout;
  if (pn.schema.dictionary) {
    const t = pn.schema.type;
    const dict = type as Dictionary;
    if (t.id === 'int' && t.bitWidth === 64) pn.form = Form.Narrowed; // only under expand: nodeToType refuses it otherwise
    else {
      pn.form = Form.Indices;
      pn.Ctor = dict.indices.ArrayType as TypedArrayCtor;
    }
    assignForms(pn.dictionary!, dict.dictionary, `${path}.dictionary`);
    return;
  }
  const child = (i: number, t: DataType): void => assignForms(pn.children[i]!, t, `${path}.children[${i}]`);
  switch (l.kind) {
    case Kind.Null: pn.form = Form.Null; return;
    case Kind.Bool: pn.form = Form.Bits; return;
    case Kind.Binary: pn.form = Form.Offsets32; return;
    case Kind.LargeBinary: pn.form = Form.Offsets64; return;
    case Kind.View: pn.form = Form.Views; return;
    case Kind.List: case Kind.LargeList:
      pn.form = l.kind === Kind.List ? Form.Offsets32 : Form.Offsets64;
      child(0, (type.children[0] as Field).type);
      return;
    case Kind.FixedList: case Kind.Struct: case Kind.SparseUnion: case Kind.DenseUnion:
      pn.form = l.kind === Kind.SparseUnion ? Form.Sparse : l.kind === Kind.DenseUnion ? Form.Dense : Form.StructOrFixedList;
      for (let i = 0; i < pn.children.length; i++) child(i, (type.children[i] as Field).type);
      return;
    case Kind.ListView: case Kind.RunEnd:
      // Only under expand (nodeToType refuses them otherwise); the subtree becomes a copy (expand.ts).
      pn.form = Form.Expanded;
      return;
    default: {
      pn.form = Form.Fixed;
      const Ctor = type.ArrayType as TypedArrayCtor;
      pn.Ctor = Ctor;
      pn.stride = l.width / Ctor.BYTES_PER_ELEMENT;
    }
  }
}

// --- the cache ---------------------------------------------------------------------------

/**
 * The one plan cache. A plan is found by the object its imports were given:
 * the `SchemaNode` they read arrays by, or the arrow-js `Schema`, `Field` or
 * `DataType` they carry (for an arrow-js `Schema` handed out by
 * `batchSchemaOf`, the plan it came from: imports against it read arrays by
 * the producer's node, also where `expand` changed the arrow-js form). Each
 * key holds its plans by `expand` (0: off, 1: on). A node's entry takes the
 * first plan made for it, given form or not, and a given form finds the
 * node's plan when that plan has this very form: one schema, however it
 * comes, makes one plan (test/array/plan.test.ts).
 */
export type Plans = [Plan | undefined, Plan | undefined];
const plans = new WeakMap<SchemaNode | Schema | DataType | Field, Plans>();

export function plansOf(key: SchemaNode | Schema | DataType | Field): Plans {
  let ps = plans.get(key);
  if (ps === undefined) plans.set(key, (ps = [undefined, undefined]));
  return ps;
}

/** The plan of a `SchemaNode` (a schema read from a producer, or one made in JS). */
export function planOfNode(node: SchemaNode, opts: ToArrowOptions = {}, path = 'schema'): Plan {
  const e = opts.expand ? 1 : 0;
  return (plansOf(node)[e] ??= new Plan(node, e === 1, null, path));
}

/**
 * The plan found by `key` that reads by `node` and carries `form` (the
 * arrow-js form given with it; `isSchema`: `form` is a `Schema`). Used by
 * plan-arrowjs.ts, where the arrow-js keys come from.
 */
export function planGiven(key: Schema | DataType | Field, node: SchemaNode, form: Schema | DataType, expand: boolean, path: string, isSchema: boolean): Plan {
  const e = expand ? 1 : 0;
  const byKey = plansOf(key);
  let p = byKey[e];
  if (p !== undefined && p.node === node) return p;
  const byNode = plansOf(node);
  p = byNode[e];
  if (p === undefined || !p.hasForm(form)) {
    p = new Plan(node, expand, form, path, isSchema);
    byNode[e] ??= p;
  }
  return (byKey[e] = p);
}
