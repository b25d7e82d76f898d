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

/** The packages a fresh process resolves while it imports `entry` and runs `after`. */
function packagesLoadedBy(entry: string, after = ''): { packages: string[]; stdout: string } {
  const hook = `export async function resolve(s, c, next) {
    const r = await next(s, c);
    const m = /\\/node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(r.url);
    if (m) process.stderr.write('PACKAGE ' + m[1] + '\\n');
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
  const packages = [...new Set(r.stderr.split('\n').filter((l) => l.startsWith('PACKAGE ')).map((l) => l.slice(8).trim()))].sort();
  return { packages, stdout: r.stdout };
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

describe('what a flechette-only program loads', { skip }, () => {
  test('arrow-device/flechette (source): no apache-arrow, also after an export and an import', () => {
    const { packages, stdout } = packagesLoadedBy('@/src/flechette/index.js', ROUND_TRIP);
    assert.deepEqual(JSON.parse(stdout.trim()), [1, 2, 3]);
    assert.ok(packages.includes('@uwdata/flechette'), `the recorder saw flechette: ${packages.join(', ')}`);
    assert.ok(!packages.includes('apache-arrow'), `apache-arrow was loaded: ${packages.join(', ')}`);
  });

  test('arrow-device/flechette (the built bundle): no apache-arrow', { skip: existsSync(dist) ? false : 'dist/ is not built (npm run build)' }, () => {
    const { packages, stdout } = packagesLoadedBy(distUrl.href, ROUND_TRIP);
    assert.deepEqual(JSON.parse(stdout.trim()), [1, 2, 3]);
    assert.ok(!packages.includes('apache-arrow'), `apache-arrow was loaded: ${packages.join(', ')}`);
  });

  test('the recorder sees apache-arrow where it is loaded (arrow-device)', () => {
    const { packages } = packagesLoadedBy('@/src/index.js');
    assert.ok(packages.includes('apache-arrow'), `not recorded: ${packages.join(', ')}`);
  });
});
