/**
 * What the two stream structs have in common and where they differ.
 * `ArrowArrayStream` (CStreamInterface.rst) and `ArrowDeviceArrayStream`
 * (CDeviceDataInterface.rst) have the same four callbacks and
 * `private_data`; the device stream starts with a `device_type`, and its
 * `get_next` fills an `ArrowDeviceArray` (whose `ArrowArray` is at offset 0)
 * instead of an `ArrowArray`.
 */
import type { StructLayout } from '../abi/layout.js';
import type { Memory, Ptr, Signature } from '../memory/memory.js';
import { RELEASE_SIG } from '../memory/registry.js';
import { isReleased, releaseStruct } from '../memory/cstruct.js';

export type StreamKind = 'array' | 'device';

export interface StreamStruct {
  readonly kind: StreamKind;
  /** The struct's name, for messages: `ArrowArrayStream`. */
  readonly name: 'ArrowArrayStream' | 'ArrowDeviceArrayStream';
  /** The path prefix of errors: `stream`, `device_stream`. */
  readonly path: string;
  layout(mem: Memory): StructLayout;
  /** The layout of what `get_next` fills. */
  out(mem: Memory): StructLayout;
}

export const ARRAY_STREAM: StreamStruct = {
  kind: 'array',
  name: 'ArrowArrayStream',
  path: 'stream',
  layout: (m) => m.layouts.ArrowArrayStream,
  out: (m) => m.layouts.ArrowArray,
};

export const DEVICE_STREAM: StreamStruct = {
  kind: 'device',
  name: 'ArrowDeviceArrayStream',
  path: 'device_stream',
  layout: (m) => m.layouts.ArrowDeviceArrayStream,
  out: (m) => m.layouts.ArrowDeviceArray,
};

/** `int get_schema(struct X*, struct ArrowSchema*)` and `int get_next(struct X*, struct ArrowArray*)`. */
export const GET_SCHEMA_SIG = { name: 'stream_get_schema', result: 'int32', params: ['pointer', 'pointer'] } as const satisfies Signature;
export const GET_NEXT_SIG = { name: 'stream_get_next', result: 'int32', params: ['pointer', 'pointer'] } as const satisfies Signature;
/** `const char* get_last_error(struct X*)`. */
export const GET_LAST_ERROR_SIG = { name: 'stream_get_last_error', result: 'pointer', params: ['pointer'] } as const satisfies Signature;
export { RELEASE_SIG };

/** The address of `field` in the stream struct at `ptr`. */
export function fieldAddr(mem: Memory, s: StreamStruct, ptr: Ptr, field: string): Ptr {
  return ptr + BigInt(s.layout(mem).offsets[field]!);
}

/** Whether the stream struct at `ptr` is released (its `release` is NULL). */
export function isStreamReleased(mem: Memory, s: StreamStruct, ptr: Ptr): boolean {
  return isReleased(mem, s.name, ptr);
}

/** Calls the stream's `release` unless it is released already, then marks it released. */
export function releaseStreamStruct(mem: Memory, s: StreamStruct, ptr: Ptr): void {
  releaseStruct(mem, s.name, ptr);
}
