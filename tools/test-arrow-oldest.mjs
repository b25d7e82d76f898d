#!/usr/bin/env node
// Runs the core selection of the suite (tools/runtimes.mjs CORE) against the
// oldest apache-arrow the peer range allows, on this Node:
//
//   node tools/with-node.mjs node tools/test-arrow-oldest.mjs [test files...]
//   (npm run test:arrow-oldest)
//
// The version is the lower bound of package.json's peerDependencies range,
// which tools/arrow-oldest/package.json must pin exactly (checked here): its
// package-lock.json fixes every transitive dependency, and `npm ci` installs
// it into .build/arrow-oldest/<version> (once; a second run finds it). The
// repository's node_modules is never touched: tools/arrow-oldest/hooks.mjs,
// preloaded in every test process, child process and worker, resolves
// `apache-arrow` in that folder instead. Before the tests, two checks that
// the run means what it says: the resolved apache-arrow is that version, and
// the built package (dist/, rebuilt with tools/bundle.mjs when src/ is newer)
// loads and round trips with it, `arrow-device/adbc` too.
//
// Left out: test/package/package.test.ts (it installs the packed tarball
// with npm, which runs under the system's Node, and links the repository's
// apache-arrow; the dist/ check here is its part that depends on the
// version).
//
// Plain JavaScript for any Node.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, copyFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CORE } from './runtimes.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const here = join(root, 'tools', 'arrow-oldest');
const fail = (msg) => {
  console.error(`test-arrow-oldest: ${msg}`);
  process.exit(1);
};

// --- the version: the range's lower bound, pinned by tools/arrow-oldest/package.json -----------------
const range = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).peerDependencies?.['apache-arrow'];
const bound = /^>=\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?$/.exec(range ?? '');
if (!bound) fail(`package.json's peer range for apache-arrow is ${JSON.stringify(range)}: expected ">=X.Y.Z"`);
const oldest = `${bound[1]}.${bound[2] ?? 0}.${bound[3] ?? 0}`;
const pinned = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8')).dependencies['apache-arrow'];
if (pinned !== oldest) fail(`tools/arrow-oldest/package.json pins apache-arrow ${pinned}, but the peer range ${range} starts at ${oldest}: update it and its lock (npm install --package-lock-only there)`);

// --- install: npm ci of the pinned lock into .build/arrow-oldest/<version> ------------------------
const dir = join(root, '.build', 'arrow-oldest', oldest);
const installed = join(dir, 'node_modules', 'apache-arrow', 'package.json');
const versionAt = (p) => (existsSync(p) ? JSON.parse(readFileSync(p, 'utf8')).version : undefined);
if (versionAt(installed) !== oldest) {
  mkdirSync(dir, { recursive: true });
  for (const f of ['package.json', 'package-lock.json']) copyFileSync(join(here, f), join(dir, f));
  console.log(`test-arrow-oldest: installing apache-arrow ${oldest} (npm ci, tools/arrow-oldest's lock) into ${dir}`);
  // npm is a script on the PATH (npm.cmd on Windows): a shell finds it, as tools/windows.mjs runs it.
  const r = spawnSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0 || versionAt(installed) !== oldest) fail(`npm ci of apache-arrow ${oldest} failed in ${dir}`);
}

// --- the environment of every process of the run -------------------------------------------------
const hooks = pathToFileURL(join(here, 'hooks.mjs')).href;
// NODE_OPTIONS reaches the child processes tests start; the command line's --import reaches workers (a
// Worker inherits execArgv, not NODE_OPTIONS preloads).
const env = { ...process.env, ARROW_DEVICE_APACHE_ARROW: dir, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${hooks}`.trim() };
const nodeArgs = ['--import', hooks, '--import', 'tsx'];

function node(args, what) {
  const r = spawnSync(process.execPath, args, { cwd: root, env, stdio: 'inherit' });
  if (r.status !== 0) fail(`${what}: ${r.signal ? `killed by ${r.signal}` : `exit ${r.status}`}`);
}

// 1. The resolution: every importer gets that version (and the named exports 21.2 added are absent on 21.0-21.1).
node(
  [
    '--input-type=module',
    '-e',
    `import * as arrow from 'apache-arrow';
     import { readFileSync } from 'node:fs';
     import { fileURLToPath } from 'node:url';
     const at = fileURLToPath(import.meta.resolve('apache-arrow'));
     const pkg = JSON.parse(readFileSync(at.slice(0, at.lastIndexOf('apache-arrow') + 12) + '/package.json', 'utf8'));
     if (pkg.version !== ${JSON.stringify(oldest)}) throw new Error('apache-arrow resolved to ' + pkg.version + ' at ' + at);
     console.log('test-arrow-oldest: apache-arrow ' + pkg.version + ' from ' + at + ' (BinaryView: ' + ('BinaryView' in arrow) + ')');`,
  ],
  'the resolution check',
);

// 2. The built package loads with it (an ESM link failure is the first thing an older version breaks).
const newest = (d) => Math.max(...readdirSync(d, { withFileTypes: true }).map((e) => (e.isDirectory() ? newest(join(d, e.name)) : statSync(join(d, e.name)).mtimeMs)));
const dist = join(root, 'dist', 'index.js');
if (!existsSync(dist) || statSync(dist).mtimeMs < newest(join(root, 'src'))) {
  console.log('test-arrow-oldest: dist/ is older than src/: rebuilding its JavaScript (tools/bundle.mjs)');
  node([join(root, 'tools', 'bundle.mjs')], 'tools/bundle.mjs');
}
node(
  [
    '--input-type=module',
    '-e',
    `import assert from 'node:assert/strict';
     import { tableFromArrays } from 'apache-arrow';
     const d = await import(${JSON.stringify(pathToFileURL(dist).href)});
     await import(${JSON.stringify(pathToFileURL(join(root, 'dist', 'adbc', 'index.js')).href)});
     const t = tableFromArrays({ id: Int32Array.of(1, 2, 3), s: ['a', null, 'c'] });
     const { schema, array } = d.exportRecordBatch(t.batches[0]);
     const back = d.importRecordBatch(array, schema, { validate: 'full' });
     d.freeArrowSchema(schema);
     d.freeArrowArray(array);
     assert.deepEqual([...back.getChild('id')], [1, 2, 3]);
     assert.deepEqual([...back.getChild('s')], ['a', null, 'c']);
     back.release();
     console.log('test-arrow-oldest: dist/index.js and dist/adbc/index.js load, and a batch round trips');`,
  ],
  'the dist/ check',
);

// 3. The core selection.
// With the files whose checks differ by version: the 21.2.0 types, the shortcuts' probes, zero rows of every type.
const EXTRA = ['test/cdata/arrow-versions.test.ts', 'test/array/shortcuts.test.ts', 'test/cdata/zero-length.test.ts'];
const files = process.argv.length > 2 ? process.argv.slice(2) : [...CORE.filter((f) => f !== 'test/package/package.test.ts'), ...EXTRA];
console.log(`===== apache-arrow ${oldest}: ${files.length} test files =====`);
const t0 = Date.now();
node([...nodeArgs, '--test', '--test-reporter=spec', ...files], `the core selection on apache-arrow ${oldest}`);
console.log(`===== apache-arrow ${oldest}: ${files.length} test files passed in ${((Date.now() - t0) / 1000).toFixed(0)} s =====`);
