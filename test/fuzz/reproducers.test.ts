/**
 * Every reproducer the fuzzer saved (test/fuzz/reproducers/*.json, written by
 * `npm run fuzz -- --save`) replayed as a regression test: its case, laid
 * out again by the guarded producer, must give no finding. Each runs in a
 * child process, so a reproducer of a crash fails its test instead of
 * ending the run. A thread-mode reproducer (`case.mode` 'threads') is run
 * through the threaded C consumer (test/fuzz/threads.ts). Smoke runs of the
 * fuzzer itself (a few seconds, fixed seed, both modes) check the loop, its
 * oracles and its report.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { runChild } from '../helpers/child.js';
import { goldSkip } from '../helpers/gold.js';
import { producerMissing } from './producer.js';

const dir = fileURLToPath(new URL('./reproducers/', import.meta.url));
const files = (() => {
  try {
    return readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  } catch {
    return [];
  }
})();
const skip = producerMissing ?? false;

describe('fuzz reproducers', { skip }, () => {
  for (const f of files) {
    test(f, () => {
      const saved = JSON.parse(readFileSync(`${dir}${f}`, 'utf8')) as { kind: string; message: string; case: { mode?: string } };
      // A thread-mode case (test/fuzz/threads.ts) runs through the threaded consumer; any other through the importers.
      const r = runChild(
        saved.case.mode === 'threads'
          ? `import { runThreadCase } from '@/test/fuzz/threads.js';
runThreadCase(${JSON.stringify(saved.case)}).then((findings) => process.stdout.write(JSON.stringify(findings)));`
          : `import { runOne } from '@/test/fuzz/runner.js';
runOne(${JSON.stringify(saved.case)}).then((findings) => process.stdout.write(JSON.stringify(findings)));`,
        60_000,
      );
      assert.equal(r.signal, null, `${saved.kind} reproducer crashed the process (${r.signal}): ${saved.message}`);
      assert.equal(r.status, 0, r.stderr.slice(-2000));
      assert.deepEqual(JSON.parse(r.stdout), [], `was: ${saved.kind}: ${saved.message}`);
    });
  }
});

describe('the fuzzer', { skip: skip || goldSkip }, () => {
  test('thread mode: a short seeded run over C consumer threads reports its cases and finds nothing', () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'tools/fuzz.ts', '--mode', 'threads', '--seconds', '3', '--seed', '1'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    assert.match(r.stdout, /fuzz: \d+ cases in [\d.]+ s \([\d.]+ cases\/s\), seed 1, mode threads/);
    assert.ok(Number(/fuzz: (\d+) cases/.exec(r.stdout)![1]) > 0, r.stdout);
    assert.match(r.stdout, /fuzz: 0 finding\(s\)/, r.stdout);
    assert.equal(r.status, 0);
  });

  test('thread mode: its oracles see a consumer that leaks an export, and a run without it is clean', () => {
    const r = runChild(
      `import { consumerLib, runThreadCase } from '@/test/fuzz/threads.js';
const item = (seed) => ({ kind: 'array', flags: 0, stopAfter: 0, batches: [{ rows: 5, seed, slice: null }], failAt: -1 });
const c = { mode: 'threads', threads: 3, items: [item(1), item(2), item(3)] };
consumerLib().inject(1);
(async () => {
  const leaked = await runThreadCase(c);
  const clean = await runThreadCase(c);
  process.stdout.write(JSON.stringify({ leaked, clean }));
})();`,
      60_000,
    );
    assert.equal(r.status, 0, r.stderr.slice(-2000));
    const { leaked, clean } = JSON.parse(r.stdout) as { leaked: { kind: string; message: string }[]; clean: unknown[] };
    assert.deepEqual(leaked.map((f) => f.kind), ['leak'], JSON.stringify(leaked));
    assert.match(leaked[0]!.message, /^after the consumer, 5 exported structs are live; the kept exports have 0$/);
    assert.deepEqual(clean, []);
  });

  test('a short seeded run reports its cases and finds nothing', () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'tools/fuzz.ts', '--seconds', '4', '--seed', '1'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    assert.match(r.stdout, /fuzz: \d+ cases in [\d.]+ s \([\d.]+ cases\/s\), seed 1/);
    const m = /fuzz: (\d+) cases/.exec(r.stdout)!;
    assert.ok(Number(m[1]) > 0, r.stdout);
    assert.match(r.stdout, /fuzz: 0 finding\(s\)/, r.stdout);
    assert.equal(r.status, 0);
  });
});
