/**
 * The apache-arrow versions the peer range allows (package.json: >=21.0.0).
 * 21.2.0 added the BinaryView, Utf8View and LargeList types; under 21.0 and
 * 21.1 the library still loads (it reads those three off the module
 * namespace: src/schema/arrowjs.ts, `ARROW_21_2`), their data imports as
 * `ArrayView`s, and their conversion to arrow-js is a typed `unsupported`
 * error that names the version they need. Everything else works the same:
 * npm test runs this file on the devDependency's 21.2, and
 * tools/test-arrow-oldest.mjs runs it, with the core selection, on 21.0.0.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as arrow from 'apache-arrow';
import { tableFromArrays } from 'apache-arrow';
import {
  accounting, ArrowDeviceError, exportArray, exportRecordBatch, exportSchema, freeArrowArray, freeArrowSchema, importArrayView, importRecordBatch, importSchema,
  importType, parseFormat, type ArrayView, type SchemaNode,
} from '../../src/index.js';
import { ARROW_21_2 } from '../../src/schema/arrowjs.js';
import { collectUntil } from '../helpers/gc.js';

/** The version of the apache-arrow this process resolved (its package.json, found from the module's file). */
function arrowVersion(): string {
  const at = fileURLToPath(import.meta.resolve('apache-arrow'));
  const dir = at.slice(0, at.lastIndexOf('apache-arrow') + 'apache-arrow'.length);
  return (JSON.parse(readFileSync(`${dir}/package.json`, 'utf8')) as { version: string }).version;
}

const version = arrowVersion();
const [major, minor] = version.split('.').map(Number) as [number, number];
const has212 = major > 21 || (major === 21 && minor >= 2);

const node = (format: string, children: SchemaNode[] = []): SchemaNode => ({ format, type: parseFormat(format), name: 'x', metadata: null, flags: 2, children, dictionary: null });

/** A schema of each type apache-arrow 21.2.0 added, with one-row data of it as an ArrayView. */
const ADDED: [string, keyof typeof ARROW_21_2, SchemaNode, () => ArrayView][] = (() => {
  const i32 = node('i');
  // A view of 'ab', inline: length 2, then the bytes (Columnar.rst, "Variable-size Binary View Layout").
  const view = (): Uint8Array => {
    const v = new Uint8Array(16);
    new DataView(v.buffer).setInt32(0, 2, true);
    v.set([97, 98], 4);
    return v;
  };
  const viewArray = (schema: SchemaNode) => (): ArrayView => ({ schema, length: 1, offset: 0, nullCount: 0, buffers: [null, view(), new Uint8Array(new BigInt64Array(0).buffer)], children: [], dictionary: null });
  const largeList = node('+L', [i32]);
  return [
    ['binary view', 'BinaryView', node('vz'), viewArray(node('vz'))],
    ['utf8 view', 'Utf8View', node('vu'), viewArray(node('vu'))],
    [
      'large list',
      'LargeList',
      largeList,
      () => ({
        schema: largeList,
        length: 1,
        offset: 0,
        nullCount: 0,
        buffers: [null, new Uint8Array(BigInt64Array.of(0n, 2n).buffer)],
        children: [{ schema: i32, length: 2, offset: 0, nullCount: 0, buffers: [null, new Uint8Array(Int32Array.of(5, 6).buffer)], children: [], dictionary: null }],
        dictionary: null,
      }),
    ],
  ];
})();

test(`the library's view of apache-arrow ${version} is the module's: the 21.2.0 types present exactly from 21.2.0 on`, (t) => {
  t.diagnostic(`apache-arrow ${version} from ${import.meta.resolve('apache-arrow')}`);
  for (const [, name] of ADDED) {
    assert.equal(ARROW_21_2[name], (arrow as Record<string, unknown>)[name], `${name}: the namespace's own`);
    assert.equal(ARROW_21_2[name] !== undefined, has212, `${name} present in ${version}`);
  }
});

for (const [what, name, schema, data] of ADDED) {
  test(`${what}: an arrow-js ${name} from 21.2.0 on, before it an unsupported error naming 21.2.0; as an ArrayView on every version`, () => {
    const s = exportSchema(schema);
    if (has212) {
      // arrow-js's type of that name (its Type enum names each type as its class).
      const got = importType(s);
      assert.ok(got instanceof ARROW_21_2[name]!, `a ${name}`);
      assert.equal(got.typeId, (arrow.Type as unknown as Record<string, number>)[name]);
    } else {
      assert.throws(
        () => importType(s),
        (e: unknown) =>
          e instanceof ArrowDeviceError && e.kind === 'unsupported' && e.path === 'schema.format' &&
          e.message.includes(`arrow-js has a ${name} type from apache-arrow 21.2.0 on`) && e.message.includes('import the data as an ArrayView'),
      );
    }
    freeArrowSchema(s);
    // The data, whatever the arrow-js: an ArrayView round trip with full validation.
    const s2 = exportSchema(schema);
    const a = exportArray(data());
    const back = importArrayView(a, s2, { validate: 'full' });
    freeArrowArray(a);
    freeArrowSchema(s2);
    assert.equal(back.length, 1);
    assert.equal(back.schema.format, schema.format);
  });
}

test(`every other type works on apache-arrow ${version}: a batch of several round trips through arrow-js; nothing leaked`, async () => {
  const t = tableFromArrays({ i: Int32Array.of(1, 2), f: Float64Array.of(0.5, 1.5), s: ['a', null], b: [true, false] });
  const { schema, array } = exportRecordBatch(t.batches[0]!);
  const back = importRecordBatch(array, schema, { validate: 'full' });
  freeArrowArray(array);
  freeArrowSchema(schema);
  assert.deepEqual(back.toArray().map((r) => r.toJSON()), t.batches[0]!.toArray().map((r) => r.toJSON()));
  back.release();
  const s = exportSchema(t.schema);
  assert.deepEqual(importSchema(s).fields.map(String), t.schema.fields.map(String));
  freeArrowSchema(s);
  // The ArrayViews above hold their exports until they are collected.
  assert.ok(await collectUntil(() => accounting().liveExports === 0 && accounting().liveImports === 0), `nothing live: ${JSON.stringify(accounting())}`);
});
