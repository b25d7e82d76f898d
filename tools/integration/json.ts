/**
 * A reader of Arrow's JSON integration format (Integration.rst, "JSON test
 * data format") into this library's own representation: the schema as a
 * struct `SchemaNode` (format "+s", one child per field) and each record
 * batch as an `ArrayView` of that struct type, with every buffer laid out
 * as Columnar.rst says (little-endian, validity bitmaps LSB first, offset 0,
 * null counts computed from the validity). It covers every type the format
 * has, including those arrow-js lacks (list views, run-end encoded), so the
 * gold integration files of arrow-testing can be fed to `exportArray`.
 *
 * Notes on the format as the gold files write it:
 * - 64-bit integers (int64/uint64 values, 64-bit offsets and sizes, dates in
 *   ms, 64-bit times, timestamps, durations, run ends) are JSON strings; but
 *   the `nanoseconds` of a MONTH_DAY_NANO interval are bare JSON numbers with
 *   all 19 digits. `JSON.parse` would round those to doubles, so the text is
 *   read with a parser of our own that keeps integer literals exact (a bigint
 *   where a double would lose digits).
 * - Booleans in DATA are `true`/`false` (the spec says 1/0; both are read).
 * - The view types give each view as {SIZE, INLINED} (SIZE <= 12; INLINED is
 *   hex for binary view, the string itself for utf8 view) or as {SIZE,
 *   PREFIX_HEX, BUFFER_INDEX, OFFSET}, and the data buffers as hex strings.
 * - Null-type columns carry no buffers at all, not even VALIDITY.
 * - Dictionary batches are listed once per id, before any use, never as
 *   deltas; the format has no way to say which record batches a replacement
 *   would apply to, so a repeated id or `isDelta` is refused rather than
 *   guessed at.
 */
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { Flag } from '../../src/abi/constants.js';
import type { ArrayView } from '../../src/array/view.js';
import { invalid, unsupported } from '../../src/errors.js';
import { formatOf, parseFormat, type TimeUnit, type TypeInfo } from '../../src/schema/format.js';
import type { SchemaNode } from '../../src/schema/node.js';

export interface JsonCase {
  /** The record batch's struct ("+s") node: its children are the fields, its metadata the schema's. */
  schema: SchemaNode;
  /** One struct `ArrayView` of `schema` per record batch. */
  batches: ArrayView[];
}

// --- a JSON parser that keeps integers exact -------------------------------------------------

export type Json = null | boolean | number | bigint | string | Json[] | { [key: string]: Json };

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

/**
 * `JSON.parse`, except that an integer literal a double cannot hold exactly
 * comes back as a bigint (other numbers as numbers).
 */
export function parseJsonLossless(text: string): Json {
  let pos = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`JSON: ${what} at offset ${pos}`);
  };
  const ws = (): void => {
    for (;;) {
      const c = text.charCodeAt(pos);
      if (c === 32 || c === 10 || c === 13 || c === 9) pos++;
      else return;
    }
  };
  const str = (): string => {
    const start = pos; // at the opening quote
    let escaped = false;
    for (let i = pos + 1; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c === 92) {
        escaped = true;
        i++;
      } else if (c === 34) {
        pos = i + 1;
        return escaped ? (JSON.parse(text.slice(start, pos)) as string) : text.slice(start + 1, i);
      } else if (c < 32) {
        pos = i;
        fail('control character in string');
      }
    }
    pos = text.length;
    return fail('unterminated string');
  };
  const value = (): Json => {
    ws();
    const c = text[pos];
    if (c === '{') {
      pos++;
      const o: { [key: string]: Json } = {};
      ws();
      if (text[pos] === '}') {
        pos++;
        return o;
      }
      for (;;) {
        ws();
        if (text[pos] !== '"') fail('expected a key');
        const k = str();
        ws();
        if (text[pos] !== ':') fail('expected ":"');
        pos++;
        const v = value();
        // Plain assignment would treat "__proto__" specially.
        Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
        ws();
        if (text[pos] === ',') pos++;
        else if (text[pos] === '}') {
          pos++;
          return o;
        } else fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      pos++;
      const a: Json[] = [];
      ws();
      if (text[pos] === ']') {
        pos++;
        return a;
      }
      for (;;) {
        a.push(value());
        ws();
        if (text[pos] === ',') pos++;
        else if (text[pos] === ']') {
          pos++;
          return a;
        } else fail('expected "," or "]"');
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', pos)) {
      pos += 4;
      return true;
    }
    if (text.startsWith('false', pos)) {
      pos += 5;
      return false;
    }
    if (text.startsWith('null', pos)) {
      pos += 4;
      return null;
    }
    NUMBER.lastIndex = pos;
    const m = NUMBER.exec(text);
    if (!m) return fail('unexpected character');
    pos += m[0].length;
    const n = Number(m[0]);
    if (m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n)) return BigInt(m[0]);
    return n;
  };
  const v = value();
  ws();
  if (pos !== text.length) fail('trailing characters');
  return v;
}

// --- small helpers ---------------------------------------------------------------------------

type Obj = { [key: string]: Json };

function isObj(v: Json | undefined): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && typeof v !== 'bigint';
}

function obj(v: Json | undefined, path: string): Obj {
  if (!isObj(v)) throw invalid(path, `expected an object, got ${describe(v)}`);
  return v;
}

function arr(v: Json | undefined, path: string): Json[] {
  if (!Array.isArray(v)) throw invalid(path, `expected an array, got ${describe(v)}`);
  return v;
}

function str(v: Json | undefined, path: string): string {
  if (typeof v !== 'string') throw invalid(path, `expected a string, got ${describe(v)}`);
  return v;
}

function describe(v: Json | undefined): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'bigint') return `${v}`;
  const s = JSON.stringify(v);
  return s.length > 40 ? `${s.slice(0, 40)}...` : s;
}

/** An integer given as a JSON number, a bigint (from the lossless parser) or a decimal string. */
function big(v: Json | undefined, path: string): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^[+-]?[0-9]+$/.test(v.trim())) return BigInt(v.trim());
  throw invalid(path, `expected an integer, got ${describe(v)}`);
}

/** A small integer (lengths, counts, 32-bit values). */
function int(v: Json | undefined, path: string): number {
  const b = big(v, path);
  if (b > BigInt(Number.MAX_SAFE_INTEGER) || b < BigInt(Number.MIN_SAFE_INTEGER)) throw invalid(path, `integer ${b} is out of range`);
  return Number(b);
}

function num(v: Json | undefined, path: string): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'string') {
    const n = Number(v);
    if (!Number.isNaN(n) || v === 'NaN') return n;
  }
  throw invalid(path, `expected a number, got ${describe(v)}`);
}

function hexBytes(v: Json | undefined, path: string): Uint8Array {
  const s = str(v, path);
  if (s.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(s)) throw invalid(path, `malformed hex string ${describe(s)}`);
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const utf8 = new TextEncoder();

/** A zeroed buffer of `n` bytes, its own 64-byte-padded allocation (so any typed view of it is aligned). */
function alloc(n: number): Uint8Array {
  return new Uint8Array(new ArrayBuffer(Math.max(64, Math.ceil(n / 64) * 64)), 0, n);
}

function dv(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

/** A float64 -> IEEE half bits, rounding to nearest, ties to even. */
export function float16Bits(x: number): number {
  if (Number.isNaN(x)) return 0x7e00;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a === Infinity) return sign | 0x7c00;
  const rne = (v: number): number => {
    const f = Math.floor(v);
    const d = v - f;
    return d > 0.5 || (d === 0.5 && (f & 1) === 1) ? f + 1 : f;
  };
  if (a < 2 ** -14) return sign | rne(a * 2 ** 24); // subnormal (1024 is the smallest normal's bits)
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  if (2 ** (e + 1) <= a) e++;
  let m = rne((a / 2 ** e - 1) * 1024);
  if (m === 1024) {
    m = 0;
    e++;
  }
  if (e + 15 >= 31) return sign | 0x7c00;
  return sign | ((e + 15) << 10) | m;
}

// --- schema ----------------------------------------------------------------------------------

const timeUnits: Record<string, TimeUnit> = { SECOND: 's', MILLISECOND: 'ms', MICROSECOND: 'us', NANOSECOND: 'ns' };

function timeUnit(v: Json | undefined, path: string): TimeUnit {
  const u = timeUnits[str(v, path)];
  if (!u) throw invalid(path, `unknown time unit ${describe(v)}`);
  return u;
}

function metadataOf(v: Json | undefined, path: string): Map<string, string> | null {
  if (v === undefined || v === null) return null;
  const out = new Map<string, string>();
  arr(v, path).forEach((e, i) => {
    const o = obj(e, `${path}[${i}]`);
    out.set(str(o.key, `${path}[${i}].key`), str(o.value, `${path}[${i}].value`));
  });
  return out.size > 0 ? out : null;
}

function typeInfoOf(t: Obj, nChildren: number, path: string): TypeInfo {
  const name = str(t.name, `${path}.name`);
  switch (name) {
    case 'null': return { id: 'null' };
    case 'bool': return { id: 'bool' };
    case 'int': {
      const bw = int(t.bitWidth, `${path}.bitWidth`);
      if (bw !== 8 && bw !== 16 && bw !== 32 && bw !== 64) throw invalid(`${path}.bitWidth`, `int bit width must be 8, 16, 32 or 64, got ${bw}`);
      return { id: 'int', bitWidth: bw, signed: t.isSigned === true };
    }
    case 'floatingpoint': {
      const p = str(t.precision, `${path}.precision`);
      const bw = ({ HALF: 16, SINGLE: 32, DOUBLE: 64 } as const)[p as 'HALF' | 'SINGLE' | 'DOUBLE'];
      if (!bw) throw invalid(`${path}.precision`, `unknown precision "${p}"`);
      return { id: 'float', bitWidth: bw };
    }
    case 'binary': return { id: 'binary' };
    case 'largebinary': return { id: 'large_binary' };
    case 'utf8': return { id: 'utf8' };
    case 'largeutf8': return { id: 'large_utf8' };
    case 'binaryview': return { id: 'binary_view' };
    case 'utf8view': return { id: 'utf8_view' };
    case 'fixedsizebinary': return { id: 'fixed_binary', byteWidth: int(t.byteWidth, `${path}.byteWidth`) };
    case 'decimal': {
      const bw = t.bitWidth === undefined ? 128 : int(t.bitWidth, `${path}.bitWidth`);
      if (bw !== 32 && bw !== 64 && bw !== 128 && bw !== 256) throw invalid(`${path}.bitWidth`, `decimal bit width must be 32, 64, 128 or 256, got ${bw}`);
      return { id: 'decimal', bitWidth: bw, precision: int(t.precision, `${path}.precision`), scale: t.scale === undefined ? 0 : int(t.scale, `${path}.scale`) };
    }
    case 'date': {
      const u = str(t.unit, `${path}.unit`);
      if (u !== 'DAY' && u !== 'MILLISECOND') throw invalid(`${path}.unit`, `unknown date unit "${u}"`);
      return { id: 'date', unit: u === 'DAY' ? 'day' : 'ms' };
    }
    case 'time': {
      const unit = timeUnit(t.unit, `${path}.unit`);
      const expected = unit === 's' || unit === 'ms' ? 32 : 64;
      if (t.bitWidth !== undefined && int(t.bitWidth, `${path}.bitWidth`) !== expected) {
        throw invalid(`${path}.bitWidth`, `time in ${unit} must be ${expected} bits, got ${describe(t.bitWidth)}`);
      }
      return { id: 'time', unit };
    }
    case 'timestamp': {
      const tz = t.timezone === undefined || t.timezone === null ? null : str(t.timezone, `${path}.timezone`);
      return { id: 'timestamp', unit: timeUnit(t.unit, `${path}.unit`), timezone: tz === '' ? null : tz };
    }
    case 'duration': return { id: 'duration', unit: timeUnit(t.unit, `${path}.unit`) };
    case 'interval': {
      const u = str(t.unit, `${path}.unit`);
      const unit = ({ YEAR_MONTH: 'month', DAY_TIME: 'day_time', MONTH_DAY_NANO: 'month_day_nano' } as const)[
        u as 'YEAR_MONTH' | 'DAY_TIME' | 'MONTH_DAY_NANO'
      ];
      if (!unit) throw invalid(`${path}.unit`, `unknown interval unit "${u}"`);
      return { id: 'interval', unit };
    }
    case 'list': return { id: 'list' };
    case 'largelist': return { id: 'large_list' };
    case 'listview': return { id: 'list_view' };
    case 'largelistview': return { id: 'large_list_view' };
    case 'fixedsizelist': return { id: 'fixed_list', size: int(t.listSize, `${path}.listSize`) };
    case 'struct': return { id: 'struct' };
    case 'map': return { id: 'map' };
    case 'union': {
      const mode = str(t.mode, `${path}.mode`).toUpperCase();
      if (mode !== 'SPARSE' && mode !== 'DENSE') throw invalid(`${path}.mode`, `unknown union mode "${mode}"`);
      const typeIds = t.typeIds === undefined || t.typeIds === null
        ? Array.from({ length: nChildren }, (_, i) => i)
        : arr(t.typeIds, `${path}.typeIds`).map((x, i) => int(x, `${path}.typeIds[${i}]`));
      return { id: 'union', mode: mode === 'DENSE' ? 'dense' : 'sparse', typeIds };
    }
    case 'runendencoded': return { id: 'run_end_encoded' };
    default:
      throw unsupported(`${path}.name`, `unknown type "${name}"`);
  }
}

/** State shared while one file is read. */
class Reader {
  /** The dictionary values' node of each dictionary id (shared by every field using the id). */
  readonly dictNodes = new Map<number, SchemaNode>();
  /** The JSON type description of each id, to check that fields sharing an id agree. */
  readonly dictTypes = new Map<number, string>();
  /** The dictionary id of each dictionary-encoded (index) node. */
  readonly dictIdOf = new WeakMap<SchemaNode, number>();
  /** The JSON of each dictionary batch, by id. */
  readonly dictJson = new Map<number, { column: Obj; path: string }>();
  readonly dictViews = new Map<number, ArrayView>();
  readonly building = new Set<number>();

  node(info: TypeInfo, name: string | null, metadata: Map<string, string> | null, flags: number, children: SchemaNode[], dictionary: SchemaNode | null, path: string): SchemaNode {
    const format = formatOf(info);
    return { format, type: parseFormat(format, `${path}.type`), name, metadata, flags, children, dictionary };
  }

  field(f: Obj, path: string): SchemaNode {
    const name = f.name === undefined || f.name === null ? null : str(f.name, `${path}.name`);
    const childrenJson = f.children === undefined || f.children === null ? [] : arr(f.children, `${path}.children`);
    const children = childrenJson.map((c, i) => this.field(obj(c, `${path}.children[${i}]`), `${path}.children[${i}]`));
    const typeJson = obj(f.type, `${path}.type`);
    const info = typeInfoOf(typeJson, children.length, `${path}.type`);
    let flags = f.nullable === false ? 0 : f.nullable === true ? Flag.NULLABLE : Flag.NULLABLE;
    if (info.id === 'map' && typeJson.keysSorted === true) flags |= Flag.MAP_KEYS_SORTED;
    const metadata = metadataOf(f.metadata, `${path}.metadata`);
    if (f.dictionary === undefined || f.dictionary === null) {
      return this.node(info, name, metadata, flags, children, null, path);
    }
    // Dictionary-encoded: `type` (and `children`) describe the values, `indexType` the node itself.
    const d = obj(f.dictionary, `${path}.dictionary`);
    const id = int(d.id, `${path}.dictionary.id`);
    const indexType = d.indexType === undefined ? { name: 'int', bitWidth: 32, isSigned: true } : obj(d.indexType, `${path}.dictionary.indexType`);
    const index = typeInfoOf(indexType, 0, `${path}.dictionary.indexType`);
    if (index.id !== 'int') throw invalid(`${path}.dictionary.indexType`, `dictionary indices must be integers, got "${formatOf(index)}"`);
    const valuesKey = JSON.stringify([typeJson, childrenJson], (_, x) => (typeof x === 'bigint' ? `${x}` : x));
    let values = this.dictNodes.get(id);
    if (values) {
      if (this.dictTypes.get(id) !== valuesKey) throw invalid(`${path}.dictionary.id`, `dictionary ${id} is used by fields of different value types`);
    } else {
      values = this.node(info, null, null, Flag.NULLABLE, children, null, `${path}.dictionary`);
      this.dictNodes.set(id, values);
      this.dictTypes.set(id, valuesKey);
    }
    if (d.isOrdered === true) flags |= Flag.DICTIONARY_ORDERED;
    const node = this.node(index, name, metadata, flags, [], values, path);
    this.dictIdOf.set(node, id);
    return node;
  }

  dictionary(id: number, path: string): ArrayView {
    const done = this.dictViews.get(id);
    if (done) return done;
    const src = this.dictJson.get(id);
    if (!src) throw invalid(path, `no dictionary batch with id ${id}`);
    if (this.building.has(id)) throw invalid(src.path, `dictionary ${id} refers to itself`);
    this.building.add(id);
    const view = this.array(this.dictNodes.get(id)!, src.column, src.path, false);
    this.building.delete(id);
    this.dictViews.set(id, view);
    return view;
  }

  // --- arrays --------------------------------------------------------------------------------

  /** The `ArrayView` of `node` from its FieldData `col`. */
  array(node: SchemaNode, col: Obj, path: string, checkName = true): ArrayView {
    const n = int(col.count, `${path}.count`);
    if (n < 0) throw invalid(`${path}.count`, `negative count ${n}`);
    if (checkName && node.name !== null && col.name !== undefined && col.name !== node.name) {
      throw invalid(`${path}.name`, `column "${String(col.name)}" where the schema has field "${node.name}"`);
    }
    const t = node.type;
    const list = (key: string, len: number): Json[] => {
      const a = arr(col[key], `${path}.${key}`);
      if (a.length !== len) throw invalid(`${path}.${key}`, `${a.length} entries, expected ${len}`);
      return a;
    };
    const childJson = (): Obj[] => {
      const c = col.children === undefined ? [] : arr(col.children, `${path}.children`);
      if (c.length !== node.children.length) throw invalid(`${path}.children`, `${c.length} children, the schema has ${node.children.length}`);
      return c.map((x, i) => obj(x, `${path}.children[${i}]`));
    };
    const children = (minLength: number): ArrayView[] =>
      childJson().map((c, i) => {
        const v = this.array(node.children[i]!, c, `${path}.children[${i}]`);
        if (v.length < minLength) throw invalid(`${path}.children[${i}].count`, `${v.length}, but the parent needs ${minLength}`);
        return v;
      });
    let nullCount = 0;
    const validity = (): Uint8Array | null => {
      if (col.VALIDITY === undefined) return null;
      const bits = list('VALIDITY', n);
      const b = alloc(Math.ceil(n / 8));
      bits.forEach((x, i) => {
        if (x === 1 || x === true) b[i >> 3]! |= 1 << (i & 7);
        else if (x === 0 || x === false) nullCount++;
        else throw invalid(`${path}.VALIDITY[${i}]`, `expected 0 or 1, got ${describe(x)}`);
      });
      return b;
    };
    const view = (buffers: (Uint8Array | null)[], kids: ArrayView[] = [], dictionary: ArrayView | null = null): ArrayView => ({
      schema: node,
      length: n,
      offset: 0,
      nullCount,
      buffers,
      children: kids,
      dictionary,
    });

    if (node.dictionary) {
      const id = this.dictIdOf.get(node);
      if (id === undefined) throw invalid(path, 'a dictionary-encoded node this reader did not make');
      const v = validity();
      return view([v, this.fixed(t, list('DATA', n), n, `${path}.DATA`)], [], this.dictionary(id, path));
    }

    switch (t.id) {
      case 'null':
        nullCount = n;
        return view([]);
      case 'bool': {
        const v = validity();
        const data = alloc(Math.ceil(n / 8));
        list('DATA', n).forEach((x, i) => {
          if (x === true || x === 1) data[i >> 3]! |= 1 << (i & 7);
          else if (x !== false && x !== 0) throw invalid(`${path}.DATA[${i}]`, `expected a boolean, got ${describe(x)}`);
        });
        return view([v, data]);
      }
      case 'binary': case 'utf8': case 'large_binary': case 'large_utf8': {
        const wide = t.id === 'large_binary' || t.id === 'large_utf8';
        const text = t.id === 'utf8' || t.id === 'large_utf8';
        const v = validity();
        const values = list('DATA', n).map((x, i) => (text ? utf8.encode(str(x, `${path}.DATA[${i}]`)) : hexBytes(x, `${path}.DATA[${i}]`)));
        let offs: number[];
        if (col.OFFSET === undefined) {
          offs = [0];
          for (const b of values) offs.push(offs[offs.length - 1]! + b.length);
        } else {
          offs = list('OFFSET', n + 1).map((x, i) => int(x, `${path}.OFFSET[${i}]`));
        }
        const total = offs[n]!;
        const data = alloc(total);
        values.forEach((b, i) => {
          if (offs[i + 1]! - offs[i]! !== b.length || offs[i]! < 0) {
            throw invalid(`${path}.DATA[${i}]`, `${b.length} bytes, but the offsets say ${offs[i + 1]! - offs[i]!} (from ${offs[i]})`);
          }
          data.set(b, offs[i]!);
        });
        return view([v, this.offsets(offs, wide), data]);
      }
      case 'binary_view': case 'utf8_view': {
        const text = t.id === 'utf8_view';
        const v = validity();
        const variadic = arr(col.VARIADIC_DATA_BUFFERS ?? [], `${path}.VARIADIC_DATA_BUFFERS`).map((x, i) =>
          this.copy(hexBytes(x, `${path}.VARIADIC_DATA_BUFFERS[${i}]`)),
        );
        const views = alloc(16 * n);
        const d = dv(views);
        list('VIEWS', n).forEach((x, i) => {
          const p = `${path}.VIEWS[${i}]`;
          const o = obj(x, p);
          const size = int(o.SIZE, `${p}.SIZE`);
          if (size < 0 || size > 0x7fffffff) throw invalid(`${p}.SIZE`, `size ${size} out of range`);
          d.setInt32(16 * i, size, true);
          if (size <= 12) {
            const b = text ? utf8.encode(str(o.INLINED, `${p}.INLINED`)) : hexBytes(o.INLINED, `${p}.INLINED`);
            if (b.length !== size) throw invalid(`${p}.INLINED`, `${b.length} bytes, but SIZE is ${size}`);
            views.set(b, 16 * i + 4);
          } else {
            const prefix = hexBytes(o.PREFIX_HEX, `${p}.PREFIX_HEX`);
            if (prefix.length !== 4) throw invalid(`${p}.PREFIX_HEX`, `${prefix.length} bytes, expected 4`);
            const buf = int(o.BUFFER_INDEX, `${p}.BUFFER_INDEX`);
            const off = int(o.OFFSET, `${p}.OFFSET`);
            const target = variadic[buf];
            if (!target || off < 0 || off + size > target.length) {
              throw invalid(p, `bytes ${off}..${off + size} of data buffer ${buf} do not exist`);
            }
            for (let k = 0; k < 4; k++) {
              if (target[off + k] !== prefix[k]) throw invalid(`${p}.PREFIX_HEX`, `the prefix differs from the data buffer's bytes`);
            }
            views.set(prefix, 16 * i + 4);
            d.setInt32(16 * i + 8, buf, true);
            d.setInt32(16 * i + 12, off, true);
          }
        });
        const sizes = alloc(8 * variadic.length);
        variadic.forEach((b, k) => dv(sizes).setBigInt64(8 * k, BigInt(b.length), true));
        return view([v, views, ...variadic, sizes]);
      }
      case 'list': case 'large_list': case 'map': {
        const v = validity();
        const offs = list('OFFSET', n + 1).map((x, i) => int(x, `${path}.OFFSET[${i}]`));
        return view([v, this.offsets(offs, t.id === 'large_list')], children(offs[n]!));
      }
      case 'list_view': case 'large_list_view': {
        const wide = t.id === 'large_list_view';
        const v = validity();
        const offs = list('OFFSET', n).map((x, i) => int(x, `${path}.OFFSET[${i}]`));
        const sizes = list('SIZE', n).map((x, i) => int(x, `${path}.SIZE[${i}]`));
        const kids = children(0);
        offs.forEach((o, i) => {
          if (o < 0 || sizes[i]! < 0 || o + sizes[i]! > kids[0]!.length) {
            throw invalid(`${path}.OFFSET[${i}]`, `list view (offset ${o}, size ${sizes[i]}) outside the child of length ${kids[0]!.length}`);
          }
        });
        return view([v, this.offsets(offs, wide), this.offsets(sizes, wide)], kids);
      }
      case 'fixed_list': {
        const v = validity();
        return view([v], children(n * t.size));
      }
      case 'struct': {
        const v = validity();
        return view([v], children(n));
      }
      case 'union': {
        // No validity bitmap (Columnar.rst, "Union Layout"): nulls live in the children.
        const ids = alloc(n);
        const index = new Map(t.typeIds.map((id, k) => [id, k]));
        const idList = list('TYPE_ID', n).map((x, i) => {
          const id = int(x, `${path}.TYPE_ID[${i}]`);
          if (!index.has(id)) throw invalid(`${path}.TYPE_ID[${i}]`, `type id ${id} is not one of the union's (${t.typeIds.join(',')})`);
          ids[i] = id & 0xff;
          return id;
        });
        if (t.mode === 'sparse') return view([ids], children(n));
        const offs = list('OFFSET', n).map((x, i) => int(x, `${path}.OFFSET[${i}]`));
        const kids = children(0);
        offs.forEach((o, i) => {
          const c = kids[index.get(idList[i]!)!]!;
          if (o < 0 || o >= c.length) throw invalid(`${path}.OFFSET[${i}]`, `offset ${o} outside child of length ${c.length}`);
        });
        return view([ids, this.offsets(offs, false)], kids);
      }
      case 'run_end_encoded': {
        // No buffers of its own; a null is a null in the values.
        const kids = children(0);
        if (kids[0]!.length !== kids[1]!.length) {
          throw invalid(`${path}.children`, `${kids[0]!.length} run ends but ${kids[1]!.length} values`);
        }
        return view([], kids);
      }
      default: {
        const v = validity();
        return view([v, this.fixed(t, list('DATA', n), n, `${path}.DATA`)]);
      }
    }
  }

  copy(b: Uint8Array): Uint8Array {
    const out = alloc(b.length);
    out.set(b);
    return out;
  }

  offsets(values: number[], wide: boolean): Uint8Array {
    const b = alloc(values.length * (wide ? 8 : 4));
    const d = dv(b);
    values.forEach((x, i) => {
      if (wide) d.setBigInt64(8 * i, BigInt(x), true);
      else {
        if (x < -0x80000000 || x > 0x7fffffff) throw invalid('OFFSET', `offset ${x} does not fit 32 bits`);
        d.setInt32(4 * i, x, true);
      }
    });
    return b;
  }

  /** The values buffer of a fixed-width type. */
  fixed(t: TypeInfo, data: Json[], n: number, path: string): Uint8Array {
    const at = (i: number): string => `${path}[${i}]`;
    const intBits = (bits: number, signed: boolean, x: Json, i: number): bigint => {
      const v = big(x, at(i));
      const lo = signed ? -(1n << BigInt(bits - 1)) : 0n;
      const hi = signed ? (1n << BigInt(bits - 1)) - 1n : (1n << BigInt(bits)) - 1n;
      if (v < lo || v > hi) throw invalid(at(i), `${v} does not fit ${signed ? '' : 'u'}int${bits}`);
      return v;
    };
    const put = (d: DataView, pos: number, bits: number, v: bigint): void => {
      if (bits === 8) d.setUint8(pos, Number(BigInt.asUintN(8, v)));
      else if (bits === 16) d.setUint16(pos, Number(BigInt.asUintN(16, v)), true);
      else if (bits === 32) d.setUint32(pos, Number(BigInt.asUintN(32, v)), true);
      else d.setBigUint64(pos, BigInt.asUintN(64, v), true);
    };
    switch (t.id) {
      case 'int': {
        const w = t.bitWidth / 8;
        const b = alloc(n * w);
        const d = dv(b);
        data.forEach((x, i) => put(d, i * w, t.bitWidth, intBits(t.bitWidth, t.signed, x, i)));
        return b;
      }
      case 'float': {
        const w = t.bitWidth / 8;
        const b = alloc(n * w);
        const d = dv(b);
        data.forEach((x, i) => {
          const v = num(x, at(i));
          if (t.bitWidth === 16) d.setUint16(i * 2, float16Bits(v), true);
          else if (t.bitWidth === 32) d.setFloat32(i * 4, v, true);
          else d.setFloat64(i * 8, v, true);
        });
        return b;
      }
      case 'decimal': {
        const w = t.bitWidth / 8;
        const b = alloc(n * w);
        data.forEach((x, i) => {
          const v = intBits(t.bitWidth, true, x, i);
          let u = BigInt.asUintN(t.bitWidth, v);
          for (let k = 0; k < w; k++) {
            b[i * w + k] = Number(u & 0xffn);
            u >>= 8n;
          }
        });
        return b;
      }
      case 'date': case 'time': case 'timestamp': case 'duration': {
        const bits =
          t.id === 'date' ? (t.unit === 'day' ? 32 : 64) : t.id === 'time' ? (t.unit === 's' || t.unit === 'ms' ? 32 : 64) : 64;
        const b = alloc((n * bits) / 8);
        const d = dv(b);
        data.forEach((x, i) => put(d, (i * bits) / 8, bits, intBits(bits, true, x, i)));
        return b;
      }
      case 'interval': {
        if (t.unit === 'month') {
          const b = alloc(n * 4);
          const d = dv(b);
          data.forEach((x, i) => put(d, i * 4, 32, intBits(32, true, x, i)));
          return b;
        }
        if (t.unit === 'day_time') {
          const b = alloc(n * 8);
          const d = dv(b);
          data.forEach((x, i) => {
            const o = obj(x, at(i));
            put(d, i * 8, 32, intBits(32, true, o.days ?? null, i));
            put(d, i * 8 + 4, 32, intBits(32, true, o.milliseconds ?? null, i));
          });
          return b;
        }
        const b = alloc(n * 16);
        const d = dv(b);
        data.forEach((x, i) => {
          const o = obj(x, at(i));
          put(d, i * 16, 32, intBits(32, true, o.months ?? null, i));
          put(d, i * 16 + 4, 32, intBits(32, true, o.days ?? null, i));
          put(d, i * 16 + 8, 64, intBits(64, true, o.nanoseconds ?? null, i));
        });
        return b;
      }
      case 'fixed_binary': {
        const b = alloc(n * t.byteWidth);
        data.forEach((x, i) => {
          const v = hexBytes(x, at(i));
          if (v.length !== t.byteWidth) throw invalid(at(i), `${v.length} bytes, expected ${t.byteWidth}`);
          b.set(v, i * t.byteWidth);
        });
        return b;
      }
      default:
        throw invalid(path, `"${formatOf(t)}" is not a fixed-width type`);
    }
  }
}

// --- entry points ----------------------------------------------------------------------------

/** Reads the text of a JSON integration file. */
export function readIntegrationJson(text: string): JsonCase {
  const root = obj(parseJsonLossless(text), 'json');
  const r = new Reader();
  const schemaJson = obj(root.schema, 'schema');
  const fields = arr(schemaJson.fields, 'schema.fields').map((f, i) => r.field(obj(f, `schema.fields[${i}]`), `schema.fields[${i}]`));
  const schema: SchemaNode = {
    format: '+s',
    type: { id: 'struct' },
    name: '',
    metadata: metadataOf(schemaJson.metadata, 'schema.metadata'),
    flags: 0,
    children: fields,
    dictionary: null,
  };

  const dicts = root.dictionaries === undefined || root.dictionaries === null ? [] : arr(root.dictionaries, 'dictionaries');
  dicts.forEach((x, k) => {
    const p = `dictionaries[${k}]`;
    const d = obj(x, p);
    const id = int(d.id, `${p}.id`);
    if (d.isDelta === true) throw unsupported(`${p}.isDelta`, `delta dictionary batches are not supported (dictionary ${id})`);
    if (r.dictJson.has(id)) throw unsupported(`${p}.id`, `dictionary ${id} is given twice; replacements are not supported`);
    if (!r.dictNodes.has(id)) throw invalid(`${p}.id`, `no field uses dictionary ${id}`);
    const data = obj(d.data, `${p}.data`);
    const columns = arr(data.columns, `${p}.data.columns`);
    if (columns.length !== 1) throw invalid(`${p}.data.columns`, `a dictionary batch has one column, got ${columns.length}`);
    const column = obj(columns[0], `${p}.data.columns[0]`);
    if (data.count !== undefined && int(data.count, `${p}.data.count`) !== int(column.count, `${p}.data.columns[0].count`)) {
      throw invalid(`${p}.data.count`, 'differs from the column count');
    }
    r.dictJson.set(id, { column, path: `${p}.data.columns[0]` });
  });

  const batches = arr(root.batches ?? [], 'batches').map((x, b): ArrayView => {
    const p = `batches[${b}]`;
    const batch = obj(x, p);
    const count = int(batch.count, `${p}.count`);
    const columns = arr(batch.columns, `${p}.columns`);
    if (columns.length !== fields.length) throw invalid(`${p}.columns`, `${columns.length} columns, the schema has ${fields.length} fields`);
    const children = columns.map((c, i) => {
      const v = r.array(fields[i]!, obj(c, `${p}.columns[${i}]`), `${p}.columns[${i}]`);
      if (v.length !== count) throw invalid(`${p}.columns[${i}].count`, `${v.length}, but the batch has ${count} rows`);
      return v;
    });
    return { schema, length: count, offset: 0, nullCount: 0, buffers: [null], children, dictionary: null };
  });
  return { schema, batches };
}

/** Reads a JSON integration file; `.gz` (or gzip-compressed content) is decompressed. */
export function readIntegrationJsonFile(path: string): JsonCase {
  let bytes: Uint8Array = readFileSync(path);
  if (path.endsWith('.gz') || (bytes[0] === 0x1f && bytes[1] === 0x8b)) bytes = gunzipSync(bytes);
  return readIntegrationJson(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
}
