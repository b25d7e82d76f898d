/**
 * A schema read from a pointer is compared with the image of the last one
 * read (src/schema/node.ts `SchemaImage`, `readSharedSchema`)
 * before it is read into a node. These tests prove the comparison
 * equivalent to the full read: every schema, read right after one that
 * differs from it in one place, gives what a read with no image behind it
 * gives (the same content, or the same error), and one equal in content
 * gives the node read before.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { importSchemaNode, nativeMemory, type SchemaNode } from '../../src/index.js';
import { Builder, md, type SchemaSpec } from '../cdata/malformed/builder.js';

const b = new Builder();
afterEach(() => b.freeAll());

/** A record batch schema with a name, metadata, flags, a nested child and a dictionary. */
function base(): SchemaSpec {
  return {
    format: '+s',
    name: '',
    metadata: md(1, 1, 'k', 1, 'v'),
    children: [
      { format: 'i', name: 'a', flags: 2 },
      { format: '+l', name: 'b', flags: 2, children: [{ format: 'u', name: 'item', flags: 2 }] },
      { format: 'i', name: 'c', dictionary: { format: 'u', name: null } },
    ],
  };
}

/** Something else, read to leave an image that is not the base's. */
const other = (): SchemaSpec => ({ format: '+s', name: 'other', children: [{ format: 'g', name: 'x' }] });

type Outcome = { node: SchemaNode } | { error: string };

function read(spec: SchemaSpec): Outcome {
  try {
    return { node: importSchemaNode(b.schema(spec).ptr) };
  } catch (e) {
    return { error: `${(e as { kind?: string }).kind}: ${(e as Error).message}` };
  }
}

/** What a schema gives read after `other` (no image of its content) and right after `base`. */
function bothWays(spec: SchemaSpec): { cold: Outcome; afterBase: Outcome; baseNode: SchemaNode } {
  read(other());
  const cold = read(spec);
  // The base read in full after something else, so that the last image is the base's.
  read(other());
  const first = read(base());
  assert.ok('node' in first);
  const afterBase = read(spec);
  return { cold, afterBase, baseNode: first.node };
}

/** A node's content, for comparison (the parsed type included). */
function content(n: SchemaNode): unknown {
  return {
    format: n.format,
    type: n.type,
    name: n.name,
    metadata: n.metadata === null ? null : [...n.metadata],
    flags: n.flags,
    children: n.children.map(content),
    dictionary: n.dictionary === null ? null : content(n.dictionary),
  };
}

function assertSame(cold: Outcome, afterBase: Outcome): void {
  if ('error' in cold) assert.deepEqual(afterBase, cold);
  else {
    assert.ok('node' in afterBase, `read after the base failed: ${'error' in afterBase ? afterBase.error : ''}`);
    assert.deepEqual(content(afterBase.node), content(cold.node));
  }
}

describe('a schema compared with the image of the last one read', () => {
  test('equal in content at another address: the node read before, as the full read finds it', () => {
    const { cold, afterBase, baseNode } = bothWays(base());
    assert.ok('node' in cold && 'node' in afterBase);
    assert.equal(afterBase.node, baseNode);
    assert.equal(cold.node, baseNode, 'an equal schema shares its node either way');
  });

  const variants: [string, (s: SchemaSpec) => void][] = [
    ['a name one byte longer', (s) => void (s.children![0]!.name = 'aa')],
    ['a name changed', (s) => void (s.children![0]!.name = 'z')],
    ['a NULL name for an empty one', (s) => void (s.name = null)],
    ['an empty name for a NULL one', (s) => void (s.children![2]!.dictionary!.name = '')],
    ['a format changed', (s) => void (s.children![0]!.format = 'l')],
    ['a deeper format changed', (s) => void (s.children![1]!.children![0]!.format = 'U')],
    ['the flags changed', (s) => void (s.children![0]!.flags = 0)],
    ['a metadata value changed', (s) => void (s.metadata = md(1, 1, 'k', 1, 'w'))],
    ['a metadata pair added', (s) => void (s.metadata = md(2, 1, 'k', 1, 'v', 1, 'x', 0))],
    ['no metadata', (s) => void delete s.metadata],
    ['a child fewer', (s) => void s.children!.pop()],
    ['a child more', (s) => void s.children!.push({ format: 'n', name: 'd' })],
    ['no dictionary', (s) => void delete s.children![2]!.dictionary],
    ['a dictionary where there was none', (s) => void (s.children![0]!.dictionary = { format: 'u' })],
    ['a child released', (s) => void (s.children![1]!.released = true)],
    ['a grandchild released', (s) => void (s.children![1]!.children![0]!.released = true)],
    ['the root released', (s) => void (s.released = true)],
    ['unknown flag bits', (s) => void (s.children![0]!.flags = 2 + 64)],
    ['flags past 32 bits', (s) => void (s.children![0]!.flags = 2n + (1n << 40n))],
    ['a NULL format', (s) => void (s.children![0]!.format = null)],
    ['a format that does not parse', (s) => void (s.children![0]!.format = 'q')],
    ['malformed metadata (a negative count)', (s) => void (s.metadata = md(-1))],
    ['metadata whose key runs past its end', (s) => void (s.metadata = md(1, 1000, 'k'))],
    ['a NULL child pointer', (s) => void (s.children![0] = null)],
    ['a negative child count', (s) => void (s.nChildren = -1)],
    ['a union whose type ids do not match its children', (s) => void (s.children![1] = { format: '+us:0,1', name: 'b', children: [{ format: 'i' }] })],
  ];
  for (const [what, change] of variants) {
    test(`${what}: what the full read gives`, () => {
      const spec = base();
      change(spec);
      const { cold, afterBase, baseNode } = bothWays(spec);
      assertSame(cold, afterBase);
      if ('node' in afterBase) assert.notEqual(afterBase.node, baseNode, 'a different schema is not the base node');
    });
  }

  test('a struct reached twice (two children at one address, equal in content to the last schema): refused as the full read refuses it', () => {
    const twin: SchemaSpec = { format: '+s', children: [{ format: 'i', name: 'a' }, { format: 'i', name: 'a' }] };
    const mem = nativeMemory();
    const aliased = (): SchemaSpec => {
      const child = b.schema({ format: 'i', name: 'a' }, 'child').ptr;
      const kids = b.alloc(2 * mem.target.pointerSize);
      mem.writePtr(kids, child);
      mem.writePtr(kids + BigInt(mem.target.pointerSize), child);
      return { format: '+s', children: [], childrenPtr: kids, nChildren: 2 };
    };
    read(other());
    const cold = read(aliased());
    assert.ok('error' in cold && /reached a second time/.test(cold.error), JSON.stringify(cold));
    assert.ok('node' in read(twin));
    // The same refusal (the message names the address, which differs from build to build).
    const after = read(aliased());
    const place = (o: Outcome): string => ('error' in o ? o.error.replace(/0x[0-9a-f]+/, '0x…') : 'a node');
    assert.equal(place(after), place(cold));
  });
});
