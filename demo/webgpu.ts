/**
 * DuckDB -> arrow-js -> WebGPU -> arrow-js: a query result moved to the GPU
 * through the C Device Data Interface, a compute shader run over its
 * columns where they were uploaded, and the shader's output handed back to
 * arrow-js as an Arrow array, checked against the same work in plain JS.
 *
 *   node tools/with-node.mjs node --import tsx demo/webgpu.ts
 *
 * 1. DuckDB (through arrow-device/adbc) makes 4M rows of (k INTEGER, x FLOAT),
 *    imported zero-copy as an arrow-js Table.
 * 2. Each record batch goes to the GPU with exportDeviceRecordBatch(batch,
 *    { deviceType: DeviceType.WEBGPU, gpuDevice }) (one GPUBuffer per batch)
 *    and is imported as a DeviceArray with importDeviceArrayAsync: the
 *    handoff a rendering or ML library does. The shader binds each column at
 *    buffers[1].webgpu.{buffer, offset}, without a copy, and computes, for the
 *    rows with k < 100, a histogram of x (10 bins of width 10, exact u32
 *    counts) and the sum of x (f32 partial sums per workgroup).
 * 3. The shader's output buffers are handed to arrow-js as a WebGPU library
 *    hands its GPUBuffers on: registered in the realm's registry
 *    (webgpuRegistry()), described by an ArrowDeviceArray, imported with
 *    importDeviceArrayAsync and read with toHostAsync.
 * 4. The same in plain JS over the table; both results, and the timings.
 * 5. Everything released: accounting() ends at zero live imports and exports.
 *
 * WebGPU comes from Dawn for Node (the `webgpu` npm package); on a machine
 * without a GPU that is SwiftShader, a CPU emulation of Vulkan (Debian's
 * chromium package ships it): its timings say nothing about real GPUs.
 * Where no adapter is found the demo says why and exits 0.
 */
import { Float32, Uint32, type Data, type Table } from 'apache-arrow';
import {
  accounting, allocArrowDeviceArray, BufferUsage, DeviceType, exportDeviceRecordBatch, freeArrowDeviceArray, freeArrowSchema,
  importDeviceArrayAsync, nativeMemory, webgpuRegistry, type DeviceArray, type Ptr,
} from '../src/index.js'; // in an application: from 'arrow-device'
import { AdbcDatabase } from '../src/adbc/index.js'; // in an application: from 'arrow-device/adbc'
import { DUCKDB } from '../test/adbc/drivers.js';
import { openDawn } from '../test/webgpu/gpu.js'; // Dawn for Node's device, on SwiftShader where there is no GPU

const ROWS = 4_000_000;
const WORKGROUP = 256;
const BINS = 10;
/** Rows per invocation: fewer, fuller workgroups (SwiftShader pays per workgroup: 1 row each made the compute ~7x slower there). */
const ROWS_PER_INVOCATION = 8;
const ms = (t: number): string => `${t.toFixed(1)} ms`;

// --- the shader -----------------------------------------------------------------------------

// Each invocation reads rows start + its index, + the number of invocations, ... (a grid-stride loop).
// Rows with k < 100: their x counted in a workgroup histogram (added to the output once per
// workgroup) and summed, per invocation, then by a tree in workgroup memory into one f32 per workgroup.
const SHADER = /* wgsl */ `
struct Rows { start: u32, end: u32 }
@group(0) @binding(0) var<storage, read> k: array<i32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> hist: array<atomic<u32>, ${BINS}>;
@group(0) @binding(3) var<storage, read_write> partial: array<f32>;
@group(0) @binding(4) var<uniform> rows: Rows;
var<workgroup> sums: array<f32, ${WORKGROUP}>;
var<workgroup> counts: array<atomic<u32>, ${BINS}>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  var s = 0.0;
  for (var i = rows.start + wg.x * ${WORKGROUP}u + li; i < rows.end; i += nwg.x * ${WORKGROUP}u) {
    if (k[i] < 100) {
      let v = x[i];
      s += v;
      // The bin by comparisons (exact; a GPU's f32 division need not be correctly rounded): x = 100 goes in the last.
      var b = 0u;
      for (var t = 1u; t < ${BINS}u; t++) { b += select(0u, 1u, v >= f32(t) * 10.0); }
      atomicAdd(&counts[b], 1u);
    }
  }
  sums[li] = s;
  workgroupBarrier();
  for (var w = ${WORKGROUP / 2}u; w > 0u; w >>= 1u) {
    if (li < w) { sums[li] += sums[li + w]; }
    workgroupBarrier();
  }
  if (li == 0u) { partial[wg.x] = sums[0]; }
  if (li < ${BINS}u) {
    let c = atomicLoad(&counts[li]);
    if (c > 0u) { atomicAdd(&hist[li], c); }
  }
}`;

// --- handing a GPUBuffer to Arrow consumers, as a WebGPU library does (the producer's side) -------

const m = nativeMemory();
const A = m.layouts.ArrowArray.offsets;
const DA = m.layouts.ArrowDeviceArray.offsets;
const P = BigInt(m.target.pointerSize);
const handedOver = new Map<bigint, { buffers: Ptr; base: number; buffer: GPUBuffer }>();
let nextId = 1n;
let releaseFn: Ptr | undefined;

/**
 * Describes the first `length` values of `buffer` as a primitive
 * ArrowDeviceArray (device_type WEBGPU; the consumer names the type with the
 * schema it imports it with): the buffer gets an address range in
 * the realm's registry, the struct's data buffer is that address. The
 * release (called once by the consumer) ends the range and destroys the
 * buffer. sync_event is NULL: the shader's writes are ahead of any read in
 * the device queue's order. Returns the struct, for the consumer to move
 * (then freed with freeArrowDeviceArray).
 */
function handOver(buffer: GPUBuffer, device: GPUDevice, length: number): Ptr {
  const reg = webgpuRegistry();
  // One release callback for every struct handed over (a process has a limited number of them).
  releaseFn ??= m.registerCallback({ name: 'release', result: 'void', params: ['pointer'] }, (p) => {
    const at = p as bigint;
    const id = m.readPtr(at + BigInt(A.private_data!));
    const h = handedOver.get(id);
    if (h) {
      handedOver.delete(id);
      m.free(h.buffers);
      reg.unregister(h.base);
      h.buffer.destroy();
    }
    m.writePtr(at + BigInt(A.release!), 0n);
  });
  const base = reg.register(buffer, device);
  const buffers = m.alloc(Number(2n * P));
  m.writePtr(buffers, 0n); // no validity bitmap: every value is valid
  m.writePtr(buffers + P, BigInt(base));
  const id = nextId++;
  handedOver.set(id, { buffers, base, buffer });
  const s = allocArrowDeviceArray(); // zeroed: offset 0, no children, no dictionary
  const arr = s + BigInt(DA.array!);
  m.writeI64(arr + BigInt(A.length!), BigInt(length));
  m.writeI64(arr + BigInt(A.null_count!), 0n);
  m.writeI64(arr + BigInt(A.n_buffers!), 2n);
  m.writePtr(arr + BigInt(A.buffers!), buffers);
  m.writePtr(arr + BigInt(A.private_data!), id);
  m.writePtr(arr + BigInt(A.release!), releaseFn);
  m.writeI64(s + BigInt(DA.device_id!), BigInt(reg.deviceId(device)));
  m.writeI32(s + BigInt(DA.device_type!), DeviceType.WEBGPU);
  return s;
}

// --- the demo --------------------------------------------------------------------------------

interface Result {
  hist: number[];
  count: number;
  sum: number;
}

/** The same computation in plain JS over the arrow-js table (x is float32 there as on the GPU). */
function inJs(table: Table): Result {
  const hist = new Array<number>(BINS).fill(0);
  let sum = 0;
  for (const b of table.batches) {
    const kd = b.getChild('k')!.data[0]!;
    const xd = b.getChild('x')!.data[0]!;
    const ks = (kd.values as Int32Array).subarray(kd.offset, kd.offset + kd.length);
    const xs = (xd.values as Float32Array).subarray(xd.offset, xd.offset + xd.length);
    for (let i = 0; i < ks.length; i++) {
      if (ks[i]! < 100) {
        const v = xs[i]!;
        sum += v;
        let b = 0;
        for (let t = 1; t < BINS; t++) if (v >= t * 10) b++; // as the shader does it
        hist[b]!++;
      }
    }
  }
  return { hist, count: hist.reduce((a, b) => a + b, 0), sum };
}

async function main(): Promise<void> {
  if (DUCKDB.missing) {
    console.log(`skipped: ${DUCKDB.missing}`);
    return;
  }
  const opened = await openDawn();
  if (typeof opened === 'string') {
    console.log(`skipped: ${opened}`);
    return;
  }
  const { device } = opened;
  console.log(`WebGPU adapter: ${opened.adapter}`);
  if (opened.swiftshader) console.log('  (SwiftShader: a CPU emulation of a GPU; its timings say nothing about real GPUs)');

  // 1. DuckDB -> arrow-js, zero-copy. k and x are computed from range(), so neither can be NULL:
  //    the batches carry no nulls (checked below), and the shader reads no validity bitmap.
  const db = new AdbcDatabase({ driver: DUCKDB.library, entrypoint: 'duckdb_adbc_init', databaseOptions: { path: ':memory:', threads: '2' } });
  const conn = await db.connect();
  let t0 = performance.now();
  const table = await conn.query(`SELECT (i % 1000)::INTEGER AS k, (random() * 100)::FLOAT AS x FROM range(${ROWS}) t(i)`);
  const tQuery = performance.now() - t0;
  console.log(`1. DuckDB -> arrow-js: ${table.numRows.toLocaleString()} rows in ${table.batches.length} batches (${table.schema.fields.map((f) => `${f.name}: ${f.type}`).join(', ')}), zero-copy, ${ms(tQuery)}`);
  for (const b of table.batches) {
    for (const name of ['k', 'x']) if (b.getChild(name)!.nullCount !== 0) throw new Error(`column ${name} has nulls: this shader reads no validity bitmap`);
  }

  // 2. Each batch to the GPU: exported into one GPUBuffer, imported as a DeviceArray.
  t0 = performance.now();
  const onGpu: DeviceArray[] = [];
  for (const batch of table.batches) {
    const { schema, array } = exportDeviceRecordBatch(batch, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
    onGpu.push(await importDeviceArrayAsync(array, schema));
    freeArrowSchema(schema); // read by the import: released and freed here
    freeArrowDeviceArray(array); // moved by the import: only freed here
  }
  await device.queue.onSubmittedWorkDone();
  const tUpload = performance.now() - t0;
  const uploaded = onGpu.reduce((a, d) => a + d.children.reduce((s, c) => s + (c.buffers[1]!.size ?? 0), 0), 0);
  console.log(`2. to the GPU: ${onGpu.length} GPUBuffers, ${(uploaded / 1e6).toFixed(1)} MB, ${ms(tUpload)} (exportDeviceRecordBatch + importDeviceArrayAsync)`);

  const module = device.createShaderModule({ code: SHADER });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  // Each batch's workgroups write their sums into their own 256-byte aligned slice of one buffer.
  const align = device.limits.minStorageBufferOffsetAlignment;
  const plan = onGpu.map((dev) => {
    const k = dev.children[0]!;
    const x = dev.children[1]!;
    if (k.offset !== x.offset || k.length !== x.length) throw new Error('k and x are sliced differently');
    const groups = Math.max(1, Math.min(Math.ceil(dev.length / (WORKGROUP * ROWS_PER_INVOCATION)), device.limits.maxComputeWorkgroupsPerDimension));
    const start = dev.offset + k.offset; // a struct's offset applies to its children
    return { dev, k, x, groups, start, end: start + dev.length };
  });
  let partialBytes = 0;
  const slices = plan.map((p) => {
    const at = partialBytes;
    partialBytes += Math.ceil((p.groups * 4) / align) * align;
    return at;
  });
  const hist = device.createBuffer({ size: BINS * 4, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC, label: 'histogram' });
  // Zero-initialised, as every new GPUBuffer: the gaps between slices add nothing.
  const partial = device.createBuffer({ size: partialBytes, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC, label: 'partial sums' });
  const params = plan.map((p) => {
    const u = device.createBuffer({ size: 16, usage: BufferUsage.UNIFORM, mappedAtCreation: true });
    new Uint32Array(u.getMappedRange()).set([p.start, p.end]);
    u.unmap();
    return u;
  });
  const groups = plan.map((p, i) => {
    // The columns bound where exportDeviceRecordBatch put them: no copy.
    const k = p.k.buffers[1]!.webgpu!;
    const x = p.x.buffers[1]!.webgpu!;
    return device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: k.buffer as GPUBuffer, offset: k.offset, size: p.k.buffers[1]!.size! } },
        { binding: 1, resource: { buffer: x.buffer as GPUBuffer, offset: x.offset, size: p.x.buffers[1]!.size! } },
        { binding: 2, resource: { buffer: hist } },
        { binding: 3, resource: { buffer: partial, offset: slices[i]!, size: p.groups * 4 } },
        { binding: 4, resource: { buffer: params[i]! } },
      ],
    });
  });
  t0 = performance.now();
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  plan.forEach((p, i) => {
    pass.setBindGroup(0, groups[i]!);
    pass.dispatchWorkgroups(p.groups);
  });
  pass.end();
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  const tGpu = performance.now() - t0;
  const dispatched = plan.reduce((a, p) => a + p.groups, 0);
  console.log(`   compute shader (filter k < 100, histogram and sum of x): ${plan.length} dispatches, ${dispatched.toLocaleString()} workgroups of ${WORKGROUP}, ${ms(tGpu)}`);

  // 3. The shader's output, handed to arrow-js through the C Device Data Interface.
  t0 = performance.now();
  const fromGpu = async (buffer: GPUBuffer, length: number, type: Uint32 | Float32): Promise<DeviceArray> => {
    const struct = handOver(buffer, device, length);
    try {
      return await importDeviceArrayAsync(struct, type); // moves the struct: the DeviceArray owns the GPUBuffer now
    } finally {
      freeArrowDeviceArray(struct);
    }
  };
  const histDev = await fromGpu(hist, BINS, new Uint32());
  const partialDev = await fromGpu(partial, partialBytes / 4, new Float32());
  const histData = (await histDev.toHostAsync()) as Data<Uint32>;
  const partialData = (await partialDev.toHostAsync()) as Data<Float32>;
  const tBack = performance.now() - t0;
  let gpuSum = 0;
  for (const v of partialData.values) gpuSum += v; // in f64
  const gpuHist = Array.from(histData.values);
  const gpu: Result = { hist: gpuHist, count: gpuHist.reduce((a, b) => a + b, 0), sum: gpuSum };
  console.log(`3. back in arrow-js (importDeviceArrayAsync + toHostAsync, ${ms(tBack)}): histogram ${histData.type} [${gpuHist.join(', ')}], ${partialData.length.toLocaleString()} ${partialData.type} partial sums`);

  // 4. The same in JS.
  t0 = performance.now();
  const js = inJs(table);
  const tJs = performance.now() - t0;
  // The GPU sums nonnegative f32 values in f32: per invocation a chain of at most `chain` terms, then a tree of
  // log2(256) = 8 levels; each rounding adds a relative error of at most 2^-24 of a partial sum, so the total's error is
  // at most (chain - 1 + 8) * 2^-24 * sum (first order). The JS sum is in f64 (error ~1e-16 * rows): exact by comparison.
  const chain = Math.max(...plan.map((p) => Math.ceil((p.end - p.start) / (p.groups * WORKGROUP))));
  const tolerance = (chain - 1 + 8) * 2 ** -24 * js.sum;
  const sameHist = gpu.hist.every((c, i) => c === js.hist[i]);
  const sumOk = Math.abs(gpu.sum - js.sum) <= tolerance;
  console.log(`4. rows with k < 100: histogram of x in 10 bins of width 10, count, sum(x)`);
  console.log(`   GPU: [${gpu.hist.join(', ')}] count ${gpu.count} sum ${gpu.sum.toFixed(3)}`);
  console.log(`   JS:  [${js.hist.join(', ')}] count ${js.count} sum ${js.sum.toFixed(3)}`);
  console.log(`   histogram and count ${sameHist && gpu.count === js.count ? 'equal (exact)' : 'DIFFER'}; sums ${sumOk ? 'agree' : 'DISAGREE'}: |GPU - JS| = ${Math.abs(gpu.sum - js.sum).toExponential(2)} <= ${tolerance.toExponential(2)} (f32 rounding bound)`);
  console.log(`   results: ${sameHist && gpu.count === js.count && sumOk ? 'GPU and JS agree' : 'GPU and JS DISAGREE'}`);
  console.log(`   timings: DuckDB query ${ms(tQuery)}; upload (export + import) ${ms(tUpload)}; GPU compute ${ms(tGpu)}; read back ${ms(tBack)}; JS ${ms(tJs)}${opened.swiftshader ? ' (GPU on SwiftShader: a CPU emulation)' : ''}`);

  // 5. Release everything.
  histDev.release();
  partialDev.release();
  for (const d of onGpu) d.release();
  for (const u of params) u.destroy();
  table.release();
  await conn.close();
  await db.close();
  device.destroy();
  const a = accounting();
  console.log(`5. accounting: ${a.liveImports} imports and ${a.liveExports} exports live, ${handedOver.size} GPUBuffers handed over still live`);
  if (!(sameHist && gpu.count === js.count && sumOk)) process.exitCode = 1;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
