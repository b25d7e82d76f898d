/**
 * Copies into CUDA memory (copies to the host are the DeviceArray's own,
 * src/device/device-array.ts).
 *
 * - `writeCudaCopy`: any tree whose bytes CUDA can read (JS buffers,
 *   pinned or managed memory, device memory of any device) -> new CUDA
 *   memory of the requested kind, written as an `ArrowDeviceArray`. The
 *   whole tree goes into one allocation (buffers 64-byte aligned), freed
 *   when the last struct of the tree is released.
 */
import { DeviceType } from '../abi/constants.js';
import type { ArrayView } from '../array/view.js';
import { invalid, unsupported } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { cudaRuntime, type CudaMemoryKind } from './cuda.js';
import { writeDeviceFields, writeRawTree, type RawNode, type SharedResources } from './export.js';
import type { DeviceArrayNode, DeviceBuffer } from './device-array.js';

/** A host `ArrayView` as a tree of addresses (its JS buffers, which must stay reachable while they are copied). */
export function hostTree(mem: Memory, view: ArrayView): DeviceArrayNode {
  const buffers = view.buffers.map((b): DeviceBuffer => {
    if (b === null) return { address: 0n, size: 0 };
    if (b.byteLength === 0) return { address: 1n, size: 0 }; // present but empty: never read
    const address = mem.addressOf(b);
    if (address === undefined) throw unsupported('', `the ${mem.name} memory cannot point at JS buffers`);
    return { address, size: b.byteLength };
  });
  return {
    schema: view.schema,
    length: view.length,
    offset: view.offset,
    nullCount: view.nullCount,
    buffers,
    children: view.children.map((c) => hostTree(mem, c)),
    dictionary: view.dictionary ? hostTree(mem, view.dictionary) : null,
  };
}

/** Every buffer of the tree, depth first (children, then dictionary). */
function* allBuffers(node: DeviceArrayNode): Generator<DeviceBuffer> {
  yield* node.buffers;
  for (const c of node.children) yield* allBuffers(c);
  if (node.dictionary) yield* allBuffers(node.dictionary);
}

export function cudaMemoryKind(deviceType: number): CudaMemoryKind {
  switch (deviceType) {
    case DeviceType.CUDA: return 'device';
    case DeviceType.CUDA_HOST: return 'host';
    case DeviceType.CUDA_MANAGED: return 'managed';
    default: throw unsupported('', `device type ${deviceType} is not a CUDA memory kind`);
  }
}

export interface CudaCopyOptions {
  /** ARROW_DEVICE_CUDA, _CUDA_HOST or _CUDA_MANAGED. */
  readonly deviceType: number;
  readonly deviceId: number;
  /** A `cudaStream_t` to copy on; the library's own stream for the device when absent. */
  readonly stream?: Ptr;
  /**
   * Wait for the copies before returning and export `sync_event` NULL.
   * Otherwise an event is recorded on the stream after the copies and
   * exported as `sync_event` (a `cudaEvent_t*`), and the call returns at once.
   * Only safe without waiting when the source cannot go away meanwhile
   * (pageable JS memory is staged by `cudaMemcpyAsync` before it returns).
   */
  readonly synchronize: boolean;
  /** A `cudaEvent_t` (the handle, not a pointer to it) the copies must wait for: the source's. */
  readonly waitEvent?: Ptr;
}

/**
 * Copies `src` (sizes known; addresses CUDA can read) into new CUDA memory
 * and writes it as an `ArrowDeviceArray` at `into`. On failure everything
 * allocated is freed and `into` is left as it was.
 */
export function writeCudaCopy(mem: Memory, src: DeviceArrayNode, into: Ptr, opts: CudaCopyOptions): void {
  if (mem.name !== 'native') throw unsupported('', `CUDA memory needs the native memory backend, not "${mem.name}"`);
  const kind = cudaMemoryKind(opts.deviceType);
  const rt = cudaRuntime();
  // Place every buffer of the tree in one allocation.
  const at = new Map<DeviceBuffer, number>();
  let total = 0;
  for (const b of allBuffers(src)) {
    if (b.address === 0n) continue;
    if (b.size === undefined) throw invalid('', 'a buffer size is unknown: resolve the sizes first');
    total = Math.ceil(total / 64) * 64;
    at.set(b, total);
    total += b.size;
  }
  const dev = opts.deviceId >= 0 ? opts.deviceId : rt.getDevice();
  rt.onDevice(dev, () => {
    const base = rt.malloc(Math.max(total, 64), kind);
    let event = 0n;
    let holder = 0n;
    const shared: SharedResources = {
      refs: 0,
      dispose() {
        // Runs in a release callback: free everything, report the first failure.
        let err: unknown;
        const attempt = (f: () => void): void => {
          try {
            f();
          } catch (e) {
            err ??= e;
          }
        };
        attempt(() => rt.onDevice(dev, () => rt.free(base, kind)));
        if (event !== 0n) attempt(() => rt.eventDestroy(event));
        if (holder !== 0n) attempt(() => mem.free(holder));
        if (err) throw err;
      },
    };
    try {
      const stream = opts.stream ?? rt.internalStream(dev);
      if (opts.waitEvent !== undefined && opts.waitEvent !== 0n) rt.streamWaitEvent(stream, opts.waitEvent);
      for (const [b, off] of at) if (b.size! > 0) rt.memcpyAsync(base + BigInt(off), b.address, b.size!, stream);
      if (!opts.synchronize) {
        event = rt.eventCreate();
        rt.eventRecord(event, stream);
        // sync_event is a cudaEvent_t*: the handle lives in memory the release frees.
        holder = mem.alloc(8);
        mem.writePtr(holder, event);
      } else {
        rt.streamSynchronize(stream);
      }
      const raw = (n: DeviceArrayNode): RawNode => ({
        length: n.length,
        offset: n.offset,
        nullCount: n.nullCount,
        buffers: n.buffers.map((b) => (b.address === 0n ? 0n : base + BigInt(at.get(b)!))),
        children: n.children.map(raw),
        dictionary: n.dictionary ? raw(n.dictionary) : null,
      });
      writeRawTree(mem, raw(src), into, shared);
    } catch (e) {
      if (shared.refs === 0) {
        try {
          shared.dispose();
        } catch {
          // the first error is the one to report
        }
      }
      throw e;
    }
    writeDeviceFields(mem, into, opts.deviceType, opts.deviceId, holder);
  });
}
