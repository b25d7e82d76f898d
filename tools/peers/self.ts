/**
 * The "self" peer: our own importer and exporter on the other side. It
 * proves the two agree with each other and with the files; real peers
 * (duckdb, arrow-cpp) prove they agree with the rest of the world.
 */
import { nativeMemory } from '../../src/index.js';
import { diffCases, exportCase, importCaseAsync, produceCase, readCase } from '../conformance-lib.js';
import type { Peer } from './peer.js';

/** Frees struct memory we allocated (import has already consumed the struct). */
const free = (p: bigint): void => nativeMemory().free(p);

export async function selfPeer(): Promise<Peer> {
  return {
    name: 'self',
    exactTypes: true,
    unsupported: () => undefined,
    supports: () => undefined,
    async asyncRoundTrip(original) {
      // We produce into our own handler and read it back; then once more from what we read.
      const mid = await readCase((h) => produceCase(original, h));
      return { data: await readCase((h) => produceCase(mid, h)) };
    },
    async asyncPeerFirst(original) {
      const back = await readCase((h) => produceCase(original, h));
      return diffCases(original, back, true);
    },
    async roundTrip(_original, ptrs) {
      // The "peer" imports ours and exports its own.
      const mid = await importCaseAsync(ptrs, free);
      const again = exportCase(mid);
      return { data: await importCaseAsync(again, free) };
    },
    async peerFirst(original, through) {
      const theirs = exportCase(original);
      const ours = await through(theirs, free);
      const back = await importCaseAsync(ours, free);
      return diffCases(original, back, true);
    },
    async close() {},
  };
}
