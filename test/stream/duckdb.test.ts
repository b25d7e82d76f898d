/**
 * DuckDB as a real, multi-threaded consumer of our exported streams: it
 * scans an `ArrowArrayStream` (duckdb_arrow_scan) from its worker threads
 * while koffi queues every get_next and release to the JS thread, which is
 * free because the query runs through koffi's async call form.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Int32, makeData, RecordBatch, Schema, Field, Struct, Table, Utf8, vectorFromArray } from 'apache-arrow';
import { DUCKDB_MISSING, DuckDB, duckdbAvailable } from '../peers/duckdb/duckdb.js';
import { accounting } from '../../src/index.js';
import { exportArrayStream, freeArrowArrayStream } from '../../src/stream/index.js';
import { collectUntil } from '../helpers/gc.js';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const skip = duckdbAvailable() ? false : DUCKDB_MISSING;

const schema = new Schema([new Field('x', new Int32(), false)]);

/** `rows` rows 0..rows-1 in batches of `batchRows`, made one at a time as DuckDB pulls them. */
function* batches(rows: number, batchRows: number, onBatch?: () => void): Generator<RecordBatch> {
  for (let start = 0; start < rows; start += batchRows) {
    const n = Math.min(batchRows, rows - start);
    const values = new Int32Array(n);
    for (let i = 0; i < n; i++) values[i] = start + i;
    onBatch?.();
    const data = makeData({ type: new Struct(schema.fields), length: n, children: [makeData({ type: new Int32(), length: n, data: values })] });
    yield new RecordBatch(schema, data);
  }
}

describe('DuckDB scans exported streams from its worker threads', { skip }, () => {
  let db: DuckDB;
  let n = 0;
  before(async () => {
    db = await DuckDB.open({ threads: 4 });
  });
  after(() => db?.close());

  test('10M rows in 64K-row batches, 4 threads: SQL sum and count match', async () => {
    const rows = 10_000_000;
    const batchRows = 64 * 1024;
    const before = accounting();
    let pulled = 0;
    const stream = exportArrayStream(batches(rows, batchRows, () => pulled++), { schema });
    const view = `s${n++}`;
    try {
      await db.arrowScan(view, stream);
      const [[sum, count, min, max]] = (await db.queryText(`SELECT sum(x), count(*), min(x), max(x) FROM ${view}`)) as string[][];
      assert.equal(BigInt(sum!), (BigInt(rows) * BigInt(rows - 1)) / 2n);
      assert.equal(count, String(rows));
      assert.equal(min, '0');
      assert.equal(max, String(rows - 1));
      assert.equal(pulled, Math.ceil(rows / batchRows), 'every batch pulled once');
    } finally {
      freeArrowArrayStream(stream);
    }
    // Every array DuckDB took has been released (pinned bytes back). What stays live are the schemas
    // DuckDB never releases (duckdb_arrow_scan and each bind of the view take one and null its
    // release): as many as a one-batch scan with the same statements leaves, whatever the batch count.
    const ok = await collectUntil(() => accounting().pinnedBytes === before.pinnedBytes);
    assert.ok(ok, `arrays released: ${JSON.stringify(accounting())}`);
    const leaked = accounting().liveExports - before.liveExports;
    const small = accounting();
    const one = exportArrayStream(batches(3, batchRows), { schema });
    const v1 = `s${n++}`;
    try {
      await db.arrowScan(v1, one);
      await db.queryText(`SELECT sum(x), count(*), min(x), max(x) FROM ${v1}`);
    } finally {
      freeArrowArrayStream(one);
    }
    await collectUntil(() => accounting().pinnedBytes === small.pinnedBytes);
    assert.equal(leaked, accounting().liveExports - small.liveExports, 'only the per-statement schema leak of DuckDB remains');
  });

  test('get_next is called from threads other than the JS thread', async () => {
    // koffi runs the callback on the JS thread either way; what proves the other threads is that the
    // JS thread is free (the query is async) while DuckDB's workers wait for it: a timer fires meanwhile.
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const stream = exportArrayStream(batches(2_000_000, 8192), { schema });
    const view = `s${n++}`;
    try {
      await db.arrowScan(view, stream);
      const [[count]] = (await db.queryText(`SELECT count(*) FROM ${view}`)) as string[][];
      assert.equal(count, '2000000');
    } finally {
      clearInterval(timer);
      freeArrowArrayStream(stream);
    }
    assert.ok(ticks > 0, 'the event loop ran during the scan');
  });

  test('an error in the JS source fails the query with its message', async () => {
    function* failing(): Generator<RecordBatch> {
      yield* batches(10_000, 2048);
      throw new Error('source broke at row 10000');
    }
    const stream = exportArrayStream(failing(), { schema });
    const view = `s${n++}`;
    try {
      await db.arrowScan(view, stream);
      await assert.rejects(db.queryText(`SELECT sum(x) FROM ${view}`), /source broke at row 10000/);
    } finally {
      freeArrowArrayStream(stream);
    }
  });

  test('strings and nulls through a Table stream', async () => {
    const t = new Table([
      ...new Table({ s: vectorFromArray(['a', null, 'ccc'], new Utf8()), i: vectorFromArray(Int32Array.from([1, 2, 3])) }).batches,
      ...new Table({ s: vectorFromArray([null, 'eeeee'], new Utf8()), i: vectorFromArray(Int32Array.from([4, 5])) }).batches,
    ]);
    const stream = exportArrayStream(t);
    const view = `s${n++}`;
    try {
      await db.arrowScan(view, stream);
      const rows = await db.queryText(`SELECT s, i FROM ${view} ORDER BY i`);
      assert.deepEqual(rows, [['a', '1'], [null, '2'], ['ccc', '3'], [null, '4'], ['eeeee', '5']]);
    } finally {
      freeArrowArrayStream(stream);
    }
  });
});

/**
 * The rule the docs state, shown: a *synchronous* call into a consumer that calls back from its own
 * threads deadlocks. With one DuckDB thread the scan runs on the calling thread and a synchronous
 * duckdb_query completes (koffi runs a same-thread callback at once); with four, DuckDB's workers
 * call get_next, koffi queues those calls for the JS thread, which sits in duckdb_query: it hangs.
 * Run in a child process (sync-scan.child.ts) that is killed after a few seconds.
 */
function syncScanChild(threads: number, timeoutMs: number): ReturnType<typeof spawnSync> {
  return spawnSync(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./sync-scan.child.ts', import.meta.url)), String(threads)], {
    encoding: 'utf8',
    timeout: timeoutMs,
  });
}

describe('the thread rule: a synchronous call into a consumer that calls back from other threads', { skip }, () => {
  test('with one DuckDB thread a synchronous query completes', () => {
    const r = syncScanChild(1, 20_000);
    assert.match(String(r.stdout), /done 0/, String(r.stderr));
  });

  test('with four DuckDB threads a synchronous query deadlocks (the child is killed)', () => {
    const r = syncScanChild(4, 4_000);
    assert.match(String(r.stdout), /querying/, String(r.stderr));
    assert.doesNotMatch(String(r.stdout), /done/);
    assert.equal(r.signal, 'SIGTERM', 'killed by the timeout, not crashed');
  });
});
