/**
 * Malformed foreign input, built in native memory by a test producer
 * (`builder.ts`). Every case proves three things (docs/architecture.md#errors):
 *
 * - the import throws an `ArrowDeviceError` of the expected kind whose
 *   message names the place (`array.children[1].n_buffers: ...`);
 * - the producer's release ran exactly once for every struct the import was
 *   handed (import consumes, on failure too: src/array/api.ts), never for a
 *   struct that was already released, never twice, and never for a child
 *   directly (CDataInterface.rst: the consumer releases the base structure only);
 * - `accounting().liveImports` is back where it was.
 *
 * A handful of cases must be accepted, to show the validator is not
 * over-strict. The last tests run the nastiest cases in a child process, to
 * show that none of them takes the process down.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  importArrayView, importData, importField, importRecordBatch, importSchema, importSchemaNode, importTable, importType,
  type ArrayImportOptions,
} from '../../../src/array/api.js';
import type { ArrayView } from '../../../src/array/view.js';
import { ArrowDeviceError, type ErrorKind } from '../../../src/errors.js';
import { accounting } from '../../../src/memory/accounting.js';
import { MAX_METADATA_BYTES } from '../../../src/schema/metadata.js';
import { ARROW_21_2 } from '../../../src/schema/arrowjs.js';
import { runChild } from '../../helpers/child.js';
import {
  bitmap, Builder, md, releaseCount, trackerProblems, views, type ArraySpec, type Built, type CStringSpec, type SchemaSpec,
} from './builder.js';

// --- shorthands for descriptions --------------------------------------------------------

const enc = new TextEncoder();
const I32 = (...v: number[]): Int32Array => new Int32Array(v);
const I64 = (...v: bigint[]): BigInt64Array => new BigInt64Array(v);
const I8 = (...v: number[]): Int8Array => new Int8Array(v);
const bytes = (s: string): Uint8Array => enc.encode(s);

const S = (format: CStringSpec | null, extra: Partial<SchemaSpec> = {}): SchemaSpec => ({ format, ...extra });
const struct = (...children: (SchemaSpec | null)[]): SchemaSpec => S('+s', { children });
const named = (name: string, s: SchemaSpec): SchemaSpec => ({ ...s, name });
/** A schema nested `levels` deep in "+l", with an int32 leaf. */
function deepList(levels: number): SchemaSpec {
  let s = S('i');
  for (let k = 0; k < levels; k++) s = S('+l', { children: [s] });
  return s;
}

/** An int32 array of these values, no validity bitmap. */
const i32 = (...v: number[]): ArraySpec => ({ length: v.length, buffers: [null, I32(...v)] });
/** A utf8 (or large utf8 with `wide`) array of these strings, no validity bitmap. */
function utf8(strs: string[], wide = false): ArraySpec {
  const parts = strs.map(bytes);
  const offs = [0];
  for (const p of parts) offs.push(offs[offs.length - 1]! + p.length);
  const data = new Uint8Array(offs[offs.length - 1]!);
  parts.forEach((p, k) => data.set(p, offs[k]!));
  return { length: strs.length, buffers: [null, wide ? I64(...offs.map(BigInt)) : I32(...offs), data] };
}
const patch = (a: ArraySpec, p: Partial<ArraySpec>): ArraySpec => ({ ...a, ...p });
/** `a` with buffer `i` replaced. */
function withBuffer(a: ArraySpec, i: number, b: ArraySpec['buffers'] extends (infer T)[] | undefined ? T : never): ArraySpec {
  const buffers = [...(a.buffers ?? [])];
  buffers[i] = b;
  return { ...a, buffers };
}

// Valid building blocks.
const listSchema = S('+l', { children: [S('i', { name: 'item' })] });
const list = (): ArraySpec => ({ length: 2, buffers: [null, I32(0, 2, 5)], children: [i32(1, 2, 3, 4, 5)] });
const listViewSchema = S('+vl', { children: [S('i', { name: 'item' })] });
const listView = (): ArraySpec => ({ length: 2, buffers: [null, I32(0, 1), I32(1, 2)], children: [i32(1, 2, 3)] });
const fixedListSchema = S('+w:3', { children: [S('i', { name: 'item' })] });
const fixedList = (): ArraySpec => ({ length: 2, buffers: [null], children: [i32(1, 2, 3, 4, 5, 6)] });
const recordSchema = struct(named('a', S('i')), named('b', S('u')));
const record = (): ArraySpec => ({ length: 3, buffers: [null], children: [i32(1, 2, 3), utf8(['x', 'yy', 'zzz'])] });
const sparseSchema = S('+us:0,1', { children: [named('a', S('i')), named('b', S('i'))] });
const sparse = (): ArraySpec => ({ length: 2, buffers: [I8(0, 1)], children: [i32(1, 2), i32(3, 4)] });
const denseSchema = S('+ud:0,1', { children: [named('a', S('i')), named('b', S('i'))] });
const dense = (): ArraySpec => ({ length: 2, buffers: [I8(0, 0), I32(0, 1)], children: [i32(1, 2), i32()] });
const reeSchema = S('+r', { children: [named('run_ends', S('i')), named('values', S('i'))] });
const ree = (): ArraySpec => ({ length: 4, children: [i32(2, 4), i32(10, 20)] });
const mapSchema = S('+m', { children: [S('+s', { name: 'entries', children: [named('key', S('u')), named('value', S('i'))] })] });
const map = (): ArraySpec => ({
  length: 1,
  buffers: [null, I32(0, 2)],
  children: [{ length: 2, buffers: [null], children: [utf8(['k1', 'k2']), i32(1, 2)] }],
});
const LONG = 'abcdefghijklmnop'; // 16 bytes, stored out of line by view types
const viewArray = (): ArraySpec => ({
  length: 2,
  buffers: [null, views('hi', { length: 14, prefix: 'abcd', buffer: 0, offset: 0 }), bytes(LONG), I64(16n)],
});
const dictSchema = S('i', { dictionary: S('u') });
const dictArray = (...indices: number[]): ArraySpec => ({
  length: indices.length,
  buffers: [null, I32(...indices)],
  dictionary: utf8(['a', 'b', 'c']),
});

// --- the case table ---------------------------------------------------------------------

type SchemaFn = 'importSchema' | 'importField' | 'importType' | 'importSchemaNode';
type ArrayFn = 'importData' | 'importArrayView' | 'importRecordBatch';

interface Expected {
  kind: ErrorKind;
  /** The whole message, or a pattern for it; either way it starts with the path. */
  message: string | RegExp;
}

interface BaseCase {
  name: string;
  /** `'accept'`: the import must succeed. */
  expect: Expected | 'accept';
  /** Release calls expected of each root that was handed over live; 1 unless set. */
  releases?: Partial<Record<'schema' | 'array', number>>;
  check?: (result: unknown) => void;
}

interface SchemaCase extends BaseCase {
  fn: SchemaFn;
  /** `null`: a NULL pointer. */
  schema: SchemaSpec | null;
}

interface ArrayCase extends BaseCase {
  fn: ArrayFn;
  /** Passed as an `ArrowSchema` pointer, which the import consumes too. */
  schema: SchemaSpec;
  array: ArraySpec | null;
  opts?: ArrayImportOptions;
}

interface TableCase extends BaseCase {
  fn: 'importTable';
  schema: SchemaSpec;
  arrays: (ArraySpec | null)[];
  opts?: ArrayImportOptions;
}

type Case = SchemaCase | ArrayCase | TableCase;

const err = (kind: ErrorKind, message: string | RegExp): Expected => ({ kind, message });
const bad = (message: string | RegExp): Expected => err('invalid', message);
const FULL: ArrayImportOptions = { validate: 'full' };
const MINIMAL: ArrayImportOptions = { validate: 'minimal' };
const COPY: ArrayImportOptions = { copy: true };
const ADDR = '0x[0-9a-f]+';

// Schemas -------------------------------------------------------------------------------

/** Formats that must be refused, with the detail each must give. */
const badFormats: [format: string, detail: string | RegExp, why?: string][] = [
  ['q', 'unknown format "q"'],
  ['', 'unknown format ""'],
  ['+', 'unknown format "+"'],
  ['ii', 'unknown format "ii"'],
  ['tdX', 'unknown format "tdX"'],
  ['tss', 'unknown format "tss"'],
  [' i', 'unknown format " i"'],
  ['w:', 'malformed byte width in format "w:"'],
  ['w:-1', 'malformed byte width in format "w:-1"'],
  ['w:1.5', 'malformed byte width in format "w:1.5"'],
  ['w:007', 'malformed byte width in format "w:007"'],
  // The Columnar format's byte width is an int32 (Schema.fbs, FixedSizeBinary.byteWidth).
  ['w:9999999999', /./, 'a byte width beyond int32'],
  ['d:', 'malformed decimal format "d:"'],
  ['d:1', 'malformed decimal format "d:1"'],
  ['d:1,2,3,4', 'malformed decimal format "d:1,2,3,4"'],
  ['d:10,x', 'malformed decimal scale in format "d:10,x"'],
  ['d:40,2', 'decimal128 precision must be in 1..38, got 40 in format "d:40,2"'],
  ['d:0,0', 'decimal128 precision must be in 1..38, got 0 in format "d:0,0"'],
  ['d:19,2,64', 'decimal64 precision must be in 1..18, got 19 in format "d:19,2,64"'],
  ['d:10,2,100', 'decimal bit width must be 32, 64, 128 or 256 in format "d:10,2,100"'],
  ['tsx:', 'unknown timestamp unit in format "tsx:"'],
  ['+w:', 'malformed list size in format "+w:"'],
  ['+w:abc', 'malformed list size in format "+w:abc"'],
  ['+ud:1,1', 'union type id 1 is repeated in format "+ud:1,1"'],
  ['+us:200', 'union type id 200 is out of range 0..127 in format "+us:200"'],
  ['+us:a', 'malformed union type id in format "+us:a"'],
  ['+us:1,', 'malformed union type id in format "+us:1,"'],
];

const schemaCases: SchemaCase[] = [
  { name: 'rejects a NULL schema pointer', fn: 'importSchema', schema: null, expect: bad('schema: NULL pointer') },
  {
    name: 'rejects a released schema and does not release it again',
    fn: 'importField',
    schema: S('i', { released: true }),
    expect: err('released', 'schema: the struct is released (release is NULL)'),
  },
  { name: 'rejects a NULL format', fn: 'importField', schema: S(null), expect: bad('schema.format: NULL pointer') },
  {
    name: 'rejects a format pointer at an invalid address',
    fn: 'importField',
    schema: S('i', { formatPtr: 0x10n }),
    expect: err('memory', 'schema.format: invalid address 0x10 (1 bytes)'),
  },
  ...badFormats.map(([format, detail, why]): SchemaCase => ({
    name: `rejects format ${JSON.stringify(format)}${why ? ` (${why})` : ''}`,
    fn: 'importField',
    schema: S(format),
    expect: bad(typeof detail === 'string' ? `schema.format: ${detail}` : /^schema\.format: /),
  })),
  {
    name: 'rejects a format that is not valid UTF-8',
    fn: 'importField',
    schema: S(new Uint8Array([0x69, 0xff])),
    expect: bad(new RegExp(`^schema\\.format: string at ${ADDR} is not valid UTF-8$`)),
  },
  {
    name: 'rejects a format with no NUL within 64 KiB',
    fn: 'importField',
    schema: S('i'.repeat(70_000)),
    expect: bad(new RegExp(`^schema\\.format: string at ${ADDR} has no NUL terminator within 65536 bytes$`)),
  },
  {
    name: 'rejects a name that is not valid UTF-8',
    fn: 'importField',
    schema: S('i', { name: new Uint8Array([0xc3, 0x28]) }),
    expect: bad(new RegExp(`^schema\\.name: string at ${ADDR} is not valid UTF-8$`)),
  },
  {
    name: 'rejects a child name that is not valid UTF-8',
    fn: 'importSchema',
    schema: struct(named('a', S('i')), S('u', { name: new Uint8Array([0x61, 0xe2, 0x82]) })),
    expect: bad(new RegExp(`^schema\\.children\\[1\\]\\.name: string at ${ADDR} is not valid UTF-8$`)),
  },
  { name: 'rejects unknown flag bit 8', fn: 'importField', schema: S('i', { flags: 8 }), expect: bad('schema.flags: unknown flag bits 0x8') },
  {
    name: 'rejects negative flags',
    fn: 'importField',
    schema: S('i', { flags: -1 }),
    expect: bad('schema.flags: unknown flag bits 0xffffffffffffffff'),
  },
  {
    name: 'rejects flag bit 40',
    fn: 'importField',
    schema: S('i', { flags: 1n << 40n }),
    expect: bad('schema.flags: unknown flag bits 0x10000000000'),
  },
  {
    name: 'rejects negative n_children',
    fn: 'importSchema',
    schema: S('+s', { nChildren: -1 }),
    expect: bad('schema.n_children: negative value -1'),
  },
  {
    name: 'rejects an implausible n_children of 2^40',
    fn: 'importSchema',
    schema: S('+s', { nChildren: 1n << 40n }),
    expect: bad('schema.n_children: implausible value 1099511627776'),
  },
  {
    name: 'rejects NULL children with n_children 2 and still releases the children',
    fn: 'importSchema',
    schema: S('+s', { children: [named('a', S('i')), named('b', S('u'))], childrenPtr: 0n }),
    expect: bad('schema.children: NULL pointer with n_children = 2'),
  },
  {
    name: 'rejects a NULL child pointer',
    fn: 'importSchema',
    schema: struct(named('a', S('i')), null),
    expect: bad('schema.children[1]: NULL pointer'),
  },
  {
    name: 'rejects a released child and still releases the root',
    fn: 'importSchema',
    schema: struct(named('a', S('i')), S('u', { name: 'b', released: true })),
    expect: err('released', 'schema.children[1]: the struct is released (release is NULL)'),
  },
  {
    name: 'rejects a released dictionary and still releases the root',
    fn: 'importField',
    schema: S('i', { dictionary: S('u', { released: true }) }),
    expect: err('released', 'schema.dictionary: the struct is released (release is NULL)'),
  },
  {
    name: 'rejects unknown format "q" in the third child',
    fn: 'importSchema',
    schema: struct(named('a', S('i')), named('b', S('u')), named('c', S('q'))),
    expect: bad('schema.children[2].format: unknown format "q"'),
  },
  {
    name: 'rejects an unknown format in a grandchild',
    fn: 'importSchema',
    schema: struct(S('+l', { name: 'a', children: [S('q')] })),
    expect: bad('schema.children[0].children[0].format: unknown format "q"'),
  },
  {
    name: 'rejects an unknown format in the dictionary',
    fn: 'importField',
    schema: S('i', { dictionary: S('q') }),
    expect: bad('schema.dictionary.format: unknown format "q"'),
  },
  { name: 'rejects a list with no child', fn: 'importField', schema: S('+l'), expect: bad('schema.n_children: type "+l" needs 1 child, got 0') },
  {
    name: 'rejects a large list with two children',
    fn: 'importField',
    schema: S('+L', { children: [S('i'), S('i')] }),
    expect: bad('schema.n_children: type "+L" needs 1 child, got 2'),
  },
  { name: 'rejects a list view with no child', fn: 'importSchemaNode', schema: S('+vl'), expect: bad('schema.n_children: type "+vl" needs 1 child, got 0') },
  { name: 'rejects a fixed size list with no child', fn: 'importField', schema: S('+w:2'), expect: bad('schema.n_children: type "+w:2" needs 1 child, got 0') },
  { name: 'rejects a map with no child', fn: 'importField', schema: S('+m'), expect: bad('schema.n_children: type "+m" needs 1 child, got 0') },
  {
    name: "rejects a map whose child is not a struct",
    fn: 'importField',
    schema: S('+m', { children: [S('i')] }),
    expect: bad('schema.children[0]: a map\'s child must be a struct of (key, value), got "i" with 0 children'),
  },
  {
    name: 'rejects a map whose child is a struct of one field',
    fn: 'importField',
    schema: S('+m', { children: [struct(named('key', S('u')))] }),
    expect: bad('schema.children[0]: a map\'s child must be a struct of (key, value), got "+s" with 1 children'),
  },
  {
    name: 'rejects a union with fewer children than type ids',
    fn: 'importField',
    schema: S('+us:0,1', { children: [S('i')] }),
    expect: bad('schema.n_children: union "+us:0,1" declares 2 type ids but has 1 children'),
  },
  {
    name: 'rejects a union with no type ids but a child',
    fn: 'importField',
    schema: S('+ud:', { children: [S('i')] }),
    expect: bad('schema.n_children: union "+ud:" declares 0 type ids but has 1 children'),
  },
  {
    name: 'rejects run-end encoded with one child',
    fn: 'importSchemaNode',
    schema: S('+r', { children: [S('i')] }),
    expect: bad('schema.n_children: type "+r" needs 2 children, got 1'),
  },
  {
    name: 'rejects run-end encoded with utf8 run ends',
    fn: 'importSchemaNode',
    schema: S('+r', { children: [S('u'), S('i')] }),
    expect: bad('schema.children[0].format: run ends must be int16, int32 or int64, got "u"'),
  },
  {
    name: 'rejects run-end encoded with int8 run ends',
    fn: 'importSchemaNode',
    schema: S('+r', { children: [S('c'), S('i')] }),
    expect: bad('schema.children[0].format: run ends must be int16, int32 or int64, got "c"'),
  },
  {
    name: 'rejects run-end encoded with unsigned run ends',
    fn: 'importSchemaNode',
    schema: S('+r', { children: [S('I'), S('i')] }),
    expect: bad('schema.children[0].format: run ends must be int16, int32 or int64, got "I"'),
  },
  {
    name: 'rejects a primitive with a child',
    fn: 'importField',
    schema: S('i', { children: [S('i')] }),
    expect: bad('schema.n_children: type "i" needs 0 children, got 1'),
  },
  {
    name: 'rejects a dictionary on a utf8 index type',
    fn: 'importField',
    schema: S('u', { dictionary: S('u') }),
    expect: bad('schema.dictionary: a dictionary needs an integer index type, but the format is "u"'),
  },
  {
    name: 'rejects a dictionary on a float64 index type',
    fn: 'importField',
    schema: S('g', { dictionary: S('u') }),
    expect: bad('schema.dictionary: a dictionary needs an integer index type, but the format is "g"'),
  },
  {
    name: 'rejects a dictionary on a struct',
    fn: 'importField',
    schema: S('+s', { dictionary: S('u') }),
    expect: bad('schema.dictionary: a dictionary needs an integer index type, but the format is "+s"'),
  },
  {
    name: 'rejects metadata with a negative pair count',
    fn: 'importField',
    schema: S('i', { metadata: md(-1) }),
    expect: bad('schema.metadata: negative pair count -1'),
  },
  {
    name: 'rejects metadata with a negative key length',
    fn: 'importField',
    schema: S('i', { metadata: md(1, -5) }),
    expect: bad('schema.metadata: negative key length -5 in pair 0'),
  },
  {
    name: 'rejects metadata with a negative value length',
    fn: 'importField',
    schema: S('i', { metadata: md(1, 1, 'k', -1) }),
    expect: bad('schema.metadata: negative value length -1 in pair 0'),
  },
  {
    name: 'rejects metadata whose key length runs past the end',
    fn: 'importField',
    schema: S('i', { metadata: md(1, 0x7fffffff, 'k') }),
    expect: bad(`schema.metadata: key of pair 0 runs past the end of the metadata (${MAX_METADATA_BYTES} bytes at most)`),
  },
  {
    name: 'rejects metadata whose value length runs past the end',
    fn: 'importField',
    schema: S('i', { metadata: md(1, 1, 'k', 0x7fffffff, 'v') }),
    expect: bad(`schema.metadata: value of pair 0 runs past the end of the metadata (${MAX_METADATA_BYTES} bytes at most)`),
  },
  {
    name: 'rejects metadata whose second key length runs past the end',
    fn: 'importField',
    schema: S('i', { metadata: md(2, 1, 'a', 1, 'b', 0x7ffffff0, 'c') }),
    expect: bad(`schema.metadata: key of pair 1 runs past the end of the metadata (${MAX_METADATA_BYTES} bytes at most)`),
  },
  {
    name: 'rejects a metadata key that is not valid UTF-8',
    fn: 'importField',
    schema: S('i', { metadata: md(1, 2, new Uint8Array([0xc3, 0x28]), 1, 'v') }),
    expect: bad('schema.metadata: key of pair 0 is not valid UTF-8'),
  },
  {
    name: 'rejects a metadata value that is not valid UTF-8',
    fn: 'importField',
    schema: S('i', { metadata: md(1, 1, 'k', 1, new Uint8Array([0xff])) }),
    expect: bad('schema.metadata: value of pair 0 is not valid UTF-8'),
  },
  {
    name: "rejects a child's metadata with a negative pair count",
    fn: 'importSchema',
    schema: struct(named('a', S('i')), S('u', { name: 'b', metadata: md(-2) })),
    expect: bad('schema.children[1].metadata: negative pair count -2'),
  },
  {
    name: 'rejects nesting of 65 levels',
    fn: 'importSchemaNode',
    schema: deepList(65),
    expect: bad(/^schema(\.children\[0\]){65}: nesting deeper than 64 levels$/),
  },
  {
    name: 'rejects nesting of 70 levels',
    fn: 'importField',
    schema: deepList(70),
    expect: bad(/^schema(\.children\[0\]){65}: nesting deeper than 64 levels$/),
  },
  {
    name: 'rejects a record batch schema that is not a struct, after releasing it',
    fn: 'importSchema',
    schema: S('i'),
    expect: bad('schema.format: a schema (record batch) must be a struct ("+s"), got "i"'),
  },
  {
    name: 'refuses a list view field arrow-js cannot represent, after releasing it',
    fn: 'importField',
    schema: listViewSchema,
    expect: err('unsupported', /^schema\.format: arrow-js has no list view type \("\+vl"\)/),
  },
  {
    name: 'refuses a run-end encoded child arrow-js cannot represent',
    fn: 'importSchema',
    schema: struct(named('a', reeSchema)),
    expect: err('unsupported', /^schema\.children\[0\]\.format: arrow-js has no run-end encoded type/),
  },
  // Accepted ---------------------------------------------------------------------------
  {
    name: 'accepts nesting of exactly 64 levels',
    fn: 'importSchemaNode',
    schema: deepList(64),
    expect: 'accept',
  },
  {
    name: 'accepts a schema with metadata, flags and a dictionary',
    fn: 'importSchema',
    schema: S('+s', {
      metadata: md(1, 3, 'key', 5, 'value'),
      children: [named('a', S('i', { flags: 2, dictionary: S('u') })), named('b', S('+m', { ...mapSchema, flags: 4 }))],
    }),
    expect: 'accept',
    check: (r) => {
      const schema = r as Awaited<ReturnType<typeof importSchema>>;
      assert.equal(schema.metadata.get('key'), 'value');
      assert.deepEqual(schema.fields.map((f) => f.name), ['a', 'b']);
      assert.equal(schema.fields[0]!.nullable, true);
    },
  },
  { name: 'accepts a decimal256 at precision 76', fn: 'importType', schema: S('d:76,2,256'), expect: 'accept' },
];

// Arrays --------------------------------------------------------------------------------

const arrayCases: ArrayCase[] = [
  // The struct as a whole.
  { name: 'rejects a NULL array pointer', fn: 'importArrayView', schema: S('i'), array: null, expect: bad('array: NULL pointer') },
  {
    name: 'rejects a released array and does not release it again',
    fn: 'importData',
    schema: S('i'),
    array: patch(i32(1, 2, 3), { released: true }),
    expect: err('released', 'array: the struct is released (release is NULL)'),
  },
  { name: 'rejects length -1', fn: 'importData', schema: S('i'), array: patch(i32(1), { length: -1 }), expect: bad('array.length: negative value -1') },
  { name: 'rejects offset -3', fn: 'importData', schema: S('i'), array: patch(i32(1), { offset: -3 }), expect: bad('array.offset: negative value -3') },
  {
    name: 'rejects null_count -2',
    fn: 'importData',
    schema: S('i'),
    array: patch(i32(1), { nullCount: -2 }),
    expect: bad('array.null_count: negative value -2'),
  },
  {
    name: 'rejects null_count greater than the length',
    fn: 'importArrayView',
    schema: S('i'),
    array: { length: 3, nullCount: 4, buffers: [bitmap(false, false, false), I32(1, 2, 3)] },
    expect: bad('array.null_count: 4 is greater than the length 3'),
  },
  {
    name: 'rejects a length of 2^60',
    fn: 'importArrayView',
    schema: S('i'),
    array: patch(i32(1), { length: 1n << 60n }),
    expect: bad('array.length: value 1152921504606846976 is too large'),
  },
  {
    name: 'rejects offset + length beyond 2^53',
    fn: 'importArrayView',
    schema: S('i'),
    array: patch(i32(1), { length: 1n << 52n, offset: 1n << 52n }),
    expect: bad('array: offset + length overflows'),
  },
  // n_buffers for each layout family.
  { name: 'rejects n_buffers 3 for int32', fn: 'importArrayView', schema: S('i'), array: { length: 1, buffers: [null, I32(1), null] }, expect: bad('array.n_buffers: type "i" needs 2 buffers, got 3') },
  { name: 'rejects n_buffers -1', fn: 'importArrayView', schema: S('i'), array: patch(i32(1), { nBuffers: -1 }), expect: bad('array.n_buffers: negative value -1') },
  { name: 'rejects n_buffers 1 for bool', fn: 'importArrayView', schema: S('b'), array: { length: 1, buffers: [null] }, expect: bad('array.n_buffers: type "b" needs 2 buffers, got 1') },
  { name: 'rejects n_buffers 2 for utf8', fn: 'importArrayView', schema: S('u'), array: { length: 1, buffers: [null, I32(0, 1)] }, expect: bad('array.n_buffers: type "u" needs 3 buffers, got 2') },
  {
    name: 'rejects n_buffers 4 for large utf8',
    fn: 'importArrayView',
    schema: S('U'),
    array: { length: 1, buffers: [null, I64(0n, 1n), bytes('a'), null] },
    expect: bad('array.n_buffers: type "U" needs 3 buffers, got 4'),
  },
  {
    name: 'rejects n_buffers 2 for utf8 view',
    fn: 'importArrayView',
    schema: S('vu'),
    array: { length: 1, buffers: [null, views('a')] },
    expect: bad('array.n_buffers: type "vu" needs at least 3 buffers, got 2'),
  },
  { name: 'rejects n_buffers 0 for binary view', fn: 'importArrayView', schema: S('vz'), array: { length: 0 }, expect: bad('array.n_buffers: type "vz" needs at least 3 buffers, got 0') },
  {
    name: 'rejects n_buffers 1 for list',
    fn: 'importArrayView',
    schema: listSchema,
    array: patch(list(), { buffers: [null] }),
    expect: bad('array.n_buffers: type "+l" needs 2 buffers, got 1'),
  },
  {
    name: 'rejects n_buffers 2 for list view',
    fn: 'importArrayView',
    schema: listViewSchema,
    array: patch(listView(), { buffers: [null, I32(0, 1)] }),
    expect: bad('array.n_buffers: type "+vl" needs 3 buffers, got 2'),
  },
  {
    name: 'rejects n_buffers 2 for fixed size list',
    fn: 'importArrayView',
    schema: fixedListSchema,
    array: patch(fixedList(), { buffers: [null, null] }),
    expect: bad('array.n_buffers: type "+w:3" needs 1 buffer, got 2'),
  },
  {
    name: 'rejects n_buffers 0 for struct',
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: patch(record(), { buffers: [] }),
    expect: bad('array.n_buffers: type "+s" needs 1 buffer, got 0'),
  },
  {
    name: 'rejects n_buffers 2 for a sparse union',
    fn: 'importArrayView',
    schema: sparseSchema,
    array: patch(sparse(), { buffers: [I8(0, 1), I32(0, 1)] }),
    expect: bad('array.n_buffers: type "+us:0,1" needs 1 buffer, got 2'),
  },
  {
    name: 'rejects n_buffers 1 for a dense union',
    fn: 'importArrayView',
    schema: denseSchema,
    array: patch(dense(), { buffers: [I8(0, 0)] }),
    expect: bad('array.n_buffers: type "+ud:0,1" needs 2 buffers, got 1'),
  },
  {
    name: 'rejects n_buffers 1 for run-end encoded',
    fn: 'importArrayView',
    schema: reeSchema,
    array: patch(ree(), { buffers: [null] }),
    expect: bad('array.n_buffers: type "+r" needs 0 buffers, got 1'),
  },
  { name: 'rejects n_buffers 2 for null', fn: 'importArrayView', schema: S('n'), array: { length: 2, nullCount: 2, buffers: [null, null] }, expect: bad('array.n_buffers: type "n" needs 0 buffers, got 2') },
  { name: 'rejects n_buffers 1 for fixed size binary', fn: 'importArrayView', schema: S('w:4'), array: { length: 1, buffers: [null] }, expect: bad('array.n_buffers: type "w:4" needs 2 buffers, got 1') },
  {
    name: 'rejects n_buffers 3 for decimal128',
    fn: 'importArrayView',
    schema: S('d:10,2'),
    array: { length: 1, buffers: [null, new Uint8Array(16), null] },
    expect: bad('array.n_buffers: type "d:10,2" needs 2 buffers, got 3'),
  },
  {
    name: 'rejects n_buffers 1 for map',
    fn: 'importArrayView',
    schema: mapSchema,
    array: patch(map(), { buffers: [null] }),
    expect: bad('array.n_buffers: type "+m" needs 2 buffers, got 1'),
  },
  {
    name: "rejects a struct child's n_buffers 2 for utf8",
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: patch(record(), { children: [i32(1, 2, 3), { length: 3, buffers: [null, I32(0, 1, 2, 3)] }] }),
    expect: bad('array.children[1].n_buffers: type "u" needs 3 buffers, got 2'),
  },
  {
    name: 'rejects a wrong n_buffers two levels down',
    fn: 'importRecordBatch',
    schema: struct(S('+l', { name: 'a', children: [S('u')] })),
    array: { length: 1, buffers: [null], children: [{ length: 1, buffers: [null, I32(0, 1)], children: [{ length: 1, buffers: [null, I32(0, 1)] }] }] },
    expect: bad('array.children[0].children[0].n_buffers: type "u" needs 3 buffers, got 2'),
  },
  // n_children and pointers.
  {
    name: 'rejects a struct array with fewer children than its schema',
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: patch(record(), { children: [i32(1, 2, 3)] }),
    expect: bad('array.n_children: the schema has 2 children, the array 1'),
  },
  {
    name: 'rejects a primitive array with a child',
    fn: 'importArrayView',
    schema: S('i'),
    array: patch(i32(1), { children: [i32(1)] }),
    expect: bad('array.n_children: the schema has 0 children, the array 1'),
  },
  {
    name: 'rejects a list array with no child',
    fn: 'importArrayView',
    schema: listSchema,
    array: patch(list(), { children: [] }),
    expect: bad('array.n_children: the schema has 1 children, the array 0'),
  },
  { name: 'rejects n_children -1', fn: 'importArrayView', schema: S('i'), array: patch(i32(1), { nChildren: -1 }), expect: bad('array.n_children: negative value -1') },
  {
    name: 'rejects a NULL buffers pointer',
    fn: 'importArrayView',
    schema: S('i'),
    array: patch(i32(1, 2), { buffersPtr: 0n }),
    expect: bad('array.buffers: NULL pointer with n_buffers = 2'),
  },
  {
    name: 'rejects a NULL children pointer and still releases the children',
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: patch(record(), { childrenPtr: 0n }),
    expect: bad('array.children: NULL pointer with n_children = 2'),
  },
  {
    name: 'rejects a NULL child pointer',
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: patch(record(), { children: [null, utf8(['x', 'yy', 'zzz'])] }),
    expect: bad('array.children[0]: NULL pointer'),
  },
  {
    name: 'rejects a released child and releases the rest once',
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: patch(record(), { children: [i32(1, 2, 3), { ...utf8(['x', 'yy', 'zzz']), released: true }] }),
    expect: err('released', 'array.children[1]: the struct is released (release is NULL)'),
  },
  {
    name: 'rejects a buffers pointer at an invalid address',
    fn: 'importArrayView',
    schema: S('i'),
    array: patch(i32(1), { buffersPtr: 0x20n }),
    expect: err('memory', /^array\.buffers: invalid address 0x20 \(16 bytes\)$/),
  },
  {
    name: 'rejects a values buffer at an invalid address',
    fn: 'importArrayView',
    schema: S('i'),
    array: withBuffer(i32(1, 2, 3), 1, 0x30n),
    expect: err('memory', /^array\.buffers\[1\]: invalid address 0x30 \(12 bytes\)$/),
  },
  // NULL buffers the layout needs.
  {
    name: 'rejects a NULL int32 values buffer',
    fn: 'importData',
    schema: S('i'),
    array: withBuffer(i32(1, 2, 3), 1, null),
    expect: bad('array.buffers[1]: NULL values buffer, but 12 bytes are needed'),
  },
  {
    name: 'rejects a NULL int32 values buffer, counting the offset',
    fn: 'importData',
    schema: S('i'),
    array: { length: 3, offset: 2, buffers: [null, null] },
    expect: bad('array.buffers[1]: NULL values buffer, but 20 bytes are needed'),
  },
  {
    name: 'rejects a NULL bool values buffer',
    fn: 'importData',
    schema: S('b'),
    array: { length: 10, buffers: [null, null] },
    expect: bad('array.buffers[1]: NULL values buffer, but 2 bytes are needed'),
  },
  {
    name: 'rejects a NULL fixed size binary values buffer',
    fn: 'importData',
    schema: S('w:4'),
    array: { length: 3, buffers: [null, null] },
    expect: bad('array.buffers[1]: NULL values buffer, but 12 bytes are needed'),
  },
  {
    name: 'rejects a NULL utf8 offsets buffer with length 2',
    fn: 'importData',
    schema: S('u'),
    array: withBuffer(utf8(['ab', 'cde']), 1, null),
    expect: bad('array.buffers[1]: NULL offset buffer, but 12 bytes are needed'),
  },
  {
    name: 'rejects a NULL utf8 data buffer when the last offset is 5',
    fn: 'importData',
    schema: S('u'),
    array: withBuffer(utf8(['ab', 'cde']), 2, null),
    expect: bad('array.buffers[2]: NULL data buffer, but 5 bytes are needed'),
  },
  {
    name: 'rejects a NULL list offsets buffer',
    fn: 'importData',
    schema: listSchema,
    array: withBuffer(list(), 1, null),
    expect: bad('array.buffers[1]: NULL offset buffer, but 12 bytes are needed'),
  },
  {
    name: 'rejects a NULL views buffer',
    fn: 'importArrayView',
    schema: S('vu'),
    array: { length: 2, buffers: [null, null, null] },
    expect: bad('array.buffers[1]: NULL views buffer, but 32 bytes are needed'),
  },
  {
    name: 'rejects a NULL list view sizes buffer',
    fn: 'importArrayView',
    schema: listViewSchema,
    array: withBuffer(listView(), 2, null),
    expect: bad('array.buffers[2]: NULL sizes buffer, but 8 bytes are needed'),
  },
  {
    name: 'rejects a NULL union type ids buffer',
    fn: 'importArrayView',
    schema: sparseSchema,
    array: withBuffer(sparse(), 0, null),
    expect: bad('array.buffers[0]: NULL type ids buffer, but 2 bytes are needed'),
  },
  {
    name: 'rejects a NULL dense union offsets buffer',
    fn: 'importArrayView',
    schema: denseSchema,
    array: withBuffer(dense(), 1, null),
    expect: bad('array.buffers[1]: NULL offsets buffer, but 8 bytes are needed'),
  },
  {
    name: 'rejects a NULL validity buffer with null_count 1',
    fn: 'importData',
    schema: S('i'),
    array: patch(i32(1, 2, 3), { nullCount: 1 }),
    expect: bad('array.buffers[0]: NULL validity buffer with null_count 1'),
  },
  {
    // CDataInterface.rst: the null bitmap "MAY be NULL only if ArrowArray.null_count is 0".
    name: 'rejects a NULL validity buffer with null_count -1',
    fn: 'importData',
    schema: S('i'),
    array: patch(i32(1, 2, 3), { nullCount: -1 }),
    expect: bad('array.buffers[0]: NULL validity buffer with null_count -1'),
  },
  {
    name: "rejects a struct child's NULL validity buffer with null_count 2",
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: patch(record(), { children: [patch(i32(1, 2, 3), { nullCount: 2 }), utf8(['x', 'yy', 'zzz'])] }),
    expect: bad('array.children[0].buffers[0]: NULL validity buffer with null_count 2'),
  },
  // Dictionaries.
  {
    name: 'rejects a missing dictionary',
    fn: 'importData',
    schema: dictSchema,
    array: i32(0, 1, 2),
    expect: bad('array.dictionary: NULL pointer, but the schema is dictionary-encoded'),
  },
  {
    name: 'rejects a dictionary the schema does not have, and releases it with the root',
    fn: 'importData',
    schema: S('i'),
    array: dictArray(0, 1, 2),
    expect: bad('array.dictionary: present, but the schema is not dictionary-encoded'),
  },
  {
    name: 'rejects a released dictionary array',
    fn: 'importData',
    schema: dictSchema,
    array: patch(dictArray(0, 1, 2), { dictionary: { ...utf8(['a', 'b', 'c']), released: true } }),
    expect: err('released', 'array.dictionary: the struct is released (release is NULL)'),
  },
  {
    name: "rejects a dictionary array's n_buffers 2 for utf8",
    fn: 'importData',
    schema: dictSchema,
    array: patch(dictArray(0, 1, 2), { dictionary: { length: 3, buffers: [null, I32(0, 1, 2, 3)] } }),
    expect: bad('array.dictionary.n_buffers: type "u" needs 3 buffers, got 2'),
  },
  // Children too short for their parent (default level).
  {
    name: 'rejects a struct child shorter than the struct',
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: patch(record(), { children: [i32(1, 2, 3), utf8(['x', 'yy'])] }),
    expect: bad('array.children[1].length: 2 is less than the 3 its parent needs'),
  },
  {
    name: 'rejects a struct child shorter than offset + length',
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: { length: 2, offset: 1, buffers: [null], children: [i32(1, 2), utf8(['x', 'yy', 'zzz'])] },
    expect: bad('array.children[0].length: 2 is less than the 3 its parent needs'),
  },
  {
    name: 'rejects a fixed size list child shorter than length * size',
    fn: 'importData',
    schema: fixedListSchema,
    array: patch(fixedList(), { children: [i32(1, 2, 3, 4, 5)] }),
    expect: bad('array.children[0].length: 5 is less than the 6 its parent needs'),
  },
  {
    name: "rejects a list child shorter than the list's last offset",
    fn: 'importData',
    schema: listSchema,
    array: patch(list(), { children: [i32(1, 2, 3)] }),
    expect: bad('array.children[0].length: 3 is less than the 5 its parent needs'),
  },
  {
    name: 'rejects a sparse union child shorter than the union',
    fn: 'importArrayView',
    schema: sparseSchema,
    array: patch(sparse(), { children: [i32(1, 2), i32(3)] }),
    expect: bad('array.children[1].length: 1 is less than the 2 its parent needs'),
  },
  {
    name: 'rejects run ends and values of different lengths',
    fn: 'importArrayView',
    schema: reeSchema,
    array: patch(ree(), { children: [i32(2, 4), i32(10, 20, 30)] }),
    expect: bad('array.children[1].length: run ends (2) and values (3) differ in length'),
  },
  // Offsets (default level).
  {
    name: 'rejects a negative first utf8 offset',
    fn: 'importData',
    schema: S('u'),
    array: { length: 2, buffers: [null, I32(-1, 2, 3), bytes('abc')] },
    expect: bad('array.buffers[1]: first offset -1 is negative'),
  },
  {
    name: 'rejects a last utf8 offset less than the first',
    fn: 'importData',
    schema: S('u'),
    array: { length: 2, buffers: [null, I32(3, 4, 1), bytes('abcd')] },
    expect: bad('array.buffers[1]: last offset 1 is less than the first 3'),
  },
  {
    name: 'rejects a last offset less than the first in a sliced utf8 array',
    fn: 'importData',
    schema: S('u'),
    array: { length: 1, offset: 1, buffers: [null, I32(0, 4, 2), bytes('abcd')] },
    expect: bad('array.buffers[1]: last offset 2 is less than the first 4'),
  },
  {
    name: 'rejects a negative first list offset',
    fn: 'importData',
    schema: listSchema,
    array: patch(list(), { buffers: [null, I32(-2, 0, 1)] }),
    expect: bad('array.buffers[1]: first offset -2 is negative'),
  },
  {
    name: 'rejects a large utf8 offset beyond 2^53',
    fn: 'importData',
    schema: S('U'),
    array: { length: 1, buffers: [null, I64(0n, 1n << 62n), bytes('a')] },
    expect: bad('array.buffers[1]: offset 4611686018427387904 at 1 is out of range'),
  },
  {
    name: 'rejects a large utf8 offset beyond 2^53 at the minimal level too',
    fn: 'importArrayView',
    schema: S('U'),
    array: { length: 1, buffers: [null, I64(0n, 1n << 62n), bytes('a')] },
    opts: MINIMAL,
    expect: bad('array.buffers[1]: offset 4611686018427387904 at 1 is out of range'),
  },
  {
    name: 'rejects a large list offset below -2^53',
    // As an ArrayView where the arrow-js in use has no LargeList (before apache-arrow 21.2.0): the same read.
    fn: ARROW_21_2.LargeList ? 'importData' : 'importArrayView',
    schema: S('+L', { children: [S('i')] }),
    array: { length: 1, buffers: [null, I64(-(1n << 62n), 0n)], children: [i32()] },
    expect: bad('array.buffers[1]: offset -4611686018427387904 at 0 is out of range'),
  },
  {
    name: 'rejects a negative variadic buffer size',
    fn: 'importArrayView',
    schema: S('vu'),
    array: { length: 1, buffers: [null, views('a'), bytes('x'), I64(-1n)] },
    expect: bad('array.buffers[3]: variadic buffer 0 has size -1'),
  },
  {
    name: 'rejects a variadic buffer size beyond 2^53',
    fn: 'importArrayView',
    schema: S('vz'),
    array: { length: 1, buffers: [null, views('a'), bytes('x'), I64(1n << 53n)] },
    expect: bad('array.buffers[3]: variadic buffer 0 has size 9007199254740992'),
  },
  // Null counts of types without a validity bitmap.
  {
    name: 'rejects a sparse union with null_count 1',
    fn: 'importArrayView',
    schema: sparseSchema,
    array: patch(sparse(), { nullCount: 1 }),
    expect: bad('array.null_count: type "+us:0,1" has no validity bitmap, so null_count must be 0 or -1, got 1'),
  },
  {
    name: 'rejects a dense union with null_count 2',
    fn: 'importArrayView',
    schema: denseSchema,
    array: patch(dense(), { nullCount: 2 }),
    expect: bad('array.null_count: type "+ud:0,1" has no validity bitmap, so null_count must be 0 or -1, got 2'),
  },
  {
    name: 'rejects run-end encoded with null_count 1',
    fn: 'importArrayView',
    schema: reeSchema,
    array: patch(ree(), { nullCount: 1 }),
    expect: bad('array.null_count: type "+r" has no validity bitmap, so null_count must be 0 or -1, got 1'),
  },
  // Contents (full level).
  {
    name: 'rejects non-monotone utf8 offsets (full)',
    fn: 'importData',
    schema: S('u'),
    array: { length: 3, buffers: [null, I32(0, 3, 1, 4), bytes('abcd')] },
    opts: FULL,
    expect: bad('array.buffers[1]: offsets are not monotone at 2: 1 after 3'),
  },
  {
    name: 'rejects non-monotone list offsets (full)',
    fn: 'importData',
    schema: listSchema,
    array: { length: 3, buffers: [null, I32(0, 2, 1, 3)], children: [i32(1, 2, 3)] },
    opts: FULL,
    expect: bad('array.buffers[1]: offsets are not monotone at 2: 1 after 2'),
  },
  {
    name: 'rejects a union type id the type does not declare (full)',
    fn: 'importArrayView',
    schema: sparseSchema,
    array: patch(sparse(), { buffers: [I8(0, 5)] }),
    opts: FULL,
    expect: bad("array.buffers[0]: type id 5 at 1 is not one of the union's (0,1)"),
  },
  {
    name: 'rejects a negative union type id (full)',
    fn: 'importArrayView',
    schema: denseSchema,
    array: { length: 1, buffers: [I8(-1), I32(0)], children: [i32(1), i32()] },
    opts: FULL,
    expect: bad("array.buffers[0]: type id -1 at 0 is not one of the union's (0,1)"),
  },
  {
    name: 'rejects a dense union offset beyond its child (full)',
    fn: 'importArrayView',
    schema: denseSchema,
    array: patch(dense(), { buffers: [I8(0, 0), I32(0, 3)] }),
    opts: FULL,
    expect: bad('array.buffers[1]: offset 3 at 1 is outside child 0 of length 2'),
  },
  {
    name: 'rejects a negative dense union offset (full)',
    fn: 'importArrayView',
    schema: denseSchema,
    array: patch(dense(), { buffers: [I8(0, 0), I32(-1, 0)] }),
    opts: FULL,
    expect: bad('array.buffers[1]: offset -1 at 0 is outside child 0 of length 2'),
  },
  {
    name: 'rejects run ends that do not increase (full)',
    fn: 'importArrayView',
    schema: reeSchema,
    array: patch(ree(), { children: [i32(3, 2, 4), i32(10, 20, 30)] }),
    opts: FULL,
    expect: bad('array.children[0]: run ends must be positive and strictly increasing: 2 after 3 at 1'),
  },
  {
    name: 'rejects a first run end of 0 (full)',
    fn: 'importArrayView',
    schema: reeSchema,
    array: { length: 2, children: [i32(0, 2), i32(10, 20)] },
    opts: FULL,
    expect: bad('array.children[0]: run ends must be positive and strictly increasing: 0 after 0 at 0'),
  },
  {
    name: 'rejects run ends that do not cover the array (full)',
    fn: 'importArrayView',
    schema: reeSchema,
    array: { length: 5, children: [i32(1, 3), i32(10, 20)] },
    opts: FULL,
    expect: bad('array.children[0]: the last run end 3 is less than offset + length 5'),
  },
  {
    name: 'rejects run ends that do not cover offset + length (full)',
    fn: 'importArrayView',
    schema: reeSchema,
    array: { length: 3, offset: 2, children: [i32(2, 4), i32(10, 20)] },
    opts: FULL,
    expect: bad('array.children[0]: the last run end 4 is less than offset + length 5'),
  },
  {
    name: 'rejects a view reaching outside its variadic buffer (full)',
    fn: 'importArrayView',
    schema: S('vu'),
    array: withBuffer(viewArray(), 1, views('hi', { length: 20, buffer: 0, offset: 4 })),
    opts: FULL,
    expect: bad('array.buffers[1]: view 1 (offset 4, length 20) is outside data buffer 0 of 16 bytes'),
  },
  {
    name: 'rejects a view naming a variadic buffer that does not exist (full)',
    fn: 'importArrayView',
    schema: S('vu'),
    array: withBuffer(viewArray(), 1, views({ length: 13, buffer: 2, offset: 0 }, 'x')),
    opts: FULL,
    expect: bad('array.buffers[1]: view 0 refers to data buffer 2 of 1'),
  },
  {
    name: 'rejects an out-of-line view with no variadic buffers (full)',
    fn: 'importArrayView',
    schema: S('vz'),
    array: { length: 1, buffers: [null, views({ length: 13, buffer: 0, offset: 0 }), null] },
    opts: FULL,
    expect: bad('array.buffers[1]: view 0 refers to data buffer 0 of 0'),
  },
  {
    name: 'rejects a view of negative length (full)',
    fn: 'importArrayView',
    schema: S('vu'),
    array: withBuffer(viewArray(), 1, views({ length: -1, buffer: 0, offset: 0 }, 'x')),
    opts: FULL,
    expect: bad('array.buffers[1]: view 0 has negative length -1'),
  },
  {
    name: 'rejects a dictionary index beyond the dictionary (full)',
    fn: 'importData',
    schema: dictSchema,
    array: dictArray(0, 1, 7),
    opts: FULL,
    expect: bad('array.buffers[1]: dictionary index 7 at 2 is outside the dictionary of length 3'),
  },
  {
    name: 'rejects a negative int8 dictionary index (full)',
    fn: 'importData',
    schema: S('c', { dictionary: S('u') }),
    array: { length: 2, buffers: [null, I8(-1, 0)], dictionary: utf8(['a', 'b', 'c']) },
    opts: FULL,
    expect: bad('array.buffers[1]: dictionary index -1 at 0 is outside the dictionary of length 3'),
  },
  {
    name: 'rejects a list view reaching outside its child (full)',
    fn: 'importArrayView',
    schema: listViewSchema,
    array: patch(listView(), { buffers: [null, I32(0, 2), I32(1, 5)] }),
    opts: FULL,
    expect: bad('array.buffers[1]: list view 1 (offset 2, size 5) is outside the child of length 3'),
  },
  {
    name: 'rejects a list view with a negative offset (full)',
    fn: 'importArrayView',
    schema: listViewSchema,
    array: patch(listView(), { buffers: [null, I32(-1, 0), I32(1, 1)] }),
    opts: FULL,
    expect: bad('array.buffers[1]: list view 0 (offset -1, size 1) is outside the child of length 3'),
  },
  // Every error path consumes the array: failures before the array is read.
  {
    name: 'releases the array when its schema pointer has an unknown format',
    fn: 'importData',
    schema: S('q'),
    array: i32(1, 2, 3),
    expect: bad('schema.format: unknown format "q"'),
  },
  {
    name: 'releases the array when its schema is already released',
    fn: 'importArrayView',
    schema: S('i', { released: true }),
    array: i32(1, 2, 3),
    expect: err('released', 'schema: the struct is released (release is NULL)'),
  },
  {
    name: 'releases the array when its record batch schema is not a struct',
    fn: 'importRecordBatch',
    schema: S('i'),
    array: i32(1, 2, 3),
    expect: bad('schema.format: a schema (record batch) must be a struct ("+s"), got "i"'),
  },
  {
    name: 'releases the array when arrow-js cannot represent its type',
    fn: 'importData',
    schema: listViewSchema,
    array: listView(),
    expect: err('unsupported', /^schema\.format: arrow-js has no list view type/),
  },
  {
    name: 'releases the array when the validation level is unknown',
    fn: 'importArrayView',
    schema: S('i'),
    array: i32(1, 2, 3),
    opts: { validate: 'bogus' as never },
    expect: bad('options.validate: unknown validation level "bogus"'),
  },
  // Accepted ---------------------------------------------------------------------------
  {
    name: 'accepts a NULL validity buffer with null_count 0',
    fn: 'importData',
    schema: S('i'),
    array: i32(1, 2, 3),
    opts: COPY,
    expect: 'accept',
    check: (d) => assert.deepEqual([...(d as { values: Int32Array }).values], [1, 2, 3]),
  },
  {
    name: 'accepts null_count -1 with a validity buffer',
    fn: 'importData',
    schema: S('i'),
    array: { length: 3, nullCount: -1, buffers: [bitmap(true, false, true), I32(1, 2, 3)] },
    opts: COPY,
    expect: 'accept',
    check: (d) => assert.equal((d as { length: number }).length, 3),
  },
  {
    name: 'accepts a null array with one legacy buffer',
    fn: 'importArrayView',
    schema: S('n'),
    array: { length: 3, nullCount: 3, buffers: [null] },
    opts: COPY,
    expect: 'accept',
    check: (v) => assert.equal((v as ArrayView).length, 3),
  },
  {
    name: 'accepts a null array with no buffers and a NULL buffers pointer',
    fn: 'importData',
    schema: S('n'),
    array: { length: 2, nullCount: 2 },
    opts: COPY,
    expect: 'accept',
  },
  {
    name: 'accepts an empty utf8 array with NULL offsets and data buffers',
    fn: 'importData',
    schema: S('u'),
    array: { length: 0, buffers: [null, null, null] },
    opts: COPY,
    expect: 'accept',
    check: (d) => assert.equal((d as { length: number }).length, 0),
  },
  {
    name: 'accepts a struct with a NULL validity buffer as a record batch',
    fn: 'importRecordBatch',
    schema: recordSchema,
    array: record(),
    opts: COPY,
    expect: 'accept',
    check: (b) => assert.equal((b as { numRows: number }).numRows, 3),
  },
  {
    name: 'accepts non-monotone utf8 offsets at the default level (full checks them)',
    fn: 'importArrayView',
    schema: S('u'),
    array: { length: 3, buffers: [null, I32(0, 3, 1, 4), bytes('abcd')] },
    opts: COPY,
    expect: 'accept',
  },
  { name: 'accepts a sliced utf8 array (full)', fn: 'importData', schema: S('u'), array: { length: 2, offset: 1, buffers: [null, I32(0, 1, 3, 6), bytes('abbccc')] }, opts: { ...FULL, copy: true }, expect: 'accept' },
  { name: 'accepts a list view (full)', fn: 'importArrayView', schema: listViewSchema, array: listView(), opts: { ...FULL, copy: true }, expect: 'accept' },
  { name: 'accepts a sparse union (full)', fn: 'importArrayView', schema: sparseSchema, array: sparse(), opts: { ...FULL, copy: true }, expect: 'accept' },
  { name: 'accepts a dense union (full)', fn: 'importArrayView', schema: denseSchema, array: dense(), opts: { ...FULL, copy: true }, expect: 'accept' },
  { name: 'accepts run-end encoded (full)', fn: 'importArrayView', schema: reeSchema, array: ree(), opts: { ...FULL, copy: true }, expect: 'accept' },
  { name: 'accepts a utf8 view with an out-of-line view (full)', fn: ARROW_21_2.Utf8View ? 'importData' : 'importArrayView', schema: S('vu'), array: viewArray(), opts: { ...FULL, copy: true }, expect: 'accept' },
  { name: 'accepts a dictionary-encoded array (full)', fn: 'importData', schema: dictSchema, array: dictArray(2, 0, 1), opts: { ...FULL, copy: true }, expect: 'accept' },
];

const tableCases: TableCase[] = [
  {
    name: 'importTable releases every array when the schema is malformed',
    fn: 'importTable',
    schema: struct(named('a', S('q'))),
    arrays: [{ length: 1, buffers: [null], children: [i32(1)] }, { length: 1, buffers: [null], children: [i32(2)] }],
    expect: bad('schema.children[0].format: unknown format "q"'),
  },
  {
    name: 'importTable releases every array when the second is malformed',
    fn: 'importTable',
    schema: recordSchema,
    arrays: [record(), patch(record(), { buffers: [null, null] }), record()],
    opts: COPY,
    expect: bad('arrays[1].n_buffers: type "+s" needs 1 buffer, got 2'),
  },
  {
    name: 'importTable releases the other arrays when the first pointer is NULL',
    fn: 'importTable',
    schema: recordSchema,
    arrays: [null, record(), record()],
    opts: COPY,
    expect: bad('arrays[0]: NULL pointer'),
  },
  {
    name: 'importTable does not release an array that was already released',
    fn: 'importTable',
    schema: recordSchema,
    arrays: [record(), { ...record(), released: true }, record()],
    opts: COPY,
    expect: err('released', 'arrays[1]: the struct is released (release is NULL)'),
  },
];

/**
 * Failures after the array was read, with zero-copy views already made of
 * its buffers. api.ts promises the release "on failure, at once"; a release
 * left to the garbage collector would come during a later test and upset its
 * accounting, so these run last.
 */
const lateCases: ArrayCase[] = [
  {
    name: 'releases the array at once when expanding run ends fails (default level)',
    fn: 'importData',
    schema: reeSchema,
    array: { length: 3, children: [i32(1, 2), i32(10, 20)] },
    opts: { expand: true },
    expect: bad('array.children[0]: no run covers element 2'),
  },
];

// --- running a case ---------------------------------------------------------------------

function call(c: Case, schemaPtr: bigint, arrayPtrs: bigint[]): unknown {
  switch (c.fn) {
    case 'importSchema': return importSchema(schemaPtr);
    case 'importField': return importField(schemaPtr);
    case 'importType': return importType(schemaPtr);
    case 'importSchemaNode': return importSchemaNode(schemaPtr);
    case 'importData': return importData(arrayPtrs[0]!, schemaPtr, c.opts);
    case 'importArrayView': return importArrayView(arrayPtrs[0]!, schemaPtr, c.opts);
    case 'importRecordBatch': return importRecordBatch(arrayPtrs[0]!, schemaPtr, c.opts);
    case 'importTable': return importTable(arrayPtrs, schemaPtr, c.opts);
  }
}

function describeError(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

function runCase(c: Case): void {
  const b = new Builder();
  const liveBefore = accounting().liveImports;
  const strayBefore = trackerProblems.strayCalls.length;
  const errorsBefore = trackerProblems.callbackErrors.length;
  try {
    const roots: { role: 'schema' | 'array'; built: Built }[] = [];
    let schemaPtr = 0n;
    if (c.schema !== null) {
      const s = b.schema(c.schema);
      roots.push({ role: 'schema', built: s });
      schemaPtr = s.ptr;
    }
    const arraySpecs = c.fn === 'importTable' ? c.arrays : 'array' in c ? [c.array] : [];
    const arrayPtrs = arraySpecs.map((a, i) => {
      if (a === null) return 0n;
      const built = b.array(a, c.fn === 'importTable' ? `arrays[${i}]` : 'array');
      roots.push({ role: 'array', built });
      return built.ptr;
    });

    let thrown: unknown;
    let result: unknown;
    try {
      result = call(c, schemaPtr, arrayPtrs);
    } catch (e) {
      thrown = e;
    }

    // The error: typed, of the expected kind, naming the place.
    if (c.expect === 'accept') {
      assert.equal(thrown, undefined, `expected the import to succeed, got ${describeError(thrown)}`);
      c.check?.(result);
    } else {
      assert.ok(thrown instanceof ArrowDeviceError, `expected an ArrowDeviceError, got ${thrown instanceof Error ? thrown.stack : describeError(thrown)}`);
      assert.equal(thrown.kind, c.expect.kind, `kind of: ${thrown.message}`);
      if (typeof c.expect.message === 'string') assert.equal(thrown.message, c.expect.message);
      else assert.match(thrown.message, c.expect.message);
      assert.notEqual(thrown.path, '', 'the error names a place');
      assert.equal(thrown.message, `${thrown.path}: ${thrown.detail}`);
    }

    // Releases: each live root exactly once (its release takes its tree along),
    // a released struct never, nothing twice, no child by the consumer directly.
    for (const { role, built } of roots) {
      const expected = built.root.due ? (c.releases?.[role] ?? 1) : 0;
      assert.equal(
        releaseCount(built.root.id),
        expected,
        `the release of ${built.root.label} ran ${built.root.calls} times, expected ${expected}`,
      );
      for (const r of built.records) {
        assert.ok(r.calls <= 1, `the release of ${r.label} ran ${r.calls} times`);
        assert.equal(r.calls, r.due ? expected : 0, `the release of ${r.label} ran ${r.calls} times, expected ${r.due ? expected : 0}`);
        if (r.parent) assert.equal(r.directCalls, 0, `the consumer called the release of child ${r.label} itself`);
      }
    }
    assert.equal(trackerProblems.strayCalls.length, strayBefore, 'a release callback was called on a struct the builder does not know');
    assert.deepEqual(trackerProblems.callbackErrors.slice(errorsBefore), [], 'errors inside the release callback');
    assert.equal(accounting().liveImports, liveBefore, 'liveImports is back where it was');
  } finally {
    b.freeAll();
  }
}

// --- the tests --------------------------------------------------------------------------

describe('malformed ArrowSchema', () => {
  for (const c of schemaCases) test(c.name, () => runCase(c));
});

describe('malformed ArrowArray', () => {
  for (const c of arrayCases) test(c.name, () => runCase(c));
});

describe('malformed input to importTable', () => {
  for (const c of tableCases) test(c.name, () => runCase(c));
});

describe('the builder', () => {
  test('counts one release per struct and releases children with the root', () => {
    const b = new Builder();
    try {
      const built = b.schema(struct(named('a', S('i')), named('b', S('i', { dictionary: S('u') }))));
      importSchemaNode(built.ptr);
      assert.equal(built.records.length, 4);
      for (const r of built.records) assert.equal(r.calls, 1, r.label);
      assert.equal(built.root.directCalls, 1);
      assert.ok(built.records.slice(1).every((r) => r.directCalls === 0));
    } finally {
      b.freeAll();
    }
  });

  test('has at least 100 malformed-input cases', () => {
    const rejects = [...schemaCases, ...arrayCases, ...tableCases, ...lateCases].filter((c) => c.expect !== 'accept');
    assert.ok(rejects.length >= 100, `${rejects.length} cases`);
  });
});

describe('failures after zero-copy views were made', () => {
  for (const c of lateCases) test(c.name, () => runCase(c));
});

// --- in a child process ------------------------------------------------------------------

describe('no malformed input takes the process down', () => {
  test('the nastiest cases end in typed errors and a normal exit', () => {
    const r = runChild(`
      import { Builder, md } from '@/test/cdata/malformed/builder.js';
      import { importArrayView, importField, importSchema, importData } from '@/src/array/api.js';
      import { ArrowDeviceError } from '@/src/errors.js';
      const b = new Builder();
      const out: { name: string; typed: boolean; message: string }[] = [];
      const attempt = (name: string, f: () => unknown): void => {
        try { f(); out.push({ name, typed: false, message: 'no error' }); }
        catch (e) { out.push({ name, typed: e instanceof ArrowDeviceError, message: (e as Error).message }); }
      };
      const deep = (n: number) => { let s: any = { format: 'i' }; for (let k = 0; k < n; k++) s = { format: '+l', children: [s] }; return s; };
      attempt('format at 0x10', () => importField(b.schema({ format: 'i', formatPtr: 0x10n }).ptr));
      attempt('format with no NUL', () => importField(b.schema({ format: 'x'.repeat(70000) }).ptr));
      attempt('1000 levels of nesting', () => importField(b.schema(deep(1000)).ptr));
      attempt('metadata key of 2^31-1 bytes', () => importField(b.schema({ format: 'i', metadata: md(1, 0x7fffffff) }).ptr));
      attempt('n_children 2^40', () => importSchema(b.schema({ format: '+s', nChildren: 1n << 40n }).ptr));
      attempt('released child', () => importSchema(b.schema({ format: '+s', children: [{ format: 'i', released: true }] }).ptr));
      attempt('buffers at 0x20', () => importArrayView(b.array({ length: 1, buffers: [null, new Int32Array(1)], buffersPtr: 0x20n }).ptr, b.schema({ format: 'i' }).ptr));
      attempt('values at 0x30', () => importData(b.array({ length: 3, buffers: [null, 0x30n] }).ptr, b.schema({ format: 'i' }).ptr, { copy: true }));
      attempt('length 2^60', () => importData(b.array({ length: 1n << 60n, buffers: [null, new Int32Array(1)] }).ptr, b.schema({ format: 'i' }).ptr, { copy: true }));
      attempt('offset 2^62', () => importData(b.array({ length: 1, buffers: [null, new BigInt64Array([0n, 1n << 62n]), new Uint8Array(1)] }).ptr, b.schema({ format: 'U' }).ptr, { copy: true }));
      attempt('variadic size -1', () => importArrayView(b.array({ length: 1, buffers: [null, new Uint8Array(16), new Uint8Array(1), new BigInt64Array([-1n])] }).ptr, b.schema({ format: 'vu' }).ptr));
      console.log(JSON.stringify(out));
      b.freeAll();
    `);
    assert.equal(r.signal, null, `the child died with ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { name: string; typed: boolean; message: string }[];
    assert.equal(out.length, 11);
    for (const o of out) {
      assert.ok(o.typed, `${o.name}: ${o.message}`);
      assert.match(o.message, /^(schema|array)[.:[]/, `${o.name}: ${o.message}`);
    }
  });

  test('a utf8 view array with n_buffers 2^40 ends in a typed error, not a crash', () => {
    // Only a bound on n_buffers can keep the import from reading buffers[n_buffers - 1],
    // 8 TiB past the buffers array (the schema side bounds n_children the same way).
    const r = runChild(`
      import { Builder } from '@/test/cdata/malformed/builder.js';
      import { importArrayView } from '@/src/array/api.js';
      const b = new Builder();
      const a = b.array({ length: 1, buffers: [null, new Uint8Array(16), null], nBuffers: 1n << 40n });
      try { importArrayView(a.ptr, b.schema({ format: 'vu' }).ptr); console.log('no error'); }
      catch (e) { console.log('caught', (e as Error).message); }
      b.freeAll();
    `);
    assert.equal(r.signal, null, `the child died with ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /caught array\.n_buffers: /);
  });
});
