/**
 * Forces garbage collection and lets FinalizationRegistry callbacks run, on
 * every runtime the suite runs on: Bun's `Bun.gc(true)`; a `gc` global where
 * the runtime exposes one (Deno with `--v8-flags=--expose-gc`); else V8's
 * flag set at run time (Node).
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { tableFromArrays } from 'apache-arrow';
import { disposeImport, exportTable, freeArrowArray, freeArrowSchema, importTable } from '../../src/index.js';
import { liveCounters } from '../../src/memory/accounting.js';

/**
 * Bun's collector (JavaScriptCore) also marks whatever a word of the machine
 * stack seems to point at, and the collection's own frames lie over slots
 * that the import path left pointers in: the last import then stays
 * reachable, for as long as nothing else is written there. Before each
 * collection this runs that path again on a one-row table (its import
 * released at once, and left out of the counters the tests read), so those
 * slots hold something else. What a test proves is unchanged: its own
 * imports are released by the collector alone.
 */
const scrubTable = tableFromArrays({ a: Int32Array.from([1]), s: ['x'] });
function scrubStack(): void {
  const before = { ...liveCounters };
  const { schema, arrays } = exportTable(scrubTable);
  const back = importTable(arrays, schema, { validate: 'full' });
  for (const p of [...arrays]) freeArrowArray(p);
  freeArrowSchema(schema);
  back.getChild('a')!.toArray();
  disposeImport(back);
  if (liveCounters.liveImports !== before.liveImports || liveCounters.liveExports !== before.liveExports) {
    throw new Error('collectGarbage: the stack scrub did not release its own import');
  }
  liveCounters.releasedImports = before.releasedImports;
  liveCounters.copiedBuffers = before.copiedBuffers;
  liveCounters.copiedBytes = before.copiedBytes;
}

function findGc(): () => void {
  const g = globalThis as { gc?: () => void; Bun?: { gc(force: boolean): void } };
  const bun = g.Bun;
  if (bun && typeof bun.gc === 'function') {
    return () => {
      scrubStack();
      bun.gc(true);
    };
  }
  if (typeof g.gc === 'function') return g.gc;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

const gc = findGc();

/** One full garbage collection, now. */
export function collectGarbage(): void {
  gc();
}

/** Collects until `done()` holds, or gives up after `rounds` (returns whether it held). */
export async function collectUntil(done: () => boolean, rounds = 50): Promise<boolean> {
  for (let i = 0; i < rounds; i++) {
    if (done()) return true;
    gc();
    await new Promise((r) => setTimeout(r, 5));
  }
  return done();
}
