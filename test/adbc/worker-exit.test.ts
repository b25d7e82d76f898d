/**
 * koffi#274 (open): calling a library that starts threads of its own (the
 * Go-based ADBC drivers do) from a worker thread was reported to make
 * `process.exit()` hang. Each run here: a child process whose worker calls
 * the Flight SQL driver (Go), then the main thread's `process.exit(0)`; the
 * child must exit, with status 0, within the bound. docs/threads.md says
 * what a user should do all the same (drivers in the main thread).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FLIGHTSQL } from './drivers.js';
import { childSkip, runChild } from '../helpers/child.js';

const missing = FLIGHTSQL.missing ?? childSkip;
if (missing) console.log(`# skipped: ${missing}`);

test('koffi#274: process.exit() with a Go driver called from a worker exits', { skip: missing }, () => {
  const compiled = import.meta.url.endsWith('.js');
  for (let run = 0; run < 3; run++) {
    const r = runChild(
      `import { Worker } from 'node:worker_threads';
const w = new Worker(new URL('@/test/adbc/worker-driver.${compiled ? 'js' : 'ts'}'), {
  workerData: { driver: ${JSON.stringify(FLIGHTSQL.library)} },
  ${compiled ? '' : "execArgv: ['--import', 'tsx'],"}
});
w.on('message', (m) => { console.log(JSON.stringify(m)); process.exit(0); });
w.on('error', (e) => { console.error(String(e)); process.exit(3); });
`,
      30_000,
    );
    assert.equal(r.signal, null, `run ${run}: the child hung past 30 s (killed: ${r.signal}); stderr: ${r.stderr}`);
    assert.equal(r.status, 0, `run ${run}: stderr: ${r.stderr}`);
    assert.match(r.stdout, /refused/, 'the worker ran the driver');
    assert.match(r.stdout, /FlightSQL|connection/, 'the driver refused the connection itself');
  }
});
