/**
 * Typed accessors of every struct field, generated from the ABI tables
 * (layout.ts) for each target: `access(target).ArrowArray.length.get(dv, at)`
 * reads the `length` of the `ArrowArray` whose bytes start at `at` of `dv`.
 *
 * Struct bytes are read from a DataView (src/memory/raw.ts `stage`: one copy
 * of the struct into JS memory, or the memory itself where JS can read it in
 * place), so a field read is a DataView call at a constant offset: no FFI
 * call, no field name looked up at run time, no offset typed in by hand. A
 * misspelt field is a compile error (the names are the definitions' own).
 *
 * Values are numbers: int32 as is; int64 exact within ±(2^53 - 1) and
 * ±Infinity beyond (`big` gives the exact value, for messages); pointers as
 * addresses (src/memory/raw.ts `Addr`: a value of 2^53 or more comes back
 * inexact but at least 2^53, which no address check accepts).
 */
import {
  ArrowArrayDef, ArrowArrayStreamDef, ArrowAsyncDeviceStreamHandlerDef, ArrowAsyncProducerDef, ArrowAsyncTaskDef,
  ArrowDeviceArrayDef, ArrowDeviceArrayStreamDef, ArrowSchemaDef, layoutsFor,
  type FieldName, type FieldType, type StructDef, type StructLayout, type Target,
} from './layout.js';

/** One field of a struct, at its offset for one target. */
export interface FieldAccess {
  /** Byte offset of the field in its struct. */
  readonly offset: number;
  /** Bytes of the field (of one element, for an array field). */
  readonly size: number;
  /** The field of the struct at `at` of `dv` (for an array field, element `i`). */
  get(dv: DataView, at: number, i?: number): number;
  /** Writes `v` (a safe integer; for pointers an address below 2^53) into the field. */
  set(dv: DataView, at: number, v: number, i?: number): void;
  /** The exact value of an integer field (for messages, and device addresses of any width). */
  big(dv: DataView, at: number, i?: number): bigint;
  /** Writes an exact bigint into an integer field (a pointer: its width's unsigned value). */
  setBig(dv: DataView, at: number, v: bigint, i?: number): void;
}

/** Every field of a struct, by name, and the struct's size. */
export type StructAccess<N extends string> = { readonly [K in N]: FieldAccess } & { readonly $size: number };

export interface Access {
  readonly target: Target;
  readonly ArrowSchema: StructAccess<FieldName<typeof ArrowSchemaDef>>;
  readonly ArrowArray: StructAccess<FieldName<typeof ArrowArrayDef>>;
  readonly ArrowArrayStream: StructAccess<FieldName<typeof ArrowArrayStreamDef>>;
  readonly ArrowDeviceArray: StructAccess<FieldName<typeof ArrowDeviceArrayDef>>;
  readonly ArrowDeviceArrayStream: StructAccess<FieldName<typeof ArrowDeviceArrayStreamDef>>;
  readonly ArrowAsyncTask: StructAccess<FieldName<typeof ArrowAsyncTaskDef>>;
  readonly ArrowAsyncProducer: StructAccess<FieldName<typeof ArrowAsyncProducerDef>>;
  readonly ArrowAsyncDeviceStreamHandler: StructAccess<FieldName<typeof ArrowAsyncDeviceStreamHandlerDef>>;
}

const TWO_32 = 4294967296;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

function i64Get(dv: DataView, at: number): number {
  const v = dv.getInt32(at + 4, true) * TWO_32 + dv.getUint32(at, true);
  return v > MAX_SAFE ? Infinity : v < -MAX_SAFE ? -Infinity : v;
}

function i64Set(dv: DataView, at: number, v: number): void {
  dv.setUint32(at, v >>> 0, true);
  dv.setInt32(at + 4, Math.floor(v / TWO_32), true);
}

/** The accessor of a field of `type` at `offset`. */
function field(type: FieldType, offset: number, target: Target): FieldAccess {
  switch (type.kind) {
    case 'int32':
      return {
        offset,
        size: 4,
        get: (dv, at) => dv.getInt32(at + offset, true),
        set: (dv, at, v) => dv.setInt32(at + offset, v, true),
        big: (dv, at) => BigInt(dv.getInt32(at + offset, true)),
        setBig: (dv, at, v) => dv.setInt32(at + offset, Number(BigInt.asIntN(32, v)), true),
      };
    case 'int64':
      return {
        offset,
        size: 8,
        get: (dv, at) => i64Get(dv, at + offset),
        set: (dv, at, v) => i64Set(dv, at + offset, v),
        big: (dv, at) => dv.getBigInt64(at + offset, true),
        setBig: (dv, at, v) => dv.setBigInt64(at + offset, v, true),
      };
    case 'pointer':
      return target.pointerSize === 8
        ? {
            offset,
            size: 8,
            get: (dv, at) => dv.getUint32(at + offset + 4, true) * TWO_32 + dv.getUint32(at + offset, true),
            set: (dv, at, v) => {
              dv.setUint32(at + offset, v >>> 0, true);
              dv.setUint32(at + offset + 4, Math.floor(v / TWO_32), true);
            },
            big: (dv, at) => dv.getBigUint64(at + offset, true),
            setBig: (dv, at, v) => dv.setBigUint64(at + offset, BigInt.asUintN(64, v), true),
          }
        : {
            offset,
            size: 4,
            get: (dv, at) => dv.getUint32(at + offset, true),
            set: (dv, at, v) => dv.setUint32(at + offset, v, true),
            big: (dv, at) => BigInt(dv.getUint32(at + offset, true)),
            setBig: (dv, at, v) => dv.setUint32(at + offset, Number(BigInt.asUintN(32, v)), true),
          };
    case 'array': {
      // Element `i` (ArrowDeviceArray.reserved[i]): the element's accessor at its own offset.
      const size = type.of.kind === 'int32' ? 4 : type.of.kind === 'int64' ? 8 : target.pointerSize;
      const el = (i: number): FieldAccess => field(type.of, offset + i * size, target);
      const els = Array.from({ length: type.length }, (_, i) => el(i));
      const at = (i = 0): FieldAccess => {
        const e = els[i];
        if (e === undefined) throw new RangeError(`index ${i} is outside an array of ${type.length}`);
        return e;
      };
      return {
        offset,
        size,
        get: (dv, base, i) => at(i).get(dv, base),
        set: (dv, base, v, i) => at(i).set(dv, base, v),
        big: (dv, base, i) => at(i).big(dv, base),
        setBig: (dv, base, v, i) => at(i).setBig(dv, base, v),
      };
    }
    case 'struct': {
      // A struct member (ArrowDeviceArray.array): its offset; its own fields have their own accessors.
      const no = (): never => {
        throw new TypeError('a struct member has no value of its own: use its own fields');
      };
      return { offset, size: 0, get: no, set: no, big: no, setBig: no };
    }
  }
}

function structAccess<N extends string>(def: StructDef<N>, layout: StructLayout): StructAccess<N> {
  const out: Record<string, unknown> = { $size: layout.size };
  for (const f of def.fields) out[f.name] = Object.freeze(field(f.type, layout.offsets[f.name]!, layout.target));
  return Object.freeze(out) as StructAccess<N>;
}

const made = new Map<Target, Access>();

/** The accessors of every struct for `target` (made once per target). */
export function access(target: Target): Access {
  let a = made.get(target);
  if (a === undefined) {
    const L = layoutsFor(target);
    a = Object.freeze({
      target,
      ArrowSchema: structAccess(ArrowSchemaDef, L.ArrowSchema),
      ArrowArray: structAccess(ArrowArrayDef, L.ArrowArray),
      ArrowArrayStream: structAccess(ArrowArrayStreamDef, L.ArrowArrayStream),
      ArrowDeviceArray: structAccess(ArrowDeviceArrayDef, L.ArrowDeviceArray),
      ArrowDeviceArrayStream: structAccess(ArrowDeviceArrayStreamDef, L.ArrowDeviceArrayStream),
      ArrowAsyncTask: structAccess(ArrowAsyncTaskDef, L.ArrowAsyncTask),
      ArrowAsyncProducer: structAccess(ArrowAsyncProducerDef, L.ArrowAsyncProducer),
      ArrowAsyncDeviceStreamHandler: structAccess(ArrowAsyncDeviceStreamHandlerDef, L.ArrowAsyncDeviceStreamHandler),
    });
    made.set(target, a);
  }
  return a;
}
