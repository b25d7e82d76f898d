/**
 * Device backends: how the bytes of a device type are synchronised and read
 * by the host. One backend per device type; types with none (OpenCL,
 * Vulkan, Metal, ...) import as opaque `DeviceArray`s whose bytes cannot be
 * read.
 *
 * Synchronisation (CDeviceDataInterface.rst, "Synchronization"), for CUDA:
 * - Copies (`readBatch`) make the stream they run on wait for the producer's
 *   event with `cudaStreamWaitEvent`, then queue every copy on that stream
 *   and synchronise it once. The stream is the one the user names
 *   (`{ stream }`), else the library's own non-blocking stream for the device.
 * - Zero-copy host access (`syncForHost`, CUDA_HOST and CUDA_MANAGED) blocks
 *   the host with `cudaEventSynchronize` before the first byte is read.
 */
import { DeviceType } from '../abi/constants.js';
import { ArrowDeviceError, prefixPath, unsupported } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { cudaRuntime } from './cuda.js';
import { webgpuBackend } from './webgpu.js';

/** A copy from a device (or host) address into JS memory. */
export interface ReadRange {
  readonly src: Ptr;
  readonly size: number;
  readonly dst: Uint8Array;
}

/** Where the bytes are and what to wait on before reading them. */
export interface DeviceContext {
  readonly mem: Memory;
  readonly deviceType: number;
  readonly deviceId: number;
  /** The producer's `sync_event` (a pointer to the device's event type), or 0n. */
  readonly syncEvent: Ptr;
  /** A stream (for CUDA, a `cudaStream_t`) to run copies on; the backend's own when absent. */
  readonly stream?: Ptr;
}

export interface DeviceBackend {
  readonly name: string;
  /** Whether the CPU may read the bytes at their own addresses once synchronised (zero-copy import). */
  hostReadable(deviceType: number): boolean;
  /** Blocks until the CPU may read the bytes (waits for the sync event). */
  syncForHost(ctx: DeviceContext): void;
  /**
   * Copies every range into its `dst`: all ordered after the sync event, and
   * one synchronisation for the whole batch. `small` ranges (offsets, sizes)
   * may go through a staging buffer.
   */
  readBatch(ctx: DeviceContext, ranges: readonly ReadRange[], small: boolean): void | Promise<void>;
  /** Whether `readBatch` completes later (returns a promise): arrays of it are read by the asynchronous imports. */
  readonly async?: boolean;
}

export const cpuBackend: DeviceBackend = {
  name: 'cpu',
  hostReadable: () => true,
  syncForHost: () => {},
  readBatch(ctx, ranges) {
    for (const r of ranges) if (r.size > 0) ctx.mem.read(r.src, r.size, r.dst);
  },
};

function requireNative(ctx: DeviceContext): void {
  if (ctx.mem.name !== 'native') throw unsupported('', `CUDA memory needs the native memory backend, not "${ctx.mem.name}"`);
}

/** The CUDA device a context's copies run on (CUDA_HOST memory may say -1: use the current device). */
export function cudaDeviceOf(ctx: { deviceId: number }): number {
  return ctx.deviceId >= 0 ? ctx.deviceId : cudaRuntime().getDevice();
}

/** Runs `fn`; an error that names no place (a missing CUDA runtime, a failed CUDA call) is placed at the device array. */
function placed<T>(fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw atDeviceArray(e);
  }
}

/** An error of a device operation that names no place, placed at the device array. */
export function atDeviceArray(e: unknown): unknown {
  return e instanceof ArrowDeviceError && e.path === '' ? prefixPath(e, 'device_array') : e;
}

export const cudaBackend: DeviceBackend = {
  name: 'cuda',
  hostReadable: (t) => t === DeviceType.CUDA_HOST || t === DeviceType.CUDA_MANAGED,
  syncForHost(ctx) {
    placed(() => cudaSyncForHost(ctx));
  },
  readBatch(ctx, ranges, small) {
    placed(() => cudaReadBatch(ctx, ranges, small));
  },
};

function cudaSyncForHost(ctx: DeviceContext): void {
  if (ctx.syncEvent === 0n) return;
  requireNative(ctx);
  const rt = cudaRuntime();
  rt.eventSynchronize(ctx.mem.readPtr(ctx.syncEvent));
}

function cudaReadBatch(ctx: DeviceContext, ranges: readonly ReadRange[], small: boolean): void {
  const work = ranges.filter((r) => r.size > 0);
  if (work.length === 0) return;
  requireNative(ctx);
  const rt = cudaRuntime();
  const dev = cudaDeviceOf(ctx);
  rt.onDevice(dev, () => {
    const stream = ctx.stream ?? rt.internalStream(dev);
    if (ctx.syncEvent !== 0n) rt.streamWaitEvent(stream, ctx.mem.readPtr(ctx.syncEvent));
    if (small) {
      // Into pinned staging: truly asynchronous copies, then one synchronisation.
      const at: number[] = [];
      let total = 0;
      for (const r of work) {
        at.push(total);
        total += Math.ceil(r.size / 8) * 8;
      }
      const stage = rt.stagingBuffer(total);
      work.forEach((r, i) => rt.memcpyAsync(stage + BigInt(at[i]!), r.src, r.size, stream));
      rt.streamSynchronize(stream);
      work.forEach((r, i) => ctx.mem.read(stage + BigInt(at[i]!), r.size, r.dst));
    } else {
      for (const r of work) {
        const dst = ctx.mem.addressOf(r.dst);
        if (dst === undefined) throw unsupported('', 'cannot take the address of a JS buffer');
        rt.memcpyAsync(dst, r.src, r.size, stream);
      }
      rt.streamSynchronize(stream);
    }
  });
}

const backends = new Map<number, DeviceBackend>([
  [DeviceType.CPU, cpuBackend],
  [DeviceType.CUDA, cudaBackend],
  [DeviceType.CUDA_HOST, cudaBackend],
  [DeviceType.CUDA_MANAGED, cudaBackend],
  [DeviceType.WEBGPU, webgpuBackend],
]);

/** The backend of a device type; undefined for the opaque types. */
export function backendFor(deviceType: number): DeviceBackend | undefined {
  return backends.get(deviceType);
}

/** Whether the device type's bytes are read asynchronously (WebGPU): its arrays are imported as `DeviceArray`s, checked by an awaited step. */
export function readsAsync(deviceType: number): boolean {
  return backends.get(deviceType)?.async === true;
}

/** The backend of a device type, or the typed error saying its bytes cannot be read. */
export function requireBackend(deviceType: number, typeName: string, path: string): DeviceBackend {
  const b = backends.get(deviceType);
  if (!b) {
    throw new ArrowDeviceError(
      'unsupported',
      path,
      `the bytes of ${typeName} memory (device type ${deviceType}) cannot be read by this library; pass the array on (exportTo) or release it`,
    );
  }
  return b;
}

/**
 * Installs (or, with `undefined`, removes) the backend of a device type and
 * returns the previous one. For tests and for extension devices
 * (`EXT_DEV`) whose producer documents how to read them.
 */
export function setDeviceBackend(deviceType: number, backend: DeviceBackend | undefined): DeviceBackend | undefined {
  const prev = backends.get(deviceType);
  if (backend) backends.set(deviceType, backend);
  else backends.delete(deviceType);
  return prev;
}
