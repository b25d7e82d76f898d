/**
 * The worker of docs/threads.md's pool: sums a column of the batches the
 * main thread shares with it (`share`), zero-copy, and answers with the sum.
 * It imports each handle, reads, and releases before it answers, so the
 * main thread's release of its table is the last and the producer's
 * `release` runs there.
 */
import { parentPort } from 'node:worker_threads';
import { importShared, type SharedHandle } from '../../src/index.js'; // in an application: from 'arrow-device'

interface Job {
  column: string;
  handles: SharedHandle<'batch'>[];
}

parentPort!.on('message', ({ column, handles }: Job) => {
  let sum = 0;
  for (const handle of handles) {
    const batch = importShared(handle); // the main thread's memory, read here
    try {
      for (const x of batch.getChild(column)!) sum += Number(x);
    } finally {
      batch.release(); // this thread's views and reference; the data lives on while others hold it
    }
  }
  parentPort!.postMessage(sum);
});
