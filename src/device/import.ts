/**
 * The C Device Data Interface's import side, target-neutral: the device
 * fields, the one device import (`importDeviceWith`, built by each target:
 * arrow-js objects in src/device/api.ts, `ArrayView`s here, flechette tables
 * in src/flechette/device.ts), `DeviceArray` handles, and the struct helpers.
 * Loads no apache-arrow: src/device/api.ts adds the arrow-js importers and
 * the exports, and re-exports everything here, so the public API is its.
 *
 * Ownership is the C Data Interface's (src/array/importer.ts), applied to the
 * `ArrowArray` embedded at offset 0 of the `ArrowDeviceArray` (its `release`
 * is the device array's release):
 * - Import consumes: the struct is moved out of the caller's memory (the
 *   caller's `array.release` is NULL afterwards, on success and on failure)
 *   and the producer's `release` is called exactly once. For objects built
 *   over the memory, when no JS object can reach it any more (or at once
 *   with `copy` / `toHost`); for a `DeviceArray`, at its `release()` (or when
 *   it is collected), unless `exportTo` moved it on.
 *
 * Validation of the device fields, at every level: `reserved` must be zero
 * (the spec says MUST), the device type one the spec defines, `device_id`
 * -1 or a device number (a CPU array says -1; 0, DLPack's CPU id, is
 * accepted too), a CUDA or CUDA_MANAGED array names a device (>= 0), and a
 * CPU array has no `sync_event`. Errors name the place:
 * `device_array.reserved[1]: must be zero`.
 *
 * Synchronisation: for data the CPU reads in place (CUDA_HOST and
 * CUDA_MANAGED), the host waits on the event with `cudaEventSynchronize`
 * before the first byte is read. Copies from the device make the copying
 * stream wait on it with `cudaStreamWaitEvent` (the `stream` option names
 * that stream; otherwise the library's own).
 */
import { deviceTypeName, DeviceType } from '../abi/constants.js';
import { access } from '../abi/accessors.js';
import { ArrowSymbols, hasArrowMethod, isArrowExportable, type ArrowArrayExportable, type ArrowDeviceArrayExportable } from '../abi/protocol.js';
import { deviceArrayPtrArg } from '../args.js';
import { memoryOf, type MemoryOption } from '../array/core.js';
import { exchangeOptions, importFromArrayHandles, type ExchangeImportOptions } from '../array/exchange.js';
import type { ArrayImportOptions } from '../array/api.js';
import { consume, importWith, PlanOf, quietly, type SchemaLike } from '../array/importer.js';
import { owned, releaseImport } from '../array/owned.js';
import { ImportOwner } from '../array/owner.js';
import type { Plan } from '../array/plan.js';
import type { ImportRead } from '../array/record.js';
import { viewOf, type ArrayView } from '../array/view.js';
import { ArrowDeviceError, invalid } from '../errors.js';
import { checkOwned, isReleased, moveStruct, releaseStruct } from '../memory/cstruct.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { rawOf, stage, staged } from '../memory/raw.js';
import { backendFor } from './backend.js';
import { adoptDeviceArray, DeviceArray } from './device-array.js';
import { writeDeviceFields } from './export.js';

/** Options of the device importers' pointer form: those of the array importers, and the device's own. */
export interface DeviceImportOptions extends ArrayImportOptions {
  /**
   * CUDA: a `cudaStream_t` for copies from the device (`toHost`). It is made
   * to wait on the producer's event with `cudaStreamWaitEvent`.
   */
  stream?: Ptr;
  /**
   * For memory the CPU cannot read (CUDA device memory): copy it to the host
   * and return the objects built over the copy (arrow-js objects; flechette
   * tables from arrow-device/flechette), releasing the device array at once,
   * instead of a `DeviceArray`.
   */
  toHost?: boolean;
}

/** The fields an `ArrowDeviceArray` adds to its `ArrowArray`. */
export interface DeviceFields {
  /** `ArrowDeviceArray.device_type`: a `DeviceType` code. */
  readonly deviceType: number;
  /** `ArrowDeviceArray.device_id`: the device number; -1 where the type has none (CDeviceDataInterface.rst recommends -1 for the CPU). */
  readonly deviceId: number;
  /** `ArrowDeviceArray.sync_event`: a pointer to the device's event type (`cudaEvent_t*`), `0n` when the data is ready. */
  readonly syncEvent: Ptr;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const CUDA_NUMBERED = new Set<number>([DeviceType.CUDA, DeviceType.CUDA_MANAGED, DeviceType.WEBGPU]);

/**
 * Reads and validates the device fields of the `ArrowDeviceArray` at `ptr`,
 * without taking ownership. `path` prefixes error places.
 */
export function readDeviceFields(m: Memory, ptr: Ptr, path = 'device_array'): DeviceFields {
  if (ptr === 0n) throw invalid(path, 'NULL pointer');
  // The struct's bytes staged once (src/memory/raw.ts), its fields read through the typed accessors.
  const D = access(m.target).ArrowDeviceArray;
  const at = stage(rawOf(m), Number(ptr), D.$size);
  const dv = staged.dv;
  if (readRelease(m, ptr) === 0n) throw new ArrowDeviceError('released', path, 'the struct is released (array.release is NULL)');
  for (let k = 0; k < 3; k++) {
    if (D.reserved.big(dv, at, k) !== 0n) throw invalid(`${path}.reserved[${k}]`, 'must be zero');
  }
  const deviceType = D.device_type.get(dv, at);
  const deviceId64 = D.device_id.big(dv, at);
  const syncEvent = D.sync_event.big(dv, at);
  const name = deviceTypeName(deviceType);
  if (name === undefined) throw invalid(`${path}.device_type`, `unknown device type ${deviceType}`);
  if (deviceId64 < -1n || deviceId64 > MAX_SAFE) throw invalid(`${path}.device_id`, `must be -1 or a device number, got ${deviceId64}`);
  const deviceId = Number(deviceId64);
  if (deviceType === DeviceType.CPU) {
    if (deviceId > 0) throw invalid(`${path}.device_id`, `must be -1 for a CPU device, got ${deviceId}`);
    if (syncEvent !== 0n) throw invalid(`${path}.sync_event`, 'must be NULL for a CPU device');
  }
  if (CUDA_NUMBERED.has(deviceType) && deviceId < 0) {
    throw invalid(`${path}.device_id`, `a ${name} array must name a device (>= 0), got ${deviceId}`);
  }
  return { deviceType, deviceId, syncEvent };
}

function readRelease(m: Memory, ptr: Ptr): Ptr {
  return isReleased(m, 'ArrowDeviceArray', ptr) ? 0n : 1n;
}

/**
 * Step 1 of the one import path (array/importer.ts) for a device array:
 * the pointer, the struct, the plan of the schema, the options and the
 * device fields. Import consumes: on failure the array, and a schema given
 * as a pointer, are released.
 */
function begin(ptr: Ptr, schema: SchemaLike | Ptr, opts: DeviceImportOptions, form: PlanOf): { m: Memory; plan: Plan; fields: DeviceFields; level: number } {
  const m = memoryOf(opts);
  const c = consume(m, 'ArrowDeviceArray', ptr, schema, opts, 'device_array', form);
  const { plan, level } = c;
  let fields: DeviceFields;
  try {
    fields = readDeviceFields(m, ptr);
  } catch (e) {
    quietly(() => releaseStruct(m, 'ArrowDeviceArray', ptr));
    throw e;
  }
  return { m, plan: plan!, fields, level };
}

/** Whether the CPU can read the data in place (after the sync). */
function readsInPlace(fields: DeviceFields): boolean {
  return backendFor(fields.deviceType)?.hostReadable(fields.deviceType) ?? false;
}

/**
 * @internal Imports a device array as `build` makes it from its record (the
 * one build of every device importer and target: arrow-js objects, an
 * `ArrayView`, flechette tables): zero-copy where the CPU reads the memory in
 * place (after waiting on the event), else a `DeviceArray`, or with `toHost`
 * a host copy built by `build` (the device array released at once; the
 * result owns nothing, and is releasable like every import). `form`: what
 * `consume` makes of the plan before the struct is taken (`PlanOf.Batch` for
 * an arrow-js record batch refuses a type arrow-js lacks while the array is
 * still the caller's).
 */
export function importDeviceWith<T extends object>(
  ptr: Ptr,
  schema: SchemaLike | Ptr,
  opts: DeviceImportOptions,
  form: PlanOf,
  build: (read: ImportRead) => T,
): T | DeviceArray {
  const { m, plan, fields, level } = begin(ptr, schema, opts, form);
  if (readsInPlace(fields)) {
    try {
      backendFor(fields.deviceType)!.syncForHost({ mem: m, ...fields });
    } catch (e) {
      releaseStruct(m, 'ArrowDeviceArray', ptr);
      throw e;
    }
    return importWith(ImportOwner.move(m, ptr, 'ArrowDeviceArray'), plan, opts, level, 'device_array.array', build);
  }
  const dev = adoptDeviceArray(m, ptr, plan, 'device_array', level);
  if (!opts.toHost) return dev;
  try {
    // A host copy: nothing to release (owned by no import), but releasable like every import.
    return owned(build(DeviceArray.hostCopy(dev, opts, plan)), []);
  } finally {
    dev.release();
  }
}

/**
 * Imports an `ArrowDeviceArray` of any device as a `DeviceArray` handle,
 * without copying its buffers. For pass-through, inspection, and explicit
 * control of copies. Release it with `release()` or `using`.
 *
 * Validation reads what its level checks on the device, in one batch (the
 * offsets and variadic sizes at `default`, the buffers it checks at `full`);
 * where the bytes cannot be read (a device this library has no backend for)
 * such a level is refused as `unsupported`: pass `{ validate: 'minimal' }`
 * to pass the array on unread.
 *
 * `source` may be an object of the exchange protocol (PROTOCOL.md) in place
 * of both pointers: `arrow.c_device_array`, or, from a producer without it
 * (CPU data), `arrow.c_array`; the same holds for `importDeviceData`,
 * `importDeviceRecordBatch` and `importDeviceArrayView`.
 *
 * @example
 * using dev = importDeviceArray(deviceArrayPtr, schemaPtr);
 * console.log(dev.deviceTypeName, dev.deviceId, dev.length);
 * dev.exportTo(nextConsumersStruct); // or dev.toHost(), dev.release()
 */
export function importDeviceArray(source: DeviceArraySource, opts?: DeviceExchangeOptions): DeviceArray;
export function importDeviceArray(ptr: Ptr, schema: SchemaLike | Ptr, opts?: DeviceImportOptions): DeviceArray;
export function importDeviceArray(ptr: Ptr | DeviceArraySource, schema?: SchemaLike | Ptr | DeviceExchangeOptions, opts: DeviceImportOptions = {}): DeviceArray {
  if (isArrowExportable(ptr)) return viaDeviceArray(ptr, schema, 'importDeviceArray', (p, s, o) => importDeviceArray(p, s, o));
  const { m, plan, level } = begin(ptr, schema as SchemaLike | Ptr, opts, PlanOf.Array);
  return adoptDeviceArray(m, ptr, plan, 'device_array', level);
}

/**
 * `importDeviceArray` for devices whose bytes are read asynchronously
 * (WebGPU's `mapAsync`), and for every other device: the struct is moved
 * at once (as by `importDeviceArray`: the call consumes it), then the reads
 * its validation level needs are done in one batch each and awaited. On a
 * failure of those reads the array is released and the promise rejects.
 *
 * @example
 * const dev = await importDeviceArrayAsync(ptr, schemaPtr); // WebGPU memory
 * const { buffer, offset } = dev.children[0].buffers[1].webgpu!;
 * const data = await dev.toHostAsync();
 * dev.release();
 */
export function importDeviceArrayAsync(source: DeviceArraySource, opts?: DeviceExchangeOptions): Promise<DeviceArray>;
export function importDeviceArrayAsync(ptr: Ptr, schema: SchemaLike | Ptr, opts?: DeviceImportOptions): Promise<DeviceArray>;
export async function importDeviceArrayAsync(
  ptr: Ptr | DeviceArraySource,
  schema?: SchemaLike | Ptr | DeviceExchangeOptions,
  opts: DeviceImportOptions = {},
): Promise<DeviceArray> {
  // Everything up to the first await runs now: the struct is consumed by this call, as by the synchronous import.
  const dev = isArrowExportable(ptr)
    ? viaDeviceArray(ptr, schema, 'importDeviceArrayAsync', importDeviceArrayLater)
    : importDeviceArrayLater(ptr, schema as SchemaLike | Ptr, opts);
  await dev.checkLevel();
  return dev;
}

/**
 * @internal The synchronous half of `importDeviceArrayAsync` (streams and the
 * async reader take their items with it, then await `checkLevel()`).
 */
export function importDeviceArrayLater(ptr: Ptr, schema: SchemaLike | Ptr, opts: DeviceImportOptions): DeviceArray {
  const { m, plan, level } = begin(ptr, schema, opts, PlanOf.Array);
  return adoptDeviceArray(m, ptr, plan, 'device_array', level, true);
}

/**
 * @internal Finishes an item imported with `importDeviceArrayLater` (a
 * device read asynchronously): the level's device reads awaited, then, with
 * `toHost`, the host copy built by `build` (the `DeviceArray` released), as
 * `importDeviceWith` builds it.
 */
export async function settleDeviceWith<T extends object>(dev: DeviceArray, opts: DeviceImportOptions, build: (read: ImportRead) => T): Promise<DeviceArray | T> {
  await dev.checkLevel();
  if (!opts.toHost) return dev;
  try {
    return owned(build(await DeviceArray.hostCopyAsync(dev, opts)), []);
  } finally {
    dev.release();
  }
}

/**
 * Imports an `ArrowDeviceArray` as an `ArrayView` (every type of the spec)
 * when the CPU can read it, zero-copy; else a `DeviceArray` (or, with
 * `toHost`, a host copy). `source` may be a protocol object, as for `importDeviceData`.
 *
 * @example
 * const v = importDeviceArrayView(deviceArrayPtr, schemaPtr);
 * if (v instanceof DeviceArray) v.release();     // device memory: not read here
 * else console.log(v.length, v.buffers[1]);      // CPU-readable: the bytes, zero-copy
 */
export function importDeviceArrayView(source: DeviceArraySource, opts?: DeviceExchangeOptions): ArrayView | DeviceArray;
export function importDeviceArrayView(ptr: Ptr, schema: SchemaLike | Ptr, opts?: DeviceImportOptions): ArrayView | DeviceArray;
export function importDeviceArrayView(ptr: Ptr | DeviceArraySource, schema?: SchemaLike | Ptr | DeviceExchangeOptions, opts: DeviceImportOptions = {}): ArrayView | DeviceArray {
  if (isArrowExportable(ptr)) return viaDeviceArray(ptr, schema, 'importDeviceArrayView', (p, s, o) => importDeviceArrayView(p, s, o));
  return importDeviceWith(ptr, schema as SchemaLike | Ptr, opts, PlanOf.Array, (read) => viewOf(read, read.plan.root, 0));
}

// --- exchange protocol (PROTOCOL.md) ------------------------------------------------------

/** What the device importers take besides pointers: an object implementing `arrow.c_device_array`, or, for CPU data, `arrow.c_array`. */
export type DeviceArraySource = ArrowDeviceArrayExportable | ArrowArrayExportable;

/** Options of a device import from a protocol object: the pointer form's, and `requestedSchema`. */
export type DeviceExchangeOptions = DeviceImportOptions & ExchangeImportOptions;

/**
 * A device import from a protocol object: `arrow.c_device_array`, or, from
 * a producer without it (CPU data, PyCapsuleInterface.rst, "Device
 * Support"), `arrow.c_array`, whose array is moved into a CPU
 * `ArrowDeviceArray` for the device importer. The handles are disposed on
 * every path (array/exchange.ts). @internal (the device importers of every target).
 */
export function viaDeviceArray<R extends object>(source: object, optsArg: unknown, fn: string, imp: (ptr: Ptr, schema: Ptr, opts: DeviceImportOptions) => R): R {
  const o = exchangeOptions<DeviceImportOptions>(optsArg, fn);
  const release = (r: R): void => (r instanceof DeviceArray ? r.release() : releaseImport(r));
  if (hasArrowMethod(source, ArrowSymbols.deviceArray) || !hasArrowMethod(source, ArrowSymbols.array)) {
    return importFromArrayHandles(source, ArrowSymbols.deviceArray, o, (a, s, m) => imp(a, s, { ...o, memory: m }), release);
  }
  return importFromArrayHandles(
    source,
    ArrowSymbols.array,
    o,
    (a, s, m) => {
      const d = m.alloc(m.layouts.ArrowDeviceArray.size);
      try {
        moveStruct(m, 'ArrowArray', a, d + BigInt(access(m.target).ArrowDeviceArray.array.offset));
        writeDeviceFields(m, d, DeviceType.CPU, -1, 0n);
        return imp(d, s, { ...o, memory: m });
      } finally {
        m.free(d);
      }
    },
    release,
  );
}

// --- struct helpers ----------------------------------------------------------------------

/**
 * Allocates a zeroed `ArrowDeviceArray` for a producer to fill.
 *
 * @example
 * const array = allocArrowDeviceArray();
 * nativeLib.produce_device(array);                 // the producer fills it
 * using dev = importDeviceArray(array, schemaPtr); // moved out of our struct
 * freeArrowDeviceArray(array);
 */
export function allocArrowDeviceArray(opts: MemoryOption = {}): Ptr {
  const m = memoryOf(opts);
  return m.alloc(m.layouts.ArrowDeviceArray.size);
}

/**
 * Calls the release of the `ArrowDeviceArray`'s embedded array if it is not released yet, and leaves the
 * struct allocated (CDeviceDataInterface.rst: the release semantics are the `ArrowArray`'s).
 *
 * @example
 * const array = allocArrowDeviceArray();
 * nativeLib.produce_device(array);
 * releaseArrowDeviceArray(array);  // not wanted: the producer's release, once
 * freeArrowDeviceArray(array);
 */
export function releaseArrowDeviceArray(ptr: Ptr, opts: MemoryOption = {}): void {
  releaseStruct(memoryOf(opts), 'ArrowDeviceArray', deviceArrayPtrArg(ptr, 'ptr', memoryOf(opts)));
}

/**
 * Releases (if still live) and frees an `ArrowDeviceArray` allocated by this library; a pointer that is
 * not ours, or freed already, is an `ArrowDeviceError`.
 *
 * @example
 * const array = exportDeviceArray(batch);  // CPU, zero-copy
 * nativeLib.consume_device(array);         // the consumer moves it out or releases it
 * freeArrowDeviceArray(array);
 */
export function freeArrowDeviceArray(ptr: Ptr, opts: MemoryOption = {}): void {
  checkOwned(memoryOf(opts), ptr, 'freeArrowDeviceArray');
  if (ptr === 0n) return;
  releaseArrowDeviceArray(ptr, opts);
  memoryOf(opts).free(ptr);
}

/**
 * Moves an `ArrowDeviceArray` (CDeviceDataInterface.rst, "Moving an array"): bitwise copy, then the source's `array.release` set to NULL.
 *
 * @example
 * const dst = allocArrowDeviceArray();
 * moveArrowDeviceArray(deviceArrayPtr, dst);  // dst owns the data; the source is marked released
 * using dev = importDeviceArray(dst, schemaPtr);
 * freeArrowDeviceArray(dst);
 */
export function moveArrowDeviceArray(src: Ptr, dst: Ptr, opts: MemoryOption = {}): void {
  const m = memoryOf(opts);
  moveStruct(m, 'ArrowDeviceArray', deviceArrayPtrArg(src, 'src', m), deviceArrayPtrArg(dst, 'dst', m));
}

/**
 * `allocArrowDeviceArray`, under its name before 0.2.
 *
 * @deprecated The name before 0.2: `allocArrowDeviceArray`.
 */
export const allocDeviceArray = allocArrowDeviceArray;
/**
 * `releaseArrowDeviceArray`, under its name before 0.2.
 *
 * @deprecated The name before 0.2: `releaseArrowDeviceArray`.
 */
export const releaseDeviceArray = releaseArrowDeviceArray;
/**
 * `freeArrowDeviceArray`, under its name before 0.2.
 *
 * @deprecated The name before 0.2: `freeArrowDeviceArray`.
 */
export const freeDeviceArray = freeArrowDeviceArray;
/**
 * `moveArrowDeviceArray`, under its name before 0.2.
 *
 * @deprecated The name before 0.2: `moveArrowDeviceArray`.
 */
export const moveDeviceArray = moveArrowDeviceArray;
