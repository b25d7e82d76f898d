/**
 * The fuzzer's thread mode (`npm run fuzz -- --mode threads`): our exports
 * (schemas, arrays, device arrays, array streams, device array streams)
 * handed to a C consumer (test/fuzz/consumer.c) that releases and reads
 * them from several native threads at once, called with koffi's async form
 * (docs/native.md#native-calls-that-call-back-from-other-threads: our callbacks then run on the JS thread while the
 * consumer's threads wait for them).
 *
 * A case is seeded: how many threads, which exports, and per export what
 * the consumer does (keep it, move a child out and release it later from
 * another thread, release it again through a stale copy, stop a stream
 * early), and the batches: a struct of x: int32, s: utf8, l: list<int16>,
 * nulls everywhere, sliced now and then; a stream's JS source may throw at
 * a given batch.
 *
 * Oracles:
 * - every value the consumer read is right: its checksum of each array
 *   and of each stream's batches equals the JS one (`checksum`);
 * - a stream ends as its source does: every batch, or the source's error
 *   (a non-zero code and its message from get_last_error), or where the
 *   consumer stopped; a stopped source is closed (its `finally` ran);
 * - every export is released exactly once: after the run exactly the kept
 *   exports are live (a stale second release released nothing, nothing
 *   leaked), a kept array still reads the same, and once the kept ones are
 *   released too `accounting()` is back where it started (live exports and
 *   pinned bytes);
 * - no crash and no hang (the parent process watches, tools/fuzz.ts).
 */
import koffi from 'koffi';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Field, Int16, Int32, List, RecordBatch, Schema, Table, Utf8, vectorFromArray,
} from 'apache-arrow';
import {
  accounting, exportArray, exportArrayStream, exportDeviceArray, exportDeviceArrayStream, exportSchema, freeArrowArray,
  freeArrowArrayStream, freeArrowDeviceArray, freeArrowDeviceArrayStream, freeArrowSchema, nativeMemory, type Ptr,
} from '../../src/index.js';
import { run as runTool, tempDir, which } from '../helpers/tools.js';
import { rng } from './cases.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const cc = which('cc') ?? which('gcc');
export const consumerMissing: string | undefined = cc ? undefined : 'no C compiler (cc/gcc) to build the fuzz consumer';

export const KINDS = ['schema', 'array', 'deviceArray', 'stream', 'deviceStream'] as const;
export type ItemKind = (typeof KINDS)[number];
export const F_KEEP = 1;
export const F_MOVE_CHILD = 2;
export const F_STALE = 4;
export const F_STOP_EARLY = 8;

/** One batch: rows, the seed of its values, and a slice of it (or none). */
export interface BatchSpec {
  rows: number;
  seed: number;
  slice: [number, number] | null;
}

export interface ThreadItem {
  kind: ItemKind;
  flags: number;
  /** Streams with F_STOP_EARLY: the consumer stops after this many batches. */
  stopAfter: number;
  /** One for schemas and arrays (a schema exports the batch's schema); a stream's batches. */
  batches: BatchSpec[];
  /** Streams: the source throws when asked for this batch (-1: never). */
  failAt: number;
}

export interface ThreadCase {
  mode: 'threads';
  threads: number;
  items: ThreadItem[];
}

export type ThreadFindingKind = 'checksum' | 'stream-end' | 'leak' | 'stale-release' | 'shape' | 'source-open' | 'error';

export interface ThreadFinding {
  kind: ThreadFindingKind;
  message: string;
}

/** Case `index` of the thread-mode run seeded `seed`. */
export function makeThreadCase(seed: number, index: number): ThreadCase {
  const r = rng((seed * 1_000_033 + index) >>> 0);
  const int = (n: number): number => Math.floor(r() * n);
  const batch = (): BatchSpec => {
    const rows = int(40);
    const slice: [number, number] | null = rows > 2 && r() < 0.3 ? [int(rows >> 1), 1 + int(rows >> 1)] : null;
    return { rows, seed: int(2 ** 31), slice };
  };
  const items: ThreadItem[] = [];
  const n = 1 + int(24);
  for (let k = 0; k < n; k++) {
    const kind = KINDS[int(KINDS.length)]!;
    const stream = kind === 'stream' || kind === 'deviceStream';
    let flags = 0;
    if (r() < 0.15) flags |= F_KEEP;
    if (r() < 0.35) flags |= F_MOVE_CHILD;
    if (r() < 0.35) flags |= F_STALE;
    if (stream && r() < 0.25) flags |= F_STOP_EARLY;
    const nb = stream ? int(7) : 1;
    items.push({
      kind,
      flags,
      stopAfter: int(4),
      batches: Array.from({ length: nb }, batch),
      failAt: stream && r() < 0.2 ? int(nb + 1) : -1,
    });
  }
  return { mode: 'threads', threads: 1 + int(8), items };
}

// --- the batches and their checksum ------------------------------------------------------------

const ITEM = new Field('item', new Int16(), true);
export const SCHEMA = new Schema([new Field('x', new Int32(), true), new Field('s', new Utf8(), true), new Field('l', new List(ITEM), true)]);

/** The batch of `spec`: deterministic in its seed. */
export function makeBatch(spec: BatchSpec): RecordBatch {
  const r = rng(spec.seed);
  const int = (n: number): number => Math.floor(r() * n);
  const chars = ['a', 'é', 'ß', '中', '😀', 'z', '\u0000'];
  const xs: (number | null)[] = [];
  const ss: (string | null)[] = [];
  const ls: ((number | null)[] | null)[] = [];
  for (let i = 0; i < spec.rows; i++) {
    xs.push(r() < 0.2 ? null : int(2 ** 32) - 2 ** 31);
    ss.push(r() < 0.2 ? null : Array.from({ length: int(6) }, () => chars[int(chars.length)]).join(''));
    ls.push(r() < 0.2 ? null : Array.from({ length: int(5) }, () => (r() < 0.2 ? null : int(65536) - 32768)));
  }
  const t = new Table(SCHEMA, {
    x: vectorFromArray(xs, new Int32()).data[0]!,
    s: vectorFromArray(ss, new Utf8()).data[0]!,
    l: vectorFromArray(ls, new List(ITEM)).data[0]!,
  } as never);
  const b = t.batches[0] ?? new RecordBatch(SCHEMA);
  return spec.slice ? b.slice(spec.slice[0], spec.slice[0] + spec.slice[1]) : b;
}

const M64 = (1n << 64n) - 1n;
const PRIME = 1099511628211n;
const OFFSET = 14695981039346656037n;
const NULL_MARK = 0x9e3779b97f4a7c15n;
const mix = (h: bigint, v: bigint): bigint => ((h ^ (v & M64)) * PRIME) & M64;
const u64 = (v: number): bigint => BigInt.asUintN(64, BigInt(v));
const utf8 = new TextEncoder();

/** The checksum test/fuzz/consumer.c computes of a batch (as a signed int64, as the C side returns it). */
export function checksum(b: RecordBatch): bigint {
  let h = mix(OFFSET, u64(b.numRows));
  const x = b.getChildAt(0)!;
  const s = b.getChildAt(1)!;
  const l = b.getChildAt(2)!;
  for (let i = 0; i < b.numRows; i++) {
    const xv = x.get(i) as number | null;
    h = xv === null ? mix(h, NULL_MARK) : mix(h, u64(xv));
    const sv = s.get(i) as string | null;
    if (sv === null) h = mix(h, NULL_MARK);
    else {
      const bytes = utf8.encode(sv);
      h = mix(h, u64(bytes.length));
      for (const c of bytes) h = mix(h, BigInt(c));
    }
    const lv = l.get(i) as { length: number; get(k: number): number | null } | null;
    if (lv === null) h = mix(h, NULL_MARK);
    else {
      h = mix(h, u64(lv.length));
      for (let k = 0; k < lv.length; k++) {
        const v = lv.get(k);
        h = mix(h, v === null ? 7n : u64(v));
      }
    }
  }
  return BigInt.asIntN(64, h);
}

/** The checksum of column x alone (an int32 child moved out of its batch). */
function columnChecksum(b: RecordBatch): bigint {
  const x = b.getChildAt(0)!;
  let h = mix(OFFSET, u64(b.numRows));
  for (let i = 0; i < b.numRows; i++) {
    const v = x.get(i) as number | null;
    h = v === null ? mix(h, NULL_MARK) : mix(h, u64(v));
  }
  return BigInt.asIntN(64, h);
}

/** The checksum of a stream's batches, chained as the consumer chains them. */
function streamChecksum(batches: RecordBatch[]): bigint {
  let h = OFFSET;
  for (const b of batches) h = mix(h, BigInt.asUintN(64, checksum(b)));
  return BigInt.asIntN(64, h);
}

// --- the consumer -------------------------------------------------------------------------------

interface Lib {
  itemSize: number;
  consume(items: Ptr, n: number, threads: number): Promise<number>;
  /** For the test of the oracles: 1 makes the consumer leak the first array it would release. */
  inject(v: number): void;
}

let lib: Lib | undefined;

export function consumerLib(): Lib {
  if (lib) return lib;
  const so = join(tempDir('fuzz-consumer'), 'libfuzzconsumer.so');
  runTool(cc!, ['-std=c11', '-D_GNU_SOURCE', '-O1', '-shared', '-fPIC', '-pthread', '-o', so, join(here, 'consumer.c')]);
  const l = koffi.load(so);
  const consume = l.func('int64_t fz_consume(void *items, int64_t n, int32_t threads)') as unknown as {
    async: (...args: unknown[]) => void;
  };
  const itemSize = (l.func('int32_t fz_item_size(void)') as () => number)();
  const inject = l.func('void fz_set_inject(int32_t v)') as (v: number) => void;
  lib = {
    itemSize,
    inject,
    consume: (items, n, threads) =>
      new Promise((resolve, reject) =>
        consume.async(items, n, threads, (err: unknown, v: number | bigint) => (err ? reject(err) : resolve(Number(v))))),
  };
  return lib;
}

/** Field offsets of the C `item` (int64 fields, then a 64-byte message). */
const F = { ptr: 0, kind: 8, flags: 16, stopAfter: 24, checksum: 32, keptChecksum: 40, batches: 48, rows: 56, rc: 64, bad: 72, thread: 80, childChecksum: 88, message: 96 };

const SOURCE_ERROR = 'fuzz source failure';

/** Runs one case: exports, the consumer on its threads, the oracles. */
export async function runThreadCase(c: ThreadCase): Promise<ThreadFinding[]> {
  const m = nativeMemory();
  const L = consumerLib();
  const out: ThreadFinding[] = [];
  const say = (kind: ThreadFindingKind, message: string): void => void out.push({ kind, message });
  const before = accounting();
  const closed: boolean[] = [];
  /** A generator never started has nothing to close (return() ends it without running its body). */
  const started: boolean[] = [];
  const nodes: number[] = [];
  const ptrs: Ptr[] = [];
  const batches = c.items.map((it) => it.batches.map(makeBatch));

  c.items.forEach((it, k) => {
    const live = accounting().liveExports;
    const bs = batches[k]!;
    closed[k] = false;
    started[k] = false;
    switch (it.kind) {
      case 'schema': ptrs.push(exportSchema(bs[0]!.schema)); break;
      case 'array': ptrs.push(exportArray(bs[0]!)); break;
      case 'deviceArray': ptrs.push(exportDeviceArray(bs[0]!)); break;
      case 'stream': case 'deviceStream': {
        const failAt = it.failAt;
        function* source(): Generator<RecordBatch> {
          started[k] = true;
          try {
            for (let i = 0; i < bs.length; i++) {
              if (i === failAt) throw new Error(`${SOURCE_ERROR} at ${i}`);
              yield bs[i]!;
            }
            if (failAt === bs.length) throw new Error(`${SOURCE_ERROR} at ${failAt}`);
          } finally {
            closed[k] = true;
          }
        }
        const opts = { schema: SCHEMA };
        ptrs.push(it.kind === 'stream' ? exportArrayStream(source(), opts) : exportDeviceArrayStream(source(), opts));
        break;
      }
    }
    nodes.push(accounting().liveExports - live);
  });

  const size = L.itemSize;
  const block = m.alloc(size * Math.max(1, c.items.length));
  try {
    c.items.forEach((it, k) => {
      const at = block + BigInt(k * size);
      m.writePtr(at + BigInt(F.ptr), ptrs[k]!);
      m.writeI64(at + BigInt(F.kind), BigInt(KINDS.indexOf(it.kind)));
      m.writeI64(at + BigInt(F.flags), BigInt(it.flags));
      m.writeI64(at + BigInt(F.stopAfter), BigInt(it.stopAfter));
    });
    const stale = await L.consume(block, c.items.length, c.threads);
    const expectStale = c.items.filter((it) => it.flags & F_STALE && !(it.flags & F_KEEP)).length;
    if (stale !== expectStale) say('error', `the consumer made ${stale} stale releases, the case asked for ${expectStale}`);

    // Exactly the kept exports are live: the stale releases released nothing, the rest leaked nothing.
    let keptNodes = 0;
    c.items.forEach((it, k) => {
      if (it.flags & F_KEEP) keptNodes += nodes[k]!;
    });
    const live = accounting().liveExports - before.liveExports;
    if (live !== keptNodes) {
      say(live < keptNodes ? 'stale-release' : 'leak', `after the consumer, ${live} exported structs are live; the kept exports have ${keptNodes}`);
    }

    c.items.forEach((it, k) => {
      const at = block + BigInt(k * size);
      const i64 = (f: keyof typeof F): bigint => m.readI64(at + BigInt(F[f]));
      const where = `item ${k} (${it.kind}, flags ${it.flags}, thread ${i64('thread')})`;
      if (i64('bad') !== 0n) say('shape', `${where}: the consumer saw ${i64('bad')} malformed struct(s)`);
      const bs = batches[k]!;
      if (it.kind === 'array' || it.kind === 'deviceArray') {
        const want = checksum(bs[0]!);
        if (i64('checksum') !== want) say('checksum', `${where}: the consumer read checksum ${i64('checksum')}, expected ${want}`);
        if (it.flags & F_MOVE_CHILD && !(it.flags & F_KEEP)) {
          const x = columnChecksum(bs[0]!);
          if (i64('childChecksum') !== x) say('checksum', `${where}: the moved child read ${i64('childChecksum')} after its parent's release, expected ${x}`);
        }
        if (it.flags & F_KEEP && i64('keptChecksum') !== want) {
          say('stale-release', `${where}: kept, it read ${i64('keptChecksum')} after the others were released, expected ${want}`);
        }
      }
      if ((it.kind === 'stream' || it.kind === 'deviceStream') && !(it.flags & F_KEEP)) {
        // What the consumer must have read: up to the source's failure, or to where it stopped.
        let n = bs.length;
        let failed = false;
        if (it.failAt >= 0 && it.failAt <= n) {
          n = it.failAt;
          failed = true;
        }
        if (it.flags & F_STOP_EARLY && it.stopAfter <= n) {
          n = it.stopAfter;
          failed = false;
        }
        const read = Number(i64('batches'));
        const rc = Number(i64('rc'));
        const msg = m.readCString(at + BigInt(F.message));
        if (read !== n) say('stream-end', `${where}: read ${read} batches, expected ${n} (source of ${bs.length}, fails at ${it.failAt}, stop after ${it.flags & F_STOP_EARLY ? it.stopAfter : '-'})`);
        else if (i64('checksum') !== streamChecksum(bs.slice(0, n))) say('checksum', `${where}: the batches read do not checksum as sent`);
        if (failed && (rc === 0 || !msg.includes(SOURCE_ERROR))) say('stream-end', `${where}: the source failed but get_next gave ${rc} "${msg}"`);
        if (!failed && rc !== 0) say('stream-end', `${where}: get_next failed with ${rc} "${msg}"`);
        if (started[k] && !closed[k]) say('source-open', `${where}: the stream was released but its source was not closed`);
      }
    });
  } finally {
    // The kept ones, released here (the free functions release what is still live), then every root struct freed.
    c.items.forEach((it, k) => {
      const p = ptrs[k]!;
      switch (it.kind) {
        case 'schema': freeArrowSchema(p); break;
        case 'array': freeArrowArray(p); break;
        case 'deviceArray': freeArrowDeviceArray(p); break;
        case 'stream': freeArrowArrayStream(p); break;
        case 'deviceStream': freeArrowDeviceArrayStream(p); break;
      }
    });
    m.free(block);
  }
  const after = accounting();
  if (after.liveExports !== before.liveExports || after.pinnedBytes !== before.pinnedBytes) {
    say('leak', `after every release: ${after.liveExports - before.liveExports} exports and ${after.pinnedBytes - before.pinnedBytes} pinned bytes more than before`);
  }
  return out;
}
