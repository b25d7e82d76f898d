/**
 * What arrow-device asks of the runtime (src/platform/node.ts): a runtime
 * without `ArrayBuffer.prototype.transfer` (Node.js 20) could not make the
 * views of a released import unreadable, so the package refuses to load
 * there, saying why, instead of silently weakening "released means
 * unreadable".
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ArrowDeviceError } from '../../src/index.js';
import { requireDetach, runtime, runtimeName } from '../../src/platform/node.js';
import { childSkip, runChild } from '../helpers/child.js';
import { tempDir } from '../helpers/tools.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const REFUSAL = /arrow-device needs ArrayBuffer\.prototype\.transfer, which .* lacks: a release detaches the views/;

/** A child that imports the package and prints what happened. */
const IMPORT_PACKAGE = `
  void (async () => {
    try {
      await import('@/src/index.js');
      console.log('loaded');
    } catch (e) {
      console.log(e.name + ' ' + e.kind + ': ' + e.message);
    }
  })();
`;

describe('the runtime', () => {
  test(`is told apart: ${runtimeName}`, () => {
    const expected = process.versions.bun !== undefined ? 'bun' : process.versions.deno !== undefined ? 'deno' : 'node';
    assert.equal(runtime, expected);
  });

  test('a runtime without ArrayBuffer.prototype.transfer is refused with a typed error that says why', () => {
    assert.doesNotThrow(() => requireDetach(), 'this runtime has it');
    assert.throws(
      () => requireDetach({}),
      (e: unknown) => e instanceof ArrowDeviceError && e.kind === 'unsupported' && REFUSAL.test(e.message) && e.message.includes('Node.js 22'),
    );
  });

  test('importing the package there fails at once, before anything is imported', { skip: childSkip }, () => {
    const r = runChild(`delete ArrayBuffer.prototype.transfer;\n${IMPORT_PACKAGE}`);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout.trim(), /^ArrowDeviceError unsupported: /);
    assert.match(r.stdout, REFUSAL);
  });

  // The Node that ran npm, when with-node.mjs put a newer one first on PATH (this machine's Node 20, say).
  const launcher = process.env.ARROW_DEVICE_LAUNCHER_NODE;
  // NaN where it does not start (stdout is undefined then).
  const launcherMajor = launcher && !childSkip ? Number(spawnSync(launcher, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }).stdout?.trim()) : NaN;
  const oldNode = launcher && launcherMajor < 22 ? launcher : undefined;
  test(
    'Node.js older than 22 refuses to load the package, saying why',
    { skip: childSkip || (oldNode ? false : `no Node.js older than 22 here (the Node that ran npm: ${launcher ? `${launcher}, ${launcherMajor}` : 'not known'})`) },
    () => {
      const dir = tempDir('old-node');
      const file = join(dir, 'child.mts');
      writeFileSync(file, `${IMPORT_PACKAGE.replaceAll('@/', pathToFileURL(root).href)}\n`);
      const r = spawnSync(oldNode!, ['--import', 'tsx', file], { cwd: root, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      assert.match(r.stdout, REFUSAL);
      assert.match(r.stdout, /lacks/);
    },
  );
});
