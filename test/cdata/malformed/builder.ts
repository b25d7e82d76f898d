/**
 * A test-only producer: writes `ArrowSchema` and `ArrowArray` trees into
 * native memory from a JS description, malformed on request, and counts the
 * calls of every struct's `release`.
 *
 * Every struct it builds (roots, children, dictionaries) gets the same
 * release callback, registered once per process (koffi allows a limited
 * number of registrations) and dispatching on `private_data`, which holds a
 * small id into a table of records. A release behaves as the spec asks of a
 * producer (CDataInterface.rst, "Release callback semantics -- for
 * producers"): it releases the struct's children and dictionary that are not
 * released yet, then marks the struct released (`release = NULL`). It never
 * throws: what goes wrong inside it is recorded and checked by the tests.
 *
 * Fields are written through the layout tables (`mem.layouts`), never typed
 * in by hand. Each `Builder` owns its allocations; `freeAll()` frees them
 * after a test. A release that arrives after that (a late
 * FinalizationRegistry release) is counted on the record and touches no
 * freed memory.
 */
import { nativeMemory, type Memory, type Ptr } from '../../../src/memory/index.js';
import { RELEASE_SIG } from '../../../src/memory/registry.js';

export type Int = number | bigint;

/** Bytes for a string field: a JS string is written as UTF-8, raw bytes as they are; a NUL is appended. */
export type CStringSpec = string | Uint8Array;

export interface SchemaSpec {
  /** The format string; `null` writes a NULL pointer. */
  format: CStringSpec | null;
  /** Overrides the format pointer (an invalid address, say). */
  formatPtr?: Ptr;
  name?: CStringSpec | null;
  namePtr?: Ptr;
  /** The metadata blob, raw (see `md`); absent: NULL. */
  metadata?: Uint8Array;
  metadataPtr?: Ptr;
  flags?: Int;
  /** Children; `null` writes a NULL pointer into the children array. */
  children?: (SchemaSpec | null)[];
  /** Overrides the children pointer (the children are still built and released by their parent). */
  childrenPtr?: Ptr;
  /** Overrides `n_children` (defaults to `children.length`). */
  nChildren?: Int;
  dictionary?: SchemaSpec;
  dictionaryPtr?: Ptr;
  /** Build the struct already released (`release = NULL`). */
  released?: boolean;
}

/** A buffer: bytes copied into a native allocation, `null` for a NULL pointer, or a raw address. */
export type BufferSpec = ArrayBufferView | null | Ptr;

export interface ArraySpec {
  length: Int;
  nullCount?: Int;
  offset?: Int;
  buffers?: BufferSpec[];
  /** Overrides the buffers pointer. */
  buffersPtr?: Ptr;
  /** Overrides `n_buffers` (defaults to `buffers.length`). */
  nBuffers?: Int;
  children?: (ArraySpec | null)[];
  childrenPtr?: Ptr;
  nChildren?: Int;
  dictionary?: ArraySpec;
  dictionaryPtr?: Ptr;
  released?: boolean;
}

export type StructKind = 'schema' | 'array';

/** What the tracker knows of one built struct. */
export interface StructRecord {
  readonly id: number;
  readonly kind: StructKind;
  /** Where it sits in its tree: `schema`, `array.children[1]`, `array.dictionary`. */
  readonly label: string;
  /** Its address (for a moved root, the consumer calls release on its own copy). */
  readonly ptr: Ptr;
  /** Built with `release = NULL`. */
  readonly builtReleased: boolean;
  /** Built live and reachable from a live root: its release is due exactly once. */
  readonly due: boolean;
  readonly parent: StructRecord | null;
  /** Children then dictionary, as built (NULL entries left out). */
  readonly subs: StructRecord[];
  /** How many times its release ran. */
  calls: number;
  /** Calls not made by its parent's release: by the consumer, directly. */
  directCalls: number;
  /** Calls after the builder freed its memory. */
  lateCalls: number;
  freed: boolean;
}

/** A built root and every struct under it. */
export interface Built {
  readonly ptr: Ptr;
  readonly root: StructRecord;
  /** The root first, then every struct below it, depth first. */
  readonly records: readonly StructRecord[];
}

// --- the tracker (one per process) -------------------------------------------------------

const records = new Map<number, StructRecord>();
let nextId = 1;
let releasePtr: Ptr | undefined;

/** Releases with no record, and errors raised inside the callback: both must stay empty. */
export const trackerProblems: { strayCalls: Ptr[]; callbackErrors: unknown[] } = { strayCalls: [], callbackErrors: [] };

function memory(): Memory {
  return nativeMemory();
}

function releaseOffset(mem: Memory, kind: StructKind): bigint {
  return BigInt((kind === 'schema' ? mem.layouts.ArrowSchema : mem.layouts.ArrowArray).offsets.release!);
}

/**
 * Which record the struct at `p` is. A schema's `private_data` and an
 * array's `release` share an offset (64 on 64-bit targets), so read that one
 * first: a schema id found there names a schema; otherwise it is an array,
 * whose id is in its own `private_data`. Reading an array's 80 bytes at a
 * schema (72 bytes) never happens for our schemas, whose ids always match.
 */
function identify(mem: Memory, p: Ptr): StructRecord | undefined {
  const s = records.get(Number(mem.readPtr(p + BigInt(mem.layouts.ArrowSchema.offsets.private_data!))));
  if (s?.kind === 'schema') return s;
  const a = records.get(Number(mem.readPtr(p + BigInt(mem.layouts.ArrowArray.offsets.private_data!))));
  return a?.kind === 'array' ? a : undefined;
}

function onRelease(p: Ptr, byParent: boolean): void {
  const mem = memory();
  try {
    const rec = identify(mem, p);
    if (!rec) {
      trackerProblems.strayCalls.push(p);
      return;
    }
    rec.calls++;
    if (!byParent) rec.directCalls++;
    if (rec.freed) {
      rec.lateCalls++;
      return;
    }
    for (const sub of rec.subs) {
      if (sub.freed) continue;
      const rel = mem.readPtr(sub.ptr + releaseOffset(mem, sub.kind));
      if (rel === 0n) continue; // released already (moved out by the consumer, or built released)
      if (rel === releasePtr) onRelease(sub.ptr, true);
      else mem.call(rel, RELEASE_SIG, sub.ptr);
    }
    mem.writePtr(p + releaseOffset(mem, rec.kind), 0n);
  } catch (e) {
    trackerProblems.callbackErrors.push(e);
  }
}

/** The one release callback of every struct built here; registered on first use. */
export function builderReleaseCallback(): Ptr {
  releasePtr ??= memory().registerCallback(RELEASE_SIG, (p) => onRelease(p as bigint, false));
  return releasePtr;
}

/** How many times the release of the struct with this id ran. */
export function releaseCount(id: number): number {
  const r = records.get(id);
  if (!r) throw new Error(`no struct with id ${id}`);
  return r.calls;
}

// --- helpers to write malformed contents ------------------------------------------------

const encoder = new TextEncoder();

/**
 * A metadata blob (or any little-endian binary) from parts: a number is an
 * int32, a string its UTF-8 bytes, a `Uint8Array` its bytes.
 * `md(1, 3, 'key', 5, 'value')` is one pair.
 */
export function md(...parts: (number | string | Uint8Array)[]): Uint8Array {
  const chunks = parts.map((p) => {
    if (typeof p === 'number') {
      const b = new Uint8Array(4);
      new DataView(b.buffer).setInt32(0, p, true);
      return b;
    }
    return typeof p === 'string' ? encoder.encode(p) : p;
  });
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let pos = 0;
  for (const c of chunks) {
    out.set(c, pos);
    pos += c.length;
  }
  return out;
}

export type ViewSpec = string | { length: number; prefix?: string; buffer: number; offset: number };

/**
 * The views buffer of a binary/utf8 view array: a string of at most 12 bytes
 * is inlined, an object is a reference into a variadic data buffer.
 */
export function views(...items: ViewSpec[]): Uint8Array {
  const out = new Uint8Array(items.length * 16);
  const dv = new DataView(out.buffer);
  items.forEach((it, k) => {
    if (typeof it === 'string') {
      const b = encoder.encode(it);
      if (b.length > 12) throw new Error('inline views hold at most 12 bytes');
      dv.setInt32(k * 16, b.length, true);
      out.set(b, k * 16 + 4);
    } else {
      dv.setInt32(k * 16, it.length, true);
      out.set(encoder.encode((it.prefix ?? '').slice(0, 4)), k * 16 + 4);
      dv.setInt32(k * 16 + 8, it.buffer, true);
      dv.setInt32(k * 16 + 12, it.offset, true);
    }
  });
  return out;
}

/** A validity bitmap from booleans (LSB first). */
export function bitmap(...valid: boolean[]): Uint8Array {
  const out = new Uint8Array(Math.max(1, Math.ceil(valid.length / 8)));
  valid.forEach((v, i) => {
    if (v) out[i >> 3]! |= 1 << (i & 7);
  });
  return out;
}

// --- the builder ------------------------------------------------------------------------

export class Builder {
  private readonly mem = memory();
  private readonly allocations: Ptr[] = [];
  private readonly built: StructRecord[] = [];

  /** Zeroed native memory, freed by `freeAll`. */
  alloc(size: number): Ptr {
    const p = this.mem.alloc(size);
    this.allocations.push(p);
    return p;
  }

  /** Copies bytes into a new allocation (a non-NULL pointer even for 0 bytes). */
  bytes(b: ArrayBufferView): Ptr {
    const p = this.alloc(b.byteLength);
    this.mem.copyIn(p, new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
    return p;
  }

  /** A NUL-terminated string. */
  cstring(s: CStringSpec): Ptr {
    const b = typeof s === 'string' ? encoder.encode(s) : s;
    const withNul = new Uint8Array(b.length + 1);
    withNul.set(b);
    return this.bytes(withNul);
  }

  private pointerArray(ptrs: readonly Ptr[]): Ptr {
    const ps = this.mem.target.pointerSize;
    const p = this.alloc(ptrs.length * ps);
    ptrs.forEach((v, i) => this.mem.writePtr(p + BigInt(i * ps), v));
    return p;
  }

  private record(kind: StructKind, label: string, ptr: Ptr, released: boolean, parent: StructRecord | null): StructRecord {
    const rec: StructRecord = {
      id: nextId++,
      kind,
      label,
      ptr,
      builtReleased: released,
      due: !released && (parent === null || parent.due),
      parent,
      subs: [],
      calls: 0,
      directCalls: 0,
      lateCalls: 0,
      freed: false,
    };
    records.set(rec.id, rec);
    this.built.push(rec);
    parent?.subs.push(rec);
    return rec;
  }

  /** Builds an `ArrowSchema` tree; `label` names the root in records. */
  schema(spec: SchemaSpec, label = 'schema'): Built {
    const start = this.built.length;
    const root = this.writeSchema(spec, label, null);
    return { ptr: root.ptr, root, records: this.built.slice(start) };
  }

  /** Builds an `ArrowArray` tree. */
  array(spec: ArraySpec, label = 'array'): Built {
    const start = this.built.length;
    const root = this.writeArray(spec, label, null);
    return { ptr: root.ptr, root, records: this.built.slice(start) };
  }

  private writeSchema(spec: SchemaSpec, label: string, parent: StructRecord | null): StructRecord {
    const mem = this.mem;
    const L = mem.layouts.ArrowSchema;
    const at = (f: string): Ptr => ptr + BigInt(L.offsets[f]!);
    const ptr = this.alloc(L.size);
    const rec = this.record('schema', label, ptr, spec.released ?? false, parent);

    mem.writePtr(at('format'), spec.formatPtr ?? (spec.format === null ? 0n : this.cstring(spec.format)));
    mem.writePtr(at('name'), spec.namePtr ?? (spec.name == null ? 0n : this.cstring(spec.name)));
    mem.writePtr(at('metadata'), spec.metadataPtr ?? (spec.metadata ? this.bytes(spec.metadata) : 0n));
    mem.writeI64(at('flags'), BigInt(spec.flags ?? 0));

    const kids = spec.children ?? [];
    const kidPtrs = kids.map((k, i) => (k === null ? 0n : this.writeSchema(k, `${label}.children[${i}]`, rec).ptr));
    mem.writeI64(at('n_children'), BigInt(spec.nChildren ?? kids.length));
    mem.writePtr(at('children'), spec.childrenPtr ?? (kids.length > 0 ? this.pointerArray(kidPtrs) : 0n));
    const dict = spec.dictionary ? this.writeSchema(spec.dictionary, `${label}.dictionary`, rec).ptr : 0n;
    mem.writePtr(at('dictionary'), spec.dictionaryPtr ?? dict);

    mem.writePtr(at('private_data'), BigInt(rec.id));
    mem.writePtr(at('release'), spec.released ? 0n : builderReleaseCallback());
    return rec;
  }

  private writeArray(spec: ArraySpec, label: string, parent: StructRecord | null): StructRecord {
    const mem = this.mem;
    const L = mem.layouts.ArrowArray;
    const at = (f: string): Ptr => ptr + BigInt(L.offsets[f]!);
    const ptr = this.alloc(L.size);
    const rec = this.record('array', label, ptr, spec.released ?? false, parent);

    mem.writeI64(at('length'), BigInt(spec.length));
    mem.writeI64(at('null_count'), BigInt(spec.nullCount ?? 0));
    mem.writeI64(at('offset'), BigInt(spec.offset ?? 0));

    const bufs = spec.buffers ?? [];
    const bufPtrs = bufs.map((b) => (b === null ? 0n : typeof b === 'bigint' ? b : this.bytes(b)));
    mem.writeI64(at('n_buffers'), BigInt(spec.nBuffers ?? bufs.length));
    mem.writePtr(at('buffers'), spec.buffersPtr ?? (bufs.length > 0 ? this.pointerArray(bufPtrs) : 0n));

    const kids = spec.children ?? [];
    const kidPtrs = kids.map((k, i) => (k === null ? 0n : this.writeArray(k, `${label}.children[${i}]`, rec).ptr));
    mem.writeI64(at('n_children'), BigInt(spec.nChildren ?? kids.length));
    mem.writePtr(at('children'), spec.childrenPtr ?? (kids.length > 0 ? this.pointerArray(kidPtrs) : 0n));
    const dict = spec.dictionary ? this.writeArray(spec.dictionary, `${label}.dictionary`, rec).ptr : 0n;
    mem.writePtr(at('dictionary'), spec.dictionaryPtr ?? dict);

    mem.writePtr(at('private_data'), BigInt(rec.id));
    mem.writePtr(at('release'), spec.released ? 0n : builderReleaseCallback());
    return rec;
  }

  /** Every struct this builder made. */
  get records(): readonly StructRecord[] {
    return this.built;
  }

  /**
   * Frees every allocation. Records stay (marked freed), so a release that
   * comes later is counted instead of touching freed memory.
   */
  freeAll(): void {
    for (const r of this.built) r.freed = true;
    for (const p of this.allocations.splice(0)) this.mem.free(p);
  }
}
