/**
 * `SchemaNode` <-> arrow-js `Field`/`Schema`/`DataType`.
 *
 * arrow-js 21 has no list-view, large-list-view or run-end-encoded types:
 * converting those throws an `unsupported` error naming the place, unless
 * the caller asks for the nearest arrow-js type (`expand`): list view ->
 * list, large list view -> large list, run-end encoded -> its values type.
 * The array layer converts the data the same way, so nothing is lost
 * silently. Extension types keep their `ARROW:extension:*` metadata on the
 * field; arrow-js has no extension type registry to do more with it.
 */
import {
  Binary, Bool, DataType, DateDay, DateMillisecond, Decimal, DenseUnion, Dictionary, Duration, Field,
  FixedSizeBinary, FixedSizeList, Float16, Float32, Float64, Int16, Int32, Int64, Int8, Interval, IntervalUnit,
  LargeBinary, LargeUtf8, List, Map_, Null, Schema, SparseUnion, Struct, Time, TimeUnit, Timestamp, Type,
  Uint16, Uint32, Uint64, Uint8, UnionMode, Utf8, Int as IntType,
} from 'apache-arrow';
import * as arrow from 'apache-arrow';
import { Flag } from '../abi/constants.js';
import { invalid, unsupported } from '../errors.js';
import type { TimeUnit as OurUnit, TypeInfo } from './format.js';
import type { SchemaNode } from './node.js';

// Each option here must be part of the key of planOfRead's cache (src/array/importer.ts).
/** Options of the conversion to arrow-js types. */
export interface ToArrowOptions {
  /** Convert types arrow-js lacks to the nearest one it has (list view -> list, run-end encoded -> values). */
  expand?: boolean;
}

/**
 * The arrow-js types that apache-arrow 21.2.0 added, `undefined` under 21.0
 * and 21.1, which the peer range also allows (package.json). Read off the
 * module namespace, never imported by name: a named import of an export the
 * installed version lacks fails the ESM link, and the library would not load
 * at all. A static member read keeps bundlers' tree shaking of arrow-js (a
 * bundle made with an older version warns of the missing export). Every use
 * goes through `arrowType`.
 */
export const ARROW_21_2: { readonly BinaryView?: typeof arrow.BinaryView; readonly Utf8View?: typeof arrow.Utf8View; readonly LargeList?: typeof arrow.LargeList } = {
  BinaryView: arrow.BinaryView,
  Utf8View: arrow.Utf8View,
  LargeList: arrow.LargeList,
};

/** The arrow-js class `name` of `ARROW_21_2`, or an `unsupported` error at `path` that names the version it needs. */
export function arrowType<K extends keyof typeof ARROW_21_2>(name: K, path: string): NonNullable<(typeof ARROW_21_2)[K]> {
  const C = ARROW_21_2[name];
  if (C === undefined) {
    throw unsupported(
      path,
      `arrow-js has a ${name} type from apache-arrow 21.2.0 on, and the apache-arrow this program loaded is older (21.0 or 21.1: it has no ${name} export): ` +
        'install apache-arrow 21.2.0 or later, or import the data as an ArrayView',
    );
  }
  return C as NonNullable<(typeof ARROW_21_2)[K]>;
}

/** Assigns arrow-js dictionary ids, unique within one schema. */
export interface DictionaryIds {
  next: number;
}

const unitToArrow: Record<OurUnit, TimeUnit> = {
  s: TimeUnit.SECOND,
  ms: TimeUnit.MILLISECOND,
  us: TimeUnit.MICROSECOND,
  ns: TimeUnit.NANOSECOND,
};
const arrowToUnit: Record<number, OurUnit> = { 0: 's', 1: 'ms', 2: 'us', 3: 'ns' };

function intType(t: { bitWidth: 8 | 16 | 32 | 64; signed: boolean }): DataType {
  switch (t.bitWidth) {
    case 8: return t.signed ? new Int8() : new Uint8();
    case 16: return t.signed ? new Int16() : new Uint16();
    case 32: return t.signed ? new Int32() : new Uint32();
    case 64: return t.signed ? new Int64() : new Uint64();
  }
}

/** The arrow-js type of `node` (ignoring its dictionary). */
function baseType(node: SchemaNode, path: string, opts: ToArrowOptions, ids: DictionaryIds): DataType {
  const t: TypeInfo = node.type;
  const child = (i: number): Field => nodeToField(node.children[i]!, `${path}.children[${i}]`, opts, ids);
  switch (t.id) {
    case 'null': return new Null();
    case 'bool': return new Bool();
    case 'int': return intType(t);
    case 'float': return t.bitWidth === 16 ? new Float16() : t.bitWidth === 32 ? new Float32() : new Float64();
    case 'binary': return new Binary();
    case 'utf8': return new Utf8();
    case 'large_binary': return new LargeBinary();
    case 'large_utf8': return new LargeUtf8();
    case 'binary_view': return new (arrowType('BinaryView', `${path}.format`))();
    case 'utf8_view': return new (arrowType('Utf8View', `${path}.format`))();
    case 'fixed_binary': return new FixedSizeBinary(t.byteWidth);
    case 'decimal': return new Decimal(t.scale, t.precision, t.bitWidth);
    case 'date': return t.unit === 'day' ? new DateDay() : new DateMillisecond();
    case 'time': return new Time(unitToArrow[t.unit], (t.unit === 's' || t.unit === 'ms' ? 32 : 64) as 32 | 64);
    case 'timestamp': return new Timestamp(unitToArrow[t.unit], t.timezone);
    case 'duration': return new Duration(unitToArrow[t.unit]);
    case 'interval':
      return new Interval(
        t.unit === 'month' ? IntervalUnit.YEAR_MONTH : t.unit === 'day_time' ? IntervalUnit.DAY_TIME : IntervalUnit.MONTH_DAY_NANO,
      );
    case 'list': return new List(child(0));
    case 'large_list': return new (arrowType('LargeList', `${path}.format`))(child(0));
    case 'fixed_list': return new FixedSizeList(t.size, child(0));
    case 'struct': return new Struct(node.children.map((_, i) => child(i)));
    case 'map': return new Map_(child(0) as Field<Struct>, (node.flags & Flag.MAP_KEYS_SORTED) !== 0);
    case 'union': {
      const children = node.children.map((_, i) => child(i));
      return t.mode === 'dense' ? new DenseUnion([...t.typeIds], children) : new SparseUnion([...t.typeIds], children);
    }
    case 'list_view':
    case 'large_list_view':
      if (opts.expand) return t.id === 'list_view' ? new List(child(0)) : new (arrowType('LargeList', `${path}.format`))(child(0));
      throw unsupported(
        `${path}.format`,
        `arrow-js has no ${t.id === 'list_view' ? 'list view' : 'large list view'} type ("${node.format}"); import it as an ArrayView, or pass { expand: true } to convert it to a ${t.id === 'list_view' ? 'list' : 'large list'}`,
      );
    case 'run_end_encoded':
      if (opts.expand) return nodeToField(node.children[1]!, `${path}.children[1]`, opts, ids).type;
      throw unsupported(
        `${path}.format`,
        'arrow-js has no run-end encoded type ("+r"); import it as an ArrayView, or pass { expand: true } to expand it to its values type',
      );
  }
}

/**
 * Whether `v` is an arrow-js `DataType` of this copy of arrow-js or of
 * another (a CommonJS consumer's `require('apache-arrow')` loads a second
 * copy): arrow-js's `Schema`, `Field`, `Data` and `RecordBatch` answer
 * `instanceof` for any copy, its `DataType` does not, so a type is known by
 * its `typeId`, as arrow-js's own `DataType.is*` do.
 */
export function isArrowType(v: unknown): v is DataType {
  return v instanceof DataType || (typeof v === 'object' && v !== null && typeof (v as DataType).typeId === 'number' && !('format' in v));
}

/** The arrow-js type of `node`, a `Dictionary` when it has a dictionary. */
export function nodeToType(node: SchemaNode, path = 'schema', opts: ToArrowOptions = {}, ids: DictionaryIds = { next: 0 }): DataType {
  const base = baseType(node, path, opts, ids);
  if (!node.dictionary) return base;
  const values = nodeToType(node.dictionary, `${path}.dictionary`, opts, ids);
  if (!(base instanceof IntType)) throw invalid(`${path}.format`, `dictionary indices must be integers, got "${node.format}"`);
  let indices = base as Int32;
  if ((base as IntType).bitWidth === 64) {
    // arrow-js 21 builds Dictionary<_, Int64> but cannot read it: its get() mixes the BigInt index with
    // numbers ("Cannot mix BigInt and other types"). So 64-bit indices are refused here, typed, or,
    // with `expand`, narrowed to int32 (a copy; viewToData checks that every index fits).
    if (!opts.expand) {
      throw unsupported(
        `${path}.format`,
        `arrow-js cannot read 64-bit dictionary indices ("${node.format}"); import as an ArrayView, or pass { expand: true } to narrow them to int32`,
      );
    }
    indices = new Int32();
  }
  return new Dictionary(values, indices, ids.next++, (node.flags & Flag.DICTIONARY_ORDERED) !== 0);
}

/** An arrow-js `Field` for `node` (name, type, nullability, metadata). */
export function nodeToField(node: SchemaNode, path = 'schema', opts: ToArrowOptions = {}, ids: DictionaryIds = { next: 0 }): Field {
  const type = nodeToType(node, path, opts, ids);
  return new Field(node.name ?? '', type, (node.flags & Flag.NULLABLE) !== 0, node.metadata ? new Map(node.metadata) : null);
}

/** An arrow-js `Schema` from a struct node: its children are the fields, its metadata the schema's. */
export function nodeToSchema(node: SchemaNode, path = 'schema', opts: ToArrowOptions = {}): Schema {
  if (node.type.id !== 'struct') {
    throw invalid(`${path}.format`, `a schema (record batch) must be a struct ("+s"), got "${node.format}"`);
  }
  const ids: DictionaryIds = { next: 0 };
  const fields = node.children.map((c, i) => nodeToField(c, `${path}.children[${i}]`, opts, ids));
  return new Schema(fields, node.metadata ? new Map(node.metadata) : null);
}

// --- arrow-js -> SchemaNode --------------------------------------------------------

/** Our `TypeInfo` for an arrow-js type (a dictionary's index type for a Dictionary). */
export function typeInfoOf(type: DataType, path = 'type'): TypeInfo {
  switch (type.typeId) {
    case Type.Null: return { id: 'null' };
    case Type.Bool: return { id: 'bool' };
    case Type.Int: {
      const t = type as IntType;
      return { id: 'int', bitWidth: t.bitWidth as 8 | 16 | 32 | 64, signed: t.isSigned };
    }
    case Type.Float: {
      const p = (type as Float16 | Float32 | Float64).precision;
      return { id: 'float', bitWidth: p === 0 ? 16 : p === 1 ? 32 : 64 };
    }
    case Type.Binary: return { id: 'binary' };
    case Type.Utf8: return { id: 'utf8' };
    case Type.LargeBinary: return { id: 'large_binary' };
    case Type.LargeUtf8: return { id: 'large_utf8' };
    case Type.BinaryView: return { id: 'binary_view' };
    case Type.Utf8View: return { id: 'utf8_view' };
    case Type.FixedSizeBinary: return { id: 'fixed_binary', byteWidth: (type as FixedSizeBinary).byteWidth };
    case Type.Decimal: {
      const t = type as Decimal;
      return { id: 'decimal', bitWidth: t.bitWidth as 32 | 64 | 128 | 256, precision: t.precision, scale: t.scale };
    }
    case Type.Date: return { id: 'date', unit: (type as DateDay).unit === 0 ? 'day' : 'ms' };
    case Type.Time: return { id: 'time', unit: arrowToUnit[(type as Time).unit]! };
    case Type.Timestamp: {
      const t = type as Timestamp;
      return { id: 'timestamp', unit: arrowToUnit[t.unit]!, timezone: t.timezone ?? null };
    }
    case Type.Duration: return { id: 'duration', unit: arrowToUnit[(type as Duration).unit]! };
    case Type.Interval: {
      const u = (type as Interval).unit;
      return { id: 'interval', unit: u === IntervalUnit.YEAR_MONTH ? 'month' : u === IntervalUnit.DAY_TIME ? 'day_time' : 'month_day_nano' };
    }
    case Type.List: return { id: 'list' };
    case Type.LargeList: return { id: 'large_list' };
    case Type.FixedSizeList: return { id: 'fixed_list', size: (type as FixedSizeList).listSize };
    case Type.Struct: return { id: 'struct' };
    case Type.Map: return { id: 'map' };
    case Type.Union: {
      const t = type as DenseUnion | SparseUnion;
      return { id: 'union', mode: t.mode === UnionMode.Dense ? 'dense' : 'sparse', typeIds: Array.from(t.typeIds) };
    }
    case Type.Dictionary: return typeInfoOf((type as Dictionary).indices, path);
    default:
      throw unsupported(path, `arrow-js type ${String(type)} (type id ${type.typeId}) has no C Data Interface format`);
  }
}
