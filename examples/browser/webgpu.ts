/**
 * The WebGPU step of the browser example: the table the page read goes to
 * the GPU and back through the C Device Data Interface, with the structs in
 * a wasm memory of the page's own (`webgpu-structs`).
 *
 * Why not parquet-wasm's memory, where the page's imports read: exporting
 * writes a release callback of ours into the memory's function table, which
 * means growing the table by one slot, and parquet-wasm's table is not
 * growable (`WebAssembly.Table.grow(): failed to grow table by 1`). A module
 * built that way can hand structs over, but nothing can be exported into it.
 * This page has no native code of its own, so it makes the memory the
 * exports need: a `WebAssembly.Memory`, a growable `WebAssembly.Table` (slot 0
 * left empty, so no callback gets address 0) and a small JS allocator.
 *
 * For each record batch:
 * 1. `exportDeviceRecordBatch(batch, { deviceType: DeviceType.WEBGPU, gpuDevice, memory })`
 *    uploads its buffers into one `GPUBuffer` and writes an `ArrowSchema` and
 *    an `ArrowDeviceArray` into that memory (the release callback is
 *    registered in its function table);
 * 2. `importDeviceArrayAsync(array, schema, { memory })` moves them out and
 *    validates on the device;
 * 3. a compute shader reads an Int32 column where it is (bound at its
 *    buffer's `webgpu.buffer` / `webgpu.offset`, with its validity bitmap)
 *    and counts and sums the valid values, and those with `v % 3 == 0`; the
 *    same is computed in JS over the batch;
 * 4. `toHostRecordBatchAsync()` copies the whole batch back, compared with the original;
 * 5. `release()`: the release is called once through the function table,
 *    the `GPUBuffer` is destroyed and its address range ends.
 * Then the library's accounting (live exports, imports, handles, pinned
 * bytes) must be back where it was, and every block of the structs' memory freed.
 *
 * Results go into the page (`#webgpu-*`) and `body[data-webgpu]`: `done`,
 * `error`, or `skipped` where the browser has no `navigator.gpu` or no
 * adapter (Chromium: `--enable-unsafe-webgpu` on Linux, a secure context
 * such as http://127.0.0.1).
 */
import { Field, Int32, makeData, RecordBatch, Schema, Struct, Table, type Data, type DataType } from 'apache-arrow';
import {
  accounting, BufferUsage, DeviceType, exportDeviceRecordBatch, freeArrowDeviceArray, freeArrowSchema, importDeviceArrayAsync, wasmMemory, webgpuBufferAt,
  type DeviceArray, type DeviceArrayNode, type WasmFree, type WasmMalloc, type WasmMemory, type WasmTable, type WebGPUBuffer, type WebGPUDevice,
  type WebGPURegion,
} from '../../src/index.js';

// --- the structs' memory -----------------------------------------------------------------------

/**
 * An example's allocator, not for production: first fit over a free list in JS, for the few small
 * structs of this step (O(free blocks) per call, no checks of what free is given). Every block is a
 * multiple of 16 bytes at a 16-byte aligned address from 16 up: 0 (NULL) is never handed out.
 * Freed blocks are merged with free neighbours and reused; the end of the heap moves back when
 * its last block is freed. When nothing fits, the memory grows; malloc returns 0 when it cannot.
 */
function exampleAllocator(memory: WebAssembly.Memory): { malloc: WasmMalloc; free: WasmFree } {
  const UNIT = 16;
  const round = (n: number): number => Math.ceil(Math.max(n, 1) / UNIT) * UNIT;
  const holes: { at: number; size: number }[] = []; // free blocks below `top`, by address, none adjacent
  let top = UNIT; // the heap's end: [top, memory end) is free too
  const malloc: WasmMalloc = (size, align) => {
    if (align > UNIT || UNIT % align !== 0) return 0; // blocks are 16-aligned: enough for the library's 16
    const n = round(size);
    const i = holes.findIndex((h) => h.size >= n);
    if (i >= 0) {
      const h = holes[i]!;
      const p = h.at;
      if (h.size === n) holes.splice(i, 1);
      else [h.at, h.size] = [h.at + n, h.size - n];
      return p;
    }
    const end = top + n;
    if (end > memory.buffer.byteLength) {
      try {
        memory.grow(Math.ceil((end - memory.buffer.byteLength) / 65536));
      } catch {
        return 0; // at the memory's maximum
      }
    }
    const p = top;
    top = end;
    return p;
  };
  const free: WasmFree = (ptr, size) => {
    if (ptr === 0) return;
    let [at, n] = [ptr, round(size)];
    let i = holes.findIndex((h) => h.at > at);
    if (i < 0) i = holes.length;
    const next = holes[i];
    if (next && at + n === next.at) (n += next.size), holes.splice(i, 1);
    const prev = holes[i - 1];
    if (prev && prev.at + prev.size === at) (at = prev.at), (n += prev.size), holes.splice(--i, 1);
    if (at + n === top) top = at;
    else holes.splice(i, 0, { at, size: n });
  };
  return { malloc, free };
}

/** The page's memory for the exported structs (made once: the same one for every run of the step). */
let structs: { memory: WasmMemory; calls: (index: number) => number } | undefined;

function structsMemory(countingTable: WebGPUStepInput['countingTable']): { memory: WasmMemory; calls: (index: number) => number } {
  if (!structs) {
    const memory = new WebAssembly.Memory({ initial: 4, maximum: 1024 });
    // Growable (no maximum); slot 0 stays empty, so the first callback registered gets index 1.
    const { table, calls } = countingTable(new WebAssembly.Table({ initial: 1, element: 'anyfunc' }));
    structs = { memory: wasmMemory({ memory, ...exampleAllocator(memory), table, name: 'webgpu-structs' }), calls };
  }
  return structs;
}

// --- the WebGPU API used here (structural: the DOM lib of TypeScript has no WebGPU types) ---------

interface GpuDevice extends WebGPUDevice {
  readonly queue: WebGPUDevice['queue'] & { writeBuffer(buffer: WebGPUBuffer, offset: number, data: BufferSource): void };
  createShaderModule(d: { code: string }): unknown;
  createComputePipeline(d: { layout: 'auto'; compute: { module: unknown; entryPoint: string } }): { getBindGroupLayout(i: number): unknown };
  createBindGroup(d: { layout: unknown; entries: { binding: number; resource: { buffer: WebGPUBuffer; offset?: number; size?: number } }[] }): unknown;
  createCommandEncoder(): ReturnType<WebGPUDevice['createCommandEncoder']> & {
    beginComputePass(): { setPipeline(p: unknown): void; setBindGroup(i: number, g: unknown): void; dispatchWorkgroups(x: number): void; end(): void };
  };
  pushErrorScope(filter: 'validation' | 'out-of-memory' | 'internal'): void;
  popErrorScope(): Promise<{ message: string } | null>;
  readonly lost: Promise<{ reason: string; message: string }>;
}
interface GpuAdapter {
  readonly info?: { vendor?: string; architecture?: string; device?: string; description?: string };
  requestDevice(): Promise<GpuDevice>;
}
interface Gpu {
  requestAdapter(): Promise<GpuAdapter | null>;
}

const MAP_READ = 0x1;

/** The device, or why there is none (asked once per page). */
let opened: Promise<{ device: GpuDevice; adapter: string } | string> | undefined;

function openDevice(): Promise<{ device: GpuDevice; adapter: string } | string> {
  opened ??= (async () => {
    const gpu = (navigator as { gpu?: Gpu }).gpu;
    if (!gpu) return `navigator.gpu is missing (${isSecureContext ? 'WebGPU disabled: Chromium on Linux needs --enable-unsafe-webgpu' : 'not a secure context'})`;
    const adapter = await gpu.requestAdapter();
    if (!adapter) return 'navigator.gpu.requestAdapter() found no adapter';
    const device = await adapter.requestDevice();
    const i = adapter.info ?? {};
    const name = [i.vendor, i.architecture, i.device, i.description].filter((x) => x).join(' ') || 'unknown adapter';
    return { device, adapter: name };
  })();
  return opened;
}

// --- the shader --------------------------------------------------------------------------------

const SHADER = /* wgsl */ `
struct Params { offset: u32, length: u32, has_validity: u32, stride: u32 }
@group(0) @binding(0) var<storage, read> values: array<i32>;
@group(0) @binding(1) var<storage, read> validity: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;
// valid values, their sum, values with v % 3 == 0, their sum (i32 sums wrap, as | 0 does in JS)
@group(0) @binding(3) var<storage, read_write> out: array<atomic<i32>, 4>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  for (var i = id.x; i < p.length; i += p.stride) {
    let j = p.offset + i; // the array's offset: its slots start there in the buffers
    if (p.has_validity != 0u && ((validity[j >> 5u] >> (j & 31u)) & 1u) == 0u) { continue; }
    let v = values[j];
    atomicAdd(&out[0], 1);
    atomicAdd(&out[1], v);
    if (v % 3 == 0) {
      atomicAdd(&out[2], 1);
      atomicAdd(&out[3], v);
    }
  }
}`;

type Stats = [count: number, sum: number, count3: number, sum3: number];

/** The shader's computation in JS, over the host column. */
function statsJS(data: Data<Int32>): Stats {
  const s: Stats = [0, 0, 0, 0];
  const values = data.values;
  for (let i = 0; i < data.length; i++) {
    if (!data.getValid(i)) continue;
    const v = values[data.offset + i]!;
    s[0]++;
    s[1] = (s[1] + v) | 0;
    if (v % 3 === 0) {
      s[2]++;
      s[3] = (s[3] + v) | 0;
    }
  }
  return s;
}

const WORKGROUP = 64;
const MAX_GROUPS = 1024;

/** Runs the shader over an Int32 column of a WebGPU device array, bound where its buffers are. */
async function statsGPU(device: GpuDevice, pipeline: ReturnType<GpuDevice['createComputePipeline']>, node: DeviceArrayNode): Promise<Stats> {
  const [validityBuf, valuesBuf] = node.buffers;
  const values = valuesBuf?.webgpu;
  if (!values || valuesBuf!.size === undefined) throw new Error(`the column's values buffer names no GPUBuffer (address ${valuesBuf?.address})`);
  const validity = node.nullCount !== 0 && validityBuf!.address !== 0n ? validityBuf!.webgpu : undefined;
  if (node.nullCount !== 0 && validityBuf!.address !== 0n && !validity) throw new Error('the validity bitmap names no GPUBuffer');
  const track: WebGPUBuffer[] = [];
  const make = (size: number, usage: number): WebGPUBuffer => {
    const b = device.createBuffer({ size, usage });
    track.push(b);
    return b;
  };
  try {
    const dummy = make(4, BufferUsage.STORAGE);
    const params = make(16, BufferUsage.UNIFORM | BufferUsage.COPY_DST);
    const out = make(16, BufferUsage.STORAGE | BufferUsage.COPY_SRC);
    const read = make(16, BufferUsage.MAP_READ | BufferUsage.COPY_DST);
    const groups = Math.max(1, Math.min(MAX_GROUPS, Math.ceil(node.length / WORKGROUP)));
    device.queue.writeBuffer(params, 0, Uint32Array.of(node.offset, node.length, validity ? 1 : 0, groups * WORKGROUP));
    // Storage bindings are whole 4-byte words: the export places each Arrow buffer at a 256-byte
    // boundary of a buffer whose size is a multiple of 4, so rounding up stays inside it.
    const words = (size: number, at: number, buffer: WebGPUBuffer): number => Math.min(Math.max(4, Math.ceil(size / 4) * 4), buffer.size - at);
    const group = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: values.buffer, offset: values.offset, size: words(valuesBuf!.size, values.offset, values.buffer) } },
        { binding: 1, resource: validity ? { buffer: validity.buffer, offset: validity.offset, size: words(validityBuf!.size ?? 4, validity.offset, validity.buffer) } : { buffer: dummy } },
        { binding: 2, resource: { buffer: params } },
        { binding: 3, resource: { buffer: out } },
      ],
    });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(groups);
    pass.end();
    enc.copyBufferToBuffer(out, 0, read, 0, 16);
    device.queue.submit([enc.finish()]);
    await read.mapAsync(MAP_READ);
    const s = Array.from(new Int32Array(read.getMappedRange().slice(0))) as Stats;
    read.unmap();
    return s;
  } finally {
    for (const b of track) b.destroy();
  }
}

// --- the step ----------------------------------------------------------------------------------

/** The first Int32 column of the batch, or the batch with one added (`row_number`) when it has none. */
function withInt32Column(batch: RecordBatch): { batch: RecordBatch; column: number } {
  const at = batch.schema.fields.findIndex((f) => f.type instanceof Int32);
  if (at >= 0) return { batch, column: at };
  const fields = [...batch.schema.fields, new Field('row_number', new Int32(), false)];
  const rowNumber = makeData({ type: new Int32(), length: batch.numRows, nullCount: 0, data: Int32Array.from({ length: batch.numRows }, (_, i) => i) });
  const data = makeData({ type: new Struct(fields), length: batch.numRows, nullCount: 0, children: [...batch.data.children, rowNumber] as Data<DataType>[] });
  return { batch: new RecordBatch(new Schema(fields, batch.schema.metadata), data), column: fields.length - 1 };
}

/** The first buffer of the tree that names a GPUBuffer (every one is in the export's one GPUBuffer). */
function firstRegion(n: DeviceArrayNode): { address: bigint; region: WebGPURegion } | undefined {
  for (const b of n.buffers) if (b.webgpu) return { address: b.address, region: b.webgpu };
  for (const c of n.children) {
    const r = firstRegion(c);
    if (r) return r;
  }
  return n.dictionary ? firstRegion(n.dictionary) : undefined;
}

function put(id: string, text: string, ok?: boolean): void {
  const e = document.querySelector<HTMLElement>(`#${id}`)!;
  e.textContent = text;
  e.className = ok === undefined ? '' : ok ? 'ok' : 'bad';
}

/** Fails after `ms` (a lost device or a mapAsync that never settles must not hang the page). */
function deadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([p, new Promise<never>((_, no) => (timer = setTimeout(() => no(new Error(`${what}: no answer after ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}

export interface WebGPUStepInput {
  /** A table in JS memory (the copy: true import): its buffers do not move when the module's memory grows. */
  table: Table;
  /** Wraps a function table so that the calls through it are counted, by index (main.ts's; used for the structs' memory). */
  countingTable: (real: WebAssembly.Table) => { table: WasmTable; calls: (index: number) => number };
  /** Every value of a table, as one string (main.ts's comparison of the copy and the zero-copy import). */
  valuesOf: (t: Table) => string;
}

/** The WebGPU step; its outcome is in `body[data-webgpu]` and `#webgpu-*`. Never throws. */
export async function runWebGPUStep(input: WebGPUStepInput): Promise<'done' | 'skipped' | 'error'> {
  document.body.dataset.webgpu = 'running';
  document.querySelector<HTMLElement>('#webgpu')!.hidden = false;
  for (const id of ['webgpu-adapter', 'webgpu-column', 'webgpu-result', 'webgpu-roundtrip', 'webgpu-release', 'webgpu-accounting']) put(id, '');
  put('webgpu-status', 'running…');
  let outcome: 'done' | 'skipped' | 'error';
  try {
    outcome = await deadline(step(input), 30_000, 'the WebGPU step');
  } catch (e) {
    put('webgpu-status', `error: ${String((e as Error)?.stack ?? e)}`, false);
    outcome = 'error';
  }
  document.body.dataset.webgpu = outcome;
  return outcome;
}

async function step({ table, countingTable, valuesOf }: WebGPUStepInput): Promise<'done' | 'skipped' | 'error'> {
  const got = await openDevice();
  if (typeof got === 'string') {
    put('webgpu-adapter', 'none');
    put('webgpu-status', `skipped: ${got}`);
    return 'skipped';
  }
  const { device, adapter } = got;
  put('webgpu-adapter', adapter);
  device.pushErrorScope('validation');
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code: SHADER }), entryPoint: 'main' } });

  // The structs go into the page's own memory, not parquet-wasm's: its function table cannot grow,
  // so the export's release callback could not be registered there (see the file comment).
  const { memory, calls } = structsMemory(countingTable);
  const base = accounting();
  const releaseAt = memory.layouts.ArrowDeviceArray.offsets.array! + memory.layouts.ArrowArray.offsets.release!;
  const gpu: Stats = [0, 0, 0, 0];
  const js: Stats = [0, 0, 0, 0];
  let columnName = '';
  let rowsCompared = 0;
  let roundTrip = true;
  let releases = 0;
  let destroyed = 0;
  let rangesEnded = 0;
  const batches = table.batches;
  for (const original of batches) {
    const { batch, column } = withInt32Column(original);
    columnName = batch.schema.fields[column]!.name;
    // 1. to the GPU: one GPUBuffer; the structs in the page's memory.
    const { schema, array } = exportDeviceRecordBatch(batch, { deviceType: DeviceType.WEBGPU, gpuDevice: device, memory });
    const release = Number(memory.readPtr(array + BigInt(releaseAt)));
    const released0 = calls(release);
    // 2. imported from there (moved out of the structs; validated on the device).
    let dev: DeviceArray;
    try {
      dev = await importDeviceArrayAsync(array, schema, { memory });
    } finally {
      freeArrowSchema(schema, { memory });
      freeArrowDeviceArray(array, { memory });
    }
    try {
      if (dev.deviceType !== DeviceType.WEBGPU) throw new Error(`imported as ${dev.deviceTypeName}, not WEBGPU`);
      const node = dev.children[column]!;
      // 3. the shader, on the column where it is, and the same in JS.
      const g = node.length > 0 ? await statsGPU(device, pipeline, node) : ([0, 0, 0, 0] as Stats);
      const j = statsJS(batch.getChildAt(column)!.data[0] as Data<Int32>);
      g.forEach((x, k) => (gpu[k] = k % 2 ? (gpu[k]! + x) | 0 : gpu[k]! + x));
      j.forEach((x, k) => (js[k] = k % 2 ? (js[k]! + x) | 0 : js[k]! + x));
      // 4. the round trip: every column back to the host.
      const back = await dev.toHostRecordBatchAsync();
      roundTrip &&= String(back.schema.fields) === String(batch.schema.fields) && valuesOf(new Table(back)) === valuesOf(new Table(batch));
      rowsCompared += back.numRows;
      // 5. release: the export's release, called once through the function table, destroys the GPUBuffer.
      // (The buffer's destroy is wrapped here only to count it.)
      const located = firstRegion(dev);
      if (!located) throw new Error('no buffer of the device array names a GPUBuffer');
      const { buffer } = located.region;
      const destroy = buffer.destroy;
      buffer.destroy = function (this: WebGPUBuffer) {
        destroyed++;
        return destroy.call(this);
      };
      dev.release();
      releases += calls(release) - released0;
      if (webgpuBufferAt(located.address) === undefined) rangesEnded++;
    } finally {
      dev.release(); // a no-op after the release above; releases on a failure
    }
  }
  const scopeError = await device.popErrorScope();
  if (scopeError) throw new Error(`WebGPU validation error: ${scopeError.message}`);

  const n = batches.length;
  const same = gpu.every((x, k) => x === js[k]);
  put('webgpu-column', `${columnName} (Int32), ${n} batch${n === 1 ? '' : 'es'}, structs in the page's own wasm memory (webgpu-structs)`);
  put('webgpu-result', `GPU: ${gpu[0]} valid, sum ${gpu[1]}; ${gpu[2]} with ${columnName} % 3 == 0, sum ${gpu[3]} (JS: ${same ? 'the same' : `${js.join(', ')}`})`, same);
  put('webgpu-roundtrip', roundTrip ? `yes (${rowsCompared} rows compared)` : 'NO', roundTrip);
  const releasedOk = releases === n && destroyed === n && rangesEnded === n;
  put('webgpu-release', `${releases} of ${n} releases through the function table; ${destroyed} GPUBuffers destroyed; ${rangesEnded} address ranges ended`, releasedOk);
  const a = accounting();
  const left = memory.allocations; // blocks of the structs' memory not freed (0 when every struct was)
  const back = a.liveExports === base.liveExports && a.liveImports === base.liveImports && a.liveHandles === base.liveHandles && a.pinnedBytes === base.pinnedBytes;
  put('webgpu-accounting', `liveExports ${a.liveExports}, liveImports ${a.liveImports}, liveHandles ${a.liveHandles}, pinnedBytes ${a.pinnedBytes}` +
    (back ? '' : ` (before the step: ${base.liveExports}, ${base.liveImports}, ${base.liveHandles}, ${base.pinnedBytes})`) +
    (left.count === 0 ? '' : `; ${left.count} blocks (${left.bytes} bytes) of the structs' memory not freed`), back && left.count === 0);
  const ok = same && roundTrip && releasedOk && back && left.count === 0;
  put('webgpu-status', ok ? 'done' : 'checks failed', ok);
  return ok ? 'done' : 'error';
}
