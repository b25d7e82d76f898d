/**
 * The sample data of the browser example: an arrow-js table made with
 * `tableFromArrays`, written to Parquet by parquet-wasm (in Node).
 * `sampleRow` gives the values the page must show (the browser test checks
 * them).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Table, tableFromArrays, tableToIPC, Utf8, vectorFromArray } from 'apache-arrow';
import * as pw from 'parquet-wasm/esm';

export const SAMPLE_ROWS = 1000;
const CITIES = ['Lisbon', 'Oslo', 'Nairobi', 'Lima'] as const;

/** Row `i` of the sample, as the page renders it (null as "null", int64 in decimal). */
export function sampleRow(i: number): { id: string; name: string; city: string; score: string; big: string; flag: string } {
  return {
    id: String(i),
    name: i % 7 === 3 ? 'null' : `row-${i}`,
    city: CITIES[i % CITIES.length]!,
    score: i % 5 === 4 ? 'null' : String(i * 0.25),
    big: (BigInt(i) * 1_000_000_007n - 5_000_000_000n).toString(),
    flag: String(i % 3 === 0),
  };
}

let initialised = false;

/** parquet-wasm's ESM build, initialised synchronously from its wasm file (Node). */
export function parquetWasm(): typeof pw {
  if (!initialised) {
    const require = createRequire(import.meta.url);
    pw.initSync({ module: readFileSync(require.resolve('parquet-wasm/esm/parquet_wasm_bg.wasm')) });
    initialised = true;
  }
  return pw;
}

/** The Parquet bytes of the sample (Int32, Utf8 with nulls, Dictionary<Utf8>, Float64 with nulls, Int64, Bool). */
export function sampleParquet(rows = SAMPLE_ROWS): Uint8Array {
  const idx = Array.from({ length: rows }, (_, i) => i);
  let table: Table = tableFromArrays({
    id: Int32Array.from(idx),
    city: idx.map((i) => CITIES[i % CITIES.length]!), // arrow-js makes this Dictionary<Utf8, Int32>
    score: idx.map((i) => (i % 5 === 4 ? null : i * 0.25)),
    big: BigInt64Array.from(idx, (i) => BigInt(i) * 1_000_000_007n - 5_000_000_000n),
    flag: idx.map((i) => i % 3 === 0),
  });
  // Strings in tableFromArrays become dictionaries: a plain Utf8 column (with nulls) goes in as a vector.
  const name = vectorFromArray(idx.map((i) => (i % 7 === 3 ? null : `row-${i}`)), new Utf8());
  table = new Table({ id: table.getChild('id')!, name, ...Object.fromEntries(table.schema.fields.slice(1).map((f) => [f.name, table.getChild(f.name)!])) });
  const p = parquetWasm();
  const props = new p.WriterPropertiesBuilder().setCompression(p.Compression.SNAPPY).build();
  return p.writeParquet(p.Table.fromIPCStream(tableToIPC(table, 'stream')), props);
}
