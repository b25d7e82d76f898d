/**
 * A worker that calls a Go-based ADBC driver (Flight SQL's) and stays alive:
 * test/adbc/worker-exit.test.ts's child then calls process.exit() in its
 * main thread (koffi#274: reported to hang there).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { AdbcDatabase } from '../../src/adbc/index.js';

const { driver } = workerData as { driver: string };
// A refused connection still runs the driver's Go code (its runtime and gRPC threads start).
const db = new AdbcDatabase({ driver, databaseOptions: { uri: 'grpc://127.0.0.1:1' } });
let refused = '';
try {
  const conn = await db.connect();
  await conn.query('SELECT 1');
} catch (e) {
  refused = String(e);
}
parentPort!.postMessage({ refused });
setInterval(() => {}, 1000);
