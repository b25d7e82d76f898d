/**
 * A real distributed SQL engine for the tests and the benchmark of
 * arrow-device/adbc: Apache DataFusion Ballista 55.0.0, a scheduler that
 * serves Arrow Flight SQL (`--flight-sql`) and executor processes that run
 * the work, put in a cache outside the checkout by test/adbc/setup-ballista.sh
 * (`npm run setup:ballista`; `BALLISTA_DIR` overrides the cache).
 *
 * `startBallista()` starts a scheduler and two executors on 127.0.0.1, each on
 * ports free a moment before (Ballista takes no port 0) and each executor with
 * a work directory of its own in one temporary directory, and resolves once
 * both executors are registered: each executor logs `Executor registration
 * succeed` when the scheduler accepted it, then `Built-in arrow flight server
 * listening on` when it can serve its results. A query sent before any
 * executor registered waits without a bound, so nothing is asked before.
 * `stop()` ends every process (SIGTERM, then SIGKILL) and removes the
 * directory; they are killed at process exit if a run dies first.
 *
 * `writeParquet()` writes the test data with DuckDB (its ADBC driver), several
 * files so that Ballista's scans have several partitions.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdbcDatabase } from '../../src/adbc/index.js';
import { DUCKDB } from './drivers.js';
import { freePort } from './postgres.js';

export const BALLISTA_VERSION = '55.0.0';

/** The cache test/adbc/setup-ballista.sh fills (the same default). */
export const ballistaDir =
  process.env.BALLISTA_DIR || join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'arrow-device', `ballista-${BALLISTA_VERSION}`);
const scheduler = join(ballistaDir, 'bin', 'ballista-scheduler');
const executor = join(ballistaDir, 'bin', 'ballista-executor');

/** Why no cluster can be started here, or undefined. */
export function ballistaMissing(): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64') return `Ballista runs here on Linux x64 only (this is ${process.platform} ${process.arch})`;
  for (const bin of [scheduler, executor]) {
    if (!existsSync(bin)) return `Ballista ${BALLISTA_VERSION} not found at ${bin}: run \`npm run setup:ballista\` (it unpacks ../shared/ballista beside the checkout, or builds with cargo, about an hour)`;
  }
  if (DUCKDB.missing) return `the test data is written by DuckDB: ${DUCKDB.missing}`;
  return undefined;
}

export interface BallistaExecutor {
  /** Its Arrow Flight port (where the scheduler fetches its results from). */
  port: number;
  /** Ends it at once (SIGKILL) and waits for it to exit. Idempotent. */
  kill(): Promise<void>;
}

export interface BallistaCluster {
  /** `grpc://127.0.0.1:<port>`: the scheduler's Flight SQL service, what the Flight SQL driver's `uri` takes. */
  uri: string;
  executors: BallistaExecutor[];
  /** Ends every process and removes the work directories. Idempotent. */
  stop(): Promise<void>;
}

/** How long a process may take to say it is ready (Ballista's binaries start in well under a second here). */
const START_MS = 60_000;

/** A process of the cluster exited before it was ready (a port taken meanwhile, most likely). */
class ExitedEarly extends Error {}

/** A child process of the cluster: its output kept (the tail) for messages, its exit awaited. */
class Proc {
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
  output = '';

  constructor(readonly what: string, bin: string, args: string[]) {
    this.child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, RUST_LOG: 'info' } });
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
    const keep = (d: Buffer): void => {
      this.output = (this.output + d.toString()).slice(-64 * 1024);
    };
    this.child.stdout!.on('data', keep);
    this.child.stderr!.on('data', keep);
  }

  /** Resolves once every pattern has appeared in the output; rejects when it exits first, or after START_MS. */
  waitFor(patterns: RegExp[]): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => patterns.every((p) => p.test(this.output));
      if (check()) return resolve();
      const done = (e?: Error): void => {
        clearTimeout(timer);
        this.child.stdout!.off('data', onData);
        this.child.stderr!.off('data', onData);
        this.child.off('exit', onExit);
        if (e) reject(e);
        else resolve();
      };
      const onData = (): void => {
        if (check()) done();
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null): void =>
        done(new ExitedEarly(`${this.what} exited (${signal ?? code}) before it was ready:\n${this.output}`));
      const timer = setTimeout(() => done(new Error(`${this.what} not ready within ${START_MS} ms:\n${this.output}`)), START_MS);
      // After `keep` (registered first): the output already holds the new bytes.
      this.child.stdout!.on('data', onData);
      this.child.stderr!.on('data', onData);
      this.child.once('exit', onExit);
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async end(signal: NodeJS.Signals): Promise<void> {
    if (this.running) this.child.kill(signal);
    await this.exited;
  }

  /** SIGTERM, and SIGKILL when it has not exited within 5 s. */
  async stop(): Promise<void> {
    if (!this.running) return this.exited;
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await this.end('SIGTERM');
    clearTimeout(timer);
  }
}

/**
 * Starts a scheduler and `executors` executors (default 2) on 127.0.0.1 and waits until every executor is
 * registered. A port free a moment before may be taken by the time a process binds it: a process that
 * exits before it is ready makes the whole cluster start again on new ports, three times at most.
 */
export async function startBallista(options: { executors?: number } = {}): Promise<BallistaCluster> {
  const why = ballistaMissing();
  if (why) throw new Error(why);
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options.executors ?? 2);
    } catch (e) {
      if (!(e instanceof ExitedEarly) || attempt === 3) throw e;
    }
  }
}

async function startOnce(executorCount: number): Promise<BallistaCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'arrow-device-ballista-'));
  const procs: Proc[] = [];
  let stopped = false;
  const killAll = (): void => {
    for (const p of procs) if (p.running) p.child.kill('SIGKILL');
  };
  process.on('exit', killAll);
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    try {
      // Executors first: a scheduler gone first leaves them retrying their heartbeats until killed.
      await Promise.all(procs.slice(1).map((p) => p.stop()));
      await procs[0]?.stop();
    } finally {
      process.removeListener('exit', killAll);
      rmSync(dir, { recursive: true, force: true });
    }
  };
  try {
    const port = await freePort();
    const sched = new Proc('ballista-scheduler', scheduler, ['--bind-host', '127.0.0.1', '--external-host', '127.0.0.1', '--bind-port', String(port), '--flight-sql']);
    procs.push(sched);
    await sched.waitFor([new RegExp(`listening on 127\\.0\\.0\\.1:${port}\\b`)]);
    const executors: BallistaExecutor[] = [];
    const ready: Promise<void>[] = [];
    for (let i = 0; i < executorCount; i++) {
      const work = join(dir, `executor-${i}`);
      mkdirSync(work);
      const [flight, grpc, health] = [await freePort(), await freePort(), await freePort()];
      const p = new Proc(`ballista-executor ${i}`, executor, [
        '--bind-host', '127.0.0.1', '--external-host', '127.0.0.1', '--scheduler-host', '127.0.0.1', '--scheduler-port', String(port),
        '-p', String(flight), '--bind-grpc-port', String(grpc), '--bind-health-port', String(health), '--work-dir', work,
        // Without a bound each executor reserves 70% of the machine's memory.
        '--memory-pool-size', '4GB',
      ]);
      procs.push(p);
      ready.push(p.waitFor([/Executor registration succeed/, new RegExp(`flight server listening on: 127\\.0\\.0\\.1:${flight}\\b`)]));
      executors.push({ port: flight, kill: () => p.end('SIGKILL') });
    }
    await Promise.all(ready);
    return { uri: `grpc://127.0.0.1:${port}`, executors, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

/**
 * Writes `files` Parquet files of `rowsPerFile` rows each into `dir` with DuckDB:
 * `id` BIGINT (unique over all files), `k` INTEGER (id % 100), `v` BIGINT
 * (a hash of id, 0..999_999). Integers only, so that sums are exact on every engine.
 */
export async function writeParquet(dir: string, files: number, rowsPerFile: number): Promise<void> {
  await using db = new AdbcDatabase(DUCKDB.options());
  await using conn = await db.connect();
  for (let f = 0; f < files; f++) {
    const path = join(dir, `part-${f}.parquet`).replaceAll("'", "''");
    await conn.execute(
      `COPY (SELECT id, (id % 100)::INTEGER AS k, (hash(id) % 1000000)::BIGINT AS v FROM (SELECT range + ${f * rowsPerFile} AS id FROM range(${rowsPerFile})))` +
        ` TO '${path}' (FORMAT PARQUET)`,
    );
  }
}

/** `read_parquet` of every file `writeParquet` wrote into `dir`, for DuckDB's SQL. */
export function duckdbParquet(dir: string): string {
  return `read_parquet('${join(dir, '*.parquet').replaceAll("'", "''")}')`;
}
