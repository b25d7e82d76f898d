/**
 * A program that uses only flechette never loads apache-arrow (issue 52): importing
 * arrow-device/flechette, and importing and exporting through it, resolves no module of the
 * apache-arrow package. Asserted by module name, never by time, in a fresh process with a module
 * resolve hook (as test/adbc/loads.test.ts does for koffi), from the source and from the built
 * bundle (dist/, when built). The same recorder on `arrow-device` must see apache-arrow, so a broken
 * recorder fails here instead of passing.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { childSkip, runChild } from '../helpers/child.js';

const skip = process.versions.bun !== undefined || process.versions.deno !== undefined
  ? 'module resolve hooks (module.register) are Node.js\'s'
  : childSkip;

const distUrl = new URL('../../dist/flechette/index.js', import.meta.url);
const dist = fileURLToPath(distUrl);

const srcUrl = new URL('../../src/', import.meta.url).href;

/** The packages (and, as `src/<folder>/<name>`, our modules) a fresh process resolves while it imports `entry` and runs `after`. */
function packagesLoadedBy(entry: string, after = ''): { packages: string[]; modules: string[]; stdout: string } {
  const hook = `export async function resolve(s, c, next) {
    const r = await next(s, c);
    const m = /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(r.url);
    if (m) process.stderr.write('PACKAGE ' + m[1] + '\\n');
    else if (r.url.startsWith(${JSON.stringify(srcUrl)})) process.stderr.write('MODULE ' + r.url.slice(${srcUrl.length}).replace(/\\.[jt]s$/, '') + '\\n');
    return r;
  }`;
  const r = runChild(`
    import { register } from 'node:module';
    register('data:text/javascript,' + encodeURIComponent(${JSON.stringify(hook)}));
    void (async () => {
      const F = await import(${JSON.stringify(entry)});
      ${after}
    })();
  `);
  assert.equal(r.status, 0, r.stderr);
  const lines = (tag: string): string[] => [...new Set(r.stderr.split('\n').filter((l) => l.startsWith(tag)).map((l) => l.slice(tag.length).trim()))].sort();
  return { packages: lines('PACKAGE '), modules: lines('MODULE '), stdout: r.stdout };
}

/** A round trip through the flechette entry alone: a flechette table out as a C stream, back in, summed. */
const ROUND_TRIP = `
  // The file Node resolves '@uwdata/flechette' to (its package.json "main"): the instance the entry uses.
  const { tableFromArrays } = await import('@/node_modules/@uwdata/flechette/dist/flechette.cjs');
  const t = tableFromArrays({ x: Int32Array.from([1, 2, 3]) });
  const back = F.importArrayStream(F.exportArrayStream(t, { handle: true }).address).toTable();
  console.log(JSON.stringify(Array.from(back.getChild('x').toArray())));
  back.release();
`;

/**
 * The routes of issue 52 item 2 through the flechette entry alone: a CPU ArrowDeviceArray (a
 * flechette table's array moved in, its device fields written) in as a table, that table shared
 * and imported again (this thread), and an async reader made and disposed.
 */
const DEVICE_SHARE_ASYNC = `
  const { tableFromArrays } = await import('@/node_modules/@uwdata/flechette/dist/flechette.cjs');
  const m = F.nativeMemory();
  const { schema, array } = F.exportRecordBatch(tableFromArrays({ x: Int32Array.from([4, 5, 6]) }));
  const dev = F.allocArrowDeviceArray();
  F.moveArrowArray(array, dev);
  F.freeArrowArray(array);
  const D = m.layouts.ArrowDeviceArray.offsets;
  m.writeI32(dev + BigInt(D.device_type), F.DeviceType.CPU);
  m.writeI64(dev + BigInt(D.device_id), -1n);
  const t = F.importDeviceRecordBatch(dev, schema);
  F.freeArrowDeviceArray(dev);
  const shared = F.importShared(F.share(t));
  t.release();
  const reader = F.createAsyncDeviceStreamReader();
  reader.dispose();
  console.log(JSON.stringify(Array.from(shared.getChild('x').toArray())));
  shared.release();
`;

describe('what a flechette-only program loads', { skip }, () => {
  test('arrow-device/flechette (source): no apache-arrow, also after an export and an import', () => {
    const { packages, stdout } = packagesLoadedBy('@/src/flechette/index.js', ROUND_TRIP);
    assert.deepEqual(JSON.parse(stdout.trim()), [1, 2, 3]);
    assert.ok(packages.includes('@uwdata/flechette'), `the recorder saw flechette: ${packages.join(', ')}`);
    assert.ok(!packages.includes('apache-arrow'), `apache-arrow was loaded: ${packages.join(', ')}`);
  });

  test('arrow-device/flechette (source): no apache-arrow after a device import, a share and an async reader', () => {
    const { packages, stdout } = packagesLoadedBy('@/src/flechette/index.js', DEVICE_SHARE_ASYNC);
    assert.deepEqual(JSON.parse(stdout.trim()), [4, 5, 6]);
    assert.ok(packages.includes('@uwdata/flechette'), `the recorder saw flechette: ${packages.join(', ')}`);
    assert.ok(!packages.includes('apache-arrow'), `apache-arrow was loaded: ${packages.join(', ')}`);
  });

  test('arrow-device/flechette (the built bundle): no apache-arrow', { skip: existsSync(dist) ? false : 'dist/ is not built (npm run build)' }, () => {
    const { packages, stdout } = packagesLoadedBy(distUrl.href, ROUND_TRIP);
    assert.deepEqual(JSON.parse(stdout.trim()), [1, 2, 3]);
    assert.ok(!packages.includes('apache-arrow'), `apache-arrow was loaded: ${packages.join(', ')}`);
  });

  test('arrow-device/flechette/adbc (source): no apache-arrow, and no device, async, share or protocol module (a query needs none)', () => {
    const { packages, modules } = packagesLoadedBy('@/src/flechette/adbc.js', `console.log(typeof F.AdbcDatabase);`);
    assert.ok(modules.includes('flechette/adbc') && modules.includes('adbc/connection'), `the recorder saw our modules: ${modules.join(', ')}`);
    assert.ok(!packages.includes('apache-arrow'), `apache-arrow was loaded: ${packages.join(', ')}`);
    const unwanted = modules.filter((m) => /^(device|async|share|protocol)\//.test(m) || m === 'flechette/index' || m === 'index');
    assert.deepEqual(unwanted, [], `a query loads these: ${unwanted.join(', ')}`);
  });

  test('the recorder sees apache-arrow where it is loaded (arrow-device)', () => {
    const { packages } = packagesLoadedBy('@/src/index.js');
    assert.ok(packages.includes('apache-arrow'), `not recorded: ${packages.join(', ')}`);
  });
});
