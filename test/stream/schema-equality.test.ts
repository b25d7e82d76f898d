/**
 * The schema of every imported batch, table and stream equals the exported
 * one, field by field (names, repeated names included, order, nullability,
 * types, field and schema metadata), for every gold case and every import
 * path: importRecordBatch, importTable, importArrayStream (reader, batches,
 * toTable), importDeviceArrayStream, and the async reader. Types arrow-js
 * lacks go through `expand` (list view -> list, run-end encoded -> values).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Schema } from 'apache-arrow';
import {
  createAsyncDeviceStreamReader, exportArray, exportArrayStream, exportDeviceArrayStream, exportSchema, freeArrowArray,
  freeArrowArrayStream, freeArrowDeviceArrayStream, freeArrowSchema, importArrayStream, importDeviceArrayStream,
  importRecordBatch, importSchema, importTable, produceAsyncDeviceStream,
} from '../../src/index.js';
import { nodeToSchema } from '../../src/schema/arrowjs.js';
import { discover, load } from '../../tools/conformance-lib.js';
import { fieldString } from '../helpers/compare.js';
import { GOLD, goldSkip } from '../helpers/gold.js';

const cases = goldSkip ? new Map<string, string[]>() : discover([fileURLToPath(GOLD)]);
const expand = { expand: true } as const;

function describeSchema(s: Schema): string[] {
  return [`schema metadata ${JSON.stringify([...s.metadata])}`, ...s.fields.map(fieldString)];
}

function same(actual: Schema, expected: Schema, what: string): void {
  assert.deepEqual(describeSchema(actual), describeSchema(expected), `${what}: the schema differs`);
}

describe('imported schemas equal the exported ones, field by field, on every gold case', { skip: goldSkip }, () => {
  for (const [name, files] of cases) {
    test(name, async () => {
      const c = load(files);
      const expected = nodeToSchema(c.schema, 'schema', expand);

      // importSchema, then importRecordBatch per array against that one schema (the common case).
      const schema = importSchema(exportSchema(c.schema), expand);
      same(schema, expected, 'importSchema');
      for (const v of c.batches) {
        const a = exportArray(v);
        using b = importRecordBatch(a, schema, expand);
        freeArrowArray(a);
        same(b.schema, expected, 'importRecordBatch');
      }
      // A schema pointer given to each call (consumed by it).
      for (const v of c.batches) {
        const sp = exportSchema(c.schema);
        const a = exportArray(v);
        using b = importRecordBatch(a, sp, expand);
        freeArrowArray(a);
        freeArrowSchema(sp);
        same(b.schema, expected, 'importRecordBatch(schema pointer)');
      }
      // importTable
      {
        const sp = exportSchema(c.schema);
        const arrays = c.batches.map((v) => exportArray(v));
        using t = importTable(arrays, sp, expand);
        for (const a of arrays) freeArrowArray(a);
        freeArrowSchema(sp);
        same(t.schema, expected, 'importTable');
        for (const b of t.batches) same(b.schema, expected, 'importTable batch');
      }
      // Streams: the reader, every batch, toTable.
      for (const kind of ['stream', 'device-stream'] as const) {
        const p = kind === 'stream' ? exportArrayStream(c.batches, { schema: c.schema }) : exportDeviceArrayStream(c.batches, { schema: c.schema });
        const r = kind === 'stream' ? importArrayStream(p, expand) : importDeviceArrayStream(p, { ...expand, toHost: true });
        if (kind === 'stream') freeArrowArrayStream(p);
        else freeArrowDeviceArrayStream(p);
        same(r.schema, expected, `${kind} reader`);
        let n = 0;
        for (const b of r) {
          same(b.schema, expected, `${kind} batch`);
          n++;
        }
        assert.equal(n, c.batches.length);
        const p2 = exportArrayStream(c.batches, { schema: c.schema });
        using t = importArrayStream(p2, expand).toTable();
        freeArrowArrayStream(p2);
        same(t.schema, expected, `${kind} toTable`);
      }
      // The async reader.
      {
        const reader = createAsyncDeviceStreamReader({ ...expand, toHost: true });
        // Our producer needs a native consumer's handler: give it our own reader's.
        const producing = produceAsyncDeviceStream(c.batches, reader.handler, { schema: c.schema });
        let n = 0;
        for await (const b of reader) {
          same(b.schema, expected, 'async batch');
          n++;
        }
        same(await reader.schema, expected, 'async reader');
        await producing;
        await reader.released;
        assert.equal(n, c.batches.length);
      }
    });
  }
});
