/**
 * Device benchmark (GPU only): copying about 1 GiB of CUDA device memory to
 * the host through a `DeviceArray` (`toHost`: one batched read of the last
 * offsets, then one batch of buffer copies into JS memory), against plain
 * `cudaMemcpy` of the same bytes in the same run: into pageable JS memory
 * already touched, into new JS memory (what every host copy pays: the copy
 * faults its pages in; `toHost` returns new memory) and into pinned memory
 * (`cudaMallocHost`). `toHost/new` is the library's own cost.
 *
 *   node --import tsx bench/device.bench.ts [--mib 1024] [--reps 5]
 *
 * Without CUDA it prints why and exits 0.
 */
import { Table, Utf8, vectorFromArray } from 'apache-arrow';
import { DeviceType } from '../src/abi/constants.js';
import { cudaAvailable, cudaRuntime, exportDeviceArray, freeDeviceArray, importDeviceArray, MemcpyKind } from '../src/device/index.js';
import { nativeMemory } from '../src/memory/index.js';

const args = process.argv.slice(2);
const arg = (name: string, dflt: number): number => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : dflt);
const mib = arg('--mib', 1024);
const reps = arg('--reps', 5);

const cuda = cudaAvailable();
if (!cuda.ok) {
  console.log(`device bench skipped: ${cuda.reason}`);
  process.exit(0);
}
const rt = cudaRuntime(); // loaded by cudaAvailable above
const mem = nativeMemory();

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}
function time(fn: () => void): number {
  fn();
  const t: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    fn();
    t.push(performance.now() - t0);
  }
  return median(t);
}

// ~1 GiB: an int64 column (7/8 of the bytes) and a utf8 column (the rest, so the offsets fetch is exercised).
const rows = Math.floor((mib * 2 ** 20 * 7) / 8 / 8);
const strRows = Math.floor((mib * 2 ** 20) / 8 / 20);
const big = new BigInt64Array(rows);
for (let i = 0; i < rows; i++) big[i] = BigInt(i);
const strs = Array.from({ length: strRows }, (_, i) => `value-${i.toString().padStart(10, '0')}`);
const table = new Table({ n: vectorFromArray(big) });
const sTable = new Table({ s: vectorFromArray(strs, new Utf8()) });

for (const t of [table, sTable]) {
  const batch = t.batches[0]!;
  const p = exportDeviceArray(batch, { deviceType: DeviceType.CUDA, deviceId: 0 });
  const dev = importDeviceArray(p, batch.schema);
  freeDeviceArray(p);
  dev.resolveBufferSizes();
  // Every buffer (the columns have no children): the plain cudaMemcpy baselines copy the same bytes.
  const addrs = dev.children.flatMap((c) => c.buffers).filter((b) => b.address !== 0n && (b.size ?? 0) > 0);
  const bytes = addrs.reduce((n, b) => n + b.size!, 0);
  const gib = bytes / 2 ** 30;
  const pageable = new Uint8Array(bytes);
  const pinned = rt.malloc(bytes, 'host');
  const viaToHost = time(() => void dev.toHost());
  const plainPageable = time(() => {
    let at = 0;
    for (const b of addrs) {
      rt.memcpy(mem.addressOf(pageable.subarray(at, at + b.size!))!, b.address, b.size!, MemcpyKind.DeviceToHost);
      at += b.size!;
    }
  });
  // What any host copy pays: new memory, whose pages the copy touches first (toHost returns new memory too).
  const plainFresh = time(() => {
    const fresh = new Uint8Array(bytes);
    let at = 0;
    for (const b of addrs) {
      rt.memcpy(mem.addressOf(fresh.subarray(at, at + b.size!))!, b.address, b.size!, MemcpyKind.DeviceToHost);
      at += b.size!;
    }
  });
  const plainPinned = time(() => {
    let at = 0;
    for (const b of addrs) {
      rt.memcpy(pinned + BigInt(at), b.address, b.size!, MemcpyKind.DeviceToHost);
      at += b.size!;
    }
  });
  rt.free(pinned, 'host');
  dev.release();
  const gbps = (ms: number): string => `${(gib / (ms / 1000)).toFixed(2)} GiB/s`;
  console.log(`${batch.schema.fields.map((f) => `${f.name}: ${f.type}`).join(', ')}: ${gib.toFixed(3)} GiB device -> host`);
  console.log(`  DeviceArray.toHost()        ${viaToHost.toFixed(1)} ms  ${gbps(viaToHost)}`);
  console.log(`  cudaMemcpy, pageable JS     ${plainPageable.toFixed(1)} ms  ${gbps(plainPageable)}  ratio toHost/plain ${(viaToHost / plainPageable).toFixed(2)}`);
  console.log(`  cudaMemcpy, new JS memory   ${plainFresh.toFixed(1)} ms  ${gbps(plainFresh)}  ratio toHost/new ${(viaToHost / plainFresh).toFixed(2)}`);
  console.log(`  cudaMemcpy, pinned          ${plainPinned.toFixed(1)} ms  ${gbps(plainPinned)}  ratio toHost/pinned ${(viaToHost / plainPinned).toFixed(2)}`);
}
