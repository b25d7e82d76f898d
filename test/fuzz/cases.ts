/**
 * The fuzzer's cases: JSON descriptions of `ArrowSchema`/`ArrowArray`
 * trees (so a reproducer is a file), the corpus they start from (Arrow's
 * gold integration files, read by tools/integration/json.ts, which covers
 * every type, list views and run-end encoded included), and the seeded
 * mutator. Generation is deterministic in (seed, case index): a finding is
 * reproduced from those two numbers, or from the saved description.
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ArrayView } from '../../src/array/view.js';
import type { SchemaNode } from '../../src/schema/node.js';
import { readIntegrationJsonFile } from '../../tools/integration/json.js';
import { GOLD } from '../helpers/gold.js';
import { generatedCorpus } from './generate.js';

/** A schema struct; integers as decimal strings, bytes as base64 (JSON-safe). */
export interface SDesc {
  format: string | null;
  name: string | null;
  flags: string;
  metadata: string | null;
  children: SDesc[];
  dictionary: SDesc | null;
  /** Overrides n_children (the true children are still built and released). */
  nChildren?: string;
  released?: boolean;
  /** children[k]'s pointer is replaced by children[alias[k]]'s: a struct reached twice. */
  alias?: (number | null)[];
}

export interface ADesc {
  length: string;
  offset: string;
  nullCount: string;
  /** base64 bytes, or null for a NULL pointer. */
  buffers: (string | null)[];
  children: ADesc[];
  dictionary: ADesc | null;
  nBuffers?: string;
  nChildren?: string;
  released?: boolean;
  alias?: (number | null)[];
  /** buffers[i] is written as this raw address (a small one: the NULL page, which no process maps). */
  rawBuffer?: { index: number; addr: string };
  /** The dictionary pointer is written NULL. */
  dictNull?: boolean;
}

/** The importers a case drives: the main entry's (arrow-js), then the flechette entry's (src/flechette/index.ts). */
export const DRIVERS = [
  'field', 'arrayView', 'data', 'recordBatch', 'table', 'deviceArray', 'deviceData', 'deviceRecordBatch', 'stream', 'deviceStream',
  'flechetteColumn', 'flechetteTable', 'flechetteStream',
] as const;
export type Driver = (typeof DRIVERS)[number];
/** Drivers handed several record batches (the table drivers: arrays; the stream drivers: through the stream). */
const MULTI = new Set<Driver>(['table', 'stream', 'deviceStream', 'flechetteTable', 'flechetteStream']);
/** Drivers handed an `ArrowArrayStream` (or its device form). */
export const STREAM_DRIVERS = new Set<Driver>(['stream', 'deviceStream', 'flechetteStream']);
export type Level = 'minimal' | 'default' | 'full';

export interface Case {
  /** Where it came from: `generated_list_view.json.gz batch 0` and what was mutated. */
  origin: string;
  mutations: string[];
  driver: Driver;
  level: Level;
  expand: boolean;
  copy: boolean;
  schema: SDesc;
  arrays: ADesc[];
  device?: { type: number; id: string; syncEvent: string; reserved: boolean };
  stream?: { failAt: number; code: number; schemaCode: number; message: string | null };
}

// --- the corpus ------------------------------------------------------------------------------

const b64 = (b: Uint8Array | null): string | null => (b === null ? null : Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('base64'));
const utf8 = new TextEncoder();

function metadataBytes(md: Map<string, string> | null): Uint8Array | null {
  if (!md || md.size === 0) return null;
  const parts: Uint8Array[] = [];
  for (const [k, v] of md) parts.push(utf8.encode(k), utf8.encode(v));
  const out = new Uint8Array(4 + parts.reduce((n, p) => n + 4 + p.length, 0));
  const dv = new DataView(out.buffer);
  dv.setInt32(0, md.size, true);
  let at = 4;
  for (const p of parts) {
    dv.setInt32(at, p.length, true);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}

export function schemaDesc(n: SchemaNode): SDesc {
  return {
    format: n.format,
    name: n.name,
    flags: String(n.flags),
    metadata: b64(metadataBytes(n.metadata)),
    children: n.children.map(schemaDesc),
    dictionary: n.dictionary ? schemaDesc(n.dictionary) : null,
  };
}

export function arrayDesc(v: ArrayView): ADesc {
  return {
    length: String(v.length),
    offset: String(v.offset),
    nullCount: String(v.nullCount),
    buffers: v.buffers.map((b) => b64(b ?? null)),
    children: v.children.map(arrayDesc),
    dictionary: v.dictionary ? arrayDesc(v.dictionary) : null,
  };
}

export interface Seed {
  origin: string;
  schema: SDesc;
  array: ADesc;
}

/** The generated seeds in the corpus (test/fuzz/generate.ts): fixed, so a case is (seed, index) whatever the run. */
const GENERATED = { seed: 1, count: 300 };

/**
 * Every batch of every gold JSON file, whole and one column at a time, then
 * the generated seeds (random nestings of every type, valid contents).
 */
export function loadCorpus(): Seed[] {
  const gold = loadGold();
  return gold.length === 0 ? [] : [...gold, ...generatedCorpus(GENERATED.seed, GENERATED.count)];
}

function loadGold(): Seed[] {
  const dir = fileURLToPath(GOLD);
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.json.gz')).sort();
  } catch {
    return [];
  }
  const out: Seed[] = [];
  for (const f of files) {
    let c;
    try {
      c = readIntegrationJsonFile(`${dir}/${f}`);
    } catch {
      continue; // a file the JSON reader does not take (reported by its own tests)
    }
    c.batches.forEach((b, k) => {
      const schema = schemaDesc(c.schema);
      const array = arrayDesc(b);
      out.push({ origin: `${f} batch ${k}`, schema, array });
      schema.children.forEach((s, i) => {
        out.push({
          origin: `${f} batch ${k} column ${i}`,
          schema: { ...schema, children: [s] },
          array: { ...array, children: [array.children[i]!] },
        });
      });
    });
  }
  return out;
}

// --- the mutator -----------------------------------------------------------------------------

/** A small seeded PRNG (mulberry32): the same (seed, index) always gives the same case. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Numbers at the edges: of int32, of 4 GiB, of 2^53, of int64. */
const EDGES = ['0', '1', '-1', '2', '7', '8', '9', '63', '64', '65', '1000', '65535', '2147483647', '2147483648', '4294967295',
  '4294967296', '4294967304', '1099511627776', '9007199254740991', '9007199254740992', '9223372036854775807', '-9223372036854775808'];
const FORMATS = ['n', 'b', 'c', 'C', 's', 'S', 'i', 'I', 'l', 'L', 'e', 'f', 'g', 'z', 'Z', 'vz', 'u', 'U', 'vu', 'w:4', 'w:0', 'w:-1',
  'd:10,2', 'd:76,3,256', 'd:9,2,32', 'tdD', 'tdm', 'tts', 'ttm', 'ttu', 'ttn', 'tss:', 'tsm:UTC', 'tsu:', 'tsn:x', 'tDs', 'tDn', 'tiM',
  'tiD', 'tin', '+l', '+L', '+vl', '+vL', '+w:2', '+w:0', '+s', '+m', '+ud:0,1', '+us:0,1', '+us:5', '+ud:', '+r', 'x', '', '+w:99999999999'];

type Node = { s: SDesc; a: ADesc | null; path: string };

function nodes(s: SDesc, a: ADesc | null, path: string, out: Node[]): Node[] {
  out.push({ s, a, path });
  s.children.forEach((c, k) => nodes(c, a?.children[k] ?? null, `${path}.children[${k}]`, out));
  if (s.dictionary) nodes(s.dictionary, a?.dictionary ?? null, `${path}.dictionary`, out);
  return out;
}

function setInt64(b64s: string | null, r: () => number, pick: <T>(xs: readonly T[]) => T): string | null {
  if (b64s === null) return null;
  const b = Buffer.from(b64s, 'base64');
  if (b.length === 0) return b64s;
  const w = pick([1, 2, 4, 8].filter((x) => x <= b.length));
  const at = Math.floor(r() * Math.floor(b.length / w)) * w;
  const v = BigInt(pick(EDGES));
  if (w === 8) b.writeBigInt64LE(BigInt.asIntN(64, v), at);
  else if (w === 4) b.writeInt32LE(Number(BigInt.asIntN(32, v)), at);
  else if (w === 2) b.writeInt16LE(Number(BigInt.asIntN(16, v)), at);
  else b[at] = Number(BigInt.asUintN(8, v));
  return b.toString('base64');
}

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

/** Case `index` of the run seeded `seed`. */
export function makeCase(corpus: readonly Seed[], seed: number, index: number): Case {
  const r = rng((seed * 1_000_003 + index) >>> 0);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const base = corpus[Math.floor(r() * corpus.length)]!;
  const schema = clone(base.schema);
  const arrays = [clone(base.array)];
  const driver = pick(DRIVERS);
  if (MULTI.has(driver)) arrays.push(clone(base.array));
  const c: Case = {
    origin: base.origin,
    mutations: [],
    driver,
    level: pick(['minimal', 'default', 'full'] as const),
    expand: r() < 0.5,
    copy: r() < 0.25,
    schema,
    arrays,
  };
  if (driver.startsWith('device')) c.device = { type: 1, id: '-1', syncEvent: '0', reserved: false };
  if (STREAM_DRIVERS.has(driver)) c.stream = { failAt: -1, code: 0, schemaCode: 0, message: null };
  // A few cases stay as they are: valid input must import.
  const n = r() < 0.1 ? 0 : 1 + Math.floor(r() * 3);
  for (let m = 0; m < n; m++) mutate(c, r, pick);
  return c;
}

function mutate(c: Case, r: () => number, pick: <T>(xs: readonly T[]) => T): void {
  const a0 = c.arrays[Math.floor(r() * c.arrays.length)]!;
  const all = nodes(c.schema, a0, 'x', []);
  const node = pick(all);
  const { s, a } = node;
  const say = (what: string): void => void c.mutations.push(`${node.path}: ${what}`);
  const kind = pick([
    'format', 'format', 'flags', 'name', 'metadata', 'nChildrenS', 'releasedS', 'aliasS', 'dictS',
    'length', 'length', 'offset', 'nullCount', 'nBuffers', 'nChildrenA', 'bufferNull', 'bufferRaw', 'bufferBytes', 'bufferBytes',
    'bufferBytes', 'releasedA', 'aliasA', 'dictA', 'device', 'stream', 'bufferDrop',
  ] as const);
  switch (kind) {
    case 'format': s.format = r() < 0.1 ? null : pick(FORMATS); return say(`format ${JSON.stringify(s.format)}`);
    case 'flags': s.flags = pick(['0', '1', '2', '4', '7', '8', '-1']); return say(`flags ${s.flags}`);
    case 'name': s.name = r() < 0.5 ? null : 'x'.repeat(pick([0, 1, 100000])); return say('name');
    case 'metadata': {
      // Honest about its own extent: every length small enough to be read has its bytes
      // there; a count or a length past the library's caps is all that is written
      // (the reader must refuse it before reading on, or it faults on the guard page).
      const count = pick([0, 1, 2, 3, 65537, 2147483647, -1]);
      const parts: Buffer[] = [Buffer.alloc(4)];
      parts[0]!.writeInt32LE(count, 0);
      for (let k = 0; k < Math.min(count, 3); k++) {
        for (const what of ['key', 'value']) {
          const len = pick([0, 1, 5, 5, -1, 16777217, 2147483647]);
          const lb = Buffer.alloc(4);
          lb.writeInt32LE(len, 0);
          parts.push(lb);
          if (len < 0 || len > 1000) break;
          parts.push(r() < 0.2 ? Buffer.from([0xc3, 0x28, 0x41, 0x42, 0x43].slice(0, len)) : Buffer.from('abcde'.slice(0, len)));
          if (what === 'value' && k === Math.min(count, 3) - 1) break;
        }
      }
      const b = Buffer.concat(parts);
      s.metadata = b.toString('base64');
      return say(`metadata ${b.toString('hex')}`);
    }
    case 'nChildrenS': s.nChildren = pick(EDGES); return say(`schema n_children ${s.nChildren}`);
    case 'releasedS': s.released = true; return say('schema released');
    case 'aliasS':
      if (s.children.length < 1) return;
      s.alias = s.children.map((_, k) => (k === s.children.length - 1 ? 0 : null));
      return say('schema child aliased to child 0');
    case 'dictS':
      s.dictionary = s.dictionary ? null : { format: pick(FORMATS), name: null, flags: '0', metadata: null, children: [], dictionary: null };
      return say(`schema dictionary ${s.dictionary ? 'added' : 'removed'}`);
    case 'device':
      if (!c.device) return;
      c.device = {
        type: pick([1, 1, 2, 3, 4, 13, 14, 0, 99, -1]),
        id: pick(['-1', '0', '1', '-2', '9223372036854775807']),
        syncEvent: pick(['0', '0', '16']),
        reserved: r() < 0.1,
      };
      return say(`device ${JSON.stringify(c.device)}`);
    case 'stream':
      if (!c.stream) return;
      c.stream = {
        failAt: pick([-1, 0, 1, 2]),
        code: pick([0, 5, 22, -1, 12, 2147483647]),
        schemaCode: r() < 0.2 ? pick([5, 22, -3]) : 0,
        message: pick([null, '', 'boom', '\u00ff'.repeat(3)]),
      };
      return say(`stream ${JSON.stringify(c.stream)}`);
    default:
  }
  if (!a) return;
  switch (kind) {
    case 'length': a.length = pick(EDGES); return say(`length ${a.length}`);
    case 'offset': a.offset = pick(EDGES); return say(`offset ${a.offset}`);
    case 'nullCount': a.nullCount = pick(EDGES); return say(`null_count ${a.nullCount}`);
    case 'nBuffers': a.nBuffers = pick(['0', '1', '2', '3', '4', '-1', '1048577', '9223372036854775807']); return say(`n_buffers ${a.nBuffers}`);
    case 'nChildrenA': a.nChildren = pick(['0', '1', '2', '3', '-1', '1048577']); return say(`n_children ${a.nChildren}`);
    case 'bufferNull':
      if (!a.buffers.length) return;
      a.buffers[Math.floor(r() * a.buffers.length)] = null;
      return say('a buffer NULL');
    case 'bufferRaw':
      if (!a.buffers.length) return;
      a.rawBuffer = { index: Math.floor(r() * a.buffers.length), addr: pick(['8', '16', '4095']) };
      return say(`buffer ${a.rawBuffer.index} at 0x${BigInt(a.rawBuffer.addr).toString(16)}`);
    case 'bufferBytes': {
      if (!a.buffers.length) return;
      const i = Math.floor(r() * a.buffers.length);
      a.buffers[i] = setInt64(a.buffers[i] ?? null, r, pick);
      return say(`buffer ${i} bytes`);
    }
    case 'bufferDrop':
      if (!a.buffers.length) return;
      a.buffers.pop();
      return say('last buffer dropped');
    case 'releasedA': a.released = true; return say('array released');
    case 'aliasA':
      if (a.children.length < 1) return;
      a.alias = a.children.map((_, k) => (k === a.children.length - 1 ? 0 : null));
      return say('array child aliased to child 0');
    case 'dictA': a.dictNull = true; return say('dictionary pointer NULL');
    default:
  }
}
