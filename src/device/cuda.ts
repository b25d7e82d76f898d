/**
 * The CUDA runtime (`libcudart`), loaded lazily through koffi on first use.
 * Importing the package never touches it: a machine without CUDA only sees
 * an error (kind `unsupported`) when it asks for CUDA memory.
 *
 * Where we look, in order (the first that loads wins):
 * 1. `ARROW_DEVICE_CUDART`: a path or a library name. When set, nothing else is tried.
 * 2. The names the dynamic loader resolves itself (LD_LIBRARY_PATH, the ldconfig
 *    cache): `libcudart.so`, `libcudart.so.13`, `.so.12`, `.so.11`
 *    (Windows: `cudart64_13.dll`, `cudart64_12.dll`, `cudart64_110.dll`).
 * 3. Those names in `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`,
 *    `/usr/local/cuda/targets/<arch>-linux/lib`, and pip's wheels
 *    (`site-packages/nvidia/cuda_runtime/lib`, `site-packages/nvidia/cu13/lib`)
 *    under the usual Python prefixes and `$VIRTUAL_ENV`.
 *
 * Every handle (`cudaStream_t`, `cudaEvent_t`) and device pointer is a
 * `bigint`, like every other address in this library. Out-parameters go
 * through a small native scratch allocation, so the declarations stay plain
 * `uintptr_t`s and no koffi pointer types leak out.
 */
import { envVar, envVars, existsSync, homeDir, join, readdirSync } from '../platform/node.js';
import { ArrowDeviceError, type ErrorKind } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { koffi, nativeMemory } from '../memory/native.js';

/** `cudaMemcpyKind`; with unified addressing `Default` infers the direction from the pointers. */
export const MemcpyKind = Object.freeze({ HostToHost: 0, HostToDevice: 1, DeviceToHost: 2, DeviceToDevice: 3, Default: 4 } as const);

/** cudaStreamNonBlocking: our streams do not synchronise with the legacy default stream. */
const STREAM_NON_BLOCKING = 1;
/** cudaEventDisableTiming: the cheapest event, enough to synchronise on. */
const EVENT_DISABLE_TIMING = 2;
/** cudaMemAttachGlobal */
const MEM_ATTACH_GLOBAL = 1;

/**
 * The kind of error a `cudaError_t` becomes (numeric values from the CUDA
 * runtime's `cudaError` enum). "No usable CUDA here" is `unsupported`
 * (ENOSYS); out of memory is `nomem`; a bad argument (a pointer CUDA does
 * not know or that was freed, a copy direction that does not match the
 * pointers, a device ordinal out of range, a destroyed stream or event) is
 * `invalid`; anything else (a fault on the device, ...) is `io`.
 */
const CUDA_ERROR_KINDS = new Map<number, ErrorKind>([
  [34, 'unsupported'], // cudaErrorStubLibrary
  [35, 'unsupported'], // cudaErrorInsufficientDriver
  [100, 'unsupported'], // cudaErrorNoDevice
  [2, 'nomem'], // cudaErrorMemoryAllocation
  [1, 'invalid'], // cudaErrorInvalidValue
  [17, 'invalid'], // cudaErrorInvalidDevicePointer
  [21, 'invalid'], // cudaErrorInvalidMemcpyDirection
  [101, 'invalid'], // cudaErrorInvalidDevice
  [400, 'invalid'], // cudaErrorInvalidResourceHandle
]);

/**
 * A failed CUDA runtime call: the `ArrowDeviceError` with the call and CUDA's own error code. Its kind
 * says what to do about it: `invalid` for a bad argument, `nomem` for a failed allocation,
 * `unsupported` for no device or driver, `io` otherwise.
 *
 * @example
 * try {
 *   exportDeviceArray(batch, { deviceType: DeviceType.CUDA, deviceId: 7 });
 * } catch (e) {
 *   if (e instanceof CudaError) console.log(e.call, e.cudaErrorName, e.kind); // ... 'cudaErrorInvalidDevice' 'invalid'
 * }
 */
export class CudaError extends ArrowDeviceError {
  /** `'CudaError'`. */
  override name = 'CudaError';
  /** Made by the runtime wrapper for a call that returned `cudaError` (non-zero); `text` is `cudaGetErrorString`'s. */
  constructor(
    /** The `cudaError_t` the call returned. */
    readonly cudaError: number,
    /** The call, as `cudaMemcpyAsync`. */
    readonly call: string,
    /** CUDA's name of the error, as `cudaErrorInvalidValue`. */
    readonly cudaErrorName: string,
    text: string,
  ) {
    super(CUDA_ERROR_KINDS.get(cudaError) ?? 'io', '', `${call} failed: ${cudaErrorName} (${cudaError})${text ? `: ${text}` : ''}`);
  }
}

type Fn = (...args: unknown[]) => unknown;

interface CudartFns {
  cudaRuntimeGetVersion: Fn;
  cudaDriverGetVersion: Fn;
  cudaGetDeviceCount: Fn;
  cudaGetDevice: Fn;
  cudaSetDevice: Fn;
  cudaMalloc: Fn;
  cudaFree: Fn;
  cudaMallocHost: Fn;
  cudaFreeHost: Fn;
  cudaMallocManaged: Fn;
  cudaMemcpy: Fn;
  cudaMemcpyAsync: Fn;
  cudaMemsetAsync: Fn;
  cudaStreamCreateWithFlags: Fn;
  cudaStreamDestroy: Fn;
  cudaStreamSynchronize: Fn;
  cudaStreamWaitEvent: Fn;
  cudaEventCreateWithFlags: Fn;
  cudaEventRecord: Fn;
  cudaEventSynchronize: Fn;
  cudaEventDestroy: Fn;
  cudaDeviceSynchronize: Fn;
  cudaGetErrorName: Fn;
  cudaGetErrorString: Fn;
}

const DECLS: Record<keyof CudartFns, string> = {
  cudaRuntimeGetVersion: 'int cudaRuntimeGetVersion(uintptr_t version)',
  cudaDriverGetVersion: 'int cudaDriverGetVersion(uintptr_t version)',
  cudaGetDeviceCount: 'int cudaGetDeviceCount(uintptr_t count)',
  cudaGetDevice: 'int cudaGetDevice(uintptr_t device)',
  cudaSetDevice: 'int cudaSetDevice(int device)',
  cudaMalloc: 'int cudaMalloc(uintptr_t devPtr, size_t size)',
  cudaFree: 'int cudaFree(uintptr_t devPtr)',
  cudaMallocHost: 'int cudaMallocHost(uintptr_t ptr, size_t size)',
  cudaFreeHost: 'int cudaFreeHost(uintptr_t ptr)',
  cudaMallocManaged: 'int cudaMallocManaged(uintptr_t devPtr, size_t size, unsigned int flags)',
  cudaMemcpy: 'int cudaMemcpy(uintptr_t dst, uintptr_t src, size_t count, int kind)',
  cudaMemcpyAsync: 'int cudaMemcpyAsync(uintptr_t dst, uintptr_t src, size_t count, int kind, uintptr_t stream)',
  cudaMemsetAsync: 'int cudaMemsetAsync(uintptr_t devPtr, int value, size_t count, uintptr_t stream)',
  cudaStreamCreateWithFlags: 'int cudaStreamCreateWithFlags(uintptr_t stream, unsigned int flags)',
  cudaStreamDestroy: 'int cudaStreamDestroy(uintptr_t stream)',
  cudaStreamSynchronize: 'int cudaStreamSynchronize(uintptr_t stream)',
  cudaStreamWaitEvent: 'int cudaStreamWaitEvent(uintptr_t stream, uintptr_t event, unsigned int flags)',
  cudaEventCreateWithFlags: 'int cudaEventCreateWithFlags(uintptr_t event, unsigned int flags)',
  cudaEventRecord: 'int cudaEventRecord(uintptr_t event, uintptr_t stream)',
  cudaEventSynchronize: 'int cudaEventSynchronize(uintptr_t event)',
  cudaEventDestroy: 'int cudaEventDestroy(uintptr_t event)',
  cudaDeviceSynchronize: 'int cudaDeviceSynchronize()',
  cudaGetErrorName: 'const char *cudaGetErrorName(int error)',
  cudaGetErrorString: 'const char *cudaGetErrorString(int error)',
};

/** Where a CUDA allocation lives: which free function it needs. */
export type CudaMemoryKind = 'device' | 'host' | 'managed';

/** The library candidates, in the order they are tried (see the file comment). */
export function cudartCandidates(
  env: NodeJS.ProcessEnv = envVars('ARROW_DEVICE_CUDART', 'CUDA_HOME', 'CUDA_PATH', 'CUDA_ROOT', 'VIRTUAL_ENV', 'CONDA_PREFIX'),
): string[] {
  const override = env.ARROW_DEVICE_CUDART;
  if (override) return [override];
  const names =
    process.platform === 'win32'
      ? ['cudart64_13.dll', 'cudart64_12.dll', 'cudart64_110.dll']
      : ['libcudart.so', 'libcudart.so.13', 'libcudart.so.12', 'libcudart.so.11.0', 'libcudart.so.11'];
  const arch = process.arch === 'arm64' ? 'sbsa' : 'x86_64';
  const dirs: string[] = [];
  for (const v of [env.CUDA_HOME, env.CUDA_PATH, env.CUDA_ROOT]) {
    if (v) dirs.push(join(v, 'lib64'), join(v, 'lib'), join(v, 'bin'));
  }
  dirs.push('/usr/local/cuda/lib64', `/usr/local/cuda/targets/${arch}-linux/lib`);
  // pip wheels: nvidia-cuda-runtime-cu11/cu12 (nvidia/cuda_runtime/lib), CUDA 13 (nvidia/cu13/lib).
  for (const sp of sitePackages(env)) dirs.push(join(sp, 'nvidia', 'cuda_runtime', 'lib'), join(sp, 'nvidia', 'cu13', 'lib'));
  const out = [...names];
  for (const d of dirs) for (const n of names) out.push(join(d, n));
  return [...new Set(out)];
}

/** site-packages folders of the usual Python prefixes (a readdir each; nothing is imported). */
function sitePackages(env: NodeJS.ProcessEnv): string[] {
  const home = homeDir();
  const roots = ['/usr/lib', '/usr/local/lib', ...(home ? [join(home, '.local', 'lib')] : [])];
  const out: string[] = [];
  if (env.VIRTUAL_ENV) roots.unshift(join(env.VIRTUAL_ENV, 'lib'));
  if (env.CONDA_PREFIX) roots.unshift(join(env.CONDA_PREFIX, 'lib'));
  for (const r of roots) {
    let entries: string[];
    try {
      entries = readdirSync(r).filter((e) => /^python3(\.\d+)?$/.test(e));
    } catch {
      continue;
    }
    for (const e of entries) {
      for (const sub of ['site-packages', 'dist-packages']) {
        const p = join(r, e, sub);
        if (existsSync(p)) out.push(p);
      }
    }
  }
  return out;
}

/**
 * A loaded CUDA runtime. Methods throw `ArrowDeviceError` (kind `io`, or
 * `unsupported` for "no device"/"driver too old") naming the call and CUDA's
 * own error name and text.
 */
export class CudaRuntime {
  private readonly f: CudartFns;
  private readonly mem: Memory;
  /** 64 bytes of native scratch for out-parameters. */
  private readonly scratch: Ptr;
  private readonly streams = new Map<number, Ptr>();
  private staging: { ptr: Ptr; size: number } | undefined;

  constructor(
    /** The library that was loaded: a path or a name. */
    readonly library: string,
    lib: ReturnType<ReturnType<typeof koffi>['load']>,
  ) {
    const f: Partial<CudartFns> = {};
    for (const [name, decl] of Object.entries(DECLS)) f[name as keyof CudartFns] = lib.func(decl) as Fn;
    this.f = f as CudartFns;
    this.mem = nativeMemory();
    this.scratch = this.mem.alloc(64);
  }

  /** Throws the typed error (`CudaError`) for a non-zero `cudaError_t`. */
  check(code: unknown, call: string): void {
    const c = Number(code);
    if (c === 0) return;
    let name = `cudaError ${c}`;
    let text = '';
    try {
      name = String(this.f.cudaGetErrorName(c));
      text = String(this.f.cudaGetErrorString(c));
    } catch {
      // keep the number
    }
    throw new CudaError(c, call, name, text);
  }

  private outPtr(call: string, fn: (out: Ptr) => unknown): Ptr {
    this.mem.writePtr(this.scratch, 0n);
    this.check(fn(this.scratch), call);
    return this.mem.readPtr(this.scratch);
  }

  private outInt(call: string, fn: (out: Ptr) => unknown): number {
    this.mem.writeI32(this.scratch, 0);
    this.check(fn(this.scratch), call);
    return this.mem.readI32(this.scratch);
  }

  /** `cudaRuntimeGetVersion`: 12040 for 12.4. */
  runtimeVersion(): number {
    return this.outInt('cudaRuntimeGetVersion', (p) => this.f.cudaRuntimeGetVersion(p));
  }

  /** `cudaDriverGetVersion`: 0 when no driver is installed. */
  driverVersion(): number {
    return this.outInt('cudaDriverGetVersion', (p) => this.f.cudaDriverGetVersion(p));
  }

  deviceCount(): number {
    return this.outInt('cudaGetDeviceCount', (p) => this.f.cudaGetDeviceCount(p));
  }

  getDevice(): number {
    return this.outInt('cudaGetDevice', (p) => this.f.cudaGetDevice(p));
  }

  setDevice(device: number): void {
    this.check(this.f.cudaSetDevice(device), `cudaSetDevice(${device})`);
  }

  /** Runs `fn` with `device` current, then restores the device that was current. */
  onDevice<T>(device: number, fn: () => T): T {
    const prev = this.getDevice();
    if (prev === device) return fn();
    this.setDevice(device);
    try {
      return fn();
    } finally {
      this.setDevice(prev);
    }
  }

  /** Allocates `size` bytes (at least 1) of the given kind on the current device. */
  malloc(size: number, kind: CudaMemoryKind = 'device'): Ptr {
    const n = Math.max(1, size);
    switch (kind) {
      case 'device':
        return this.outPtr(`cudaMalloc(${n})`, (p) => this.f.cudaMalloc(p, n));
      case 'host':
        return this.outPtr(`cudaMallocHost(${n})`, (p) => this.f.cudaMallocHost(p, n));
      case 'managed':
        return this.outPtr(`cudaMallocManaged(${n})`, (p) => this.f.cudaMallocManaged(p, n, MEM_ATTACH_GLOBAL));
    }
  }

  free(ptr: Ptr, kind: CudaMemoryKind = 'device'): void {
    if (ptr === 0n) return;
    if (kind === 'host') this.check(this.f.cudaFreeHost(ptr), 'cudaFreeHost');
    else this.check(this.f.cudaFree(ptr), 'cudaFree');
  }

  memcpy(dst: Ptr, src: Ptr, size: number, kind: number = MemcpyKind.Default): void {
    if (size === 0) return;
    this.check(this.f.cudaMemcpy(dst, src, size, kind), 'cudaMemcpy');
  }

  memcpyAsync(dst: Ptr, src: Ptr, size: number, stream: Ptr, kind: number = MemcpyKind.Default): void {
    if (size === 0) return;
    this.check(this.f.cudaMemcpyAsync(dst, src, size, kind, stream), 'cudaMemcpyAsync');
  }

  memsetAsync(dst: Ptr, value: number, size: number, stream: Ptr): void {
    if (size === 0) return;
    this.check(this.f.cudaMemsetAsync(dst, value, size, stream), 'cudaMemsetAsync');
  }

  streamCreate(): Ptr {
    return this.outPtr('cudaStreamCreateWithFlags', (p) => this.f.cudaStreamCreateWithFlags(p, STREAM_NON_BLOCKING));
  }

  streamDestroy(stream: Ptr): void {
    this.check(this.f.cudaStreamDestroy(stream), 'cudaStreamDestroy');
  }

  streamSynchronize(stream: Ptr): void {
    this.check(this.f.cudaStreamSynchronize(stream), 'cudaStreamSynchronize');
  }

  /** Makes future work on `stream` wait for `event` (no host blocking). */
  streamWaitEvent(stream: Ptr, event: Ptr): void {
    this.check(this.f.cudaStreamWaitEvent(stream, event, 0), 'cudaStreamWaitEvent');
  }

  eventCreate(): Ptr {
    return this.outPtr('cudaEventCreateWithFlags', (p) => this.f.cudaEventCreateWithFlags(p, EVENT_DISABLE_TIMING));
  }

  eventRecord(event: Ptr, stream: Ptr): void {
    this.check(this.f.cudaEventRecord(event, stream), 'cudaEventRecord');
  }

  /** Blocks the host until `event` has completed. */
  eventSynchronize(event: Ptr): void {
    this.check(this.f.cudaEventSynchronize(event), 'cudaEventSynchronize');
  }

  eventDestroy(event: Ptr): void {
    this.check(this.f.cudaEventDestroy(event), 'cudaEventDestroy');
  }

  deviceSynchronize(): void {
    this.check(this.f.cudaDeviceSynchronize(), 'cudaDeviceSynchronize');
  }

  /**
   * The library's own stream on `device` (non-blocking, created on first
   * use, kept for the life of the process): where copies run when the user
   * names no stream.
   */
  internalStream(device: number): Ptr {
    let s = this.streams.get(device);
    if (s === undefined) {
      s = this.onDevice(device, () => this.streamCreate());
      this.streams.set(device, s);
    }
    return s;
  }

  /**
   * Pinned host memory of at least `size` bytes for small batched reads,
   * grown on demand and reused: a copy into pinned memory is truly
   * asynchronous, so a batch of them costs one synchronisation.
   */
  stagingBuffer(size: number): Ptr {
    if (!this.staging || this.staging.size < size) {
      if (this.staging) this.free(this.staging.ptr, 'host');
      const n = Math.max(4096, 2 ** Math.ceil(Math.log2(Math.max(1, size))));
      this.staging = { ptr: this.malloc(n, 'host'), size: n };
    }
    return this.staging.ptr;
  }

  /**
   * Destroys what the runtime keeps between calls (the internal streams and
   * the pinned staging buffer); they are made again on next use. For a
   * clean shutdown, and for tests that count live CUDA objects.
   */
  releaseCached(): void {
    const streams = [...this.streams.values()];
    this.streams.clear();
    const staging = this.staging;
    this.staging = undefined;
    for (const s of streams) this.streamDestroy(s);
    if (staging) this.free(staging.ptr, 'host');
  }
}

let runtime: CudaRuntime | undefined;
let failure: ArrowDeviceError | undefined;

/**
 * The CUDA runtime, loaded on first call (and cached, success or failure).
 * Throws `ArrowDeviceError` of kind `unsupported` when no library loads,
 * listing what was tried.
 */
export function cudaRuntime(): CudaRuntime {
  if (runtime) return runtime;
  // A fresh error each time: callers put their place in front of it (prefixPath changes the error).
  if (failure) throw new ArrowDeviceError(failure.kind, '', failure.detail);
  const k = koffi();
  const tried: string[] = [];
  for (const c of cudartCandidates()) {
    try {
      const lib = k.load(c);
      runtime = new CudaRuntime(c, lib);
      return runtime;
    } catch (e) {
      const why = String((e as Error).message ?? e).split('\n')[0]!;
      tried.push(/cannot open shared object file|No such file/i.test(why) ? c : `${c} (${why})`);
    }
  }
  const override = envVar('ARROW_DEVICE_CUDART');
  failure = new ArrowDeviceError(
    'unsupported',
    '',
    override
      ? `the CUDA runtime named by ARROW_DEVICE_CUDART failed to load: ${tried.join('; ')}`
      : `no CUDA runtime (libcudart) found; set ARROW_DEVICE_CUDART to its path. Tried: ${tried.slice(0, 8).join(', ')}${tried.length > 8 ? ` and ${tried.length - 8} more` : ''}`,
  );
  throw new ArrowDeviceError(failure.kind, '', failure.detail);
}

/**
 * Whether CUDA can be used here: a runtime loads and sees at least one device. Never throws.
 *
 * @example
 * const cuda = cudaAvailable();
 * if (cuda.ok) console.log(`${cuda.devices} CUDA device(s) through ${cuda.library}`);
 * else console.log(`no CUDA: ${cuda.reason}`);
 */
export function cudaAvailable():
  | {
      /** CUDA can be used. */
      ok: true;
      /** The runtime library that loaded (once per process, on first use): a path or a name. */
      library: string;
      /** How many devices the runtime sees: at least 1. */
      devices: number;
    }
  | {
      /** CUDA cannot be used here. */
      ok: false;
      /** Why: no runtime found (and where it was looked for), a runtime that failed to load, or no device. */
      reason: string;
    } {
  try {
    const rt = cudaRuntime();
    const devices = rt.deviceCount();
    if (devices < 1) return { ok: false, reason: `the CUDA runtime ${rt.library} sees no device` };
    return { ok: true, library: rt.library, devices };
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
}

/** For tests: forget a cached load result so a changed ARROW_DEVICE_CUDART is tried again. */
export function resetCudaRuntimeForTests(): void {
  // The cached streams and staging memory belong to the runtime being forgotten.
  runtime?.releaseCached();
  runtime = undefined;
  failure = undefined;
}
