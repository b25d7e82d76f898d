/**
 * Import: an `ArrowArray` (with its `SchemaNode`) -> `ArrayView`, validated,
 * with zero-copy views of the producer's buffers.
 *
 * Validation levels (after nanoarrow), each documented by its cost:
 * - `minimal`: what the struct says about itself, O(number of buffers):
 *   counts of buffers and children against the type, negative or
 *   inconsistent lengths, offsets and null counts, NULL buffers the type
 *   needs, released children, a dictionary where the schema has none.
 *   These checks are what keeps an import from reading out of bounds, so
 *   they always run: `none` is accepted as an alias of `minimal`.
 * - `default` (the default): minimal, plus the values that size buffers are
 *   sane, still O(number of buffers): first and last offsets in order and not
 *   negative, children long enough for what their parent's last offset, fixed
 *   size or length says, run ends and values of one length.
 * - `full`: default, plus O(length) checks of the contents: every offset
 *   monotone and inside its buffer, union type ids declared by the type,
 *   dense union offsets inside their child, run ends increasing and covering
 *   the array, view types' views inside their data buffers, dictionary
 *   indices inside the dictionary.
 *
 *   It also refuses (`unsupported`) date64 and second/millisecond/microsecond
 *   timestamp values beyond 2^53 ms, which arrow-js cannot read. The promise of `full`:
 *   reading every value of the import through arrow-js cannot throw;
 *   anything it lets through that makes arrow-js throw is a validation bug.
 *
 * What `minimal` and `default` leave unchecked, exactly (no import at any
 * level reads outside what the struct declares; these only make values wrong):
 * - `minimal`: whether the first offset is 0 or more and the last not below
 *   it (a last offset below 0 sizes the data as empty); whether children are
 *   as long as their parent's last offset, fixed size or length needs (a
 *   short child gives wrong or missing values); run ends and values of
 *   differing lengths. Every level reads the first and last offsets and the
 *   variadic sizes, refusing a wide offset past 2^53 and a negative or
 *   oversized variadic size: they size buffers.
 * - `default` (and `minimal`): offsets between the first and the last
 *   (neither monotone nor inside the data); union type ids (undeclared ids)
 *   and dense union offsets (outside their child); run ends (increasing,
 *   covering the array); list view offsets and sizes (outside the child);
 *   views of view types (outside their data buffers); dictionary indices
 *   (outside the dictionary); date64 and timestamp values arrow-js cannot
 *   read. Reading such values through arrow-js may throw its own plain
 *   errors or give garbage.
 * - No level: UTF-8 validity of utf8 data (arrow-js decodes leniently);
 *   null_count against the bitmap's zero bits (0 makes every slot read as
 *   valid); decimal values within their precision; map keys free of nulls,
 *   and sorted where the keys-sorted flag says so; the contents of null
 *   slots (never read).
 * - `expand` checks what it copies, at every level (src/array/expand.ts):
 *   for each row expanded, run ends covering it, list view ranges, offsets
 *   in order and inside their data or child, union type ids declared and
 *   dense offsets inside their child, views inside their data buffers. An
 *   expanded import holds none of those violations.
 *
 * Limits at every level (typed errors naming the place and the size): a
 * buffer past `MAX_BUFFER_BYTES` (4 GiB), nesting past MAX_NESTING_DEPTH, a
 * struct reached twice in one tree (`visitOnce`), n_buffers past 2^20,
 * metadata past MAX_METADATA_BYTES or MAX_METADATA_PAIRS, `expand` past
 * MAX_EXPANDED_ELEMENTS built (every level of nesting counted,
 * src/array/expand.ts), a bitmap read past bit MAX_BITMAP_BITS (a validity
 * bitmap with nulls, or boolean values, whose offset + length is larger:
 * `bitmapPastLimit`), and a copy JS cannot allocate (`nomem`).
 *
 * Buffers are not viewed here: each becomes a `LazyBytes`, viewed on first
 * read (full validation reads, and so views, what it checks).
 */
import { allocBytes, ArrowDeviceError, invalid, prefixPath } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { Memory } from '../memory/memory.js';
import { ptrAt, rawOf, stage, staged, type Addr, type RawAccess } from '../memory/raw.js';
import { access, type Access, type FieldAccess } from '../abi/accessors.js';
import { Kind, layoutOf, type ArrayLayout } from '../schema/layout.js';
import type { TypeInfo } from '../schema/format.js';
import { AddressSet, MAX_NESTING_DEPTH, visitOnce, type SchemaNode } from '../schema/node.js';
import { ImportOwner } from './owner.js';
import type { ArrayView } from './view.js';

export type ValidationLevel = 'none' | 'minimal' | 'default' | 'full';

const LEVELS: Record<ValidationLevel, number> = { none: 0, minimal: 1, default: 2, full: 3 };

/**
 * One import being read. It is also the import's keep-alive token: every
 * `ImportedView` refers to it, and it is registered with the owner once
 * (`ImportOwner.hold`) when the first lazy buffer is made, so the
 * producer's memory stays while any view can still be created. The owner
 * never refers to it.
 */
export interface ImportContext {
  readonly mem: Memory;
  /** Number-address access to `mem` (src/memory/raw.ts). */
  readonly raw: RawAccess;
  /** Whether pointers are 8 bytes (else 4: wasm32). */
  readonly wide: boolean;
  /** The typed accessors of `ArrowArray` on this memory (src/abi/accessors.ts). */
  readonly A: Access['ArrowArray'];
  readonly owner: ImportOwner;
  /** Copy every buffer into JS memory instead of viewing it. */
  readonly copy: boolean;
  readonly level: number;
  /** Set once the token is held (`ImportOwner.hold`); absent means not yet. */
  held?: boolean;
  /** The struct addresses read so far (see `visitOnce`); taken on first use, given back when the import is read. */
  seen?: AddressSet | undefined;
  /** The node states, one per depth (see NodeState); dropped when the import is read. */
  nodes?: NodeState[] | undefined;
}

/** A new import context over `owner`'s memory. */
export function importContext(owner: ImportOwner, copy: boolean, level: number): ImportContext {
  const mem = owner.mem;
  return { mem, raw: rawOf(mem), wide: mem.target.pointerSize === 8, A: access(mem.target).ArrowArray, owner, copy, level, held: false, seen: undefined, nodes: undefined };
}

export function validationLevel(level: ValidationLevel | undefined): number {
  if (level === undefined) return LEVELS.default;
  const n = LEVELS[level];
  if (n === undefined) throw invalid('options.validate', `unknown validation level "${String(level)}"`);
  return n;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
/** Upper bound on n_buffers (view types: 3 + variadic buffers). */
const MAX_BUFFERS = 1 << 20;
/**
 * The largest buffer this library views or copies: 4 GiB, the most a JS
 * typed array holds on Node 20 (buffer.constants.MAX_LENGTH) and the most
 * koffi can view (a larger view aborts the process). A larger buffer is
 * valid Arrow, refused as `unsupported` with its place and size.
 */
export const MAX_BUFFER_BYTES = 2 ** 32;

/**
 * The largest end (offset + length) of a bitmap this library imports where
 * its bits are read: arrow-js computes bit positions with 32-bit integer
 * operators (`pos >> 3` in `Data.getValid` and the bit readers, `rhs >> 3`
 * in the null count of an unknown null_count), so past 2^31 - 1 a position
 * turns negative: validity reads wrong and counting the nulls recurses until
 * the stack overflows (found by the fuzzer, seed 20261125 case 64582: a
 * fixed-size list of 2^31 rows with null_count -1). Such an array is valid
 * Arrow (lengths are int64), refused as `unsupported` at every level, as a
 * buffer past MAX_BUFFER_BYTES is. A validity bitmap with null_count 0 is
 * never read by arrow-js, so it passes at any length.
 */
export const MAX_BITMAP_BITS = 2 ** 31 - 1;

/** The refusal (see MAX_BITMAP_BITS) of the node's `what` bitmap at `path`, read past MAX_BITMAP_BITS. */
function bitmapPastLimit(n: NodeState, path: string, what: string): ArrowDeviceError {
  return new ArrowDeviceError(
    'unsupported',
    path,
    `the ${what} bitmap's offset + length is ${n.end}: arrow-js reads bits with 32-bit integers, up to ${MAX_BITMAP_BITS}`,
  );
}

/** Refuses a buffer of `size` bytes at `path` that JS cannot hold (see MAX_BUFFER_BYTES). */
export function checkBufferSize(size: number, path: string): void {
  if (size > MAX_BUFFER_BYTES) {
    throw new ArrowDeviceError('unsupported', path, `a buffer of ${size} bytes is larger than the ${MAX_BUFFER_BYTES} bytes JS can hold`);
  }
}

/** The non-negative int64 field `f` of the struct staged at `at`, refused with its exact value otherwise. */
function countAt(dv: DataView, at: number, f: FieldAccess, path: string, what: string): number {
  // The common case first, read in place: a count below 2^32 (high word 0). The accessor's
  // function differs per field, so a call through it is not inlined here.
  const o = at + f.offset;
  if (dv.getInt32(o + 4, true) === 0) return dv.getUint32(o, true);
  const v = f.get(dv, at);
  if (v < 0) throw invalid(`${path}.${what}`, `negative value ${f.big(dv, at)}`);
  if (v === Infinity) throw invalid(`${path}.${what}`, `value ${f.big(dv, at)} is too large`);
  return v;
}

/**
 * One node being read: what the helpers below need (one object, not a
 * closure per helper). One per depth of the tree, reused by every node at
 * that depth (`nodeAt`): a node's children are read at the next depth, so a
 * node's state is not touched until it is done.
 */
class NodeState {
  path = '';
  length = 0;
  offset = 0;
  end = 0;
  nullCount = 0;
  /** The node's buffer pointers: staged copy and offset. */
  bdv: DataView | null = null;
  bat = 0;
  /**
   * The paths of the children of the last node at this depth whose path was
   * `childPathsOf`: a stream's batches (and a repeated import) name the same
   * places, so each is built once, not once per batch.
   */
  childPathsOf = '';
  childPaths: string[] = [];
  constructor(public ctx: ImportContext) {}
}

/** `<path of n>.children[k]`, built once per parent path (see NodeState.childPaths). */
function childPath(n: NodeState, k: number): string {
  if (n.childPathsOf !== n.path) {
    n.childPathsOf = n.path;
    n.childPaths = [];
  }
  return (n.childPaths[k] ??= `${n.path}.children[${k}]`);
}

/**
 * The node states of the import being read, by depth: one array shared by
 * every import (they are read one at a time; one that starts while another
 * is being read gets its own), so an import allocates none once warm.
 */
let sharedNodes: NodeState[] | null = [];
/** The context of a node state between imports: none (see doneReading). */
const NO_CONTEXT = Object.freeze({}) as ImportContext;

/** The node state of depth `depth` of the import (see NodeState). */
function nodeAt(ctx: ImportContext, depth: number): NodeState {
  let nodes = ctx.nodes;
  if (nodes === undefined) {
    nodes = ctx.nodes = sharedNodes ?? [];
    if (nodes === sharedNodes) sharedNodes = null; // taken until the import gives it back
  }
  let n = nodes[depth];
  if (n === undefined) nodes[depth] = n = new NodeState(ctx);
  else n.ctx = ctx;
  return n;
}

/** Gives the import's node states back (see nodeAt); called once the import is read. */
export function doneReading(ctx: ImportContext): void {
  const nodes = ctx.nodes;
  ctx.nodes = undefined;
  if (nodes !== undefined && sharedNodes === null) {
    // Nothing of the import stays in them (the views made hold their own fields): above all not its
    // context, which is the import's keep-alive token (a shared array holding it would keep every
    // import's producer memory from the garbage collector).
    for (const n of nodes) {
      n.ctx = NO_CONTEXT;
      n.bdv = null;
      n.path = '';
    }
    sharedNodes = nodes;
  }
  ctx.seen?.done();
  ctx.seen = undefined;
}

/** Buffer pointer `i` of the node. */
function bufferPtr(n: NodeState, i: number): Addr {
  return ptrAt(n.bdv!, n.bat + i * (n.ctx.wide ? 8 : 4), n.ctx.wide);
}

/**
 * Buffer `i`, `size` bytes from its start; `align` is the JS element size.
 * Zero-copy views are made lazily (see LazyBytes); with `copy`, at once.
 */
function bufferOf(n: NodeState, i: number, size: number, align: number, what: string, nullable = false): Buf {
  const p = bufferPtr(n, i);
  if (p === 0) {
    if (size > 0 && !nullable) throw invalid(`${n.path}.buffers[${i}]`, `NULL ${what} buffer, but ${size} bytes are needed`);
    return null;
  }
  if (size === 0) return new Uint8Array(0);
  const ctx = n.ctx;
  try {
    checkBufferSize(size, '');
    // Refuse an address the memory knows is bad now, not when the view is first read.
    ctx.raw.check(p, size);
    if (ctx.copy) {
      liveCounters.copiedBuffers++;
      liveCounters.copiedBytes += size;
      return ctx.mem.read(BigInt(p), size);
    }
  } catch (e) {
    throw e instanceof ArrowDeviceError && e.path === '' ? prefixPath(e, `${n.path}.buffers[${i}]`) : e;
  }
  if (!ctx.held) {
    ctx.owner.hold(ctx);
    ctx.held = true;
  }
  return new LazyBytes(ctx.owner, p, size, align, n.path, i);
}

function validityOf(n: NodeState): Buf {
  // CDataInterface.rst: the validity buffer MAY be NULL only if null_count is 0.
  // Refused before it is viewed or copied (a copy would be 256 MiB).
  if (n.end > MAX_BITMAP_BITS && n.nullCount !== 0 && bufferPtr(n, 0) !== 0) throw bitmapPastLimit(n, `${n.path}.buffers[0]`, 'validity');
  const v = bufferOf(n, 0, Math.ceil(n.end / 8), 1, 'validity', true);
  if (v === null && n.nullCount !== 0 && n.length > 0) {
    throw invalid(`${n.path}.buffers[0]`, `NULL validity buffer with null_count ${n.nullCount}`);
  }
  return v;
}

/** Offset `k` from `b`, which holds offsets from `base` on. */
function offsetAt(n: NodeState, i: number, b: Uint8Array, wide: boolean, k: number, base: number): number {
  // Little-endian integers from the bytes directly: a DataView per offset read cost more than the read
  // (full validation reads every offset through here).
  const j = (k - base) * (wide ? 8 : 4);
  const lo = (b[j]! | (b[j + 1]! << 8) | (b[j + 2]! << 16) | (b[j + 3]! << 24)) >>> 0;
  if (!wide) return lo | 0;
  const hi = b[j + 4]! | (b[j + 5]! << 8) | (b[j + 6]! << 16) | (b[j + 7]! << 24); // signed high word
  // |v| <= 2^53 - 1 exactly when the high word is within [-2^21, 2^21) and, at the edges, the low word allows it.
  const v = hi * 4294967296 + lo;
  if (v > Number.MAX_SAFE_INTEGER || v < -Number.MAX_SAFE_INTEGER) {
    const big = (BigInt(hi) << 32n) | BigInt(lo);
    throw invalid(`${n.path}.buffers[${i}]`, `offset ${big} at ${k} is out of range`);
  }
  return v;
}

function readOffsets(n: NodeState, i: number, wide: boolean, what: string): { view: Buf; first: number; last: number } {
  const { ctx, offset, end, path } = n;
  const w = wide ? 8 : 4;
  // offset + length + 1 offsets; an empty array may have a NULL offsets buffer, one with elements may not.
  const view = bufferOf(n, i, (end + 1) * w, w, what, n.length === 0);
  if (!view || byteLength(view) === 0) return { view, first: 0, last: 0 };
  // Only the first and last offsets size the data: read those two without viewing the buffer,
  // in one read when they are close (a small array), else one read each.
  let first: number;
  let last: number;
  if ((end - offset) * w <= 64) {
    const both = readSmall(ctx, view, offset * w, (end - offset + 1) * w);
    first = offsetAt(n, i, both, wide, offset, offset);
    last = offsetAt(n, i, both, wide, end, offset);
  } else {
    first = offsetAt(n, i, readSmall(ctx, view, offset * w, w), wide, offset, offset);
    last = offsetAt(n, i, readSmall(ctx, view, end * w, w), wide, end, end);
  }
  if (ctx.level >= LEVELS.default) {
    if (first < 0) throw invalid(`${path}.buffers[${i}]`, `first ${what} ${first} is negative`);
    if (last < first) throw invalid(`${path}.buffers[${i}]`, `last ${what} ${last} is less than the first ${first}`);
  }
  if (ctx.level >= LEVELS.full) {
    const b = bytesOf(view)!;
    let prev = first;
    for (let k = offset + 1; k <= end; k++) {
      const cur = offsetAt(n, i, b, wide, k, 0);
      if (cur < prev) throw invalid(`${path}.buffers[${i}]`, `${what}s are not monotone at ${k}: ${cur} after ${prev}`);
      prev = cur;
    }
  }
  return { view, first, last: Math.max(last, 0) };
}

/** Stages `n` pointers at `addr`, errors placed at `path.field`; returns their offset in `staged`. */
function stagePointers(ctx: ImportContext, addr: Addr, n: number, path: string, field: string): number {
  try {
    return stage(ctx.raw, addr, n * (ctx.wide ? 8 : 4));
  } catch (e) {
    throw prefixPath(e, `${path}.${field}`);
  }
}

/**
 * What a parent read for its children, so a child reads nothing twice: the
 * children's structs (read in one copy: `sdv` from `s0`, `size` bytes
 * each), and where their buffer pointers lie right after a sibling's, those
 * too (`bdv[k]` at `bat[k]`, valid when child `k`'s n_buffers is `bn[k]`;
 * see `readChildren`).
 */
interface ChildBlock {
  readonly sdv: DataView;
  readonly s0: number;
  readonly size: number;
  readonly bdv: (DataView | null)[] | null;
  readonly bat: number[] | null;
  readonly bn: number[] | null;
}

/**
 * The children's structs, when they lie one after another in memory (as a
 * whole tree exported by one allocation, or Arrow C++'s vector of child
 * structs, has them): read in one copy, each child then read from there;
 * and the children's buffer pointer arrays where they follow each other,
 * also in one copy. A child's array is prefetched only when its `n_buffers`
 * is what its type has, so no byte is read that the child's own read would
 * not read. Null when the structs are not adjacent (each child reads its own).
 */
function readChildren(ctx: ImportContext, cdv: DataView, cat: number, nChildren: number, schema: SchemaNode): ChildBlock | null {
  if (nChildren < 2) return null;
  const wide = ctx.wide;
  const ps = wide ? 8 : 4;
  const size = ctx.A.$size;
  const first = ptrAt(cdv, cat, wide);
  if (first === 0) return null;
  for (let k = 1; k < nChildren; k++) if (ptrAt(cdv, cat + k * ps, wide) !== first + k * size) return null;
  // Memory JS reads in place (our own allocations, a wasm module's memory) costs nothing per read:
  // there each child reads its own, and nothing is gained by reading ahead.
  if (ctx.raw.inPlace !== undefined && ctx.raw.inPlace(first, nChildren * size) !== null) return null;
  let sdv: DataView;
  let s0: number;
  try {
    s0 = stage(ctx.raw, first, nChildren * size);
    sdv = staged.dv;
  } catch {
    return null; // let each child report its own bad address
  }
  const A = ctx.A;
  let bdv: (DataView | null)[] | null = null;
  let bat: number[] | null = null;
  let bn: number[] | null = null;
  // Runs of buffer arrays that follow each other: children [runStart, end) from address runPtr, runCount pointers.
  let runStart = -1;
  let runPtr = 0;
  let runCount = 0;
  const flush = (end: number): void => {
    if (runStart >= 0 && end - runStart >= 2) {
      try {
        const at = stage(ctx.raw, runPtr, runCount * ps);
        const dv = staged.dv;
        if (bdv === null) {
          bdv = new Array<DataView | null>(nChildren).fill(null);
          bat = new Array<number>(nChildren).fill(0);
          bn = new Array<number>(nChildren).fill(-1);
        }
        for (let k = runStart; k < end; k++) {
          const sat = s0 + k * size;
          bdv[k] = dv;
          bat![k] = at + (A.buffers.get(sdv, sat) - runPtr);
          bn![k] = A.n_buffers.get(sdv, sat);
        }
      } catch {
        // Each child reads (and reports) its own.
      }
    }
    runStart = -1;
    runCount = 0;
  };
  for (let k = 0; k < nChildren; k++) {
    const sat = s0 + k * size;
    const nb = A.n_buffers.get(sdv, sat);
    const bp = A.buffers.get(sdv, sat);
    const child = schema.children[k];
    const phys = child ? layoutOf(child.type) : undefined;
    const ok = phys !== undefined && !phys.variadic && nb > 0 && nb === phys.nBuffers && bp !== 0;
    if (!ok) {
      flush(k);
      continue;
    }
    if (runStart >= 0 && bp === runPtr + runCount * ps) {
      runCount += nb;
    } else {
      flush(k);
      runStart = k;
      runPtr = bp;
      runCount = nb;
    }
  }
  flush(nChildren);
  return { sdv, s0, size, bdv, bat, bn };
}

/** Shared by every node without children: one allocation saved per leaf. */
const NO_CHILDREN: readonly ArrayView[] = Object.freeze([]);

/** Children 0 to `n` - 1 of a node, each checked against the length its parent needs, in an array of their number. */
function readChildrenViews(
  nd: NodeState,
  schema: SchemaNode,
  cdv: DataView,
  cat: number,
  block: ChildBlock | null,
  n: number,
  minLength: number,
  depth: number,
): ArrayView[] {
  const out: ArrayView[] = new Array(n);
  for (let k = 0; k < n; k++) out[k] = readChild(nd, schema, cdv, cat, block, k, minLength, depth);
  return out;
}

/** Child `k` of a node, checked against the length its parent needs. */
function readChild(
  n: NodeState,
  schema: SchemaNode,
  cdv: DataView,
  cat: number,
  block: ChildBlock | null,
  k: number,
  minLength: number,
  depth: number,
): ArrayView {
  const ptr = ptrAt(cdv, cat + k * (n.ctx.wide ? 8 : 4), n.ctx.wide);
  const child = readArrayView(n.ctx, ptr, schema.children[k]!, childPath(n, k), depth + 1, block, k);
  if (n.ctx.level >= LEVELS.default && child.length < minLength) {
    throw invalid(`${n.path}.children[${k}].length`, `${child.length} is less than the ${minLength} its parent needs`);
  }
  return child;
}

/**
 * Reads an `ArrowArray` tree whose struct lives at `addr` (the owner's copy
 * for the root). `block`, when given, holds the struct's bytes (struct `k`
 * of the block: read with its siblings') and perhaps its buffer pointers,
 * so they are not read again.
 */
export function readArrayView(
  ctx: ImportContext,
  addr: Addr,
  schema: SchemaNode,
  path: string,
  depth = 0,
  block: ChildBlock | null = null,
  k = 0,
): ArrayView {
  if (addr === 0) throw invalid(path, 'NULL pointer');
  if (depth > MAX_NESTING_DEPTH) throw invalid(path, `nesting deeper than ${MAX_NESTING_DEPTH} levels`);
  visitOnce((ctx.seen ??= AddressSet.shared()), addr, path);
  try {
    const A = ctx.A;
    const wide = ctx.wide;
    const ps = wide ? 8 : 4;
    let dv: DataView;
    let at: number;
    if (block) {
      dv = block.sdv;
      at = block.s0 + k * block.size;
    } else {
      at = stage(ctx.raw, addr, A.$size);
      dv = staged.dv;
    }
    if (A.release.get(dv, at) === 0) {
      throw new ArrowDeviceError('released', path, 'the struct is released (release is NULL)');
    }
    const length = countAt(dv, at, A.length, path, 'length');
    const offset = countAt(dv, at, A.offset, path, 'offset');
    const nc = A.null_count.get(dv, at);
    if (nc < -1) throw invalid(`${path}.null_count`, `negative value ${A.null_count.big(dv, at)}`);
    if (nc > length) throw invalid(`${path}.null_count`, `${Number(A.null_count.big(dv, at))} is greater than the length ${length}`);
    const nullCount = nc;
    if (length + offset > Number.MAX_SAFE_INTEGER) throw invalid(path, `offset + length overflows`);
    const nBuffers = countAt(dv, at, A.n_buffers, path, 'n_buffers');
    const nChildren = countAt(dv, at, A.n_children, path, 'n_children');
    // View types take any number of variadic buffers; refuse counts no producer
    // could have allocated before following the pointer array that far.
    if (nBuffers > MAX_BUFFERS) throw invalid(`${path}.n_buffers`, `implausible value ${nBuffers}`);
    const buffersPtr = A.buffers.get(dv, at);
    const childrenPtr = A.children.get(dv, at);
    const dictPtr = A.dictionary.get(dv, at);

    const t = schema.type;
    // Minimal checks of the struct against its type. They are cheap and what
    // keeps the rest of the import from reading out of bounds, so they run
    // at every level but `none`, which still refuses counts it cannot use.
    const lay = layoutOf(t);
    checkCounts(schema, lay, nBuffers, nChildren, buffersPtr, childrenPtr, dictPtr, nullCount, path);

    // The buffer and child pointer arrays, with as few memory reads as the layout allows (each
    // read through the FFI costs more than the rest of a small node): as the parent prefetched
    // them, or in one read when the children array follows the buffers array (as in a tree
    // exported in one allocation); otherwise one read each. Only the bytes they declare are read.
    let bdv = staged.dv;
    let bat = 0;
    let cdv = staged.dv;
    let cat = 0;
    const pdv = block?.bdv?.[k];
    if (pdv && block!.bn![k] === nBuffers) {
      bdv = pdv;
      bat = block!.bat![k]!;
      if (nChildren > 0) {
        cat = stagePointers(ctx, childrenPtr, nChildren, path, 'children');
        cdv = staged.dv;
      }
    } else {
      let both = false;
      if (nBuffers > 0 && nChildren > 0 && childrenPtr === buffersPtr + nBuffers * ps) {
        try {
          bat = stage(ctx.raw, buffersPtr, (nBuffers + nChildren) * ps);
          bdv = cdv = staged.dv;
          cat = bat + nBuffers * ps;
          both = true;
        } catch {
          // Read them apart below: each array reports its own bad address.
        }
      }
      if (!both) {
        if (nBuffers > 0) {
          bat = stagePointers(ctx, buffersPtr, nBuffers, path, 'buffers');
          bdv = staged.dv;
        }
        if (nChildren > 0) {
          cat = stagePointers(ctx, childrenPtr, nChildren, path, 'children');
          cdv = staged.dv;
        }
      }
    }
    const end = offset + length;
    const n = nodeAt(ctx, depth);
    n.path = path;
    n.length = length;
    n.offset = offset;
    n.end = end;
    n.nullCount = nullCount;
    n.bdv = bdv;
    n.bat = bat;
    const kids = nChildren > 1 ? readChildren(ctx, cdv, cat, nChildren, schema) : null;

    // Arrays of their exact size (a push-grown array starts at 16 slots): these live as long as the import.
    let buffers: Buf[];
    let children: readonly ArrayView[] = NO_CHILDREN;

    switch (lay.kind) {
      case Kind.Null:
        buffers = nBuffers === 1 ? [null] : []; // tolerate a legacy, unused validity slot
        break;
      case Kind.Bool: {
        const v = validityOf(n);
        if (end > MAX_BITMAP_BITS && bufferPtr(n, 1) !== 0) throw bitmapPastLimit(n, `${path}.buffers[1]`, 'values');
        buffers = [v, bufferOf(n, 1, Math.ceil(end / 8), 1, 'values')];
        break;
      }
      case Kind.Binary: case Kind.LargeBinary: {
        const wideOffsets = lay.kind === Kind.LargeBinary;
        const v = validityOf(n);
        const offs = readOffsets(n, 1, wideOffsets, 'offset');
        const data = bufferOf(n, 2, offs.last, 1, 'data', offs.last === 0);
        buffers = [v, offs.view, data];
        break;
      }
      case Kind.View: {
        const v = validityOf(n);
        const views = bufferOf(n, 1, end * 16, 8, 'views');
        const nVariadic = nBuffers - 3;
        const sizesView = bufferOf(n, nBuffers - 1, nVariadic * 8, 8, 'variadic sizes', nVariadic === 0);
        const sizes: number[] = [];
        if (sizesView && nVariadic > 0) {
          const sb = readSmall(ctx, sizesView, 0, nVariadic * 8);
          const sdv = new DataView(sb.buffer, sb.byteOffset, sb.byteLength);
          for (let k = 0; k < nVariadic; k++) {
            const sz = sdv.getBigInt64(k * 8, true);
            if (sz < 0n || sz > MAX_SAFE) throw invalid(`${path}.buffers[${nBuffers - 1}]`, `variadic buffer ${k} has size ${sz}`);
            sizes.push(Number(sz));
          }
        }
        buffers = [v, views];
        for (let k = 0; k < nVariadic; k++) buffers.push(bufferOf(n, 2 + k, sizes[k]!, 1, `variadic data ${k}`, sizes[k] === 0));
        buffers.push(sizesView);
        if (ctx.level >= LEVELS.full && views) checkViews(bytesOf(views)!, offset, length, sizes, bytesOf(buffers[0] ?? null), nullCount, path);
        break;
      }
      case Kind.List: case Kind.LargeList: {
        const v = validityOf(n);
        const offs = readOffsets(n, 1, lay.kind === Kind.LargeList, 'offset');
        buffers = [v, offs.view];
        children = [readChild(n, schema, cdv, cat, kids, 0, offs.last, depth)];
        break;
      }
      case Kind.ListView: {
        const w = lay.width;
        const v = validityOf(n);
        const offs = bufferOf(n, 1, end * w, w, 'offsets');
        const sizes = bufferOf(n, 2, end * w, w, 'sizes');
        buffers = [v, offs, sizes];
        const child = readChild(n, schema, cdv, cat, kids, 0, 0, depth);
        children = [child];
        if (ctx.level >= LEVELS.full && offs && sizes) checkListViews(bytesOf(offs)!, bytesOf(sizes)!, w === 8, offset, end, child.length, path);
        break;
      }
      case Kind.FixedList:
        buffers = [validityOf(n)];
        children = [readChild(n, schema, cdv, cat, kids, 0, end * lay.listSize, depth)];
        break;
      case Kind.Struct:
        buffers = [validityOf(n)];
        children = readChildrenViews(n, schema, cdv, cat, kids, nChildren, end, depth);
        break;
      case Kind.SparseUnion: case Kind.DenseUnion: {
        const ids = (t as Extract<TypeInfo, { id: 'union' }>).typeIds; // the layout says it is a union
        const typeIds = bufferOf(n, 0, end, 1, 'type ids');
        let offs: Buf = null;
        if (lay.kind === Kind.DenseUnion) {
          offs = bufferOf(n, 1, end * 4, 4, 'offsets');
          buffers = [typeIds, offs];
        } else {
          buffers = [typeIds];
        }
        children = readChildrenViews(n, schema, cdv, cat, kids, nChildren, lay.kind === Kind.SparseUnion ? end : 0, depth);
        if (ctx.level >= LEVELS.full && typeIds) checkUnion(bytesOf(typeIds)!, bytesOf(offs), ids, children, offset, end, path);
        break;
      }
      case Kind.RunEnd: {
        const runEnds = readChild(n, schema, cdv, cat, kids, 0, 0, depth);
        const values = readChild(n, schema, cdv, cat, kids, 1, 0, depth);
        buffers = [];
        children = [runEnds, values];
        if (ctx.level >= LEVELS.default && runEnds.length !== values.length) {
          throw invalid(`${path}.children[1].length`, `run ends (${runEnds.length}) and values (${values.length}) differ in length`);
        }
        if (ctx.level >= LEVELS.full) checkRunEnds(runEnds, end, path);
        break;
      }
      default: {
        buffers = [validityOf(n), bufferOf(n, 1, end * lay.width, lay.align, 'values')];
        if (ctx.level >= LEVELS.full && ((t.id === 'date' && t.unit === 'ms') || (t.id === 'timestamp' && t.unit !== 'ns'))) {
          // arrow-js reads a microsecond timestamp as v / 1000 (whole milliseconds must fit 2^53 too).
          const divisor = t.id === 'timestamp' && t.unit === 'us' ? 1000n : 1n;
          checkMillis(bytesOf(buffers[1] ?? null), offset, length, bytesOf(buffers[0] ?? null), nullCount, path, divisor);
        }
      }
    }

    let dictionary: ArrayView | null = null;
    if (schema.dictionary) {
      dictionary = readArrayView(ctx, dictPtr, schema.dictionary, `${path}.dictionary`, depth + 1);
      if (ctx.level >= LEVELS.full) {
        checkIndices(bytesOf(buffers[1] ?? null), t, offset, length, dictionary.length, bytesOf(buffers[0] ?? null), nullCount, path);
      }
    }
    return new ImportedView(schema, length, offset, nullCount, buffers, children, dictionary, ctx, ctx.copy ? null : ctx.owner, path);
  } catch (e) {
    if (e instanceof ArrowDeviceError && e.path === '') throw prefixPath(e, path);
    throw e;
  }
}

/**
 * A producer buffer not viewed yet. Creating a view (an external
 * ArrayBuffer) makes V8 count its bytes as external memory and collect
 * garbage in proportion, so views are made on first access: importing costs
 * O(number of buffers), and only the buffers a program reads are viewed.
 */
export class LazyBytes {
  private cached: Uint8Array | undefined;

  constructor(
    private readonly owner: ImportOwner,
    readonly addr: Addr,
    readonly size: number,
    /** The element size the JS view must be aligned to; a misaligned buffer is copied (and counted). */
    readonly align: number,
    /** The node's place and the buffer's index, for the error a read after release gets. */
    private readonly nodePath: string,
    private readonly index: number,
  ) {}

  /** Where the buffer is: `array.children[1].buffers[2]`. */
  get path(): string {
    return `${this.nodePath}.buffers[${this.index}]`;
  }

  get materialized(): boolean {
    return this.cached !== undefined;
  }

  get(): Uint8Array {
    if (!this.cached) {
      // Throws a typed error once the import was released.
      let v = this.owner.view(this.addr, this.size, this.path);
      if (v.byteOffset % this.align !== 0) {
        const copy = allocBytes(this.size, this.path);
        copy.set(v);
        v = copy;
        liveCounters.copiedBuffers++;
        liveCounters.copiedBytes += this.size;
      }
      this.cached = v;
    }
    return this.cached;
  }
}

/** Marks a buffer slot of a Data state not made yet (src/array/arrowjs.ts). */
export const UNSET: unique symbol = Symbol('arrow-device.unset');

/** A buffer during import: absent, bytes, or not viewed yet. */
export type Buf = Uint8Array | LazyBytes | null;

export function bytesOf(b: Buf): Uint8Array | null {
  return b instanceof LazyBytes ? b.get() : b;
}

function byteLength(b: Uint8Array | LazyBytes): number {
  return b instanceof LazyBytes ? b.size : b.byteLength;
}

/** `n` bytes at `at` of a buffer, copied (from the view if there is one, else straight from memory). */
function readSmall(ctx: ImportContext, b: Uint8Array | LazyBytes, at: number, n: number): Uint8Array {
  if (b instanceof LazyBytes && !b.materialized) {
    const off = stage(ctx.raw, b.addr + at, n);
    return staged.u8.subarray(off, off + n);
  }
  return bytesOf(b)!.subarray(at, at + n);
}

/**
 * The `ArrayView` of an import. Its buffers are viewed when `buffers` is
 * first read (all of this node's at once); arrow-js conversion reads `raw`
 * instead, one buffer at a time, on first access (see viewToData).
 */
export class ImportedView implements ArrayView {
  private cached: (Uint8Array | null)[] | undefined;

  // The state of the first arrow-js Data made over this node (src/array/arrowjs.ts `DataState`): the
  // node is its own state, an object per node fewer for every import converted to arrow-js. `form`
  // -1: no Data has taken it yet (a second Data over the node gets a state of its own).
  valueOffsets: unknown = UNSET;
  values: unknown = UNSET;
  nullBitmap: unknown = UNSET;
  typeIds: unknown = UNSET;
  variadicBuffers: unknown = UNSET;
  wasm: Record<string, ArrayBufferView[]> | undefined = undefined;
  form = -1;
  hasBitmap = false;
  stride = 0;
  Ctor: unknown = null;
  parts: unknown = null;

  /** As a Data state: the view it reads. */
  get view(): this {
    return this;
  }

  constructor(
    readonly schema: SchemaNode,
    readonly length: number,
    readonly offset: number,
    readonly nullCount: number,
    readonly raw: readonly Buf[],
    readonly children: readonly ArrayView[],
    readonly dictionary: ArrayView | null,
    /** Keeps the producer's memory alive while this view is reachable: the import's context (see ImportContext). */
    readonly token: object,
    /** The import's owner; null for a copy (its bytes are ours, readable after the release). */
    readonly owner: ImportOwner | null,
    /** Where this node is, for the error a read after release gets. */
    readonly path: string,
  ) {}

  /** Every buffer of this node, viewed now if they were not; throws once the import is released. */
  get buffers(): readonly (Uint8Array | null)[] {
    this.owner?.check(this.path, 'a buffer read');
    this.cached ??= this.raw.map(bytesOf);
    return this.cached;
  }

  /** Buffer `i`, viewed now if it was not; throws once the import is released. */
  buffer(i: number): Uint8Array | null {
    this.owner?.check(this.path, 'a buffer read');
    return bytesOf(this.raw[i] ?? null);
  }

  /** Whether buffer `i` is present and not empty, without viewing it. */
  present(i: number): boolean {
    const b = this.raw[i];
    return b instanceof LazyBytes ? true : (b?.byteLength ?? 0) > 0;
  }
}

function checkRunEnds(runEnds: ArrayView, end: number, path: string): void {
  const b = runEnds.buffers[1];
  if (!b || runEnds.length === 0) {
    if (end > 0) throw invalid(`${path}.children[0]`, `no run ends for ${end} elements`);
    return;
  }
  const w = (runEnds.schema.type as { bitWidth: number }).bitWidth / 8;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const get = (k: number): number =>
    w === 2 ? dv.getInt16(k * 2, true) : w === 4 ? dv.getInt32(k * 4, true) : Number(dv.getBigInt64(k * 8, true));
  let prev = 0;
  for (let k = runEnds.offset; k < runEnds.offset + runEnds.length; k++) {
    const cur = get(k);
    if (cur <= prev) throw invalid(`${path}.children[0]`, `run ends must be positive and strictly increasing: ${cur} after ${prev} at ${k}`);
    prev = cur;
  }
  if (prev < end) throw invalid(`${path}.children[0]`, `the last run end ${prev} is less than offset + length ${end}`);
}

function checkViews(
  views: Uint8Array,
  offset: number,
  length: number,
  sizes: number[],
  validity: Uint8Array | null,
  nullCount: number,
  path: string,
): void {
  const dv = new DataView(views.buffer, views.byteOffset, views.byteLength);
  for (let k = offset; k < offset + length; k++) {
    if (validity && nullCount !== 0 && (validity[k >> 3]! & (1 << (k & 7))) === 0) continue;
    const len = dv.getInt32(k * 16, true);
    if (len < 0) throw invalid(`${path}.buffers[1]`, `view ${k} has negative length ${len}`);
    if (len > 12) {
      const buf = dv.getInt32(k * 16 + 8, true);
      const off = dv.getInt32(k * 16 + 12, true);
      if (buf < 0 || buf >= sizes.length) throw invalid(`${path}.buffers[1]`, `view ${k} refers to data buffer ${buf} of ${sizes.length}`);
      if (off < 0 || off + len > sizes[buf]!) {
        throw invalid(`${path}.buffers[1]`, `view ${k} (offset ${off}, length ${len}) is outside data buffer ${buf} of ${sizes[buf]} bytes`);
      }
    }
  }
}

/**
 * `b` as an array of `Ctor`: zero-copy where aligned (the import aligns
 * what it views), else over a copy. The O(length) checks below read
 * elements through typed arrays: a DataView call (or a BigInt) per element
 * made `full` validation of a 4 GiB buffer take minutes.
 */
function elements<C extends Int8ArrayConstructor | Uint8ArrayConstructor | Int16ArrayConstructor | Uint16ArrayConstructor | Int32ArrayConstructor | Uint32ArrayConstructor>(
  Ctor: C,
  b: Uint8Array,
): InstanceType<C> {
  const w = Ctor.BYTES_PER_ELEMENT;
  const src = b.byteOffset % w === 0 ? b : b.slice();
  return new Ctor(src.buffer as ArrayBuffer, src.byteOffset, Math.floor(src.byteLength / w)) as InstanceType<C>;
}

/** Element `k` of 64-bit little-endian integers held as int32 words, exact within 2^53 (-1 for any negative value). */
function word64(words: Int32Array, k: number): number {
  const hi = words[2 * k + 1]!;
  return hi < 0 ? -1 : hi * 4294967296 + (words[2 * k]! >>> 0);
}

const isNull = (validity: Uint8Array | null, nullCount: number, k: number): boolean =>
  validity !== null && nullCount !== 0 && (validity[k >> 3]! & (1 << (k & 7))) === 0;

/** Every list view (null ones too, Columnar.rst "ListView Layout") inside the child. */
function checkListViews(offs: Uint8Array, sizes: Uint8Array, wide: boolean, offset: number, end: number, childLength: number, path: string): void {
  const bad = (k: number, off: number | bigint, size: number | bigint): ArrowDeviceError =>
    invalid(`${path}.buffers[1]`, `list view ${k} (offset ${off}, size ${size}) is outside the child of length ${childLength}`);
  if (wide) {
    const o = elements(Int32Array, offs);
    const z = elements(Int32Array, sizes);
    for (let k = offset; k < end; k++) {
      const off = word64(o, k);
      const size = word64(z, k);
      if (off < 0 || size < 0 || off + size > childLength) {
        const big = (w: Int32Array): bigint => (BigInt(w[2 * k + 1]!) << 32n) | BigInt(w[2 * k]! >>> 0);
        throw bad(k, big(o), big(z));
      }
    }
    return;
  }
  const o = elements(Int32Array, offs);
  const z = elements(Int32Array, sizes);
  for (let k = offset; k < end; k++) {
    const off = o[k]!;
    const size = z[k]!;
    if (off < 0 || size < 0 || off + size > childLength) throw bad(k, off, size);
  }
}

/** Every type id declared by the union; every dense offset inside its child. */
function checkUnion(typeIds: Uint8Array, offs: Uint8Array | null, declared: readonly number[], children: readonly ArrayView[], offset: number, end: number, path: string): void {
  // Child index by type id (a table: a Map lookup per element cost more than the rest of the check).
  const childOf = new Int16Array(256).fill(-1);
  declared.forEach((id, k) => {
    if (id >= 0 && id < 128) childOf[id] = k;
  });
  const ids = elements(Int8Array, typeIds);
  const o = offs ? elements(Int32Array, offs) : null;
  for (let k = offset; k < end; k++) {
    const id = ids[k]!;
    const c = childOf[id & 255]!;
    if (c < 0) throw invalid(`${path}.buffers[0]`, `type id ${id} at ${k} is not one of the union's (${declared.join(',')})`);
    if (o) {
      const off = o[k]!;
      if (off < 0 || off >= children[c]!.length) {
        throw invalid(`${path}.buffers[1]`, `offset ${off} at ${k} is outside child ${c} of length ${children[c]!.length}`);
      }
    }
  }
}

/**
 * arrow-js reads date64 and second/millisecond/microsecond timestamps as JS
 * numbers of milliseconds, and throws for an int64 it cannot convert exactly
 * (beyond 2^53 once divided by `divisor`: 1000 for microseconds, whose
 * whole milliseconds it converts). Valid Arrow, but `full` promises every
 * value reads: such a value is refused as `unsupported`, with its place.
 */
function checkMillis(values: Uint8Array | null, offset: number, length: number, validity: Uint8Array | null, nullCount: number, path: string, divisor = 1n): void {
  if (!values) return;
  const words = elements(Int32Array, values);
  // A high word within +-limit is safe without a closer look: |v| < 2^53 (divisor 1), or
  // |v| < 1000 * 2^53 (divisor 1000); only values near or past the edge are converted exactly.
  const limit = divisor === 1n ? 2097151 : 2097151999;
  for (let k = offset; k < offset + length; k++) {
    const hi = words[2 * k + 1]!;
    if (hi <= limit && hi >= -limit) continue;
    if (isNull(validity, nullCount, k)) continue;
    const raw = (BigInt(hi) << 32n) | BigInt(words[2 * k]! >>> 0);
    const v = divisor === 1n ? raw : raw / divisor;
    if (v > MAX_SAFE || v < -MAX_SAFE) {
      throw new ArrowDeviceError('unsupported', `${path}.buffers[1]`, `value ${v} at ${k} is beyond the 2^53 arrow-js can read as a number`);
    }
  }
}

function checkIndices(
  values: Uint8Array | null,
  t: SchemaNode['type'],
  offset: number,
  length: number,
  dictLength: number,
  validity: Uint8Array | null,
  nullCount: number,
  path: string,
): void {
  if (!values || t.id !== 'int') return;
  const end = offset + length;
  const bad = (k: number, i: number | bigint): ArrowDeviceError =>
    invalid(`${path}.buffers[1]`, `dictionary index ${i} at ${k} is outside the dictionary of length ${dictLength}`);
  if (t.bitWidth === 64) {
    const words = elements(Int32Array, values);
    for (let k = offset; k < end; k++) {
      const i = word64(words, k);
      if ((i < 0 || i >= dictLength) && !isNull(validity, nullCount, k)) {
        const hi = BigInt(words[2 * k + 1]!);
        const lo = BigInt(words[2 * k]! >>> 0);
        throw bad(k, t.signed ? (hi << 32n) | lo : BigInt.asUintN(64, (hi << 32n) | lo));
      }
    }
    return;
  }
  // Read as unsigned: a signed index is inside exactly when its unsigned reading is below
  // min(dictLength, 2^(bits-1)). One monomorphic scan per width (a loop over several typed
  // array kinds runs several times slower).
  const bits = t.bitWidth;
  const bound = t.signed ? Math.min(dictLength, 2 ** (bits - 1)) : dictLength;
  if (bound >= 2 ** bits) return;
  const ix = bits === 8 ? elements(Uint8Array, values) : bits === 16 ? elements(Uint16Array, values) : elements(Uint32Array, values);
  const scan = bits === 8 ? firstAtLeast8 : bits === 16 ? firstAtLeast16 : firstAtLeast32;
  for (let k = scan(ix as never, offset, end, bound); k >= 0; k = scan(ix as never, k + 1, end, bound)) {
    if (isNull(validity, nullCount, k)) continue;
    const u = ix[k]!;
    throw bad(k, t.signed && u >= 2 ** (bits - 1) ? u - 2 ** bits : u);
  }
}

/** The first `k` in [from, to) with `a[k] >= bound`, or -1. */
function firstAtLeast8(a: Uint8Array, from: number, to: number, bound: number): number {
  for (let k = from; k < to; k++) if (a[k]! >= bound) return k;
  return -1;
}

function firstAtLeast16(a: Uint16Array, from: number, to: number, bound: number): number {
  for (let k = from; k < to; k++) if (a[k]! >= bound) return k;
  return -1;
}

function firstAtLeast32(a: Uint32Array, from: number, to: number, bound: number): number {
  for (let k = from; k < to; k++) if (a[k]! >= bound) return k;
  return -1;
}

/**
 * The minimal checks of an `ArrowArray` struct against its type: counts of
 * buffers and children, NULL pointer arrays, a dictionary where the schema
 * has one (and only there), a null count the layout can have. Shared by the
 * host import and the device tree reader (src/device/tree.ts); pointers are
 * only compared with NULL.
 */
/** NULL, as a number (the import) or a bigint (the device tree reader). */
function isNullPtr(p: Addr | bigint): boolean {
  return p === 0 || p === 0n;
}

export function checkCounts(
  schema: SchemaNode,
  phys: ArrayLayout,
  nBuffers: number,
  nChildren: number,
  buffersPtr: Addr | bigint,
  childrenPtr: Addr | bigint,
  dictPtr: Addr | bigint,
  nullCount: number,
  path: string,
): void {
  const t = schema.type;
  const n = phys.nBuffers;
  if (phys.variadic ? nBuffers < n : nBuffers !== n && !(t.id === 'null' && nBuffers === 1)) {
    throw invalid(`${path}.n_buffers`, `type "${schema.format}" needs ${phys.variadic ? 'at least ' : ''}${n} buffer${n === 1 ? '' : 's'}, got ${nBuffers}`);
  }
  if (nChildren !== schema.children.length) {
    throw invalid(`${path}.n_children`, `the schema has ${schema.children.length} children, the array ${nChildren}`);
  }
  if (nBuffers > 0 && isNullPtr(buffersPtr)) throw invalid(`${path}.buffers`, `NULL pointer with n_buffers = ${nBuffers}`);
  if (nChildren > 0 && isNullPtr(childrenPtr)) throw invalid(`${path}.children`, `NULL pointer with n_children = ${nChildren}`);
  if (schema.dictionary && isNullPtr(dictPtr)) throw invalid(`${path}.dictionary`, 'NULL pointer, but the schema is dictionary-encoded');
  if (!schema.dictionary && !isNullPtr(dictPtr)) throw invalid(`${path}.dictionary`, 'present, but the schema is not dictionary-encoded');
  if (!phys.hasValidity && nullCount > 0 && t.id !== 'null') {
    throw invalid(`${path}.null_count`, `type "${schema.format}" has no validity bitmap, so null_count must be 0 or -1, got ${nullCount}`);
  }
}
