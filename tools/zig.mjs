// Zig as a C compiler for every Linux target the package ships, from any
// Linux x64 machine: the `ziglang` wheel of PyPI (a pinned version, nothing
// compiled), installed into a venv under .build/zig once. Zig carries the
// headers and the libc stubs of each target, so one compiler builds
// native/async-ring.c and native/adbc-run.c for linux-x64 and linux-arm64 against an old glibc
// (GLIBC below), and for macOS on x64 and arm64 against its SDK stubs
// (MACOS below): the prebuilt then loads on any distribution from that glibc
// on, and any macOS from that version on, whatever the packing machine runs.
// Windows has no ring (src/async/ring.ts says why); zig builds the Windows
// test peers (tools/windows.mjs).
//
// Plain JavaScript for any Node: tools/build-native.mjs and
// tools/test-runtime.mjs import it before with-node.mjs has a Node.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ZIG_VERSION = '0.15.2';
/** The oldest glibc the prebuilt libraries need: Node.js 22's own floor. */
export const GLIBC = '2.28';
/** The oldest macOS the prebuilt libraries need: Node.js 22's own floor (macOS 11). */
export const MACOS = '11.0';
/** The shipped targets: prebuilds/<key>/ and zig's triple. */
export const TARGETS = {
  'linux-x64': 'x86_64-linux-gnu',
  'linux-arm64': 'aarch64-linux-gnu',
  'darwin-x64': 'x86_64-macos',
  'darwin-arm64': 'aarch64-macos',
};

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const home = join(root, '.build', 'zig');

/** Runs a command for its output; on failure, throws with what it printed. */
function capture(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
  return r.stdout.trim();
}

/** The zig executable, installed from PyPI on first use. */
export function zig() {
  const py = join(home, 'bin', 'python');
  const locate = () => capture(py, ['-c', 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))']);
  if (existsSync(py)) {
    try {
      const z = locate();
      if (existsSync(z) && capture(z, ['version']) === ZIG_VERSION) return z;
    } catch {
      // not installed yet, or another version: install
    }
  }
  console.error(`zig: installing ziglang==${ZIG_VERSION} from PyPI into .build/zig`);
  if (!existsSync(py)) capture(process.env.PYTHON ?? 'python3', ['-m', 'venv', home]);
  execFileSync(py, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--only-binary=:all:', `ziglang==${ZIG_VERSION}`], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, PIP_CACHE_DIR: join(home, 'pip-cache') },
  });
  return locate();
}

/** Zig's cache, inside the repository's ignored .build/ (not the user's home). */
export const zigEnv = () => ({ ZIG_GLOBAL_CACHE_DIR: join(home, 'cache'), ZIG_LOCAL_CACHE_DIR: join(home, 'cache') });

/** zig's -target for a shipped target key (`linux-arm64`). */
export function triple(target) {
  const t = TARGETS[target];
  if (!t) throw new Error(`no zig target for ${target} (known: ${Object.keys(TARGETS).join(', ')})`);
  return target.startsWith('darwin-') ? `${t}.${MACOS}` : `${t}.${GLIBC}`;
}

/**
 * A `cc` for `target`: a small script that runs `zig cc -target <triple>`,
 * for builds that call a compiler by one path (the test peers, through
 * ARROW_DEVICE_CC). Returns its path.
 */
export function zigCc(target) {
  const z = zig();
  const script = join(home, `cc-${target}`);
  const env = Object.entries(zigEnv())
    .map(([k, v]) => `${k}='${v}'`)
    .join(' ');
  mkdirSync(home, { recursive: true });
  writeFileSync(script, `#!/bin/sh\n# Written by tools/zig.mjs.\n${env} exec '${z}' cc -target ${triple(target)} "$@"\n`);
  chmodSync(script, 0o755);
  return script;
}
