/**
 * The conformance runner's leak accounting (tools/conformance-lib.ts): a
 * struct of ours that a peer takes and never releases is the peer's leak
 * when the peer measured and reported it (`Peer.heldExports`), and a failure
 * blamed on the case when nobody did; a case the peer refused part way is
 * checked for leaks too. Each runs one gold case through a stand-in peer
 * made of our own importer and exporter (as tools/peers/self.ts) that keeps
 * one extra stream export of ours unreleased.
 *
 * Run: node --import tsx --test tools/conformance-lib.test.ts
 */
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { accounting, freeArrowArrayStream, nativeMemory, type Ptr } from '../src/index.js';
import { GOLD, goldSkip } from '../test/helpers/gold.js';
import { collectUntil } from '../test/helpers/gc.js';
import { exportCase, importCase, runCase, setVia } from './conformance-lib.js';
import type { Peer } from './peers/peer.js';

const free = (p: bigint): void => nativeMemory().free(p);
const CASE = fileURLToPath(new URL('generated_primitive.arrow_file', GOLD));

/** A peer that round-trips with our own code and, in the direction given, keeps one stream export of ours. */
function leakyPeer(opts: { leakIn: 'ours first' | 'refused'; reports: boolean }, kept: Ptr[]): Peer {
  let held = 0;
  const keep = (c: Parameters<Peer['roundTrip']>[0]): void => {
    kept.push(exportCase(c, {}, 'stream').stream!);
    held++;
  };
  return {
    name: 'leaky',
    exactTypes: true,
    unsupported: () => undefined,
    supports: () => undefined,
    ...(opts.reports ? { heldExports: () => held } : {}),
    skipReason: (e) => (e instanceof Error && e.message === 'not supported here' ? 'the peer does not support it' : undefined),
    async roundTrip(original, ptrs) {
      keep(original);
      if (opts.leakIn === 'refused') {
        importCase(ptrs, free); // consumed, as a peer that fails after reading would
        throw new Error('not supported here');
      }
      const mid = importCase(ptrs, free);
      return { data: importCase(exportCase(mid), free) };
    },
    async peerFirst(original, through) {
      const back = importCase(await through(exportCase(original), free), free);
      void back;
      return undefined;
    },
    async close() {},
  };
}

describe('conformance accounting: leaks told apart', { skip: goldSkip }, () => {
  const kept: Ptr[] = [];
  after(async () => {
    for (const p of kept.splice(0)) freeArrowArrayStream(p);
    await collectUntil(() => accounting().liveExports === 0 && accounting().liveImports === 0);
  });
  setVia('array');

  test("a peer's measured leak passes the case, reported as the peer's", async () => {
    const r = await runCase(leakyPeer({ leakIn: 'ours first', reports: true }, kept), 'generated_primitive', [CASE]);
    assert.equal(r.status, 'pass', r.detail);
    assert.equal(r.peerLeak, 1);
    assert.match(r.detail, /leaky did not release 1 of the structs we exported to it \(its leak, not ours\)/);
    for (const p of kept.splice(0)) freeArrowArrayStream(p);
  });

  test('an export left live that no peer accounts for fails the case as a leak', async () => {
    const r = await runCase(leakyPeer({ leakIn: 'ours first', reports: false }, kept), 'generated_primitive', [CASE]);
    assert.equal(r.status, 'fail');
    assert.match(r.detail, /^ours first: leak: 0 imports and 1 exports live: /);
    for (const p of kept.splice(0)) freeArrowArrayStream(p);
  });

  test('a case the peer refused part way is checked for leaks (not blamed on the next case)', async () => {
    const r = await runCase(leakyPeer({ leakIn: 'refused', reports: false }, kept), 'generated_primitive', [CASE]);
    assert.equal(r.status, 'fail');
    assert.match(r.detail, /^ours first: the peer does not support it, then leak: 0 imports and 1 exports live/);
    for (const p of kept.splice(0)) freeArrowArrayStream(p);
    const clean = await runCase(leakyPeer({ leakIn: 'refused', reports: true }, kept), 'generated_primitive', [CASE]);
    assert.deepEqual({ status: clean.status, detail: clean.detail }, { status: 'skip', detail: 'the peer does not support it' });
  });
});
