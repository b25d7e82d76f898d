/**
 * Generated seeds for the fuzzer's corpus, beside the gold files: random
 * types nested up to three levels (every leaf format, lists, large lists,
 * list views, fixed-size lists of size 0 and 2, structs, maps, both unions,
 * run-end encoded, dictionaries of any of these) with valid, random
 * contents: random bytes for values, random validity (null_count exact, 0
 * or -1), array offsets into longer buffers, ragged offsets, list views out
 * of order, view types inline and out of line. The gold files cover every
 * type but few nestings (no union of run-end encoded list views, no
 * dictionary of a large list view of timestamps); arrow-js's readers and
 * builders fail on such nestings in ways a single type does not show.
 *
 * Every seed is valid Arrow (Columnar.rst), so before mutation an import at
 * any level must succeed, and at `full` reading every value must not throw.
 * Deterministic in its seed.
 */
import { fixedByteWidth, parseFormat } from '../../src/schema/format.js';
import { rng, type ADesc, type SDesc, type Seed } from './cases.js';

const LEAVES = [
  'n', 'b', 'c', 'C', 's', 'S', 'i', 'I', 'l', 'L', 'e', 'f', 'g', 'z', 'Z', 'vz', 'u', 'U', 'vu', 'w:4', 'w:0', 'd:10,2', 'd:38,3',
  'd:76,3,256', 'd:9,2,32', 'd:18,2,64', 'tdD', 'tdm', 'tts', 'ttm', 'ttu', 'ttn', 'tss:', 'tsm:UTC', 'tsu:', 'tsn:', 'tDs', 'tDm',
  'tDu', 'tDn', 'tiM', 'tiD', 'tin',
] as const;
const NESTED = ['+l', '+L', '+vl', '+vL', '+w:2', '+w:0', '+s', '+m', '+ud:0,1', '+us:0,1', '+r', 'dict'] as const;
const INDEX_FORMATS = ['c', 'C', 's', 'S', 'i', 'I', 'l', 'L'] as const;

const b64 = (u: Uint8Array): string => Buffer.from(u.buffer, u.byteOffset, u.byteLength).toString('base64');

class Gen {
  constructor(private readonly r: () => number) {}

  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)]!;
  }

  int(n: number): number {
    return Math.floor(this.r() * n);
  }

  bytes(n: number, mode: 'zero' | 'ones' | 'random'): Uint8Array {
    const u = new Uint8Array(n);
    if (mode === 'ones') u.fill(255);
    else if (mode === 'random') for (let i = 0; i < n; i++) u[i] = this.int(256);
    return u;
  }

  schema(depth: number, name = 'f'): SDesc {
    const S = (format: string, children: SDesc[] = [], dictionary: SDesc | null = null): SDesc => ({
      format, name, flags: '2', metadata: null, children, dictionary,
    });
    const f = depth < 3 && this.r() < 0.4 ? this.pick(NESTED) : this.pick(LEAVES);
    switch (f) {
      case 'dict': return S(this.pick(INDEX_FORMATS), [], this.schema(depth + 1, 'dictionary'));
      case '+m': return S('+m', [{ ...S('+s', [{ ...S(this.pick(['i', 'u', 'l'])), name: 'key', flags: '0' }, this.schema(depth + 1, 'value')]), name: 'entries', flags: '0' }]);
      case '+r': return S('+r', [{ ...S(this.pick(['s', 'i', 'l'])), name: 'run_ends', flags: '0' }, this.schema(depth + 1, 'values')]);
      case '+s': case '+ud:0,1': case '+us:0,1': return S(f, [this.schema(depth + 1, 'a'), this.schema(depth + 1, 'b')]);
      case '+l': case '+L': case '+vl': case '+vL': case '+w:2': case '+w:0': return S(f, [this.schema(depth + 1, 'item')]);
      default: return S(f);
    }
  }

  /** A valid array of `s`, `length` elements from `offset` on. */
  array(s: SDesc, length: number, offset: number): ADesc {
    const t = parseFormat(s.format!, 'x');
    const end = length + offset;
    const bits = Math.ceil(end / 8);
    const mode = this.pick(['zero', 'ones', 'random', 'random', 'random'] as const);
    // A non-nullable field (map keys, run ends) has no nulls.
    const validity = s.flags === '0' || this.r() < 0.3 ? null : this.bytes(bits, this.r() < 0.3 ? 'ones' : 'random');
    let nullCount = '0';
    if (validity) {
      let n = 0;
      for (let k = offset; k < end; k++) if ((validity[k >> 3]! & (1 << (k & 7))) === 0) n++;
      nullCount = this.r() < 0.3 ? '-1' : String(n);
    }
    const A = (buffers: (Uint8Array | null)[], children: ADesc[] = [], dictionary: ADesc | null = null, nc = nullCount): ADesc => ({
      length: String(length), offset: String(offset), nullCount: nc, buffers: buffers.map((b) => (b ? b64(b) : null)), children, dictionary,
    });
    const ints = (w: number, values: number[]): Uint8Array => {
      const u = new Uint8Array(values.length * w);
      const dv = new DataView(u.buffer);
      values.forEach((v, k) => {
        if (w === 1) dv.setInt8(k, v);
        else if (w === 2) dv.setInt16(k * 2, v, true);
        else if (w === 4) dv.setInt32(k * 4, v, true);
        else dv.setBigInt64(k * 8, BigInt(v), true);
      });
      return u;
    };
    /** Offsets 0.. growing by up to `step - 1` each: `end + 1` of them. */
    const ragged = (step: number): number[] => {
      const o = [this.int(3)];
      for (let k = 0; k < end; k++) o.push(o[k]! + this.int(step));
      return o;
    };
    if (s.dictionary) {
      const dl = 1 + this.int(5);
      const w = t.id === 'int' ? t.bitWidth / 8 : 4;
      return A([validity, ints(w, Array.from({ length: end }, () => this.int(dl)))], [], this.array(s.dictionary, dl, 0));
    }
    switch (t.id) {
      case 'null': return A([], [], null, String(length));
      case 'bool': return A([validity, this.bytes(bits, mode)]);
      case 'binary': case 'utf8': case 'large_binary': case 'large_utf8': {
        const o = ragged(5);
        return A([validity, ints(t.id.startsWith('large') ? 8 : 4, o), this.bytes(o[end]!, 'random')]);
      }
      case 'binary_view': case 'utf8_view': {
        const nData = this.int(3);
        const sizes = Array.from({ length: nData }, () => 16 + this.int(48));
        const data = sizes.map((n) => this.bytes(n, 'random'));
        const views = new Uint8Array(end * 16);
        const dv = new DataView(views.buffer);
        for (let k = 0; k < end; k++) {
          const len = nData > 0 ? this.int(30) : this.int(13);
          dv.setInt32(k * 16, len, true);
          if (len > 12) {
            const buf = this.int(nData);
            const off = this.int(Math.max(1, sizes[buf]! - len + 1));
            const l = Math.min(len, sizes[buf]! - off);
            dv.setInt32(k * 16, l, true);
            views.set(data[buf]!.subarray(off, off + 4), k * 16 + 4);
            dv.setInt32(k * 16 + 8, buf, true);
            dv.setInt32(k * 16 + 12, off, true);
          } else {
            views.set(this.bytes(len, 'random'), k * 16 + 4);
          }
        }
        return A([validity, views, ...data, new Uint8Array(new BigInt64Array(sizes.map(BigInt)).buffer)]);
      }
      case 'list': case 'large_list': case 'map': {
        const o = ragged(4);
        return A([validity, ints(t.id === 'large_list' ? 8 : 4, o)], [this.array(s.children[0]!, o[end]!, 0)]);
      }
      case 'list_view': case 'large_list_view': {
        const w = t.id === 'large_list_view' ? 8 : 4;
        const cl = this.int(7);
        const offs: number[] = [];
        const sizes: number[] = [];
        for (let k = 0; k < end; k++) {
          const off = this.int(cl + 1);
          offs.push(off);
          sizes.push(this.int(cl - off + 1));
        }
        return A([validity, ints(w, offs), ints(w, sizes)], [this.array(s.children[0]!, cl, 0)]);
      }
      case 'fixed_list': return A([validity], [this.array(s.children[0]!, end * t.size, 0)]);
      case 'struct': return A([validity], s.children.map((c) => this.array(c, end, 0)));
      case 'union': {
        const ids = Array.from({ length: end }, () => this.pick(t.typeIds));
        if (t.mode === 'sparse') return A([ints(1, ids)], s.children.map((c) => this.array(c, end, 0)), null, '0');
        const lens = t.typeIds.map(() => 1 + this.int(3));
        const offs = ids.map((id) => this.int(lens[t.typeIds.indexOf(id)]!));
        return A([ints(1, ids), ints(4, offs)], s.children.map((c, i) => this.array(c, lens[i]!, 0)), null, '0');
      }
      case 'run_end_encoded': {
        const runs = end === 0 ? 0 : 1 + this.int(Math.min(end, 4));
        const re = parseFormat(s.children[0]!.format!, 'x') as { bitWidth: number };
        const ends: number[] = [];
        for (let k = 0; k < runs; k++) ends.push(k === runs - 1 ? end : Math.max((ends[k - 1] ?? 0) + 1, Math.floor(((k + 1) * end) / runs)));
        const runEnds: ADesc = { length: String(runs), offset: '0', nullCount: '0', buffers: [null, b64(ints(re.bitWidth / 8, ends))], children: [], dictionary: null };
        return A([], [runEnds, this.array(s.children[1]!, runs, 0)], null, '0');
      }
      default: return A([validity, this.bytes(end * fixedByteWidth(t)!, mode)]);
    }
  }
}

/** `n` generated seeds, each a random nested type as a column of a struct batch and alone. */
export function generatedCorpus(seed: number, n: number): Seed[] {
  const g = new Gen(rng(seed));
  const out: Seed[] = [];
  for (let i = 0; i < n; i++) {
    const s = g.schema(0);
    const length = g.int(7);
    const offset = g.pick([0, 0, 1, 3]);
    const a = g.array(s, length, offset);
    const origin = `random type ${seed}:${i}`;
    out.push({ origin, schema: s, array: a });
    // As a column of a record batch (a struct whose one child is the array, unsliced by the parent).
    out.push({
      origin: `${origin} as a column`,
      schema: { format: '+s', name: '', flags: '0', metadata: null, children: [s], dictionary: null },
      array: { length: String(length), offset: '0', nullCount: '0', buffers: [null], children: [a.offset === '0' ? a : { ...a, length: String(length) }], dictionary: null },
    });
  }
  return out;
}
