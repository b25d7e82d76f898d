/**
 * arrow-device/adbc against a distributed SQL engine: Apache DataFusion
 * Ballista 55.0.0 (test/adbc/ballista.ts), a scheduler serving Arrow Flight
 * SQL and two executor processes on 127.0.0.1, reached through the ADBC
 * Flight SQL driver. The data: Parquet files written here by DuckDB, four
 * of them so that Ballista's scans have several partitions, registered with
 * `CREATE EXTERNAL TABLE`.
 *
 * What is proven: every query's rows equal DuckDB's `read_parquet` over the
 * same files; a GROUP BY and a filter come back in several partitions (the
 * final stage's, one endpoint each), read at once by `readPartitions`; those
 * rows in partition order equal `readPartition` one by one; Ballista's
 * refusals (bound parameters, INSERT) are `AdbcError`s with its message; an
 * executor killed in mid-read gives an `AdbcError` within FAULT_BOUND_MS and
 * leaves nothing live. The cluster is stopped at the end, whatever happened.
 *
 * Skips with the reason where Ballista (`npm run setup:ballista`), the
 * Flight SQL driver or DuckDB is missing; BALLISTA_REQUIRED=1 (npm run
 * test:adbc, CI) makes that a failure.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import { tableFromArrays, type RecordBatch } from 'apache-arrow';
import { accounting } from '../../src/index.js';
import { AdbcConnection, AdbcDatabase, AdbcError, AdbcStatus } from '../../src/adbc/index.js';
import { ballistaMissing, duckdbParquet, startBallista, writeParquet, type BallistaCluster } from './ballista.js';
import { DUCKDB, FLIGHTSQL } from './drivers.js';

const missing = FLIGHTSQL.missing ?? ballistaMissing();
if (missing && process.env.BALLISTA_REQUIRED === '1') throw new Error(`BALLISTA_REQUIRED=1: ${missing}`);

/** How long after an executor is killed the typed error may come: generous against a loaded 2-core machine ("bounded", not "fast"). */
const FAULT_BOUND_MS = 30_000;
const FILES = 4;
const ROWS_PER_FILE = 250_000;

/** Each query, in Ballista's SQL over `t` and in DuckDB's over the same files (DuckDB's sum of BIGINT is HUGEINT: cast back). */
const QUERIES: { name: string; ballista: string; duckdb: (t: string) => string; partitioned: boolean }[] = [
  {
    name: 'GROUP BY',
    ballista: 'SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k',
    duckdb: (t) => `SELECT k, count(*) AS n, sum(v)::BIGINT AS s FROM ${t} GROUP BY k`,
    partitioned: true,
  },
  {
    name: 'filter',
    ballista: 'SELECT id, v FROM t WHERE k = 7',
    duckdb: (t) => `SELECT id, v FROM ${t} WHERE k = 7`,
    partitioned: true,
  },
  {
    name: 'global aggregate',
    ballista: 'SELECT count(*) AS n, sum(v) AS s, min(id) AS lo, max(id) AS hi FROM t',
    duckdb: (t) => `SELECT count(*) AS n, sum(v)::BIGINT AS s, min(id) AS lo, max(id) AS hi FROM ${t}`,
    partitioned: false,
  },
  {
    name: 'join and HAVING',
    ballista: 'SELECT a.k, count(*) AS n FROM t a JOIN (SELECT k FROM t WHERE id < 20) b ON a.k = b.k WHERE a.v < 500000 GROUP BY a.k HAVING count(*) > 10',
    duckdb: (t) => `SELECT a.k, count(*) AS n FROM ${t} a JOIN (SELECT k FROM ${t} WHERE id < 20) b ON a.k = b.k WHERE a.v < 500000 GROUP BY a.k HAVING count(*) > 10`,
    partitioned: true,
  },
];

/** A batch's rows as text, one line per row, for a comparison that does not depend on the engine's types' JS form. */
function rowsOf(batch: RecordBatch, out: string[]): void {
  const cols = batch.schema.fields.map((_, i) => batch.getChildAt(i)!);
  for (let r = 0; r < batch.numRows; r++) out.push(cols.map((c) => String(c.get(r))).join('|'));
}

describe('arrow-device/adbc against Ballista (a scheduler and two executors, Flight SQL)', { skip: missing }, () => {
  let cluster: BallistaCluster | undefined;
  let dir: string;
  let db: AdbcDatabase;
  let conn: AdbcConnection;
  let base: number;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'arrow-device-parquet-'));
    await writeParquet(dir, FILES, ROWS_PER_FILE);
    cluster = await startBallista();
    db = new AdbcDatabase(FLIGHTSQL.options(cluster.uri));
    conn = await db.connect();
    // Runs on the scheduler, in the one session unauthenticated clients share.
    await conn.execute(`CREATE EXTERNAL TABLE t STORED AS PARQUET LOCATION '${dir}/'`);
    base = accounting().liveImports;
  });
  after(async () => {
    try {
      await conn?.close();
      await db?.close();
    } finally {
      await cluster?.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
  afterEach(() => {
    assert.equal(accounting().liveImports, base, 'nothing live after the test');
  });

  /** DuckDB's answer to `sql`, as sorted lines. */
  async function duckdb(sql: (t: string) => string): Promise<string[]> {
    await using ddb = new AdbcDatabase(DUCKDB.options());
    await using dconn = await ddb.connect();
    const out: string[] = [];
    for await (const batch of await dconn.queryStream(sql(duckdbParquet(dir)))) rowsOf(batch, out);
    return out.sort();
  }

  for (const q of QUERIES) {
    test(`${q.name}: the partitions read at once give DuckDB's rows over the same files${q.partitioned ? ', in several partitions' : ''}`, async (t) => {
      const { partitions } = await conn.executePartitions(q.ballista);
      t.diagnostic(`${partitions.length} partitions: ${q.ballista}`);
      if (q.partitioned) assert.ok(partitions.length > 1, `${partitions.length} partitions`);
      else assert.ok(partitions.length >= 1);
      const got: string[] = [];
      const perPartition = new Set<number>();
      for await (const { partition, batch } of await conn.readPartitions(partitions, { concurrency: partitions.length })) {
        perPartition.add(partition);
        rowsOf(batch, got);
      }
      const want = await duckdb(q.duckdb);
      assert.ok(want.length > 0, 'DuckDB has rows');
      assert.deepEqual(got.sort(), want);
      t.diagnostic(`${got.length} rows from ${perPartition.size} partitions with batches`);
    });
  }

  test('ordered, and bounded at 2 partitions in flight: the rows of readPartition one by one, in partition order', async () => {
    const { partitions } = await conn.executePartitions('SELECT id, v FROM t WHERE k = 3');
    assert.ok(partitions.length > 2, `${partitions.length} partitions`);
    const byOne: string[] = [];
    for (const d of partitions) for await (const batch of await conn.readPartition(d)) rowsOf(batch, byOne);
    const reader = await conn.readPartitions(partitions, { ordered: true, concurrency: 2 });
    const atOnce: string[] = [];
    let last = -1;
    for await (const { partition, batch } of reader) {
      assert.ok(partition >= last, `partition ${partition} after ${last}`);
      assert.ok(reader.inFlight <= 2, `${reader.inFlight} in flight`);
      last = partition;
      rowsOf(batch, atOnce);
    }
    assert.deepEqual(atOnce, byOne);
  });

  test("refusals are AdbcErrors with Ballista's message: bound parameters, INSERT", async () => {
    const params = await conn.query('SELECT id FROM t WHERE k = ?', tableFromArrays({ k: Int32Array.of(7) })).then(() => undefined, (e: unknown) => e);
    assert.ok(params instanceof AdbcError, String(params));
    assert.equal(params.status, AdbcStatus.NOT_IMPLEMENTED);
    assert.match(params.message, /do_put_prepared_statement_query has no default implementation/);
    const insert = await conn.execute('INSERT INTO t VALUES (1, 2, 3)').then(() => undefined, (e: unknown) => e);
    assert.ok(insert instanceof AdbcError, String(insert));
    assert.equal(insert.status, AdbcStatus.NOT_IMPLEMENTED);
    assert.match(insert.message, /Ballista Flight SQL does not support INSERT/);
    // The connection still works after both.
    const one = await conn.query('SELECT count(*) AS n FROM t');
    assert.equal(String(one.getChild('n')?.get(0)), String(FILES * ROWS_PER_FILE));
    one.release();
  });

  // Last: the cluster has one executor after it.
  test(`an executor killed in mid-read: an AdbcError within ${FAULT_BOUND_MS} ms, the other partitions released, nothing live`, { timeout: 120_000 }, async (t) => {
    // Half the rows, in about as many partitions as the filter above: several batches each.
    const { partitions } = await conn.executePartitions('SELECT id, v FROM t WHERE k < 50');
    assert.ok(partitions.length > 2, `${partitions.length} partitions`);
    const reader = await conn.readPartitions(partitions, { concurrency: 2 });
    let rows = 0;
    let killedAt = 0;
    const error = await (async () => {
      for await (const { batch } of reader) {
        rows += batch.numRows;
        if (killedAt === 0) {
          await cluster!.executors[1]!.kill();
          killedAt = performance.now();
        }
      }
    })().then(() => undefined, (e: unknown) => e);
    const after = performance.now() - killedAt;
    t.diagnostic(`${rows} rows before the error, which came ${after.toFixed(0)} ms after the kill: ${String(error)}`);
    assert.ok(error instanceof AdbcError, `an AdbcError, not ${String(error)}`);
    assert.equal(error.operation, 'readPartitions');
    assert.match(error.message, /^readPartitions: partition \d+ of \d+: /);
    assert.ok(error.cause instanceof AdbcError, "the partition's own error as cause");
    assert.ok(rows < (FILES * ROWS_PER_FILE) / 2, `${rows} rows read, not all`);
    assert.ok(after < FAULT_BOUND_MS, `the error came ${after.toFixed(0)} ms after the kill`);
    assert.equal(reader.released, true);
    assert.equal(accounting().liveImports, base, 'nothing live');
  });
});
