/**
 * Child process of test/examples/adbc.test.ts ("which thread reads a bound
 * stream"): an ADBC driver (argv[2]: duckdb, with 4 threads, or sqlite)
 * ingests a JS stream of 64 batches through a *synchronous*
 * AdbcStatementExecuteQuery. If the driver called the stream's get_next from
 * other threads, koffi would queue those calls for the JS thread, which sits in
 * the synchronous call: a deadlock (the parent kills the child). Prints
 * "ingesting" before the call and "done <rows>" after it.
 */
import { Int32, makeData, RecordBatch, Schema, Field, Struct } from 'apache-arrow';
import { nativeMemory, NULL } from '../../src/index.js';
import { AdbcDriver } from '../../examples/adbc/adbc.js';
import { DUCKDB, SQLITE } from '../../examples/adbc/drivers.js';

const spec = process.argv[2] === 'sqlite' ? SQLITE : DUCKDB;
const driver = AdbcDriver.load(spec.path, spec.entrypoint);
const db = driver.open(spec === DUCKDB ? { ...spec.memoryOptions, threads: '4' } : spec.memoryOptions);
const conn = db.connect();
const stmt = conn.statement();
const schema = new Schema([new Field('x', new Int32(), false)]);
function* batches(): Generator<RecordBatch> {
  for (let b = 0; b < 64; b++) {
    const values = new Int32Array(65536).fill(1);
    yield new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 65536, children: [makeData({ type: new Int32(), length: 65536, data: values })] }));
  }
}
stmt.setOption('adbc.ingest.target_table', 't');
stmt.bindStream(batches());
const m = nativeMemory();
const rows = m.alloc(8);
console.log('ingesting');
driver.call('StatementExecuteQuery', stmt.ptr, NULL, rows);
console.log('done', m.readI64(rows));
process.exit(0);
