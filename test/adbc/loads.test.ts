/**
 * `import 'arrow-device/adbc'` loads the code a query runs and not the rest
 * of the library (issue 47): a command-line tool or a serverless function
 * pays for every module it loads, once per process. Asserted by the names
 * of the modules loaded (never by time): a fresh process records, through a
 * module resolve hook, every file under src/ an import resolves. The same
 * recorder on `import 'arrow-device'` must see the device layer, so an empty
 * or broken recorder fails here instead of passing.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { childSkip, runChild } from '../helpers/child.js';

const srcUrl = pathToFileURL(fileURLToPath(new URL('../../src/', import.meta.url))).href;

/** Modules a query through arrow-device/adbc never runs. */
const NOT_FOR_A_QUERY = [/^device\//, /^async\//, /^protocol\//, /^memory\/wasm$/, /^stream\/device$/, /^fill\/device$/, /^index$/];

const skip = process.versions.bun !== undefined || process.versions.deno !== undefined
  ? 'module resolve hooks (module.register) are Node.js\'s'
  : childSkip;

/** The modules under src/ (as `folder/name`, no extension) that importing `entry` loads in a fresh process, and the child's stdout. */
function loadedBy(entry: string, after = ''): { modules: string[]; stdout: string } {
  const hook = `export async function resolve(s, c, next) {
    const r = await next(s, c);
    if (r.url.startsWith(${JSON.stringify(srcUrl)})) process.stderr.write('LOADED ' + r.url.slice(${srcUrl.length}).replace(/\\.[jt]s$/, '') + '\\n');
    else if (r.url.includes('/node_modules/koffi/')) process.stderr.write('LOADED koffi\\n');
    return r;
  }`;
  const r = runChild(`
    import { register } from 'node:module';
    register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}));
    void (async () => {
      await import('@/src/${entry}');
      ${after}
    })();
  `);
  assert.equal(r.status, 0, r.stderr);
  const modules = [...new Set(r.stderr.split('\n').filter((l) => l.startsWith('LOADED ')).map((l) => l.slice(7).trim()))].sort();
  return { modules, stdout: r.stdout };
}

describe('what importing arrow-device/adbc loads', { skip }, () => {
  test('no device, WebGPU, CUDA, async, wasm or protocol module, and not the whole public index', () => {
    const { modules, stdout } = loadedBy(
      'adbc/index.js',
      // What the load-time checks of src/array/build.ts became: run on first use, so not yet. koffi
      // (required by src/memory/native.ts, its CommonJS build) is loaded with the native memory, on
      // first use: not yet either, and loaded once the native memory is made (the detector works).
      `const b = await import('@/src/array/build.js');
      const { createRequire } = await import('node:module');
      const koffi = () => Object.keys(createRequire(import.meta.url).cache).some((f) => f.includes('/node_modules/koffi/'));
      const atImport = koffi();
      (await import('@/src/memory/native.js')).nativeMemory();
      console.log(JSON.stringify([b.LAZY_DATA, b.LAZY_VIEW_DATA, b.BATCH_SHORTCUT, b.TABLE_SHORTCUT, atImport, koffi()]));`,
    );
    // The recorder works: the modules a query does run are there.
    for (const m of ['adbc/index', 'adbc/statement', 'stream/import', 'fill/fill', 'array/importer', 'memory/native']) assert.ok(modules.includes(m), `${m} not recorded: ${modules.join(', ')}`);
    const extra = modules.filter((m) => NOT_FOR_A_QUERY.some((re) => re.test(m)));
    assert.deepEqual(extra, [], `import 'arrow-device/adbc' loaded ${extra.join(', ')}`);
    assert.ok(!modules.includes('koffi'), 'koffi (its ESM build) was imported');
    const [lazy, lazyView, batch, table, koffiAtImport, koffiAfter] = JSON.parse(stdout.trim().split('\n').pop()!) as unknown[];
    assert.deepEqual([lazy, lazyView, batch, table], [null, null, null, null], 'a shortcut check ran at load');
    assert.equal(koffiAtImport, false, "import 'arrow-device/adbc' loaded koffi");
    assert.equal(koffiAfter, true, 'koffi not seen once the native memory was made: the detector is broken');
  });

  test('the recorder sees the device layer where it is loaded (import arrow-device)', () => {
    const { modules } = loadedBy('index.js');
    for (const m of ['device/api', 'device/webgpu', 'device/cuda', 'async/ring', 'memory/wasm', 'protocol/exportable', 'stream/device']) {
      assert.ok(modules.includes(m), `${m} not recorded for import 'arrow-device': ${modules.join(', ')}`);
    }
  });
});
