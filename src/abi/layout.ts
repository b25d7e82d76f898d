/**
 * Struct layouts of the C Data, C Stream and C Device Data interfaces, derived
 * from their field lists by the C alignment rules for a given target.
 *
 * Nothing here is typed in by hand as a number: each struct is a list of
 * fields (copied from the spec's definitions, CDataInterface.rst "Structure
 * definitions", CStreamInterface.rst, CDeviceDataInterface.rst) and
 * `layoutOf` computes offsets, size and alignment the way a C compiler does:
 * each field is placed at the next multiple of its alignment, and the size is
 * rounded up to the struct's alignment (the largest of its fields').
 */

/** A C target: only pointer width and the alignment of int64 differ between the ones we support. */
export interface Target {
  /** The target's name in messages: `'native64'`, `'wasm32'`. */
  readonly name: string;
  /** sizeof(void*) and alignof(void*) */
  readonly pointerSize: 4 | 8;
  /** alignof(int64_t) */
  readonly int64Align: 4 | 8;
}

/** x86-64 / aarch64 Linux, macOS, Windows: LP64 or LLP64, pointers and int64 are 8 bytes. */
export const NATIVE64: Target = Object.freeze({ name: 'native64', pointerSize: 8, int64Align: 8 });
/** wasm32: 4-byte pointers, int64 still 8-byte aligned (the WebAssembly C ABI). */
export const WASM32: Target = Object.freeze({ name: 'wasm32', pointerSize: 4, int64Align: 8 });

/** The C type of one field. */
export type FieldType =
  | { readonly kind: 'int32' }
  | { readonly kind: 'int64' }
  | { readonly kind: 'pointer' }
  | { readonly kind: 'array'; readonly of: FieldType; readonly length: number }
  | { readonly kind: 'struct'; readonly def: StructDef };

export interface FieldDef<N extends string = string> {
  readonly name: N;
  readonly type: FieldType;
  /** The C declaration, kept so the C layout proof and docs can show it. */
  readonly c: string;
}

/** A struct's definition; `N` is the union of its field names (so accessors are typed by them). */
export interface StructDef<N extends string = string> {
  readonly name: string;
  readonly fields: readonly FieldDef<N>[];
}

/** The field names of a struct definition. */
export type FieldName<D> = D extends StructDef<infer N> ? N : never;

/** Where one field of a C struct lies for one target, as a C compiler places it. */
export interface FieldLayout {
  /** The field's name in the spec's C definition (`n_buffers`, `private_data`). */
  readonly name: string;
  /** Its byte offset from the start of the struct. */
  readonly offset: number;
  /** Its size in bytes (`sizeof`). */
  readonly size: number;
  /** Its alignment in bytes (`alignof`). */
  readonly align: number;
}

/** One C struct of the interfaces laid out for one target: its size, alignment and every field's place. */
export interface StructLayout {
  /** The struct's C name: `'ArrowSchema'`, `'ArrowDeviceArray'`, ... */
  readonly name: string;
  /** The target it was laid out for. */
  readonly target: Target;
  /** `sizeof` the struct: the end of its last field, rounded up to its alignment. */
  readonly size: number;
  /** `alignof` the struct: the largest alignment of its fields. */
  readonly align: number;
  /** Every field, in declaration order. */
  readonly fields: readonly FieldLayout[];
  /** Field offsets by name: `layout.offsets.length`. */
  readonly offsets: Readonly<Record<string, number>>;
}

const int32: FieldType = { kind: 'int32' };
const int64: FieldType = { kind: 'int64' };
const pointer: FieldType = { kind: 'pointer' };

function f<N extends string>(name: N, type: FieldType, c: string): FieldDef<N> {
  return { name, type, c };
}

function sizeAlign(type: FieldType, target: Target): { size: number; align: number } {
  switch (type.kind) {
    case 'int32':
      return { size: 4, align: 4 };
    case 'int64':
      return { size: 8, align: target.int64Align };
    case 'pointer':
      return { size: target.pointerSize, align: target.pointerSize };
    case 'array': {
      const el = sizeAlign(type.of, target);
      return { size: el.size * type.length, align: el.align };
    }
    case 'struct': {
      const l = layoutOf(type.def, target);
      return { size: l.size, align: l.align };
    }
  }
}

function alignUp(n: number, align: number): number {
  return Math.ceil(n / align) * align;
}

const cache = new Map<string, StructLayout>();

/** Offsets, size and alignment of `def` on `target`, by the C rules. */
export function layoutOf(def: StructDef, target: Target): StructLayout {
  const key = `${def.name}/${target.name}`;
  const hit = cache.get(key);
  if (hit) return hit;
  let offset = 0;
  let align = 1;
  const fields: FieldLayout[] = [];
  const offsets: Record<string, number> = {};
  for (const field of def.fields) {
    const sa = sizeAlign(field.type, target);
    offset = alignUp(offset, sa.align);
    fields.push({ name: field.name, offset, size: sa.size, align: sa.align });
    offsets[field.name] = offset;
    offset += sa.size;
    align = Math.max(align, sa.align);
  }
  const layout: StructLayout = Object.freeze({
    name: def.name,
    target,
    size: alignUp(offset, align),
    align,
    fields: Object.freeze(fields),
    offsets: Object.freeze(offsets),
  });
  cache.set(key, layout);
  return layout;
}

// --- The struct definitions, in the spec's field order -------------------------

/** CDataInterface.rst, "The ArrowSchema structure". */
export const ArrowSchemaDef = {
  name: 'ArrowSchema',
  fields: [
    f('format', pointer, 'const char* format'),
    f('name', pointer, 'const char* name'),
    f('metadata', pointer, 'const char* metadata'),
    f('flags', int64, 'int64_t flags'),
    f('n_children', int64, 'int64_t n_children'),
    f('children', pointer, 'struct ArrowSchema** children'),
    f('dictionary', pointer, 'struct ArrowSchema* dictionary'),
    f('release', pointer, 'void (*release)(struct ArrowSchema*)'),
    f('private_data', pointer, 'void* private_data'),
  ],
} satisfies StructDef;

/** CDataInterface.rst, "The ArrowArray structure". */
export const ArrowArrayDef = {
  name: 'ArrowArray',
  fields: [
    f('length', int64, 'int64_t length'),
    f('null_count', int64, 'int64_t null_count'),
    f('offset', int64, 'int64_t offset'),
    f('n_buffers', int64, 'int64_t n_buffers'),
    f('n_children', int64, 'int64_t n_children'),
    f('buffers', pointer, 'const void** buffers'),
    f('children', pointer, 'struct ArrowArray** children'),
    f('dictionary', pointer, 'struct ArrowArray* dictionary'),
    f('release', pointer, 'void (*release)(struct ArrowArray*)'),
    f('private_data', pointer, 'void* private_data'),
  ],
} satisfies StructDef;

/** CStreamInterface.rst, "Structure definition". */
export const ArrowArrayStreamDef = {
  name: 'ArrowArrayStream',
  fields: [
    f('get_schema', pointer, 'int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out)'),
    f('get_next', pointer, 'int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out)'),
    f('get_last_error', pointer, 'const char* (*get_last_error)(struct ArrowArrayStream*)'),
    f('release', pointer, 'void (*release)(struct ArrowArrayStream*)'),
    f('private_data', pointer, 'void* private_data'),
  ],
} satisfies StructDef;

/**
 * CDeviceDataInterface.rst, "Structure Definitions". `device_type` is an
 * int32 followed by padding before `sync_event` on 64-bit targets, which
 * makes the struct 128 bytes there.
 */
export const ArrowDeviceArrayDef = {
  name: 'ArrowDeviceArray',
  fields: [
    f('array', { kind: 'struct', def: ArrowArrayDef }, 'struct ArrowArray array'),
    f('device_id', int64, 'int64_t device_id'),
    f('device_type', int32, 'ArrowDeviceType device_type'),
    f('sync_event', pointer, 'void* sync_event'),
    f('reserved', { kind: 'array', of: int64, length: 3 }, 'int64_t reserved[3]'),
  ],
} satisfies StructDef;

/** CDeviceDataInterface.rst, "Device Stream Interface". */
export const ArrowDeviceArrayStreamDef = {
  name: 'ArrowDeviceArrayStream',
  fields: [
    f('device_type', int32, 'ArrowDeviceType device_type'),
    f('get_schema', pointer, 'int (*get_schema)(struct ArrowDeviceArrayStream*, struct ArrowSchema*)'),
    f('get_next', pointer, 'int (*get_next)(struct ArrowDeviceArrayStream*, struct ArrowDeviceArray*)'),
    f('get_last_error', pointer, 'const char* (*get_last_error)(struct ArrowDeviceArrayStream*)'),
    f('release', pointer, 'void (*release)(struct ArrowDeviceArrayStream*)'),
    f('private_data', pointer, 'void* private_data'),
  ],
} satisfies StructDef;

/**
 * CDeviceDataInterface.rst, "Async Device Stream Interface". The text's
 * `struct ArrowArrayTask*` parameter is a typo for `struct ArrowAsyncTask*`
 * (as in Arrow C++'s abi.h); it does not change the layout.
 */
export const ArrowAsyncTaskDef = {
  name: 'ArrowAsyncTask',
  fields: [
    f('extract_data', pointer, 'int (*extract_data)(struct ArrowAsyncTask* self, struct ArrowDeviceArray* out)'),
    f('private_data', pointer, 'void* private_data'),
  ],
} satisfies StructDef;

/**
 * The spec text shows a `release` member here, but its field list does not,
 * and the header Arrow C++ ships and implements (abi.h) has none. Real
 * producers and consumers use the header's layout, so we do
 * (docs/architecture.md#struct-layouts-and-two-traps-in-the-spec-text).
 */
export const ArrowAsyncProducerDef = {
  name: 'ArrowAsyncProducer',
  fields: [
    f('device_type', int32, 'ArrowDeviceType device_type'),
    f('request', pointer, 'void (*request)(struct ArrowAsyncProducer* self, int64_t n)'),
    f('cancel', pointer, 'void (*cancel)(struct ArrowAsyncProducer* self)'),
    f('additional_metadata', pointer, 'const char* additional_metadata'),
    f('private_data', pointer, 'void* private_data'),
  ],
} satisfies StructDef;

export const ArrowAsyncDeviceStreamHandlerDef = {
  name: 'ArrowAsyncDeviceStreamHandler',
  fields: [
    f('on_schema', pointer, 'int (*on_schema)(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowSchema* stream_schema)'),
    f(
      'on_next_task',
      pointer,
      'int (*on_next_task)(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowAsyncTask* task, const char* metadata)',
    ),
    f(
      'on_error',
      pointer,
      'void (*on_error)(struct ArrowAsyncDeviceStreamHandler* self, int code, const char* message, const char* metadata)',
    ),
    f('release', pointer, 'void (*release)(struct ArrowAsyncDeviceStreamHandler* self)'),
    f('producer', pointer, 'struct ArrowAsyncProducer* producer'),
    f('private_data', pointer, 'void* private_data'),
  ],
} satisfies StructDef;

/** Every struct of the interfaces, in dependency order. */
export const ALL_STRUCTS: readonly StructDef[] = [
  ArrowSchemaDef,
  ArrowArrayDef,
  ArrowArrayStreamDef,
  ArrowDeviceArrayDef,
  ArrowDeviceArrayStreamDef,
  ArrowAsyncTaskDef,
  ArrowAsyncProducerDef,
  ArrowAsyncDeviceStreamHandlerDef,
];

/** The layouts of every struct for one target, by struct name. */
export interface Layouts {
  /** The target every layout here is for. */
  readonly target: Target;
  /** `struct ArrowSchema` (CDataInterface.rst, "The ArrowSchema structure"). */
  readonly ArrowSchema: StructLayout;
  /** `struct ArrowArray` (CDataInterface.rst, "The ArrowArray structure"). */
  readonly ArrowArray: StructLayout;
  /** `struct ArrowArrayStream` (CStreamInterface.rst, "The ArrowArrayStream structure"). */
  readonly ArrowArrayStream: StructLayout;
  /** `struct ArrowDeviceArray` (CDeviceDataInterface.rst, "The ArrowDeviceArray structure"). */
  readonly ArrowDeviceArray: StructLayout;
  /** `struct ArrowDeviceArrayStream` (CDeviceDataInterface.rst, "The ArrowDeviceArrayStream structure"). */
  readonly ArrowDeviceArrayStream: StructLayout;
  /** `struct ArrowAsyncTask` (CDeviceDataInterface.rst, "The ArrowAsyncTask structure"). */
  readonly ArrowAsyncTask: StructLayout;
  /** `struct ArrowAsyncProducer` (CDeviceDataInterface.rst, "The ArrowAsyncProducer structure"), without a `release` member, as Arrow C++'s `abi.h` declares it. */
  readonly ArrowAsyncProducer: StructLayout;
  /** `struct ArrowAsyncDeviceStreamHandler` (CDeviceDataInterface.rst, "The ArrowAsyncDeviceStreamHandler structure"). */
  readonly ArrowAsyncDeviceStreamHandler: StructLayout;
}

const layoutsCache = new Map<Target, Layouts>();

/**
 * All layouts for `target`, computed once per target and frozen.
 *
 * @example
 * const wasm = layoutsFor(WASM32);
 * wasm.ArrowArray.size;                 // 64: five int64s, five 4-byte pointers, rounded up to 8
 * wasm.ArrowArray.offsets.n_buffers;    // 24
 * layoutsFor(NATIVE64).ArrowArray.size; // 80: five int64s, five 8-byte pointers
 */
export function layoutsFor(target: Target): Layouts {
  let l = layoutsCache.get(target);
  if (!l) {
    l = Object.freeze({
      target,
      ArrowSchema: layoutOf(ArrowSchemaDef, target),
      ArrowArray: layoutOf(ArrowArrayDef, target),
      ArrowArrayStream: layoutOf(ArrowArrayStreamDef, target),
      ArrowDeviceArray: layoutOf(ArrowDeviceArrayDef, target),
      ArrowDeviceArrayStream: layoutOf(ArrowDeviceArrayStreamDef, target),
      ArrowAsyncTask: layoutOf(ArrowAsyncTaskDef, target),
      ArrowAsyncProducer: layoutOf(ArrowAsyncProducerDef, target),
      ArrowAsyncDeviceStreamHandler: layoutOf(ArrowAsyncDeviceStreamHandlerDef, target),
    });
    layoutsCache.set(target, l);
  }
  return l;
}
