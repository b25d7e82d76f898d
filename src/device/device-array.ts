/**
 * `DeviceArray`: an imported `ArrowDeviceArray` whose bytes stay where the
 * producer put them. It is what an import of device memory the CPU cannot
 * read returns (and what `importDeviceArray` returns for any device).
 *
 * It holds no views of the producer's memory, only addresses, so an explicit
 * `release()` is always safe; a FinalizationRegistry releases one that was
 * dropped without it (the safety net, DESIGN.md "Ownership"). Exactly one of
 * `release()`, `exportTo()` or that collection ends its life.
 */
import { RecordBatch, type Data } from 'apache-arrow';
import { deviceTypeName, DeviceType } from '../abi/constants.js';
import {
  ArrowSymbols, type ArrowArrayExportable, type ArrowDeviceArrayExportable, type ArrowDeviceExportOptions, type ArrowSchemaExportable,
} from '../abi/protocol.js';
import { checkDeviceExportOptions, checkRequestedSchema, schemaHandle } from '../array/exchange.js';
import { moveToHandle } from '../array/handoff.js';
import { ArrayExportHandles, type ExportHandle } from '../memory/handle.js';
import { exportArray, freeArrowArray, importArrayView } from '../array/api.js';
import { viewToBatch, viewToData } from '../array/arrowjs.js';
import { planOfNode } from '../array/importer.js';
import { asImportedBatch } from '../array/imported.js';
import { writeArrayView } from '../array/export.js';
import type { ArrayView } from '../array/view.js';
import type { ValidationLevel } from '../array/import.js';
import { ArrowDeviceError, invalid, unsupported } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { ImportOwner } from '../array/owner.js';
import { nodeToType, type ToArrowOptions } from '../schema/arrowjs.js';
import type { SchemaNode } from '../schema/node.js';
import { backendFor, requireBackend, type DeviceContext } from './backend.js';
import { copyTreeToHost, writeCudaCopy } from './copy.js';
import { writeDeviceFields } from './export.js';
import { readDeviceTree, readFetches, sizesKnown, type DeviceArrayNode, type DeviceBuffer, type DeviceNode, type Fetch } from './tree.js';

/** What identifies a device: its type (`DeviceType.CUDA`) and id (-1 where the type has no ids). */
export interface DeviceSpec {
  readonly deviceType: number;
  readonly deviceId?: number;
}

export interface DeviceCopyOptions {
  /**
   * CUDA: a `cudaStream_t` to run the copies on. It is made to wait for the
   * producer's event (`cudaStreamWaitEvent`), then synchronised once. Without
   * it the library's own stream for the device is used the same way.
   */
  readonly stream?: Ptr;
}

export interface ToHostOptions extends DeviceCopyOptions, ToArrowOptions {
  /**
   * `full` re-validates the host copy at the C Data Interface's `full`
   * level (every offset, type id, view). The device tree itself is always
   * checked at `default` (last offsets, child lengths, variadic sizes)
   * unless the import said `none`.
   */
  readonly validate?: ValidationLevel;
}

/**
 * A DeviceArray holds its import through the one owner of every import
 * (array/owner.ts): release, move and the garbage collector's last resort
 * are the owner's. The handle itself is the owner's only holder: when it is
 * collected unreleased, the producer is released.
 */
type State = ImportOwner;

export class DeviceArray implements DeviceArrayNode, ArrowSchemaExportable, ArrowArrayExportable, ArrowDeviceArrayExportable {
  readonly #state: State;
  readonly #root: DeviceNode;
  #fetches: Fetch[];
  /** `ArrowDeviceType`: `DeviceType.CUDA`, ... */
  readonly deviceType: number;
  /** The device number; -1 where the type has none. */
  readonly deviceId: number;
  /**
   * The producer's `sync_event` (a pointer to the device's event type, such as
   * `cudaEvent_t*`); `0n` when the data is ready. Valid until release.
   */
  readonly syncEvent: Ptr;

  /** @internal Use `importDeviceArray`. */
  constructor(state: State, root: DeviceNode, fetches: Fetch[], deviceType: number, deviceId: number, syncEvent: Ptr) {
    this.#state = state;
    this.#root = root;
    this.#fetches = fetches;
    this.deviceType = deviceType;
    this.deviceId = deviceId;
    this.syncEvent = syncEvent;
    state.hold(this);
    state.done();
  }

  get schema(): SchemaNode { return this.#root.schema; }
  get length(): number { return this.#root.length; }
  get offset(): number { return this.#root.offset; }
  get nullCount(): number { return this.#root.nullCount; }
  /** Buffer addresses and sizes on the device (see `resolveBufferSizes` for sizes still unknown). */
  get buffers(): readonly DeviceBuffer[] { return this.#root.buffers; }
  get children(): readonly DeviceArrayNode[] { return this.#root.children; }
  get dictionary(): DeviceArrayNode | null { return this.#root.dictionary; }

  /** "CUDA", "OPENCL", ... */
  get deviceTypeName(): string {
    return deviceTypeName(this.deviceType) ?? `UNKNOWN(${this.deviceType})`;
  }

  /** Whether `release()` or `exportTo()` ended this handle. */
  get released(): boolean {
    return this.#state.isReleased;
  }

  /** Whether the CPU can read the bytes in place (CPU, CUDA_HOST, CUDA_MANAGED). */
  get hostReadable(): boolean {
    return backendFor(this.deviceType)?.hostReadable(this.deviceType) ?? false;
  }

  /** Whether every buffer's size is known (no device read pending). */
  get sizesKnown(): boolean {
    return this.#fetches.length === 0 && sizesKnown(this.#root);
  }

  private live(what: string): State {
    if (this.#state.isReleased) {
      throw new ArrowDeviceError('released', 'device_array', `${what} of a released (or moved) DeviceArray: ${this.#state.releasedBecause}`);
    }
    return this.#state;
  }

  private context(opts: DeviceCopyOptions): DeviceContext {
    return { mem: this.#state.mem, deviceType: this.deviceType, deviceId: this.deviceId, syncEvent: this.syncEvent, stream: opts.stream };
  }

  /**
   * Fetches what the sizes of variable-length buffers depend on (the last
   * offset of every binary/utf8 array and the variadic sizes of view types,
   * in the whole tree) with one batched device read, and checks it. Throws
   * `unsupported` for a device type whose bytes cannot be read.
   *
   * @example
   * const dev = importDeviceArray(ptr, schema);
   * dev.resolveBufferSizes();
   * console.log(dev.children[1].buffers[2].size); // bytes of the utf8 data
   */
  resolveBufferSizes(opts: DeviceCopyOptions = {}): this {
    this.live('resolveBufferSizes');
    if (this.#fetches.length === 0) return this;
    const backend = requireBackend(this.deviceType, this.deviceTypeName, 'device_array');
    readFetches(this.#fetches, backend, this.context(opts));
    this.#fetches = [];
    return this;
  }

  /**
   * Copies the whole tree (children, dictionaries, variadic buffers) into JS
   * memory as an `ArrayView`: one batched read of the sizes it needs, then
   * one batch of buffer copies. The DeviceArray stays live.
   */
  toHostView(opts: ToHostOptions = {}): ArrayView {
    const s = this.live('toHostView');
    const backend = requireBackend(this.deviceType, this.deviceTypeName, 'device_array');
    this.resolveBufferSizes(opts);
    const view = copyTreeToHost(this.#root, backend, this.context(opts));
    if (opts.validate !== 'full') return view;
    // Full validation of the copy: through the C Data Interface and back, zero-copy both ways.
    const p = exportArray(view, { memory: s.mem });
    try {
      return importArrayView(p, view.schema, { memory: s.mem, validate: 'full' });
    } finally {
      freeArrowArray(p, { memory: s.mem });
    }
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
    const view = this.toHostView(opts);
    return viewToData(view, nodeToType(view.schema, 'schema', opts), 'device_array.array', opts);
  }

  /** Copies a struct array to the host as an arrow-js `RecordBatch`. */
  toHostRecordBatch(opts: ToHostOptions = {}): RecordBatch {
    if (this.schema.type.id !== 'struct') throw invalid('schema.format', `a record batch needs a struct ("+s"), got "${this.schema.format}"`);
    // The schema is converted once per DeviceArray schema (planOfNode caches), not per call.
    const plan = planOfNode(this.schema, opts);
    const view = this.toHostView(opts);
    // A host copy: nothing to release (owned by no import), but releasable like every imported batch.
    return asImportedBatch(viewToBatch(view, plan, 'device_array.array', opts), []);
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
      return adoptDeviceArray(mem, tmp, this.schema, 'device_array');
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
    this.#state.release();
  }

  // --- the exchange protocol (PROTOCOL.md) ------------------------------------------------

  /** Exchange protocol: the schema as an owned `ArrowSchema` handle (the DeviceArray is unchanged). */
  [ArrowSymbols.schema](): ExportHandle {
    return schemaHandle(this.#state.mem, this.schema);
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
      throw unsupported(path, `${this.deviceTypeName} memory the CPU cannot read: hand it on with arrow.c_device_array, or copy it (toHostRecordBatch())`);
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
    this.#state.release();
  }
}

/**
 * Moves the `ArrowDeviceArray` at `ptr` (fields already validated) into a
 * new `DeviceArray`; the caller's struct is marked released. On failure the
 * producer's release has been called.
 */
export function adoptDeviceArray(
  mem: Memory,
  ptr: Ptr,
  schema: SchemaNode,
  path: string,
  check = true,
): DeviceArray {
  const L = mem.layouts.ArrowDeviceArray;
  const state = ImportOwner.move(mem, ptr, 'ArrowDeviceArray');
  const own = state.ptr;
  try {
    const o = L.offsets;
    const deviceType = mem.readI32(own + BigInt(o.device_type!));
    const deviceId = Number(mem.readI64(own + BigInt(o.device_id!)));
    const syncEvent = mem.readPtr(own + BigInt(o.sync_event!));
    const fetches: Fetch[] = [];
    const root = readDeviceTree(mem, own + BigInt(o.array!), schema, `${path}.array`, fetches, check);
    return new DeviceArray(state, root, fetches, deviceType, deviceId, syncEvent);
  } catch (e) {
    state.release('failed');
    throw e;
  }
}
