/**
 * `DeviceArray`: an imported `ArrowDeviceArray` whose bytes stay where the
 * producer put them. It is what an import of device memory the CPU cannot
 * read returns (and what `importDeviceArray` returns for any device).
 *
 * Its tree was read by the one reader (src/array/read.ts) into a record of
 * addresses and sizes; the reads of device values its sizes and checks need
 * were done at import, in one batch, at `default` and `full` (at `minimal`
 * they wait for `resolveBufferSizes`). It holds no views of the producer's
 * memory, only addresses, so an explicit `release()` is always safe; the
 * one owner of every import (src/array/owner.ts) releases one that was
 * dropped without it. Exactly one of `release()`, `exportTo()` or that
 * collection ends its life.
 *
 * Target-neutral: its arrow-js host copies (`toHost`, `toHostRecordBatch` and
 * their `Async` forms) are built through src/array/arrowjs-builds.ts, so a
 * flechette program reads device arrays without loading apache-arrow (and
 * copies them with `toHostView`).
 */
import type { Data, RecordBatch } from 'apache-arrow';
import { deviceTypeName, DeviceType } from '../abi/constants.js';
import {
  ArrowSymbols, type ArrowArrayExportable, type ArrowDeviceArrayExportable, type ArrowDeviceExportOptions, type ArrowSchemaExportable,
} from '../abi/protocol.js';
import { checkDeviceExportOptions, checkRequestedSchema, moveToHandle, schemaHandle } from '../array/exchange.js';
import { ArrayExportHandles, type ExportHandle } from '../memory/handle.js';
import { arrowJsBuilds } from '../array/arrowjs-builds.js';
import { writeArrayView } from '../array/export.js';
import type { ArrayView } from '../array/view.js';
import { viewOf } from '../array/view.js';
import {
  checkBufferSize, checkFull, checkLevelAsync, FULL, readArray, readTree, resolveDeferred, resolveDeferredAsync, validationLevel, type DeviceReader, type ValidationLevel,
} from '../array/read.js';
import { BUFFERS, childrenAt, forEachNode, ImportRead, LENGTH, N_BUFFERS, NULL_COUNT, OFFSET, pathAt, recordCopy, UNKNOWN } from '../array/record.js';
import { planOfNode, type Plan, type PlanNode } from '../array/plan.js';
import { allocBytes, ArrowDeviceError, invalid, prefixPath, unsupported } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { ImportOwner } from '../array/owner.js';
import type { ToArrowOptions } from '../schema/arrowjs.js';
import type { SchemaNode } from '../schema/node.js';
import { atDeviceArray, backendFor, requireBackend, type DeviceBackend, type DeviceContext, type ReadRange } from './backend.js';
import { writeCudaCopy } from './copy.js';
import { writeDeviceFields } from './export.js';
import { webgpuBufferAt, type WebGPURegion } from './webgpu.js';

/** What identifies a device: its type (`DeviceType.CUDA`) and id (-1 where the type has no ids). */
export interface DeviceSpec {
  /** The `ArrowDeviceType`: `DeviceType.CUDA`, ... */
  readonly deviceType: number;
  /** The device number; -1 for the CPU, 0 by default for CUDA kinds. */
  readonly deviceId?: number;
}

/** Options of the copies a `DeviceArray` makes (`toHost`, `copyTo`, `resolveBufferSizes`). */
export interface DeviceCopyOptions {
  /**
   * CUDA: a `cudaStream_t` to run the copies on. It is made to wait for the
   * producer's event (`cudaStreamWaitEvent`), then synchronised once. Without
   * it the library's own stream for the device is used the same way.
   */
  readonly stream?: Ptr;
}

/** Options of the host copies of a `DeviceArray` (`toHost`, `toHostRecordBatch`, `toHostView` and their `Async` forms). */
export interface ToHostOptions extends DeviceCopyOptions, ToArrowOptions {
  /**
   * `full` runs the `full` checks on the host copy (every offset, type id,
   * view), for an array imported at a lower level. The device tree itself
   * was checked at the level of its import.
   */
  readonly validate?: ValidationLevel;
}

/** One buffer of a device array. */
export interface DeviceBuffer {
  /** The address on the device; `0n` for a NULL buffer. */
  readonly address: Ptr;
  /**
   * Bytes from `address` to the end of what the array uses (its `offset`
   * included); `undefined` while it depends on values on the device that
   * have not been read yet (see `DeviceArray.resolveBufferSizes`).
   */
  readonly size: number | undefined;
  /**
   * WebGPU arrays: the `GPUBuffer` the address is in and the byte offset
   * inside it (`webgpuBufferAt`); undefined where no live buffer of the
   * realm has the address (a NULL or zero-length buffer may have none).
   */
  readonly webgpu?: WebGPURegion;
}

/** A node of a device array: what its structs say, with buffers as device addresses. */
export interface DeviceArrayNode {
  /** The node's type (every type of the spec). */
  readonly schema: SchemaNode;
  /** The number of logical elements (`ArrowArray.length`). */
  readonly length: number;
  /** The logical offset into every buffer of this node, in elements. */
  readonly offset: number;
  /** -1 when the producer did not compute it. */
  readonly nullCount: number;
  /** The buffers in C order, as device addresses and sizes. */
  readonly buffers: readonly DeviceBuffer[];
  /** The child arrays, in the order of `schema.children`. */
  readonly children: readonly DeviceArrayNode[];
  /** The dictionary of a dictionary-encoded array; null otherwise. */
  readonly dictionary: DeviceArrayNode | null;
}

/** A node of a device array's record (see src/array/record.ts). */
class DeviceNode implements DeviceArrayNode {
  #buffers: DeviceBuffer[] | null = null;
  #children: DeviceNode[] | null = null;
  #dictionary: DeviceNode | null | undefined = undefined;

  constructor(
    private readonly read: ImportRead,
    private readonly pn: PlanNode,
    private readonly at: number,
    /** Whether the addresses are WebGPU's (each buffer then says which GPUBuffer it is in). */
    private readonly gpu: boolean,
  ) {}

  get schema(): SchemaNode { return this.pn.schema; }
  get length(): number { return this.read.nums[this.at + LENGTH]!; }
  get offset(): number { return this.read.nums[this.at + OFFSET]!; }
  get nullCount(): number { return this.read.nums[this.at + NULL_COUNT]!; }

  /** The buffers' addresses and sizes (the same objects until sizes still unknown are resolved). */
  get buffers(): readonly DeviceBuffer[] {
    if (this.#buffers === null || (this.read.deferred === null && this.#buffers.some((b) => b.size === undefined))) {
      const nums = this.read.nums;
      const n = nums[this.at + N_BUFFERS]!;
      const out: DeviceBuffer[] = [];
      for (let k = 0; k < n; k++) {
        const at = this.at + BUFFERS + 2 * k;
        const size = nums[at + 1]!;
        const address = this.read.exact?.get(at) ?? BigInt(nums[at]!);
        const buffer: DeviceBuffer = { address, size: size === UNKNOWN ? undefined : size };
        out.push(this.gpu && address !== 0n ? { ...buffer, webgpu: webgpuBufferAt(address) } : buffer);
      }
      this.#buffers = out;
    }
    return this.#buffers;
  }

  get children(): readonly DeviceNode[] {
    if (this.#children === null) {
      const at = childrenAt(this.read, this.at);
      this.#children = this.pn.children.map((c, k) => new DeviceNode(this.read, c, at[k]!, this.gpu));
    }
    return this.#children;
  }

  // The same node at every read, as `children` (a copy places buffers by identity: copy.ts).
  get dictionary(): DeviceNode | null {
    if (this.#dictionary === undefined) {
      if (this.pn.dictionary === null) this.#dictionary = null;
      else this.#dictionary = new DeviceNode(this.read, this.pn.dictionary, childrenAt(this.read, this.at)[this.pn.children.length]!, this.gpu);
    }
    return this.#dictionary;
  }
}

/**
 * How the reader gets at the bytes of a device type's memory: through its
 * backend, in batches ordered after the producer's event; for a type with
 * no backend, not at all (the reader then refuses what needs them).
 */
export function deviceReader(ctx: DeviceContext, backend: DeviceBackend | undefined): DeviceReader {
  const name = deviceTypeName(ctx.deviceType) ?? String(ctx.deviceType);
  return {
    unreadable: backend === undefined ? `the bytes of ${name} memory (device type ${ctx.deviceType}) cannot be read by this library` : null,
    async: backend?.async === true,
    readBatch(ranges) {
      const work: ReadRange[] = ranges.map((r) => ({ src: BigInt(r.src), size: r.size, dst: r.dst }));
      // A backend that reads device addresses as host addresses: refuse a bad one with a typed error first.
      if (backend!.hostReadable(ctx.deviceType)) for (const r of work) if (r.size > 0) ctx.mem.checkAddress(r.src, r.size);
      return backend!.readBatch(ctx, work, true);
    },
  };
}

const PENDING = Symbol('pending device reads');

let ownerAccess: (dev: DeviceArray) => ImportOwner;

/** The owner of a `DeviceArray`'s import (internal, not on the class: src/share shares it between threads). */
export function deviceArrayOwner(dev: DeviceArray): ImportOwner {
  return ownerAccess(dev);
}

/**
 * An imported `ArrowDeviceArray` whose memory the CPU may not read in place (CUDA device memory, a WebGPU
 * buffer, an opaque device): what its structs say, each buffer as a device address and size, and the
 * ways to move the data on. It owns the producer's array: `release()` (or `using`, or the garbage
 * collector as a last resort) calls the producer's release once; `exportTo` hands it on unchanged.
 *
 * @example
 * using dev = importDeviceArray(deviceArrayPtr, schemaPtr);  // a CUDA batch
 * console.log(dev.deviceTypeName, dev.deviceId, dev.length, dev.buffers[1]?.address);
 * const batch = dev.toHostRecordBatch();                     // a host copy, after the producer's event
 */
export class DeviceArray implements DeviceArrayNode, ArrowSchemaExportable, ArrowArrayExportable, ArrowDeviceArrayExportable {
  readonly #owner: ImportOwner;
  readonly #read: ImportRead;
  readonly #root: DeviceNode;
  /** `ArrowDeviceType`: `DeviceType.CUDA`, ... */
  readonly deviceType: number;
  /** The device number; -1 where the type has none. */
  readonly deviceId: number;
  /**
   * The producer's `sync_event` (a pointer to the device's event type, such as
   * `cudaEvent_t*`); `0n` when the data is ready. Valid until release.
   */
  readonly syncEvent: Ptr;

  /** @internal The reader of the level's device reads still to do (`adoptDeviceArray`'s `later`). */
  [PENDING]: DeviceReader | null = null;

  /**
   * @internal Runs the device reads of the import's level left for later
   * (asynchronous devices, `importDeviceArrayAsync`); releases the array when they fail.
   */
  async checkLevel(): Promise<void> {
    const device = this[PENDING];
    if (device === null) return;
    this[PENDING] = null;
    try {
      await checkLevelAsync(this.#read, device);
    } catch (e) {
      this.release();
      throw e;
    }
  }

  /** @internal Use `importDeviceArray`. */
  constructor(owner: ImportOwner, read: ImportRead, deviceType: number, deviceId: number, syncEvent: Ptr) {
    this.#owner = owner;
    this.#read = read;
    this.#root = new DeviceNode(read, read.plan.root, 0, deviceType === DeviceType.WEBGPU);
    this.deviceType = deviceType;
    this.deviceId = deviceId;
    this.syncEvent = syncEvent;
    owner.hold(this);
    owner.done();
  }

  /** The array's type (every type of the spec). */
  get schema(): SchemaNode { return this.#root.schema; }
  /** The number of logical elements. */
  get length(): number { return this.#root.length; }
  /** The logical offset into every buffer of the root, in elements. */
  get offset(): number { return this.#root.offset; }
  /** -1 when the producer did not compute it. */
  get nullCount(): number { return this.#root.nullCount; }
  /** Buffer addresses and sizes on the device (see `resolveBufferSizes` for sizes still unknown). */
  get buffers(): readonly DeviceBuffer[] { return this.#root.buffers; }
  /** The child arrays, as device nodes. */
  get children(): readonly DeviceArrayNode[] { return this.#root.children; }
  /** The dictionary of a dictionary-encoded array; null otherwise. */
  get dictionary(): DeviceArrayNode | null { return this.#root.dictionary; }

  /** "CUDA", "OPENCL", ... */
  get deviceTypeName(): string {
    return deviceTypeName(this.deviceType) ?? `UNKNOWN(${this.deviceType})`;
  }

  static {
    ownerAccess = (dev) => dev.#owner;
  }

  /** Whether `release()` or `exportTo()` ended this handle. */
  get released(): boolean {
    return this.#owner.isReleased;
  }

  /** Whether the CPU can read the bytes in place (CPU, CUDA_HOST, CUDA_MANAGED). */
  get hostReadable(): boolean {
    return backendFor(this.deviceType)?.hostReadable(this.deviceType) ?? false;
  }

  /** Whether every buffer's size is known (no device read pending). */
  get sizesKnown(): boolean {
    return this.#read.deferred === null;
  }

  private live(what: string): ImportOwner {
    if (this.#owner.isReleased) {
      throw new ArrowDeviceError('released', 'device_array', `${what} of a released (or moved) DeviceArray: ${this.#owner.releasedBecause}`);
    }
    return this.#owner;
  }

  private context(opts: DeviceCopyOptions): DeviceContext {
    return { mem: this.#owner.mem, deviceType: this.deviceType, deviceId: this.deviceId, syncEvent: this.syncEvent, stream: opts.stream };
  }

  /**
   * Reads what the sizes of variable-length buffers depend on (the last
   * offset of every binary/utf8 array and the variadic sizes of view types,
   * in the whole tree) with one batched device read. Only an import at
   * `minimal` leaves any to read (the other levels read and check them at
   * import). Throws `unsupported` for a device type whose bytes cannot be read.
   *
   * @example
   * const dev = importDeviceArray(ptr, schema, { validate: 'minimal' });
   * dev.resolveBufferSizes();
   * console.log(dev.children[1].buffers[2].size); // bytes of the utf8 data
   */
  resolveBufferSizes(opts: DeviceCopyOptions = {}): this {
    this.live('resolveBufferSizes');
    if (this.#read.deferred === null) return this;
    const backend = requireBackend(this.deviceType, this.deviceTypeName, 'device_array');
    resolveDeferred(this.#read, deviceReader(this.context(opts), backend));
    return this;
  }

  /**
   * The same, for a device whose reads complete later (WebGPU) or any other:
   * one batched read of the values the sizes depend on, awaited.
   *
   * @example
   * const dev = importDeviceArray(ptr, schema, { validate: 'minimal' }); // WebGPU
   * await dev.resolveBufferSizesAsync();
   */
  async resolveBufferSizesAsync(opts: DeviceCopyOptions = {}): Promise<this> {
    this.live('resolveBufferSizesAsync');
    if (this.#read.deferred === null) return this;
    const backend = requireBackend(this.deviceType, this.deviceTypeName, 'device_array');
    await resolveDeferredAsync(this.#read, deviceReader(this.context(opts), backend));
    return this;
  }

  /**
   * A record of the whole tree copied into JS memory: one batched read of
   * the sizes it still needs, then one batch of buffer copies. A buffer JS
   * cannot hold, or (read as host memory) at a bad address, is refused with
   * its place before anything is copied. The DeviceArray stays live.
   */
  #copyToHost(opts: ToHostOptions): ImportRead {
    this.live('toHostView');
    const backend = requireBackend(this.deviceType, this.deviceTypeName, 'device_array');
    if (backend.async === true) {
      throw unsupported('device_array', `${this.deviceTypeName} memory is read asynchronously: use toHostAsync, toHostRecordBatchAsync or toHostViewAsync`);
    }
    this.resolveBufferSizes(opts);
    const { copy, ranges, ctx } = this.#hostCopyPlan(opts, backend);
    try {
      backend.readBatch(ctx, ranges, false);
    } catch (e) {
      throw atDeviceArray(e);
    }
    return this.#checkCopy(copy, opts);
  }

  /** A host copy, with the `full` checks its options ask for and its import did not run. */
  #checkCopy(copy: ImportRead, opts: ToHostOptions): ImportRead {
    if (validationLevel(opts.validate) >= FULL && this.#read.level < FULL) checkFull(copy, null);
    return copy;
  }

  /** `#copyToHost` for any device, awaiting its reads (and the producer's event). */
  async #copyToHostAsync(opts: ToHostOptions): Promise<ImportRead> {
    this.live('toHostViewAsync');
    const backend = requireBackend(this.deviceType, this.deviceTypeName, 'device_array');
    await this.resolveBufferSizesAsync(opts);
    const { copy, ranges, ctx } = this.#hostCopyPlan(opts, backend);
    try {
      await backend.readBatch(ctx, ranges, false);
    } catch (e) {
      throw atDeviceArray(e);
    }
    // The array may have been released while its bytes were read: they are copies, but the handle said so first.
    this.live('toHostViewAsync');
    return this.#checkCopy(copy, opts);
  }

  /** The host record of a copy (its buffers allocated, each checked) and the reads that fill it. */
  #hostCopyPlan(opts: ToHostOptions, backend: DeviceBackend): { copy: ImportRead; ranges: ReadRange[]; ctx: DeviceContext } {
    const read = this.#read;
    const nums = read.nums;
    const copy = recordCopy(read);
    const views = (copy.views = new Map<number, Uint8Array>());
    const ranges: ReadRange[] = [];
    const ctx = this.context(opts);
    // Each buffer's place, for errors (made only then).
    const place = (p: number, k: number): string => `${pathAt(read, p)}.buffers[${k}]`;
    const each = (fn: (p: number, k: number, at: number) => void): void =>
      forEachNode(read, (_, p) => {
        const nb = nums[p + N_BUFFERS]!;
        for (let k = 0; k < nb; k++) fn(p, k, p + BUFFERS + 2 * k);
      });
    each((p, k, at) => {
      if (nums[at] === 0) return;
      try {
        checkBufferSize(nums[at + 1]!, '');
        if (backend.hostReadable(this.deviceType) && nums[at + 1]! > 0) ctx.mem.checkAddress(read.exact?.get(at) ?? BigInt(nums[at]!), nums[at + 1]!);
      } catch (e) {
        throw prefixPath(e, place(p, k));
      }
    });
    each((p, k, at) => {
      if (nums[at] === 0) return;
      const dst = allocBytes(nums[at + 1]!, place(p, k));
      views.set(at, dst);
      if (dst.byteLength > 0) ranges.push({ src: read.exact?.get(at) ?? BigInt(nums[at]!), size: dst.byteLength, dst });
    });
    return { copy, ranges, ctx };
  }

  /**
   * Copies the whole tree (children, dictionaries, variadic buffers) into JS
   * memory as an `ArrayView`. The DeviceArray stays live.
   */
  toHostView(opts: ToHostOptions = {}): ArrayView {
    const copy = this.#copyToHost(opts);
    return viewOf(copy, copy.plan.root, 0);
  }

  /**
   * Copies the array to the host as arrow-js `Data`.
   *
   * @example
   * const dev = importDeviceArray(ptr, schemaPtr);   // CUDA memory
   * const data = dev.toHost();                      // waits on the event, copies
   * dev.release();
   */
  toHost(opts: ToHostOptions = {}): Data {
    const { buildData } = arrowJsBuilds('device_array');
    const copy = this.#copyToHost(opts);
    return buildData(retarget(copy, planOfNode(this.schema, opts)));
  }

  /**
   * `toHostView` for every device, WebGPU included (whose reads are
   * `mapAsync`): the producer's event awaited, one batched read of the
   * sizes still unknown, one of the buffers.
   */
  async toHostViewAsync(opts: ToHostOptions = {}): Promise<ArrayView> {
    const copy = await this.#copyToHostAsync(opts);
    return viewOf(copy, copy.plan.root, 0);
  }

  /**
   * `toHost` for every device, WebGPU included.
   *
   * @example
   * const dev = await importDeviceArrayAsync(ptr, schemaPtr); // WebGPU memory
   * const data = await dev.toHostAsync();
   * dev.release();
   */
  async toHostAsync(opts: ToHostOptions = {}): Promise<Data> {
    const { buildData } = arrowJsBuilds('device_array');
    const copy = await this.#copyToHostAsync(opts);
    return buildData(retarget(copy, planOfNode(this.schema, opts)));
  }

  /** `toHostRecordBatch` for every device, WebGPU included. */
  async toHostRecordBatchAsync(opts: ToHostOptions = {}): Promise<RecordBatch> {
    const { buildBatch } = arrowJsBuilds('device_array');
    if (this.schema.type.id !== 'struct') throw invalid('schema.format', `a record batch needs a struct ("+s"), got "${this.schema.format}"`);
    const plan = planOfNode(this.schema, opts);
    plan.batch();
    return buildBatch(retarget(await this.#copyToHostAsync(opts), plan));
  }

  /** Copies a struct array to the host as an arrow-js `RecordBatch`. */
  toHostRecordBatch(opts: ToHostOptions = {}): RecordBatch {
    const { buildBatch } = arrowJsBuilds('device_array');
    if (this.schema.type.id !== 'struct') throw invalid('schema.format', `a record batch needs a struct ("+s"), got "${this.schema.format}"`);
    const plan = planOfNode(this.schema, opts);
    plan.batch();
    // A host copy: nothing to release (owned by no import), but releasable like every imported batch.
    return buildBatch(retarget(this.#copyToHost(opts), plan));
  }

  /**
   * Copies the array to another device (or the host, `DeviceType.CPU`) and
   * returns the copy; this one stays live. Supported: CPU, CUDA, CUDA_HOST
   * and CUDA_MANAGED in any direction. A copy to CUDA memory waits for this
   * array's event on the stream it copies on and is complete when this
   * returns (the copy's `syncEvent` is NULL), so this array may be released at once.
   */
  copyTo(target: DeviceSpec, opts: DeviceCopyOptions = {}): DeviceArray {
    const s = this.live('copyTo');
    const mem = s.mem;
    const tmp = mem.alloc(mem.layouts.ArrowDeviceArray.size);
    try {
      if (target.deviceType === DeviceType.CPU) {
        writeArrayView(mem, this.toHostView(opts), tmp);
        writeDeviceFields(mem, tmp, DeviceType.CPU, target.deviceId ?? -1, 0n);
      } else if (target.deviceType === DeviceType.CUDA || target.deviceType === DeviceType.CUDA_HOST || target.deviceType === DeviceType.CUDA_MANAGED) {
        const backend = requireBackend(this.deviceType, this.deviceTypeName, 'device_array');
        if (backend.name !== 'cpu' && backend.name !== 'cuda') {
          throw unsupported('device_array', `no copy from ${this.deviceTypeName} to CUDA memory`);
        }
        this.resolveBufferSizes(opts);
        let waitEvent: Ptr | undefined;
        if (this.syncEvent !== 0n) waitEvent = mem.readPtr(this.syncEvent);
        // Synchronised before returning: the copy must be done reading this array's memory
        // before this array may be released.
        writeCudaCopy(mem, this.#root, tmp, {
          deviceType: target.deviceType,
          deviceId: target.deviceId ?? 0,
          waitEvent,
          stream: opts.stream,
          synchronize: true,
        });
      } else {
        const name = deviceTypeName(target.deviceType) ?? String(target.deviceType);
        throw unsupported('target.deviceType', `copies to ${name} memory are not supported`);
      }
      return adoptDeviceArray(mem, tmp, planOfNode(this.schema), 'device_array', 1);
    } finally {
      mem.free(tmp);
    }
  }

  /**
   * Moves the struct, unchanged, into `into` (an `ArrowDeviceArray` the next
   * consumer allocated): a bitwise copy, after which this handle is released
   * without calling the producer's release; the consumer now owns it, and
   * must wait on `syncEvent` itself.
   */
  exportTo(into: Ptr): void {
    const s = this.live('exportTo');
    if (into === 0n) throw invalid('into', 'NULL pointer');
    s.moveTo(into);
  }

  /** Calls the producer's release (once; later calls do nothing). */
  release(): void {
    this.#owner.release();
  }

  /** @internal A host copy of `dev`'s tree, read through `plan` (the plan of its import, with the arrow-js types asked for). */
  static hostCopy(dev: DeviceArray, opts: ToHostOptions, plan: Plan): ImportRead {
    return retarget(dev.#copyToHost(opts), plan);
  }

  /** @internal `hostCopy` for every device, awaiting its reads, read through the plan of `dev`'s import (src/device/import.ts `settleDeviceWith`). */
  static hostCopyAsync(dev: DeviceArray, opts: ToHostOptions): Promise<ImportRead> {
    return dev.#copyToHostAsync(opts);
  }

  // --- the exchange protocol (PROTOCOL.md) ------------------------------------------------

  /** Exchange protocol: the schema as an owned `ArrowSchema` handle (the DeviceArray is unchanged). */
  [ArrowSymbols.schema](): ExportHandle {
    return schemaHandle(this.#owner.mem, this.schema);
  }

  /**
   * Exchange protocol: hands the array on, as it is (device, event and all),
   * in an owned `ArrowDeviceArray` handle: the struct is moved, as by
   * `exportTo`, and this handle is released whether or not the consumer
   * takes it. No option is known (`options` with any value set is refused).
   */
  [ArrowSymbols.deviceArray](requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ArrayExportHandles {
    const path = 'device_array[arrow.c_device_array]';
    checkDeviceExportOptions(options, path);
    return this.#handOn(requestedSchema, 'ArrowDeviceArray', path);
  }

  /**
   * Exchange protocol: hands the array on as a plain `ArrowArray`, for data
   * the CPU reads in place (CPU, and CUDA_HOST/CUDA_MANAGED after waiting on
   * the event); other devices throw `unsupported` (PyCapsuleInterface.rst,
   * "Device Support": the CPU methods carry CPU memory only). Moves the
   * struct like `[ArrowSymbols.deviceArray]`.
   */
  [ArrowSymbols.array](requestedSchema?: ArrowSchemaExportable | null): ArrayExportHandles {
    const path = 'device_array[arrow.c_array]';
    this.live('a hand-on');
    if (!this.hostReadable) {
      throw unsupported(path, `${this.deviceTypeName} memory the CPU cannot read: hand it on with arrow.c_device_array, or copy it (toHostRecordBatch(), or toHostRecordBatchAsync() for memory read asynchronously)`);
    }
    return this.#handOn(requestedSchema, 'ArrowArray', path, () => backendFor(this.deviceType)!.syncForHost(this.context({})));
  }

  #handOn(requested: unknown, want: 'ArrowArray' | 'ArrowDeviceArray', path: string, sync?: () => void): ArrayExportHandles {
    const s = this.live('a hand-on');
    checkRequestedSchema(requested, this.schema, path);
    sync?.();
    const schema = schemaHandle(s.mem, this.schema);
    try {
      return new ArrayExportHandles(schema, moveToHandle(s, want));
    } catch (e) {
      schema[Symbol.dispose]();
      throw e;
    }
  }

  /** `release()`, for `using`. */
  [Symbol.dispose](): void {
    this.#owner.release();
  }
}

/** `copy` (a host copy's record) read by `plan` (the same schema, with the arrow-js form asked for). */
function retarget(copy: ImportRead, plan: Plan): ImportRead {
  if (copy.plan === plan) return copy;
  const r = recordCopy(copy, plan);
  r.views = copy.views;
  return r;
}

/**
 * Moves the `ArrowDeviceArray` at `ptr` (fields already validated) into a
 * new `DeviceArray`, reading its tree through `plan` at `level`; the
 * caller's struct is marked released. On failure the producer's release
 * has been called.
 */
export function adoptDeviceArray(mem: Memory, ptr: Ptr, plan: Plan, path: string, level: number, later = false): DeviceArray {
  return deviceArrayOf(ImportOwner.move(mem, ptr, 'ArrowDeviceArray'), plan, path, level, later);
}

/**
 * A `DeviceArray` over the `ArrowDeviceArray` `owner` holds (moved in by
 * `adoptDeviceArray`, or shared from another thread: src/share), its tree
 * read through `plan` at `level`. On failure the owner has released.
 */
export function deviceArrayOf(owner: ImportOwner, plan: Plan, path: string, level: number, later = false): DeviceArray {
  const mem = owner.mem;
  const L = mem.layouts.ArrowDeviceArray;
  owner.schema = plan.node;
  const own = owner.ptr;
  try {
    const o = L.offsets;
    const deviceType = mem.readI32(own + BigInt(o.device_type!));
    const deviceId = Number(mem.readI64(own + BigInt(o.device_id!)));
    const syncEvent = mem.readPtr(own + BigInt(o.sync_event!));
    const read = new ImportRead(plan, owner, mem, `${path}.array`, level, false);
    read.viewed = false;
    // CPU memory is read in place; every other device through its backend, after its event.
    const device = deviceType === DeviceType.CPU ? null : deviceReader({ mem, deviceType, deviceId, syncEvent }, backendFor(deviceType));
    // `later`: a device that reads asynchronously has its level's reads done by `checkLevel`, awaited.
    const pending = later && device !== null && device.async === true;
    if (pending) readTree(read, owner.arrayAddr, device);
    else readArray(read, owner.arrayAddr, device);
    const dev = new DeviceArray(owner, read, deviceType, deviceId, syncEvent);
    if (pending) dev[PENDING] = device;
    return dev;
  } catch (e) {
    owner.release('failed');
    throw e;
  }
}
