/**
 * Deno with the smallest set of permissions the README documents:
 *
 *   deno run --allow-ffi --allow-read=<the package> app.ts
 *
 * `--allow-ffi` loads koffi (every native call); `--allow-read` lets koffi
 * and the async ring find their prebuilt binaries. Without `--allow-env`
 * the `ARROW_DEVICE_*` overrides are unset (defaults); without
 * `--allow-read` the sync paths work and the async ring says why it is off;
 * without `--allow-ffi` nothing native loads, and the error says so.
 *
 * Runs where a Deno is at hand: the one running the tests (npm run
 * test:deno), or the one tools/runtimes.mjs installed under .build/deno.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { asyncPeerPath, peerMissing } from '../async/peer.js';
import { asyncRing, asyncRingMissing } from '../../src/async/ring.js';
import { childSkip } from '../helpers/child.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const installed = join(root, '.build', 'deno', 'node_modules', '@deno', `${process.platform}-${process.arch}-glibc`, 'deno');
const deno = process.versions.deno !== undefined ? process.execPath : existsSync(installed) ? installed : undefined;

const skip =
  childSkip ||
  (deno ? false : 'no Deno here (npm run test:deno installs one under .build/deno)') ||
  (peerMissing ?? false) ||
  (asyncRing() ? false : `the native ring is not available: ${asyncRingMissing}`);

/** What an application does: a round trip, a C producer thread into a reader, our producer into a C consumer thread. */
const APP = `
import koffi from 'koffi';
import { tableFromArrays, Table, vectorFromArray } from 'apache-arrow';
import {
  createAsyncDeviceStreamReader, exportRecordBatch, freeArrowSchema, importRecordBatch, produceAsyncDeviceStream,
} from '${root}src/index.ts';

const out = {};
const batch = tableFromArrays({ id: Int32Array.from([1, 2, 3]) }).batches[0];
const { schema, array } = exportRecordBatch(batch);
const back = importRecordBatch(array, schema);
freeArrowSchema(schema);
out.roundTrip = [...back.getChild('id')].join(',');

// The peer stays loaded while its batches live: this module keeps its handle to the end (README).
const peer = koffi.load(Deno.args[0]);
const wait = (fn, ...args) => new Promise((resolve, reject) => fn.async(...args, (e) => (e ? reject(e) : resolve())));
const produce = peer.func('void *peer_produce(void *handler, int64_t n, int64_t rows, int64_t error_at)');
const produceWait = peer.func('void peer_produce_wait(void *p, _Out_ int64_t *stats)');
const reader = createAsyncDeviceStreamReader();
out.reader = reader.nativeRing ? 'native ring' : 'JS callbacks: ' + reader.nativeRingMissing;
const p = produce(reader.handler, 20, 5, -1);
let rows = 0;
for await (const b of reader) rows += b.numRows;
await reader.released;
await wait(produceWait, p, new BigInt64Array(9));
out.readRows = rows;

const consumer = peer.func('void *peer_consumer(int64_t initial, int64_t cancel_after, int request_zero, int64_t fail_at, int hold, int misbehave)');
const consumerWait = peer.func('void peer_consumer_wait(void *h, int64_t timeout_ms, _Out_ int64_t *stats, _Out_ uint8_t *msg, _Out_ uint8_t *fmt, _Out_ uint8_t *md)');
const h = consumer(2, -1, 0, -1, 0, 0);
const batches = Array.from({ length: 10 }, (_, b) => new Table({ x: vectorFromArray(Int32Array.from([b, b])) }).batches[0]);
const result = await produceAsyncDeviceStream(batches, h);
const stats = new BigInt64Array(15);
await wait(consumerWait, h, 60000, stats, new Uint8Array(128), new Uint8Array(16), new Uint8Array(64));
out.producer = result.nativeRing ? 'native pump' : 'JS callbacks: ' + result.nativeRingMissing;
out.consumed = Number(stats[0]);
console.log(JSON.stringify(out));
`;

/** The round trip alone, through the library (which loads koffi itself). */
const ROUND_TRIP = APP.slice(0, APP.indexOf('// The peer stays loaded')).replace("import koffi from 'koffi';\n", '') + 'console.log(JSON.stringify(out));\n';

function runApp(flags: string[], app = APP): { status: number | null; stdout: string; stderr: string } {
  // Inside the repository, where Deno finds package.json and node_modules as for an application.
  mkdirSync(join(root, '.build'), { recursive: true });
  const dir = mkdtempSync(join(root, '.build', 'deno-app-'));
  const file = join(dir, 'app.ts');
  writeFileSync(file, app);
  // --no-prompt: a missing permission fails instead of asking; --sloppy-imports: this repository's
  // .ts sources import each other as .js (an installed package's dist/ needs no such flag).
  try {
    const r = spawnSync(deno!, ['run', '--no-prompt', '--sloppy-imports', ...flags, file, asyncPeerPath()], { cwd: root, encoding: 'utf8', timeout: 120_000 });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('Deno with the smallest permissions', { skip }, () => {
  test('--allow-ffi --allow-read=<package>: round trips, the native ring and pump with C threads, no --allow-env', () => {
    const r = runApp(['--allow-ffi', `--allow-read=${root}`]);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout.trim().split('\n').pop()!), {
      roundTrip: '1,2,3', reader: 'native ring', readRows: 100, producer: 'native pump', consumed: 10,
    });
  });

  test('--allow-ffi alone: everything works through JS callbacks, and the ring says it may not read its library', () => {
    const r = runApp(['--allow-ffi']);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, string | number>;
    assert.equal(out.roundTrip, '1,2,3');
    assert.equal(out.readRows, 100);
    assert.equal(out.consumed, 10);
    assert.match(String(out.reader), /^JS callbacks: cannot look for the prebuilt library on Deno .*--allow-read/);
    assert.equal(out.producer, out.reader);
  });

  test('no --allow-ffi: the first native call fails with a typed error naming the permission', () => {
    assert.equal(runApp(['--allow-ffi', `--allow-read=${root}`], ROUND_TRIP).stdout.trim(), '{"roundTrip":"1,2,3"}', 'the app alone');
    const r = runApp([`--allow-read=${root}`], ROUND_TRIP);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /ArrowDeviceError: the native backend needs koffi, which failed to load: .*NotCapable/);
  });
});
