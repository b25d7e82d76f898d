/**
 * Builds test/fuzz/producer.c at test time and lays a `Case` out in its
 * guarded memory: every struct, pointer array and buffer in a mapping of
 * its own, ending at a PROT_NONE page (see the C file).
 *
 * Buffers are sized honestly to what the mutated fields say
 * (`honestSize`): a fixed-width values buffer of a node whose length became
 * 2^31 is 2^31 * width bytes (mapped without reserving memory; the original
 * bytes first, zeros after). So a read past a buffer's end is a read past
 * what the struct declares: a bug of the consumer, never of the producer.
 * Where the honest size cannot be mapped (past `MAX_HONEST` bytes) the
 * buffer keeps its own size and the case is marked dishonest: a crash there
 * is reported apart, as it may be the producer's lie.
 */
import koffi from 'koffi';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nativeMemory, type Ptr } from '../../src/memory/index.js';
import { fixedByteWidth, parseFormat, physicalLayout, type TypeInfo } from '../../src/schema/format.js';
import { run, tempDir, which } from '../helpers/tools.js';
import type { ADesc, Case, SDesc } from './cases.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const cc = which('cc') ?? which('gcc');
export const producerMissing: string | undefined = cc ? undefined : 'no C compiler (cc/gcc) to build the fuzz producer';

/**
 * The largest buffer mapped honestly (8 GiB of address space, no memory
 * reserved): past 4 GiB, to reach the library's own limit. A case that
 * needs a larger buffer is not laid out (`layOut` throws): an honest O(length)
 * check of a longer array would take minutes without being a bug.
 */
const MAX_HONEST = 2 ** 33;
/** Pointer arrays longer than this are not built: every reader refuses such counts before following them. */
const MAX_POINTERS = (1 << 20) + 1;

interface Lib {
  guarded(size: number | bigint): Ptr;
  freeAll(): void;
  count(id: number): number;
  resetCounts(): void;
  fn(which: number): Ptr;
  /** Mappings made and not unmapped (each costs one of the kernel's vm.max_map_count, about 65,000, twice). */
  mapped(): number;
}

let lib: Lib | undefined;

export function producerLib(): Lib {
  if (lib) return lib;
  const so = join(tempDir('fuzz-producer'), 'libfuzzproducer.so');
  run(cc!, ['-std=c11', '-D_GNU_SOURCE', '-O1', '-shared', '-fPIC', '-o', so, join(here, 'producer.c')]); // includes ../include/arrow_c_abi.h
  const l = koffi.load(so);
  const guarded = l.func('uintptr_t fz_guarded(uint64_t size)');
  const fn = l.func('uintptr_t fz_fn(int32_t which)');
  const count = l.func('int32_t fz_count(int64_t id)');
  lib = {
    guarded: (size) => BigInt(guarded(size) as number | bigint),
    freeAll: l.func('void fz_free_all(void)') as () => void,
    count: (id) => count(id) as number,
    resetCounts: l.func('void fz_reset_counts(void)') as () => void,
    fn: (w) => BigInt(fn(w) as number | bigint),
    mapped: l.func('int64_t fz_mapped(void)') as () => number,
  };
  return lib;
}

const m = nativeMemory();
const utf8 = new TextEncoder();

/** What a laid-out case hands to the importers, and what its releases must come to. */
export interface Laid {
  schema: Ptr;
  arrays: Ptr[];
  stream: Ptr;
  /** Record ids of the roots: the schema, each array, the stream; null for one built released. */
  schemaId: number | null;
  arrayIds: (number | null)[];
  streamId: number | null;
  /** Every record id made (none may be released twice). */
  ids: number[];
  /** Whether every buffer is as large as the fields say. */
  honest: boolean;
}

class Layout {
  readonly ids: number[] = [];
  honest = true;
  private readonly L = lib!;
  constructor(private nextId: number) {}

  alloc(size: number | bigint): Ptr {
    const p = this.L.guarded(size);
    if (p === 0n) throw new Error(`fuzz producer: cannot map ${size} bytes`);
    return p;
  }

  bytes(b: Uint8Array, extra = 0): Ptr {
    const p = this.alloc(b.length + extra);
    m.copyIn(p, b);
    if (extra) m.writeU8(p + BigInt(b.length), 0);
    return p;
  }

  cstring(s: string): Ptr {
    return this.bytes(utf8.encode(s), 1);
  }

  /** A record { id, n, children, dictionary } for the release callback. */
  record(children: Ptr[], dict: Ptr): { ptr: Ptr; id: number } {
    const id = this.nextId++;
    this.ids.push(id);
    const arr = children.length ? this.pointers(children) : 0n;
    const r = this.alloc(32);
    m.writeI64(r, BigInt(id));
    m.writeI64(r + 8n, BigInt(children.length));
    m.writePtr(r + 16n, arr);
    m.writePtr(r + 24n, dict);
    return { ptr: r, id };
  }

  pointers(ps: Ptr[], n = ps.length): Ptr {
    const len = Math.min(Math.max(n, ps.length), MAX_POINTERS);
    const p = this.alloc(Math.max(len, 1) * 8);
    ps.forEach((x, k) => m.writePtr(p + BigInt(k * 8), x));
    return p;
  }

  schema(s: SDesc): { ptr: Ptr; id: number } {
    const L = m.layouts.ArrowSchema;
    const o = L.offsets;
    const kids = s.children.map((c) => this.schema(c).ptr);
    const dict = s.dictionary ? this.schema(s.dictionary).ptr : 0n;
    const rec = this.record(kids, dict);
    const p = this.alloc(L.size);
    const visible = s.alias ? kids.map((k, i) => (s.alias![i] === null || s.alias![i] === undefined ? k : kids[s.alias![i]!]!)) : kids;
    const n = s.nChildren !== undefined ? BigInt(s.nChildren) : BigInt(kids.length);
    m.writePtr(p + BigInt(o.format!), s.format === null ? 0n : this.cstring(s.format));
    m.writePtr(p + BigInt(o.name!), s.name === null ? 0n : this.cstring(s.name));
    m.writePtr(p + BigInt(o.metadata!), s.metadata === null ? 0n : this.bytes(Buffer.from(s.metadata, 'base64')));
    m.writeI64(p + BigInt(o.flags!), BigInt(s.flags));
    m.writeI64(p + BigInt(o.n_children!), n);
    m.writePtr(p + BigInt(o.children!), visible.length || n > 0n ? this.pointers(visible, clampCount(n)) : 0n);
    m.writePtr(p + BigInt(o.dictionary!), dict);
    m.writePtr(p + BigInt(o.release!), s.released ? 0n : lib!.fn(0));
    m.writePtr(p + BigInt(o.private_data!), rec.ptr);
    return { ptr: p, id: rec.id };
  }

  array(a: ADesc, s: SDesc | undefined, into?: Ptr): { ptr: Ptr; id: number } {
    const L = m.layouts.ArrowArray;
    const o = L.offsets;
    const kids = a.children.map((c, k) => this.array(c, s?.children[k]).ptr);
    const dict = a.dictionary ? this.array(a.dictionary, s?.dictionary ?? undefined).ptr : 0n;
    const rec = this.record(kids, dict);
    const p = into ?? this.alloc(L.size);
    const visible = a.alias ? kids.map((k, i) => (a.alias![i] === null || a.alias![i] === undefined ? k : kids[a.alias![i]!]!)) : kids;
    const nb = a.nBuffers !== undefined ? BigInt(a.nBuffers) : BigInt(a.buffers.length);
    const nc = a.nChildren !== undefined ? BigInt(a.nChildren) : BigInt(kids.length);
    const bufs = this.buffers(a, s);
    if (a.rawBuffer && a.rawBuffer.index < bufs.length) bufs[a.rawBuffer.index] = BigInt(a.rawBuffer.addr);
    m.writeI64(p + BigInt(o.length!), BigInt.asIntN(64, BigInt(a.length)));
    m.writeI64(p + BigInt(o.null_count!), BigInt.asIntN(64, BigInt(a.nullCount)));
    m.writeI64(p + BigInt(o.offset!), BigInt.asIntN(64, BigInt(a.offset)));
    m.writeI64(p + BigInt(o.n_buffers!), nb);
    m.writeI64(p + BigInt(o.n_children!), nc);
    m.writePtr(p + BigInt(o.buffers!), bufs.length || nb > 0n ? this.pointers(bufs, clampCount(nb)) : 0n);
    m.writePtr(p + BigInt(o.children!), visible.length || nc > 0n ? this.pointers(visible, clampCount(nc)) : 0n);
    m.writePtr(p + BigInt(o.dictionary!), a.dictNull ? 0n : dict);
    m.writePtr(p + BigInt(o.release!), a.released ? 0n : lib!.fn(1));
    m.writePtr(p + BigInt(o.private_data!), rec.ptr);
    return { ptr: p, id: rec.id };
  }

  /** Each buffer in its own mapping, sized to what the node's fields say. */
  private buffers(a: ADesc, s: SDesc | undefined): Ptr[] {
    let t: TypeInfo | undefined;
    try {
      t = s?.format ? parseFormat(s.format, 'x') : undefined;
    } catch {
      t = undefined;
    }
    const length = BigInt.asIntN(64, BigInt(a.length));
    const offset = BigInt.asIntN(64, BigInt(a.offset));
    const end = length >= 0n && offset >= 0n ? length + offset : -1n;
    const raw = a.buffers.map((b) => (b === null ? null : Buffer.from(b, 'base64')));
    const sizes = honestSizes(t, s?.dictionary ? true : false, raw, end);
    return raw.map((b, i) => {
      if (b === null) return 0n;
      let size = sizes[i];
      if (size === undefined || size < 0n) size = BigInt(b.length);
      if (size > BigInt(MAX_HONEST)) throw new TooLarge(`buffer ${i} would need ${size} bytes`);
      const p = this.alloc(size);
      if (size > 0n) m.copyIn(p, b.subarray(0, Number(size < BigInt(b.length) ? size : BigInt(b.length))));
      return p;
    });
  }
}

/** A case whose honest buffers cannot be mapped. */
export class TooLarge extends Error {}

function clampCount(n: bigint): number {
  return n < 0n ? 0 : n > BigInt(MAX_POINTERS) ? MAX_POINTERS : Number(n);
}

const i64At = (b: Uint8Array | null, at: number, w: number): bigint => {
  if (!b || at < 0 || at + w > b.length) return 0n;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return w === 8 ? dv.getBigInt64(at, true) : BigInt(dv.getInt32(at, true));
};

/**
 * The bytes each buffer must have for what the node says (Columnar.rst,
 * "Physical Memory Layout"); undefined where the type is unknown (the
 * buffer keeps its own size). Offsets and sizes buffers come first, so the
 * data buffers they size are sized from their (possibly mutated) contents,
 * read as the first `end + 1` offsets would be.
 */
function honestSizes(t: TypeInfo | undefined, dictionary: boolean, raw: (Uint8Array | null)[], end: bigint): (bigint | undefined)[] {
  const out: (bigint | undefined)[] = raw.map(() => undefined);
  if (!t || end < 0n) return out;
  const bits = (end + 7n) / 8n;
  const set = (i: number, v: bigint): void => {
    if (i < out.length) out[i] = v;
  };
  /** The buffer grown to `size` bytes, as laid out (zeros past its own bytes). */
  const grown = (i: number, size: bigint): Uint8Array | null => {
    const b = raw[i];
    if (!b || size > 1n << 26n) return b ?? null;
    const g = new Uint8Array(Number(size));
    g.set(b.subarray(0, Number(size)));
    return g;
  };
  const phys = physicalLayout(t);
  if (phys.hasValidity) set(0, bits);
  if (dictionary && t.id === 'int') {
    set(1, end * BigInt(t.bitWidth / 8));
    return out;
  }
  switch (t.id) {
    case 'bool': set(1, bits); break;
    case 'binary': case 'utf8': case 'large_binary': case 'large_utf8': {
      const w = t.id.startsWith('large') ? 8 : 4;
      const offSize = (end + 1n) * BigInt(w);
      set(1, offSize);
      const last = i64At(grown(1, offSize), Number(end) * w, w);
      set(2, last < 0n ? 0n : last);
      break;
    }
    case 'binary_view': case 'utf8_view': {
      set(1, end * 16n);
      const nVar = raw.length - 3;
      if (nVar >= 0) {
        set(raw.length - 1, BigInt(nVar) * 8n);
        const sizes = raw[raw.length - 1] ?? null;
        for (let k = 0; k < nVar; k++) {
          const v = i64At(sizes, k * 8, 8);
          set(2 + k, v < 0n ? 0n : v);
        }
      }
      break;
    }
    case 'list': case 'map': set(1, (end + 1n) * 4n); break;
    case 'large_list': set(1, (end + 1n) * 8n); break;
    case 'list_view': set(1, end * 4n); set(2, end * 4n); break;
    case 'large_list_view': set(1, end * 8n); set(2, end * 8n); break;
    case 'union': set(0, end); if (t.mode === 'dense') set(1, end * 4n); break;
    case 'null': case 'struct': case 'fixed_list': case 'run_end_encoded': break;
    default: {
      const w = fixedByteWidth(t);
      if (w !== undefined) set(1, end * BigInt(w));
    }
  }
  return out;
}

const DA = () => m.layouts.ArrowDeviceArray;

/** Lays `c` out; `firstId` is the first record id to use. */
export function layOut(c: Case, firstId: number): Laid {
  const l = producerLib();
  const y = new Layout(firstId);
  const schema = y.schema(c.schema);
  const arrayIds: (number | null)[] = [];
  const arrayRoot = (a: ADesc): Ptr => {
    let ptr: Ptr;
    let id: number;
    if (c.device) {
      const D = DA();
      ptr = y.alloc(D.size);
      id = y.array(a, c.schema, ptr + BigInt(D.offsets.array!)).id;
      m.writeI64(ptr + BigInt(D.offsets.device_id!), BigInt(c.device.id));
      m.writeI32(ptr + BigInt(D.offsets.device_type!), c.device.type);
      m.writePtr(ptr + BigInt(D.offsets.sync_event!), BigInt(c.device.syncEvent));
      if (c.device.reserved) m.writeI64(ptr + BigInt(D.offsets.reserved!), 1n);
    } else {
      ({ ptr, id } = y.array(a, c.schema));
    }
    arrayIds.push(a.released ? null : id);
    return ptr;
  };
  const arrays = c.arrays.map(arrayRoot);
  let stream = 0n;
  let streamId: number | null = null;
  if (c.stream) {
    const device = c.driver === 'deviceStream';
    const st = y.alloc(80);
    const sid = y.record([], 0n).id; // the stream's own release count
    const arr = y.pointers(arrays);
    m.writeI64(st, BigInt(sid));
    m.writePtr(st + 8n, schema.ptr);
    m.writeI64(st + 16n, BigInt(arrays.length));
    m.writePtr(st + 24n, arr);
    m.writeI64(st + 32n, BigInt(device ? DA().size : m.layouts.ArrowArray.size));
    m.writeI64(st + 40n, 0n);
    m.writeI64(st + 48n, BigInt(c.stream.failAt));
    m.writeI32(st + 56n, c.stream.code);
    m.writeI32(st + 60n, c.stream.schemaCode);
    m.writePtr(st + 64n, c.stream.message === null ? 0n : y.cstring(c.stream.message));
    const L = device ? m.layouts.ArrowDeviceArrayStream : m.layouts.ArrowArrayStream;
    const o = L.offsets;
    stream = y.alloc(L.size);
    const f = device ? 6 : 2;
    if (device) m.writeI32(stream + BigInt(o.device_type!), c.device?.type ?? 1);
    m.writePtr(stream + BigInt(o.get_schema!), l.fn(f));
    m.writePtr(stream + BigInt(o.get_next!), l.fn(f + 1));
    // A NULL get_last_error now and then: the consumer must cope.
    m.writePtr(stream + BigInt(o.get_last_error!), c.stream.message === null && c.stream.code === 5 ? 0n : l.fn(f + 2));
    m.writePtr(stream + BigInt(o.release!), l.fn(f + 3));
    m.writePtr(stream + BigInt(o.private_data!), st);
    streamId = sid;
  }
  return {
    schema: schema.ptr,
    arrays,
    stream,
    schemaId: c.schema.released ? null : schema.id,
    arrayIds,
    streamId,
    ids: y.ids,
    honest: y.honest,
  };
}
