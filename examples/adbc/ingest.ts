/**
 * Example: ingest an arrow-js table into a database through its ADBC
 * driver, then read it back into arrow-js.
 *
 * The table leaves zero-copy as an `ArrowArrayStream` (`exportArrayStream`),
 * bound with `AdbcStatementBindStream` under the bulk-ingestion options
 * (`adbc.ingest.target_table`, `adbc.ingest.mode`); `AdbcStatementExecuteQuery`
 * with no result stream runs the ingestion on a worker thread (the driver
 * calls the stream's JS callbacks meanwhile: koffi runs them on the JS
 * thread, which is free). Reading it back goes through `query`.
 */
import { Bool, Float64, Int32, Table, Utf8, vectorFromArray } from 'apache-arrow';
import type { ImportedTable } from '../../src/index.js';
import type { Connection, IngestMode } from './adbc.js';

/** A small table of the common column types, with nulls. */
export function sampleTable(): Table {
  return new Table({
    id: vectorFromArray([1, 2, 3, 4, 5], new Int32()),
    name: vectorFromArray(['ada', 'grace', null, 'edsger', 'barbara'], new Utf8()),
    score: vectorFromArray([9.5, null, 7.25, 8, -1.5], new Float64()),
    active: vectorFromArray([true, false, true, null, false], new Bool()),
  });
}

/** Ingests `table` as `target`, then reads `SELECT * FROM target ORDER BY <first column>` back. */
export async function ingestAndReadBack(conn: Connection, table: Table, target: string, mode: IngestMode = 'create'): Promise<{ ingested: number; back: ImportedTable }> {
  const ingested = await conn.ingest(table, target, mode);
  const back = await conn.query(`SELECT * FROM ${target} ORDER BY ${table.schema.fields[0]!.name}`);
  return { ingested, back };
}
