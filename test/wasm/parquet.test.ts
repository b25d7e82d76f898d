/**
 * parquet-wasm (arrow-rs compiled to wasm32) as a real wasm producer: each
 * gold case whose types Parquet can hold is written to Parquet by
 * parquet-wasm, read back by it, handed over as C Data Interface structs in
 * its memory (`intoFFI`), imported through `{ memory: wasmMemory(...) }`, and
 * compared with arrow-js's read of the gold `.arrow_file` and with
 * parquet-wasm's own IPC output of the same Parquet file.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tableFromIPC, type Field, type Struct, type Table } from 'apache-arrow';
import { accounting, importArrayView, importSchemaNode, importTable } from '../../src/index.js';
import { wasmMemory, type WasmTable } from '../../src/memory/wasm.js';
import { diffTables, diffValues, typeString } from '../helpers/compare.js';
import { collectUntil } from '../helpers/gc.js';
import { diffCases, load } from '../../tools/conformance-lib.js';
import { loadParquetWasm, type LoadedParquetWasm } from './modules.js';

const gold = fileURLToPath(new URL('../../../shared/testdata/arrow-testing/', import.meta.url));
const loaded = await loadParquetWasm();
const skip = typeof loaded === 'string' ? loaded : !existsSync(gold) ? `no gold files at ${gold}` : false;
if (skip) console.log(`# skipping the parquet-wasm tests: ${skip}`);
const L = loaded as LoadedParquetWasm;

/** Cases not tried, and why. */
const NOT_TRIED: Record<string, string> = {
  generated_union: 'parquet-wasm 0.8.0 traps (unreachable) writing a union: Parquet has no union type',
};
/** Cases parquet-wasm refuses to write (the test proves the refusal still happens, so the list stays true). */
const WRITE_REFUSED: Record<string, RegExp> = {
  generated_interval_mdn: /MonthDayNano .* not yet implemented/,
  generated_nested_dictionary: /not yet supported/,
};
/** Cases whose types change in Parquet (values compared, types not). */
const TYPE_CHANGES: Record<string, string> = {
  generated_binary_view: 'arrow-rs reads Parquet BYTE_ARRAY back as Binary, not BinaryView',
};

const CASES = [
  'binary', 'binary_no_batches', 'binary_view', 'binary_zerolength', 'custom_metadata', 'datetime', 'decimal',
  'decimal256', 'decimal32', 'decimal64', 'dictionary', 'dictionary_unsigned', 'duplicate_fieldnames', 'duration',
  'extension', 'interval', 'interval_mdn', 'large_binary', 'list_view', 'map', 'map_non_canonical', 'nested',
  'nested_dictionary', 'nested_large_offsets', 'null', 'null_trivial', 'primitive', 'primitive_no_batches',
  'primitive_zerolength', 'recursive_nested', 'run_end_encoded', 'union',
].map((c) => `generated_${c}`);

/** A field's description with its metadata sorted: arrow-rs keeps field metadata in a HashMap. */
function fieldKey(f: Field): string {
  const md = [...f.metadata].sort(([a], [b]) => (a < b ? -1 : 1));
  const children = (f.type.children ?? []) as Field[];
  return `${f.name}${f.nullable ? '?' : ''}: ${typeString(f.type)} ${JSON.stringify(md)} <${children.map(fieldKey).join(', ')}>`;
}

/** diffTables, but field metadata compared as sets. */
/** A table's schema as its data says (arrow-js 21 misreports `table.schema` when field names repeat). */
function dataFields(t: Table): readonly Field[] {
  return t.batches.length > 0 ? (t.batches[0]!.data.type as Struct).children : t.schema.fields;
}

function diffExact(a: Table, b: Table): string | undefined {
  const fa = dataFields(a).map(fieldKey);
  const fb = dataFields(b).map(fieldKey);
  for (let i = 0; i < Math.max(fa.length, fb.length); i++) if (fa[i] !== fb[i]) return `field ${i}: ${fa[i]} != ${fb[i]}`;
  return diffValues(a, b, true);
}

function writeParquet(name: string): Uint8Array {
  return L.pw.writeParquet(L.pw.Table.fromIPCStream(readFileSync(join(gold, `${name}.stream`))));
}

/** Reads `parquet` in parquet-wasm and imports the table it hands over through FFI. */
function readThroughFFI(parquet: Uint8Array, memory = L.mem, batchSize?: number): Table {
  const ffi = L.pw.readParquet(parquet, batchSize ? { batchSize } : undefined).intoFFI();
  try {
    return importTable([...ffi.arrayAddrs()].map(BigInt), BigInt(ffi.schemaAddr()), { memory, validate: 'full' });
  } finally {
    ffi.free(); // frees the Rust-side struct memory; the structs were moved out (release is NULL)
  }
}

describe(`parquet-wasm ${L?.version ?? ''} through the wasm32 memory`, { skip }, () => {
  for (const name of CASES) {
    const notTried = NOT_TRIED[name];
    test(`${name} round-trips through Parquet and imports from wasm memory`, { skip: notTried ?? false }, () => {
      const refused = WRITE_REFUSED[name];
      if (refused) {
        assert.throws(() => writeParquet(name), refused);
        return;
      }
      const parquet = writeParquet(name);
      const viaFFI = readThroughFFI(parquet);
      const viaIPC = tableFromIPC(L.pw.readParquet(parquet).intoIPCStream());
      // Ours against parquet-wasm's own serialisation of the same Parquet read.
      assert.equal(diffExact(viaIPC, viaFFI), undefined, 'FFI import = parquet-wasm IPC output');
      const arrowFile = join(gold, `${name}.arrow_file`);
      let goldTable: Table | undefined;
      try {
        goldTable = tableFromIPC(readFileSync(arrowFile));
      } catch {
        // arrow-js cannot read this gold file (list view, run-end encoded): compare our own
        // views with the integration JSON, as the conformance runner does.
        const c = load([join(gold, `${name}.json.gz`)]);
        const ffi = L.pw.readParquet(parquet).intoFFI();
        const schema = importSchemaNode(BigInt(ffi.schemaAddr()), { memory: L.mem });
        const batches = [...ffi.arrayAddrs()].map((p) => importArrayView(BigInt(p), schema, { memory: L.mem, validate: 'full' }));
        ffi.free();
        assert.equal(diffCases(c, { schema, batches }, false), undefined);
        return;
      }
      if (TYPE_CHANGES[name]) assert.equal(diffValues(goldTable, viaFFI), undefined, TYPE_CHANGES[name]);
      else assert.equal(diffExact(goldTable, viaFFI), undefined);
      // The strict comparison (metadata order included) only differs in metadata order, if at all.
      const strict = diffTables(goldTable, viaFFI);
      if (strict) assert.match(strict, /field \d+: .*\[\[|BinaryView/, strict);
    });
  }

  test('release is called through the module function table, exactly once per imported struct', async () => {
    // A table wrapper that counts calls of each function it hands out.
    const real = L.pw._functionTable();
    const calls = new Map<number, number>();
    const counting: WasmTable = {
      get length() {
        return real.length;
      },
      get(i: number) {
        const f = real.get(i) as ((...a: unknown[]) => unknown) | null;
        return f && ((...a: unknown[]) => (calls.set(i, (calls.get(i) ?? 0) + 1), f(...a)));
      },
      grow: (n: number, v?: unknown) => real.grow(n, v as never),
    };
    const memory = wasmMemory({
      memory: L.pw.wasmMemory(),
      malloc: L.exports.__wbindgen_malloc as (n: number, a: number) => number,
      free: L.exports.__wbindgen_free as (p: number, n: number, a: number) => void,
      table: counting,
    });
    const parquet = writeParquet('generated_primitive');
    const ffi = L.pw.readParquet(parquet, { batchSize: 5 }).intoFFI();
    const n = ffi.numArrays();
    assert.ok(n > 1, 'several batches');
    const dv = new DataView(L.pw.wasmMemory().buffer);
    const arrayRelease = dv.getUint32(ffi.arrayAddrs()[0]! + memory.layouts.ArrowArray.offsets.release!, true);
    const schemaRelease = dv.getUint32(ffi.schemaAddr() + memory.layouts.ArrowSchema.offsets.release!, true);
    let t: Table | undefined = importTable([...ffi.arrayAddrs()].map(BigInt), BigInt(ffi.schemaAddr()), { memory });
    ffi.free();
    assert.equal(calls.get(schemaRelease), 1, 'the schema was released once on import');
    assert.equal(t.numRows > 0, true);
    t = undefined;
    const released = await collectUntil(() => calls.get(arrayRelease) === n);
    assert.ok(released, `every batch released once its arrow-js objects were collected (${calls.get(arrayRelease) ?? 0} of ${n})`);
    assert.equal(calls.get(arrayRelease), n, 'each batch released exactly once');
    // With copy: true the release is immediate and can be counted without the collector.
    const before = calls.get(arrayRelease) ?? 0;
    const ffi2 = L.pw.readParquet(parquet, { batchSize: 5 }).intoFFI();
    const m = ffi2.numArrays();
    importTable([...ffi2.arrayAddrs()].map(BigInt), BigInt(ffi2.schemaAddr()), { memory, copy: true });
    ffi2.free();
    assert.equal((calls.get(arrayRelease) ?? 0) - before, m, 'copy: each batch released exactly once, at once');
  });

  test('a table read through FFI stays right when parquet-wasm grows its memory afterwards (buffers not read yet)', () => {
    const parquet = writeParquet('generated_primitive');
    const t = readThroughFFI(parquet);
    const pages = L.pw.wasmMemory().buffer.byteLength;
    // Make parquet-wasm allocate (and grow) a lot: a 64 MiB buffer passed into wasm memory.
    const big = new Uint8Array(64 << 20);
    try {
      L.pw.readParquet(big);
    } catch {
      // not a Parquet file: what matters is that the bytes were copied into the module memory
    }
    assert.ok(L.pw.wasmMemory().buffer.byteLength > pages, 'the memory grew');
    const goldTable = tableFromIPC(readFileSync(join(gold, 'generated_primitive.arrow_file')));
    assert.equal(diffExact(goldTable, t), undefined);
  });
});
