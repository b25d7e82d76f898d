/**
 * Constants of the interfaces: device types (CDeviceDataInterface.rst,
 * "Definitions"), schema flags (CDataInterface.rst, "ArrowSchema.flags") and
 * the errno codes the stream and async interfaces return.
 */

/** `ArrowDeviceType` values, CDeviceDataInterface.rst. The gaps (5, 6) are unassigned, as in DLPack. */
export const DeviceType = Object.freeze({
  /** `ARROW_DEVICE_CPU`: host memory, as a plain `ArrowArray`. */
  CPU: 1,
  /** `ARROW_DEVICE_CUDA`: CUDA device memory (`cudaMalloc`, `cuMemAlloc`). */
  CUDA: 2,
  /** `ARROW_DEVICE_CUDA_HOST`: host memory pinned by CUDA (`cudaMallocHost`). */
  CUDA_HOST: 3,
  /** `ARROW_DEVICE_OPENCL`: memory of an OpenCL device. */
  OPENCL: 4,
  /** `ARROW_DEVICE_VULKAN`: memory allocated through Vulkan. */
  VULKAN: 7,
  /** `ARROW_DEVICE_METAL`: memory of an Apple GPU, through Metal. */
  METAL: 8,
  /** `ARROW_DEVICE_VPI`: a Verilog simulator buffer. */
  VPI: 9,
  /** `ARROW_DEVICE_ROCM`: memory of an AMD device, through ROCm. */
  ROCM: 10,
  /** `ARROW_DEVICE_ROCM_HOST`: host memory pinned by ROCm (`hipMallocHost`). */
  ROCM_HOST: 11,
  /** `ARROW_DEVICE_EXT_DEV`: a device the list does not name; the producer says what it is by other means. */
  EXT_DEV: 12,
  /** `ARROW_DEVICE_CUDA_MANAGED`: CUDA managed (unified) memory (`cudaMallocManaged`). */
  CUDA_MANAGED: 13,
  /** `ARROW_DEVICE_ONEAPI`: unified shared memory of an Intel oneAPI device. */
  ONEAPI: 14,
  /** `ARROW_DEVICE_WEBGPU`: a WebGPU `GPUBuffer` (PROTOCOL.md section 7.1 says how its addresses read). */
  WEBGPU: 15,
  /** `ARROW_DEVICE_HEXAGON`: memory of a Qualcomm Hexagon DSP. */
  HEXAGON: 16,
} as const);

/** The name of a device type the spec defines: `'CPU'`, `'CUDA'`, ... (the keys of {@link DeviceType}). */
export type DeviceTypeName = keyof typeof DeviceType;
/** The `ArrowDeviceType` code of a device type the spec defines: 1, 2, 3, 4, 7, ... (the values of {@link DeviceType}). */
export type DeviceTypeCode = (typeof DeviceType)[DeviceTypeName];

const deviceNames = new Map<number, DeviceTypeName>(
  Object.entries(DeviceType).map(([k, v]) => [v, k as DeviceTypeName]),
);

/**
 * `ARROW_DEVICE_CUDA` -> "CUDA"; undefined for a code the spec does not define.
 *
 * @example
 * deviceTypeName(2);                      // 'CUDA'
 * deviceTypeName(5);                      // undefined: 5 is unassigned
 * deviceTypeName(deviceArray.deviceType); // how a DeviceArray's device reads in a message
 */
export function deviceTypeName(code: number): DeviceTypeName | undefined {
  return deviceNames.get(code);
}

/** `ArrowSchema.flags` bits (CDataInterface.rst, "The ArrowSchema structure", `flags`). */
export const Flag = Object.freeze({
  /** `ARROW_FLAG_DICTIONARY_ORDERED`: a dictionary-encoded field whose index order means something. */
  DICTIONARY_ORDERED: 1,
  /** `ARROW_FLAG_NULLABLE`: the field is nullable (whether or not it holds nulls). */
  NULLABLE: 2,
  /** `ARROW_FLAG_MAP_KEYS_SORTED`: a map whose keys are sorted within each value. */
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
  /** Success: what a callback returns when it did what was asked. */
  OK: 0,
  /** Operation not permitted. */
  EPERM: 1,
  /** No such entry. */
  ENOENT: 2,
  /** An I/O error: the code for a failure that fits no other (the spec's catch-all). */
  EIO: 5,
  /** Try again: nothing is ready yet. */
  EAGAIN: 11,
  /** Out of memory: an allocation failed. */
  ENOMEM: 12,
  /** Busy: the resource is in use. */
  EBUSY: 16,
  /** Invalid argument: the input breaks a rule of the interface. */
  EINVAL: 22,
  /** A value out of range. */
  ERANGE: 34,
  /** Not implemented: the producer does not support the call. */
  ENOSYS: 38,
  /** A value too large for its type. */
  EOVERFLOW: 75,
  /** Cancelled: the consumer or the producer stopped the stream. */
  ECANCELED: 125,
} as const);

/** The name of an errno code in {@link Errno}: `'OK'`, `'EINVAL'`, `'ENOMEM'`, ... */
export type ErrnoName = keyof typeof Errno;

const errnoNames = new Map<number, ErrnoName>(Object.entries(Errno).map(([k, v]) => [v, k as ErrnoName]));

/**
 * 22 -> "EINVAL"; `E<code>` for an unknown code.
 *
 * @example
 * errnoName(Errno.ENOMEM); // 'ENOMEM'
 * errnoName(99);           // 'E99'
 */
export function errnoName(code: number): string {
  return errnoNames.get(code) ?? `E${code}`;
}
