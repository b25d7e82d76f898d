/**
 * Constants of the interfaces: device types (CDeviceDataInterface.rst,
 * "Definitions"), schema flags (CDataInterface.rst, "ArrowSchema.flags") and
 * the errno codes the stream and async interfaces return.
 */

/** `ArrowDeviceType` values, CDeviceDataInterface.rst. The gaps (5, 6) are unassigned, as in DLPack. */
export const DeviceType = Object.freeze({
  CPU: 1,
  CUDA: 2,
  CUDA_HOST: 3,
  OPENCL: 4,
  VULKAN: 7,
  METAL: 8,
  VPI: 9,
  ROCM: 10,
  ROCM_HOST: 11,
  EXT_DEV: 12,
  CUDA_MANAGED: 13,
  ONEAPI: 14,
  WEBGPU: 15,
  HEXAGON: 16,
} as const);

export type DeviceTypeName = keyof typeof DeviceType;
export type DeviceTypeCode = (typeof DeviceType)[DeviceTypeName];

const deviceNames = new Map<number, DeviceTypeName>(
  Object.entries(DeviceType).map(([k, v]) => [v, k as DeviceTypeName]),
);

/** `ARROW_DEVICE_CUDA` -> "CUDA"; undefined for a code the spec does not define. */
export function deviceTypeName(code: number): DeviceTypeName | undefined {
  return deviceNames.get(code);
}

/** `ArrowSchema.flags` bits. */
export const Flag = Object.freeze({
  DICTIONARY_ORDERED: 1,
  NULLABLE: 2,
  MAP_KEYS_SORTED: 4,
} as const);

/** Every flag bit the spec defines; any other bit set on import is an error. */
export const ALL_FLAGS = Flag.DICTIONARY_ORDERED | Flag.NULLABLE | Flag.MAP_KEYS_SORTED;

/**
 * errno codes. The spec names EINVAL, ENOMEM and EIO, and says callbacks return
 * errno-compatible codes; ENOSYS (not implemented) and others are used the way
 * Arrow C++ and nanoarrow use them. Values are Linux's (and every POSIX
 * platform's for these low numbers).
 */
export const Errno = Object.freeze({
  OK: 0,
  EPERM: 1,
  ENOENT: 2,
  EIO: 5,
  EAGAIN: 11,
  ENOMEM: 12,
  EBUSY: 16,
  EINVAL: 22,
  ERANGE: 34,
  ENOSYS: 38,
  EOVERFLOW: 75,
  ECANCELED: 125,
} as const);

export type ErrnoName = keyof typeof Errno;

const errnoNames = new Map<number, ErrnoName>(Object.entries(Errno).map(([k, v]) => [v, k as ErrnoName]));

/** 22 -> "EINVAL"; `E<code>` for an unknown code. */
export function errnoName(code: number): string {
  return errnoNames.get(code) ?? `E${code}`;
}
