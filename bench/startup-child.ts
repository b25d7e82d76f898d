/**
 * One fresh process of `npm run bench:startup` (bench/startup.bench.ts): a
 * job as a command-line tool or a serverless function runs it once, timed by
 * phase. This file imports nothing at load, so what a phase loads is what
 * the job's own imports cost; the time since process start
 * (`performance.now()`, whose origin is the process's start) is the total.
 *
 *   node startup-child.js '<json Job>'
 *
 * Prints one JSON line: the phases in ms, the total, and the sum (checked by
 * the parent). `bench:startup -- --bundled` bundles `run` with the job's
 * module into one file instead (an application bundled as serverless
 * functions are), which passes that module to `run`: its load is then the
 * time from the process's start to the first line of the job.
 */

/** What the parent asks for. */
export type Job =
  | { kind: 'ours'; driver: 'duckdb' | 'postgresql' | 'sqlite'; entry: string; library: string; entrypoint?: string; databaseOptions: Record<string, string>; sql: string }
  | { kind: 'peer'; peer: '@duckdb/node-api' | 'pg' | 'node:sqlite'; uri?: string; sql: string }
  | { kind: 'load'; entries: { name: string; specifier: string; require?: boolean }[] };

export interface ChildResult {
  /** Phase name to ms, in the order run. */
  phases: Record<string, number>;
  /** ms from the process's start to the end of the job. */
  total: number;
  sum?: number;
}

const phases: Record<string, number> = {};
let last = performance.now();
/** Times one phase: from the end of the previous one to its end. */
async function phase<T>(name: string, f: () => Promise<T> | T): Promise<T> {
  const t0 = performance.now();
  const v = await f();
  const t1 = performance.now();
  phases[name] = t1 - t0;
  last = t1;
  return v;
}

/** The column's sum over each batch's values (a query's result is one Float64 column). */
function sumTable(t: { getChildAt(i: number): { data: readonly { values: unknown; length: number }[] } | null }): number {
  let s = 0;
  for (const d of t.getChildAt(0)!.data) {
    const v = d.values as Float64Array;
    for (let i = 0; i < d.length; i++) s += v[i]!;
  }
  return s;
}

/** The subset of node:sqlite used here (@types/node 20 has no types for it). */
interface SqliteDatabase {
  prepare(sql: string): { all(): Record<string, unknown>[] };
  close(): void;
}

/**
 * The module a job loads: imported by `f` and timed as the phase `load`, or
 * `loaded` already (a bundled job), its load the time since the process
 * started.
 */
async function load<T>(loaded: unknown, f: () => Promise<T>): Promise<T> {
  if (loaded === undefined) return phase('load', f);
  last = phases.load = performance.now();
  return loaded as T;
}

export async function run(job: Job, loaded?: unknown): Promise<ChildResult> {
  let sum: number | undefined;
  if (job.kind === 'load') {
    for (const e of job.entries) {
      // `require`: loaded as the library loads it (koffi's CommonJS build, by `require` on first use; its
      // ESM build is another copy of its JavaScript).
      if (e.require) await phase(e.name, async () => (await import('node:module')).createRequire(import.meta.url)(e.specifier));
      else await phase(e.name, () => import(e.specifier));
    }
  } else if (job.kind === 'ours') {
    const { AdbcDatabase } = await load(loaded, () => import(job.entry) as Promise<typeof import('../src/adbc/index.js')>);
    const db = await phase('open', () => new AdbcDatabase({ driver: job.library, entrypoint: job.entrypoint, databaseOptions: job.databaseOptions }));
    const conn = await phase('connect', () => db.connect());
    const table = await phase('query', () => conn.query(job.sql));
    sum = await phase('sum', () => sumTable(table));
    await phase('close', async () => {
      table.release();
      await conn.close();
      await db.close();
    });
  } else if (job.peer === '@duckdb/node-api') {
    const { DuckDBInstance } = await load(loaded, () => import('@duckdb/node-api'));
    const instance = await phase('open', () => DuckDBInstance.create(':memory:'));
    const conn = await phase('connect', () => instance.connect());
    const reader = await phase('query', () => conn.runAndReadAll(job.sql));
    sum = await phase('sum', () => {
      let s = 0;
      for (const x of reader.getColumnsJS()[0] as number[]) s += x;
      return s;
    });
    await phase('close', () => {
      conn.closeSync();
      instance.closeSync();
    });
  } else if (job.peer === 'pg') {
    const { default: pg } = await load(loaded, () => import('pg'));
    const client = await phase('open', () => new pg.Client({ connectionString: job.uri }));
    await phase('connect', () => client.connect());
    const r = await phase('query', () => client.query<unknown[]>({ text: job.sql, rowMode: 'array' }));
    sum = await phase('sum', () => {
      let s = 0;
      for (const row of r.rows) s += row[0] as number;
      return s;
    });
    await phase('close', () => client.end());
  } else {
    const { DatabaseSync } = await load(loaded, () => import('node:sqlite' as string) as Promise<{ DatabaseSync: new (path: string) => SqliteDatabase }>);
    const db = await phase('open', () => new DatabaseSync(':memory:'));
    // node:sqlite opens and connects in one step; its connect phase is empty, so the phases line up.
    await phase('connect', () => undefined);
    const rows = await phase('query', () => db.prepare(job.sql).all());
    sum = await phase('sum', () => {
      let s = 0;
      for (const row of rows) s += row.x as number;
      return s;
    });
    await phase('close', () => db.close());
  }
  return { phases, total: last, sum };
}

/** Prints `r`'s result as the parent reads it. */
export function report(r: Promise<ChildResult>): void {
  r.then(
    (x) => console.log(JSON.stringify(x)),
    (e: unknown) => {
      console.error(e);
      process.exitCode = 1;
    },
  );
}

// Run directly, the job is the first argument; a bundled job's is `--bundled`, and it calls `run` itself.
const arg = process.argv[2];
if (arg === undefined) throw new Error('usage: startup-child.js <json job>');
if (arg !== '--bundled') report(run(JSON.parse(arg) as Job));
