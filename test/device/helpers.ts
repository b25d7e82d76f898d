/**
 * Test helpers for device arrays: wrapping a hand-built `ArrowArray` (from
 * test/cdata/malformed/builder.ts, which counts releases) into an
 * `ArrowDeviceArray`, and reading or patching the device fields through the
 * layout table.
 */
import { nativeMemory, type Ptr } from '../../src/memory/index.js';
import type { Builder, Built } from '../cdata/malformed/builder.js';

const mem = nativeMemory();
const L = mem.layouts.ArrowDeviceArray;
const at = (p: Ptr, field: string): Ptr => p + BigInt(L.offsets[field]!);

export interface DeviceFieldsSpec {
  deviceType: number;
  deviceId?: bigint | number;
  syncEvent?: Ptr;
  reserved?: [bigint, bigint, bigint];
}

/**
 * Moves the built array into a new `ArrowDeviceArray` (allocated by the
 * builder) with the given device fields, as a producer would fill one.
 */
export function wrapDevice(b: Builder, built: Built, f: DeviceFieldsSpec): Ptr {
  const p = b.alloc(L.size);
  mem.copyIn(p, mem.read(built.ptr, mem.layouts.ArrowArray.size));
  mem.writePtr(built.ptr + BigInt(mem.layouts.ArrowArray.offsets.release!), 0n);
  writeDeviceFieldsRaw(p, f);
  return p;
}

export function writeDeviceFieldsRaw(p: Ptr, f: DeviceFieldsSpec): void {
  mem.writeI64(at(p, 'device_id'), BigInt(f.deviceId ?? 0));
  mem.writeI32(at(p, 'device_type'), f.deviceType);
  mem.writePtr(at(p, 'sync_event'), f.syncEvent ?? 0n);
  const r = f.reserved ?? [0n, 0n, 0n];
  for (let k = 0; k < 3; k++) mem.writeI64(at(p, 'reserved') + BigInt(8 * k), r[k]!);
}

export function readDeviceFieldsRaw(p: Ptr): { deviceType: number; deviceId: bigint; syncEvent: Ptr; reserved: bigint[]; padding: number } {
  return {
    deviceType: mem.readI32(at(p, 'device_type')),
    deviceId: mem.readI64(at(p, 'device_id')),
    syncEvent: mem.readPtr(at(p, 'sync_event')),
    reserved: [0, 1, 2].map((k) => mem.readI64(at(p, 'reserved') + BigInt(8 * k))),
    padding: mem.readI32(at(p, 'device_type') + 4n),
  };
}

export function arrayRelease(p: Ptr): Ptr {
  return mem.readPtr(p + BigInt(L.offsets.array! + mem.layouts.ArrowArray.offsets.release!));
}

/** The whole struct's bytes (to compare a pass-through with the original). */
export function structBytes(p: Ptr): number[] {
  return [...mem.read(p, L.size)];
}
