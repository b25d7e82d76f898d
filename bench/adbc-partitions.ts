/**
 * The partitions line of `npm run bench:adbc`: one query over Parquet on a
 * distributed engine, Apache DataFusion Ballista (a scheduler and two
 * executors on 127.0.0.1, test/adbc/ballista.ts), whose answer comes in
 * several partitions, read two ways through the ADBC Flight SQL driver:
 *
 * - one by one: `readPartition` of each descriptor after the other, on one
 *   connection (what a caller without `readPartitions` writes);
 * - at once: `readPartitions` of every descriptor, `concurrency` the number
 *   of partitions, the connections it keeps from the warm-up round (a
 *   connection costs tens of milliseconds to open against Ballista: paid
 *   once per connection, not per read).
 *
 * Each round plans a query anew (`executePartitions`, off the clock: the
 * scheduler runs the whole job before it answers) for each way, the two
 * ways alternating which goes first; medians of BENCH_REPS rounds after one
 * warm-up. Prints `partitions ballista <n>: at once X ms, one by one Y ms,
 * ratio R` (at once over one by one; goal at most 0.3 for the first query,
 * issue 46) and the rows per second of each, per query. Skips with the reason where Ballista is not set
 * up (`npm run setup:ballista`).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdbcDatabase } from '../src/adbc/index.js';
import { ballistaMissing, startBallista, writeParquet } from '../test/adbc/ballista.js';
import { FLIGHTSQL } from '../test/adbc/drivers.js';

const FILES = 4;
const ROWS_PER_FILE = 1_000_000;
/**
 * The queries: issue 46's (a hundredth of the rows, 40,000, in 16 small partitions, where a read one by
 * one is mostly waiting on the scheduler and the executor, which reading at once overlaps), then ten times
 * the rows (400,000, larger partitions: more of each read is decoding and importing, on 2 shared cores).
 */
const QUERIES = ['SELECT id, v FROM t WHERE k = 7', 'SELECT id, v FROM t WHERE k < 10'];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const f1 = (x: number): string => x.toFixed(1);

export async function benchPartitions(reps: number): Promise<void> {
  const why = FLIGHTSQL.missing ?? ballistaMissing();
  if (why) {
    console.log(`partitions ballista: skipped (${why})`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), 'arrow-device-bench-parquet-'));
  const cluster = await startBallista();
  try {
    await writeParquet(dir, FILES, ROWS_PER_FILE);
    await using db = new AdbcDatabase(FLIGHTSQL.options(cluster.uri));
    await using conn = await db.connect();
    await conn.execute(`CREATE EXTERNAL TABLE t STORED AS PARQUET LOCATION '${dir}/'`);
    for (const [q, sql] of QUERIES.entries()) {
      let n = 0;
      let rows = 0;
      const oneByOne = async (): Promise<number> => {
        const { partitions } = await conn.executePartitions(sql);
        n = partitions.length;
        const t0 = performance.now();
        let r = 0;
        for (const d of partitions) for await (const batch of await conn.readPartition(d)) r += batch.numRows;
        const ms = performance.now() - t0;
        rows = r;
        return ms;
      };
      const atOnce = async (): Promise<number> => {
        const { partitions } = await conn.executePartitions(sql);
        const t0 = performance.now();
        let r = 0;
        for await (const { batch } of await conn.readPartitions(partitions, { concurrency: partitions.length })) r += batch.numRows;
        const ms = performance.now() - t0;
        if (r !== rows) throw new Error(`readPartitions read ${r} rows, readPartition ${rows}`);
        return ms;
      };
      const plan: number[] = [];
      const timePlan = async (): Promise<void> => {
        const t0 = performance.now();
        await conn.executePartitions(sql);
        plan.push(performance.now() - t0);
      };
      await oneByOne();
      await atOnce(); // warm-up: opens the connections readPartitions keeps
      const one: number[] = [];
      const all: number[] = [];
      for (let i = 0; i < reps; i++) {
        if (i % 2 === 0) {
          one.push(await oneByOne());
          all.push(await atOnce());
        } else {
          all.push(await atOnce());
          one.push(await oneByOne());
        }
        await timePlan();
      }
      const a = median(all);
      const o = median(one);
      const ratio = a / o;
      const perSec = (ms: number): string => `${Math.round(rows / (ms / 1000)).toLocaleString('en')} rows/s`;
      const goal = q === 0 ? ` (goal <= 0.30: ${ratio <= 0.3 ? 'met' : 'NOT met'})` : ' (the goal is the query above\'s)';
      console.log(
        `partitions ballista ${n}: at once ${f1(a)} ms, one by one ${f1(o)} ms, ratio ${ratio.toFixed(2)}${goal}; ` +
          `${perSec(a)} at once, ${perSec(o)} one by one`,
      );
      console.log(
        `partitions ballista ${n}: ${rows.toLocaleString('en')} rows of ${(FILES * ROWS_PER_FILE).toLocaleString('en')} (${sql}; ${FILES} Parquet files, ` +
          `a scheduler and 2 executors on loopback), medians of ${reps}; at once min/max ${f1(Math.min(...all))}/${f1(Math.max(...all))} ms, ` +
          `one by one ${f1(Math.min(...one))}/${f1(Math.max(...one))} ms; planning (executePartitions, the whole job) ${f1(median(plan))} ms; ` +
          `UV_THREADPOOL_SIZE ${process.env.UV_THREADPOOL_SIZE ?? 'unset (4)'}`,
      );
    }
  } finally {
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
