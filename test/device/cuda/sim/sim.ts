/**
 * The CUDA the device tests run against: a real GPU when a CUDA runtime
 * that sees a device is found, else the simulated runtime (simcudart.c),
 * built here at test time with the system C compiler and loaded through
 * ARROW_DEVICE_CUDART, the library's documented override.
 *
 * The build is cached under .build/simcuda/<hash of the sources>/ (git
 * ignored) and written through a temporary name and a rename, so test
 * files running in parallel processes never load a half-written library.
 *
 * ARROW_DEVICE_CUDA_SIM=1 forces the simulator even where a GPU is found;
 * ARROW_DEVICE_CUDA_SIM=0 forbids it (the CUDA tests then need a GPU).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import { cudaAvailable, cudaRuntime, resetCudaRuntimeForTests, type CudaRuntime } from '../../../../src/device/cuda.js';
import { run, which } from '../../../helpers/tools.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const root = fileURLToPath(new URL('../../../../', import.meta.url));
const SOURCES = ['simcudart.c', 'cuda_runtime.h', 'peer.c', '../../../include/arrow_c_abi.h'];

export interface SimBuild {
  /** libsimcudart.so: the simulated runtime. */
  readonly cudart: string;
  /** libsimpeer.so: the C test peer (peer.c), linked against that runtime. */
  readonly peer: string;
}

let built: SimBuild | undefined;

/** Builds (or finds, already built) the simulator and its peer. Throws when no C compiler is found. */
export function buildSim(): SimBuild {
  if (built) return built;
  const cc = which('cc') ?? which('gcc');
  if (!cc) throw new Error('no C compiler (cc/gcc) to build the simulated CUDA runtime');
  const hash = createHash('sha256');
  for (const s of SOURCES) hash.update(s).update(readFileSync(join(here, s)));
  const dir = join(root, '.build', 'simcuda', hash.digest('hex').slice(0, 16));
  const cudart = join(dir, 'libsimcudart.so');
  const peer = join(dir, 'libsimpeer.so');
  if (!existsSync(cudart) || !existsSync(peer)) {
    mkdirSync(dir, { recursive: true });
    const tmp = `.tmp${process.pid}`;
    const flags = ['-std=c11', '-O1', '-Wall', '-shared', '-fPIC', '-pthread'];
    // The soname lets the peer's dependency and the library's dlopen of the same path resolve to one runtime.
    run(cc, [...flags, '-Wl,-soname,libsimcudart.so', '-o', cudart + tmp, join(here, 'simcudart.c')]);
    renameSync(cudart + tmp, cudart);
    run(cc, [...flags, '-o', peer + tmp, join(here, 'peer.c'), `-L${dir}`, '-lsimcudart', `-Wl,-rpath,${dir}`]);
    renameSync(peer + tmp, peer);
  }
  built = { cudart, peer };
  return built;
}

export type CudaSetup =
  | { readonly mode: 'gpu' | 'sim'; readonly runtime: CudaRuntime; readonly devices: number; readonly peer?: string; readonly describe: string }
  | { readonly mode: 'none'; readonly reason: string; readonly describe: string };

let setup: CudaSetup | undefined;

/**
 * Picks the CUDA of this process, once: a real GPU if a runtime that sees
 * one loads, else the simulator (ARROW_DEVICE_CUDART is set to it).
 */
export function setupCuda(): CudaSetup {
  if (setup) return setup;
  const force = process.env.ARROW_DEVICE_CUDA_SIM;
  if (force !== '1') {
    const real = cudaAvailable();
    if (real.ok) {
      const peer = process.env.ARROW_DEVICE_CUDA_PEER ?? fileURLToPath(new URL('../build/libpeer.so', import.meta.url));
      setup = {
        mode: 'gpu',
        runtime: cudaRuntime(), // loaded by cudaAvailable: the same runtime
        devices: real.devices,
        peer: existsSync(peer) ? peer : undefined,
        describe: `a real GPU: ${real.library}, ${real.devices} device(s)`,
      };
      return setup;
    }
    if (force === '0') return (setup = { mode: 'none', reason: real.reason, describe: `no CUDA: ${real.reason}` });
  }
  let b: SimBuild;
  try {
    b = buildSim();
  } catch (e) {
    const reason = (e as Error).message;
    return (setup = { mode: 'none', reason, describe: `no CUDA: ${reason}` });
  }
  process.env.ARROW_DEVICE_CUDART = b.cudart;
  resetCudaRuntimeForTests();
  const sim = cudaAvailable();
  if (!sim.ok) return (setup = { mode: 'none', reason: sim.reason, describe: `the simulator did not load: ${sim.reason}` });
  setup = { mode: 'sim', runtime: cudaRuntime(), devices: sim.devices, peer: b.peer, describe: `the simulated CUDA runtime (${b.cudart}), ${sim.devices} devices` };
  return setup;
}

/** The simulator's counters and knobs (see cuda_runtime.h), bound from the library at `path`. */
export interface SimControl {
  liveAllocations(): number;
  liveStreams(): number;
  liveEvents(): number;
  pendingOps(): number;
  completedOps(): number;
  /** Sets the delay before each queued op runs; returns the previous one. */
  setDelayUs(us: number): number;
  /** Every live counter at once, for leak assertions. */
  live(): { allocations: number; streams: number; events: number; pendingOps: number };
}

export function simControl(path: string): SimControl {
  const lib = koffi.load(path);
  const n = (decl: string): (() => number) => {
    const f = lib.func(decl);
    return () => Number(f() as number | bigint);
  };
  const liveAllocations = n('int64_t sim_live_allocations(void)');
  const liveStreams = n('int64_t sim_live_streams(void)');
  const liveEvents = n('int64_t sim_live_events(void)');
  const pendingOps = n('int64_t sim_pending_ops(void)');
  const completedOps = n('int64_t sim_completed_ops(void)');
  const setDelay = lib.func('int64_t sim_set_delay_us(int64_t us)');
  return {
    liveAllocations, liveStreams, liveEvents, pendingOps, completedOps,
    setDelayUs: (us) => Number(setDelay(us) as number | bigint),
    live: () => ({ allocations: liveAllocations(), streams: liveStreams(), events: liveEvents(), pendingOps: pendingOps() }),
  };
}
