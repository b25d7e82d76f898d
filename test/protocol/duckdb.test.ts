/**
 * DuckDB as a real peer of the exchange protocol (PROTOCOL.md).
 *
 * DuckDB's C API takes and gives raw structs; the few lines of glue a DuckDB
 * binding would write to speak the protocol are here, written by hand:
 * - consumer: `scan(db, name, source)` takes `source[Symbol.for('arrow.c_stream')]()`
 *   and gives the handle's stream to duckdb_arrow_scan. DuckDB never
 *   releases a scanned stream (see test/peers/duckdb/duckdb.ts), so the glue
 *   keeps the handle while the view is used and disposes it afterwards:
 *   the dispose releases it.
 * - producer: a query result's schema and arrays wrapped in owned handles.
 */
import { DUCKDB_MISSING, DuckDB, duckdbAvailable, freeStruct } from '../peers/duckdb/duckdb.js';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Table, tableFromArrays } from 'apache-arrow';
import { accounting, ArrowSymbols, arrowExportable, importArrayStream, importRecordBatch, nativeMemory, type ArrowArrayExportable } from '../../src/index.js';
import { collectUntil } from '../helpers/gc.js';
import { counting, countingMissing } from '../ownership/counting.js';
import { wrapStruct, type HandmadeHandle } from './handmade.js';

const skip = duckdbAvailable() ? countingMissing ?? false : DUCKDB_MISSING;

/** DuckDB's side of the protocol: scans any object implementing arrow.c_stream as view `name`; returns the handle's disposer. */
async function scan(db: DuckDB, name: string, source: object): Promise<HandmadeHandle> {
  const method = (source as Record<symbol, unknown>)[Symbol.for('arrow.c_stream')];
  if (typeof method !== 'function') throw new Error('not an arrow.c_stream producer');
  const handle = method.call(source) as HandmadeHandle;
  try {
    await db.arrowScan(name, handle.address);
  } catch (e) {
    handle[Symbol.dispose]();
    throw e;
  }
  return handle;
}

describe('DuckDB speaks the exchange protocol', { skip }, () => {
  let db: DuckDB;
  before(async () => {
    db = await DuckDB.open({ threads: 4 });
  });
  after(() => db?.close());

  test('DuckDB scans an arrow-js Table handed over by arrow.c_stream, from its worker threads; dispose releases the stream', async () => {
    const n = 100_000;
    const x = Int32Array.from({ length: n }, (_, i) => i);
    const t = tableFromArrays({ x });
    const chunked = new Table([...t.slice(0, 30_000).batches, ...t.slice(30_000, 70_000).batches, ...t.slice(70_000).batches]);
    const base = accounting();
    const handle = await scan(db, 'js_table', arrowExportable(chunked));
    const [[sum, count]] = (await db.queryText('SELECT sum(x), count(*) FROM js_table')) as string[][];
    assert.equal(BigInt(sum!), (BigInt(n) * BigInt(n - 1)) / 2n);
    assert.equal(count, String(n));
    let released = false;
    void (handle as unknown as { released: Promise<void> }).released.then(() => (released = true));
    handle[Symbol.dispose]();
    await collectUntil(() => released && accounting().pinnedBytes === base.pinnedBytes);
    assert.equal(released, true, 'the stream was released by the dispose (DuckDB never releases it)');
    assert.equal(accounting().pinnedBytes, base.pinnedBytes, 'every array DuckDB took was released');
    assert.equal(accounting().liveHandles, base.liveHandles);
  });

  test('a C producer\'s stream, imported by us, handed on to DuckDB without a copy: released once, nothing outstanding', async () => {
    const c = counting();
    const s = c.stream(5, 1000);
    const reader = importArrayStream(s);
    nativeMemory().free(s);
    const streams = c.streamReleases();
    const handle = await scan(db, 'c_stream', reader);
    assert.equal(reader.released, true, 'the reader handed its stream on');
    const [[sum, count]] = (await db.queryText('SELECT sum(x), count(*) FROM c_stream')) as string[][];
    assert.equal(count, '5000');
    assert.equal(BigInt(sum!), (4999n * 5000n) / 2n, 'x = 0..4999 over the five batches');
    assert.equal(c.outstanding(), 0, 'DuckDB released every array of the C producer');
    handle[Symbol.dispose]();
    assert.equal(c.streamReleases(), streams + 1, 'the stream was released once, by the dispose');
    assert.equal(c.doubleReleases(), 0);
  });

  test('DuckDB as a producer: a query result in owned handles, read by importRecordBatch', async () => {
    const { schema, arrays } = await db.queryArrow('SELECT range::INTEGER AS x, range::VARCHAR AS s FROM range(5)');
    assert.equal(arrays.length, 1);
    const producer = {
      [Symbol.for('arrow.c_array')]: () => {
        const s = wrapStruct(schema, 'ArrowSchema', freeStruct);
        const a = wrapStruct(arrays[0]!, 'ArrowArray', freeStruct);
        return { schema: s, array: a, [Symbol.dispose]: () => (a[Symbol.dispose](), s[Symbol.dispose]()) };
      },
    } as unknown as ArrowArrayExportable;
    using batch = importRecordBatch(producer);
    assert.deepEqual([...batch.getChild('x')!], [0, 1, 2, 3, 4]);
    assert.deepEqual([...batch.getChild('s')!], ['0', '1', '2', '3', '4']);
    assert.equal(typeof batch[ArrowSymbols.array], 'function', 'and it can be handed on in turn');
  });
});
