/**
 * Arrow data shared between threads, for flechette (src/flechette/share.ts over src/share/core.ts):
 * `share` of flechette tables and columns, `importShared` as flechette objects in a worker that
 * reads flechette only (test/flechette/share-worker.ts), and handles that cross targets both ways
 * (a flechette thread and an arrow-js one, test/threads/worker.ts, sharing one producer's data).
 * Against the threads fixture (test/threads/shared.c), whose release records the releasing thread
 * and poisons what it frees, so a read after an early free sees -1s instead of the data.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { tableFromArrays } from '@uwdata/flechette';
import { importTable as importArrowTable, share as shareArrow } from '../../src/index.js';
import * as F from '../../src/flechette/index.js';
import { sharedFixture, sharedMissing } from '../threads/fixture.js';

const compiled = import.meta.url.endsWith('.js');
const flechetteWorker = new URL(compiled ? './share-worker.js' : './share-worker.ts', import.meta.url);
const arrowWorker = new URL(compiled ? '../threads/worker.js' : '../threads/worker.ts', import.meta.url);

function startWorker(file: URL): Worker {
  const node = process.versions.bun === undefined && process.versions.deno === undefined;
  const tsx = node && !compiled && !process.execArgv.some((a) => a.includes('tsx'));
  const workerData = { fixture: sharedFixture().path };
  return new Worker(file, tsx ? { workerData, execArgv: [...process.execArgv, '--import', 'tsx'] } : { workerData });
}

type Reply = Record<string, unknown>;

/** Sends `msg` and waits for the worker's one answer (a failure in the worker fails here). */
function ask(w: Worker, msg: Record<string, unknown>): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: Reply): void => {
      w.off('error', onError);
      if (typeof m.fail === 'string') reject(new Error(`worker: ${m.fail}`));
      else resolve(m);
    };
    const onError = (e: Error): void => {
      w.off('message', onMessage);
      reject(e);
    };
    w.once('message', onMessage);
    w.once('error', onError);
    w.postMessage(msg);
  });
}

/** `n` batches of `rows` rows from the fixture (id = 0.., v = id * 0.5): the pointers and the schema. */
function fixtureBatches(n: number, rows: number): { ptrs: bigint[]; schema: bigint } {
  const fx = sharedFixture();
  return { ptrs: Array.from({ length: n }, (_, i) => fx.batch(rows, i * rows)), schema: fx.schema() };
}

function freeAll(ptrs: bigint[]): void {
  for (const p of ptrs) F.nativeMemory().free(p);
}

/** The sum of v over rows 0..rows-1: (rows - 1) * rows / 4. */
const expectedSum = (rows: number): number => ((rows - 1) * rows) / 4;

describe('flechette share and importShared across worker threads', { skip: sharedMissing ?? false }, () => {
  const workers: Worker[] = [];
  after(async () => {
    await Promise.all(workers.map((w) => w.terminate()));
  });
  const start = (file = flechetteWorker): Worker => {
    const w = startWorker(file);
    workers.push(w);
    return w;
  };
  const noShares = (): void => {
    const a = F.accounting();
    assert.equal(a.processSharedEntries, 0, 'no entry left in the table of shares');
    assert.equal(a.processSharedReferences, 0);
  };

  test('a flechette worker imports a flechette table the main thread imported: the same memory, released once by the last holder', async () => {
    const fx = sharedFixture();
    const w = start();
    const { ptrs, schema } = fixtureBatches(3, 1000);
    const t = F.importTable(ptrs, schema);
    freeAll(ptrs);
    const releases = fx.releases();
    const handle = F.share(t, { worker: w });
    assert.equal(handle.kind, 'table');
    assert.equal(handle.tickets.length, 3, 'one reference per record batch');
    const r = await ask(w, { op: 'import', key: 't', handle });
    assert.equal(r.cls, 'ImportedTable');
    assert.equal(r.rows, 3000);
    assert.equal(r.sum, expectedSum(3000));
    assert.equal((r.accounting as { sharedReferences: number }).sharedReferences, 3);
    // The main thread lets go first: nothing of the producer's is released, the worker still reads valid memory.
    const v = t.getChild('v')!.data[0]!.values as Float64Array;
    t.release();
    assert.equal(v.byteLength, 0, 'this thread\'s views detached');
    assert.equal(fx.releases(), releases);
    assert.equal((await ask(w, { op: 'sum', key: 't' })).sum, expectedSum(3000), 'not freed: the fixture would have poisoned it');
    const workerThread = (await ask(w, { op: 'thread' })).thread as bigint;
    const rel = await ask(w, { op: 'release', key: 't' });
    assert.deepEqual([rel.after, rel.released], [0, true], 'the worker\'s views detached at its release');
    assert.ok((rel.before as number) > 0);
    assert.equal(fx.releases(), releases + 3, 'each batch released once');
    assert.equal(fx.lastReleaseThread(), workerThread, 'on the worker, which let go last');
    assert.equal(fx.doubleReleases(), 0);
    noShares();
  });

  test('handles cross targets: arrow-js thread -> flechette thread, and flechette thread -> arrow-js thread', async () => {
    const fx = sharedFixture();
    const releases = fx.releases();
    // arrow-js here, flechette there.
    const fw = start();
    const a = fixtureBatches(2, 500);
    const arrowTable = importArrowTable(a.ptrs, a.schema);
    freeAll(a.ptrs);
    const r1 = await ask(fw, { op: 'import', key: 'a', handle: shareArrow(arrowTable) });
    assert.deepEqual([r1.cls, r1.rows, r1.sum], ['ImportedTable', 1000, expectedSum(1000)]);
    arrowTable.release();
    await ask(fw, { op: 'release', key: 'a' });
    assert.equal(fx.releases(), releases + 2);
    // flechette here, arrow-js there (the worker of test/threads).
    const aw = start(arrowWorker);
    const b = fixtureBatches(2, 400);
    const flechetteTable = F.importTable(b.ptrs, b.schema);
    freeAll(b.ptrs);
    const r2 = await ask(aw, { op: 'import', key: 'b', handle: F.share(flechetteTable) });
    assert.deepEqual([r2.cls, r2.rows, r2.sum], ['ImportedTable', 800, expectedSum(800)]);
    await ask(aw, { op: 'release', key: 'b' });
    assert.equal(fx.releases(), releases + 2, 'this thread still holds the batches');
    assert.equal(flechetteTable.getChild('v')!.at(799), 799 * 0.5);
    flechetteTable.release();
    assert.equal(fx.releases(), releases + 4);
    assert.equal(fx.doubleReleases(), 0);
    noShares();
  });

  test('a device record batch shares: the worker imports a flechette table over the host-readable device memory', async () => {
    const fx = sharedFixture();
    const releases = fx.releases();
    const w = start();
    const p = fx.deviceBatch(300, 10);
    const t = F.importDeviceRecordBatch(p, fx.schema()) as F.ImportedTable;
    F.nativeMemory().free(p);
    const r = await ask(w, { op: 'import', key: 'd', handle: F.share(t) });
    // ids 10..309, v = id * 0.5
    assert.deepEqual([r.rows, r.sum], [300, ((10 + 309) * 300) / 4]);
    t.release();
    await ask(w, { op: 'release', key: 'd' });
    assert.equal(fx.releases(), releases + 1);
    noShares();
  });

  test('a worker shares its import on, back to the main thread', async () => {
    const fx = sharedFixture();
    const releases = fx.releases();
    const w = start();
    const { ptrs, schema } = fixtureBatches(1, 100);
    const t = F.importTable(ptrs, schema);
    freeAll(ptrs);
    await ask(w, { op: 'import', key: 'x', handle: F.share(t) });
    t.release();
    const back = F.importShared((await ask(w, { op: 'share-back', key: 'x' })).handle as F.SharedHandle<'table'>);
    await ask(w, { op: 'release', key: 'x' });
    assert.ok(back instanceof F.ImportedTable);
    assert.equal(back.getChild('v')!.at(99), 49.5);
    assert.equal(fx.releases(), releases, 'the main thread holds it again');
    back.release();
    assert.equal(fx.releases(), releases + 1);
    noShares();
  });

  test('a flechette table and column built in JavaScript are copied once into process memory; the copy is freed with the last reference', async () => {
    const w = start();
    const copied = F.accounting().copiedBytes;
    const v = Float64Array.from({ length: 2000 }, (_, i) => i * 0.5);
    const t = tableFromArrays({ v, s: Array.from({ length: 2000 }, (_, i) => `s${i}`) });
    const r = await ask(w, { op: 'import', key: 'js', handle: F.share(t) });
    assert.deepEqual([r.cls, r.rows, r.sum], ['ImportedTable', 2000, expectedSum(2000)]);
    assert.ok(F.accounting().copiedBytes - copied >= v.byteLength, 'copied once');
    const c = await ask(w, { op: 'import', key: 'col', handle: F.share(t.getChild('v')!) });
    assert.deepEqual([c.cls, c.rows, c.sum], ['ImportedColumn', 2000, expectedSum(2000)]);
    await ask(w, { op: 'release', key: 'js' });
    await ask(w, { op: 'release', key: 'col' });
    noShares();
  });

  test('a handle carries one reference: a second import is a typed error, and a handle not imported is given back with dropShared', () => {
    const fx = sharedFixture();
    const releases = fx.releases();
    const { ptrs, schema } = fixtureBatches(1, 10);
    const t = F.importTable(ptrs, schema);
    freeAll(ptrs);
    const h = F.share(t);
    const once = F.importShared(h);
    assert.equal(once.numRows, 10);
    assert.throws(() => F.importShared(h), (e: unknown) => e instanceof F.ArrowDeviceError && e.path === 'handle.tickets[0]');
    F.dropShared(F.share(t));
    once.release();
    t.release();
    assert.equal(fx.releases(), releases + 1);
    noShares();
  });
});
