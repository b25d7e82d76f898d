/**
 * The first result in a fresh process (issue 47): what a command-line tool,
 * a script, a test or a serverless function pays to run one small query,
 * against what a JavaScript user picks instead.
 *
 *   npm run bench:startup [-- --processes N] [-- --files] [-- --lib <dir>] [-- --only duckdb,postgresql,sqlite] [-- --targets arrow-js,flechette] [-- --ab <git ref>[,<git ref>]] [-- --compile-cache] [-- --bundled]
 *
 * The job is README quick start 1's: open the database, query 1,000 rows of
 * one float64 column (`range::DOUBLE * 0.5` in DuckDB's words), sum the
 * column, close. Ours goes through `arrow-device/adbc` (`conn.query`, an
 * arrow-js Table); the peers are `@duckdb/node-api` (the same libduckdb.so,
 * in memory), `pg` (PostgreSQL, the suite's server on loopback,
 * test/adbc/postgres.ts) and `node:sqlite` (in memory). Each run is a fresh
 * process (bench/startup-child.ts, which imports nothing before the job), the
 * two sides in turn, the first of each pair alternating, N each (default 10).
 * Each line: the medians of the time from the process's start to the end of
 * the job (`ours X ms, <peer> Y ms`) and the median of the pair ratios
 * (ours / the peer); then the medians of each phase, and the first query on
 * its own (ours: the query and the import of its 1,000 rows into arrow-js;
 * the peer: its query).
 *
 * Before them, module loading alone, in fresh processes too: apache-arrow,
 * koffi, `arrow-device` and `arrow-device/adbc` loaded one after the other
 * (each figure what that import adds to those before it), and
 * `arrow-device/adbc` on its own after apache-arrow and koffi. koffi is
 * loaded as the library loads it, by `require` (its CommonJS build; its ESM
 * build is a second copy of its JavaScript), and the library loads it on
 * first use, not at import: in a job its load counts in `open`.
 *
 * The library measured is what the package ships: `dist/`, bundled
 * (tools/bundle.mjs; the npm script runs `npm run build` first); `--files`
 * measures the tsconfig.run.json build instead (.build/run/src, one file per
 * module, as `dist/` was before it was bundled); `--lib <dir>` a library
 * folder given by hand (another commit's build, for a before figure). `--ab <ref>[,<ref>]` measures that commit's
 * build (bench/ab.ts) against the second one's or the working tree's instead of the peers: the
 * loads and each driver's job, in alternating fresh processes, pair-ratio
 * medians (A / B); each ref as its tsconfig.run.json build (one file per
 * module). `--ab layouts` compares the working tree's two layouts instead:
 * one file per module (A) against bundled `dist/` (B); `--ab compile-cache`
 * bundled `dist/` without (A) and with (B) the compile cache; `--ab
 * lib:<dir>,lib:<dir>` two library folders given by hand.
 *
 * `--bundled` runs each job as an application bundled into one file with
 * esbuild, as command-line tools and serverless functions often ship (ours:
 * the job with apache-arrow and the library's adbc entry; the peers' with
 * theirs; native addons and koffi stay outside): Node's loader then reads one
 * file where the package layouts make it read many (apache-arrow's alone is
 * some 160). Each side's `load` is then the time from the process's start to
 * the job's first line; the load lines are not printed.
 *
 * PostgreSQL runs a second time as `postgresql builtin-types`: the same job with
 * `adbc.postgresql.type_resolver_mode=builtin` (docs/adbc.md, "Opening the
 * database"), the driver's own table of PostgreSQL's types instead of its
 * catalog read at `AdbcDatabaseInit`; its lines say `builtin-types` after the
 * driver, and `--ab` leaves it out.
 *
 * The flechette target (issue 52): the same job through
 * `arrow-device/flechette/adbc` (`conn.query` gives a flechette Table; the
 * sum is `toArray()` and a loop), against the same peers, in fresh processes
 * too: `startup <driver> flechette vs <peer>: ...`, its phases and its first
 * query, each line as the arrow-js one with `flechette` after the driver.
 * Its processes load no apache-arrow: the child records every package
 * resolved (an in-thread resolve hook, bench/startup-child.ts) and the run
 * fails if apache-arrow is among them or @uwdata/flechette is not (bundled:
 * the bundle's inputs are checked). Its load lines: `load @uwdata/flechette
 * X ms, koffi Y ms, arrow-device/flechette/adbc Z ms` (each on top of those
 * before it) and `arrow-device/flechette/adbc` first in a process, with the
 * flechette it imports. `--targets arrow-js,flechette` picks the targets
 * (default both); the flechette lines are left out of `--ab`, and where the
 * build has no flechette entry.
 *
 * `--compile-cache` runs every child with Node's compile cache on
 * (`NODE_COMPILE_CACHE`, Node 22.1+, a directory under .build/ made empty
 * first, then filled by one untimed run of each job): what an application
 * that turns it on sees from its second start (docs/performance.md). The
 * library never turns it on itself.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DUCKDB, POSTGRESQL, SQLITE, type DriverName } from '../test/adbc/drivers.js';
import { postgresMissing, startPostgres } from '../test/adbc/postgres.js';
import { abBuilds, buildRef, median, pairRatio, workingTree, type Build } from './ab.js';
import type { ChildResult, Job } from './startup-child.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = existsSync(join(here, '..', 'package.json')) ? join(here, '..') : join(here, '..', '..', '..');
const require = createRequire(import.meta.url);
const CHILD = join(here, 'startup-child.js');
const ROWS = 1000;
/** The sum of i * 0.5 over i = 0..ROWS-1: every run's sum is checked against it. */
const EXPECTED = (0.5 * ROWS * (ROWS - 1)) / 2;

const option = (name: string): string | undefined => {
  const at = process.argv.indexOf(name);
  return at > 0 ? process.argv[at + 1] : undefined;
};
const PROCESSES = Number(option('--processes') ?? 10);
const ONLY = option('--only')?.split(',');
const AB = option('--ab');
const DIST = !process.argv.includes('--files');
const LIB = option('--lib');
const COMPILE_CACHE = process.argv.includes('--compile-cache') ? join(root, '.build', 'compile-cache') : undefined;
const BUNDLED = process.argv.includes('--bundled');
const TARGETS = option('--targets')?.split(',') ?? ['arrow-js', 'flechette'];
for (const t of TARGETS) if (t !== 'arrow-js' && t !== 'flechette') throw new Error(`--targets: unknown target ${t} (arrow-js, flechette)`);
const ARROWJS = TARGETS.includes('arrow-js');
const FLECHETTE = TARGETS.includes('flechette');
const warmed = new Set<string>();
/** The peers' modules (bench/startup-child.ts imports each). */
const PEERS = ['@duckdb/node-api', 'pg', 'node:sqlite'];
/** `--bundled`: each job's bundle, by the job's JSON. */
const bundles = new Map<string, string>();
/** `--bundled`: the packages each flechette job's bundle was made of (its esbuild metafile's inputs), by the job's JSON. */
const bundleInputs = new Map<string, string[]>();

const f1 = (x: number): string => x.toFixed(1);
const f2 = (x: number): string => x.toFixed(2);

/** One fresh process running `job`; `cache`: with Node's compile cache in that directory. */
function child(job: Job, cache: string | undefined = COMPILE_CACHE): ChildResult {
  const arg = JSON.stringify(job);
  const env = cache ? { ...process.env, NODE_COMPILE_CACHE: cache } : process.env;
  const bundle = bundles.get(arg);
  const args = ['--disable-warning=ExperimentalWarning', ...(bundle === undefined ? [CHILD, arg] : [bundle, '--bundled', arg])];
  // With the compile cache, the first run of a job fills it, untimed: the runs measured read it.
  if (cache && !warmed.has(arg)) {
    warmed.add(arg);
    spawnSync(process.execPath, args, { encoding: 'utf8', env });
  }
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', env });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`startup child ${JSON.stringify(job)} failed (status ${r.status}):\n${r.stderr}${r.stdout}`);
  const out = JSON.parse(line) as ChildResult;
  if (out.sum !== undefined && out.sum !== EXPECTED) throw new Error(`startup child ${JSON.stringify(job)}: the sum is ${out.sum}, expected ${EXPECTED}`);
  if (flechetteJob(job)) checkNoArrow(job, bundle === undefined ? out.packages : bundleInputs.get(arg));
  return out;
}

/** A job of the flechette target: its processes must load no apache-arrow. */
const flechetteJob = (job: Job): boolean => (job.kind === 'ours' && job.target === 'flechette') || (job.kind === 'load' && job.record === true);

/**
 * Fails unless `packages` (what a flechette job's process resolved, or its bundle was made of) has
 * @uwdata/flechette (else the recorder saw nothing, and its silence proves nothing) and no apache-arrow.
 */
function checkNoArrow(job: Job, packages: string[] | undefined): void {
  const what = `startup child ${JSON.stringify(job)}`;
  if (!packages?.includes('@uwdata/flechette')) throw new Error(`${what}: the package recorder did not see @uwdata/flechette (it saw ${packages?.join(', ') || 'nothing'})`);
  if (packages.includes('apache-arrow')) throw new Error(`${what}: apache-arrow was loaded (packages: ${packages.join(', ')})`);
}

/** N runs of each job, in turn, the first of each pair alternating. */
function alternate(a: Job, b: Job, cacheB: string | undefined = COMPILE_CACHE): [ChildResult[], ChildResult[]] {
  const ra: ChildResult[] = [];
  const rb: ChildResult[] = [];
  for (let i = 0; i < PROCESSES; i++) {
    if (i % 2 === 0) {
      ra.push(child(a));
      rb.push(child(b, cacheB));
    } else {
      rb.push(child(b, cacheB));
      ra.push(child(a));
    }
  }
  return [ra, rb];
}

const phase = (rs: ChildResult[], name: string): number => median(rs.map((r) => r.phases[name] ?? 0));
const phases = (rs: ChildResult[]): string =>
  Object.keys(rs[0]!.phases)
    .map((p) => `${p === 'query' ? 'query+import' : p} ${f1(phase(rs, p))}`)
    .join(', ');
const peerPhases = (rs: ChildResult[]): string =>
  Object.keys(rs[0]!.phases)
    .map((p) => `${p} ${f1(phase(rs, p))}`)
    .join(', ');

/** A build's entries as file URLs: `arrow-device`, `arrow-device/adbc`, and `arrow-device/flechette/adbc` where the build has it. */
interface Entries {
  index: string;
  adbc: string;
  flechetteAdbc?: string;
}

/** The entries of a library folder (dist/, or a build's src/). */
function entriesIn(base: string): Entries {
  const flechette = join(base, 'flechette', 'adbc.js');
  return {
    index: pathToFileURL(join(base, 'index.js')).href,
    adbc: pathToFileURL(join(base, 'adbc', 'index.js')).href,
    ...(existsSync(flechette) ? { flechetteAdbc: pathToFileURL(flechette).href } : {}),
  };
}

/** The entries of a build: `arrow-device` and `arrow-device/adbc` (and `arrow-device/flechette/adbc`) as file URLs. */
function entries(build: Build | 'dist'): Entries {
  const base = build === 'dist' ? join(root, 'dist') : join(build.run, 'src');
  const index = join(base, 'index.js');
  if (!existsSync(index)) throw new Error(`${index} is missing${build === 'dist' ? ': run `npm run build` first' : ''}`);
  return entriesIn(base);
}

/** `--lib <dir>`: the entries of a library folder given by hand (another build's src/ or dist/: a before figure). */
function libEntries(dir: string): Entries {
  const index = join(dir, 'index.js');
  if (!existsSync(index)) throw new Error(`--lib ${dir}: no index.js there`);
  return entriesIn(dir);
}

/**
 * The flechette target's load jobs: @uwdata/flechette, koffi (as the library loads it) and
 * `arrow-device/flechette/adbc`, one after the other; and the entry first in a process, with the
 * flechette it imports (koffi loads on first use). Both record what they resolve: no apache-arrow.
 */
function flechetteLoadJobs(entry: string): { chain: Job; first: Job } {
  return {
    chain: {
      kind: 'load',
      record: true,
      entries: [
        { name: '@uwdata/flechette', specifier: '@uwdata/flechette' },
        { name: 'koffi', specifier: 'koffi', require: true },
        { name: 'arrow-device/flechette/adbc', specifier: entry },
      ],
    },
    first: { kind: 'load', record: true, entries: [{ name: 'arrow-device/flechette/adbc', specifier: entry }] },
  };
}

function loadJobs(e: { index: string; adbc: string }): { chain: Job; alone: Job } {
  return {
    chain: {
      kind: 'load',
      entries: [
        { name: 'apache-arrow', specifier: 'apache-arrow' },
        { name: 'koffi', specifier: 'koffi', require: true },
        { name: 'arrow-device', specifier: e.index },
        { name: 'arrow-device/adbc', specifier: e.adbc },
      ],
    },
    alone: {
      kind: 'load',
      entries: [
        { name: 'apache-arrow', specifier: 'apache-arrow' },
        { name: 'koffi', specifier: 'koffi', require: true },
        { name: 'arrow-device/adbc', specifier: e.adbc },
      ],
    },
  };
}

/** The libduckdb.so that @duckdb/node-api loads, so that ours runs the same library; else the suite's. */
function duckdbLibrary(): string {
  try {
    const p = join(dirname(require.resolve(`@duckdb/node-bindings-${process.platform}-${process.arch}/package.json`)), 'libduckdb.so');
    if (existsSync(p)) return p;
  } catch {
    // not installed: the suite's copy below
  }
  return DUCKDB.library;
}

interface Pair {
  driver: DriverName;
  /** The lines' name where it is not the driver's: a variant of a driver's job (its options). */
  label?: string;
  peer: '@duckdb/node-api' | 'pg' | 'node:sqlite';
  /** Why it cannot run here. */
  missing: string | undefined;
  ours(entry: string): Job;
  /** The same job through `arrow-device/flechette/adbc` (a flechette Table). */
  flechette(entry: string): Job;
  theirs: Job;
}

/** PostgreSQL's driver maps the server's types from its own table instead of reading the catalog at init. */
const PG_BUILTIN = { 'adbc.postgresql.type_resolver_mode': 'builtin' } as const;

function pairs(uri: string | undefined, pgMissing: string | undefined): Pair[] {
  const duck = duckdbLibrary();
  const duckSql = `SELECT range::DOUBLE * 0.5 AS x FROM range(${ROWS})`;
  const pgSql = `SELECT i::DOUBLE PRECISION * 0.5 AS x FROM generate_series(0, ${ROWS - 1}) AS g(i)`;
  const sqliteSql = `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < ${ROWS - 1}) SELECT i * 0.5 AS x FROM s`;
  const all: Pair[] = [
    {
      driver: 'duckdb',
      peer: '@duckdb/node-api',
      missing: existsSync(duck) ? undefined : DUCKDB.missing,
      ours: (entry) => ({ kind: 'ours', driver: 'duckdb', entry, library: duck, entrypoint: 'duckdb_adbc_init', databaseOptions: { path: ':memory:' }, sql: duckSql }),
      flechette: (entry) => ({ kind: 'ours', target: 'flechette', driver: 'duckdb', entry, library: duck, entrypoint: 'duckdb_adbc_init', databaseOptions: { path: ':memory:' }, sql: duckSql }),
      theirs: { kind: 'peer', peer: '@duckdb/node-api', sql: duckSql },
    },
    {
      driver: 'postgresql',
      peer: 'pg',
      missing: POSTGRESQL.missing ?? pgMissing,
      ours: (entry) => ({ kind: 'ours', driver: 'postgresql', entry, library: POSTGRESQL.library, databaseOptions: { uri: uri ?? '' }, sql: pgSql }),
      flechette: (entry) => ({ kind: 'ours', target: 'flechette', driver: 'postgresql', entry, library: POSTGRESQL.library, databaseOptions: { uri: uri ?? '' }, sql: pgSql }),
      theirs: { kind: 'peer', peer: 'pg', uri, sql: pgSql },
    },
    {
      // The same job with the driver's builtin type table (docs/adbc.md, "Opening the database"): its init
      // reads no catalog, what a service that opens often can choose.
      driver: 'postgresql',
      label: 'postgresql builtin-types',
      peer: 'pg',
      missing: POSTGRESQL.missing ?? pgMissing,
      ours: (entry) => ({ kind: 'ours', driver: 'postgresql', entry, library: POSTGRESQL.library, databaseOptions: { uri: uri ?? '', ...PG_BUILTIN }, sql: pgSql }),
      flechette: (entry) => ({ kind: 'ours', target: 'flechette', driver: 'postgresql', entry, library: POSTGRESQL.library, databaseOptions: { uri: uri ?? '', ...PG_BUILTIN }, sql: pgSql }),
      theirs: { kind: 'peer', peer: 'pg', uri, sql: pgSql },
    },
    {
      driver: 'sqlite',
      peer: 'node:sqlite',
      missing: SQLITE.missing,
      ours: (entry) => ({ kind: 'ours', driver: 'sqlite', entry, library: SQLITE.library, databaseOptions: { uri: ':memory:' }, sql: sqliteSql }),
      flechette: (entry) => ({ kind: 'ours', target: 'flechette', driver: 'sqlite', entry, library: SQLITE.library, databaseOptions: { uri: ':memory:' }, sql: sqliteSql }),
      theirs: { kind: 'peer', peer: 'node:sqlite', sql: sqliteSql },
    },
  ];
  return all.filter((p) => !ONLY || ONLY.includes(p.driver));
}

/**
 * `--bundled`: one file per job, bundled with esbuild from a three-line
 * application (import the job's module, hand it to `run`), in .build/startup-bundled.
 */
async function bundleJobs(jobs: Job[]): Promise<void> {
  const { build } = await import('esbuild');
  const dir = join(root, '.build', 'startup-bundled');
  rmSync(dir, { recursive: true, force: true });
  for (const [i, job] of jobs.entries()) {
    const spec = job.kind === 'ours' ? fileURLToPath(job.entry) : job.kind === 'peer' ? job.peer : undefined;
    if (spec === undefined) continue;
    const arg = JSON.stringify(job);
    const outfile = join(dir, `job${i}.mjs`);
    const result = await build({
      stdin: {
        contents: `import * as m from ${JSON.stringify(spec)};\nimport { report, run } from ${JSON.stringify(CHILD)};\nreport(run(JSON.parse(process.argv[3]), m));\n`,
        resolveDir: root,
        loader: 'js',
      },
      absWorkingDir: root,
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'es2022',
      minify: true,
      outfile,
      // Native code stays outside (koffi, DuckDB's addon, pg's optional libpq binding), and the peers this job
      // does not run (the child's `run` names them all in its dynamic imports); the rest is one file.
      external: ['koffi', '@duckdb/node-bindings', '@duckdb/node-bindings-*', 'pg-native', ...PEERS.filter((x) => x !== spec)],
      // CommonJS inside an ESM bundle (pg, and koffi's loader) asks for `require`.
      banner: { js: "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);" },
      logLevel: 'error',
      metafile: true,
    });
    bundles.set(arg, outfile);
    // What went into a flechette job's bundle, by package: apache-arrow must not be there.
    if (flechetteJob(job)) {
      const pkgs = Object.keys(result.metafile.inputs).map((f) => /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1]);
      bundleInputs.set(arg, [...new Set(pkgs.filter((x): x is string => x !== undefined))].sort());
    }
  }
}

function peers(e: Entries, list: Pair[]): void {
  const flechette = FLECHETTE ? e.flechetteAdbc : undefined;
  if (FLECHETTE && !flechette) console.log('startup flechette: skipped (this build has no flechette/adbc.js)');
  if (BUNDLED) {
    console.log('# bundled: each job one file (esbuild), its load the time from the process start to its first line');
  } else {
    if (ARROWJS) loads(e);
    if (flechette) flechetteLoads(flechette);
  }
  const b = BUNDLED ? 'bundled ' : '';
  for (const p of list) {
    if (p.missing) {
      console.log(`startup ${p.label ?? p.driver} vs ${p.peer}: skipped (${p.missing})`);
      continue;
    }
    const name = p.label ?? p.driver;
    // `tag`: the target after the driver (`duckdb flechette`), none for arrow-js (the lines as they were before flechette).
    const compare = (ourJob: Job, tag: string, into: string): void => {
      const [ours, theirs] = alternate(ourJob, p.theirs);
      const o = ours.map((r) => r.total);
      const t = theirs.map((r) => r.total);
      console.log(`${b}startup ${name}${tag} vs ${p.peer}: ours ${f1(median(o))} ms, ${p.peer} ${f1(median(t))} ms, ratio ${f2(pairRatio(o, t))}`);
      console.log(`${b}startup ${name}${tag} phases (ms, medians): ours ${phases(ours)}; ${p.peer} ${peerPhases(theirs)}`);
      const oq = ours.map((r) => r.phases.query!);
      const tq = theirs.map((r) => r.phases.query!);
      console.log(`${b}first query ${name}${tag} vs ${p.peer}: ours ${f1(median(oq))} ms (query and import of ${ROWS.toLocaleString('en')} rows${into}), ${p.peer} ${f1(median(tq))} ms (query), ratio ${f2(pairRatio(oq, tq))}`);
    };
    if (ARROWJS) compare(p.ours(e.adbc), '', '');
    if (flechette) compare(p.flechette(flechette), ' flechette', ' into flechette');
  }
}

/** The flechette target's load lines: each module on top of those before it, and its adbc entry first in a process. */
function flechetteLoads(entry: string): void {
  const jobs = flechetteLoadJobs(entry);
  const chain = Array.from({ length: PROCESSES }, () => child(jobs.chain));
  const first = Array.from({ length: PROCESSES }, () => child(jobs.first));
  const m = (rs: ChildResult[], name: string): string => f1(phase(rs, name));
  console.log(`load @uwdata/flechette ${m(chain, '@uwdata/flechette')} ms, koffi ${m(chain, 'koffi')} ms, arrow-device/flechette/adbc ${m(chain, 'arrow-device/flechette/adbc')} ms (no apache-arrow loaded)`);
  console.log(`load arrow-device/flechette/adbc first in a process (with the @uwdata/flechette it imports; koffi loads on first use): ${m(first, 'arrow-device/flechette/adbc')} ms`);
}

/** The load lines: each module on top of those before it, and arrow-device/adbc on its own. */
function loads(e: Entries): void {
  const jobs = loadJobs(e);
  const chain = Array.from({ length: PROCESSES }, () => child(jobs.chain));
  const alone = Array.from({ length: PROCESSES }, () => child(jobs.alone));
  const m = (rs: ChildResult[], name: string): string => f1(phase(rs, name));
  console.log(`load apache-arrow ${m(chain, 'apache-arrow')} ms, koffi ${m(chain, 'koffi')} ms, arrow-device ${m(chain, 'arrow-device')} ms, arrow-device/adbc ${m(chain, 'arrow-device/adbc')} ms`);
  console.log(`load arrow-device/adbc alone (after apache-arrow and koffi): ${m(alone, 'arrow-device/adbc')} ms`);
}

function ab(ref: string, list: Pair[]): void {
  if (ref === 'compile-cache') {
    // The same bundled dist/ without (A) and with (B) Node's compile cache, filled by one untimed run of each job.
    const cache = join(root, '.build', 'compile-cache');
    rmSync(cache, { recursive: true, force: true });
    abOf({ name: 'dist/', ...entries('dist') }, { name: 'dist/ with NODE_COMPILE_CACHE', ...entries('dist') }, list, cache);
    return;
  }
  if (ref === 'layouts') {
    // The working tree's code in its two layouts: one file per module (tsconfig.run.json) and bundled (dist/).
    abOf({ name: 'files (.build/run/src)', ...entries(workingTree(root)) }, { name: 'bundled (dist/)', ...entries('dist') }, list);
    return;
  }
  if (ref.includes('lib:')) {
    // Two library folders given by hand (`lib:<dir>,lib:<dir>`, or a git ref on either side): another commit's build against dist/, say.
    const side = (x: string): { name: string; index: string; adbc: string } => {
      if (x.startsWith('lib:')) return { name: x.slice(4), ...libEntries(x.slice(4)) };
      const b = buildRef(root, x);
      return { name: b.name, ...entries(b) };
    };
    const [x, y] = ref.split(',');
    abOf(side(x!), side(y!), list);
    return;
  }
  const [a, b] = abBuilds(root, ref);
  abOf({ name: a.name, ...entries(a) }, { name: b.name, ...entries(b) }, list);
}

function abOf(ea: { name: string; index: string; adbc: string }, eb: { name: string; index: string; adbc: string }, list: Pair[], cacheB?: string): void {
  console.log(`# A/B: A = ${ea.name}, B = ${eb.name}; ratio = median of the pair ratios A / B (below 1: A faster)`);
  const [ja, jb] = [loadJobs(ea), loadJobs(eb)];
  for (const which of ['chain', 'alone'] as const) {
    const [ra, rb] = alternate(ja[which], jb[which], cacheB);
    const names = Object.keys(ra[0]!.phases).filter((n) => n.startsWith('arrow-device'));
    for (const n of names) {
      const xa = ra.map((r) => r.phases[n]!);
      const xb = rb.map((r) => r.phases[n]!);
      console.log(`ab load ${n}${which === 'alone' ? ' alone' : ''}: A ${f1(median(xa))} ms, B ${f1(median(xb))} ms, ratio ${f2(pairRatio(xa, xb))}`);
    }
  }
  for (const p of list) {
    if (p.missing) {
      console.log(`ab startup ${p.driver}: skipped (${p.missing})`);
      continue;
    }
    const [ra, rb] = alternate(p.ours(ea.adbc), p.ours(eb.adbc), cacheB);
    const xa = ra.map((r) => r.total);
    const xb = rb.map((r) => r.total);
    console.log(`ab startup ${p.driver}: A ${f1(median(xa))} ms, B ${f1(median(xb))} ms, ratio ${f2(pairRatio(xa, xb))}`);
    console.log(`ab startup ${p.driver} phases (ms, medians): A ${phases(ra)}; B ${phases(rb)}`);
  }
}

async function main(): Promise<void> {
  const load = loadavg().map((x) => x.toFixed(2)).join(' ');
  console.log(
    `# bench:startup: node ${process.version}, ${PROCESSES} fresh processes per side, in turn, the first of each pair alternating; ` +
      `times from the process's start; ratio = median of the pair ratios; load average ${load}` +
      (COMPILE_CACHE ? `; compile cache on (NODE_COMPILE_CACHE=${COMPILE_CACHE}, filled by one untimed run of each job)` : ''),
  );
  if (BUNDLED && AB) throw new Error('--bundled measures against the peers; it does not combine with --ab');
  if (COMPILE_CACHE) rmSync(COMPILE_CACHE, { recursive: true, force: true });
  const wantPg = !ONLY || ONLY.includes('postgresql');
  const pgMissing = wantPg ? postgresMissing() : undefined;
  const server = wantPg && !pgMissing && !POSTGRESQL.missing ? await startPostgres() : undefined;
  try {
    const list = pairs(server?.uri, pgMissing);
    // --ab compares builds on each driver's own job, not its variants.
    if (AB) ab(AB, list.filter((p) => p.label === undefined));
    else {
      const e = LIB ? libEntries(LIB) : entries(DIST ? 'dist' : workingTree(root));
      if (BUNDLED) {
        const jobs = list.filter((p) => !p.missing).flatMap((p) => [
          ...(ARROWJS ? [p.ours(e.adbc)] : []),
          ...(FLECHETTE && e.flechetteAdbc ? [p.flechette(e.flechetteAdbc)] : []),
          p.theirs,
        ]);
        await bundleJobs(jobs);
      }
      peers(e, list);
    }
  } finally {
    server?.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
