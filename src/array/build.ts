/**
 * The arrow-js objects an import returns, built here (the one module that
 * makes arrow-js objects from imports) and released here.
 *
 * Every import has one `ImportOwner` (owner.ts); the objects returned
 * (`RecordBatch`, `Table`, `Vector`, `Data`) are subclasses that know their
 * owners and add `release()`, `released` and `[Symbol.dispose]()`, so
 * `using batch = importRecordBatch(...)` works. `releaseImport(x)` does the
 * same for any object an import returned (also an `ArrayView`).
 *
 * The `Data` of a zero-copy import is lazy: its buffers (`values`,
 * `valueOffsets`, `nullBitmap`, `typeIds`, and the variadic buffers of view
 * types) are made on first read by accessors on the prototype, which view
 * the producer's memory then, and keep what they made in the import's
 * record: building arrow-js objects over an import views nothing, and a
 * Data keeps one shape for its whole life. Released means unreadable:
 * release detaches every view (owner.ts), and every read through an
 * accessor checks the release and throws an error that says why.
 *
 * arrow-js's offset convention differs from C's: a `Data`'s `offset` applies
 * to its bitmaps only; values, offsets and type ids are sliced to the first
 * element, and the children of structs, sparse unions and fixed-size lists
 * are sliced to the parent's window. The builder applies it (`dataOf`).
 */
import { Data, Field, Int32, RecordBatch, Schema, Struct, Table, Utf8, Vector, type DataType, type TypeMap } from 'apache-arrow';
import { ArrowSymbols, type ArrowDeviceExportOptions, type ArrowSchemaExportable } from '../abi/protocol.js';
import { ArrowDeviceError, invalid, unsupported } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { ArrayExportHandles, ExportHandle } from '../memory/handle.js';
import { isDetached } from '../memory/detached.js';
import type { ImportOwner } from './owner.js';
import { defineReleasable, owned, ownersOf, type Releasable } from './owned.js';
import { Form, type Plan, type PlanNode, type TypedArrayCtor } from './plan.js';
import { batchSchemaOf, planWithType } from './plan-arrowjs.js';
import { setArrowJsBuilds } from './arrowjs-builds.js';
import { BUFFERS, childrenAt, END, ImportRead, LENGTH, N_BUFFERS, nodeBuffer, NULL_COUNT, OFFSET, pathAt } from './record.js';
import type { ArrayView } from './view.js';
import { viewOf } from './view.js';
import { expandView } from './expand.js';
import { layoutOf } from '../schema/layout.js';
import { parseFormat } from '../schema/format.js';
import { ARROW_21_2 } from '../schema/arrowjs.js';

// --- the objects and their release (the owners: owned.ts) -----------------------------------

export { owned, ownersOf, releaseImport, releaseObject, isImportReleased, type Releasable } from './owned.js';

/**
 * What an imported object adds for the exchange protocol (PROTOCOL.md),
 * installed by handoff.ts: `arrow.c_schema` exports its schema;
 * `arrow.c_array` and `arrow.c_device_array` hand it on to the next
 * consumer without a copy, by moving the producer's struct into the handle:
 * the object is then released (reads throw, reason "moved") whether or not
 * the consumer takes the handle. An import with no producer behind it
 * (`copy: true`) is exported from its JS memory and stays readable.
 */
export interface Exchangeable {
  /** The schema as an owned `ArrowSchema` handle; the object is unchanged. */
  [ArrowSymbols.schema](): ExportHandle;
  /** Hands the data on as `ArrowSchema` and `ArrowArray` handles (moved: the object is released). */
  [ArrowSymbols.array](requestedSchema?: ArrowSchemaExportable | null): ArrayExportHandles;
  /** Hands the data on as `ArrowSchema` and (CPU) `ArrowDeviceArray` handles (moved: the object is released). */
  [ArrowSymbols.deviceArray](requestedSchema?: ArrowSchemaExportable | null, options?: ArrowDeviceExportOptions): ArrayExportHandles;
}

/* eslint-disable @typescript-eslint/no-explicit-any -- arrow-js's own defaults for its type parameters */
/**
 * A `RecordBatch` an import returned: releasable, and handed on by the exchange protocol (see `Exchangeable`).
 * Its other members are arrow-js's `RecordBatch`'s (linked above), documented there.
 *
 * @example
 * function firstX(arrayPtr: bigint, schema: Schema): unknown {
 *   using batch = importRecordBatch(arrayPtr, schema);   // an ImportedRecordBatch
 *   return batch.getChild('x')?.get(0);
 * }                                                       // released on return, exactly once
 */
export class ImportedRecordBatch<T extends TypeMap = any> extends RecordBatch<T> {}
export interface ImportedRecordBatch<T extends TypeMap = any> extends Releasable, Exchangeable {}
defineReleasable(ImportedRecordBatch.prototype);

/**
 * A `Table` an import returned: releasing it releases every batch.
 * Its other members are arrow-js's `Table`'s (linked above), documented there.
 *
 * @example
 * const table = importArrayStream(streamPtr).toTable();  // an ImportedTable
 * console.log(table.numRows);
 * table.release();                                        // every batch's producer, now
 */
export class ImportedTable<T extends TypeMap = any> extends Table<T> {}
export interface ImportedTable<T extends TypeMap = any> extends Releasable {}
defineReleasable(ImportedTable.prototype);

/**
 * A `Vector` an import returned: releasable, and handed on by the exchange protocol (see `Exchangeable`).
 * Its other members are arrow-js's `Vector`'s (linked above), documented there.
 *
 * @example
 * using v = importVector(arrayPtr, schemaPtr);
 * const values = v.toArray().slice();  // a copy that outlives the release
 */
export class ImportedVector<T extends DataType = any> extends Vector<T> {}
export interface ImportedVector<T extends DataType = any> extends Releasable, Exchangeable {}
defineReleasable(ImportedVector.prototype);

/**
 * A `Data` an import returned: releasable, and handed on by the exchange protocol (see `Exchangeable`).
 * Its other members are arrow-js's `Data`'s (linked above), documented there.
 *
 * @example
 * const data = importData(arrayPtr, schemaPtr);
 * using pair = data[ArrowSymbols.array]();  // handed on without a copy: data is released
 * nativeLib.consume(pair.schema.address, pair.array.address);
 */
export class ImportedData<T extends DataType = any> extends Data<T> {}
export interface ImportedData<T extends DataType = any> extends Releasable, Exchangeable {}
defineReleasable(ImportedData.prototype);
/* eslint-enable @typescript-eslint/no-explicit-any */

// --- lazy Data ---------------------------------------------------------------------------

/** Shared by every leaf `Data` of an import for its children and variadic buffers (arrow-js only reads them). */
const NONE: readonly never[] = Object.freeze([]);
const EMPTY = new Uint8Array(0);

const READ = Symbol('arrow-device.read');
const AT = Symbol('arrow-device.at');
const NODE = Symbol('arrow-device.node');
/** Where the Data's slots start in the record's `slots` (5 per Data, in the order the Data were made). */
const SLOT = Symbol('arrow-device.slot');

type SlotKey = 'valueOffsets' | 'values' | 'nullBitmap' | 'typeIds' | 'variadicBuffers';
const SLOT_INDEX: Record<SlotKey, number> = { valueOffsets: 0, values: 1, nullBitmap: 2, typeIds: 3, variadicBuffers: 4 };
/** What a slot holds where the node's form has nothing for it (`typeIds` of a list). */
const NO_SLOT = Symbol('arrow-device.no-slot');

/**
 * A `Data` of an import whose buffers are made on first read (see the file
 * comment). It holds the import's record, which keeps the producer's memory
 * alive while the Data is reachable (the record is the import's keep-alive
 * token), the node's position there, and its plan node.
 */
class LazyData extends ImportedData {
  declare [READ]: ImportRead;
  declare [AT]: number;
  declare [NODE]: PlanNode;
  declare [SLOT]: number;
  constructor(read: ImportRead, pn: PlanNode, at: number, type: DataType, O: number, N: number, nullCount: number, children: Data[], dictionary: Vector | undefined) {
    super(type, O, N, nullCount, undefined as never, children, dictionary);
    this[READ] = read;
    this[AT] = at;
    this[NODE] = pn;
    this[SLOT] = read.nData++ * 5;
  }
}

/** A `LazyData` of a view type: its variadic buffers are lazy too (only here, so the others keep a plain `variadicBuffers`). */
class LazyViewData extends LazyData {}

/**
 * The accessor of a buffer slot. Its value is made once and kept in the
 * record (`slots`, by node and slot), not on the Data: the Data keeps one
 * shape for its whole life, so a loop over many of them is optimised once
 * (a shape changed by the first read made such loops run their first passes
 * unoptimised). Every read checks the release (released means unreadable,
 * with the reason) and, on WebAssembly memory, that the memory has not grown
 * since the view was made (which detaches it: a detached typed array reads
 * as empty, and arrow-js would return wrong values silently).
 */
function lazySlot(key: SlotKey): PropertyDescriptor {
  const index = SLOT_INDEX[key];
  return {
    configurable: true,
    get(this: LazyData) {
      const read = this[READ];
      // Read by arrow-js's Data constructor, before the record is set.
      if (read === undefined) return undefined;
      const owner = read.owner;
      if (owner !== null && owner.isReleased) owner.check(pathAt(read, this[AT]), 'a read');
      const slots = (read.slots ??= []);
      const i = this[SLOT] + index;
      let v = slots[i];
      if (v === undefined) slots[i] = v = slotOf(read, this[NODE], this[AT], key, this.offset, this.length, counted(this)) ?? NO_SLOT;
      if (v === NO_SLOT) return undefined;
      if (read.mem?.viewsShareBuffer) checkAttached(read, this[AT], key, v);
      return v;
    },
    set(this: LazyData, v: unknown) {
      // The Data constructor's assignments (before the record is set) are the record's to make;
      // arrow-js's own (setValid's bitmap) replace the slot.
      const read = this[READ];
      if (read !== undefined) (read.slots ??= [])[this[SLOT] + index] = v;
    },
  };
}

function checkAttached(read: ImportRead, at: number, key: SlotKey, v: unknown): void {
  for (const x of Array.isArray(v) ? v : [v]) {
    if (ArrayBuffer.isView(x) && isDetached(x)) {
      throw new ArrowDeviceError(
        'memory',
        `${pathAt(read, at)}.${key}`,
        "this buffer was viewed in a WebAssembly module's memory before the memory grew, which detached the view; " +
          'read the data after the module is done growing its memory, or import with { copy: true }',
      );
    }
  }
}

for (const key of ['valueOffsets', 'values', 'nullBitmap', 'typeIds'] as const) Object.defineProperty(LazyData.prototype, key, lazySlot(key));
Object.defineProperty(LazyViewData.prototype, 'variadicBuffers', lazySlot('variadicBuffers'));

/** Whether a Data's bitmap is used: the null count the builder gave it (0 where it has none). */
function counted(d: Data): boolean {
  return (d as unknown as { _nullCount: number })._nullCount !== 0;
}

/**
 * Whether a `LazyData` gives what arrow-js's own `Data` gives over the same
 * buffers, checked once against the arrow-js in use on an int32, a utf8 and
 * a utf8_view node (`LazyViewData`) with a null, at an offset, with the
 * null count known and unknown (-1): the same own properties (the buffer fields stay accessors: a
 * constructor that defined them as own fields would hide the lazy ones), the
 * same fields arrow-js reads (`type`, `offset`, `length`, `stride`,
 * `_nullCount`, `nullCount`, the four buffers, `variadicBuffers`,
 * `children`, `dictionary`), and the same values, validity, byte length and
 * slice. Where it fails, `dataOf` makes every buffer's view at import and
 * gives arrow-js's constructor plain buffers: the same values, but a Data
 * read after its release then reads as empty instead of throwing (nine
 * ownership tests fail that way with the check forced off), so
 * test/array/shortcuts.test.ts keeps it true for the arrow-js the package
 * is tested with.
 */
export let LAZY_DATA: boolean | undefined;
/** `LAZY_DATA`, checked on the first import that builds a `Data` (not at load: a process that imports nothing pays nothing). */
export function lazyDataHolds(): boolean {
  return (LAZY_DATA ??= checkLazyData(false));
}

/**
 * `LAZY_DATA` for `LazyViewData` (utf8_view, binary_view): its own probes, run on the first import of
 * such a column, since they run arrow-js code an import of other types never does (a few ms in a fresh
 * process); `LazyData`'s must hold too.
 */
export let LAZY_VIEW_DATA: boolean | undefined;
export function lazyViewDataHolds(): boolean {
  return (LAZY_VIEW_DATA ??= lazyDataHolds() && checkLazyData(true));
}

/** The probes of `LazyData` (int32 and utf8), or with `views` those of `LazyViewData` (utf8_view). */
function checkLazyData(views: boolean): boolean {
  try {
    const probe = (format: string, type: DataType, form: Form, c: Uint8Array[], arrowBuffers: (c: Uint8Array[]) => unknown[], nullCount: number, variadic: (c: Uint8Array[]) => Uint8Array[] = () => []): boolean => {
      // C: length 3 at offset 1 of 4 values, the second of the window null.
      const read = new ImportRead(null as never, null, null, 'probe', 0, false);
      read.nums.push(3, 1, nullCount === -1 ? 1 : nullCount, c.length, BUFFERS + 2 * c.length);
      read.views = new Map();
      for (const b of c) {
        read.views.set(read.nums.length, b);
        read.nums.push(1, b.byteLength);
      }
      read.length = read.nums.length;
      const pn = { form, layout: layoutOf(parseFormat(format)), Ctor: Int32Array, stride: 1, children: [], dictionary: null, type } as unknown as PlanNode;
      const views = form === Form.Views;
      const lazy = new (views ? LazyViewData : LazyData)(read, pn, 0, type, 1, 3, nullCount, NONE as never, undefined) as unknown as Record<string, unknown> & Data;
      const copies = c.map((b) => b.slice());
      const own = new Data(type, 1, 3, nullCount, arrowBuffers(copies) as never, [], undefined, variadic(copies)) as unknown as Record<string, unknown> & Data;
      const str = (o: object): string => Reflect.ownKeys(o).filter((k) => typeof k === 'string').join(',');
      const bufferKeys = ['valueOffsets', 'values', 'nullBitmap', 'typeIds', ...(views ? ['variadicBuffers'] : [])];
      const sameBuf = (a: unknown, b: unknown): boolean =>
        a === b ||
        (ArrayBuffer.isView(a) && ArrayBuffer.isView(b) && a.constructor === b.constructor && String(a) === String(b)) ||
        (Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, k) => sameBuf(x, b[k])));
      const ok =
        str(own).split(',').filter((k) => !bufferKeys.includes(k)).join(',') === str(lazy) &&
        bufferKeys.every((k) => !Object.hasOwn(lazy, k) && sameBuf(lazy[k], own[k])) &&
        ['type', 'offset', 'length', 'stride', '_nullCount', 'dictionary'].every((k) => lazy[k] === own[k]) &&
        lazy.children.length === 0 && own.children.length === 0 &&
        // No variadicBuffers before apache-arrow 21.2.0: then the lazy Data has none either.
        (own.variadicBuffers === undefined
          ? lazy.variadicBuffers === undefined
          : Array.isArray(lazy.variadicBuffers) && lazy.variadicBuffers.length === own.variadicBuffers.length) &&
        lazy.nullCount === own.nullCount && lazy.nullCount === 1 && lazy["_nullCount"] === own["_nullCount"] && lazy["_nullCount"] === 1 &&
        lazy.getValid(0) && !lazy.getValid(1) && own.getValid(0) && !own.getValid(1) &&
        lazy.byteLength === own.byteLength && lazy.nullable === own.nullable &&
        JSON.stringify(new Vector([lazy]).toArray()) === JSON.stringify(new Vector([own]).toArray()) &&
        JSON.stringify(new Vector([lazy.slice(1, 2)]).toArray()) === JSON.stringify(new Vector([own.slice(1, 2)]).toArray()) &&
        lazy.slice(1, 2).nullCount === own.slice(1, 2).nullCount;
      return ok;
    };
    // Bitmap 0b1011: with offset 1 the window is valid, null, valid.
    const ints = (nc: number): boolean =>
      probe('i', new Int32(), Form.Fixed, [Uint8Array.of(0b1011), new Uint8Array(Int32Array.of(5, 6, 7, 8).buffer)], (c) => [undefined, new Int32Array(c[1]!.buffer).subarray(1, 4), c[0]], nc);
    const strings = (nc: number): boolean =>
      probe('u', new Utf8(), Form.Offsets32, [Uint8Array.of(0b1011), new Uint8Array(Int32Array.of(0, 1, 3, 3, 6).buffer), Uint8Array.of(97, 98, 99, 100, 101, 102)], (c) => [new Int32Array(c[1]!.buffer).subarray(1, 5), c[2], c[0]], nc);
    // utf8_view: 'x', a 16-byte string in the data buffer, 'yz', the same long string.
    const long = Array.from('abcdefghijklmnop', (ch) => ch.charCodeAt(0));
    const viewBytes = (): Uint8Array => {
      const v = new Uint8Array(64);
      const dv = new DataView(v.buffer);
      const inline = (i: number, str: string): void => { dv.setInt32(i * 16, str.length, true); for (let k = 0; k < str.length; k++) v[i * 16 + 4 + k] = str.charCodeAt(k); };
      const out = (i: number): void => { dv.setInt32(i * 16, 16, true); v.set(long.slice(0, 4), i * 16 + 4); dv.setInt32(i * 16 + 8, 0, true); dv.setInt32(i * 16 + 12, 0, true); };
      inline(0, 'x'); out(1); inline(2, 'yz'); out(3);
      return v;
    };
    // No Utf8View before apache-arrow 21.2.0 (ARROW_21_2): no view type is ever built there, nor this shortcut.
    const Utf8View = ARROW_21_2.Utf8View;
    const stringViews = (nc: number): boolean =>
      Utf8View !== undefined &&
      probe('vu', new Utf8View(), Form.Views, [Uint8Array.of(0b1011), viewBytes(), Uint8Array.from(long), new Uint8Array(BigInt64Array.of(16n).buffer)], (c) => [undefined, c[1]!.subarray(16, 64), c[0]], nc, (c) => [c[2]!]);
    return views ? stringViews(1) && stringViews(-1) : ints(1) && ints(-1) && strings(1) && strings(-1);
  } catch {
    return false;
  }
}

// --- slots -------------------------------------------------------------------------------

/**
 * Elements [start, start + n) of a typed array over the bytes of `b`, as far
 * as `b` has them (zero-copy; the reader aligns what it views).
 */
function typedAt<C extends TypedArrayCtor>(Ctor: C, b: Uint8Array | null, start: number, n: number): InstanceType<C> {
  const all = b === null ? 0 : Math.floor(b.byteLength / Ctor.BYTES_PER_ELEMENT);
  const from = Math.min(start, all);
  if (all === 0) return new Ctor(0) as InstanceType<C>;
  return new Ctor(b!.buffer as ArrayBuffer, b!.byteOffset + from * Ctor.BYTES_PER_ELEMENT, Math.min(n, all - from)) as InstanceType<C>;
}

/** C buffer `k` of the node at `p`: viewed (or the copy made at import). */
function buf(read: ImportRead, pn: PlanNode, p: number, k: number): Uint8Array | null {
  return nodeBuffer(read, pn, p, k, read.copy);
}

/**
 * Slot `key` of a `Data` of the node at `p` whose arrow-js offset and length
 * are `O` and `N`, in arrow-js's slicing convention (the file comment).
 */
function slotOf(read: ImportRead, pn: PlanNode, p: number, key: SlotKey, O: number, N: number, counted: boolean): unknown {
  if (key === 'nullBitmap') {
    if (!pn.layout.hasValidity || !counted) return EMPTY;
    return buf(read, pn, p, 0) ?? EMPTY;
  }
  switch (pn.form) {
    case Form.Bits:
      return key === 'values' ? (buf(read, pn, p, 1) ?? EMPTY) : undefined;
    case Form.Fixed:
      return key === 'values' ? typedAt(pn.Ctor!, buf(read, pn, p, 1), O * pn.stride, N * pn.stride) : undefined;
    case Form.Indices:
      return key === 'values' ? typedAt(pn.Ctor!, buf(read, pn, p, 1), O, N) : undefined;
    case Form.Offsets32: case Form.Offsets64:
      if (key === 'valueOffsets') {
        const o = typedAt(pn.form === Form.Offsets32 ? Int32Array : BigInt64Array, buf(read, pn, p, 1), O, N + 1);
        return o.length ? o : pn.form === Form.Offsets32 ? new Int32Array(1) : new BigInt64Array(1);
      }
      // binary/utf8 have their data in buffer 2; lists and maps have none.
      return key === 'values' && pn.children.length === 0 ? (buf(read, pn, p, 2) ?? EMPTY) : undefined;
    case Form.Views:
      if (key === 'values') return (buf(read, pn, p, 1) ?? EMPTY).subarray(O * 16, (O + N) * 16);
      if (key === 'variadicBuffers') {
        const n = read.nums[p + N_BUFFERS]! - 3;
        const out: Uint8Array[] = new Array(n);
        for (let k = 0; k < n; k++) out[k] = buf(read, pn, p, 2 + k) ?? EMPTY;
        return out;
      }
      return undefined;
    case Form.Sparse:
      return key === 'typeIds' ? typedAt(Int8Array, buf(read, pn, p, 0), O, N) : undefined;
    case Form.Dense:
      if (key === 'typeIds') return typedAt(Int8Array, buf(read, pn, p, 0), O, N);
      return key === 'valueOffsets' ? typedAt(Int32Array, buf(read, pn, p, 1), O, N) : undefined;
    default:
      return undefined;
  }
}

// --- building ------------------------------------------------------------------------------

/**
 * The arrow-js `Data` of the node at `p` of `read` (plan node `pn`), seen
 * through a parent's window: its arrow-js offset is its own plus `add`, its
 * length `len` (-1: its own). Lazy over an import; made at once over copies
 * (`read.copy`).
 */
function dataOf(read: ImportRead, pn: PlanNode, p: number, add: number, len: number, root: boolean): Data {
  const nums = read.nums;
  const own = nums[p + LENGTH]!;
  const O = nums[p + OFFSET]! + add;
  const N = len < 0 ? own : len;
  let nullCount = nums[p + NULL_COUNT]!;
  // A null count means something only with a bitmap; in a window the nulls are the window's (arrow-js counts them).
  const counted = nullCount !== 0 && pn.layout.hasValidity && nums[p + BUFFERS] !== 0 && nums[p + BUFFERS + 1]! > 0;
  nullCount = !counted ? 0 : add !== 0 || N !== own ? -1 : nullCount;
  const type = pn.type!;
  let children: Data[] = NONE as never;

  switch (pn.form) {
    case Form.Null:
      return new (root ? ImportedData : Data)(type, O, N, N);
    case Form.Expanded:
    case Form.Narrowed:
      return copied(read, pn, p, add, N, root);
  }
  const at = childrenAt(read, p);
  const kids = pn.children;
  if (pn.form === Form.StructOrFixedList || pn.form === Form.Sparse) {
    // Struct and sparse union children are indexed like the parent; a fixed-size list's by `listSize`.
    const size = pn.layout.listSize;
    children = new Array(kids.length);
    for (let k = 0; k < kids.length; k++) {
      children[k] = size > 0 ? dataOf(read, kids[k]!, at[k]!, O * size, N * size, false) : dataOf(read, kids[k]!, at[k]!, O, N, false);
    }
  } else if (kids.length > 0) {
    children = new Array(kids.length);
    for (let k = 0; k < kids.length; k++) children[k] = dataOf(read, kids[k]!, at[k]!, 0, -1, false);
  }
  const dictionary = pn.dictionary === null ? undefined : new Vector([dataOf(read, pn.dictionary, at[kids.length]!, 0, -1, false)]);
  if (!read.copy) {
    if (pn.form !== Form.Views) {
      if (LAZY_DATA ?? lazyDataHolds()) return new LazyData(read, pn, p, pn.type!, O, N, nullCount, children, dictionary);
    } else if (LAZY_VIEW_DATA ?? lazyViewDataHolds()) return new LazyViewData(read, pn, p, pn.type!, O, N, nullCount, children, dictionary);
  }
  const slot = (k: SlotKey): unknown => slotOf(read, pn, p, k, O, N, counted);
  const buffers = [slot('valueOffsets'), slot('values'), slot('nullBitmap'), slot('typeIds')];
  return new (root ? ImportedData : Data)(type, O, N, nullCount, buffers as never, children, dictionary, (slot('variadicBuffers') as Uint8Array[] | undefined) ?? []);
}

/**
 * The nodes arrow-js cannot hold as they are, copied (under `expand`): list
 * views and run-end encoded arrays expanded (expand.ts), 64-bit dictionary
 * indices narrowed to int32, each checked as it is copied.
 */
function copied(read: ImportRead, pn: PlanNode, p: number, add: number, N: number, root: boolean): Data {
  const path = pathAt(read, p);
  if (pn.form === Form.Narrowed) {
    const nums = read.nums;
    const O = nums[p + OFFSET]! + add;
    const t = pn.schema.type as { signed: boolean };
    const wide = typedAt(t.signed ? BigInt64Array : BigUint64Array, buf(read, pn, p, 1), O, N);
    const counted = nums[p + NULL_COUNT] !== 0 && nums[p + BUFFERS] !== 0;
    const validity = counted ? buf(read, pn, p, 0) : null;
    const out = new Int32Array(N);
    for (let k = 0; k < N; k++) {
      const x = wide[k]!;
      if (x > 2147483647n || x < 0n) {
        const valid = validity === null || (validity[(O + k) >> 3]! & (1 << ((O + k) & 7))) !== 0;
        if (valid) throw unsupported(`${path}.buffers[1]`, `dictionary index ${x} at ${O + k} does not fit the int32 that { expand: true } narrows 64-bit indices to`);
        continue; // a null slot's index is never read
      }
      out[k] = Number(x);
    }
    liveCounters.copiedBytes += out.byteLength;
    const dict = new Vector([dataOf(read, pn.dictionary!, childrenAt(read, p)[pn.children.length]!, 0, -1, false)]);
    const bitmap = validity ?? EMPTY;
    return new (root ? ImportedData : Data)(pn.type!, O, N, counted ? -1 : 0, [undefined, out, bitmap] as never, [], dict);
  }
  // An expansion copies bytes (expand.ts): any error other than ours comes out as a typed error at the node.
  let d: Data;
  try {
    const expanded = expandView(viewOf(read, pn, p), pn, path);
    d = dataFromView(expanded, pn.type!, path, true);
  } catch (e) {
    if (e instanceof ArrowDeviceError) throw e;
    throw new ArrowDeviceError('unsupported', path, `arrow-js cannot expand this array: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  if (add !== 0 || N !== d.length) d = d.slice(add, N);
  return root ? asImportedData(d) : d;
}

/** `d` (a Data a copy made) as an `ImportedData`: the same fields, the releasable prototype. */
function asImportedData(d: Data): ImportedData {
  return new ImportedData(d.type, d.offset, d.length, d.nullCount, d, d.children, d.dictionary, d.variadicBuffers);
}

/** The arrow-js `Data` of a whole import: lazy over the producer's buffers (or over the copies, with `copy`). */
export function buildData(read: ImportRead): ImportedData {
  read.plan.type();
  return dataOf(read, read.plan.root, 0, 0, -1, true) as ImportedData;
}

/**
 * The `RecordBatch` of an import of a struct array: its columns are the
 * struct's children in the struct's window, its schema the plan's.
 */
export function buildBatch(read: ImportRead): ImportedRecordBatch {
  const { schema, struct } = read.plan.batch();
  const pn = read.plan.root;
  const nums = read.nums;
  const O = nums[OFFSET]!;
  const N = nums[LENGTH]!;
  const kids = pn.children;
  const children: Data[] = new Array(kids.length);
  const at = childrenAt(read, 0);
  for (let k = 0; k < kids.length; k++) children[k] = dataOf(read, kids[k]!, at[k]!, O, N, false);
  return makeBatch(schema, struct, children, N);
}

/**
 * `new RecordBatch(schema, data)` made without arrow-js's constructor
 * where its columns all have the batch's length: the constructor then only
 * rebuilds the schema (`schema.assign`, by field name: a new schema object
 * per batch, and with repeated names a wrong one: gold case
 * duplicate_fieldnames) and the struct `Data`. `BATCH_SHORTCUT` checks once,
 * against this arrow-js, that the constructor makes nothing but these three
 * own properties; test/array/shortcuts.test.ts keeps it true for the
 * arrow-js the package is tested with.
 */
export function makeBatch(schema: Schema, struct: Struct, children: Data[], N: number): ImportedRecordBatch {
  const data = new Data(struct, 0, N, 0, [undefined, undefined, EMPTY] as never, children) as Data<Struct>;
  let same = (BATCH_SHORTCUT ?? batchShortcutHolds()) && children.length === schema.fields.length;
  for (let i = 0; same && i < children.length; i++) same = children[i]!.length === N;
  if (!same) return new ImportedRecordBatch(schema, data);
  return batchFields(schema, data);
}

/**
 * Whether arrow-js's RecordBatch constructor gives a batch its own `_metadata` (apache-arrow 21.2.0 on;
 * 21.0 and 21.1 have no batch metadata): `batchFields` makes the fields it makes. Set by the check.
 */
let batchMetadata = true;

function batchFields(schema: Schema, data: Data<Struct>): ImportedRecordBatch {
  const b = Object.create(ImportedRecordBatch.prototype) as { schema: Schema; data: Data<Struct>; _metadata?: Map<string, string> };
  b.schema = schema;
  b.data = data;
  if (batchMetadata) b._metadata = new Map();
  return b as unknown as ImportedRecordBatch;
}

/**
 * Whether arrow-js's RecordBatch constructor makes what `batchFields` makes
 * (see `makeBatch`), checked on a two-column batch with metadata: the same
 * prototype and own properties; a schema equal field by field (the
 * constructor's is a copy: `schema.assign`); a struct `Data` with the same
 * fields and the very same children; an empty `_metadata` where arrow-js
 * makes one (`batchMetadata`); and the same values read back.
 */
export let BATCH_SHORTCUT: boolean | undefined;
/** `BATCH_SHORTCUT`, checked on the first batch made (not at load). */
export function batchShortcutHolds(): boolean {
  return (BATCH_SHORTCUT ??= checkBatchShortcut());
}

function checkBatchShortcut(): boolean {
  try {
    const fields = [new Field('a', new Int32(), true, new Map([['m', '1']])), new Field('b', new Utf8(), false)];
    const schema = new Schema(fields, new Map([['k', 'v']]));
    const data = (): Data<Struct> =>
      new Data(new Struct(fields), 0, 2, 0, [undefined, undefined, EMPTY] as never, [
        new Data(new Int32(), 0, 2, 1, [undefined, Int32Array.of(7, 8), Uint8Array.of(2)] as never),
        new Data(new Utf8(), 0, 2, 0, [Int32Array.of(0, 1, 3), Uint8Array.of(120, 121, 122)] as never),
      ]) as Data<Struct>;
    const d = data();
    const slow = new ImportedRecordBatch(schema, d) as unknown as Record<string | symbol, unknown>;
    batchMetadata = Object.hasOwn(slow, '_metadata');
    const fast = batchFields(schema, data()) as unknown as Record<string | symbol, unknown>;
    return sameBatch(slow, fast) && (slow.data as Data).children.every((c, i) => c === d.children[i]);
  } catch {
    return false;
  }
}

/** What `BATCH_SHORTCUT` compares (children by value: the check makes each batch its own). */
function sameBatch(slow: Record<string | symbol, unknown>, fast: Record<string | symbol, unknown>): boolean {
  const keys = (o: object): string => Reflect.ownKeys(o).map(String).join(',');
  const sameMap = (a: unknown, b: unknown): boolean =>
    a instanceof Map && b instanceof Map && a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
  const s1 = slow.schema as Schema;
  const s2 = fast.schema as Schema;
  const d1 = slow.data as Data<Struct>;
  const d2 = fast.data as Data<Struct>;
  const b1 = slow as unknown as RecordBatch;
  const b2 = fast as unknown as RecordBatch;
  return (
    Object.getPrototypeOf(slow) === Object.getPrototypeOf(fast) &&
    keys(slow) === (batchMetadata ? 'schema,data,_metadata' : 'schema,data') && keys(fast) === keys(slow) &&
    Object.getPrototypeOf(s1) === Object.getPrototypeOf(s2) && keys(s1) === keys(s2) &&
    sameMap(s1.metadata, s2.metadata) && s1.fields.length === s2.fields.length &&
    s1.fields.every((f, i) => {
      const g = s2.fields[i]!;
      return f.name === g.name && f.nullable === g.nullable && String(f.type) === String(g.type) && f.typeId === g.typeId && sameMap(f.metadata, g.metadata);
    }) &&
    Object.getPrototypeOf(d1) === Object.getPrototypeOf(d2) && keys(d1) === keys(d2) &&
    String(d1.type) === String(d2.type) && d1.offset === d2.offset && d1.length === d2.length && d1.nullCount === d2.nullCount &&
    d1.children.length === d2.children.length &&
    (!batchMetadata || (sameMap(slow._metadata, fast._metadata) && (slow._metadata as Map<string, string>).size === 0)) &&
    b1.numRows === b2.numRows && b1.numCols === b2.numCols &&
    JSON.stringify(b1.toArray()) === JSON.stringify(b2.toArray())
  );
}

/** An `ImportedTable` of imported batches (of `schema` when there are none), owned by their owners. */
export function importedTable(batches: readonly ImportedRecordBatch[], schema: Schema): ImportedTable {
  // With repeated field names arrow-js rejects new Table(schema, batches) (its schema comparison
  // goes by name), so a table of batches takes its schema from them.
  const t = batches.length === 0 ? new ImportedTable(schema) : makeTable([...batches]);
  return owned(t, batches.flatMap((b) => ownersOf(b) ?? []));
}

/**
 * `new ImportedTable(batches)` made without arrow-js's constructor where
 * every batch has the first one's schema object (an import's batches share
 * their plan's): the constructor then only stores the schema, the batches
 * and the running sum of their lengths, after flattening its arguments and
 * comparing each batch's schema with itself (work bench:wasm shows in a
 * one-batch import). `TABLE_SHORTCUT` checks once,
 * against this arrow-js, that the constructor makes exactly these three
 * own properties; test/array/shortcuts.test.ts keeps it true for the
 * arrow-js the package is tested with.
 */
function makeTable(batches: ImportedRecordBatch[]): ImportedTable {
  const schema = batches[0]!.schema;
  let same = TABLE_SHORTCUT ?? tableShortcutHolds();
  for (let i = 1; same && i < batches.length; i++) same = batches[i]!.schema === schema;
  if (!same) return new ImportedTable(batches);
  return tableFields(schema, batches);
}

function tableFields(schema: Schema, batches: RecordBatch[]): ImportedTable {
  const t = Object.create(ImportedTable.prototype) as { schema: Schema; batches: RecordBatch[]; _offsets: Uint32Array };
  t.schema = schema;
  t.batches = batches;
  const offsets = new Uint32Array(batches.length + 1);
  for (let i = 0; i < batches.length; i++) offsets[i + 1] = offsets[i]! + batches[i]!.data.length;
  t._offsets = offsets;
  return t as unknown as ImportedTable;
}

/** Whether arrow-js's Table constructor makes what `tableFields` makes (see `makeTable`). */
export let TABLE_SHORTCUT: boolean | undefined;
/** `TABLE_SHORTCUT`, checked on the first table of batches made (not at load). */
export function tableShortcutHolds(): boolean {
  return (TABLE_SHORTCUT ??= checkTableShortcut());
}

function checkTableShortcut(): boolean {
  try {
    const f = new Field('x', new Int32(), true);
    const schema = new Schema([f]);
    const batch = (n: number): RecordBatch => new RecordBatch(schema, new Data(new Struct([f]), 0, n, 0, [undefined, undefined, EMPTY] as never, [new Data(new Int32(), 0, n, 0, [undefined, new Int32Array(n)] as never)]) as Data<Struct>);
    const batches = [batch(2), batch(3), batch(0)];
    const slow = new ImportedTable([...batches]) as unknown as Record<string, unknown>;
    const fast = tableFields(batches[0]!.schema, [...batches]) as unknown as Record<string, unknown>;
    const keys = Reflect.ownKeys(slow);
    const sameList = (a: unknown, b: unknown): boolean =>
      (Array.isArray(a) && Array.isArray(b)) || (a instanceof Uint32Array && b instanceof Uint32Array)
        ? (a as ArrayLike<unknown>).length === (b as ArrayLike<unknown>).length && Array.from(a as ArrayLike<unknown>).every((x, i) => x === (b as ArrayLike<unknown>)[i])
        : false;
    return (
      Object.getPrototypeOf(slow) === Object.getPrototypeOf(fast) &&
      keys.join(',') === 'schema,batches,_offsets' &&
      Reflect.ownKeys(fast).join(',') === keys.join(',') &&
      slow.schema === fast.schema &&
      sameList(slow.batches, fast.batches) &&
      sameList(slow._offsets, fast._offsets)
    );
  } catch {
    return false;
  }
}

/** An `ImportedVector` over one imported `Data`. */
export function importedVector(data: Data, by: ImportOwner | readonly ImportOwner[]): ImportedVector {
  return owned(new ImportedVector([data]), by);
}

// --- JS views --------------------------------------------------------------------------------

/**
 * The record of a plain `ArrayView` (JS buffers: a host copy, an expansion,
 * a view made by hand), for the builder's copy path: the same slicing rules
 * as an import's.
 */
function recordOfView(view: ArrayView, plan: Plan, path: string): ImportRead {
  const read = new ImportRead(plan, null, null, path, 0, true);
  const views = (read.views = new Map());
  const nums = read.nums;
  const walk = (v: ArrayView, pn: PlanNode, depth: number): void => {
    if (depth > 64) throw invalid(path, 'nesting deeper than 64 levels');
    const p = read.length;
    let q = p;
    nums[q++] = v.length;
    nums[q++] = v.offset;
    nums[q++] = v.nullCount;
    nums[q++] = v.buffers.length;
    nums[q++] = 0; // END, once the children and the dictionary are in
    for (const b of v.buffers) {
      if (b !== null && b.byteLength > 0) views.set(q, b);
      nums[q++] = b === null ? 0 : 1;
      nums[q++] = b === null ? 0 : b.byteLength;
    }
    read.length = q;
    if (v.children.length !== pn.children.length) throw invalid(path, `the view has ${v.children.length} children where its schema has ${pn.children.length}`);
    v.children.forEach((c, k) => walk(c, pn.children[k]!, depth + 1));
    if (pn.dictionary !== null) {
      if (!v.dictionary) throw invalid(path, 'the schema is dictionary-encoded, the view has no dictionary');
      walk(v.dictionary, pn.dictionary, depth + 1);
    }
    nums[p + END] = read.length;
  };
  walk(view, plan.root, 0);
  return read;
}

/**
 * An arrow-js `Data` of `type` over a plain `ArrayView` (zero-copy over its
 * JS buffers), `type` being the arrow-js type of `view.schema`.
 */
export function dataFromView(view: ArrayView, type: DataType, path = 'array', expand = false): Data {
  const plan = planWithType(view.schema, type, expand, path);
  return dataOf(recordOfView(view, plan, path), plan.root, 0, 0, -1, false);
}

// The target-neutral layers (device, async, device streams) build arrow-js objects through these (arrowjs-builds.ts).
setArrowJsBuilds({ buildData, buildBatch, batchSchemaOf });
