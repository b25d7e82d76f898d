/**
 * Schemas between the library's target-neutral `SchemaNode` and flechette's `Schema`, `Field` and
 * `DataType`, both ways. Every type of the format strings (CDataInterface.rst, "Data type description
 * -- format strings") has a flechette type; what flechette has no place for (the root's name and flags,
 * the name, flags and metadata of a dictionary's values schema) is dropped, and what it cannot say
 * comes back as the C defaults (see `schemaNodeOfSchema`). Loads flechette, never arrow-js.
 */
import {
  binary, binaryView, bool, date, DateUnit, decimal, dictionary, duration, Endianness, field, fixedSizeBinary,
  fixedSizeList, float, int, interval, IntervalUnit, largeBinary, largeList, largeListView, largeUtf8, list, listView,
  nullType, Precision, runEndEncoded, struct, time, TimeUnit, timestamp, Type, union, UnionMode, utf8, utf8View, Version,
  type DataType, type Field, type IntBitWidth, type IntType, type MapType, type Schema,
} from '@uwdata/flechette';
import { Flag } from '../abi/constants.js';
import { invalid, unsupported } from '../errors.js';
import { formatOf, parseFormat, type TimeUnit as CTimeUnit, type TypeInfo } from '../schema/format.js';
import { checkNode, type SchemaNode } from '../schema/node.js';

/** A flechette `Type` value (`Type.Int`, `Type.Dictionary`, ...). */
export type FlechetteTypeId = (typeof Type)[keyof typeof Type];

const toUnit = { s: TimeUnit.SECOND, ms: TimeUnit.MILLISECOND, us: TimeUnit.MICROSECOND, ns: TimeUnit.NANOSECOND } as const;
const fromUnit: readonly CTimeUnit[] = ['s', 'ms', 'us', 'ns'];
const toInterval = { month: IntervalUnit.YEAR_MONTH, day_time: IntervalUnit.DAY_TIME, month_day_nano: IntervalUnit.MONTH_DAY_NANO } as const;
const fromInterval = ['month', 'day_time', 'month_day_nano'] as const;

/**
 * Per conversion of one schema: the flechette type made for each dictionary values node, so that
 * fields sharing one values node share one values type. flechette's IPC writer finds a dictionary's
 * id by the identity of that type (`idMap.get(type.dictionary)`, encode/table-to-ipc.js).
 */
type DictTypes = Map<SchemaNode, DataType>;

/**
 * The flechette `DataType` of a node: for a dictionary-encoded node a flechette `dictionary` type
 * (values, index type, ordered flag) with id -1, flechette's "this field's own dictionary": the C Data
 * Interface has no dictionary ids, each array carries its dictionary (CDataInterface.rst,
 * "Dictionary-encoded arrays"), and flechette's IPC writer numbers dictionaries itself.
 *
 * @example
 * flechetteType(importSchemaNode(schemaPtr)); // { typeId: Type.Timestamp, unit: TimeUnit.MICROSECOND, timezone: 'UTC', ... }
 */
export function flechetteType(node: SchemaNode, path = 'schema'): DataType {
  let t = typesOf.get(node);
  if (t === undefined) typesOf.set(node, (t = typeOf(node, path, new Map())));
  return t;
}

/**
 * The flechette forms made of a node, kept for its next import: a stream's schema node is one object for
 * every batch (and equal schemas share one: src/schema/node.ts `sharedNode`), so its types are made once
 * per stream, not per batch, and every batch of it carries the same type objects (which flechette's IPC
 * writer needs of dictionaries). They are shared, as an arrow-js import's `Schema` is: not to be changed.
 */
const typesOf = new WeakMap<SchemaNode, DataType>();
const schemasOf = new WeakMap<SchemaNode, Schema>();

/**
 * The flechette `Field` of a node: its name ('' for a NULL name), type, `nullable` (the
 * `ARROW_FLAG_NULLABLE` bit) and metadata (a `Map`, null where the node has none).
 *
 * @example
 * const f = flechetteField(node); // { name: 'x', type: int32(), nullable: true, metadata: null }
 */
export function flechetteField(node: SchemaNode, path = 'schema'): Field {
  return fieldOf(node, path, new Map());
}

/**
 * The flechette `Schema` of a record batch's struct node (format `+s`, CDataInterface.rst, "Record
 * batches"): one field per child, the root's metadata as the schema's.
 *
 * @example
 * const schema = flechetteSchema(importSchemaNode(schemaPtr));
 * schema.fields.map((f) => f.name); // ['id', 'name']
 */
export function flechetteSchema(node: SchemaNode, path = 'schema'): Schema {
  let s = schemasOf.get(node);
  if (s === undefined) schemasOf.set(node, (s = schemaOf(node, path)));
  return s;
}

function schemaOf(node: SchemaNode, path: string): Schema {
  if (node.type.id !== 'struct') throw invalid(`${path}.format`, `a record batch's schema is a struct ("+s"), got "${node.format}"`);
  const dicts: DictTypes = new Map();
  return {
    version: Version.V5,
    endianness: Endianness.Little,
    fields: node.children.map((c, i) => fieldOf(c, `${path}.children[${i}]`, dicts)),
    metadata: node.metadata === null ? null : new Map(node.metadata),
  };
}

function fieldOf(node: SchemaNode, path: string, dicts: DictTypes): Field {
  const metadata = node.metadata === null ? null : new Map(node.metadata);
  return field(node.name ?? '', typeOf(node, path, dicts), (node.flags & Flag.NULLABLE) !== 0, metadata);
}

function typeOf(node: SchemaNode, path: string, dicts: DictTypes): DataType {
  const values = node.dictionary;
  if (values === null) return storageType(node, path, dicts);
  const index = node.type;
  if (index.id !== 'int') throw invalid(`${path}.format`, `a dictionary needs an integer index type, but the format is "${node.format}"`);
  let valuesType = dicts.get(values);
  if (valuesType === undefined) dicts.set(values, (valuesType = typeOf(values, `${path}.dictionary`, dicts)));
  return dictionary(valuesType, int(index.bitWidth, index.signed), (node.flags & Flag.DICTIONARY_ORDERED) !== 0, -1);
}

/** The type of a node, its dictionary aside. */
function storageType(node: SchemaNode, path: string, dicts: DictTypes): DataType {
  const t = node.type;
  const kids = (): Field[] => node.children.map((c, i) => fieldOf(c, `${path}.children[${i}]`, dicts));
  const one = (): Field => {
    if (node.children.length !== 1) throw invalid(`${path}.n_children`, `type "${node.format}" needs 1 child, got ${node.children.length}`);
    return fieldOf(node.children[0]!, `${path}.children[0]`, dicts);
  };
  switch (t.id) {
    case 'null': return nullType();
    case 'bool': return bool();
    case 'int': return int(t.bitWidth, t.signed);
    case 'float': return float(t.bitWidth === 16 ? Precision.HALF : t.bitWidth === 32 ? Precision.SINGLE : Precision.DOUBLE);
    case 'binary': return binary();
    case 'utf8': return utf8();
    case 'large_binary': return largeBinary();
    case 'large_utf8': return largeUtf8();
    case 'binary_view': return binaryView();
    case 'utf8_view': return utf8View();
    case 'fixed_binary': return fixedSizeBinary(t.byteWidth);
    case 'decimal': return decimal(t.precision, t.scale, t.bitWidth);
    case 'date': return date(t.unit === 'day' ? DateUnit.DAY : DateUnit.MILLISECOND);
    // flechette derives a time's width from its unit, as the format does (32 bits for s and ms).
    case 'time': return time(toUnit[t.unit]);
    case 'timestamp': return timestamp(toUnit[t.unit], t.timezone);
    case 'duration': return duration(toUnit[t.unit]);
    case 'interval': return interval(toInterval[t.unit]);
    case 'list': return list(one());
    case 'large_list': return largeList(one());
    case 'list_view': return listView(one());
    case 'large_list_view': return largeListView(one());
    case 'fixed_list': return fixedSizeList(one(), t.size);
    case 'struct': return struct(kids());
    case 'map': {
      // Made by hand: flechette's `map()` names the entries "entries" and makes them non-nullable,
      // where the C schema says both (CDataInterface.rst, "Map"); `mapType` is not exported.
      const entries = one();
      if (entries.type.typeId !== Type.Struct || entries.type.children.length !== 2) {
        throw invalid(`${path}.children[0]`, `a map's child must be a struct of (key, value), got "${node.children[0]!.format}"`);
      }
      const m: MapType = { typeId: Type.Map, keysSorted: (node.flags & Flag.MAP_KEYS_SORTED) !== 0, children: [entries], offsets: Int32Array };
      return m;
    }
    case 'union': {
      const members = kids();
      if (members.length !== t.typeIds.length) {
        throw invalid(`${path}.n_children`, `union "${node.format}" declares ${t.typeIds.length} type ids but has ${members.length} children`);
      }
      return union(t.mode === 'dense' ? UnionMode.Dense : UnionMode.Sparse, members, [...t.typeIds]);
    }
    case 'run_end_encoded': {
      const [ends, vals] = kids();
      const e = node.children[0]?.type;
      if (ends === undefined || vals === undefined || node.children.length !== 2) {
        throw invalid(`${path}.n_children`, `type "+r" needs 2 children, got ${node.children.length}`);
      }
      // Columnar.rst, "Run-End Encoded Layout": run ends are int16, int32 or int64.
      if (e?.id !== 'int' || !e.signed || e.bitWidth === 8) {
        throw invalid(`${path}.children[0].format`, `run ends must be int16, int32 or int64, got "${node.children[0]!.format}"`);
      }
      return runEndEncoded(ends, vals);
    }
  }
}

/** The flechette `Type` of a node: what `flechetteType(node).typeId` is. */
export function flechetteTypeId(node: SchemaNode): FlechetteTypeId {
  if (node.dictionary !== null) return Type.Dictionary;
  switch (node.type.id) {
    case 'null': return Type.Null;
    case 'bool': return Type.Bool;
    case 'int': return Type.Int;
    case 'float': return Type.Float;
    case 'binary': return Type.Binary;
    case 'utf8': return Type.Utf8;
    case 'large_binary': return Type.LargeBinary;
    case 'large_utf8': return Type.LargeUtf8;
    case 'binary_view': return Type.BinaryView;
    case 'utf8_view': return Type.Utf8View;
    case 'fixed_binary': return Type.FixedSizeBinary;
    case 'decimal': return Type.Decimal;
    case 'date': return Type.Date;
    case 'time': return Type.Time;
    case 'timestamp': return Type.Timestamp;
    case 'duration': return Type.Duration;
    case 'interval': return Type.Interval;
    case 'list': return Type.List;
    case 'large_list': return Type.LargeList;
    case 'list_view': return Type.ListView;
    case 'large_list_view': return Type.LargeListView;
    case 'fixed_list': return Type.FixedSizeList;
    case 'struct': return Type.Struct;
    case 'map': return Type.Map;
    case 'union': return Type.Union;
    case 'run_end_encoded': return Type.RunEndEncoded;
  }
}

// --- flechette -> SchemaNode ------------------------------------------------------------------

/**
 * The node of a flechette `Schema`: a struct (`+s`) with one child per field and the schema's
 * metadata, unnamed and without flags, as a record batch's schema is exported (CDataInterface.rst,
 * "Record batches").
 *
 * @example
 * const node = schemaNodeOfSchema(tableFromIPC(bytes).schema);
 * const schemaPtr = exportSchema(node);
 */
export function schemaNodeOfSchema(schema: Schema, path = 'schema'): SchemaNode {
  const fields = schema.fields;
  if (!Array.isArray(fields)) throw invalid(`${path}.fields`, 'a flechette schema needs an array of fields');
  const children = fields.map((f, i) => schemaNodeOfField(f, `${path}.fields[${i}]`));
  return node({ id: 'struct' }, '', metadataOf(schema.metadata), 0, children, null, path);
}

/**
 * @internal `schemaNodeOfSchema`, made once per schema object: a table exported batch after batch (a
 * program's loop, `conn.ingest`) gives the one node, and so its export plan, as the importers find
 * theirs by the schema object (core.ts `nodeOf`). A schema is not to be changed once used, as an
 * arrow-js `Schema` is not.
 */
export function schemaNodeOfSchemaObject(schema: Schema): SchemaNode {
  let n = nodesOfSchemas.get(schema);
  if (n === undefined) nodesOfSchemas.set(schema, (n = schemaNodeOfSchema(schema)));
  return n;
}
const nodesOfSchemas = new WeakMap<Schema, SchemaNode>();

/**
 * The node of a flechette `Field`: name, `ARROW_FLAG_NULLABLE` from `nullable`, metadata (an empty
 * map as none), and its type's node.
 *
 * @example
 * schemaNodeOfField(field('x', int32(), false)).format; // 'i'
 */
export function schemaNodeOfField(f: Field, path = 'field'): SchemaNode {
  if (f === null || typeof f !== 'object') throw invalid(path, 'not a flechette field');
  return nodeOfType(f.type, typeof f.name === 'string' ? f.name : null, f.nullable !== false, metadataOf(f.metadata), `${path}.type`);
}

/**
 * The node of a flechette `DataType` alone, as an unnamed nullable field (the dictionary values of a
 * C schema are written so too).
 *
 * @example
 * schemaNodeOfType(timestamp(TimeUnit.NANOSECOND, 'UTC')).format; // 'tsn:UTC'
 */
export function schemaNodeOfType(type: DataType, path = 'type'): SchemaNode {
  return nodeOfType(type, null, true, null, path);
}

function metadataOf(m: ReadonlyMap<string, string> | null | undefined): Map<string, string> | null {
  return m === null || m === undefined || m.size === 0 ? null : new Map(m);
}

/** A node of `info`: the format made by `formatOf` and read back by `parseFormat`, which checks it. */
function node(
  info: TypeInfo, name: string | null, metadata: Map<string, string> | null, flags: number,
  children: SchemaNode[], dictionary: SchemaNode | null, path: string,
): SchemaNode {
  const format = formatOf(info);
  return { format, type: parseFormat(format, path), name, metadata, flags, children, dictionary };
}

function nodeOfType(type: DataType, name: string | null, nullable: boolean, metadata: Map<string, string> | null, path: string): SchemaNode {
  if (type === null || typeof type !== 'object' || typeof type.typeId !== 'number') throw invalid(path, 'not a flechette data type');
  let flags = nullable ? Flag.NULLABLE : 0;
  if (type.typeId === Type.Dictionary) {
    const index = type.indices ?? int(32);
    if (index.typeId !== Type.Int) throw invalid(`${path}.indices`, `dictionary indices must be integers, got flechette type ${index.typeId}`);
    if (type.ordered) flags |= Flag.DICTIONARY_ORDERED;
    const values = nodeOfType(type.dictionary, null, true, null, `${path}.dictionary`);
    return node(intInfo(index, `${path}.indices`), name, metadata, flags, [], values, path);
  }
  const kids = (fields: readonly Field[] | undefined): SchemaNode[] =>
    (fields ?? []).map((f, i) => schemaNodeOfField(f, `${path}.children[${i}]`));
  const leaf = (info: TypeInfo): SchemaNode => node(info, name, metadata, flags, [], null, path);
  const nested = (info: TypeInfo, fields: readonly Field[] | undefined): SchemaNode =>
    checkNodeMade(node(info, name, metadata, flags, kids(fields), null, path), path);
  const unit = (u: number): CTimeUnit => {
    const c = fromUnit[u];
    if (c === undefined) throw invalid(`${path}.unit`, `unknown flechette time unit ${u}`);
    return c;
  };
  switch (type.typeId) {
    case Type.Null: return leaf({ id: 'null' });
    case Type.Bool: return leaf({ id: 'bool' });
    case Type.Int: return leaf(intInfo(type, path));
    case Type.Float: {
      const bitWidth = ({ [Precision.HALF]: 16, [Precision.SINGLE]: 32, [Precision.DOUBLE]: 64 } as const)[type.precision];
      if (bitWidth === undefined) throw invalid(`${path}.precision`, `unknown flechette float precision ${type.precision}`);
      return leaf({ id: 'float', bitWidth });
    }
    case Type.Binary: return leaf({ id: 'binary' });
    case Type.Utf8: return leaf({ id: 'utf8' });
    case Type.LargeBinary: return leaf({ id: 'large_binary' });
    case Type.LargeUtf8: return leaf({ id: 'large_utf8' });
    case Type.BinaryView: return leaf({ id: 'binary_view' });
    case Type.Utf8View: return leaf({ id: 'utf8_view' });
    case Type.FixedSizeBinary: return leaf({ id: 'fixed_binary', byteWidth: type.stride });
    case Type.Decimal: return leaf({ id: 'decimal', bitWidth: type.bitWidth, precision: type.precision, scale: type.scale });
    case Type.Date: return leaf({ id: 'date', unit: type.unit === DateUnit.DAY ? 'day' : 'ms' });
    case Type.Time: return leaf({ id: 'time', unit: unit(type.unit) });
    case Type.Timestamp: return leaf({ id: 'timestamp', unit: unit(type.unit), timezone: type.timezone || null });
    case Type.Duration: return leaf({ id: 'duration', unit: unit(type.unit) });
    case Type.Interval: {
      const u = fromInterval[type.unit];
      if (u === undefined) throw invalid(`${path}.unit`, `unknown flechette interval unit ${type.unit}`);
      return leaf({ id: 'interval', unit: u });
    }
    case Type.List: return nested({ id: 'list' }, type.children);
    case Type.LargeList: return nested({ id: 'large_list' }, type.children);
    case Type.ListView: return nested({ id: 'list_view' }, type.children);
    case Type.LargeListView: return nested({ id: 'large_list_view' }, type.children);
    case Type.FixedSizeList: return nested({ id: 'fixed_list', size: type.stride }, type.children);
    case Type.Struct: return nested({ id: 'struct' }, type.children);
    case Type.Map:
      if (type.keysSorted) flags |= Flag.MAP_KEYS_SORTED;
      return nested({ id: 'map' }, type.children);
    case Type.Union: {
      const mode = type.mode === UnionMode.Dense ? 'dense' : type.mode === UnionMode.Sparse ? 'sparse' : null;
      if (mode === null) throw invalid(`${path}.mode`, `unknown flechette union mode ${type.mode}`);
      const typeIds = type.typeIds ?? type.children.map((_, i) => i);
      return nested({ id: 'union', mode, typeIds: [...typeIds] }, type.children);
    }
    case Type.RunEndEncoded: return nested({ id: 'run_end_encoded' }, type.children);
    case Type.NONE:
      throw unsupported(path, 'flechette type NONE has no Arrow format');
    default:
      throw unsupported(path, `unknown flechette type id ${(type as { typeId: number }).typeId}`);
  }
}

function intInfo(t: IntType, path: string): TypeInfo {
  const bitWidth: IntBitWidth = t.bitWidth;
  if (bitWidth !== 8 && bitWidth !== 16 && bitWidth !== 32 && bitWidth !== 64) {
    throw invalid(`${path}.bitWidth`, `integer bit width must be 8, 16, 32 or 64, got ${String(bitWidth)}`);
  }
  return { id: 'int', bitWidth, signed: t.signed !== false };
}

/** `checkNode` (src/schema/node.ts) on a node made here, returned. */
function checkNodeMade(n: SchemaNode, path: string): SchemaNode {
  checkNode(n, path);
  return n;
}
