/**
 * The native ring's prebuilt libraries, one per shipped target
 * (tools/zig.mjs TARGETS: Linux x64 and arm64, macOS x64 and arm64), as
 * `npm pack` ships them: each is a library of its own platform and CPU
 * (ELF or Mach-O, read from its headers) and exports every function
 * src/async/ring.ts, src/adbc/run.ts and src/memory/workers.ts load. macOS cannot run here: this is what proves its
 * libraries. Windows has none (src/async/ring.ts says why; the Windows run,
 * tools/windows.mjs, proves the JS-callback path there).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { describeBinary } from '../../tools/binary.mjs';
import { TARGETS } from '../../tools/zig.mjs';
import { tempDir } from '../helpers/tools.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The functions src/async/ring.ts, src/adbc/run.ts and src/memory/workers.ts bind (`l.func('<result> name(...)')`), read from their source. */
const loaded = [join('async', 'ring.ts'), join('adbc', 'run.ts'), join('memory', 'workers.ts')].flatMap((f) =>
  [...readFileSync(join(root, 'src', f), 'utf8').matchAll(/l\.func\(\s*'[^']*?\b(\w+)\(/g)].map((m) => m[1]!));

const libraryName = (target: string): string => `libarrow-device-async.${target.startsWith('darwin-') ? 'dylib' : 'so'}`;

/** Why the library at `file` is not what `target` needs, or undefined. */
function wrong(file: string, target: string): string | undefined {
  const d = describeBinary(file);
  if (d.target !== target) return `${file} is a ${d.format} library for ${d.target}, not ${target}`;
  const missing = loaded.filter((f) => !d.exports.includes(f));
  return missing.length > 0 ? `${file} does not export ${missing.join(', ')}` : undefined;
}

// On Windows the suite runs compiled and cannot start zig (a Linux program there).
const zigSkip = process.platform === 'win32' ? 'zig is a Linux program in the Windows run' : false;

describe('prebuilt native ring libraries', () => {
  test('the loader binds the functions this test looks for', () => {
    // A regex that matched nothing would make every export check below pass vacuously.
    assert.ok(loaded.length >= 17, `found ${loaded.length} bound functions in src/async/ring.ts, src/adbc/run.ts and src/memory/workers.ts`);
    for (const f of ['ring_version', 'ring_new', 'pump_new', 'pump_free', 'adbc_run', 'adbc_run_job_size', 'adbc_run_fn', 'workers_new', 'workers_submit', 'workers_take', 'workers_job_size']) assert.ok(loaded.includes(f), f);
  });

  test('every shipped target builds with zig into a library of that target exporting every bound function', { skip: zigSkip, timeout: 600_000 }, () => {
    const out = tempDir('prebuilds');
    for (const target of Object.keys(TARGETS)) {
      const dir = join(out, target);
      const r = spawnSync(process.execPath, [join(root, 'tools', 'build-native.mjs'), '--target', target, '--out', dir], { encoding: 'utf8' });
      assert.equal(r.status, 0, `build-native --target ${target}:\n${r.stdout}${r.stderr}`);
      assert.equal(wrong(join(dir, libraryName(target)), target), undefined);
    }
    assert.deepEqual(Object.keys(TARGETS).sort(), ['darwin-arm64', 'darwin-x64', 'linux-arm64', 'linux-x64']);
  });

  test('the check refuses a library of another target and one missing a function', { skip: zigSkip }, () => {
    const mac = join(tempDir('prebuilds-wrong'), 'lib.dylib');
    const r = spawnSync(process.execPath, [join(root, 'tools', 'build-native.mjs'), '--target', 'darwin-arm64', '--out', join(mac, '..')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    const built = join(mac, '..', libraryName('darwin-arm64'));
    assert.match(wrong(built, 'darwin-x64') ?? '', /for darwin-arm64, not darwin-x64/);
    loaded.push('ring_not_there');
    try {
      assert.match(wrong(built, 'darwin-arm64') ?? '', /does not export ring_not_there/);
    } finally {
      loaded.pop();
    }
  });

  test('npm pack runs the release build, and ships whatever is in prebuilds/', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string>; files: string[] };
    assert.match(pkg.scripts.prepack ?? '', /tools\/build-native\.mjs --release/);
    assert.ok(pkg.files.includes('prebuilds'), 'package.json files lists prebuilds');
  });

  // CI builds the release libraries before the tests (.ci/run); a fresh clone's `npm test` has only its own.
  const present = existsSync(join(root, 'prebuilds')) ? readdirSync(join(root, 'prebuilds')).filter((t) => t in TARGETS) : [];
  test(`the libraries in prebuilds/ (${present.join(', ') || 'none'}) are each of their folder's target`, { skip: present.length ? false : 'nothing built in prebuilds/' }, () => {
    for (const target of present) {
      const file = join(root, 'prebuilds', target, libraryName(target));
      if (existsSync(file)) assert.equal(wrong(file, target), undefined);
    }
  });
});
