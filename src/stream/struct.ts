/**
 * What the two stream structs have in common and where they differ.
 * `ArrowArrayStream` (CStreamInterface.rst) and `ArrowDeviceArrayStream`
 * (CDeviceDataInterface.rst) have the same four callbacks and
 * `private_data`; the device stream starts with a `device_type`, and its
 * `get_next` fills an `ArrowDeviceArray` (whose `ArrowArray` is at offset 0)
 * instead of an `ArrowArray`.
 */
import { access, type FieldAccess } from '../abi/accessors.js';
import type { StructLayout } from '../abi/layout.js';
import type { Memory, Ptr, Signature } from '../memory/memory.js';
import { readFieldBig } from '../memory/raw.js';
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

/** The fields both stream structs have (the device stream adds `device_type`). */
export type StreamField = 'get_schema' | 'get_next' | 'get_last_error' | 'release' | 'private_data';

/** The typed accessor (src/abi/accessors.ts) of `field` of a stream struct of kind `s`. */
export function streamField(mem: Memory, s: StreamStruct, field: StreamField): FieldAccess {
  const a = access(mem.target);
  return (s.kind === 'array' ? a.ArrowArrayStream : a.ArrowDeviceArrayStream)[field];
}

/** The pointer in `field` of the stream struct at `ptr` (a callback, or the private data). */
export function readStreamField(mem: Memory, s: StreamStruct, ptr: Ptr, field: StreamField): Ptr {
  return readFieldBig(mem, streamField(mem, s, field), ptr);
}

/** Whether the stream struct at `ptr` is released (its `release` is NULL). */
export function isStreamReleased(mem: Memory, s: StreamStruct, ptr: Ptr): boolean {
  return isReleased(mem, s.name, ptr);
}

/** Calls the stream's `release` unless it is released already, then marks it released. */
export function releaseStreamStruct(mem: Memory, s: StreamStruct, ptr: Ptr): void {
  releaseStruct(mem, s.name, ptr);
}
