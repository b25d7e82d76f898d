#!/usr/bin/env node
// Runs the test suite's runtime selection on Bun, Deno or an emulated
// Linux arm64 Node (each installed by tools/runtimes.mjs):
//
//   node tools/test-runtime.mjs <bun|deno|node-arm64> [test files...]
//
// The suite is written for `node:test`; Bun and Deno implement it, each
// under its own runner (`bun test`, `deno test`), which this calls one file
// at a time (a process per file, as `node --test` isolates them). The
// emulated arm64 Node cannot start a child process, so it runs each file
// directly (`node --import tsx file`: node:test runs it in-process), after
// the arm64 prebuilt library is cross-built (tools/build-native.mjs
// --target linux-arm64) and with zig's arm64 cc for the C test peers
// (ARROW_DEVICE_CC). Files left out of a runtime's selection are listed
// with the reason. Exits non-zero if any file fails.
//
// Plain JavaScript for any Node.
import { spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CORE, RUNTIMES, bun, deno, nodeArm64 } from './runtimes.mjs';
import { zigCc } from './zig.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** What the emulated arm64 Node runs: the round trips, the async ring and pump with the C peers, and the table of shares between threads (Atomics on a weakly ordered processor). */
const ARM64 = ['test/platform/platform.test.ts', 'test/cdata/roundtrip.test.ts', 'test/async/async.test.ts', 'test/async/ring.test.ts', 'test/async/hangs.test.ts', 'test/threads/threads.test.ts'];

/** Left out everywhere but Node, and why (printed with each run). */
const NODE_ONLY = {
  'the peers (DuckDB, Arrow C++, parquet-wasm, ADBC, the browser)': 'their own CI steps run them on Node 22; the C interface they cross is the one the core files cover',
  'test/fuzz/*, test/device/cuda*': 'crash and hang reproducers, fuzzing and the simulated CUDA runtime run as child processes of Node (test/helpers/child.ts); CI runs them on Node 22, 24 and 26',
  'test/readme/*, test/abi/layout.test.ts, tools/*.test.ts': "the docs, the C compiler's struct layouts and the tooling do not depend on the runtime",
};

const [runtime, ...picked] = process.argv.slice(2);
if (!RUNTIMES.includes(runtime)) {
  console.error(`usage: node tools/test-runtime.mjs <${RUNTIMES.join('|')}> [test files...]`);
  process.exit(2);
}

/** { cmd, args(file), env } for one file, or a string saying why the runtime cannot run here. */
function runner() {
  try {
    if (runtime === 'bun') {
      const b = bun();
      // `./`: a path, not a name filter. The timeout is per test; node:test's own options (a suite's
      // timeout) do not reach Bun's runner.
      return { cmd: b, args: (f) => ['test', '--timeout', '600000', `./${f}`], env: {} };
    }
    if (runtime === 'deno') {
      const d = deno();
      // Every permission (the suite builds C peers, spawns children, writes temp files);
      // test/platform/deno.test.ts proves the library's own smallest set. --no-check: the suite is
      // type-checked by tsc (npm run typecheck) under the project's settings, not Deno's.
      return { cmd: d, args: (f) => ['test', '-A', '--no-check', '--sloppy-imports', '--v8-flags=--expose-gc', f], env: {} };
    }
    const n = nodeArm64();
    if (typeof n === 'string') return n;
    const build = spawnSync(process.execPath, [join(root, 'tools', 'build-native.mjs'), '--target', 'linux-arm64'], { stdio: 'inherit' });
    if (build.status !== 0) return 'the linux-arm64 prebuilt did not build (tools/build-native.mjs --target linux-arm64)';
    return {
      cmd: n.cmd,
      args: (f) => [...n.args, '--import', 'tsx', f],
      env: { ...n.env, ARROW_DEVICE_CC: zigCc('linux-arm64'), ARROW_DEVICE_EMULATED: 'linux-arm64' },
    };
  } catch (e) {
    return `cannot set up ${runtime}: ${e.message}`;
  }
}

const r = runner();
if (typeof r === 'string') {
  console.error(`test-runtime: ${runtime} cannot run here: ${r}`);
  process.exit(1);
}
const files = picked.length > 0 ? picked : runtime === 'node-arm64' ? ARM64 : CORE;
const version = spawnSync(r.cmd, runtime === 'node-arm64' ? [...r.args('').slice(0, -3), '-p', '`Node.js ${process.version} ${process.arch}`'] : ['--version'], {
  encoding: 'utf8',
  env: { ...process.env, ...r.env },
});
console.log(`===== ${runtime}: ${(version.stdout || version.stderr).trim().split('\n')[0]}, ${files.length} test files =====`);
if (picked.length === 0) {
  for (const [what, why] of Object.entries(NODE_ONLY)) console.log(`not run on ${runtime}: ${what}: ${why}`);
  if (runtime === 'node-arm64') console.log('not run on node-arm64: the other core files (emulation is slow; the x64 runs cover them)');
}

const failed = [];
const t0 = Date.now();
for (const f of files) {
  const started = Date.now();
  console.log(`\n----- ${runtime}: ${f}`);
  const res = spawnSync(r.cmd, r.args(f), { cwd: root, stdio: 'inherit', env: { ...process.env, ...r.env } });
  const how = res.error ? res.error.message : res.signal ? `killed by ${res.signal}` : `exit ${res.status}`;
  console.log(`----- ${runtime}: ${f}: ${how}, ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (res.status !== 0) failed.push(`${f} (${how})`);
}
console.log(`\n===== ${runtime}: ${files.length - failed.length} of ${files.length} test files passed in ${((Date.now() - t0) / 1000).toFixed(0)} s =====`);
for (const f of failed) console.log(`FAILED on ${runtime}: ${f}`);
process.exit(failed.length === 0 ? 0 : 1);
