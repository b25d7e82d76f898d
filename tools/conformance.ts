/**
 * The conformance runner: round-trips Arrow IPC files (and integration JSON
 * where arrow-js cannot read the IPC form) through a peer implementation of
 * the C Data Interface, in both directions, and compares types and values
 * with the original.
 *
 *   npm run conformance -- [--peer self|duckdb|wasm|arrow-cpp] [--via array|device|stream|device-stream|async|cuda|webgpu] [--target arrow-js|flechette] [--verbose] <files or folders>
 *
 * Direction "ours first": we export -> the peer imports -> the peer exports
 * -> we import -> compare with the original. Direction "peer first": the
 * peer exports -> we import -> we export -> the peer imports and compares
 * with its own copy. After each case the accounting must be back to zero
 * (every import released, every export released by its consumer), except
 * for exports a peer measured as taken and never released by itself (its
 * own leaks: `Peer.heldExports`), which are reported as the peer's.
 *
 * `--via cuda` runs on a real GPU when a CUDA runtime that sees one is
 * found, else on the simulated CUDA runtime (test/device/cuda/sim), and
 * says which. `--via webgpu` runs on the WebGPU adapter Dawn for Node finds
 * (SwiftShader where there is no GPU: test/webgpu/gpu.ts) and prints it.
 *
 * `--target flechette` imports every case into @uwdata/flechette tables
 * through arrow-device/flechette and exports it from them (ours first: the
 * case as flechette's own IPC reader reads it is exported), and compares what
 * flechette returns with the gold integration JSON, value by value
 * (tools/conformance-flechette.ts); `--via array` and `stream` only. The
 * default, `arrow-js`, is the main entry.
 *
 * Prints one line per case and a final `N passed, N failed, N skipped`;
 * exits non-zero on any failure.
 */
import { discover, runCase, setGpuDevice, setTarget, setVia, TARGETS, VIAS, type Target, type Via } from './conformance-lib.js';
import { openGpu, type Gpu } from '../test/webgpu/gpu.js';
import { duckdbPeer } from './peers/duckdb.js';
import { selfPeer } from './peers/self.js';
import { wasmPeer } from './peers/wasm.js';
import { arrowCppPeer } from './peers/arrow-cpp.js';
import type { Peer } from './peers/peer.js';
import { setupCuda, simControl, type CudaSetup } from '../test/device/cuda/sim/sim.js';

interface Options {
  peer: string;
  via: Via;
  target: Target;
  verbose: boolean;
  paths: string[];
}

function parseArgs(argv: string[]): Options {
  const o: Options = { peer: 'self', via: 'array', target: 'arrow-js', verbose: false, paths: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--peer') o.peer = argv[++i] ?? '';
    else if (a.startsWith('--peer=')) o.peer = a.slice(7);
    else if (a === '--via' || a.startsWith('--via=')) {
      const v = a === '--via' ? argv[++i] : a.slice(6);
      if (!VIAS.includes(v as Via)) throw new Error(`unknown --via "${v}" (known: ${VIAS.join(', ')})`);
      o.via = v as Via;
    }
    else if (a === '--target' || a.startsWith('--target=')) {
      const t = a === '--target' ? argv[++i] : a.slice(9);
      if (!TARGETS.includes(t as Target)) throw new Error(`unknown --target "${t}" (known: ${TARGETS.join(', ')})`);
      o.target = t as Target;
    }
    else if (a === '--verbose' || a === '-v') o.verbose = true;
    else if (a === '--help' || a === '-h') {
      console.log('usage: npm run conformance -- [--peer self|duckdb|wasm|arrow-cpp] [--via array|device|stream|device-stream|async|cuda|webgpu] [--target arrow-js|flechette] [--verbose] <files or folders>');
      process.exit(0);
    } else o.paths.push(a);
  }
  if (o.paths.length === 0) throw new Error('no files or folders given (try ../shared/testdata/arrow-testing)');
  return o;
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const peers: Record<string, () => Promise<Peer>> = { self: selfPeer, duckdb: duckdbPeer, wasm: wasmPeer, 'arrow-cpp': arrowCppPeer };
  const make = peers[o.peer];
  if (!make) throw new Error(`unknown peer "${o.peer}" (known: ${Object.keys(peers).join(', ')})`);
  let cuda: CudaSetup | undefined;
  if (o.via === 'cuda') {
    cuda = setupCuda();
    console.log(`conformance --via cuda: ${cuda.describe}`);
    if (cuda.mode === 'none') throw new Error(`--via cuda needs CUDA: ${cuda.reason}`);
  }
  let gpu: Gpu | undefined;
  if (o.via === 'webgpu') {
    const g = await openGpu();
    if (typeof g === 'string') throw new Error(`--via webgpu needs a WebGPU adapter: ${g}`);
    gpu = g;
    setGpuDevice(g.device);
    console.log(`conformance --via webgpu: adapter ${g.adapter}`);
  }
  const peer = await make();
  setVia(o.via);
  setTarget(o.target);
  const cases = discover(o.paths);
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  console.log(`conformance: peer ${peer.name}, via ${o.via}${o.target === 'arrow-js' ? '' : `, target ${o.target}`}, ${cases.size} cases`);
  for (const [name, files] of cases) {
    const t0 = performance.now();
    const r = await runCase(peer, name, files);
    const ms = (performance.now() - t0).toFixed(0);
    if (r.status === 'pass') passed++;
    else if (r.status === 'fail') failed++;
    else skipped++;
    const label = r.status === 'pass' ? 'PASS' : r.status === 'fail' ? 'FAIL' : 'SKIP';
    console.log(`${label} ${name} (${ms} ms)${r.status !== 'pass' || o.verbose || r.peerLeak ? `: ${r.detail}` : ''}`);
  }
  const held = peer.heldExports?.() ?? 0;
  await peer.close();
  if (peer.heldExports) console.log(`${peer.name} leaks: ${held} of our exported structs taken and never released by it over the run (not ours: our side is checked at zero after every case)`);
  if (cuda?.mode === 'sim') {
    // The simulator counts what is still allocated: with the runtime's own cache let go, nothing may be.
    cuda.runtime.releaseCached();
    const live = simControl(process.env.ARROW_DEVICE_CUDART!).live();
    const leaked = Object.entries(live).filter(([, n]) => n !== 0);
    if (leaked.length) {
      console.log(`FAIL simulated CUDA objects still live after the run: ${JSON.stringify(live)}`);
      failed++;
    } else console.log('simulated CUDA: no allocation, stream, event or queued op left');
  }
  gpu?.device.destroy();
  console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
  process.exitCode = failed > 0 ? 1 : 0;
}

main().catch((e: unknown) => {
  console.error((e as Error).stack ?? String(e));
  process.exitCode = 2;
});
