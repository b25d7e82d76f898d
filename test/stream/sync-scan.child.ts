/**
 * Child process of test/stream/duckdb.test.ts ("the thread rule"): scans a JS
 * stream with DuckDB through *synchronous* koffi calls, with the DuckDB thread
 * count given as argv[2]. Prints "querying" before the query and "done <rc>"
 * after it; with several threads it never gets there (deadlock), by design.
 */
import koffi from 'koffi';
import { DUCKDB_LIBRARY_PATH } from '../peers/duckdb/duckdb.js';
import { nativeMemory } from '../../src/index.js';
import { exportArrayStream } from '../../src/stream/index.js';
import { Int32, makeData, RecordBatch, Schema, Field, Struct } from 'apache-arrow';

const threads = Number(process.argv[2] ?? '1');
const lib = koffi.load(DUCKDB_LIBRARY_PATH);
const open = lib.func('int duckdb_open(const char *path, void *out)');
const connect = lib.func('int duckdb_connect(void *db, void *out)');
const query = lib.func('int duckdb_query(void *con, const char *sql, void *res)');
const scan = lib.func('int duckdb_arrow_scan(void *con, const char *name, void *stream)');
const m = nativeMemory();
const slot = m.alloc(8), res = m.alloc(48);
if (open(null, slot) !== 0) throw new Error('open');
const db = m.readPtr(slot);
if (connect(db, slot) !== 0) throw new Error('connect');
const con = m.readPtr(slot);
if (query(con, `SET threads = ${threads}`, res) !== 0) throw new Error('set threads');
const schema = new Schema([new Field('x', new Int32(), false)]);
function* batches() {
  for (let b = 0; b < 64; b++) {
    const values = new Int32Array(65536).fill(1);
    yield new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: 65536, children: [makeData({ type: new Int32(), length: 65536, data: values })] }));
  }
}
const stream = exportArrayStream(batches(), { schema });
if (scan(con, 'v', stream) !== 0) throw new Error('scan');
console.log('querying');
const rc = query(con, 'SELECT sum(x) FROM v', res);
console.log('done', rc);
process.exit(0);
