/**
 * The WebGPU demo (demo/webgpu.ts, `npm run demo:webgpu`) runs as a user
 * runs it: DuckDB's 4M rows to the GPU through exportDeviceRecordBatch, a
 * compute shader over the uploaded columns, its output back in arrow-js.
 * It must print the same histogram and count from the GPU and from JS, sums
 * within its f32 bound, and nothing left live. Where Dawn finds no WebGPU
 * adapter or DuckDB is not installed it skips with the reason; under
 * WEBGPU_REQUIRED=1 (npm run test:webgpu) that is a failure.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DUCKDB } from '../adbc/drivers.js';
import { childSkip, runtimeArgs } from '../helpers/child.js';

const required = process.env.WEBGPU_REQUIRED === '1';
if (required && DUCKDB.missing) throw new Error(`WEBGPU_REQUIRED=1 but ${DUCKDB.missing}`);
const skip = childSkip || (DUCKDB.missing ?? false);
if (skip) console.log(`# WebGPU demo skipped: ${skip}`);

test('demo/webgpu.ts: the GPU and JS results agree, accounting ends at zero', { skip, timeout: 600_000 }, (t) => {
  const demo = fileURLToPath(new URL('../../demo/webgpu.ts', import.meta.url));
  const r = spawnSync(process.execPath, [...runtimeArgs(), demo], { encoding: 'utf8', timeout: 540_000 });
  assert.equal(r.status, 0, `exit ${r.status} (signal ${r.signal})\n${r.stdout}\n${r.stderr}`);
  const out = r.stdout;
  const skipped = /^skipped: (.*)$/m.exec(out);
  if (skipped) {
    if (required) assert.fail(`WEBGPU_REQUIRED=1 but ${skipped[1]}`);
    console.log(`# WebGPU demo skipped: ${skipped[1]}`);
    t.skip(skipped[1]);
    return;
  }
  console.log(out.replace(/^/gm, '# '));
  assert.match(out, /^WebGPU adapter: \S/m);
  assert.match(out, /^1\. DuckDB -> arrow-js: 4,000,000 rows in \d+ batches \(k: Int32, x: Float32\)/m);
  assert.match(out, /^2\. to the GPU: \d+ GPUBuffers, 32\.0 MB/m);
  const back = /^3\. back in arrow-js .*histogram Uint32 \[([\d, ]+)\]/m.exec(out);
  assert.ok(back, out);

  const result = (who: string): { hist: number[]; count: number; sum: number } => {
    const m = new RegExp(`^   ${who}:\\s+\\[([\\d, ]+)\\] count (\\d+) sum ([\\d.]+)$`, 'm').exec(out);
    assert.ok(m, `no ${who} result in:\n${out}`);
    return { hist: m[1]!.split(', ').map(Number), count: Number(m[2]), sum: Number(m[3]) };
  };
  const gpu = result('GPU');
  const js = result('JS');
  // k = i % 1000 over 4M rows: exactly 400,000 rows have k < 100.
  assert.equal(js.count, 400_000);
  assert.equal(js.hist.length, 10);
  assert.equal(js.hist.reduce((a, b) => a + b, 0), js.count);
  assert.deepEqual(gpu.hist, js.hist, 'the histograms are equal (integer counts: exact)');
  assert.equal(gpu.count, js.count);
  assert.deepEqual(back[1]!.split(', ').map(Number), gpu.hist, 'the histogram printed is the one brought back through toHostAsync');
  // The sums: within the f32 rounding bound the demo prints (its derivation is in demo/webgpu.ts).
  const bound = /\|GPU - JS\| = (\S+) <= (\S+) \(f32 rounding bound\)/.exec(out);
  assert.ok(bound, out);
  assert.ok(Number(bound[1]) <= Number(bound[2]));
  assert.ok(Math.abs(gpu.sum - js.sum) <= Number(bound[2]) + 0.01, `${gpu.sum} vs ${js.sum}`);
  assert.match(out, /^ {3}results: GPU and JS agree$/m);
  assert.match(out, /^ {3}timings: DuckDB query [\d.]+ ms; upload \(export \+ import\) [\d.]+ ms; GPU compute [\d.]+ ms; read back [\d.]+ ms; JS [\d.]+ ms/m);
  assert.match(out, /^5\. accounting: 0 imports and 0 exports live, 0 GPUBuffers handed over still live$/m);
});
