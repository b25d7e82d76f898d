/**
 * Faults on the network path of arrow-device/adbc, against real servers:
 * arrow-go's example Flight SQL server (test/adbc/flightsql.ts) and
 * PostgreSQL (test/adbc/postgres.ts).
 *
 * - a server stopped hard in mid-stream (Flight SQL: SIGKILL; PostgreSQL:
 *   `pg_ctl stop -m immediate`): the reader throws the driver's typed error
 *   (an `AdbcError` with status IO, from `AdbcErrorFromArrayStream`) within
 *   FAULT_BOUND_MS of the fault, nothing is left live, and the process exits
 *   by itself (run in a child process, test/adbc/fault-child.ts, which must
 *   end within CHILD_BOUND_MS);
 * - a server that is not there: the first call fails within FAULT_BOUND_MS
 *   with the driver's message (connection refused), status IO.
 *
 * The bounds are generous against a loaded 2-core machine: what they prove
 * is "bounded", not "fast" (the fault is seen in milliseconds here).
 * Skips with the reason where the driver or the server is missing;
 * ADBC_REQUIRED=1 makes that a failure.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { dirname, extname, join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { accounting } from '../../src/index.js';
import { AdbcDatabase, AdbcError, AdbcStatus } from '../../src/adbc/index.js';
import { FLIGHTSQL, POSTGRESQL } from './drivers.js';
import { flightSqlServerMissing } from './flightsql.js';
import { freePort, postgresMissing } from './postgres.js';
import { runtimeArgs } from '../helpers/child.js';

/** How long after the fault the typed error may come. */
const FAULT_BOUND_MS = 10_000;
/** How long the child may take in all (server start, query, fault, exit). */
const CHILD_BOUND_MS = 60_000;

const missing = FLIGHTSQL.missing ?? flightSqlServerMissing();
const pgMissing = POSTGRESQL.missing ?? postgresMissing();
for (const why of [missing, pgMissing]) if (why && process.env.ADBC_REQUIRED === '1') throw new Error(`ADBC_REQUIRED=1: ${why}`);


interface ChildReport {
  rows: number;
  errorAfterMs: number;
  released: boolean;
  dbReleased: boolean;
  kind: string;
  status: number | undefined;
  operation: string | undefined;
  message: string | undefined;
  liveImports: number;
  liveExports: number;
}

interface ChildRun {
  timedOut: boolean;
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  /** The steps the child wrote as it went (fault-child.ts), and any error. */
  err: string;
}

/** Runs test/adbc/fault-child.ts against `driver`'s server, killing it at CHILD_BOUND_MS. */
async function runChild(driver: 'flightsql' | 'postgresql'): Promise<ChildRun> {
  // The child beside this file, .ts or (compiled: the Windows run) .js.
  const here = fileURLToPath(import.meta.url);
  const child = spawn(process.execPath, [...runtimeArgs(), join(dirname(here), `fault-child${extname(here)}`), driver], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, CHILD_BOUND_MS);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('exit', (c, s) => resolve([c, s])));
  clearTimeout(timer);
  return { timedOut, code, signal, out, err };
}

/**
 * Windows under Wine (tools/windows.mjs; Wine passes its environment on to
 * Windows programs). There the Flight SQL child hangs now and then (CI once;
 * 3 of about 110 runs here, under load): the server is killed and its
 * process is gone (a zombie), but its end of the connection stays open,
 * held by wineserver (`ss -tanp` shows it ESTABLISHED, owned by
 * wineserver64, still after 40 s), so the client waits for bytes that never
 * come. That is Wine's socket leak, not the fault the test makes: a killed
 * process's sockets are closed by Windows and by Linux. Under Wine a child
 * that hangs is run again, up to WINE_ATTEMPTS in all, each hang's steps
 * printed as the test's diagnostics; hanging every time fails the test.
 */
const WINE_ATTEMPTS = 3;
const underWine = process.platform === 'win32' && process.env.WINEPREFIX !== undefined;

/**
 * Runs test/adbc/fault-child.ts against `driver`'s server and checks what the
 * reader saw: the driver's own error for the stream (status IO) within
 * FAULT_BOUND_MS of the fault, after some rows but not all, the stream
 * released, nothing live, and the child's exit by itself (under Wine, see
 * WINE_ATTEMPTS).
 */
async function stopInMidStream(t: TestContext, driver: 'flightsql' | 'postgresql'): Promise<ChildReport> {
  let run = await runChild(driver);
  for (let attempt = 1; run.timedOut && underWine && attempt < WINE_ATTEMPTS; attempt++) {
    t.diagnostic(`under Wine the child hung past ${CHILD_BOUND_MS} ms (attempt ${attempt} of ${WINE_ATTEMPTS}: WINE_ATTEMPTS says why); its steps:\n${run.err}`);
    run = await runChild(driver);
  }
  const { timedOut, code, signal, out, err } = run;
  assert.equal(timedOut, false, `the child exited by itself within ${CHILD_BOUND_MS} ms; its steps:\n${err}\nstdout: ${out}`);
  assert.deepEqual([code, signal], [0, null], `the child's exit (stderr: ${err})`);
  const report = JSON.parse(out.trim().split('\n').pop()!) as ChildReport;
  assert.equal(report.kind, 'AdbcError', `what the reader threw: ${report.message}`);
  assert.equal(report.operation, 'AdbcErrorFromArrayStream', "the driver's own error for the stream");
  assert.equal(report.status, AdbcStatus.IO, report.message);
  assert.ok(report.rows > 0 && report.rows < 1_000_000, `${report.rows} rows came before the error, not all of them`);
  assert.ok(report.errorAfterMs < FAULT_BOUND_MS, `the error came ${report.errorAfterMs.toFixed(0)} ms after the fault`);
  assert.equal(report.released, true, 'the failed stream is released');
  assert.equal(report.dbReleased, true, 'the database (and so its connection and statement) released');
  assert.deepEqual([report.liveImports, report.liveExports], [0, 0], 'nothing left live');
  return report;
}

describe('arrow-device/adbc faults: Flight SQL', { skip: missing }, () => {
  test(`a server killed in mid-stream: an AdbcError (IO) within ${FAULT_BOUND_MS} ms, nothing live, and the process exits by itself`, async (t) => {
    await stopInMidStream(t, 'flightsql');
  });

  test(`no server at the address: the first call fails within ${FAULT_BOUND_MS} ms with the driver's message (IO)`, async () => {
    const port = await freePort(); // free a moment ago: nothing listens there
    const db = new AdbcDatabase(FLIGHTSQL.options(`grpc://127.0.0.1:${port}`));
    try {
      const started = performance.now();
      // The driver dials lazily: connect() may succeed, the first call then fails.
      const error = await (async () => {
        const conn = await db.connect();
        try {
          (await conn.query('SELECT 1')).release();
        } finally {
          await conn.close();
        }
      })().then(() => undefined, (e: unknown) => e);
      const elapsed = performance.now() - started;
      assert.ok(error instanceof AdbcError, String(error));
      assert.equal(error.status, AdbcStatus.IO);
      assert.match(error.message, /connection refused/i); // Windows: "connectex: Connection refused."
      assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${port}`), 'the message names the address');
      assert.ok(elapsed < FAULT_BOUND_MS, `failed after ${elapsed.toFixed(0)} ms`);
    } finally {
      await db.close();
    }
    assert.deepEqual([accounting().liveImports, accounting().liveExports], [0, 0]);
  });
});

describe('arrow-device/adbc faults: PostgreSQL', { skip: pgMissing }, () => {
  test(`a server stopped hard in mid-stream (pg_ctl stop -m immediate): an AdbcError (IO) within ${FAULT_BOUND_MS} ms, nothing live, and the process exits by itself`, async (t) => {
    const report = await stopInMidStream(t, 'postgresql');
    // libpq's own words for a connection the server dropped.
    assert.match(report.message ?? '', /server closed the connection unexpectedly/);
  });
});
