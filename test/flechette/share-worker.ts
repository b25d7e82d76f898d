/**
 * The worker of test/flechette/share.test.ts: a thread that reads flechette only. It imports
 * arrow-device/flechette (never the main entry, nor apache-arrow), imports what the main thread
 * shares and answers with what it saw. One message at a time.
 */
import koffi from 'koffi';
import { parentPort, workerData } from 'node:worker_threads';
import * as F from '../../src/flechette/index.js';

/** The threads fixture the main thread loaded (the same file, so the same counters): only its thread id is asked here. */
const threadOf = koffi.load((workerData as { fixture: string }).fixture).func('uint64_t sp_thread(void)') as () => bigint | number;

type Held = F.ImportedTable | F.ImportedColumn;
const held = new Map<string, Held>();

/** The sum of column `v` of a table (or of the column itself). */
function sumOf(x: Held): number {
  const c = x instanceof F.ImportedTable ? x.getChild('v')! : x;
  let s = 0;
  for (let i = 0; i < c.length; i++) s += Number(c.at(i));
  return s;
}

interface Msg {
  op: string;
  key?: string;
  handle?: F.SharedHandle;
}

parentPort!.on('message', (msg: Msg) => {
  try {
    switch (msg.op) {
      case 'thread':
        parentPort!.postMessage({ thread: BigInt(threadOf()) });
        break;
      case 'import': {
        const x = F.importShared(msg.handle!) as Held;
        held.set(msg.key!, x);
        const rows = x instanceof F.ImportedTable ? x.numRows : x.length;
        parentPort!.postMessage({ cls: x.constructor.name, rows, sum: sumOf(x), accounting: F.accounting() });
        break;
      }
      case 'sum':
        parentPort!.postMessage({ sum: sumOf(held.get(msg.key!)!) });
        break;
      case 'release': {
        // A typed array taken before the release reads as empty after it (detached), in this thread.
        const x = held.get(msg.key!)!;
        const c = x instanceof F.ImportedTable ? x.getChild('v')! : x;
        const values = c.data[0]!.values as Float64Array;
        const before = values.byteLength;
        x.release();
        held.delete(msg.key!);
        parentPort!.postMessage({ before, after: values.byteLength, released: x.released, accounting: F.accounting() });
        break;
      }
      case 'share-back': {
        // The worker's import shared on, back to the main thread.
        parentPort!.postMessage({ handle: F.share(held.get(msg.key!) as F.ImportedTable) });
        break;
      }
      default:
        throw new Error(`unknown op ${msg.op}`);
    }
  } catch (e) {
    parentPort!.postMessage({ fail: String((e as Error).stack ?? e) });
  }
});
