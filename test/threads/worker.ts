/**
 * The worker of test/threads: imports what the main thread shares and does
 * what each message asks, answering with what it saw. One message at a time.
 */
import koffi from 'koffi';
import { parentPort, workerData } from 'node:worker_threads';
import { accounting, importShared, nativeMemory, share, type SharedHandle } from '../../src/index.js';
import { sharedFixture } from './fixture.js';
import { collectUntil } from '../helpers/gc.js';

// The library the main thread loaded (test/threads/fixture.ts): the same file, so the same counters.
process.env.ARROW_DEVICE_SHARED_FIXTURE = (workerData as { fixture: string }).fixture;

type Held = { release(): void; getChild?(name: string): { toArray(): ArrayLike<unknown> } | null };
const held = new Map<string, Held>();

/** The sum of column `v` of a table or batch, read through arrow-js. */
function sumV(x: { getChild(name: string): { toArray(): ArrayLike<unknown> } | null }): number {
  const v = x.getChild('v')!.toArray() as Float64Array;
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]!;
  return s;
}

interface Msg {
  op: string;
  key?: string;
  handle?: SharedHandle;
  rows?: number;
}

parentPort!.on('message', (msg: Msg) => {
  try {
    const fx = sharedFixture();
    switch (msg.op) {
      case 'thread':
        parentPort!.postMessage({ thread: fx.thread() });
        break;
      case 'import': {
        const x = importShared(msg.handle!) as unknown as Held & { getChild(name: string): { toArray(): ArrayLike<unknown> } | null; numRows?: number; constructor: { name: string } };
        held.set(msg.key!, x);
        // Where the first batch's ids are: the main thread compares it with its own view's address.
        const ids = (x.getChild('id') as unknown as { data: { values: BigInt64Array }[] } | null)?.data[0]?.values;
        let addr: bigint | undefined | null = null;
        try {
          addr = ids === undefined ? null : nativeMemory().addressOf(ids);
        } catch {
          // A SharedArrayBuffer's bytes: no address to compare (their test compares values instead).
        }
        parentPort!.postMessage({ sum: sumV(x), rows: x.numRows, cls: x.constructor.name, accounting: accounting(), addr });
        break;
      }
      case 'sum': {
        const x = held.get(msg.key!)! as unknown as { getChild(name: string): { toArray(): ArrayLike<unknown> } | null };
        parentPort!.postMessage({ sum: sumV(x) });
        break;
      }
      case 'release':
        held.get(msg.key!)!.release();
        held.delete(msg.key!);
        parentPort!.postMessage({ released: true, accounting: accounting() });
        break;
      case 'try-import': {
        // A handle expected to be refused: the error's kind and message, and the accounting after.
        try {
          importShared(msg.handle!);
          parentPort!.postMessage({ error: null });
        } catch (e) {
          const err = e as { kind?: string; message: string };
          parentPort!.postMessage({ error: { kind: err.kind, message: err.message }, accounting: accounting() });
        }
        break;
      }
      case 'share-back': {
        // Data made here, shared back to the main thread: an arrow-js table built in this worker.
        const x = held.get(msg.key!);
        parentPort!.postMessage({ handle: share(x as never) });
        break;
      }
      case 'forget': {
        // The import left to the collector, the last resort: drop it unreleased and collect until its reference is gone.
        held.delete(msg.key!);
        void collectUntil(() => accounting().sharedReferences === 0).then((done) =>
          parentPort!.postMessage({ collected: done, accounting: accounting() }),
        );
        break;
      }
      case 'async-calls': {
        // koffi#190 (an occasional fatal napi_throw with async calls in workers): many of them, then an exit.
        void (async () => {
          const lib = koffi.load(fx.path);
          const f = lib.func('uint64_t sp_thread(void)') as unknown as { async(cb: (err: unknown, r: unknown) => void): void };
          const threads = new Set<string>();
          for (let i = 0; i < (msg.rows ?? 200); i++) {
            threads.add(String(await new Promise((resolve, reject) => f.async((err, r) => (err ? reject(err) : resolve(r))))));
          }
          parentPort!.postMessage({ calls: msg.rows ?? 200, threads: threads.size });
        })().catch((e: unknown) => parentPort!.postMessage({ fail: String(e) }));
        break;
      }
      case 'exit':
        process.exit(0);
        break;
      case 'hang':
        parentPort!.postMessage({ hanging: true });
        for (;;) {
          // Busy: only terminate() ends this thread.
        }
      default:
        throw new Error(`unknown op ${msg.op}`);
    }
  } catch (e) {
    parentPort!.postMessage({ fail: String((e as Error).stack ?? e) });
  }
});
