/**
 * The few `ArrowDeviceArray` reads and writes that CPU device streams need:
 * the header around the embedded `ArrowArray` (CDeviceDataInterface.rst,
 * "ArrowDeviceArray"). The `ArrowArray` itself is at offset 0 and is
 * imported and exported by the array layer like any other.
 *
 * INTERNAL and temporary: src/device owns device arrays. Once its
 * functions for reading and writing an `ArrowDeviceArray` land, the stream
 * layer should call those instead and this file should go.
 */
import { DeviceType, deviceTypeName } from '../abi/constants.js';
import { invalid } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { StructReader } from '../memory/struct.js';

/** `ARROW_DEVICE_CPU` and the `device_id` the spec recommends for it. */
export const CPU_DEVICE_TYPE = DeviceType.CPU;
export const CPU_DEVICE_ID = -1n;

/** A device type code as a name for messages: `CUDA (2)`, or `unknown (99)`. */
export function deviceLabel(code: number): string {
  return `${deviceTypeName(code) ?? 'unknown'} (${code})`;
}

/**
 * The header fields of the `ArrowDeviceArray` at `ptr`, checked for a CPU
 * stream whose `device_type` is `streamDeviceType`: the array's
 * `device_type` must equal the stream's (Arrow C++ does not check this; we
 * do), a CPU array has no sync event (the spec names no event type for CPU,
 * so `sync_event` must be NULL), and `reserved` must be zero. `device_id` is
 * not checked: -1 is only the spec's recommended convention for CPU.
 * Throws a typed error naming `path`; reads nothing else.
 */
export function checkCpuDeviceArrayHeaderInternal(mem: Memory, ptr: Ptr, streamDeviceType: number, path: string): void {
  const L = mem.layouts.ArrowDeviceArray;
  const r = StructReader.read(mem, ptr, L);
  const deviceType = r.i32('device_type');
  const syncEvent = r.ptr('sync_event');
  const reservedOff = L.offsets.reserved!;
  const reserved = [0, 1, 2].map((i) => r.bytes.subarray(reservedOff + i * 8, reservedOff + i * 8 + 8).some((b) => b !== 0));
  if (deviceType !== streamDeviceType) {
    throw invalid(
      `${path}.device_type`,
      `the array is on ${deviceLabel(deviceType)} but the stream's device_type is ${deviceLabel(streamDeviceType)}`,
    );
  }
  if (syncEvent !== 0n) {
    throw invalid(`${path}.sync_event`, `a CPU array has no sync event type, so sync_event must be NULL (got 0x${syncEvent.toString(16)})`);
  }
  const bad = reserved.indexOf(true);
  if (bad >= 0) throw invalid(`${path}.reserved[${bad}]`, 'reserved bytes must be zero');
}

/**
 * Writes the `ArrowDeviceArray` header of a CPU array at `ptr` (whose
 * embedded `ArrowArray` at offset 0 is written separately): `device_id` -1,
 * `device_type` CPU, `sync_event` NULL, `reserved` zero. One copy.
 */
export function writeCpuDeviceArrayHeaderInternal(mem: Memory, ptr: Ptr): void {
  const L = mem.layouts.ArrowDeviceArray;
  const start = L.offsets.device_id!;
  const tail = new Uint8Array(L.size - start);
  const dv = new DataView(tail.buffer);
  dv.setBigInt64(0, CPU_DEVICE_ID, true);
  dv.setInt32(L.offsets.device_type! - start, CPU_DEVICE_TYPE, true);
  // sync_event and reserved[3] stay zero.
  mem.copyIn(ptr + BigInt(start), tail);
}
