#!/usr/bin/env node
// Runs a command with a supported Node first on PATH.
//
//   node tools/with-node.mjs <command> [args...]
//
// arrow-device needs Node 22 or newer (`ArrayBuffer.prototype.transfer`
// detaches released views). `npm ci && npm test` must still work on a
// machine whose own Node is older: npm runs this file with that Node, and
// then it installs the `node-<platform>-<arch>` package of the npm registry
// (a prebuilt Node, nothing compiled) under .build/node<major> once, and
// runs the command with it first on PATH. A Node that is new enough is used
// as it is. ARROW_DEVICE_NODE=<major> picks a version explicitly (CI runs
// the suite on 22, 24 and 26 this way).
//
// Written in plain JavaScript for any Node >= 14: it must run on the old
// Node it replaces.
import { spawnSync, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const MIN_MAJOR = 22;
/** The version installed per major line when the running Node is not enough. */
const PINNED = { 22: '22.23.3', 24: '24.21.0', 26: '26.10.0' };

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const [cmd, ...args] = process.argv.slice(2);
if (!cmd) {
  console.error('usage: node tools/with-node.mjs <command> [args...]');
  process.exit(2);
}

const running = Number(process.versions.node.split('.')[0]);
const wanted = process.env.ARROW_DEVICE_NODE ? Number(process.env.ARROW_DEVICE_NODE) : undefined;

function nodeBinDir() {
  if (wanted === undefined && running >= MIN_MAJOR) return dirname(process.execPath);
  if (wanted !== undefined && wanted === running) return dirname(process.execPath);
  const major = wanted ?? MIN_MAJOR;
  const version = PINNED[major];
  if (!version) {
    console.error(`with-node: no pinned version for Node ${major} (known: ${Object.keys(PINNED).join(', ')})`);
    process.exit(2);
  }
  const arch = process.arch;
  const platform = process.platform === 'win32' ? 'win' : process.platform;
  const pkg = `node-${platform}-${arch}`;
  const prefix = join(root, '.build', `node${major}`);
  const bin = join(prefix, 'node_modules', pkg, 'bin');
  if (!existsSync(join(bin, process.platform === 'win32' ? 'node.exe' : 'node'))) {
    console.error(`with-node: Node ${process.versions.node} is older than ${MIN_MAJOR}: installing ${pkg}@${version} under .build/node${major}`);
    execFileSync(
      process.platform === 'win32' ? 'npm.cmd' : 'npm',
      ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--prefix', prefix, `${pkg}@${version}`],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
  }
  return bin;
}

const binDir = nodeBinDir();
const sep = process.platform === 'win32' ? ';' : ':';
// ARROW_DEVICE_LAUNCHER_NODE: the Node that ran this file, which the command's PATH may hide (a test
// proves that the package refuses to load on a Node too old for it: test/platform/platform.test.ts).
const env = {
  ...process.env,
  PATH: `${binDir}${sep}${process.env.PATH ?? ''}`,
  ARROW_DEVICE_LAUNCHER_NODE: process.env.ARROW_DEVICE_LAUNCHER_NODE ?? process.execPath,
};
const r = spawnSync(cmd, args, { stdio: 'inherit', env, shell: process.platform === 'win32' });
if (r.error) {
  console.error(`with-node: ${r.error.message}`);
  process.exit(1);
}
if (r.signal) {
  // Said, or a crash (a SIGSEGV at exit) reads in a CI log as a silent exit code 1.
  console.error(`with-node: ${[cmd, ...args].join(' ')} was killed by ${r.signal}`);
  process.exit(1);
}
process.exit(r.status ?? 0);
