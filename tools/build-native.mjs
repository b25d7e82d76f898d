#!/usr/bin/env node
// Builds arrow-device's one native library from native/async-ring.c (the async
// handler that queues a native producer's calls; see the file),
// native/adbc-run.c (a small query's driver calls in one thread hop) and
// native/workers.c (the package's worker threads for calls that may wait), into
//
//   prebuilds/<platform>-<arch>/libarrow-device-async.<so|dylib>
//
//   node tools/build-native.mjs [--optional] [--out DIR]
//       the library for the machine it runs on, with its own cc. `npm test`
//       runs it with --optional (pretest): without a C compiler it says so
//       and the reader uses JS callbacks, which the tests then cover alone.
//   node tools/build-native.mjs --release
//       every shipped target (linux-x64 and linux-arm64, glibc; darwin-x64
//       and darwin-arm64; see tools/zig.mjs) with zig from PyPI, from any
//       Linux x64 machine. `npm pack` runs it (prepack), so the tarball
//       carries all four and users never compile anything. Windows takes
//       the JS-callback path (src/async/ring.ts says why).
//   node tools/build-native.mjs --target linux-arm64 [--out DIR]
//       one shipped target, with zig.
//
// Plain JavaScript for any Node: it runs before with-node.mjs has a Node.
import { spawnSync } from 'node:child_process';
import { mkdirSync, existsSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TARGETS, triple, zig, zigEnv } from './zig.mjs';
import { describeBinary } from './binary.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const optional = args.includes('--optional');
const release = args.includes('--release');
const option = (name) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const outArg = option('--out');
const targetArg = option('--target');

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

const sources = ['async-ring.c', 'adbc-run.c', 'workers.c'].map((f) => join(root, 'native', f));
// What the sources include: a change to it rebuilds the library too.
const headers = ['arrow-abi.h'].map((f) => join(root, 'native', f));
const flags = ['-std=c11', '-D_GNU_SOURCE', '-O2', '-shared', '-fPIC', '-pthread', '-fvisibility=default', '-Wall', '-Wextra'];
// Never unloaded once loaded (DF_1_NODELETE): a producer thread still inside the handler while the
// process exits must not run in unmapped code. macOS's linker has no such flag; there dlclose of a
// library with live threads in it is left to the system.
const linuxFlags = ['-Wl,-z,nodelete'];

function upToDate(out) {
  if (!existsSync(out)) return false;
  const t = statSync(out).mtimeMs;
  return [...sources, ...headers, fileURLToPath(import.meta.url)].every((f) => t >= statSync(f).mtimeMs);
}

/** One shipped target with zig; always rebuilt (a release must not keep a library cc built). */
function buildWithZig(target, outDir) {
  const platform = target.split('-')[0];
  const out = join(outDir ?? join(root, 'prebuilds', target), libraryName(platform));
  mkdirSync(dirname(out), { recursive: true });
  let z;
  try {
    z = zig();
  } catch (e) {
    fail(`cannot install zig (the cross compiler, PyPI's ziglang): ${e.message}`, false);
  }
  // -s: no debug info in the shipped library.
  const r = spawnSync(z, ['cc', '-target', triple(target), ...flags, ...(platform === 'linux' ? linuxFlags : []), '-s', '-o', out, ...sources], {
    stdio: 'inherit',
    env: { ...process.env, ...zigEnv() },
  });
  if (r.status !== 0) fail(`zig cc -target ${triple(target)} failed (exit ${r.status})`, false);
  const made = describeBinary(out).target;
  if (made !== target) fail(`${out} is a ${made} library, not ${target}`, false);
  console.log(`build-native: ${out} (zig ${triple(target)})`);
}

if (release || targetArg) {
  const targets = release ? Object.keys(TARGETS) : [targetArg];
  for (const t of targets) {
    if (!TARGETS[t]) fail(`no shipped target ${t} (known: ${Object.keys(TARGETS).join(', ')})`, false);
    buildWithZig(t, release ? undefined : outArg);
  }
  process.exit(0);
}

if (process.platform === 'win32') fail('no Windows build yet');
const outDir = outArg ? resolve(outArg) : join(root, 'prebuilds', `${process.platform}-${process.arch}`);
const out = join(outDir, libraryName());

// Up to date: nothing to do (the test runs call this every time). A release build (zig) counts too.
if (upToDate(out)) process.exit(0);

const cc = ['cc', 'clang', 'gcc'].find((c) => spawnSync(c, ['--version'], { stdio: 'ignore' }).status === 0);
if (!cc) fail('no C compiler (cc, clang or gcc) found');
mkdirSync(outDir, { recursive: true });
const r = spawnSync(cc, [...flags, ...(process.platform === 'linux' ? linuxFlags : []), '-o', out, ...sources], { stdio: 'inherit' });
if (r.status !== 0) fail(`${cc} failed (exit ${r.status})`, false);
console.log(`build-native: ${out}`);
