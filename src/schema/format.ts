/**
 * Format strings (CDataInterface.rst, "Data type description -- format
 * strings") parsed into a `TypeInfo`, our own description of a type that
 * covers the whole spec, including the types arrow-js cannot represent
 * (list views, run-end encoded). The buffers an `ArrowArray` of each type
 * has are the layout table's (src/schema/layout.ts).
 */
import { invalid } from '../errors.js';
import { Kind, layoutOf } from './layout.js';

/** The unit of a time, timestamp or duration: seconds, milliseconds, microseconds, nanoseconds. */
export type TimeUnit = 's' | 'ms' | 'us' | 'ns';

/**
 * A type of the spec, as a format string describes it (CDataInterface.rst, "Data type description --
 * format strings"): every type, including those arrow-js cannot represent (list views, run-end encoded).
 * Children (of nested types) and the dictionary are the schema's, not the format's: see `SchemaNode`.
 */
export type TypeInfo =
  | {
      /** Null (`n`): no buffers. */
      readonly id: 'null';
    }
  | {
      /** Boolean (`b`): a bitmap of values. */
      readonly id: 'bool';
    }
  | {
      /** An integer (`c`, `C`, `s`, `S`, `i`, `I`, `l`, `L`). */
      readonly id: 'int';
      /** Its width in bits. */
      readonly bitWidth: 8 | 16 | 32 | 64;
      /** Whether it is signed (lower-case format letters). */
      readonly signed: boolean;
    }
  | {
      /** A floating-point number (`e`, `f`, `g`). */
      readonly id: 'float';
      /** Its width in bits: half, single, double precision. */
      readonly bitWidth: 16 | 32 | 64;
    }
  | {
      /** Binary or UTF-8 data: with 32-bit offsets (`z`, `u`), 64-bit offsets (`Z`, `U`), or views (`vz`, `vu`). */
      readonly id: 'binary' | 'utf8' | 'large_binary' | 'large_utf8' | 'binary_view' | 'utf8_view';
    }
  | {
      /** Fixed-width binary (`w:42`). */
      readonly id: 'fixed_binary';
      /** The width of each value in bytes. */
      readonly byteWidth: number;
    }
  | {
      /** A decimal (`d:19,10` is decimal128; `d:19,10,256`). */
      readonly id: 'decimal';
      /** The width of each value in bits (128 when the format does not say). */
      readonly bitWidth: 32 | 64 | 128 | 256;
      /** The number of decimal digits (at most 9, 18, 38, 76 for the widths). */
      readonly precision: number;
      /** The number of digits after the decimal point; may be negative. */
      readonly scale: number;
    }
  | {
      /** A date (`tdD`, `tdm`). */
      readonly id: 'date';
      /** Days (int32) or milliseconds (int64) since the UNIX epoch. */
      readonly unit: 'day' | 'ms';
    }
  | {
      /** A time of day (`tts`, `ttm`, `ttu`, `ttn`). */
      readonly id: 'time';
      /** Its unit. */
      readonly unit: TimeUnit;
    }
  | {
      /** A timestamp (`tss:`, `tsu:Europe/Paris`, ...). */
      readonly id: 'timestamp';
      /** Its unit. */
      readonly unit: TimeUnit;
      /** The time zone after the colon; null when empty (a wall-clock time). */
      readonly timezone: string | null;
    }
  | {
      /** A duration (`tDs`, `tDm`, `tDu`, `tDn`). */
      readonly id: 'duration';
      /** Its unit. */
      readonly unit: TimeUnit;
    }
  | {
      /** An interval (`tiM`, `tiD`, `tin`). */
      readonly id: 'interval';
      /** Months; days and milliseconds; or months, days and nanoseconds. */
      readonly unit: 'month' | 'day_time' | 'month_day_nano';
    }
  | {
      /** A list with 32-bit offsets (`+l`), 64-bit offsets (`+L`), or as a list view (`+vl`, `+vL`); one child. */
      readonly id: 'list' | 'large_list' | 'list_view' | 'large_list_view';
    }
  | {
      /** A fixed-size list (`+w:4`); one child. */
      readonly id: 'fixed_list';
      /** The number of child values per list. */
      readonly size: number;
    }
  | {
      /** A struct (`+s`): a child per field. */
      readonly id: 'struct';
    }
  | {
      /** A map (`+m`): one struct child of keys and values. */
      readonly id: 'map';
    }
  | {
      /** A union (`+us:0,1`, `+ud:0,1`): a child per member. */
      readonly id: 'union';
      /** Sparse (`+us`) or dense (`+ud`). */
      readonly mode: 'sparse' | 'dense';
      /** The type id of each child, in child order (each 0..127, none repeated). */
      readonly typeIds: readonly number[];
    }
  | {
      /** Run-end encoded (`+r`): two children, run ends and values. */
      readonly id: 'run_end_encoded';
    };

const simple: Record<string, TypeInfo> = {
  n: { id: 'null' },
  b: { id: 'bool' },
  c: { id: 'int', bitWidth: 8, signed: true },
  C: { id: 'int', bitWidth: 8, signed: false },
  s: { id: 'int', bitWidth: 16, signed: true },
  S: { id: 'int', bitWidth: 16, signed: false },
  i: { id: 'int', bitWidth: 32, signed: true },
  I: { id: 'int', bitWidth: 32, signed: false },
  l: { id: 'int', bitWidth: 64, signed: true },
  L: { id: 'int', bitWidth: 64, signed: false },
  e: { id: 'float', bitWidth: 16 },
  f: { id: 'float', bitWidth: 32 },
  g: { id: 'float', bitWidth: 64 },
  z: { id: 'binary' },
  Z: { id: 'large_binary' },
  vz: { id: 'binary_view' },
  u: { id: 'utf8' },
  U: { id: 'large_utf8' },
  vu: { id: 'utf8_view' },
  tdD: { id: 'date', unit: 'day' },
  tdm: { id: 'date', unit: 'ms' },
  tts: { id: 'time', unit: 's' },
  ttm: { id: 'time', unit: 'ms' },
  ttu: { id: 'time', unit: 'us' },
  ttn: { id: 'time', unit: 'ns' },
  tDs: { id: 'duration', unit: 's' },
  tDm: { id: 'duration', unit: 'ms' },
  tDu: { id: 'duration', unit: 'us' },
  tDn: { id: 'duration', unit: 'ns' },
  tiM: { id: 'interval', unit: 'month' },
  tiD: { id: 'interval', unit: 'day_time' },
  tin: { id: 'interval', unit: 'month_day_nano' },
  '+l': { id: 'list' },
  '+L': { id: 'large_list' },
  '+vl': { id: 'list_view' },
  '+vL': { id: 'large_list_view' },
  '+s': { id: 'struct' },
  '+m': { id: 'map' },
  '+r': { id: 'run_end_encoded' },
};

const tsUnits: Record<string, TimeUnit> = { s: 's', m: 'ms', u: 'us', n: 'ns' };

const INT32_MAX = 2 ** 31 - 1;

/** A decimal integer without sign, leading '+', spaces or exponent, at most INT32_MAX (the columnar format's widths are int32). */
function parseUint(text: string, path: string, format: string, what: string): number {
  if (!/^(0|[1-9][0-9]{0,9})$/.test(text)) throw invalid(path, `malformed ${what} in format "${format}"`);
  const n = Number(text);
  if (n > INT32_MAX) throw invalid(path, `${what} ${n} is out of range in format "${format}"`);
  return n;
}

/**
 * Parses a format string. `path` names the place for errors (`schema.children[2].format`).
 *
 * @example
 * parseFormat('d:19,10');        // { id: 'decimal', bitWidth: 128, precision: 19, scale: 10 }
 * parseFormat('tsu:Europe/Paris'); // { id: 'timestamp', unit: 'us', timezone: 'Europe/Paris' }
 * parseFormat('x');              // throws an ArrowDeviceError: format: unknown format "x"
 */
export function parseFormat(format: string, path = 'format'): TypeInfo {
  const hit = simple[format];
  if (hit) return hit;
  if (format.startsWith('w:')) {
    const byteWidth = parseUint(format.slice(2), path, format, 'byte width');
    return { id: 'fixed_binary', byteWidth };
  }
  if (format.startsWith('+w:')) {
    const size = parseUint(format.slice(3), path, format, 'list size');
    return { id: 'fixed_list', size };
  }
  if (format.startsWith('d:')) {
    const parts = format.slice(2).split(',');
    if (parts.length < 2 || parts.length > 3) throw invalid(path, `malformed decimal format "${format}"`);
    const precision = parseUint(parts[0]!, path, format, 'decimal precision');
    const scale = parts[1]!.startsWith('-')
      ? -parseUint(parts[1]!.slice(1), path, format, 'decimal scale')
      : parseUint(parts[1]!, path, format, 'decimal scale');
    const bw = parts.length === 3 ? parseUint(parts[2]!, path, format, 'decimal bit width') : 128;
    if (bw !== 32 && bw !== 64 && bw !== 128 && bw !== 256) {
      throw invalid(path, `decimal bit width must be 32, 64, 128 or 256 in format "${format}"`);
    }
    const maxPrecision = { 32: 9, 64: 18, 128: 38, 256: 76 }[bw];
    if (precision < 1 || precision > maxPrecision) {
      throw invalid(path, `decimal${bw} precision must be in 1..${maxPrecision}, got ${precision} in format "${format}"`);
    }
    return { id: 'decimal', bitWidth: bw, precision, scale };
  }
  if (format.startsWith('ts') && format.length >= 4 && format[3] === ':') {
    const unit = tsUnits[format[2]!];
    if (!unit) throw invalid(path, `unknown timestamp unit in format "${format}"`);
    const tz = format.slice(4);
    return { id: 'timestamp', unit, timezone: tz === '' ? null : tz };
  }
  if (format.startsWith('+ud:') || format.startsWith('+us:') || format === '+ud' || format === '+us') {
    const mode = format[2] === 'd' ? 'dense' : 'sparse';
    const list = format.slice(4);
    const typeIds = list === '' ? [] : list.split(',').map((t) => parseUint(t, path, format, 'union type id'));
    const seen = new Set<number>();
    for (const id of typeIds) {
      if (id > 127) throw invalid(path, `union type id ${id} is out of range 0..127 in format "${format}"`);
      if (seen.has(id)) throw invalid(path, `union type id ${id} is repeated in format "${format}"`);
      seen.add(id);
    }
    return { id: 'union', mode, typeIds };
  }
  throw invalid(path, `unknown format "${format}"`);
}

const unitChar: Record<TimeUnit, string> = { s: 's', ms: 'm', us: 'u', ns: 'n' };

/**
 * The format string of a `TypeInfo` (the inverse of `parseFormat`).
 *
 * @example
 * formatOf({ id: 'int', bitWidth: 32, signed: false });         // 'I'
 * formatOf({ id: 'timestamp', unit: 'ns', timezone: null });    // 'tsn:'
 */
export function formatOf(t: TypeInfo): string {
  switch (t.id) {
    case 'null': return 'n';
    case 'bool': return 'b';
    case 'int': return ({ 8: 'c', 16: 's', 32: 'i', 64: 'l' } as const)[t.bitWidth][t.signed ? 'toLowerCase' : 'toUpperCase']();
    case 'float': return ({ 16: 'e', 32: 'f', 64: 'g' } as const)[t.bitWidth];
    case 'binary': return 'z';
    case 'large_binary': return 'Z';
    case 'binary_view': return 'vz';
    case 'utf8': return 'u';
    case 'large_utf8': return 'U';
    case 'utf8_view': return 'vu';
    case 'fixed_binary': return `w:${t.byteWidth}`;
    case 'decimal': return t.bitWidth === 128 ? `d:${t.precision},${t.scale}` : `d:${t.precision},${t.scale},${t.bitWidth}`;
    case 'date': return t.unit === 'day' ? 'tdD' : 'tdm';
    case 'time': return `tt${unitChar[t.unit]}`;
    case 'timestamp': return `ts${unitChar[t.unit]}:${t.timezone ?? ''}`;
    case 'duration': return `tD${unitChar[t.unit]}`;
    case 'interval': return t.unit === 'month' ? 'tiM' : t.unit === 'day_time' ? 'tiD' : 'tin';
    case 'list': return '+l';
    case 'large_list': return '+L';
    case 'list_view': return '+vl';
    case 'large_list_view': return '+vL';
    case 'fixed_list': return `+w:${t.size}`;
    case 'struct': return '+s';
    case 'map': return '+m';
    case 'union': return `+u${t.mode === 'dense' ? 'd' : 's'}:${t.typeIds.join(',')}`;
    case 'run_end_encoded': return '+r';
  }
}

/**
 * What an `ArrowArray` of a type must look like: the layout table
 * (src/schema/layout.ts), under its former name.
 */
export { layoutOf as physicalLayout } from './layout.js';

/** The byte width of one value of a fixed-width type (bool: undefined, it is bits), from the layout table. */
export function fixedByteWidth(t: TypeInfo): number | undefined {
  const l = layoutOf(t);
  return l.kind === Kind.Fixed ? l.width : undefined;
}
