#!/usr/bin/env node
// Builds arrow-device's one native piece, native/async-ring.c (the async
// handler that queues a native producer's calls; see the file), into
//
//   prebuilds/<platform>-<arch>/libarrow-device-async.<so|dylib>
//
// for the machine it runs on. `npm pack` runs it (prepack), so the package
// carries a prebuilt library and users never compile anything; a release
// that serves more platforms packs after gathering each platform's
// prebuilds/ folder from a build on that platform. `npm test` runs it with
// --optional (pretest): without a C compiler it says so and the reader
// uses JS callbacks, which the tests then cover alone.
//
//   node tools/build-native.mjs [--optional] [--out DIR]
//
// Plain JavaScript for any Node: it runs before with-node.mjs has a Node.
import { spawnSync } from 'node:child_process';
import { mkdirSync, existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const optional = args.includes('--optional');
const outArg = args.includes('--out') ? args[args.indexOf('--out') + 1] : undefined;

/** The file name src/async/ring.ts loads on this platform. */
export function libraryName(platform = process.platform) {
  return `libarrow-device-async.${platform === 'darwin' ? 'dylib' : 'so'}`;
}

/** A reason to skip with --optional (no compiler, no port); a build that fails always fails. */
function fail(message, skippable = true) {
  if (optional && skippable) {
    console.log(`build-native: skipped, ${message} (the async reader uses JS callbacks)`);
    process.exit(0);
  }
  console.error(`build-native: ${message}`);
  process.exit(1);
}

if (process.platform === 'win32') fail('no Windows build yet');
const source = join(root, 'native', 'async-ring.c');
const outDir = outArg ? resolve(outArg) : join(root, 'prebuilds', `${process.platform}-${process.arch}`);
const out = join(outDir, libraryName());

// Up to date: nothing to do (the test runs call this every time).
if (existsSync(out) && statSync(out).mtimeMs >= statSync(source).mtimeMs && statSync(out).mtimeMs >= statSync(fileURLToPath(import.meta.url)).mtimeMs) {
  process.exit(0);
}

const cc = ['cc', 'clang', 'gcc'].find((c) => spawnSync(c, ['--version'], { stdio: 'ignore' }).status === 0);
if (!cc) fail('no C compiler (cc, clang or gcc) found');
mkdirSync(outDir, { recursive: true });
const flags = ['-std=c11', '-D_GNU_SOURCE', '-O2', '-shared', '-fPIC', '-pthread', '-fvisibility=default', '-Wall', '-Wextra'];
// Never unloaded once loaded (DF_1_NODELETE): a producer thread still inside the handler while the
// process exits must not run in unmapped code. macOS's linker has no such flag; there dlclose of a
// library with live threads in it is left to the system.
if (process.platform === 'linux') flags.push('-Wl,-z,nodelete');
const r = spawnSync(cc, [...flags, '-o', out, source], { stdio: 'inherit' });
if (r.status !== 0) fail(`${cc} failed (exit ${r.status})`, false);
console.log(`build-native: ${out}`);
