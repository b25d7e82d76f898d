/**
 * `{ expand: true }`: run-end encoded arrays and list views (which arrow-js
 * 21 cannot represent) turned into the nearest types it has, by copying
 * bytes, not values.
 *
 * - run-end encoded -> its values type: the values taken at each row's run
 *   (Columnar.rst, "Run-End Encoded Layout": run ends are counted from the
 *   start of the unsliced array, so row `offset + r` is in the first run
 *   whose end is greater);
 * - list view -> list (large list view -> large list): offsets rebuilt from
 *   the sizes, the child taken over each view's range in row order
 *   (Columnar.rst, "ListView Layout").
 *
 * "Taken" means a new array of the same type whose element k is element
 * idx[k] of the source (`take`), written from the source's buffers for
 * every type of the spec: fixed-width values, bitmaps, variable-size
 * binaries and their views, lists, fixed-size lists, structs, maps, both
 * unions, dictionary indices (the dictionary is shared). Nested run-end
 * encoded arrays and list views are expanded first (`expandView`), so a
 * take meets only types arrow-js has.
 *
 * arrow-js's builders are not used: reading each value back through
 * `get()` and appending it is lossy or throws for valid data (a union's
 * builder cannot tell the child of a value, nanosecond timestamps come
 * back as fractional milliseconds, decimals as objects a builder refuses,
 * a dictionary of lists fails with "NaN cannot be converted to a BigInt";
 * issue 18), and costs a JS value per element.
 *
 * What the `default` level leaves unchecked is checked here for the rows
 * expanded: every index taken is inside its source, offsets are in order
 * and inside their data, union type ids are declared and dense offsets
 * inside their child; a violation is an `invalid` error at the node. The
 * copy is bounded: past MAX_EXPANDED_ELEMENTS elements built in all, the
 * expansion is refused as `unsupported`.
 */
import { allocBytes, invalid, unsupported } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import { Kind, layoutOf } from '../schema/layout.js';
import type { PlanNode } from './plan.js';
import type { ArrayView } from './view.js';

/**
 * The most elements `{ expand: true }` builds for one array (2^24, about 16
 * million), every level of nesting counted: a valid run-end encoded array
 * of 2^31 elements, or list views whose (overlapping, valid) sizes add up
 * to billions, would otherwise run for minutes and die out of memory. Past
 * it, expansion is refused as `unsupported` naming the place and the
 * count; read the `ArrayView` instead, which costs nothing per element.
 */
export const MAX_EXPANDED_ELEMENTS = 1 << 24;

/** What one expansion has built so far, against MAX_EXPANDED_ELEMENTS. */
interface Budget {
  built: number;
}

function spend(budget: Budget, n: number, path: string): void {
  ensure(budget, n, path);
  budget.built += n;
}

/** Refuses, before anything is allocated, `more` elements the budget does not have. */
function ensure(budget: Budget, more: number, path: string): void {
  if (budget.built + more > MAX_EXPANDED_ELEMENTS) {
    throw unsupported(path, `expanding this array would build ${budget.built + more} elements, more than the ${MAX_EXPANDED_ELEMENTS} { expand: true } builds`);
  }
}

// --- expansion ----------------------------------------------------------------------------

/**
 * `view` (of plan node `pn`) with every run-end encoded array and list view
 * in it expanded (see the file comment): a copy, except the subtrees that
 * need no expansion, which are `view`'s own (an import's, read through its owner).
 */
export function expandView(view: ArrayView, pn: PlanNode, path: string, budget: Budget = { built: 0 }): ArrayView {
  if (!pn.expands) return view;
  const k = pn.layout.kind;
  if (k === Kind.RunEnd) return expandRunEnds(view, pn, path, budget);
  if (k === Kind.ListView) return expandListView(view, pn, path, budget);
  // A node above an expansion: its own buffers copied (the result is a plain view, which no release can
  // make unreadable), its children expanded; a subtree with nothing to expand stays the import's own.
  return {
    schema: pn.expanded(),
    length: view.length,
    offset: view.offset,
    nullCount: view.nullCount,
    buffers: view.buffers.map((b) => (b ? copyOf(b) : null)),
    children: view.children.map((c, i) => expandView(c, pn.children[i]!, `${path}.children[${i}]`, budget)),
    dictionary: view.dictionary ? expandView(view.dictionary, pn.dictionary!, `${path}.dictionary`, budget) : null,
  };
}

/**
 * An integer reader over a buffer of `width` bytes per element (2, 4 or 8),
 * exact within 2^53; NaN past the buffer's end (every comparison then fails,
 * so the caller's range check refuses it).
 */
function ints(b: Uint8Array | null, width: number): (k: number) => number {
  if (!b) return () => 0;
  if (b.byteOffset % Math.min(width, 4) === 0) {
    // Typed arrays where aligned (the import aligns what it views): a DataView call per element cost more.
    if (width === 2) {
      const a = new Int16Array(b.buffer as ArrayBuffer, b.byteOffset, b.byteLength >> 1);
      return (k) => (k < a.length ? a[k]! : NaN);
    }
    const a = new Int32Array(b.buffer as ArrayBuffer, b.byteOffset, b.byteLength >> 2);
    if (width === 4) return (k) => (k < a.length ? a[k]! : NaN);
    const n = a.length >> 1;
    return (k) => (k < n ? a[2 * k + 1]! * 4294967296 + (a[2 * k]! >>> 0) : NaN);
  }
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const n = Math.floor(b.byteLength / width);
  if (width === 2) return (k) => (k < n ? dv.getInt16(k * 2, true) : NaN);
  if (width === 4) return (k) => (k < n ? dv.getInt32(k * 4, true) : NaN);
  return (k) => (k < n ? Number(dv.getBigInt64(k * 8, true)) : NaN);
}

function expandRunEnds(view: ArrayView, pn: PlanNode, path: string, budget: Budget): ArrayView {
  const [runEnds, rawValues] = view.children as [ArrayView, ArrayView];
  const valuesPn = pn.children[1]!;
  const values = expandView(rawValues, valuesPn, `${path}.children[1]`, budget);
  const end = ints(runEnds.buffers[1] ?? null, pn.children[0]!.layout.width);
  ensure(budget, view.length, path);
  const n = view.length;
  const idx = new Int32Array(n);
  // Run by run: the rows up to a run's end all take that run.
  let run = 0;
  for (let r = 0; r < n; ) {
    const i = view.offset + r;
    while (run < runEnds.length && !(end(runEnds.offset + run) > i)) run++;
    if (run >= runEnds.length) throw invalid(`${path}.children[0]`, `no run covers element ${i}`);
    const stop = Math.min(n, end(runEnds.offset + run) - view.offset);
    for (; r < stop; r++) idx[r] = run;
  }
  const out = take(values, idx, `${path}.children[1]`, budget);
  return { ...out, schema: pn.expanded() };
}

function expandListView(view: ArrayView, pn: PlanNode, path: string, budget: Budget): ArrayView {
  const w = pn.layout.width;
  const large = w === 8;
  const childPn = pn.children[0]!;
  const child = expandView(view.children[0]!, childPn, `${path}.children[0]`, budget);
  const off = ints(view.buffers[1] ?? null, w);
  const size = ints(view.buffers[2] ?? null, w);
  const n = view.length;
  const valid = validityReader(view);
  // The new offsets, and the child elements each row takes, in row order (a null row takes none).
  let total = 0;
  for (let r = 0; r < n; r++) {
    if (!valid(view.offset + r)) continue;
    const o = off(view.offset + r);
    const s = size(view.offset + r);
    if (!(o >= 0 && s >= 0 && o + s <= child.length)) {
      throw invalid(`${path}.buffers[1]`, `list view ${view.offset + r} (offset ${o}, size ${s}) is outside the child of length ${child.length}`);
    }
    total += s;
    if (total > MAX_EXPANDED_ELEMENTS) ensure(budget, total, path);
  }
  ensure(budget, n + total, path);
  const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
  const idx = new Int32Array(total);
  let at = 0;
  for (let r = 0; r < n; r++) {
    if (valid(view.offset + r)) {
      const o = off(view.offset + r);
      const s = size(view.offset + r);
      for (let k = 0; k < s; k++) idx[at++] = o + k;
    }
    if (large) (offsets as BigInt64Array)[r + 1] = BigInt(at);
    else (offsets as Int32Array)[r + 1] = at;
  }
  const taken = take(child, idx, `${path}.children[0]`, budget);
  const validity = takeValidity(view, sequence(n));
  liveCounters.copiedBytes += offsets.byteLength;
  return {
    schema: pn.expanded(),
    length: n,
    offset: 0,
    nullCount: validity.nullCount,
    buffers: [validity.bitmap, new Uint8Array(offsets.buffer)],
    children: [taken],
    dictionary: null,
  };
}

function sequence(n: number): Int32Array {
  const s = new Int32Array(n);
  for (let k = 0; k < n; k++) s[k] = k;
  return s;
}

/** Whether physical element `i` of `view` is valid (its own bitmap; no bitmap or null_count 0: all are). */
function validityReader(view: ArrayView): (i: number) => boolean {
  const bm = view.buffers[0];
  if (!bm || view.nullCount === 0 || !layoutOf(view.schema.type).hasValidity) return () => true;
  return (i) => (bm[i >> 3]! & (1 << (i & 7))) !== 0;
}

/** The validity bitmap of the rows `idx` (offset 0), or none when every row is valid. */
function takeValidity(view: ArrayView, idx: Int32Array): { bitmap: Uint8Array | null; nullCount: number } {
  const bm = view.buffers[0];
  if (!bm || view.nullCount === 0 || !layoutOf(view.schema.type).hasValidity) return { bitmap: null, nullCount: 0 };
  const valid = validityReader(view);
  const n = idx.length;
  let nulls = 0;
  const out = allocBytes(Math.ceil(n / 8));
  for (let k = 0; k < n; k++) {
    if (valid(view.offset + idx[k]!)) out[k >> 3]! |= 1 << (k & 7);
    else nulls++;
  }
  if (nulls === 0) return { bitmap: null, nullCount: 0 };
  liveCounters.copiedBytes += out.byteLength;
  return { bitmap: out, nullCount: nulls };
}

/**
 * A new array (offset 0) whose element k is element `idx[k]` of `view`
 * (logical indices, `view.offset` not included). `view` holds no run-end
 * encoded array or list view (expanded first).
 */
export function take(view: ArrayView, idx: Int32Array, path: string, budget: Budget): ArrayView {
  const n = idx.length;
  spend(budget, n, path);
  const node = view.schema;
  const t = node.type;
  // Physical indices: the view's offset applied.
  const phys = new Int32Array(n);
  const length = view.length;
  const offset = view.offset;
  for (let k = 0; k < n; k++) {
    const i = idx[k]!;
    if (i < 0 || i >= length) throw invalid(path, `element ${i} is taken, but the array has ${length}`);
    phys[k] = offset + i;
  }
  const out = (buffers: (Uint8Array | null)[], children: ArrayView[] = [], nullCount = 0, dictionary: ArrayView | null = null): ArrayView =>
    ({ schema: node, length: n, offset: 0, nullCount, buffers, children, dictionary });
  const l = layoutOf(t);
  // Nothing for the kinds without a validity bitmap (null, unions).
  const v = takeValidity(view, idx);

  if (node.dictionary) {
    // The indices taken; the dictionary shared (its values are what the indices name).
    return out([v.bitmap, takeFixed(view.buffers[1] ?? null, phys, l.width, path)], [], v.nullCount, view.dictionary);
  }
  switch (l.kind) {
    case Kind.Null:
      return { schema: node, length: n, offset: 0, nullCount: n, buffers: view.buffers.map(() => null), children: [], dictionary: null };
    case Kind.Bool:
      return out([v.bitmap, takeBits(view.buffers[1] ?? null, phys)], [], v.nullCount);
    case Kind.Binary: case Kind.LargeBinary:
      return out([v.bitmap, ...takeVarBinary(view, phys, l.kind === Kind.LargeBinary, path)], [], v.nullCount);
    case Kind.View: {
      // The 16-byte views taken; the data buffers they point into copied as they are.
      const views = takeFixed(view.buffers[1] ?? null, phys, 16, path);
      const rest = view.buffers.slice(2).map((b) => (b ? copyOf(b) : null));
      checkTakenViews(views, v.bitmap, view.buffers.slice(2, -1), path);
      return out([v.bitmap, views, ...rest], [], v.nullCount);
    }
    case Kind.List: case Kind.LargeList: {
      const { offsets, childIdx } = takeRanges(view, phys, l.kind === Kind.LargeList, path, budget);
      return out([v.bitmap, offsets], [take(view.children[0]!, childIdx, `${path}.children[0]`, budget)], v.nullCount);
    }
    case Kind.FixedList: {
      const size = l.listSize;
      ensure(budget, n * size, path);
      const childIdx = new Int32Array(n * size);
      for (let k = 0; k < n; k++) for (let j = 0; j < size; j++) childIdx[k * size + j] = phys[k]! * size + j;
      return out([v.bitmap], [take(view.children[0]!, childIdx, `${path}.children[0]`, budget)], v.nullCount);
    }
    case Kind.Struct:
      // A struct's children are indexed like the struct, its offset included (Columnar.rst, "Struct Layout").
      return out([v.bitmap], view.children.map((c, i) => take(c, phys, `${path}.children[${i}]`, budget)), v.nullCount);
    case Kind.SparseUnion: case Kind.DenseUnion: {
      const typeIds = (t as { typeIds: readonly number[] }).typeIds;
      const ids = view.buffers[0] ?? new Uint8Array(0);
      const childOf = new Int16Array(256).fill(-1);
      typeIds.forEach((id, k) => (childOf[id] = k));
      const outIds = allocBytes(n, path);
      for (let k = 0; k < n; k++) {
        const id = ids[phys[k]!];
        if (id === undefined || childOf[id]! < 0) throw invalid(`${path}.buffers[0]`, `type id ${id === undefined ? 'beyond the buffer' : (id << 24) >> 24} at ${phys[k]} is not one of the union's (${typeIds.join(',')})`);
        outIds[k] = id;
      }
      if (l.kind === Kind.SparseUnion) {
        return out([outIds], view.children.map((c, i) => take(c, phys, `${path}.children[${i}]`, budget)));
      }
      // Dense: the offsets taken (they index the children, which are shared whole).
      const offs = takeFixed(view.buffers[1] ?? null, phys, 4, path);
      const o = new Int32Array(offs.buffer, offs.byteOffset, n);
      for (let k = 0; k < n; k++) {
        const c = view.children[childOf[outIds[k]!]!]!;
        if (o[k]! < 0 || o[k]! >= c.length) throw invalid(`${path}.buffers[1]`, `offset ${o[k]} at ${phys[k]} is outside child ${childOf[outIds[k]!]} of length ${c.length}`);
      }
      return out([outIds, offs], [...view.children]);
    }
    case Kind.Fixed:
      return out([v.bitmap, takeFixed(view.buffers[1] ?? null, phys, l.width, path)], [], v.nullCount);
    default:
      throw unsupported(path, `cannot take elements of "${node.format}" (expanded first)`);
  }
}

/** Every valid view taken is inside its data buffer (Columnar.rst, "Variable-size Binary View Layout"). */
function checkTakenViews(views: Uint8Array, validity: Uint8Array | null, data: readonly (Uint8Array | null)[], path: string): void {
  const dv = new DataView(views.buffer, views.byteOffset, views.byteLength);
  for (let k = 0; k < views.byteLength / 16; k++) {
    if (validity && (validity[k >> 3]! & (1 << (k & 7))) === 0) continue;
    const len = dv.getInt32(k * 16, true);
    if (len < 0) throw invalid(`${path}.buffers[1]`, `a view of negative length ${len}`);
    if (len <= 12) continue;
    const buf = dv.getInt32(k * 16 + 8, true);
    const off = dv.getInt32(k * 16 + 12, true);
    const size = data[buf]?.byteLength;
    if (size === undefined || off < 0 || off + len > size) {
      throw invalid(`${path}.buffers[1]`, `a view (buffer ${buf}, offset ${off}, length ${len}) is outside its data buffers`);
    }
  }
}

function copyOf(b: Uint8Array): Uint8Array {
  const c = allocBytes(b.byteLength);
  c.set(b);
  liveCounters.copiedBytes += c.byteLength;
  return c;
}

/** `width` bytes of `b` at each physical index. */
function takeFixed(b: Uint8Array | null, phys: Int32Array, width: number, path: string): Uint8Array {
  const n = phys.length;
  const out = allocBytes(n * width, path);
  if (!b || width === 0) return out;
  const beyond = (i: number): never => {
    throw invalid(path, `element ${i} is beyond its ${b.byteLength}-byte buffer`);
  };
  if (width % 4 === 0 && b.byteOffset % 4 === 0) {
    // Whole 32-bit words (never through floats: a float store may change a NaN's bits).
    const words = width / 4;
    const src = new Uint32Array(b.buffer as ArrayBuffer, b.byteOffset, Math.floor(b.byteLength / 4));
    const dst = new Uint32Array(out.buffer as ArrayBuffer);
    if (words === 1) {
      for (let k = 0; k < n; k++) {
        const i = phys[k]!;
        if (i >= src.length) beyond(i);
        dst[k] = src[i]!;
      }
    } else {
      for (let k = 0; k < n; k++) {
        const at = phys[k]! * words;
        if (at + words > src.length) beyond(phys[k]!);
        for (let j = 0; j < words; j++) dst[k * words + j] = src[at + j]!;
      }
    }
  } else if (width <= 2 && b.byteOffset % width === 0) {
    const C = width === 1 ? Uint8Array : Uint16Array;
    const src = new C(b.buffer as ArrayBuffer, b.byteOffset, Math.floor(b.byteLength / width));
    const dst = new C(out.buffer as ArrayBuffer);
    for (let k = 0; k < n; k++) {
      const i = phys[k]!;
      if (i >= src.length) beyond(i);
      dst[k] = src[i]!;
    }
  } else {
    for (let k = 0; k < n; k++) {
      const at = phys[k]! * width;
      if (at + width > b.byteLength) throw invalid(path, `element ${phys[k]} is beyond its ${b.byteLength}-byte buffer`);
      out.set(b.subarray(at, at + width), k * width);
    }
  }
  liveCounters.copiedBytes += out.byteLength;
  return out;
}

function takeBits(b: Uint8Array | null, phys: Int32Array): Uint8Array {
  const n = phys.length;
  const out = allocBytes(Math.ceil(n / 8));
  if (!b) return out;
  for (let k = 0; k < n; k++) {
    const i = phys[k]!;
    if ((b[i >> 3]! & (1 << (i & 7))) !== 0) out[k >> 3]! |= 1 << (k & 7);
  }
  liveCounters.copiedBytes += out.byteLength;
  return out;
}

/** The offsets and data of the binary elements at `phys` (a null element takes no bytes). */
function takeVarBinary(view: ArrayView, phys: Int32Array, large: boolean, path: string): [Uint8Array, Uint8Array] {
  const n = phys.length;
  const off = ints(view.buffers[1] ?? null, large ? 8 : 4); // offsets[i] for physical i, exact within 2^53
  const data = view.buffers[2] ?? new Uint8Array(0);
  const valid = validityReader(view);
  let total = 0;
  for (let k = 0; k < n; k++) {
    const i = phys[k]!;
    if (!valid(i)) continue;
    const a = off(i);
    const b = off(i + 1);
    if (!(a >= 0 && b >= a && b <= data.byteLength)) {
      throw invalid(`${path}.buffers[1]`, `offsets ${a}..${b} at ${i} are out of order or outside the ${data.byteLength} bytes of data`);
    }
    total += b - a;
  }
  if (!large && total > 0x7fffffff) throw unsupported(path, `the ${total} bytes taken do not fit 32-bit offsets`);
  const bytes = allocBytes(total, path);
  const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
  let at = 0;
  for (let k = 0; k < n; k++) {
    const i = phys[k]!;
    if (valid(i)) {
      const a = off(i);
      const b = off(i + 1);
      bytes.set(data.subarray(a, b), at);
      at += b - a;
    }
    if (large) (offsets as BigInt64Array)[k + 1] = BigInt(at);
    else (offsets as Int32Array)[k + 1] = at;
  }
  liveCounters.copiedBytes += bytes.byteLength + offsets.byteLength;
  return [new Uint8Array(offsets.buffer), bytes];
}

/** The new offsets of the lists at `phys`, and the child elements they take, in order (a null list takes none). */
function takeRanges(view: ArrayView, phys: Int32Array, large: boolean, path: string, budget: Budget): { offsets: Uint8Array; childIdx: Int32Array } {
  const n = phys.length;
  const off = ints(view.buffers[1] ?? null, large ? 8 : 4); // offsets[i] for physical i, exact within 2^53
  const childLength = view.children[0]!.length;
  const valid = validityReader(view);
  let total = 0;
  for (let k = 0; k < n; k++) {
    const i = phys[k]!;
    if (!valid(i)) continue;
    const a = off(i);
    const b = off(i + 1);
    if (!(a >= 0 && b >= a && b <= childLength)) {
      throw invalid(`${path}.buffers[1]`, `offsets ${a}..${b} at ${i} are out of order or outside the child of length ${childLength}`);
    }
    total += b - a;
    if (total > MAX_EXPANDED_ELEMENTS) ensure(budget, total, path);
  }
  ensure(budget, total, path);
  const offsets = large ? new BigInt64Array(n + 1) : new Int32Array(n + 1);
  const childIdx = new Int32Array(total);
  let at = 0;
  for (let k = 0; k < n; k++) {
    const i = phys[k]!;
    if (valid(i)) for (let j = off(i), e = off(i + 1); j < e; j++) childIdx[at++] = j;
    if (large) (offsets as BigInt64Array)[k + 1] = BigInt(at);
    else (offsets as Int32Array)[k + 1] = at;
  }
  liveCounters.copiedBytes += offsets.byteLength;
  return { offsets: new Uint8Array(offsets.buffer), childIdx };
}
