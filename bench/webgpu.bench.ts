/**
 * WebGPU benchmark: a Float32 column of 1M and 10M rows (arrow-js
 * `vectorFromArray(Float32Array)`, one Data) on a WebGPU device (Dawn for
 * Node; see test/webgpu/gpu.ts for how the device is found). Per size:
 *
 * - upload: `exportDeviceArray(data, { deviceType: DeviceType.WEBGPU, gpuDevice })`
 *   + `importDeviceArrayAsync` + `queue.onSubmittedWorkDone()` (the upload is
 *   complete), median of the runs, MB/s of the column's bytes;
 * - readback: `toHostAsync()` of the imported array, median, MB/s;
 * - shader: a compute shader summing the column where the export put it
 *   (bound at `buffers[1].webgpu.{buffer, offset}`, no copy): 256 invocations
 *   per workgroup, 8+ rows per invocation (a grid-stride loop; SwiftShader
 *   pays per workgroup), a tree in workgroup memory, one f32 partial sum per
 *   workgroup; encode + submit + `onSubmittedWorkDone`, median. The partials
 *   are then read back once and summed on the host (in f64), timed apart;
 * - js loop: the same sum over the same Float32Array in a plain JS loop
 *   (f64 accumulator), median: the reference the shader's ratio is against.
 *
 * The GPU sum must agree with the JS sum within the f32 rounding bound
 * printed with it (the values are nonnegative), or the bench exits non-zero.
 * Every DeviceArray is released and every GPUBuffer destroyed; the bench
 * checks that `accounting()` ends with nothing live.
 *
 *   node tools/with-node.mjs node --import tsx bench/webgpu.bench.ts [--runs1m 5] [--runs10m 3] [--rows-per-invocation 8]
 *
 * On SwiftShader the shader's time is about proportional to the number of
 * workgroups (rows / (256 x rows per invocation)): 32 rows per invocation
 * made it ~4x faster there, 128 ~10x.
 *
 * On SwiftShader (no GPU: a CPU emulation of Vulkan) the ratios say nothing
 * about a real GPU. Where no adapter is found it prints why and exits 0.
 */
/// <reference types="@webgpu/types" />
import { loadavg } from 'node:os';
import { vectorFromArray, type Data, type Float32 } from 'apache-arrow';
import { DeviceType } from '../src/abi/constants.js';
import { exportDeviceArray, freeDeviceArray, importDeviceArrayAsync, type DeviceArray } from '../src/device/index.js';
import { BufferUsage, webgpuBufferAt } from '../src/device/webgpu.js';
import { accounting } from '../src/memory/index.js';
import { openDawn } from '../test/webgpu/gpu.js';

const args = process.argv.slice(2);
const arg = (name: string, dflt: number): number => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : dflt);
const SIZES: { label: string; rows: number; runs: number }[] = [
  { label: '1M', rows: 1_000_000, runs: arg('--runs1m', 5) },
  { label: '10M', rows: 10_000_000, runs: arg('--runs10m', 3) },
];
const WORKGROUP = 256;
const ROWS_PER_INVOCATION = arg('--rows-per-invocation', 8);
const MAP_READ = 0x1;

const opened = await openDawn();
if (typeof opened === 'string') {
  console.log(`webgpu bench skipped: ${opened}`);
  process.exit(0);
}
const device = opened.device;
const swiftshader = opened.swiftshader;
console.log(`WebGPU adapter: ${opened.adapter}${swiftshader ? ' (SwiftShader: a CPU emulation of a GPU; the shader/js ratios say nothing about a real GPU)' : ''}`);
console.log(`load average: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
const ms = (t: number): string => `${t.toFixed(1)} ms`;
const mbps = (bytes: number, t: number): string => `${(bytes / 1e6 / (t / 1000)).toFixed(0)} MB/s`;

/** Deterministic values in [0, 1) (nonnegative: the error bound below is relative to the sum). */
function column(n: number): Float32Array {
  const v = new Float32Array(n);
  let x = 0x2545f491;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    v[i] = (x >>> 8) / 2 ** 24;
  }
  return v;
}

function jsSum(v: Float32Array): number {
  let s = 0;
  for (let i = 0; i < v.length; i++) s += v[i]!;
  return s;
}

// Each invocation sums rows wg * 256 + li, + 256 * workgroups, ... (grid-stride) in f32; the
// workgroup adds its 256 sums by a tree in workgroup memory; one partial per workgroup.
const SHADER = /* wgsl */ `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
var<workgroup> sums: array<f32, ${WORKGROUP}>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nwg: vec3u) {
  let n = arrayLength(&x);
  var s = 0.0;
  for (var i = wg.x * ${WORKGROUP}u + li; i < n; i += nwg.x * ${WORKGROUP}u) { s += x[i]; }
  sums[li] = s;
  workgroupBarrier();
  for (var w = ${WORKGROUP / 2}u; w > 0u; w >>= 1u) {
    if (li < w) { sums[li] += sums[li + w]; }
    workgroupBarrier();
  }
  if (li == 0u) { partial[wg.x] = sums[0]; }
}`;
const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code: SHADER }), entryPoint: 'main' } });

/** Exports `data` to the GPU and imports it: the timed upload. */
async function upload(data: Data<Float32>): Promise<DeviceArray> {
  const ptr = exportDeviceArray(data, { deviceType: DeviceType.WEBGPU, gpuDevice: device });
  try {
    return await importDeviceArrayAsync(ptr, data.type);
  } finally {
    freeDeviceArray(ptr); // moved by the import: only freed here
  }
}

let failed = false;
for (const { label, rows, runs } of SIZES) {
  const values = column(rows);
  const data = vectorFromArray(values).data[0]! as Data<Float32>;
  const bytes = rows * 4;

  // Upload: one untimed run first (first-use costs), then `runs` timed; every run's DeviceArray but the last released.
  let dev = await upload(data);
  const tUp: number[] = [];
  for (let r = 0; r < runs; r++) {
    dev.release();
    const t0 = performance.now();
    dev = await upload(data);
    await device.queue.onSubmittedWorkDone();
    tUp.push(performance.now() - t0);
  }
  const upload1 = median(tUp);

  // Readback: the first copy checked against the column.
  const back = (await dev.toHostAsync()).values as Float32Array;
  if (back.length !== rows || !back.every((v, i) => Object.is(v, values[i]))) throw new Error(`webgpu ${label}: toHostAsync returned other values than were uploaded`);
  const tBack: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    await dev.toHostAsync();
    tBack.push(performance.now() - t0);
  }
  const readback = median(tBack);

  // Shader: bound where the export put the column.
  const region = dev.buffers[1]!.webgpu!;
  const groups = Math.min(Math.ceil(rows / (WORKGROUP * ROWS_PER_INVOCATION)), device.limits.maxComputeWorkgroupsPerDimension);
  const partial = device.createBuffer({ size: groups * 4, usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC, label: 'partial sums' });
  const staging = device.createBuffer({ size: groups * 4, usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: 'partial sums read' });
  let gpuSum = 0;
  let shader = 0;
  let tPartials = 0;
  try {
    const group = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [
        { binding: 0, resource: { buffer: region.buffer as GPUBuffer, offset: region.offset, size: bytes } },
        { binding: 1, resource: { buffer: partial } },
      ],
    });
    const run = async (): Promise<number> => {
      const t0 = performance.now();
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(groups);
      pass.end();
      device.queue.submit([enc.finish()]);
      await device.queue.onSubmittedWorkDone();
      return performance.now() - t0;
    };
    await run(); // untimed: the pipeline's first use
    const tShader: number[] = [];
    for (let r = 0; r < runs; r++) tShader.push(await run());
    shader = median(tShader);

    // The partials back and summed on the host (in f64).
    const t0 = performance.now();
    const enc = device.createCommandEncoder();
    enc.copyBufferToBuffer(partial, 0, staging, 0, groups * 4);
    device.queue.submit([enc.finish()]);
    await staging.mapAsync(MAP_READ);
    const partials = new Float32Array(staging.getMappedRange());
    for (let i = 0; i < partials.length; i++) gpuSum += partials[i]!;
    staging.unmap();
    tPartials = performance.now() - t0;
  } finally {
    partial.destroy();
    staging.destroy();
  }

  // JS loop over the same Float32Array.
  let js = jsSum(values);
  const tJs: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    js = jsSum(values);
    tJs.push(performance.now() - t0);
  }
  const jsLoop = median(tJs);

  const address = dev.buffers[1]!.address;
  dev.release();
  if (webgpuBufferAt(address) !== undefined) throw new Error(`webgpu ${label}: the release left the GPUBuffer's range in the registry`);

  // The f32 bound: per invocation a chain of at most `chain` f32 additions from 0 (chain - 1 roundings), then a
  // tree of log2(256) = 8 levels: with nonnegative terms the error is at most gamma(chain - 1 + 8) * sum,
  // gamma(k) = k u / (1 - k u), u = 2^-24. The host's f64 sums (of the partials, and the JS loop) each add at
  // most gamma64(terms) * sum, u = 2^-53.
  const chain = Math.ceil(rows / (groups * WORKGROUP));
  const gamma = (k: number, u: number): number => (k * u) / (1 - k * u);
  const bound = (gamma(chain - 1 + 8, 2 ** -24) + gamma(groups, 2 ** -53) + gamma(rows, 2 ** -53)) * js;
  const diff = Math.abs(gpuSum - js);
  const ok = diff <= bound;
  console.log(
    `webgpu ${label} rows: upload ${ms(upload1)} (${mbps(bytes, upload1)}), readback ${ms(readback)} (${mbps(bytes, readback)}), ` +
      `shader ${ms(shader)}, js loop ${ms(jsLoop)}, shader/js ${(shader / jsLoop).toFixed(2)}`,
  );
  console.log(
    `  sum: GPU ${gpuSum.toFixed(3)} (${groups} workgroups x ${WORKGROUP}, ${chain} rows per invocation; partials read back + summed on the host ${ms(tPartials)}), ` +
      `JS ${js.toFixed(3)}; |GPU - JS| = ${diff.toExponential(2)} ${ok ? '<=' : '>'} ${bound.toExponential(2)} (f32 bound): ${ok ? 'agree' : 'DISAGREE'}; ${runs} runs`,
  );
  if (!ok) failed = true;
}

device.destroy();
const a = accounting();
const leaks = a.liveImports !== 0 || a.liveExports !== 0 || a.liveHandles !== 0 || a.pinnedBytes !== 0;
console.log(`accounting: ${a.liveImports} imports, ${a.liveExports} exports, ${a.liveHandles} handles live, ${a.pinnedBytes} bytes pinned${leaks ? ' (LEAK)' : ''}`);
console.log(`load average: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
if (failed) {
  console.error('webgpu bench FAILED: the GPU sum and the JS sum disagree beyond the f32 bound');
  process.exit(1);
}
if (leaks) {
  console.error('webgpu bench FAILED: accounting() is not back to zero');
  process.exit(1);
}
