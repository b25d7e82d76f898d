/**
 * Example: query a database through its ADBC driver into arrow-js.
 *
 * `AdbcStatementExecuteQuery` fills an `ArrowArrayStream` that
 * arrow-device allocated (`importArrayStreamFrom`); the reader pulls the
 * result batch by batch, each zero-copy over the driver's memory, with the
 * driver's blocking `get_next` on a worker thread (`offThread`), so timers
 * and I/O keep running during a long read. A driver error in mid-stream
 * is asked of the driver on the live stream (`AdbcErrorFromArrayStream`,
 * through `onProducerError`) where the driver has it.
 */
import { importArrayStreamFrom } from '../../src/index.js';
import type { Connection } from './adbc.js';
import type { DriverSpec } from './drivers.js';

/** SQL for rows i = 0..n-1 with i, i*i and a label, in the driver's dialect. */
export function squaresSql(spec: DriverSpec, n: number): string {
  return `WITH s AS (${spec.series(n)}) SELECT i, CAST(i AS BIGINT) * i AS square, 'row ' || i AS label FROM s ORDER BY i`;
}

export interface SquaresSummary {
  rows: number;
  batches: number;
  /** Sum of `square` over every row, as the batches went by. */
  sumOfSquares: bigint;
  /** The first and last rows, read while their batch was current. */
  first: { i: number; square: number; label: string };
  last: { i: number; square: number; label: string };
  /** Timer ticks (every 1 ms) that ran while the result was read: the event loop was free. */
  timerTicks: number;
}

/**
 * Streams `n` generated rows out of the database, one batch alive at a time,
 * and sums them as they go by. `statementOptions` are set on the statement
 * first (SQLite's `adbc.sqlite.query.batch_rows`, say).
 */
export async function streamSquares(spec: DriverSpec, conn: Connection, n: number, statementOptions: Record<string, string> = {}): Promise<SquaresSummary> {
  using stmt = conn.statement(squaresSql(spec, n));
  for (const [k, v] of Object.entries(statementOptions)) stmt.setOption(k, v);
  const reader = await importArrayStreamFrom((out) => stmt.executeQuery(out), {
    offThread: true, // every get_next on a worker thread
    onProducerError: (stream, error) => conn.driver.errorFromArrayStream(stream, error), // the driver's own error details
  });
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  const summary: SquaresSummary = {
    rows: 0, batches: 0, sumOfSquares: 0n, timerTicks: 0,
    first: { i: -1, square: -1, label: '' }, last: { i: -1, square: -1, label: '' },
  };
  try {
    for await (const batch of reader) {
      const i = batch.getChild('i')!;
      const sq = batch.getChild('square')!;
      const label = batch.getChild('label')!;
      for (let r = 0; r < batch.numRows; r++) summary.sumOfSquares += BigInt(sq.get(r) as bigint | number);
      const row = (r: number) => ({ i: Number(i.get(r)), square: Number(sq.get(r)), label: String(label.get(r)) });
      if (summary.rows === 0) summary.first = row(0);
      summary.last = row(batch.numRows - 1);
      summary.rows += batch.numRows;
      summary.batches++;
    }
  } finally {
    clearInterval(timer);
    reader.release(); // already released at the end of the stream; here for the error paths
  }
  summary.timerTicks = ticks;
  return summary;
}
