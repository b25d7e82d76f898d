/**
 * WebGPU device arrays (`ARROW_DEVICE_WEBGPU`, 15): the convention of
 * PROTOCOL.md, "WebGPU device arrays", and this library's side of it.
 *
 * A `GPUBuffer` is a JavaScript object, not an address, so the realm keeps
 * one registry (`globalThis[Symbol.for('arrow.webgpu')]`, made by the first
 * library that needs it, used by every other) that gives each registered
 * buffer a range of a 32-bit address space, as CUDA's unified addressing
 * gives each allocation a range of one: an address inside a range names
 * the buffer and the byte `address - base` inside it, so pointer arithmetic
 * on buffer pointers means what it means on any device. The same registry
 * numbers `GPUDevice`s (`device_id`) and holds sync events (a
 * `sync_event` is a handle to a promise; NULL when the data is ready in the
 * device queue's order).
 *
 * Export uploads every buffer of the tree into one new `GPUBuffer`
 * (`mappedAtCreation`: one upload, no command submission), each Arrow buffer
 * at a 256-byte boundary (the default `minStorageBufferOffsetAlignment`, so a
 * compute shader binds any of them directly); the release destroys it.
 * Import reads bytes through one staging buffer per batch: one command
 * submission and one `mapAsync`, after the producer's event.
 */
import { DeviceType } from '../abi/constants.js';
import type { ArrayView } from '../array/view.js';
import { ArrowDeviceError, invalid, unsupported } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import type { DeviceBackend, DeviceContext, ReadRange } from './backend.js';
import { writeDeviceFields, writeRawTree, type RawNode, type SharedResources } from './export.js';

// --- the WebGPU objects used (structural: any implementation, no type package needed) -------

/** The part of a `GPUBuffer` this library uses. */
export interface WebGPUBuffer {
  /** `GPUBuffer.size`: its length in bytes. */
  readonly size: number;
  /** `GPUBuffer.usage`: its `BufferUsage` flags. */
  readonly usage: number;
  /** `GPUBuffer.destroy()`: frees the buffer; reads of it then fail. */
  destroy(): void;
  /** `GPUBuffer.mapAsync()`: maps the buffer (`MAP_READ` here) once the queue's work on it is done. */
  mapAsync(mode: number, offset?: number, size?: number): Promise<void>;
  /** `GPUBuffer.getMappedRange()`: the mapped bytes. */
  getMappedRange(offset?: number, size?: number): ArrayBuffer;
  /** `GPUBuffer.unmap()`: ends the mapping (the `ArrayBuffer` is detached). */
  unmap(): void;
}

/** A `GPUCommandBuffer`, as far as this library sees one: what `finish()` returns and `queue.submit` takes. */
export interface WebGPUCommandBuffer {
  /** `GPUCommandBuffer.label`. */
  readonly label: string;
}

/**
 * The part of a `GPUDevice` this library uses: the WebGPU types of
 * `@webgpu/types` (and of Dawn's `webgpu` package) are assignable to it.
 */
export interface WebGPUDevice {
  /** `GPUDevice.queue`: where copies are submitted. */
  readonly queue: {
    /** `GPUQueue.submit()`: runs the command buffers, in order. */
    submit(commandBuffers: Iterable<WebGPUCommandBuffer>): void;
    /** `GPUQueue.onSubmittedWorkDone()`: settles when the work submitted so far is done. */
    onSubmittedWorkDone(): Promise<unknown>;
  };
  /** `GPUDevice.limits`, the one limit read here. */
  readonly limits?: {
    /** The alignment of a storage buffer binding's offset (256 unless the device says otherwise). */
    readonly minStorageBufferOffsetAlignment?: number;
  };
  /** `GPUDevice.createBuffer()`. */
  createBuffer(descriptor: { size: number; usage: number; mappedAtCreation?: boolean; label?: string }): WebGPUBuffer;
  /** `GPUDevice.createCommandEncoder()`: the encoder's buffer copies are all this library records. */
  createCommandEncoder(): {
    /** `GPUCommandEncoder.copyBufferToBuffer()`: `size` bytes, a multiple of 4. */
    copyBufferToBuffer(source: WebGPUBuffer, sourceOffset: number, destination: WebGPUBuffer, destinationOffset: number, size: number): void;
    /** `GPUCommandEncoder.finish()`: the command buffer to submit. */
    finish(): WebGPUCommandBuffer;
  };
}

/** `GPUBufferUsage` flags (the WebGPU specification's values). */
export const BufferUsage = Object.freeze({
  /** The buffer can be mapped for reading (`mapAsync(GPUMapMode.READ)`). */
  MAP_READ: 0x1,
  /** The buffer can be mapped for writing. */
  MAP_WRITE: 0x2,
  /** The buffer can be the source of a copy. */
  COPY_SRC: 0x4,
  /** The buffer can be the destination of a copy or a `writeBuffer`. */
  COPY_DST: 0x8,
  /** The buffer can be an index buffer. */
  INDEX: 0x10,
  /** The buffer can be a vertex buffer. */
  VERTEX: 0x20,
  /** The buffer can be a uniform buffer binding. */
  UNIFORM: 0x40,
  /** The buffer can be a storage buffer binding (what a compute shader reads an Arrow buffer through). */
  STORAGE: 0x80,
  /** The buffer can hold indirect draw or dispatch arguments. */
  INDIRECT: 0x100,
  /** The buffer can receive resolved query results. */
  QUERY_RESOLVE: 0x200,
} as const);
const MAP_READ_MODE = 0x1;

// --- the realm's registry (PROTOCOL.md, "WebGPU device arrays") --------------------------------

/** Where an address points: the buffer, its device, the range's base and the byte offset inside the buffer. */
export interface WebGPURegion {
  /** The registered `GPUBuffer` the address falls in. */
  readonly buffer: WebGPUBuffer;
  /** The `GPUDevice` it was registered with. */
  readonly device: WebGPUDevice;
  /** The first address of the buffer's range (256-aligned, never 0). */
  readonly base: number;
  /** The byte offset inside the buffer: `address - base`. */
  readonly offset: number;
}

/**
 * The realm-wide registry, version 1. Every library that exchanges WebGPU
 * arrays uses the one at `globalThis[Symbol.for('arrow.webgpu')]` (creating
 * it, with these members, when absent), so an address one library wrote is
 * resolved by another.
 */
export interface WebGPURegistry {
  /** 1: the version of the convention these members follow. */
  readonly version: 1;
  /** Gives `buffer` (of `device`) a range of `buffer.size` addresses; returns its base (256-aligned, never 0). */
  register(buffer: WebGPUBuffer, device: WebGPUDevice): number;
  /** Ends the range at `base` (the buffer is not destroyed: its owner does that). */
  unregister(base: number): void;
  /** The buffer an address falls in, or undefined. */
  resolve(address: number): WebGPURegion | undefined;
  /** The number naming `device` in `device_id` (the same for the realm's life; from 0). */
  deviceId(device: WebGPUDevice): number;
  /** The device a `device_id` names, while it is alive. */
  device(id: number): WebGPUDevice | undefined;
  /** A `sync_event` handle (never 0) for a promise that settles when the data is ready. */
  addEvent(ready: Promise<unknown>): number;
  /** The promise of an event handle. */
  event(handle: number): Promise<unknown> | undefined;
  /** Forgets an event handle (its producer's release does this). */
  dropEvent(handle: number): void;
}

const REGISTRY = Symbol.for('arrow.webgpu');
/** The address space: [FIRST, LIMIT), 32-bit so that a wasm32 struct holds every address. */
const FIRST = 0x10000;
const LIMIT = 2 ** 32;
const ALIGN = 256;

interface Range0 {
  readonly base: number;
  readonly end: number;
  readonly buffer: WebGPUBuffer;
  readonly device: WebGPUDevice;
}

function createRegistry(): WebGPURegistry {
  // Live ranges sorted by base; a new range goes after the last, or in the first gap that fits.
  const ranges: Range0[] = [];
  const ids = new WeakMap<WebGPUDevice, number>();
  const devices: WeakRef<WebGPUDevice>[] = [];
  const events = new Map<number, Promise<unknown>>();
  let nextEvent = 1;
  const find = (address: number): number => {
    let lo = 0;
    let hi = ranges.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = ranges[mid]!;
      if (address < r.base) hi = mid - 1;
      else if (address >= r.end) lo = mid + 1;
      else return mid;
    }
    return -1;
  };
  const up = (x: number): number => Math.ceil(x / ALIGN) * ALIGN;
  return {
    version: 1,
    register(buffer, device) {
      // An empty buffer still takes one address, so that its base names it.
      const size = Math.max(buffer.size, 1);
      let at = -1;
      let base = ranges.length === 0 ? FIRST : up(ranges[ranges.length - 1]!.end);
      if (base + size <= LIMIT) at = ranges.length;
      else {
        base = FIRST;
        for (let i = 0; i < ranges.length; i++) {
          if (base + size <= ranges[i]!.base) {
            at = i;
            break;
          }
          base = up(ranges[i]!.end);
        }
      }
      if (at < 0) throw new ArrowDeviceError('nomem', '', `the realm's WebGPU address space (4 GiB of live buffers) has no room for ${size} bytes`);
      ranges.splice(at, 0, { base, end: base + size, buffer, device });
      return base;
    },
    unregister(base) {
      const i = find(base);
      if (i >= 0 && ranges[i]!.base === base) ranges.splice(i, 1);
    },
    resolve(address) {
      const i = find(address);
      if (i < 0) return undefined;
      const r = ranges[i]!;
      return { buffer: r.buffer, device: r.device, base: r.base, offset: address - r.base };
    },
    deviceId(device) {
      let id = ids.get(device);
      if (id === undefined) {
        id = devices.length;
        devices.push(new WeakRef(device));
        ids.set(device, id);
      }
      return id;
    },
    device(id) {
      return devices[id]?.deref();
    },
    addEvent(ready) {
      const h = nextEvent++;
      // A producer's failed event is the consumer's to see, not an unhandled rejection here.
      ready.catch(() => {});
      events.set(h, ready);
      return h;
    },
    event(handle) {
      return events.get(handle);
    },
    dropEvent(handle) {
      events.delete(handle);
    },
  };
}

/**
 * The realm's WebGPU registry (PROTOCOL.md): the one another library made,
 * or a new one. Throws `invalid` where the global holds something else.
 *
 * @example
 * const registry = webgpuRegistry();
 * const base = registry.register(gpuBuffer, gpuDevice);   // a producer's buffer, given addresses
 * registry.resolve(base + 512);                           // { buffer: gpuBuffer, offset: 512, ... }
 * registry.unregister(base);
 */
export function webgpuRegistry(): WebGPURegistry {
  const g = globalThis as { [REGISTRY]?: unknown };
  let r = g[REGISTRY];
  if (r === undefined) {
    r = createRegistry();
    Object.defineProperty(globalThis, REGISTRY, { value: r, writable: false, enumerable: false, configurable: false });
  }
  const reg = r as Partial<WebGPURegistry>;
  if (typeof r !== 'object' || r === null || reg.version !== 1 || typeof reg.resolve !== 'function') {
    throw invalid("globalThis[Symbol.for('arrow.webgpu')]", 'is not a version 1 WebGPU registry (PROTOCOL.md, "WebGPU device arrays")');
  }
  return r as WebGPURegistry;
}

/**
 * Where a WebGPU address points: the `GPUBuffer`, its device, and the byte
 * offset inside it; undefined for an address no live buffer of the realm has.
 *
 * @example
 * const dev = await importDeviceArrayAsync(ptr, schemaPtr);
 * const { buffer, offset } = webgpuBufferAt(dev.children[0].buffers[1].address)!;
 * pass.setBindGroup(0, gpuDevice.createBindGroup({ layout, entries: [{ binding: 0, resource: { buffer: buffer as GPUBuffer, offset } }] }));
 */
export function webgpuBufferAt(address: Ptr | number): WebGPURegion | undefined {
  const a = Number(address);
  if (!(a > 0) || a >= LIMIT) return undefined;
  return webgpuRegistry().resolve(a);
}

// --- export --------------------------------------------------------------------------------

/** What a WebGPU export needs besides the data. */
export interface WebGPUExportOptions {
  /** The device the buffers are made on. */
  readonly gpuDevice: WebGPUDevice;
  /** Usages added to `STORAGE | COPY_SRC | COPY_DST` (for example `VERTEX`). */
  readonly usage?: number;
  /** A label for the `GPUBuffer` (WebGPU debugging tools show it). */
  readonly label?: string;
}

/** Checks that `x` looks like a `GPUDevice` (a typed error, not a TypeError deep inside). */
export function checkGpuDevice(x: unknown, path: string): WebGPUDevice {
  const d = x as Partial<WebGPUDevice> | null | undefined;
  if (typeof d !== 'object' || d === null || typeof d.createBuffer !== 'function' || typeof d.createCommandEncoder !== 'function' || typeof d.queue !== 'object') {
    throw invalid(path, 'a WebGPU export needs a GPUDevice ({ deviceType: DeviceType.WEBGPU, gpuDevice })');
  }
  return d as WebGPUDevice;
}

/**
 * Uploads `view` (the whole tree) into one new `GPUBuffer` of `opts.gpuDevice`
 * and writes it as an `ArrowDeviceArray` at `into`. The event is a handle to
 * `queue.onSubmittedWorkDone()` after the upload; the release (the last of
 * the tree's structs) destroys the buffer and ends its range and the event.
 * On failure nothing is left allocated and `into` is as it was.
 */
export function writeWebGPUCopy(mem: Memory, view: ArrayView, into: Ptr, opts: WebGPUExportOptions): void {
  const device = checkGpuDevice(opts.gpuDevice, 'options.gpuDevice');
  const align = Math.max(ALIGN, device.limits?.minStorageBufferOffsetAlignment ?? ALIGN);
  const placed: [Uint8Array, number][] = [];
  let total = 0;
  const place = (b: Uint8Array): number => {
    // An empty buffer points at the start of the allocation: inside its own range, never past its end
    // (where the next registered buffer may begin).
    if (b.byteLength === 0) return 0;
    total = Math.ceil(total / align) * align;
    const at = total;
    placed.push([b, at]);
    total += b.byteLength;
    return at;
  };
  // The tree's shape with each buffer's offset in the one allocation (-1: NULL).
  interface Placed { v: ArrayView; at: number[]; children: Placed[]; dictionary: Placed | null }
  const plan = (v: ArrayView): Placed => ({
    v,
    at: v.buffers.map((b) => (b === null ? -1 : place(b))),
    children: v.children.map(plan),
    dictionary: v.dictionary ? plan(v.dictionary) : null,
  });
  const tree = plan(view);
  // mappedAtCreation needs a size that is a multiple of 4.
  const size = Math.max(4, Math.ceil(total / 4) * 4);
  const reg = webgpuRegistry();
  const buffer = device.createBuffer({
    size,
    usage: BufferUsage.STORAGE | BufferUsage.COPY_SRC | BufferUsage.COPY_DST | (opts.usage ?? 0),
    mappedAtCreation: true,
    label: opts.label ?? 'arrow-device export',
  });
  let base = 0;
  let event = 0;
  const shared: SharedResources = {
    refs: 0,
    dispose() {
      if (base !== 0) reg.unregister(base);
      if (event !== 0) reg.dropEvent(event);
      buffer.destroy();
    },
  };
  try {
    const bytes = new Uint8Array(buffer.getMappedRange());
    for (const [b, at] of placed) bytes.set(b, at);
    buffer.unmap();
    base = reg.register(buffer, device);
    event = reg.addEvent(device.queue.onSubmittedWorkDone());
    const raw = (p: Placed): RawNode => ({
      length: p.v.length,
      offset: p.v.offset,
      nullCount: p.v.nullCount,
      buffers: p.at.map((at) => (at < 0 ? 0n : BigInt(base + at))),
      children: p.children.map(raw),
      dictionary: p.dictionary ? raw(p.dictionary) : null,
    });
    writeRawTree(mem, raw(tree), into, shared);
  } catch (e) {
    if (shared.refs === 0) shared.dispose();
    throw e;
  }
  writeDeviceFields(mem, into, DeviceType.WEBGPU, reg.deviceId(device), BigInt(event));
}

// --- import: the backend -------------------------------------------------------------------

/**
 * Reads of WebGPU memory: the producer's event awaited, then every range
 * copied into one staging buffer per device with one command submission,
 * and one `mapAsync`. An address outside the realm's live buffers, or a
 * range past its buffer's end, is refused before anything is read.
 */
export const webgpuBackend: DeviceBackend = {
  name: 'webgpu',
  async: true,
  hostReadable: () => false,
  syncForHost() {
    throw unsupported('', 'WebGPU memory is read by the CPU only through a copy (toHostAsync)');
  },
  readBatch(ctx, ranges) {
    return readWebGPU(ctx, ranges);
  },
};

async function readWebGPU(ctx: DeviceContext, ranges: readonly ReadRange[]): Promise<void> {
  const reg = webgpuRegistry();
  // Every range resolved and checked before any GPU work.
  interface Copy { region: WebGPURegion; start: number; end: number; r: ReadRange }
  const byDevice = new Map<WebGPUDevice, Copy[]>();
  for (const r of ranges) {
    if (r.size === 0) continue;
    const a = Number(r.src);
    const region = a > 0 && a < LIMIT ? reg.resolve(a) : undefined;
    if (region === undefined) throw invalid('', `address 0x${a.toString(16)} is in no live GPUBuffer of this realm (PROTOCOL.md, "WebGPU device arrays")`);
    if (region.offset + r.size > region.buffer.size) {
      throw invalid('', `${r.size} bytes at offset ${region.offset} run past the end of their GPUBuffer (${region.buffer.size} bytes)`);
    }
    if ((region.buffer.usage & BufferUsage.COPY_SRC) === 0) {
      throw unsupported('', 'a GPUBuffer without COPY_SRC usage cannot be read by the host');
    }
    // copyBufferToBuffer moves whole 4-byte words, at offsets that are multiples of 4: the last bytes of a
    // buffer whose size is not a multiple of 4 cannot be copied out.
    const start = Math.floor(region.offset / 4) * 4;
    const end = Math.ceil((region.offset + r.size) / 4) * 4;
    if (end > region.buffer.size) {
      throw unsupported('', `the last ${region.buffer.size % 4} bytes of a GPUBuffer of ${region.buffer.size} bytes (not a multiple of 4) cannot be copied to the host`);
    }
    let list = byDevice.get(region.device);
    if (list === undefined) byDevice.set(region.device, (list = []));
    list.push({ region, start, end, r });
  }
  if (byDevice.size === 0) return;
  if (ctx.syncEvent !== 0n) {
    const ready = reg.event(Number(ctx.syncEvent));
    if (ready === undefined) throw invalid('', `sync_event ${ctx.syncEvent} is no event of this realm's WebGPU registry`);
    await ready;
  }
  await Promise.all(
    [...byDevice].map(async ([device, list]) => {
      let total = 0;
      const at: number[] = [];
      for (const c of list) {
        at.push(total);
        total += c.end - c.start;
      }
      const staging = device.createBuffer({ size: Math.max(4, total), usage: BufferUsage.MAP_READ | BufferUsage.COPY_DST, label: 'arrow-device read' });
      try {
        const enc = device.createCommandEncoder();
        list.forEach((c, i) => enc.copyBufferToBuffer(c.region.buffer, c.start, staging, at[i]!, c.end - c.start));
        device.queue.submit([enc.finish()]);
        await staging.mapAsync(MAP_READ_MODE);
        const bytes = new Uint8Array(staging.getMappedRange());
        list.forEach((c, i) => {
          const from = at[i]! + (c.region.offset - c.start);
          c.r.dst.set(bytes.subarray(from, from + c.r.size));
        });
        staging.unmap();
      } finally {
        staging.destroy();
      }
    }),
  );
}
