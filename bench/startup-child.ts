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
 * the parent).
 *
 * The flechette target (`target: 'flechette'`, the entry
 * arrow-device/flechette/adbc, a flechette Table) must load no apache-arrow:
 * before the job this child registers an in-thread resolve hook
 * (`module.registerHooks`, Node 22.15+; synchronous, no loader thread) that
 * records the package of every module resolved, `import` and `require`
 * alike, and reports them (`packages`); the parent fails the run if
 * apache-arrow is among them, or if @uwdata/flechette is not (a recorder that
 * saw nothing proves nothing). A bundled job has no imports to see: the
 * parent checks its bundle's inputs instead. `bench:startup -- --bundled` bundles `run` with the job's
 * module into one file instead (an application bundled as serverless
 * functions are), which passes that module to `run`: its load is then the
 * time from the process's start to the first line of the job.
 */

/** What the parent asks for. */
export type Job =
  | {
      kind: 'ours';
      driver: 'duckdb' | 'postgresql' | 'sqlite';
      /** The entry: arrow-device/adbc's (arrow-js, the default) or arrow-device/flechette/adbc's (`target: 'flechette'`). */
      entry: string;
      target?: 'flechette';
      library: string;
      entrypoint?: string;
      databaseOptions: Record<string, string>;
      sql: string;
    }
  | { kind: 'peer'; peer: '@duckdb/node-api' | 'pg' | 'node:sqlite'; uri?: string; sql: string }
  | {
      kind: 'load';
      entries: { name: string; specifier: string; require?: boolean }[];
      /** Record the packages resolved (the flechette load lines: the parent checks that no apache-arrow is among them). */
      record?: boolean;
    };

export interface ChildResult {
  /** Phase name to ms, in the order run. */
  phases: Record<string, number>;
  /** ms from the process's start to the end of the job. */
  total: number;
  sum?: number;
  /** The packages whose modules were resolved (the flechette target, not bundled): the parent checks that apache-arrow is not one. */
  packages?: string[];
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

/** The sum of a flechette table's one Float64 column, its fast path: `toArray()` (the batch's own Float64Array for one batch), then a loop. */
function sumFlechette(t: { getChildAt(i: number): { toArray(): ArrayLike<number> } | null }): number {
  const v = t.getChildAt(0)!.toArray();
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]!;
  return s;
}

/**
 * Records the package of every module this process resolves from here on (`import` and `require`):
 * an in-thread hook (`module.registerHooks`), so no loader thread starts. Returns the set it fills.
 */
function recordPackages(): Set<string> {
  const seen = new Set<string>();
  // process.getBuiltinModule (Node 22.3+): no ESM facade of node:module to build (its import reads every export).
  const { registerHooks } = (process as unknown as { getBuiltinModule(id: string): unknown }).getBuiltinModule('node:module') as {
    registerHooks(h: { resolve(s: string, c: unknown, next: (s: string, c: unknown) => { url: string }): { url: string } }): unknown;
  };
  registerHooks({
    resolve(specifier, context, next) {
      const r = next(specifier, context);
      // A file URL: '/' on every platform.
      const m = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(r.url);
      if (m) seen.add(m[1]!);
      return r;
    },
  });
  return seen;
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
    const seen = job.record ? recordPackages() : undefined;
    for (const e of job.entries) {
      // `require`: loaded as the library loads it (koffi's CommonJS build, by `require` on first use; its
      // ESM build is another copy of its JavaScript).
      if (e.require) await phase(e.name, async () => (await import('node:module')).createRequire(import.meta.url)(e.specifier));
      else await phase(e.name, () => import(e.specifier));
    }
    if (seen) return { phases, total: last, packages: [...seen].sort() };
  } else if (job.kind === 'ours' && job.target === 'flechette') {
    // The recorder first (not bundled: a bundle has no imports to see), before the job loads anything.
    const seen = loaded === undefined ? recordPackages() : undefined;
    const { AdbcDatabase } = await load(loaded, () => import(job.entry) as Promise<typeof import('../src/flechette/adbc.js')>);
    const db = await phase('open', () => new AdbcDatabase({ driver: job.library, entrypoint: job.entrypoint, databaseOptions: job.databaseOptions }));
    const conn = await phase('connect', () => db.connect());
    const table = await phase('query', () => conn.query(job.sql));
    sum = await phase('sum', () => sumFlechette(table));
    await phase('close', async () => {
      table.release();
      await conn.close();
      await db.close();
    });
    if (seen) return { phases, total: last, sum, packages: [...seen].sort() };
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
