/**
 * The O(length) work of an import: `full` validation per element (each
 * check of src/array/import.ts, over 2^24 elements of its shape, minus the
 * same import at `default`), and `expand` per element built. Each array is
 * an `ArrayView` over JS buffers exported zero-copy, so the figures are the
 * checks' own, not copies. Issue 18: a 4 GiB int8 dictionary-index array
 * took 57 s at `full` (a DataView call per element); the rows below are the
 * rate that predicts such a case (4.3e9 x ns/element).
 *
 *   node --import tsx bench/validate.bench.ts [--log2 24] [--reps 5]
 */
import { exportArray, freeArrowArray, importArrayView, importData, parseFormat, type ArrayView, type SchemaNode } from '../src/index.js';

const args = process.argv.slice(2);
const arg = (name: string, dflt: number): number => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : dflt);
const N = 2 ** arg('--log2', 24);
const reps = arg('--reps', 5);

const node = (format: string, children: SchemaNode[] = [], dictionary: SchemaNode | null = null): SchemaNode => ({
  format, type: parseFormat(format), name: 'f', metadata: null, flags: 2, children, dictionary,
});
const view = (schema: SchemaNode, length: number, buffers: (ArrayBufferView | null)[], children: ArrayView[] = [], dictionary: ArrayView | null = null): ArrayView => ({
  schema, length, offset: 0, nullCount: 0, buffers: buffers.map((b) => (b ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : null)), children, dictionary,
});
function seq<C extends Int32ArrayConstructor | Int8ArrayConstructor>(C: C, n: number, f: (k: number) => number): InstanceType<C> {
  const a = new C(n) as InstanceType<C>;
  for (let k = 0; k < n; k++) a[k] = f(k);
  return a;
}

const utf8Dict = view(node('u'), 4, [null, new Int32Array([0, 1, 2, 3, 4]), new TextEncoder().encode('abcd')]);
const shapesOf = (N: number): [string, ArrayView][] => [
  ['dictionary indices, int8', view(node('c', [], node('u')), N, [null, seq(Int8Array, N, (k) => k & 3)], [], utf8Dict)],
  ['dictionary indices, int32', view(node('i', [], node('u')), N, [null, seq(Int32Array, N, (k) => k & 3)], [], utf8Dict)],
  ['timestamps, ms (int64)', view(node('tsm:'), N, [null, new BigInt64Array(N).fill(1_700_000_000_000n)])],
  ['utf8 offsets', view(node('u'), N, [null, seq(Int32Array, N + 1, (k) => k), new Uint8Array(N)])],
  ['list views', view(node('+vl', [node('i')]), N, [null, seq(Int32Array, N, (k) => k & 1023), new Int32Array(N).fill(1)], [view(node('i'), 1024, [null, new Int32Array(1024)])])],
  ['dense union', view(node('+ud:0,1', [node('i'), node('i')]), N, [seq(Int8Array, N, (k) => k & 1), seq(Int32Array, N, (k) => k & 15)], [
    view(node('i'), 16, [null, new Int32Array(16)]), view(node('i'), 16, [null, new Int32Array(16)]),
  ])],
  ['run ends (int32, runs of 4)', view(node('+r', [node('i'), node('i')]), N, [], [
    view(node('i'), N / 4, [null, seq(Int32Array, N / 4, (k) => 4 * (k + 1))]), view(node('i'), N / 4, [null, new Int32Array(N / 4)]),
  ])],
];
const shapes = shapesOf(N);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** Median ms of importing `v` (exported zero-copy each time) at `level`, `expand` or not. */
function time(v: ArrayView, level: 'default' | 'full', expand: boolean): number {
  const t: number[] = [];
  for (let i = 0; i <= reps; i++) {
    const p = exportArray(v);
    const t0 = performance.now();
    if (expand) importData(p, v.schema, { validate: level, expand: true }).release();
    else importArrayView(p, v.schema, { validate: level });
    const ms = performance.now() - t0;
    freeArrowArray(p);
    if (i > 0) t.push(ms); // the first warms up
  }
  return median(t);
}

console.log(`full validation and expand, ${N} elements per array, median of ${reps}`);
console.log('shape                              default ms   full ms   full ns/element');
for (const [name, v] of shapes) {
  const d = time(v, 'default', false);
  const f = time(v, 'full', false);
  console.log(`${name.padEnd(34)} ${d.toFixed(1).padStart(10)} ${f.toFixed(1).padStart(9)} ${(((f - d) * 1e6) / N).toFixed(2).padStart(17)}`);
}
// Expansion counts every element it builds against its 2^24 cap (a list view's rows and their child elements).
const M = N / 4;
for (const [name, v] of shapesOf(M).filter(([n]) => n.startsWith('run ends') || n.startsWith('list views'))) {
  const e = time(v, 'default', true);
  console.log(`expand ${M} rows: ${name.padEnd(26)} ${e.toFixed(1).padStart(8)} ms ${((e * 1e6) / M).toFixed(2).padStart(8)} ns/row`);
}
