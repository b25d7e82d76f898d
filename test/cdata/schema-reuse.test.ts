/**
 * Schemas read again and exported again without being built again.
 *
 * Import: a producer that hands a new `ArrowSchema` with every array gets,
 * for a schema equal to one read before, that node (src/array/plan.ts
 * `sharedNode`), and so its plan. Each test below reads a schema that
 * differs from the last one read in one thing, and checks that the outcome
 * (the node, or the error) is the one a read with nothing to reuse gives:
 * were any difference missed, the primed read would return the previous
 * node and the two outcomes would differ.
 *
 * Export: a schema's encoding is made once per plan, and an arrow-js
 * Schema's node once while its metadata maps hold what they held
 * (src/array/plan.ts): changing a map must change what is exported.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Field, Int32, List, Schema, Struct, Utf8 } from 'apache-arrow';
import { exportSchema, importSchema, importSchemaNode } from '../../src/array/api.js';
import { freeArrowSchema } from '../../src/array/api.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { nativeMemory } from '../../src/memory/index.js';
import { Builder, md, releaseCount, type SchemaSpec } from './malformed/builder.js';

const S = (format: string, extra: Partial<SchemaSpec> = {}): SchemaSpec => ({ format, ...extra });

/** A schema with a bit of everything a struct holds: names, flags, metadata, nesting, a dictionary. */
function base(): SchemaSpec {
  return S('+s', {
    name: '',
    metadata: md(1, 1, 'k', 1, 'v'),
    children: [
      S('i', { name: 'a', flags: 2 }),
      S('+l', { name: 'bb', flags: 2, metadata: md(1, 1, 'x', 2, 'yz'), children: [S('u', { name: 'item', flags: 2 })] }),
      S('c', { name: 'c', flags: 2, dictionary: S('u', { flags: 2 }) }),
    ],
  });
}

/** `base()` changed by `edit` (which may mutate the copy it is given). */
function variant(edit: (s: SchemaSpec & { children: SchemaSpec[] }) => void): SchemaSpec {
  const s = base() as SchemaSpec & { children: SchemaSpec[] };
  edit(s);
  return s;
}

const mem = nativeMemory();

/** `text` and its NUL in an allocation too large for a slab (C-allocated), freed with the builder's. */
function cString(b: Builder, text: string): bigint {
  const block = b.alloc(16 * 1024);
  const at = block + 12_000n;
  mem.copyIn(at, new TextEncoder().encode(`${text}\0`));
  return at;
}

/** `spec` with every format and name written in C-allocated memory. */
function inC(b: Builder, spec: SchemaSpec): SchemaSpec {
  const out: SchemaSpec = { ...spec };
  if (typeof spec.format === 'string') out.formatPtr = cString(b, spec.format);
  if (typeof spec.name === 'string') out.namePtr = cString(b, spec.name);
  if (spec.children) out.children = spec.children.map((c) => c && inC(b, c));
  if (spec.dictionary) out.dictionary = inC(b, spec.dictionary);
  return out;
}

type Outcome = { node: unknown } | { error: string };

/** Imports a fresh build of `spec` as a SchemaNode; checks the producer's release ran once. */
function read(b: Builder, spec: SchemaSpec): Outcome {
  const built = b.schema(spec);
  let out: Outcome;
  try {
    out = { node: importSchemaNode(built.ptr) };
  } catch (e) {
    assert.ok(e instanceof ArrowDeviceError, `a typed error, got ${String(e)}`);
    out = { error: e.message };
  }
  assert.equal(releaseCount(built.root.id), built.root.due ? 1 : 0, 'the schema is released once');
  return out;
}

const variants: [string, SchemaSpec][] = [
  ['a name one byte longer', variant((s) => (s.children[0]!.name = 'ab'))],
  ['a name one byte shorter', variant((s) => (s.children[1]!.name = 'b'))],
  ['a name with its last byte changed', variant((s) => (s.children[1]!.name = 'bc'))],
  ['an empty name made NULL', variant((s) => (s.name = null))],
  ['a NULL name made empty', variant((s) => (s.children[2]!.dictionary!.name = ''))],
  ['a format changed deep down', variant((s) => (s.children[1]!.children![0]!.format = 'U'))],
  ['a format made longer (invalid)', variant((s) => (s.children[0]!.format = 'ii'))],
  ['a format made NULL', variant((s) => (s.children[0]!.format = null))],
  ['nullability dropped', variant((s) => (s.children[0]!.flags = 0))],
  ['an unknown flag bit above 32', variant((s) => (s.children[0]!.flags = 2n | (1n << 40n)))],
  ['a metadata value changed', variant((s) => (s.metadata = md(1, 1, 'k', 1, 'w')))],
  ['a metadata value longer', variant((s) => (s.children[1]!.metadata = md(1, 1, 'x', 3, 'yzz')))],
  ['a metadata pair more', variant((s) => (s.metadata = md(2, 1, 'k', 1, 'v', 1, 'l', 0)))],
  ['metadata made NULL', variant((s) => delete s.metadata)],
  ['metadata with no pairs', variant((s) => (s.metadata = md(0)))],
  ['metadata with a negative key length', variant((s) => (s.metadata = md(1, -1)))],
  ['a child fewer', variant((s) => s.children.pop())],
  ['n_children one less than the children', variant((s) => (s.nChildren = 2))],
  ['a child made NULL', variant((s) => (s.children[1] = null as unknown as SchemaSpec))],
  ['a child released', variant((s) => (s.children[1]!.released = true))],
  ['a released child deep down', variant((s) => (s.children[1]!.children![0]!.released = true))],
  ['the dictionary dropped', variant((s) => delete s.children[2]!.dictionary)],
  ['the dictionary of another type', variant((s) => (s.children[2]!.dictionary = S('i', { flags: 2 })))],
  ['a dictionary added', variant((s) => (s.children[0]!.dictionary = S('u')))],
  ['the root released', variant((s) => (s.released = true))],
];

describe('a schema read again reuses the node only when every byte matches', () => {
  test('the same schema read twice gives the same node (the reuse the tests below probe is there)', () => {
    const b = new Builder();
    try {
      const first = read(b, base());
      const again = read(b, base());
      assert.ok('node' in first && 'node' in again);
      assert.equal(again.node, first.node);
    } finally {
      b.freeAll();
    }
  });

  for (const [what, spec] of variants) {
    test(`${what}: the same outcome as a read with nothing to reuse`, () => {
      const b = new Builder();
      try {
        read(b, base()); // primes: the base node is the last read
        const primed = read(b, spec);
        read(b, S('n')); // something unrelated is the last read now
        const fresh = read(b, spec);
        assert.deepEqual(primed, fresh);
        if ('node' in primed) assert.notDeepEqual(primed.node, (read(b, base()) as { node: unknown }).node, 'the variant differs from the base');
      } finally {
        b.freeAll();
      }
    });
  }

  // The Builder's small allocations are JS-readable slabs (src/memory/slab.ts), compared in place;
  // strings in memory the C allocator handed out are compared through the FFI (strnlen, then a copy).
  for (const [what, spec] of variants.slice(0, 8)) {
    test(`${what}, the strings in C-allocated memory: the same outcome as a read with nothing to reuse`, () => {
      const b = new Builder();
      try {
        read(b, inC(b, base()));
        const primed = read(b, inC(b, spec));
        read(b, S('n'));
        const fresh = read(b, inC(b, spec));
        assert.deepEqual(primed, fresh);
      } finally {
        b.freeAll();
      }
    });
  }

  test('a name of a byte order mark is read as it is, and reused only for the same bytes', () => {
    const bom = new Uint8Array([0xef, 0xbb, 0xbf]);
    const twice = new Uint8Array([...bom, ...bom]);
    const b = new Builder();
    try {
      const withName = (name: Uint8Array): SchemaSpec => S('+s', { name: '', children: [S('i', { name, flags: 2 })] });
      const nameOf = (o: Outcome): unknown => ('node' in o ? (o.node as { children: { name: string }[] }).children[0]!.name : o.error);
      // A decoder that drops a leading BOM would read "\uFEFF" twice as one, and one as "".
      assert.equal(nameOf(read(b, withName(twice))), '\uFEFF\uFEFF');
      const primed = read(b, withName(bom)); // right after the two-mark name was read
      read(b, S('n'));
      const fresh = read(b, withName(bom));
      assert.deepEqual(primed, fresh);
      assert.equal(nameOf(fresh), '\uFEFF');
    } finally {
      b.freeAll();
    }
  });

  test('a child reached twice (a DAG) is refused after the tree it imitates was read', () => {
    const b = new Builder();
    try {
      read(b, base());
      // base with children[1] pointing at children[0]'s struct: "a" twice.
      const dag = variant((s) => (s.children[1] = S('i', { name: 'a', flags: 2 })));
      const built = b.schema(dag);
      const L = mem.layouts.ArrowSchema;
      const kids = mem.readPtr(built.ptr + BigInt(L.offsets.children!));
      // Prime with a tree of the DAG's unfolded content, then hand the DAG.
      read(b, dag);
      mem.writePtr(kids + 8n, mem.readPtr(kids));
      assert.throws(() => importSchemaNode(built.ptr), (e: unknown) => e instanceof ArrowDeviceError && /reached a second time/.test(e.message));
    } finally {
      b.freeAll();
    }
  });
});

describe('a schema exported again', () => {
  test('follows changes to the metadata maps of the schema, its fields and their children', () => {
    const item = new Field('item', new Utf8(), true);
    const inner = new Field('inner', new Int32(), true);
    const schema = new Schema(
      [new Field('l', new List(item), true), new Field('s', new Struct([inner]), true)],
      new Map([['k', 'v']]),
    );
    const roundTrip = (): Schema => {
      const p = exportSchema(schema);
      try {
        return importSchema(p);
      } finally {
        freeArrowSchema(p);
      }
    };
    const mdOf = (s: Schema): unknown[] => [
      [...s.metadata],
      [...s.fields[0]!.metadata],
      [...(s.fields[0]!.type as List).children[0]!.metadata],
      [...(s.fields[1]!.type as Struct).children[0]!.metadata],
    ];
    assert.deepEqual(mdOf(roundTrip()), [[['k', 'v']], [], [], []]);
    schema.metadata.set('k', 'w');
    assert.deepEqual(mdOf(roundTrip()), [[['k', 'w']], [], [], []], 'a schema metadata value changed');
    schema.fields[0]!.metadata.set('f', '1');
    assert.deepEqual(mdOf(roundTrip()), [[['k', 'w']], [['f', '1']], [], []], 'a field got metadata');
    item.metadata.set('i', '2');
    assert.deepEqual(mdOf(roundTrip()), [[['k', 'w']], [['f', '1']], [['i', '2']], []], 'a list item field got metadata');
    inner.metadata.set('j', '3');
    assert.deepEqual(mdOf(roundTrip()), [[['k', 'w']], [['f', '1']], [['i', '2']], [['j', '3']]], 'a struct child got metadata');
    schema.metadata.delete('k');
    assert.deepEqual(mdOf(roundTrip()), [[], [['f', '1']], [['i', '2']], [['j', '3']]], 'a key deleted');
    // Same size, same keys, another order: the exported bytes follow the order.
    inner.metadata.set('z', '4');
    inner.metadata.delete('j');
    inner.metadata.set('j', '3');
    assert.deepEqual(mdOf(roundTrip())[3], [['z', '4'], ['j', '3']], 'keys reordered');
  });
});
