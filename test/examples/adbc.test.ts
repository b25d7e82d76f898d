/**
 * The ADBC example (examples/adbc/main.ts, `npm run example:adbc`) runs as a
 * user runs it, against the drivers installed here, and prints the right
 * numbers for each: the sum of squares of a million streamed rows, the rows
 * ingested and read back, the driver's error, nothing left live. A driver
 * that is not installed skips its part (ADBC_REQUIRED=1 makes that a failure).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DUCKDB, SQLITE } from '../adbc/drivers.js';

const required = process.env.ADBC_REQUIRED === '1';
const drivers = [DUCKDB, SQLITE];
for (const d of drivers) if (d.missing && required) throw new Error(`ADBC_REQUIRED=1: ${d.missing}`);

test('examples/adbc prints the right results for every driver found', { skip: drivers.every((d) => d.missing) ? 'no ADBC driver installed (npm run setup:duckdb, npm run setup:adbc)' : false }, () => {
  const main = fileURLToPath(new URL('../../examples/adbc/main.ts', import.meta.url));
  const r = spawnSync(process.execPath, ['--import', 'tsx', main], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  const n = 1_000_000n;
  const sumOfSquares = ((n - 1n) * n * (2n * n - 1n)) / 6n;
  const found = drivers.filter((d) => !d.missing);
  for (const d of found) {
    const part = r.stdout.split(`== ${d.name} `)[1]?.split('\n== ')[0] ?? '';
    assert.match(part, new RegExp(`query: 1000000 rows, sum of squares ${sumOfSquares};`), `${d.name}:\n${r.stdout}`);
    assert.match(part, /ingest: 3 rows in/);
    assert.match(part, /read back: grace, edsger/);
    assert.match(part, /a SQL error: AdbcError \w+: .*no_such_table/);
  }
  assert.match(r.stdout, new RegExp(`${found.length} driver\\(s\\) ran; live imports 0, live exports 0`));
});
