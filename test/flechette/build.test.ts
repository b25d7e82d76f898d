/**
 * The flechette target (src/flechette, issue 52), proven on Arrow's gold integration files: each file's
 * JSON, read by tools/integration into `ArrayView`s (every type of the spec, list views and run-end
 * encoded included), converted to a flechette `Table`, must read as flechette itself reads the same
 * file's IPC bytes (`tableFromIPC`), through `at()` and `toArray()`, with each set of flechette's
 * extraction options; over the views' own `ArrayBuffer`s; sliced at offsets 1, 3 and 8; and back:
 * flechette -> `ArrayView` -> flechette, and flechette -> `ArrowArray` (full validation) -> flechette.
 * Nothing here is a hard-coded result: every expected value comes from the gold files.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  Column, columnFromArray, columnFromValues, field, int32, Table, tableFromIPC, tableToIPC, union, utf8, UnionMode,
  type Batch, type ExtractionOptions, type Schema,
} from '@uwdata/flechette';
import { Flag } from '../../src/abi/constants.js';
import type { ArrayView, ImportedView } from '../../src/array/view.js';
import { ArrowDeviceError } from '../../src/errors.js';
import { batchOfView, columnOfViews, tableOfViews, useLazyBatches } from '../../src/flechette/build.js';
import { flechetteSchema, flechetteType, schemaNodeOfSchema, schemaNodeOfType } from '../../src/flechette/types.js';
import { viewOfBatch, viewsOfColumn, viewsOfTable } from '../../src/flechette/view.js';
import {
  accounting, disposeImport, exportArray, exportSchema, freeArrowArray, freeArrowSchema, importArrayView, importSchemaNode,
} from '../../src/index.js';
import type { SchemaNode } from '../../src/schema/node.js';
import { readIntegrationJsonFile, type JsonCase } from '../../tools/integration/json.js';
import { childSkip, runChild } from '../helpers/child.js';
import { GOLD, goldFiles, goldSkip } from '../helpers/gold.js';

// --- the gold cases -----------------------------------------------------------------------------

const names = goldFiles.map((f) => f.replace('.arrow_file', ''));

interface Gold {
  /** The JSON, as the library's neutral form. */
  readonly json: JsonCase;
  /** The IPC file's bytes (a plain Uint8Array of its own ArrayBuffer). */
  readonly ipc: Uint8Array;
}

const cache = new Map<string, Gold>();
function gold(name: string): Gold {
  let g = cache.get(name);
  if (g === undefined) {
    const json = readIntegrationJsonFile(fileURLToPath(new URL(`${name}.json.gz`, GOLD)));
    cache.set(name, (g = { json, ipc: new Uint8Array(readFileSync(new URL(`${name}.arrow_file`, GOLD))) }));
  }
  return g;
}

/** flechette's own reading of the IPC file: the oracle. */
function oracle(name: string, options: ExtractionOptions): Table {
  return tableFromIPC(gold(name).ipc, options);
}

/** Exact values (no lossy number coercion), flechette's defaults, and the options that change value kinds. */
const OPTION_SETS: readonly [string, ExtractionOptions][] = [
  ['exact', { useBigInt: true, useDecimalInt: true, useBigIntTimestamp: true }],
  ['default', {}],
  ['dates and maps', { useDate: true, useMap: true, useBigInt: true }],
];
const EXACT = OPTION_SETS[0]![1];

/** A value, or the error flechette throws reading it (it throws for int64s past 2^53 it would coerce). */
function cell(read: () => unknown): unknown {
  try {
    return read();
  } catch (e) {
    return { throws: (e as Error).message };
  }
}
const cellsOf = (b: Batch<unknown>, from = 0, n = b.length): unknown[] => Array.from({ length: n }, (_, i) => cell(() => b.at(from + i)));
const columnCells = (c: Column<unknown>): unknown[] => Array.from({ length: c.length }, (_, i) => cell(() => c.at(i)));

/** Asserts two tables hold the same values, batch by batch, through `at()` and `toArray()`. */
function sameValues(actual: Table, expected: Table, what: string): void {
  assert.equal(actual.numCols, expected.numCols, `${what}: columns`);
  expected.children.forEach((e, i) => {
    const a = actual.children[i]!;
    assert.deepEqual(a.data.map((b) => b.length), e.data.map((b) => b.length), `${what}: column ${i} batch lengths`);
    assert.deepEqual(columnCells(a), columnCells(e), `${what}: column ${i} (${expected.names[i]}) through at()`);
    assert.deepEqual(cell(() => a.toArray()), cell(() => e.toArray()), `${what}: column ${i} (${expected.names[i]}) through toArray()`);
  });
}

/** A schema with its dictionary ids left out (C has none) and metadata in key order (the JSON and IPC files order it differently). */
function comparable(s: Schema): unknown {
  return JSON.parse(JSON.stringify(s, (k, v: unknown) =>
    k === 'id' ? 'id' : typeof v === 'function' ? `fn ${v.name}` : v instanceof Map ? [...v].sort() : v === undefined ? 'undefined' : v));
}

/** The fields of a flechette batch that hold bytes, and its nested batches (batch.js). */
interface BatchBytes {
  readonly length: number;
  readonly validity?: unknown;
  readonly values?: unknown;
  readonly offsets?: unknown;
  readonly sizes?: unknown;
  readonly typeIds?: unknown;
  readonly data?: unknown;
  readonly children?: readonly BatchBytes[];
  readonly dictionary?: { readonly data: readonly BatchBytes[] };
}

/** Every typed array holding bytes of a (non-empty) batch and of those nested in it. */
function arraysOf(batch: BatchBytes, out: ArrayBufferView[] = []): ArrayBufferView[] {
  if (batch.length > 0) {
    for (const a of [batch.validity, batch.values, batch.offsets, batch.sizes, batch.typeIds, ...(Array.isArray(batch.data) ? batch.data : [])]) {
      if (ArrayBuffer.isView(a) && a.byteLength > 0) out.push(a);
    }
  }
  batch.children?.forEach((c) => arraysOf(c, out));
  batch.dictionary?.data.forEach((c) => arraysOf(c, out));
  return out;
}

/** The ArrayBuffers under a view's buffers, its children's and its dictionary's. */
function buffersOf(v: ArrayView, out = new Set<ArrayBufferLike>()): Set<ArrayBufferLike> {
  for (const b of v.buffers) if (b) out.add(b.buffer);
  v.children.forEach((c) => buffersOf(c, out));
  if (v.dictionary) buffersOf(v.dictionary, out);
  return out;
}

const tableArrays = (t: Table): ArrayBufferView[] => t.children.flatMap((c) => c.data.flatMap((b) => arraysOf(b)));

/** Rows `k .. k + n` of a view, as a C producer slices: the offset moved, every buffer as it is. */
function slice(v: ArrayView, k: number, n: number): ArrayView {
  return { schema: v.schema, length: n, offset: v.offset + k, nullCount: -1, buffers: v.buffers, children: v.children, dictionary: v.dictionary };
}

const SLICES = [1, 3, 8];

/**
 * Gold files whose buffers are all viewed at build in both forms: every column is dictionary-encoded, and
 * flechette reads a dictionary's values at `setDictionary`, while the indices were viewed by the full
 * validation already (it checks each index against the dictionary).
 */
const EAGER_FILES = new Set<string>(['generated_dictionary', 'generated_dictionary_unsigned', 'generated_nested_dictionary']);

// --- the gold files -----------------------------------------------------------------------------

describe('ArrayView -> flechette, on the gold files', { skip: goldSkip }, () => {
  for (const name of names) {
    test(`${name}: the flechette table holds what flechette reads from the IPC file, with each set of options`, () => {
      const { json } = gold(name);
      for (const [what, options] of OPTION_SETS) {
        const expected = oracle(name, options);
        const table = tableOfViews(json.schema, json.batches, options);
        assert.deepEqual(comparable(table.schema), comparable(expected.schema), `${what}: schema`);
        assert.equal(table.numRows, expected.numRows, `${what}: rows`);
        sameValues(table, expected, what);
      }
    });

    test(`${name}: zero-copy: every typed array of the table is over the views' ArrayBuffers`, () => {
      const { json } = gold(name);
      const before = accounting().copiedBytes;
      const table = tableOfViews(json.schema, json.batches, EXACT);
      assert.equal(accounting().copiedBytes - before, 0, 'bytes copied');
      const own = new Set<ArrayBufferLike>();
      for (const v of json.batches) buffersOf(v, own);
      const arrays = tableArrays(table);
      if (json.batches.some((b) => b.length > 0)) assert.ok(arrays.length > 0, 'no typed array was checked');
      for (const a of arrays) assert.ok(own.has(a.buffer), `a ${a.constructor.name} of ${a.byteLength} bytes is not over the views' memory`);
    });

    test(`${name}: sliced at offsets ${SLICES.join(', ')}, the whole batch and each column read the rows they cover`, () => {
      const { json } = gold(name);
      const expected = oracle(name, EXACT);
      let slices = 0;
      json.batches.forEach((v, b) => {
        for (const k of SLICES) {
          const n = v.length - k - 1;
          if (n <= 0) continue;
          slices++;
          // The record batch sliced: its offset is pushed down into every column (Columnar.rst, "Struct Layout").
          const t = tableOfViews(json.schema, [slice(v, k, n)], EXACT);
          // Each column sliced on its own.
          v.children.forEach((c, i) => {
            const want = cellsOf(expected.children[i]!.data[b]!, k, n);
            assert.deepEqual(cellsOf(t.children[i]!.data[0]!), want, `batch ${b} at offset ${k}: column ${i} (${expected.names[i]})`);
            assert.deepEqual(cellsOf(batchOfView(slice(c, k, n), EXACT)), want, `batch ${b}, column ${i} (${expected.names[i]}) sliced at ${k}`);
          });
        }
      });
      if (json.batches.some((v) => v.length > 2)) assert.ok(slices > 0, 'nothing was sliced');
    });

    test(`${name}: flechette -> ArrayView -> flechette reads the same, over the IPC file's bytes`, () => {
      const expected = oracle(name, EXACT);
      const { schema, batches } = viewsOfTable(expected);
      assert.equal(batches.length, expected.children[0]?.data.length ?? 0, 'one view per record batch');
      for (const v of batches) assert.equal(v.offset, 0, 'offset 0');
      const before = accounting().copiedBytes;
      const back = tableOfViews(schema, batches, EXACT);
      assert.equal(accounting().copiedBytes - before, 0, 'bytes copied');
      sameValues(back, expected, 'round trip');
      assert.deepEqual(comparable(back.schema), comparable(expected.schema), 'schema');
      const file = new Set(tableArrays(expected).map((a) => a.buffer));
      for (const a of tableArrays(back)) assert.ok(file.has(a.buffer), `a ${a.constructor.name} of ${a.byteLength} bytes is not over the IPC file's bytes`);
    });

    test(`${name}: flechette -> ArrowArray (validated in full) -> flechette reads the same, lazy and eager, with each set of options`, () => {
      const before = accounting();
      const { schema, batches } = viewsOfTable(oracle(name, EXACT));
      const schemaPtr = exportSchema(schema);
      const node = importSchemaNode(schemaPtr);
      freeArrowSchema(schemaPtr);
      /** The number of buffer views the imports hold (their records' views). */
      const viewsMade = (vs: readonly ImportedView[]): number => vs.reduce((n, v) => n + (v.read.views?.size ?? 0), 0);
      const made: Record<string, number> = {};
      for (const lazy of [true, false]) {
        const was = useLazyBatches(lazy);
        try {
          for (const [what, options] of OPTION_SETS) {
            const imported = batches.map((b) => {
              const p = exportArray(b);
              try {
                return importArrayView(p, node, { validate: 'full' }) as ImportedView;
              } finally {
                freeArrowArray(p);
              }
            });
            const validated = viewsMade(imported);
            const table = tableOfViews(node, imported, options);
            made[`${lazy}`] = viewsMade(imported) - validated;
            sameValues(table, oracle(name, options), `through the C Data Interface, ${lazy ? 'lazy' : 'eager'}, ${what}`);
            for (const v of imported) disposeImport(v);
          }
        } finally {
          useLazyBatches(was);
        }
      }
      // The views made by the build alone (not by the validation; before any read), with the last option set:
      // a lazy build makes fewer where the eager one makes any, except where every buffer is read at construction.
      if (made['false']! > 0 && !EAGER_FILES.has(name)) assert.ok(made['true']! < made['false']!, `views at build: lazy ${made['true']}, eager ${made['false']}`);
      const after = accounting();
      assert.equal(after.liveImports, before.liveImports, 'imports released');
      assert.equal(after.liveExports, before.liveExports, 'exports released by the imports');
    });

    test(`${name}: the schema goes to flechette and back unchanged`, () => {
      const { json } = gold(name);
      assert.equal(diffNodes(schemaNodeOfSchema(flechetteSchema(json.schema)), json.schema), undefined);
    });
  }
});

/** The first difference between two schema nodes (format, name, flags, metadata, children, dictionary). */
function diffNodes(a: SchemaNode, b: SchemaNode, path = 'schema'): string | undefined {
  if (a.format !== b.format) return `${path}.format: ${a.format} != ${b.format}`;
  if (a.name !== b.name) return `${path}.name: ${a.name} != ${b.name}`;
  if (a.flags !== b.flags) return `${path}.flags: ${a.flags} != ${b.flags}`;
  const ma = JSON.stringify([...(a.metadata ?? [])]);
  const mb = JSON.stringify([...(b.metadata ?? [])]);
  if (ma !== mb) return `${path}.metadata: ${ma} != ${mb}`;
  if (a.children.length !== b.children.length) return `${path}.n_children: ${a.children.length} != ${b.children.length}`;
  for (let i = 0; i < a.children.length; i++) {
    const d = diffNodes(a.children[i]!, b.children[i]!, `${path}.children[${i}]`);
    if (d) return d;
  }
  if ((a.dictionary === null) !== (b.dictionary === null)) return `${path}.dictionary: one side has none`;
  return a.dictionary && b.dictionary ? diffNodes(a.dictionary, b.dictionary, `${path}.dictionary`) : undefined;
}

// --- offsets, alignment and copies --------------------------------------------------------------

/** The first column of a gold file whose node matches, with nulls, and its batch 0. */
function columnOf(name: string, pick: (n: SchemaNode) => boolean): { view: ArrayView; index: number } {
  const { json } = gold(name);
  const v = json.batches[0]!;
  const index = v.children.findIndex((c) => pick(c.schema) && c.nullCount > 0 && c.length > 16);
  assert.ok(index >= 0, `${name} has such a column`);
  return { view: v.children[index]!, index };
}

describe('offsets, alignment and copies', { skip: goldSkip }, () => {
  test('a bitmap at bit offset 3 is shifted into a counted copy; at bit offset 8 it is a subarray', () => {
    const { view, index } = columnOf('generated_primitive', (n) => n.type.id === 'bool');
    const expected = oracle('generated_primitive', EXACT).children[index]!.data[0]!;
    const n = view.length - 9;
    let before = accounting().copiedBytes;
    const at3 = batchOfView(slice(view, 3, n), EXACT) as Batch<unknown> & BatchBytes;
    // Validity and values are both bitmaps: two shifted copies of ceil(n / 8) bytes.
    assert.equal(accounting().copiedBytes - before, 2 * Math.ceil(n / 8), 'bytes copied at bit offset 3');
    assert.deepEqual(cellsOf(at3), cellsOf(expected, 3, n));
    before = accounting().copiedBytes;
    const at8 = batchOfView(slice(view, 8, n), EXACT) as Batch<unknown> & BatchBytes;
    assert.equal(accounting().copiedBytes - before, 0, 'bytes copied at bit offset 8');
    const validity = at8.validity as Uint8Array;
    assert.equal(validity.buffer, view.buffers[0]!.buffer, 'the validity is a view of the source');
    assert.equal(validity.byteOffset, view.buffers[0]!.byteOffset + 1, 'one byte in');
    assert.equal((at8.values as Uint8Array).byteOffset, view.buffers[1]!.byteOffset + 1, 'the values one byte in');
    assert.deepEqual(cellsOf(at8), cellsOf(expected, 8, n));
  });

  test('int32 values are sliced in place; at a misaligned address they are copied and counted', () => {
    const { view, index } = columnOf('generated_primitive', (n) => n.format === 'i');
    const expected = oracle('generated_primitive', EXACT).children[index]!.data[0]!;
    const n = view.length - 5;
    let before = accounting().copiedBytes;
    const sliced = batchOfView(slice(view, 5, n), EXACT) as Batch<unknown> & BatchBytes;
    const values = sliced.values as Int32Array;
    assert.equal(values.buffer, view.buffers[1]!.buffer, 'the same ArrayBuffer');
    assert.equal(values.byteOffset, view.buffers[1]!.byteOffset + 5 * 4, 'five values in');
    assert.equal(values.length, n, 'as long as the slice');
    // 5 is not a multiple of 8: the validity is shifted, its bytes counted; the values are not.
    assert.equal(accounting().copiedBytes - before, Math.ceil(n / 8), 'bytes copied');
    assert.deepEqual(cellsOf(sliced), cellsOf(expected, 5, n));

    // The same bytes one byte into a new buffer: JS cannot view an int32 there.
    const src = view.buffers[1]!;
    const odd = new Uint8Array(src.byteLength + 1);
    odd.set(src, 1);
    const misaligned: ArrayView = { ...view, buffers: [view.buffers[0]!, odd.subarray(1)] };
    before = accounting().copiedBytes;
    const copied = batchOfView(misaligned, EXACT) as Batch<unknown> & BatchBytes;
    assert.equal(accounting().copiedBytes - before, view.length * 4, 'the values copied, and counted');
    assert.notEqual((copied.values as Int32Array).buffer, odd.buffer, 'a copy');
    assert.deepEqual(cellsOf(copied), cellsOf(expected));
  });

  test('a sliced utf8 array keeps its offsets as they are and its data whole (flechette reads offsets absolutely)', () => {
    const { view, index } = columnOf('generated_binary', (n) => n.format === 'u');
    const expected = oracle('generated_binary', EXACT).children[index]!.data[0]!;
    const sliced = batchOfView(slice(view, 4, view.length - 4), EXACT) as Batch<unknown> & BatchBytes;
    const offsets = sliced.offsets as Int32Array;
    const source = new Int32Array(view.buffers[1]!.buffer, view.buffers[1]!.byteOffset, view.length + 1);
    assert.equal(offsets[0], source[4], 'offsets not rebased');
    assert.ok(offsets[0]! > 0, 'the test slices past some data');
    assert.equal(offsets.buffer, view.buffers[1]!.buffer, 'offsets in place');
    assert.equal((sliced.values as Uint8Array).buffer, view.buffers[2]!.buffer, 'data in place');
    assert.equal((sliced.values as Uint8Array).byteOffset, view.buffers[2]!.byteOffset, 'data from its start');
    assert.deepEqual(cellsOf(sliced), cellsOf(expected, 4, view.length - 4));
  });

  test('a sliced run-end encoded array copies only the run ends it covers, rebased (counted)', () => {
    const { json } = gold('generated_run_end_encoded');
    const expected = oracle('generated_run_end_encoded', EXACT);
    const b = json.batches.findIndex((v) => v.length > 10);
    assert.ok(b >= 0, 'a batch to slice');
    let checked = 0;
    json.batches[b]!.children.forEach((c, i) => {
      if (c.schema.type.id !== 'run_end_encoded') return;
      const ends = c.children[0]!;
      const before = accounting().copiedBytes;
      const n = c.length - 4;
      const sliced = batchOfView(slice(c, 3, n), EXACT) as Batch<unknown> & BatchBytes;
      const copied = accounting().copiedBytes - before;
      const width = (ends.schema.type as { bitWidth: number }).bitWidth / 8;
      const runEnds = sliced.children![0]!.values as Int16Array | Int32Array | BigInt64Array;
      const runs = runEnds.length;
      // New run ends, relative to the slice: increasing, the last one the slice's length.
      assert.ok(!buffersOf(ends).has(runEnds.buffer), `column ${i}: the run ends are a new array`);
      assert.equal(Number(runEnds[runs - 1]), n, `column ${i}: the last run ends the slice`);
      for (let k = 1; k < runs; k++) assert.ok(Number(runEnds[k]) > Number(runEnds[k - 1]), `column ${i}: run ends increase`);
      assert.ok(runs <= ends.length, `column ${i}: no more runs than the source`);
      // Counted: the run ends, and at most the values' validity shifted to the first run covered.
      assert.ok(copied >= runs * width && copied <= runs * width + Math.ceil(runs / 8), `column ${i}: ${copied} bytes copied for ${runs} runs`);
      const vals = sliced.children![1]! as BatchBytes;
      assert.equal(vals.length, runs, `column ${i}: one value per run`);
      for (const a of [vals.values, vals.offsets].filter(ArrayBuffer.isView)) {
        assert.ok(buffersOf(c.children[1]!).has(a.buffer), `column ${i}: the values are not copied`);
      }
      assert.deepEqual(cellsOf(sliced), cellsOf(expected.children[i]!.data[b]!, 3, c.length - 4), `column ${i}`);
      checked++;
    });
    assert.ok(checked > 0, 'a run-end encoded column was checked');
  });

  test('binary and utf8 view arrays from flechette get the variadic sizes the C interface adds, as the JSON says them', () => {
    const { json } = gold('generated_binary_view');
    const { batches } = viewsOfTable(oracle('generated_binary_view', EXACT));
    let checked = 0;
    json.batches.forEach((v, b) => v.children.forEach((c, i) => {
      const sizesOf = (x: ArrayView): bigint[] => {
        const s = x.buffers[x.buffers.length - 1]!;
        return [...new BigInt64Array(s.buffer.slice(s.byteOffset, s.byteOffset + s.byteLength))];
      };
      const ours = batches[b]!.children[i]!;
      assert.equal(ours.buffers.length, c.buffers.length, `batch ${b} column ${i}: buffer count`);
      assert.deepEqual(sizesOf(ours), sizesOf(c), `batch ${b} column ${i}: variadic sizes`);
      checked += c.buffers.length - 3;
    }));
    assert.ok(checked > 0, 'some variadic buffers were compared');
  });

  test('a view that is too short, or that says it has nulls without a bitmap, is a typed error naming the buffer', () => {
    const { view } = columnOf('generated_primitive', (n) => n.format === 'i');
    const short: ArrayView = { ...view, buffers: [view.buffers[0]!, view.buffers[1]!.subarray(0, 8)] };
    assert.throws(() => batchOfView(short), (e: unknown) =>
      e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'array.buffers[1]' &&
      e.message === `array.buffers[1]: the buffer has 8 bytes, ${view.length * 4} are needed`);
    const noBitmap: ArrayView = { ...view, buffers: [null, view.buffers[1]!] };
    assert.throws(() => batchOfView(noBitmap), (e: unknown) =>
      e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'array.buffers[0]' &&
      e.detail === `NULL validity bitmap, but null_count is ${view.nullCount}`);
  });
});

// --- tables, dictionaries and errors ------------------------------------------------------------

describe('tables and dictionaries', { skip: goldSkip }, () => {
  test('a table whose columns are batched differently is cut at every boundary, without copying values', () => {
    const n = 23;
    const ints = columnFromArray(Int32Array.from({ length: n }, (_, i) => i * 7 - 50), int32(), { maxBatchRows: 5 });
    const strs = columnFromValues(Array.from({ length: n }, (_, i) => (i % 4 === 1 ? null : `s${i}`)), utf8(), { maxBatchRows: 9 });
    const table = new Table({ fields: [field('i', int32()), field('s', utf8())] }, [ints, strs]);
    const { schema, batches } = viewsOfTable(table);
    // Boundaries of 5 and of 9 rows: 0 5 9 10 15 18 20 23.
    assert.deepEqual(batches.map((b) => b.length), [5, 4, 1, 5, 3, 2, 3]);
    assert.ok(batches.some((b) => b.children.some((c) => c.offset > 0)), 'pieces at an offset');
    const back = tableOfViews(schema, batches);
    assert.deepEqual(back.getChild('i')!.toArray(), ints.toArray(), 'ints');
    assert.deepEqual(back.getChild('s')!.toArray(), strs.toArray(), 'strings');
    const source = new Set(tableArrays(table).map((a) => a.buffer));
    for (const a of (back.getChild('i')!.data as Batch<unknown>[]).flatMap((b) => arraysOf(b))) assert.ok(source.has(a.buffer), 'int values in place');
    for (const b of back.getChild('s')!.data as readonly BatchBytes[]) {
      assert.ok(source.has((b.offsets as Int32Array).buffer) && source.has((b.values as Uint8Array).buffer), 'string offsets and data in place');
    }
  });

  test('batches of one dictionary share one column, which flechette\'s IPC writer writes once and reads back', () => {
    for (const name of ['generated_dictionary', 'generated_dictionary_unsigned', 'generated_nested_dictionary']) {
      const { json } = gold(name);
      const expected = oracle(name, EXACT);
      const table = tableOfViews(json.schema, json.batches, EXACT);
      let dictionaryColumns = 0;
      table.children.forEach((c, i) => {
        if (c.type.typeId !== -1) return;
        dictionaryColumns++;
        const dicts = new Set((c.data as readonly BatchBytes[]).map((b) => b.dictionary));
        assert.equal(dicts.size, 1, `${name} column ${i}: one dictionary column for its ${c.data.length} batches`);
      });
      assert.ok(dictionaryColumns > 0, `${name} has dictionary columns`);
      // flechette's IPC writer cannot write a dictionary nested in a dictionary's values (it fails on
      // flechette's own reading of generated_nested_dictionary): ours must fail as flechette's does.
      const own = cell(() => tableFromIPC(tableToIPC(expected, {})!, EXACT));
      const ours = cell(() => tableFromIPC(tableToIPC(table, {})!, EXACT));
      if (own instanceof Table) {
        if (!(ours instanceof Table)) assert.fail(`${name}: ${JSON.stringify(ours)}`);
        sameValues(ours, expected, `${name} through flechette's IPC writer`);
      } else {
        assert.deepEqual(ours, own, `${name}: fails as flechette's own table does`);
      }
    }
  });

  test('a dictionary of several batches (flechette\'s delta dictionaries) cannot be one C dictionary: unsupported, naming it', () => {
    const t = oracle('generated_dictionary', EXACT);
    const i = t.children.findIndex((c) => c.type.typeId === -1);
    const batch = t.children[i]!.data[0]! as Batch<unknown> & { dictionary: Column<unknown> };
    const dictionary = batch.dictionary;
    const twice = new Column([dictionary.data[0]!, dictionary.data[0]!], dictionary.type);
    const withTwo = Object.assign(Object.create(Object.getPrototypeOf(batch) as object) as object, batch, { dictionary: twice }) as Batch<unknown>;
    const node = schemaNodeOfSchema(t.schema).children[i]!;
    assert.throws(() => viewOfBatch(withTwo, node), (e: unknown) =>
      e instanceof ArrowDeviceError && e.kind === 'unsupported' && e.path === 'batch.dictionary' &&
      e.detail === "a dictionary of 2 batches: a C array's dictionary is one array (concatenate it first)");
  });

  test('a record batch whose struct has null rows is refused', () => {
    const { json } = gold('generated_primitive');
    const v = json.batches[0]!;
    const bitmap = new Uint8Array(Math.ceil(v.length / 8)).fill(0xff);
    bitmap[0] = 0xfe;
    assert.throws(() => tableOfViews(json.schema, [{ ...v, nullCount: 1, buffers: [bitmap] }]), (e: unknown) =>
      e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'batches[0].null_count');
  });

  test('a flechette table sent out through the C Data Interface is not copied: a write to its values shows in the import', () => {
    const ints = columnFromArray(Int32Array.from({ length: 16 }, (_, i) => i), int32());
    const table = new Table({ fields: [field('i', int32(), false)] }, [ints]);
    const { schema, batches } = viewsOfTable(table);
    const p = exportArray(batches[0]!);
    const imported = importArrayView(p, schema);
    freeArrowArray(p);
    const back = batchOfView(imported.children[0]!);
    (ints.data[0]!.values as Int32Array)[3] = 12345;
    assert.equal(back.at(3), 12345);
    disposeImport(imported);
  });
});

describe('schemas and typed errors', () => {
  test('every flag and attribute of a schema goes to flechette and back', () => {
    const node = schemaNodeOfSchema({
      fields: [
        field('u', union(UnionMode.Dense, [int32(), utf8()], [5, 9])),
      ],
    });
    assert.equal(node.children[0]!.format, '+ud:5,9');
    assert.equal(node.children[0]!.flags, Flag.NULLABLE);
    const t = flechetteType(node.children[0]!);
    assert.deepEqual((t as { typeIds: number[] }).typeIds, [5, 9]);
    assert.equal(schemaNodeOfType(t).format, '+ud:5,9');
  });

  test('a schema that is not a struct cannot be a flechette schema', () => {
    const node = schemaNodeOfType(int32());
    assert.throws(() => flechetteSchema(node), (e: unknown) =>
      e instanceof ArrowDeviceError && e.kind === 'invalid' && e.message === 'schema.format: a record batch\'s schema is a struct ("+s"), got "i"');
  });

  test('a flechette type with no Arrow format, or union type ids out of range, is a typed error naming the field', () => {
    assert.throws(() => schemaNodeOfSchema({ fields: [field('a', int32()), field('b', { typeId: 0 })] }), (e: unknown) =>
      e instanceof ArrowDeviceError && e.kind === 'unsupported' && e.path === 'schema.fields[1].type');
    assert.throws(() => schemaNodeOfSchema({ fields: [field('u', union(UnionMode.Sparse, [int32()], [200]))] }), (e: unknown) =>
      e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'schema.fields[0].type' &&
      e.detail === 'union type id 200 is out of range 0..127 in format "+us:200"');
  });

  test('a batch read against the schema of another type is refused', () => {
    const column = columnFromArray(Int32Array.of(1, 2, 3), int32());
    assert.throws(() => viewsOfColumn(column, field('s', utf8())), (e: unknown) =>
      e instanceof ArrowDeviceError && e.kind === 'invalid' && e.path === 'column.data[0]');
    assert.deepEqual(columnOfViews(schemaNodeOfType(int32()), viewsOfColumn(column)).toArray(), Int32Array.of(1, 2, 3));
  });
});

// --- what a flechette-only program loads --------------------------------------------------------

const loadsSkip = process.versions.bun !== undefined || process.versions.deno !== undefined
  ? "module resolve hooks (module.register) are Node.js's"
  : childSkip;

describe('what the flechette target loads', { skip: loadsSkip }, () => {
  test('converting both ways loads flechette and never apache-arrow (and the recorder sees apache-arrow where it is loaded)', () => {
    const hook = `export async function resolve(s, c, next) {
      const r = await next(s, c);
      if (r.url.includes('/node_modules/apache-arrow/')) process.stderr.write('LOADED apache-arrow\\n');
      if (r.url.includes('/node_modules/@uwdata/flechette/')) process.stderr.write('LOADED flechette\\n');
      return r;
    }`;
    const run = (body: string): string[] => {
      const r = runChild(`
        import { register } from 'node:module';
        register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}));
        void (async () => { ${body} })();
      `);
      assert.equal(r.status, 0, r.stderr);
      return [...new Set(r.stderr.split('\n').filter((l) => l.startsWith('LOADED ')).map((l) => l.slice(7).trim()))].sort();
    };
    const loaded = run(`
      const { tableOfViews } = await import('@/src/flechette/build.js');
      const { viewsOfTable } = await import('@/src/flechette/view.js');
      const { parseFormat } = await import('@/src/schema/format.js');
      const node = (format, name, children = []) => ({ format, type: parseFormat(format), name, metadata: null, flags: 2, children, dictionary: null });
      const schema = { ...node('+s', '', [node('i', 'x')]), flags: 0 };
      const x = { schema: schema.children[0], length: 2, offset: 0, nullCount: 0, buffers: [null, new Uint8Array(Int32Array.of(1, 2).buffer)], children: [], dictionary: null };
      const table = tableOfViews(schema, [{ schema, length: 2, offset: 0, nullCount: 0, buffers: [null], children: [x], dictionary: null }]);
      const { batches } = viewsOfTable(table);
      if (tableOfViews(schema, batches).getChild('x').at(1) !== 2) process.exit(3);
    `);
    assert.deepEqual(loaded, ['flechette']);
    assert.deepEqual(run(`await import('@/src/schema/arrowjs.js');`), ['apache-arrow'], 'the recorder works');
  });
});
