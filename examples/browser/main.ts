/**
 * The page script (bundled by build.ts with esbuild, platform=browser): reads
 * a Parquet file with parquet-wasm, takes the table as C Data Interface
 * structs in parquet-wasm's memory (`intoFFI()`), imports them with
 * arrow-device over that memory, and renders the schema and the first rows.
 *
 * It also proves the release protocol: parquet-wasm's function table is
 * wrapped so that every call through it is counted, and
 * - a `copy: true` import releases the schema once and each batch once, at once;
 * - a zero-copy import releases the schema once at import, and each batch
 *   once when its arrow-js objects are collected (shown when the page runs
 *   with `gc` exposed, e.g. chromium `--js-flags=--expose-gc`; otherwise it
 *   happens whenever the browser collects).
 *
 * Then (webgpu.ts) the table goes to the GPU through the C Device Data
 * Interface (`DeviceType.WEBGPU`), a compute shader aggregates an Int32
 * column where it is, and the batches come back; skipped, with the reason
 * shown, where the browser has no WebGPU.
 *
 * Query parameters: `file` (a URL, default `sample.parquet`), `rows` (rows
 * shown, default 10), `batchSize` (parquet-wasm's read batch size).
 *
 * In an application, import from 'arrow-device' instead of the source tree.
 */
import initParquetWasm, * as pw from 'parquet-wasm/esm';
import type { Table } from 'apache-arrow';
import { importTable, wasmMemoryFromExports, type WasmMemory, type WasmTable } from '../../src/index.js';
import { runWebGPUStep } from './webgpu.js';

const params = new URLSearchParams(location.search);
const SHOW_ROWS = Number(params.get('rows') ?? 10);
const BATCH_SIZE = params.get('batchSize') ? Number(params.get('batchSize')) : undefined;
/** Rows compared between the copy and the zero-copy import (all of them, up to this). */
const COMPARE_ROWS = 100_000;

const $ = <T extends HTMLElement = HTMLElement>(sel: string): T => document.querySelector<T>(sel)!;

function setStatus(state: 'loading' | 'done' | 'error', text: string): void {
  document.body.dataset.state = state;
  $('#status').textContent = text;
}

/** A table wrapper that counts the calls of each function it hands out (release is only ever called through it). */
function countingTable(real: WebAssembly.Table): { table: WasmTable; calls: (index: number) => number } {
  const counts = new Map<number, number>();
  const table: WasmTable = {
    get length() {
      return real.length;
    },
    get(i: number) {
      const f = real.get(i) as ((...a: unknown[]) => unknown) | null;
      return f && ((...a: unknown[]) => (counts.set(i, (counts.get(i) ?? 0) + 1), f(...a)));
    },
    grow: (n: number, v?: unknown) => real.grow(n, v as never),
  };
  return { table, calls: (i) => counts.get(i) ?? 0 };
}

function show(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Uint8Array) return `0x${[...v].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
  if (typeof v === 'object') return JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x));
  return String(v);
}

/** Every value of the first `COMPARE_ROWS` rows, as one string (read now: zero-copy views must be read before parquet-wasm grows its memory). */
function valuesOf(t: Table): string {
  const cols = t.schema.fields.map((_, c) => t.getChildAt(c)!);
  const n = Math.min(t.numRows, COMPARE_ROWS);
  const out: string[] = [];
  for (let r = 0; r < n; r++) out.push(cols.map((c) => show(c.get(r))).join('\u0001'));
  return out.join('\u0002');
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, cls?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function render(t: Table, source: string, importMs: number): void {
  $('#source').textContent = source;
  $('#num-rows').textContent = String(t.numRows);
  $('#num-cols').textContent = String(t.numCols);
  $('#num-batches').textContent = String(t.batches.length);
  $('#import-time').textContent = `${importMs.toFixed(2)} ms (zero-copy)`;

  const schemaBody = $('#schema tbody');
  schemaBody.replaceChildren();
  t.schema.fields.forEach((f, i) => {
    const tr = el('tr');
    tr.append(el('td', String(i), 'num'), el('td', f.name), el('td', String(f.type)), el('td', String(f.nullable)));
    schemaBody.append(tr);
  });

  const shown = Math.min(SHOW_ROWS, t.numRows);
  $('#rows-title').textContent = `First ${shown} of ${t.numRows} rows`;
  const head = el('tr');
  head.append(el('th', '#'), ...t.schema.fields.map((f) => el('th', f.name)));
  $('#rows thead').replaceChildren(head);
  const body = $('#rows tbody');
  body.replaceChildren();
  const cols = t.schema.fields.map((_, c) => t.getChildAt(c)!);
  for (let r = 0; r < shown; r++) {
    const tr = el('tr');
    tr.append(el('td', String(r), 'num'));
    for (const c of cols) {
      const v = c.get(r);
      tr.append(el('td', show(v), v === null ? 'null' : typeof v === 'number' || typeof v === 'bigint' ? 'num' : undefined));
    }
    body.append(tr);
  }
  $('#summary').hidden = false;
}

function verdict(id: string, ok: boolean, text: string): void {
  const e = $(`#${id}`);
  e.textContent = text;
  e.className = ok ? 'ok' : 'bad';
}

interface Loaded {
  memory: WasmMemory;
  calls: (index: number) => number;
}

async function load(): Promise<Loaded> {
  // The wasm file is copied next to the bundle by build.ts.
  const exports = await initParquetWasm({ module_or_path: new URL('./parquet_wasm_bg.wasm', import.meta.url) });
  const { table, calls } = countingTable(pw._functionTable());
  // memory, __wbindgen_malloc and __wbindgen_free come from the exports; the function table from the glue.
  const memory = wasmMemoryFromExports(exports as unknown as WebAssembly.Exports, { table, name: 'parquet-wasm' });
  return { memory, calls };
}

/** The structs parquet-wasm hands over for `bytes`, and the table indices of their release callbacks. */
function readFFI(bytes: Uint8Array, memory: WasmMemory) {
  const ffi = pw.readParquet(bytes, BATCH_SIZE ? { batchSize: BATCH_SIZE } : undefined).intoFFI();
  const arrays = [...ffi.arrayAddrs()].map(BigInt);
  const schema = BigInt(ffi.schemaAddr());
  const { ArrowArray, ArrowSchema } = memory.layouts;
  const schemaRelease = Number(memory.readPtr(schema + BigInt(ArrowSchema.offsets.release!)));
  const arrayRelease = arrays.length ? Number(memory.readPtr(arrays[0]! + BigInt(ArrowArray.offsets.release!))) : -1;
  return { ffi, arrays, schema, schemaRelease, arrayRelease };
}

async function collect(done: () => boolean, ms = 5000): Promise<boolean> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) return done();
  const end = performance.now() + ms;
  while (!done() && performance.now() < end) {
    gc();
    await new Promise((r) => setTimeout(r, 10));
  }
  return done();
}

async function run(L: Loaded, bytes: Uint8Array, source: string): Promise<void> {
  const { memory, calls } = L;
  setStatus('loading', `reading ${source} (${bytes.byteLength} bytes)…`);

  // 1. copy: true: every buffer copied into JS memory, every struct released at once.
  const c = readFFI(bytes, memory);
  const [s0, a0] = [calls(c.schemaRelease), calls(c.arrayRelease)];
  const copied = importTable(c.arrays, c.schema, { memory, copy: true });
  c.ffi.free(); // frees parquet-wasm's holder of the struct addresses; the structs were moved out
  const copySchema = calls(c.schemaRelease) - s0;
  const copyArrays = calls(c.arrayRelease) - a0;
  const copiedValues = valuesOf(copied);

  // 2. zero-copy: arrow-js vectors over parquet-wasm's memory.
  const z = readFFI(bytes, memory);
  const [s1, a1] = [calls(z.schemaRelease), calls(z.arrayRelease)];
  const t0 = performance.now();
  let table: Table | undefined = importTable(z.arrays, z.schema, { memory });
  const importMs = performance.now() - t0;
  z.ffi.free();
  const n = z.arrays.length;
  const zeroSchema = calls(z.schemaRelease) - s1;
  const zeroArraysAtImport = calls(z.arrayRelease) - a1;
  render(table, source, importMs);
  const same = valuesOf(table) === copiedValues;
  table = undefined; // the page keeps only the rendered text: the batches can be collected and released

  verdict('release-schema', zeroSchema === 1 && copySchema === 1, `${zeroSchema} call at import (copy: true import: ${copySchema})`);
  verdict('release-copy', copyArrays === n, `${copyArrays} of ${n} batches, at import`);
  verdict('copy-matches', same, same ? `yes (${Math.min(copied.numRows, COMPARE_ROWS)} rows compared)` : 'NO');
  $('#release-zero-copy').textContent = `${zeroArraysAtImport} of ${n} at import; waiting for the collector…`;

  const released = () => calls(z.arrayRelease) - a1 >= n;
  const hasGc = typeof (globalThis as { gc?: unknown }).gc === 'function';
  const all = await collect(released);
  const zeroArrays = calls(z.arrayRelease) - a1;
  if (all || hasGc) {
    verdict('release-zero-copy', zeroArraysAtImport === 0 && zeroArrays === n,
      `${zeroArraysAtImport} at import, ${zeroArrays} of ${n} batches after collection`);
  } else {
    $('#release-zero-copy').textContent = `${zeroArraysAtImport} at import, ${zeroArrays} of ${n} so far (released when the browser collects the table)`;
  }
  // 3. release(): deterministic, whatever was read. WebAssembly memory cannot be detached, so the
  // library's own objects check: a read after release throws instead of reading the module's memory.
  const r = readFFI(bytes, memory);
  const a2 = calls(r.arrayRelease);
  const t3 = importTable(r.arrays, r.schema, { memory });
  r.ffi.free();
  const before = t3.numRows > 0 ? String(t3.getChildAt(0)!.get(0)) : '';
  t3.release();
  const releasedNow = calls(r.arrayRelease) - a2;
  let threw = false;
  try {
    if (t3.numRows > 0) t3.getChildAt(0)!.get(0);
  } catch (e) {
    threw = /read of a released import/.test((e as Error).message);
  }
  const explicitOk = releasedNow === n && (t3.numRows === 0 || (threw && before !== ''));
  verdict('release-explicit', explicitOk, `${releasedNow} of ${n} batches at release(); a read after it ${threw ? 'throws' : 'does not throw'}`);

  // 4. WebGPU (webgpu.ts): the copy's batches to the GPU and back, the structs in a wasm memory of the
  // page's own (parquet-wasm's function table cannot grow: nothing can be exported into its memory).
  // Reported on its own (body[data-webgpu], #webgpu-*): a browser without WebGPU skips it.
  await runWebGPUStep({ table: copied, countingTable, valuesOf });

  const ok = same && zeroSchema === 1 && copySchema === 1 && copyArrays === n && (!hasGc || zeroArrays === n) && explicitOk;
  setStatus(ok ? 'done' : 'error', ok ? `done: ${source}` : `checks failed for ${source}`);
}

async function main(): Promise<void> {
  try {
    const L = await load();
    $<HTMLInputElement>('#file').addEventListener('change', async (ev) => {
      const f = (ev.target as HTMLInputElement).files?.[0];
      if (!f) return;
      try {
        await run(L, new Uint8Array(await f.arrayBuffer()), f.name);
      } catch (e) {
        setStatus('error', String((e as Error)?.stack ?? e));
      }
    });
    const file = params.get('file') ?? 'sample.parquet';
    const res = await fetch(file);
    if (!res.ok) throw new Error(`GET ${file}: ${res.status} ${res.statusText}`);
    await run(L, new Uint8Array(await res.arrayBuffer()), file);
  } catch (e) {
    setStatus('error', String((e as Error)?.stack ?? e));
  }
}

void main();
