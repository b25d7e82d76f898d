/**
 * The wasm modules the wasm tests drive: the C peer of this folder (built
 * with clang --target=wasm32 at test time) and parquet-wasm (arrow-rs
 * compiled to wasm32), loaded from node_modules, or from the package folder
 * named by ARROW_DEVICE_PARQUET_WASM while it is not a devDependency yet.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { wasmMemory, wasmMemoryFromExports, type WasmMemory } from '../../src/memory/wasm.js';
import { run, tempDir, which } from '../helpers/tools.js';

const here = fileURLToPath(new URL('.', import.meta.url));

// --- the C peer ------------------------------------------------------------------------

export interface CPeerExports {
  memory: WebAssembly.Memory;
  __indirect_function_table: WebAssembly.Table;
  malloc(n: number): number;
  free(p: number): void;
  live_allocations(): number;
  live_allocated_bytes(): number;
  grows(): number;
  array_release_count(): number;
  schema_release_count(): number;
  make_int32(out: number, n: number, nulls: number, misalign: number): void;
  make_int32_schema(out: number): void;
  sum_int32_column(schema: number, array: number, col: number): bigint;
  release_array_ptr(array: number): void;
  array_release_fn(): number;
}

export interface CPeer {
  exports: CPeerExports;
  mem: WasmMemory;
}

/** Why the C peer cannot be built here, or false. */
export const cPeerSkip: string | false = !which('clang')
  ? 'clang not found: install the Debian packages clang and lld to build the wasm32 C peer'
  : !which('wasm-ld')
    ? 'wasm-ld not found: install the Debian package lld to build the wasm32 C peer'
    : false;

let peerModule: WebAssembly.Module | undefined;

/** A fresh instance of the C peer (its own memory and allocator) and its `Memory`. */
export function cPeer(): CPeer {
  if (!peerModule) {
    const out = join(tempDir('wasm-peer'), 'peer.wasm');
    run(which('clang')!, [
      '--target=wasm32', '-std=c11', '-O1', '-nostdlib', '-ffreestanding',
      '-Wl,--no-entry', '-Wl,--export-table', '-Wl,--growable-table',
      '-o', out, join(here, 'peer.c'),
    ]);
    peerModule = new WebAssembly.Module(readFileSync(out));
  }
  const instance = new WebAssembly.Instance(peerModule, {});
  const exports = instance.exports as unknown as CPeerExports;
  return { exports, mem: wasmMemoryFromExports(instance.exports) };
}

// --- parquet-wasm ----------------------------------------------------------------------

/** The parts of parquet-wasm's ESM build the tests use. */
export interface ParquetWasm {
  initSync(o: { module: BufferSource | WebAssembly.Module }): Record<string, unknown>;
  readParquet(bytes: Uint8Array, options?: { batchSize?: number }): PwTable;
  writeParquet(table: PwTable): Uint8Array;
  _functionTable(): WebAssembly.Table;
  wasmMemory(): WebAssembly.Memory;
  Table: { fromIPCStream(bytes: Uint8Array): PwTable };
}

export interface PwTable {
  intoFFI(): PwFFIStream;
  intoIPCStream(): Uint8Array;
  numBatches: number;
  free(): void;
}

export interface PwFFIStream {
  schemaAddr(): number;
  arrayAddrs(): Uint32Array;
  numArrays(): number;
  free(): void;
}

export interface LoadedParquetWasm {
  pw: ParquetWasm;
  exports: Record<string, unknown>;
  mem: WasmMemory;
  version: string;
}

let loaded: Promise<LoadedParquetWasm | string> | undefined;

/** parquet-wasm, instantiated once, with its `Memory`; or the reason it is not available. */
export function loadParquetWasm(): Promise<LoadedParquetWasm | string> {
  loaded ??= (async () => {
    const dir = process.env.ARROW_DEVICE_PARQUET_WASM;
    const require = createRequire(dir ? join(dir, 'package.json') : import.meta.url);
    let pkgDir: string;
    try {
      pkgDir = dir ?? join(require.resolve('parquet-wasm/esm/parquet_wasm_bg.wasm'), '..', '..');
    } catch {
      return 'parquet-wasm is not installed (add the devDependency, or set ARROW_DEVICE_PARQUET_WASM to its package folder)';
    }
    const pw = (await import(pathToFileURL(join(pkgDir, 'esm', 'parquet_wasm.js')).href)) as ParquetWasm;
    const exports = pw.initSync({ module: readFileSync(join(pkgDir, 'esm', 'parquet_wasm_bg.wasm')) });
    const version = (JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { version: string }).version;
    const mem = wasmMemory({
      memory: pw.wasmMemory(),
      malloc: exports.__wbindgen_malloc as (n: number, a: number) => number,
      free: exports.__wbindgen_free as (p: number, n: number, a: number) => void,
      table: pw._functionTable(),
      name: 'parquet-wasm',
    });
    return { pw, exports, mem, version };
  })();
  return loaded;
}
