/** Forces garbage collection and lets FinalizationRegistry callbacks run. */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

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
