/**
 * parquet-wasm (arrow-rs compiled to wasm32) as a conformance peer, through
 * its linear memory (src/memory/wasm.ts). Each case goes to Parquet and back
 * inside parquet-wasm, which hands the result over as C Data Interface structs
 * in its memory (`intoFFI`). parquet-wasm cannot take C structs in, so data
 * reaches it as Arrow IPC; Parquet changes some types (BinaryView -> Binary,
 * field metadata order), so cases are compared on names and values.
 *
 * Ours first: we import our structs, write IPC, parquet-wasm writes and reads
 * Parquet and exports to its memory, we import from there.
 * Peer first: parquet-wasm exports into its memory, the runner imports from
 * that memory (`memory`) and exports to native memory, and we compare that
 * with the original. (Export into a wasm memory needs a growable function
 * table for our release callback; parquet-wasm's is fixed-size, so export
 * into wasm is proven with the C peer of test/wasm instead.)
 */
import { RecordBatch, RecordBatchStreamWriter, Struct, type Data } from 'apache-arrow';
import { nativeMemory } from '../../src/index.js';
import { nodeToSchema } from '../../src/schema/arrowjs.js';
import { viewToData } from '../../src/array/arrowjs.js';
import { loadParquetWasm, type LoadedParquetWasm } from '../../test/wasm/modules.js';
import { diffCases, importCase } from '../conformance-lib.js';
import type { CaseData, CasePtrs, Peer } from './peer.js';

/** Types Parquet has no place for, and what parquet-wasm 0.8.0 refuses or traps on. */
const NO_PARQUET = /\+u[sd]|^tin$/;

function ipcOf(c: CaseData): Uint8Array {
  const arrow = nodeToSchema(c.schema, 'schema');
  const type = new Struct(arrow.fields);
  const batches = c.batches.map((v) => new RecordBatch(arrow, viewToData(v, type) as Data<Struct>));
  const w = new RecordBatchStreamWriter();
  w.reset(undefined, arrow);
  for (const b of batches) w.write(b);
  w.finish();
  return w.toUint8Array(true);
}

function formats(n: CaseData['schema']): string[] {
  return [n.format, ...n.children.flatMap(formats), ...(n.dictionary ? formats(n.dictionary) : [])];
}

export async function wasmPeer(): Promise<Peer> {
  const loaded = await loadParquetWasm();
  if (typeof loaded === 'string') throw new Error(loaded);
  const L: LoadedParquetWasm = loaded;
  const { pw, mem } = L;
  /** The case through Parquet in parquet-wasm, as FFI structs in its memory; `done` frees their memory. */
  const throughParquet = (c: CaseData): CasePtrs & { done: () => void } => {
    const parquet = pw.writeParquet(pw.Table.fromIPCStream(ipcOf(c)));
    const ffi = pw.readParquet(parquet).intoFFI();
    return { schema: BigInt(ffi.schemaAddr()), arrays: [...ffi.arrayAddrs()].map(BigInt), done: () => ffi.free() };
  };
  const noFree = (): void => {};
  return {
    name: `wasm (parquet-wasm ${L.version})`,
    exactTypes: false,
    memory: mem,
    unsupported(data) {
      const names = data.schema.children.map((c) => c.name ?? '');
      if (new Set(names).size !== names.length) return "arrow-js's IPC stream writer drops batches whose fields repeat a name";
      const f = formats(data.schema).find((x) => NO_PARQUET.test(x));
      return f ? `Parquet cannot hold format "${f}" (parquet-wasm refuses or traps)` : undefined;
    },
    skipReason(e) {
      const m = String((e as Error)?.message ?? e);
      return /NYI|not yet (supported|implemented)|Unrecognized type|arrow-js has no/.test(m) ? `parquet-wasm or arrow-js cannot carry it: ${m.slice(0, 160)}` : undefined;
    },
    async roundTrip(_original, ptrs) {
      const ours = importCase(ptrs, (p) => nativeMemory().free(p));
      const t = throughParquet(ours);
      try {
        return { data: importCase(t, noFree, { memory: mem }) };
      } finally {
        t.done();
      }
    },
    async peerFirst(original, through) {
      const t = throughParquet(original);
      let back: CasePtrs;
      try {
        back = await through(t, noFree);
      } finally {
        t.done();
      }
      // parquet-wasm cannot import C structs (nor can its fixed-size function table take our release
      // callback): the runner exported back into native memory, which we read.
      const data = importCase(back, (p) => nativeMemory().free(p));
      return diffCases(original, data, false);
    },
    async close() {},
  };
}
