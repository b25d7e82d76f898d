/**
 * `AdbcConnection.readPartitions` (src/adbc/partitions.ts) against a real
 * Flight SQL server: arrow-go's example server over SQLite
 * (test/adbc/flightsql.ts). That server answers a query with one endpoint,
 * so the partitions here are the endpoints of several queries, each a
 * series of integers in a range of its own (partition q holds q * STRIDE +
 * 0..n-1), so that every row says which partition it came from; the server
 * sends them in batches of 1024 rows. A partition that fails in mid-stream
 * is a query SQLite fails at a row (`json('x{')`: "malformed JSON") after
 * some batches went out. test/adbc/ballista.test.ts reads a distributed
 * engine's own partitions (16 of one query) the same way.
 *
 * What is proven: the rows equal those of `readPartition` one by one, each
 * batch tagged with its partition; the bound (partitions in flight, live
 * streams and batches); partition order with `ordered`; one failure cancels
 * and releases the others and is thrown once, typed, naming the partition
 * (also when the other partition's server never answers: only the cancel
 * ends that wait); `break` releases every stream and connection; the
 * connections kept after a clean read and closed after a failure; bad
 * arguments and descriptors. After every test nothing is live and the
 * database is released at once on close (every connection it opened closed).
 *
 * Skips with the reason where the driver or the server is missing;
 * ADBC_REQUIRED=1 (npm run test:adbc) makes that a failure.
 */
import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import { accounting, type ImportedRecordBatch } from '../../src/index.js';
import { AdbcConnection, AdbcDatabase, AdbcError, AdbcStatus } from '../../src/adbc/index.js';
import { FLIGHTSQL } from './drivers.js';
import { flightSqlServerMissing, startFlightSql, type FlightSqlServer } from './flightsql.js';

const missing = FLIGHTSQL.missing ?? flightSqlServerMissing();
if (missing && process.env.ADBC_REQUIRED === '1') throw new Error(`ADBC_REQUIRED=1: ${missing}`);

/** Partition q's values start at q * STRIDE. */
const STRIDE = 1_000_000;
/** Rows per good partition: 20 batches of 1024 and a short one, so that partitions are read side by side for a while. */
const ROWS = 20_000;

/** SQLite: the integers q * STRIDE + 0..n-1 as one BIGINT column `i`. */
const series = (q: number, n: number): string =>
  `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ${n - 1}) SELECT i + ${q * STRIDE} AS i FROM s`;
/** A query SQLite fails after `good` rows (json() of malformed text), with some batches already sent. */
const failing = (good: number): string =>
  `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ${good * 2}) SELECT CASE WHEN i < ${good} THEN i ELSE json('x{') END AS i FROM s`;

function ints(batch: ImportedRecordBatch): number[] {
  const col = batch.getChild('i');
  assert.ok(col, 'column i');
  return Array.from(col.toArray() as ArrayLike<bigint | number>, Number);
}

describe('arrow-device/adbc readPartitions: Flight SQL', { skip: missing }, () => {
  let server: FlightSqlServer;
  let db: AdbcDatabase;
  let conn: AdbcConnection;
  let base: number;

  before(async () => {
    server = await startFlightSql();
  });
  after(async () => {
    await server?.stop();
  });

  // A database per test, so that "every connection closed" is `db.released` after db.close().
  const open = async (): Promise<void> => {
    base = accounting().liveImports;
    db = new AdbcDatabase(FLIGHTSQL.options(server.uri));
    conn = await db.connect();
  };
  afterEach(async () => {
    await conn?.close();
    await db?.close();
    assert.equal(db.released, true, 'the database released: every connection readPartitions opened was closed');
    assert.equal(accounting().liveImports, base, 'nothing live');
  });

  /** One descriptor per query (the test server gives one endpoint each). */
  async function descriptors(queries: string[]): Promise<Uint8Array[]> {
    const out: Uint8Array[] = [];
    for (const sql of queries) {
      const { partitions } = await conn.executePartitions(sql);
      assert.equal(partitions.length, 1, "the test server's one endpoint");
      out.push(partitions[0]!);
    }
    return out;
  }

  test('an AbortSignal stops readPartition and readPartitions in mid-read: the reason at once, every stream and connection released', async () => {
    await open();
    const parts = await descriptors([0, 1, 2].map((q) => series(q, ROWS)));
    const one = new AbortController();
    let batches = 0;
    const e1 = await (async () => {
      try {
        for await (const b of await conn.readPartition(parts[0]!, { signal: one.signal })) {
          assert.ok(b.numRows > 0);
          if (++batches === 2) one.abort();
        }
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.ok(e1 instanceof DOMException && e1.name === 'AbortError', `readPartition: the signal's reason, got ${String(e1)}`);
    assert.equal(batches, 2);
    const many = new AbortController();
    const reason = new Error('the client went away');
    const reader = await conn.readPartitions(parts, { signal: many.signal, concurrency: 3 });
    let seen = 0;
    const e2 = await (async () => {
      try {
        for await (const { batch } of reader) {
          assert.ok(batch.numRows > 0);
          if (++seen === 3) many.abort(reason);
        }
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.equal(e2, reason, 'readPartitions: the signal\'s reason');
    await reader.release(); // waits for the release the abort began
    assert.equal(reader.released, true, 'every stream and connection of the reader released');
    // An aborted signal starts nothing.
    await assert.rejects(conn.readPartitions(parts, { signal: AbortSignal.abort() }), (e: unknown) => e instanceof DOMException && e.name === 'AbortError');
  });

  test('the rows of every partition, each batch tagged with its partition, equal readPartition one by one', async () => {
    await open();
    const sizes = [ROWS, 1, 5000, ROWS, 0 + 2048, 3];
    const parts = await descriptors(sizes.map((n, q) => series(q, n)));
    const byOne = sizes.map(() => [] as number[]);
    for (const [q, d] of parts.entries()) for await (const b of await conn.readPartition(d)) byOne[q]!.push(...ints(b));
    const atOnce = sizes.map(() => [] as number[]);
    const reader = await conn.readPartitions(parts);
    for await (const { partition, batch } of reader) {
      assert.equal(reader.schema?.fields[0]?.name, 'i');
      const values = ints(batch);
      assert.ok(values.every((v) => Math.floor(v / STRIDE) === partition), `every row of a batch tagged ${partition} is of partition ${partition}`);
      atOnce[partition]!.push(...values);
    }
    assert.deepEqual(atOnce, byOne);
    assert.deepEqual(atOnce.map((v) => v.length), sizes);
    assert.equal(reader.released, true, 'released at the end');
  });

  test('bounded: at most `concurrency` partitions in flight, each with at most one batch outstanding', async () => {
    await open();
    const concurrency = 2;
    const parts = await descriptors([0, 1, 2, 3, 4, 5].map((q) => series(q, ROWS)));
    const reader = await conn.readPartitions(parts, { concurrency });
    let maxInFlight = 0;
    let maxLive = 0;
    const seen = new Set<number>();
    for await (const { partition } of reader) {
      seen.add(partition);
      maxInFlight = Math.max(maxInFlight, reader.inFlight);
      // Let every worker thread that can deliver do so before counting: a reader without the bound
      // would have more streams and batches live by then.
      await new Promise((resolve) => setImmediate(resolve));
      maxLive = Math.max(maxLive, accounting().liveImports - base);
    }
    assert.equal(seen.size, parts.length, 'every partition read');
    assert.equal(maxInFlight, concurrency, 'the bound reached, never passed');
    // Live imports: one stream per partition in flight, and at most one batch each.
    assert.ok(maxLive <= 2 * concurrency, `${maxLive} imports live at most, bound ${2 * concurrency}`);
  });

  test('ordered: every batch of partition 0, then of 1, ..., the rows in partition order', async () => {
    await open();
    const sizes = [ROWS, 3000, ROWS, 1];
    const parts = await descriptors(sizes.map((n, q) => series(q, n)));
    const order: number[] = [];
    const rows: number[] = [];
    for await (const { partition, batch } of await conn.readPartitions(parts, { ordered: true, concurrency: 4 })) {
      if (order.at(-1) !== partition) order.push(partition);
      rows.push(...ints(batch));
    }
    assert.deepEqual(order, [0, 1, 2, 3], 'each partition whole, in order');
    assert.deepEqual(rows, sizes.flatMap((n, q) => Array.from({ length: n }, (_, i) => q * STRIDE + i)));
  });

  test('a partition failing in mid-stream: the others cancelled and released, one AdbcError naming it, thrown once', async () => {
    await open();
    // Partition 2 fails after 5000 rows; 0 and 1 are five times longer, 3-5 wait for a free place.
    const long = 5 * ROWS;
    const parts = await descriptors([series(0, long), series(1, long), failing(5000), series(3, ROWS), series(4, ROWS), series(5, ROWS)]);
    const reader = await conn.readPartitions(parts, { concurrency: 3 });
    const rows = parts.map(() => 0);
    const error = await (async () => {
      for await (const { partition, batch } of reader) rows[partition]! += batch.numRows;
    })().then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof AdbcError, String(error));
    assert.equal(error.operation, 'readPartitions');
    assert.match(error.message, /^readPartitions: partition 2 of 6: .*malformed JSON/);
    assert.ok(error.cause instanceof AdbcError, "the partition's own error as cause");
    assert.equal(error.status, error.cause.status);
    assert.equal(reader.released, true, 'every stream and connection released when the error is thrown');
    assert.equal(accounting().liveImports, base, 'nothing live when the error is thrown');
    assert.ok(rows[0]! < long && rows[1]! < long, `the partitions beside it stopped (${rows[0]} and ${rows[1]} of ${long} rows read)`);
    assert.deepEqual(rows.slice(3), [0, 0, 0], 'the partitions after it never started');
    assert.deepEqual(await reader.next(), { done: true, value: undefined }, 'thrown once, then the end');
  });

  test('break releases every stream and connection', async () => {
    await open();
    const parts = await descriptors([0, 1, 2].map((q) => series(q, ROWS)));
    const reader = await conn.readPartitions(parts, { concurrency: 3 });
    let n = 0;
    for await (const { batch } of reader) {
      n += batch.numRows;
      break;
    }
    assert.equal(n, 1024);
    assert.equal(reader.released, true);
    assert.equal(accounting().liveImports, base, 'no stream or batch live after the loop');
    // afterEach: db.close() releases the database at once only if every partition connection was closed.
  });

  test('a kept batch outlives the next step and the reader; the others are released at the next step', async () => {
    await open();
    const parts = await descriptors([series(0, 3000), series(1, 3000)]);
    const reader = await conn.readPartitions(parts);
    let kept: ImportedRecordBatch | undefined;
    for await (const { batch } of reader) {
      if (!kept) kept = reader.keep(batch);
    }
    assert.ok(kept);
    assert.equal(accounting().liveImports, base + 1, 'only the kept batch');
    assert.equal(ints(kept).length, 1024);
    kept.release();
  });

  test('arguments and descriptors: a bad concurrency is INVALID_ARGUMENT; no descriptors give no batch; a descriptor the driver cannot parse fails the reader', async () => {
    await open();
    for (const concurrency of [0, 1.5, -1]) {
      await assert.rejects(conn.readPartitions([], { concurrency }), (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.INVALID_ARGUMENT && /concurrency/.test(e.message));
    }
    const empty = await conn.readPartitions([]);
    assert.deepEqual(await empty.next(), { done: true, value: undefined });
    assert.equal(empty.released, true);
    const good = await descriptors([series(0, ROWS)]);
    const bad = await conn.readPartitions([good[0]!, Uint8Array.of(1, 2, 3)]);
    const err = await (async () => {
      for await (const _ of bad);
    })().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof AdbcError, String(err));
    assert.equal(err.status, AdbcStatus.INVALID_ARGUMENT, err.message);
    assert.match(err.message, /^readPartitions: partition 1 of 2: /);
    // The connection that asked is still usable: readPartitions never ran on it.
    const t = await conn.query('SELECT 1 AS x');
    assert.equal(t.numRows, 1);
    t.release();
  });

  test('connections: at most `concurrency` opened, reused by the next call after a clean read, not after a failure', async () => {
    await open();
    let opened = 0;
    const connect = db.connect.bind(db);
    db.connect = async () => {
      opened++;
      return connect();
    };
    const parts = await descriptors([0, 1, 2, 3].map((q) => series(q, 3000)));
    const drain = async (descs: Uint8Array[]): Promise<void> => {
      for await (const _ of await conn.readPartitions(descs, { concurrency: 2 }));
    };
    await drain(parts);
    assert.equal(opened, 2, 'one connection per partition in flight, reused from partition to partition');
    await drain(parts);
    assert.equal(opened, 2, 'the second call reuses them');
    // One partition, which fails: it takes one of the two kept connections, which is then closed.
    await assert.rejects(drain([Uint8Array.of(1, 2, 3)]), AdbcError);
    await drain(parts);
    assert.equal(opened, 3, 'the connection of the failed partition was closed, not kept: one more opened');
  });

  // Last: the server keeps computing the endless query it was asked for until it is stopped (after()).
  test('a failure cancels a partition whose server never answers: the error still comes, nothing live (a hang without the cancel)', { timeout: 60_000 }, async () => {
    await open();
    // A query that never yields a row: the server sends nothing, and the call reading it waits until cancelled.
    const endless = 'WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s) SELECT i FROM s WHERE i < 0';
    const parts = await descriptors([endless, failing(5000)]);
    const error = await (async () => {
      const reader = await conn.readPartitions(parts, { concurrency: 2 });
      for await (const { partition } of reader) assert.equal(partition, 1);
    })().then(() => undefined, (e: unknown) => e);
    assert.ok(error instanceof AdbcError, String(error));
    assert.match(error.message, /^readPartitions: partition 1 of 2: .*malformed JSON/);
    assert.equal(accounting().liveImports, base, 'nothing live when the error is thrown');
  });
});
