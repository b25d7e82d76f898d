/**
 * Zero rows, every type, every export route. A zero-length array is valid
 * everywhere in the C Data Interface (CDataInterface.rst, "The ArrowArray
 * structure": no field requires length > 0; a buffer whose size would be 0
 * may be NULL) and a stream may end before its first array
 * (CStreamInterface.rst, `get_next`: a released array is the end).
 *
 * The types are those of the gold files (test/helpers/gold.ts), each as the
 * zero-row tables arrow-js makes in its several ways:
 * - `no batches`: `new Table(schema)`, which holds no batch at all;
 * - `sliced`: `table.slice(0, 0)`, a batch of zero-length slices of real data;
 * - `columns`: `new Table({ name: vector, ... })` of empty vectors, the path of
 *   `tableFromArrays({ id: new Int32Array(0) })`: arrow-js's one-argument
 *   `RecordBatch` constructor stores the column Vectors as the struct's
 *   children (src/array/arrowjs.ts, `childData`);
 * - `columns of two chunks`: the same with each column two empty chunks, which
 *   the exporter joins into one array;
 * - `built`: each column an empty `Data` from arrow-js's builder.
 * The two types arrow-js has none of (list view, run-end encoded) go through
 * the routes that carry `ArrayView`s, from the gold JSON's schemas.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  Field, makeBuilder, makeData, RecordBatch, Schema, Struct, Table, tableFromArrays, tableFromIPC, type Builder, type Data, type Vector,
} from 'apache-arrow';
import {
  accounting, ArrowDeviceError, arrowExportable, createAsyncDeviceStreamReader, dataToView, exportArray, exportArrayStream, exportDeviceArray,
  exportDeviceArrayStream, exportDeviceRecordBatch, exportRecordBatch, exportSchema, exportTable, freeArrowArray, freeArrowArrayStream,
  freeArrowSchema, freeDeviceArray, freeArrowDeviceArrayStream, importArrayStream, importArrayView, importDeviceArrayStream,
  importDeviceArrayView, importDeviceData, importDeviceRecordBatch, importRecordBatch, importShared, importTable, importVector, produceAsyncDeviceStream, share,
  type ArrayExportable, type ArrayView, type ImportedTable, type SchemaNode,
} from '../../src/index.js';
import { readIntegrationJsonFile } from '../../tools/integration/json.js';
import { emptyBatch } from '../../tools/conformance-lib.js';
import { diffTables, fieldString, typeString, type Tabular } from '../helpers/compare.js';
import { collectUntil } from '../helpers/gc.js';
import { ARROW_JS_UNREADABLE, GOLD, goldFiles, goldSkip } from '../helpers/gold.js';

const full = { validate: 'full' } as const;

async function settle(): Promise<void> {
  const ok = await collectUntil(() => accounting().liveImports === 0 && accounting().liveExports === 0 && accounting().liveHandles === 0);
  assert.ok(ok, `accounting back to zero: ${JSON.stringify(accounting())}`);
}

/** The schema of a gold table as its batches' data says (arrow-js's `table.schema` is wrong for repeated names). */
function schemaOf(t: Table): Schema {
  const first = t.batches[0];
  return first ? new Schema((first.data.type as Struct).children, t.schema.metadata) : t.schema;
}

/** An empty `Data` of a type, from arrow-js's builder (every child and dictionary the type needs). */
function built(f: Field): Data {
  return (makeBuilder({ type: f.type }) as Builder).finish().flush();
}

/** The zero-row tables of one schema, by name (see the header). */
function zeroRowTables(gold: Table): [string, Table][] {
  const schema = schemaOf(gold);
  const names = schema.fields.map((f) => f.name);
  const unique = new Set(names).size === names.length && names.every((n) => !/^\d+$/.test(n));
  // `new Table({...})` is keyed by name: repeated (or integer-like, reordered) names take a table per column.
  const byColumns = (col: (i: number) => Vector): Table[] =>
    unique
      ? [new Table(Object.fromEntries(names.map((n, i) => [n, col(i)])))]
      : names.map((n, i) => new Table({ [n]: col(i) }));
  const out: [string, Table][] = [
    ['no batches', new Table(schema)],
    ['sliced', gold.slice(0, 0)],
    ...byColumns((i) => gold.getChildAt(i)!.slice(0, 0)).map((t, k): [string, Table] => [`columns ${k}`, t]),
    // A column of two empty chunks stays a Vector of two: the exporter joins them (arrow-js's builder).
    ...byColumns((i) => {
      const e = gold.getChildAt(i)!.slice(0, 0);
      return e.concat(e);
    }).map((t, k): [string, Table] => [`columns of two chunks ${k}`, t]),
    [
      'built',
      new Table([new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 0, nullCount: 0, children: schema.fields.map(built) }))]),
    ],
  ];
  for (const [form, t] of out) {
    assert.equal(t.numRows, 0, `${form}: zero rows`);
    if (form.startsWith('columns')) {
      // The shape this suite is about: if arrow-js stops making it, the form proves nothing new.
      assert.ok(t.batches.every((b) => b.data.children.every((c) => !Array.isArray((c as Data).children))), `${form}: children are Vectors`);
    }
  }
  return out;
}

/** Asserts that `back` is `expected`: same fields (types, names, metadata), zero rows, the same batch count when asked. */
function same(back: Table | RecordBatch, expected: Table | RecordBatch, what: string, batches?: number): void {
  assert.equal(back.numRows, 0, `${what}: zero rows`);
  // A batch compared by its data's struct type: arrow-js's `batch.schema` is wrong for repeated names.
  const tabular = (x: Table | RecordBatch): Tabular =>
    x instanceof Table ? x : { schema: new Schema((x.data.type as Struct).children, x.schema.metadata), numRows: x.numRows, numCols: x.numCols, getChildAt: (i) => x.getChildAt(i) };
  assert.equal(diffTables(tabular(back), tabular(expected)), undefined, what);
  if (batches !== undefined) assert.equal((back as Table).batches.length, batches, `${what}: batches`);
  for (const b of back instanceof Table ? back.batches : [back]) {
    assert.equal(b.data.length, 0, `${what}: a batch of length 0`);
    // Every column as arrow-js reads it: an empty array of its values.
    for (let i = 0; i < b.numCols; i++) assert.deepEqual(b.getChildAt(i)!.toArray().length, 0, `${what}: column ${i}`);
  }
}

/** Every synchronous export route, each imported back with full validation and compared. */
function everySyncRoute(t: Table, form: string): void {
  const n = t.batches.length;
  // exportTable -> importTable
  {
    const { schema, arrays } = exportTable(t);
    assert.equal(arrays.length, n);
    const back = importTable(arrays, schema, full);
    for (const p of arrays) freeArrowArray(p);
    freeArrowSchema(schema);
    same(back, t, `${form}: exportTable`, n);
    back.release();
  }
  // exportArrayStream -> importArrayStream: a table of no batches is a stream of no batches.
  {
    const p = exportArrayStream(t);
    const back = importArrayStream(p, full).toTable();
    freeArrowArrayStream(p);
    same(back, t, `${form}: exportArrayStream`, n);
    back.release();
  }
  {
    const p = exportDeviceArrayStream(t);
    const back = importDeviceArrayStream(p, { ...full, toHost: true }).toTable();
    freeArrowDeviceArrayStream(p);
    same(back, t, `${form}: exportDeviceArrayStream`, n);
    back.release();
  }
  // The exchange protocol: a table's stream, a batch's array and device array.
  {
    const back = importTable(arrowExportable(t), full);
    same(back, t, `${form}: arrowExportable(table)`, n);
    back.release();
  }
  // share -> importShared (this thread: the same mechanism another thread uses). A handle carries
  // its arrays' references and no schema of its own (PROTOCOL.md, the share format), so a table of
  // no batches is refused, saying what to do; one empty batch is shared as any batch.
  if (n === 0) {
    assert.throws(() => share(t), (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'invalid' && /a table with no arrays: nothing to share/.test(e.message));
  } else {
    const back = importShared(share(t), full) as ImportedTable;
    same(back, t, `${form}: share`, n);
    back.release();
  }
  for (const b of t.batches) {
    {
      const { schema, array } = exportRecordBatch(b);
      const back = importRecordBatch(array, schema, full);
      freeArrowArray(array);
      freeArrowSchema(schema);
      same(back, b, `${form}: exportRecordBatch`);
      back.release();
    }
    {
      const { schema, array } = exportDeviceRecordBatch(b);
      const back = importDeviceRecordBatch(array, schema, { ...full, toHost: true });
      freeDeviceArray(array);
      freeArrowSchema(schema);
      same(back, b, `${form}: exportDeviceRecordBatch`);
      back.release();
    }
    {
      using back = importRecordBatch(arrowExportable(b), full);
      same(back, b, `${form}: arrowExportable(batch)`);
    }
    {
      const back = importDeviceRecordBatch(arrowExportable(b), { ...full, toHost: true });
      same(back, b, `${form}: arrowExportable(batch), c_device_array`);
      back.release();
    }
    // An ArrayView of the batch, exported as a view.
    {
      const view = dataToView(b.data);
      const schema = exportSchema(b.schema);
      const array = exportArray(view);
      const back = importArrayView(array, schema, full);
      freeArrowArray(array);
      freeArrowSchema(schema);
      assert.equal(back.length, 0, `${form}: ArrayView`);
      assert.equal(back.children.length, b.numCols, `${form}: ArrayView children`);
      for (const c of back.children) assert.equal(c.length, 0, `${form}: ArrayView child`);
    }
    // Each column alone: exportArray, exportDeviceArray and arrowExportable of its Vector, each read back
    // by the column's own type (arrow-js's batch.schema, and the struct type of a batch it rebuilt from
    // it, are wrong for repeated names: gold case duplicate_fieldnames).
    for (let i = 0; i < b.numCols; i++) {
      const v = b.getChildAt(i)!;
      const what = `${form}: column ${i}`;
      if (v.data.length !== 1) {
        // A column of two chunks is two arrays, as it is at any length: the batch above was one.
        assert.throws(() => exportArray(v), /a Vector of 2 chunks is not one array/);
        continue;
      }
      for (const device of [false, true]) {
        const schema = exportSchema(v.type);
        const array = device ? exportDeviceArray(v) : exportArray(v);
        const back = device ? importDeviceData(array, schema, { ...full, toHost: true }) : importVector(array, schema, full);
        if (device) freeDeviceArray(array);
        else freeArrowArray(array);
        freeArrowSchema(schema);
        assert.equal(back.length, 0, `${what}${device ? ', device' : ''}`);
        assert.equal(typeString(back.type), typeString(v.type), `${what}${device ? ', device' : ''}: its type`);
        back.release();
      }
      using fromProtocol = importVector(arrowExportable(v) as ArrayExportable, full);
      assert.equal(fromProtocol.length, 0, `${what} through arrowExportable`);
      assert.equal(typeString(fromProtocol.type), typeString(v.type), `${what} through arrowExportable: its type`);
    }
  }
}

/** The async device stream: our producer into our reader. */
async function asyncRoute(t: Table, form: string): Promise<void> {
  const reader = createAsyncDeviceStreamReader({ ...full, keep: true, toHost: true });
  const producing = produceAsyncDeviceStream(t.batches, reader.handler, { schema: schemaOf(t) });
  const got: RecordBatch[] = [];
  for await (const b of reader) got.push(b);
  const r = await producing;
  assert.equal(r.end, 'complete', `${form}: async: ${r.error?.message ?? ''}`);
  assert.equal(got.length, t.batches.length, `${form}: async batches`);
  assert.deepEqual((await reader.schema).fields.map(fieldString), schemaOf(t).fields.map(fieldString), `${form}: async schema`);
  got.forEach((b, i) => same(b, t.batches[i]!, `${form}: async batch ${i}`));
  for (const b of got) (b as unknown as { release(): void }).release();
  await reader.released;
}

describe('zero rows of every type, through every export route', { skip: goldSkip }, () => {
  test('the reported case: tableFromArrays({ id: new Int32Array(0) }) exports as a batch, a table and a stream', async () => {
    const t = tableFromArrays({ id: new Int32Array(0), s: new Array<string>() });
    (() => {
      const { schema, array } = exportRecordBatch(t.batches[0]!);
      const back = importRecordBatch(array, schema, full);
      freeArrowArray(array);
      freeArrowSchema(schema);
      assert.equal(back.numRows, 0);
      assert.deepEqual(back.schema.fields.map((f) => `${f.name}: ${String(f.type)}`), t.schema.fields.map((f) => `${f.name}: ${String(f.type)}`));
      back.release();
      everySyncRoute(t, 'tableFromArrays');
    })();
    await asyncRoute(t, 'tableFromArrays');
    await settle();
  });

  for (const f of goldFiles) {
    const name = f.replace('.arrow_file', '');
    if (ARROW_JS_UNREADABLE.has(f)) {
      // No arrow-js type: the schema from the gold JSON, an empty batch as an ArrayView, through the view routes.
      test(`${name}: an empty batch as an ArrayView, through exportArray, the streams and the async stream`, async () => {
        const c = readIntegrationJsonFile(fileURLToPath(new URL(f.replace('.arrow_file', '.json.gz'), GOLD)));
        await viewRoutes(c.schema, emptyBatch(c.schema), name);
        await settle();
      });
      continue;
    }
    test(`${name}: every zero-row form, every route, full validation, nothing leaked`, async () => {
      const gold = tableFromIPC(readFileSync(new URL(f, GOLD)));
      for (const [form, t] of zeroRowTables(gold)) {
        everySyncRoute(t, form);
        await asyncRoute(t, form);
      }
      await settle();
    });
  }
});

/** The routes that carry an `ArrayView` (every type of the spec), for a schema and one of its empty batches. */
async function viewRoutes(schema: SchemaNode, batch: ArrayView, name: string): Promise<void> {
  const check = (v: ArrayView, what: string): void => {
    assert.equal(v.length, 0, `${name}: ${what}`);
    assert.equal(v.children.length, schema.children.length, `${name}: ${what} children`);
    v.children.forEach((c, i) => {
      assert.equal(c.length, 0, `${name}: ${what} child ${i}`);
      assert.equal(c.schema.format, schema.children[i]!.format, `${name}: ${what} child ${i}'s format`);
    });
  };
  {
    const s = exportSchema(schema);
    const a = exportArray(batch);
    check(importArrayView(a, s, full), 'exportArray');
    freeArrowArray(a);
    freeArrowSchema(s);
  }
  {
    const s = exportSchema(schema);
    const a = exportDeviceArray(batch);
    const v = importDeviceArrayView(a, s, full);
    freeDeviceArray(a);
    freeArrowSchema(s);
    check(v as ArrayView, 'exportDeviceArray');
  }
  for (const device of [false, true]) {
    for (const items of [[batch], []]) {
      const p = device ? exportDeviceArrayStream(items, { schema }) : exportArrayStream(items, { schema });
      const r = device ? importDeviceArrayStream(p, { ...full, view: true, toHost: true }) : importArrayStream(p, { ...full, view: true });
      const got = r.readAll();
      if (device) freeArrowDeviceArrayStream(p);
      else freeArrowArrayStream(p);
      assert.equal(got.length, items.length, `${name}: stream of ${items.length}`);
      assert.equal(r.schemaNode.children.map((c) => c.format).join(), schema.children.map((c) => c.format).join(), `${name}: stream schema`);
      for (const v of got) check(v as ArrayView, device ? 'device stream' : 'stream');
    }
  }
  const reader = createAsyncDeviceStreamReader({ ...full, keep: true, view: true, toHost: true });
  const producing = produceAsyncDeviceStream([batch], reader.handler, { schema });
  const got: ArrayView[] = [];
  for await (const v of reader) got.push(v);
  assert.equal((await producing).end, 'complete');
  assert.equal(got.length, 1);
  check(got[0]!, 'async stream');
  await reader.released;
}
