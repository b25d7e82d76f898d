/**
 * Export ids (HandleTable, src/memory/registry.ts): a second `release` of
 * a released struct, through a stale copy (a consumer's bug the spec
 * forbids, which our callbacks ignore), must never release another export.
 * With slots reused as soon as one was free, one slot came back with its
 * old 8-bit generation 256 exports later, and the stale release released
 * whatever live export held it (found while fuzzing the threaded consumer
 * for issue 18).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tableFromArrays } from 'apache-arrow';
import { accounting, exportArray, freeArrowArray, nativeMemory, releaseArrowArray } from '../../src/index.js';
import { HandleTable, RELEASE_SIG } from '../../src/memory/registry.js';

test('a taken id matches nothing while 300,000 records come and go one at a time', () => {
  const t = new HandleTable<number>();
  const stale = t.add(0);
  t.take(stale);
  for (let k = 1; k <= 300_000; k++) {
    const id = t.add(k);
    assert.equal(t.get(stale), undefined, `after ${k} records the stale id ${stale} found record ${t.get(stale)}`);
    t.take(id);
  }
  assert.equal(t.size, 0);
});

test('a table past its minimum of free slots reuses the oldest, its generation advanced', () => {
  const t = new HandleTable<number>();
  const ids = Array.from({ length: HandleTable.MIN_FREE + 2 }, (_, k) => t.add(k));
  for (const id of ids) t.take(id);
  const reused = t.add(-1);
  assert.equal(reused & ((1 << 23) - 1), ids[0]! & ((1 << 23) - 1), 'the oldest free slot');
  assert.notEqual(reused, ids[0], 'with a new generation');
  assert.equal(t.get(ids[0]!), undefined);
  assert.equal(t.get(reused), -1);
});

test('a stale second release of an exported array, 1,000 exports later, releases no other export', () => {
  const m = nativeMemory();
  const L = m.layouts.ArrowArray;
  const batch = tableFromArrays({ x: Int32Array.of(1, 2) }).batches[0]!;
  const first = exportArray(batch);
  const stale = m.alloc(L.size);
  try {
    m.copyIn(stale, m.read(first, L.size)); // the consumer's stale copy, taken before its release
    releaseArrowArray(first);
    freeArrowArray(first);
    const release = m.readPtr(stale + BigInt(L.offsets.release!));
    for (let k = 1; k <= 1000; k++) {
      const live = exportArray(batch);
      const before = accounting().liveExports;
      m.call(release, RELEASE_SIG, stale);
      assert.equal(accounting().liveExports, before, `after ${k} exports the stale release released a live export`);
      assert.notEqual(m.readPtr(live + BigInt(L.offsets.release!)), 0n);
      freeArrowArray(live);
    }
  } finally {
    m.free(stale);
  }
});
