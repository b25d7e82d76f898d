/**
 * `SchemaNode`: an `ArrowSchema` tree read into JS, with its format parsed.
 * It describes every type of the spec, including those arrow-js cannot
 * represent, and is what the array layer validates arrays against.
 */
import { ALL_FLAGS } from '../abi/constants.js';
import { ArrowDeviceError, invalid, prefixPath } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { parseFormat, type TypeInfo } from './format.js';
import { readMetadataAt, type Metadata } from './metadata.js';
import { access, type Access } from '../abi/accessors.js';
import { cString, rawOf, stage, staged, type Addr, type RawAccess } from '../memory/raw.js';

/**
 * An `ArrowSchema` tree read into JS, with its format parsed: every type of the spec, including those
 * arrow-js cannot represent. What `importSchemaNode` returns and every import validates arrays against.
 */
export interface SchemaNode {
  /** The format string, as the producer wrote it (`'+s'`, `'tsu:UTC'`). */
  readonly format: string;
  /** The format, parsed. */
  readonly type: TypeInfo;
  /** The field's name; null where the producer gave none (NULL). */
  readonly name: string | null;
  /** The field's (or, at the root, the schema's) metadata; null where there is none. */
  readonly metadata: Metadata | null;
  /** The raw `flags` bits (`Flag.NULLABLE`, ...). */
  readonly flags: number;
  /** The children of a nested type (struct fields, a list's values, union members). */
  readonly children: readonly SchemaNode[];
  /** For a dictionary-encoded field, the type of the dictionary values; `type` is then the index type. */
  readonly dictionary: SchemaNode | null;
}

/** Whether `v` is a `SchemaNode` (by shape: a node made in JS is a plain object). */
export function isSchemaNode(v: unknown): v is SchemaNode {
  return typeof v === 'object' && v !== null && typeof (v as SchemaNode).format === 'string' && Array.isArray((v as SchemaNode).children);
}

export const MAX_NESTING_DEPTH = 64;

/**
 * Refuses a struct reached a second time in one tree. In the C Data
 * Interface every child is owned by its parent (CDataInterface.rst, "Release
 * callback semantics": the parent's release releases its children), so a
 * struct that two parents point at, or that points back at an ancestor, is
 * invalid input. Reading it anyway would cost the size of the unfolded tree
 * (exponential in the depth of a DAG, 2,000 fields naming one child read it
 * 2,000 times): each address is read once, so an import costs what its input
 * holds. Shared by the schema, array and device tree readers.
 */
export function visitOnce(seen: AddressSet, addr: Addr, path: string): void {
  if (!seen.add(addr)) throw reachedTwice(addr, path);
}

export function reachedTwice(ptr: bigint | number, path: string): ArrowDeviceError {
  return invalid(path, `the struct at 0x${ptr.toString(16)} is reached a second time: every child must be owned by one parent`);
}

/**
 * A set of (number) addresses for `visitOnce` that allocates nothing per
 * use: an open-addressing table whose slots are stamped with the use they
 * belong to, so starting a new use (`reset`) clears nothing. The array
 * import reads one tree at a time and asks for `shared()`; nested use gets a
 * table of its own. It pays against a `Set` or a new table per walk on
 * `bench:overhead` `1 row x 1 int32 column` (into one struct, and with the
 * schema with each batch): the figures are in docs/performance.md.
 */
export class AddressSet {
  private keys = new Float64Array(256);
  private stamps = new Uint32Array(256);
  private stamp = 1;
  private count = 0;
  private inUse = false;
  private static common: AddressSet | null = null;

  /** The shared table, reset, unless it is in use (then a new one). Give it back with `done()`. */
  static shared(): AddressSet {
    let s = AddressSet.common;
    if (s === null) s = AddressSet.common = new AddressSet();
    if (s.inUse) s = new AddressSet();
    s.inUse = true;
    s.count = 0;
    if (++s.stamp === 0xffffffff) {
      s.stamps.fill(0);
      s.stamp = 1;
    }
    return s;
  }

  done(): void {
    this.inUse = false;
  }

  /** Adds `a`; false when it was there already. */
  add(a: number): boolean {
    const mask = this.keys.length - 1;
    // Addresses are multiples of 8 or 16: mix the bits above those into the slot.
    let i = Math.imul(((a / 8) >>> 0) ^ (Math.floor(a / 4294967296) | 0), 0x9e3779b1) >>> 0;
    i &= mask;
    const keys = this.keys;
    const stamps = this.stamps;
    const stamp = this.stamp;
    while (stamps[i] === stamp) {
      if (keys[i] === a) return false;
      i = (i + 1) & mask;
    }
    stamps[i] = stamp;
    keys[i] = a;
    if (++this.count * 2 > mask) this.grow();
    return true;
  }

  private grow(): void {
    const oldKeys = this.keys;
    const oldStamps = this.stamps;
    const stamp = this.stamp;
    this.keys = new Float64Array(oldKeys.length * 2);
    this.stamps = new Uint32Array(oldKeys.length * 2);
    this.count = 0;
    for (let i = 0; i < oldKeys.length; i++) if (oldStamps[i] === stamp) this.add(oldKeys[i]!);
  }
}

/**
 * The children a nested type must have (Columnar.rst, per layout; CDataInterface.rst, "Map", "Union",
 * "Run-end encoded"): checked where a node is read from a producer, and where one is made from another
 * library's types (src/flechette/types.ts), whose constructors check none of it.
 */
export function checkNode(node: SchemaNode, path: string): void {
  const t = node.type;
  const n = node.children.length;
  const expectChildren = (k: number): void => {
    if (n !== k) throw invalid(`${path}.n_children`, `type "${node.format}" needs ${k} child${k === 1 ? '' : 'ren'}, got ${n}`);
  };
  switch (t.id) {
    case 'list': case 'large_list': case 'list_view': case 'large_list_view': case 'fixed_list':
      expectChildren(1);
      break;
    case 'map': {
      expectChildren(1);
      const entries = node.children[0]!;
      if (entries.type.id !== 'struct' || entries.children.length !== 2) {
        throw invalid(`${path}.children[0]`, `a map's child must be a struct of (key, value), got "${entries.format}" with ${entries.children.length} children`);
      }
      break;
    }
    case 'union':
      if (n !== t.typeIds.length) {
        throw invalid(`${path}.n_children`, `union "${node.format}" declares ${t.typeIds.length} type ids but has ${n} children`);
      }
      break;
    case 'run_end_encoded': {
      expectChildren(2);
      const re = node.children[0]!.type;
      if (re.id !== 'int' || !re.signed || re.bitWidth === 8) {
        throw invalid(`${path}.children[0].format`, `run ends must be int16, int32 or int64, got "${node.children[0]!.format}"`);
      }
      break;
    }
    case 'struct':
      break;
    default:
      expectChildren(0);
  }
  if (node.dictionary && t.id !== 'int') {
    throw invalid(`${path}.dictionary`, `a dictionary needs an integer index type, but the format is "${node.format}"`);
  }
}

/**
 * Reads the `ArrowSchema` at `ptr` without taking ownership (the caller
 * releases it). `path` prefixes error places.
 */
export function readSchemaNode(mem: Memory, ptr: Ptr, path = 'schema'): SchemaNode {
  return readWith(schemaWalk(mem, null, null), ptr, path);
}

/** Builds the node of the schema at `ptr` with `w`. */
function readWith(w: SchemaWalk, ptr: Ptr, path: string): SchemaNode {
  try {
    return walkSchema(w, Number(ptr), path, 0)!;
  } finally {
    w.seen.done();
  }
}

/**
 * The bytes of an `ArrowSchema` tree that make its content, as plain numbers in the order
 * `readSchemaNode` reads them: per node (pre-order, children before the dictionary) its flags, child
 * count, whether it has a dictionary, then its format, name and metadata, each as its byte length
 * (-1 for a NULL name or metadata) and its bytes. A schema handed again with each array (a wasm module's,
 * a driver's) is compared with the image of the last one read (`matchesImage`), without decoding a
 * string or building a node: it pays on bench:wasm's one-at-a-time imports of 1,000-row tables, each
 * with a new schema (figures in the CHANGELOG, issue 40). The image is recorded only by a read that
 * checked the schema in full (`readSchemaNode`).
 */
type SchemaImage = readonly number[];

/** The most numbers an image holds: a larger schema is read in full every time. */
const MAX_IMAGE = 1 << 14;

/**
 * Whether the schema at `ptr` has the content of `image`. The one walk of `readSchemaNode`, comparing
 * instead of building: it reads what the full read reads, in its order, and stops at the first
 * difference, before following a pointer of it, so it reads nothing that the full read would not. A
 * struct released or reached twice (which content alone cannot tell) is a difference: the full read then
 * says what is wrong.
 */
function matchesImage(mem: Memory, ptr: Ptr, image: SchemaImage): boolean {
  const w = schemaWalk(mem, null, image);
  try {
    walkSchema(w, Number(ptr), '', 0);
    return w.pos === image.length;
  } catch {
    return false;
  } finally {
    w.seen.done();
  }
}

/**
 * One walk of an `ArrowSchema` tree: building its `SchemaNode` (`compare` null), recording its image on
 * the way (`out`: null where not asked, or where it grew past MAX_IMAGE), or comparing it with an image
 * (`compare`: then nothing is built or decoded).
 */
interface SchemaWalk {
  readonly raw: RawAccess;
  readonly A: Access['ArrowSchema'];
  readonly wide: boolean;
  readonly ps: number;
  readonly seen: AddressSet;
  out: number[] | null;
  readonly compare: SchemaImage | null;
  /** Where the comparison is in `compare`. */
  pos: number;
}

function schemaWalk(mem: Memory, out: number[] | null, compare: SchemaImage | null): SchemaWalk {
  const wide = mem.target.pointerSize === 8;
  return { raw: rawOf(mem), A: access(mem.target).ArrowSchema, wide, ps: wide ? 8 : 4, seen: AddressSet.shared(), out, compare, pos: 0 };
}

/** The flags bits the spec defines, as a number (they fit 32 bits). */
const KNOWN_FLAGS = Number(ALL_FLAGS);

/** The fields of one `ArrowSchema` struct, as `schemaFields` read them (one object, filled anew each time: take them at once). */
interface SchemaFields {
  release: number;
  formatPtr: number;
  namePtr: number;
  metadataPtr: number;
  flagsLo: number;
  flagsHi: number;
  n: number;
  childrenPtr: number;
  dictPtr: number;
  /** Where the struct's bytes were staged (valid until the arena moves on: for exact values in messages). */
  dv: DataView;
  at: number;
}
const fields: SchemaFields = { release: 0, formatPtr: 0, namePtr: 0, metadataPtr: 0, flagsLo: 0, flagsHi: 0, n: 0, childrenPtr: 0, dictPtr: 0, dv: staged.dv, at: 0 };

/** Every field of the struct at `addr`, staged once (src/memory/raw.ts), before any string of it is read. */
function schemaFields(raw: RawAccess, A: Access['ArrowSchema'], addr: Addr): SchemaFields {
  const at = stage(raw, addr, A.$size);
  const dv = staged.dv;
  fields.release = A.release.get(dv, at);
  fields.formatPtr = A.format.get(dv, at);
  fields.namePtr = A.name.get(dv, at);
  fields.metadataPtr = A.metadata.get(dv, at);
  fields.flagsLo = dv.getUint32(at + A.flags.offset, true);
  fields.flagsHi = dv.getUint32(at + A.flags.offset + 4, true);
  fields.n = A.n_children.get(dv, at);
  fields.childrenPtr = A.children.get(dv, at);
  fields.dictPtr = A.dictionary.get(dv, at);
  fields.dv = dv;
  fields.at = at;
  return fields;
}

/** What a comparison throws at the first difference (`matchesImage` takes it as false). */
const DIFFERS = Symbol('differs');

/**
 * Walks the `ArrowSchema` struct at `addr`, its children and its dictionary: into a `SchemaNode`, or
 * (comparing) into null.
 */
function walkSchema(w: SchemaWalk, addr: Addr, path: string, depth: number): SchemaNode | null {
  if (addr === 0) throw invalid(path, 'NULL pointer');
  if (depth > MAX_NESTING_DEPTH) throw invalid(path, `nesting deeper than ${MAX_NESTING_DEPTH} levels`);
  visitOnce(w.seen, addr, path);
  try {
    const { raw, A } = w;
    const { release, formatPtr, namePtr, metadataPtr, flagsLo, flagsHi, n, childrenPtr, dictPtr, dv, at } = schemaFields(raw, A, addr);
    if (release === 0) {
      throw new ArrowDeviceError('released', path, 'the struct is released (release is NULL)');
    }
    if (formatPtr === 0) throw invalid(`${path}.format`, 'NULL pointer');
    const build = w.compare === null;
    let format = '';
    let type: TypeInfo | null = null;
    let name: string | null = null;
    let metadata: Metadata | null = null;
    if (!build) putNode(w, flagsLo, flagsHi, n, dictPtr, formatPtr, namePtr, metadataPtr);
    else {
      format = stringAt(raw, formatPtr, 1 << 16, `${path}.format`);
      type = parseFormat(format, `${path}.format`);
      name = namePtr === 0 ? null : stringAt(raw, namePtr, 1 << 20, `${path}.name`);
      metadata = metadataPtr === 0 ? null : readMetadataAt(raw, metadataPtr, `${path}.metadata`);
    }
    if (flagsHi !== 0 || (flagsLo & ~KNOWN_FLAGS) !== 0) {
      throw invalid(`${path}.flags`, `unknown flag bits 0x${BigInt.asUintN(64, A.flags.big(dv, at)).toString(16)}`);
    }
    // The exact values (bigints) only for the messages: a read allocates none.
    if (n < 0) throw invalid(`${path}.n_children`, `negative value ${A.n_children.big(dv, at)}`);
    if (n > 1_000_000) throw invalid(`${path}.n_children`, `implausible value ${A.n_children.big(dv, at)}`);
    if (n > 0 && childrenPtr === 0) throw invalid(`${path}.children`, `NULL pointer with n_children = ${n}`);
    // Recorded once the node's own fields are checked: the image reads what the read found valid.
    if (build && w.out !== null) putNode(w, flagsLo, flagsHi, n, dictPtr, formatPtr, namePtr, metadataPtr);
    let children: SchemaNode[] = NO_NODES as SchemaNode[];
    if (n > 0) {
      let cat: number;
      try {
        cat = stage(raw, childrenPtr, n * w.ps);
      } catch (e) {
        throw prefixPath(e, `${path}.children`);
      }
      // Staged copies are not written over while reachable (raw.ts): the pointers stay readable across the children's walks.
      const cdv = staged.dv;
      if (build) children = new Array(n);
      for (let i = 0; i < n; i++) {
        const cp = w.wide ? cdv.getUint32(cat + i * 8 + 4, true) * 4294967296 + cdv.getUint32(cat + i * 8, true) : cdv.getUint32(cat + i * 4, true);
        const child = walkSchema(w, cp, build ? `${path}.children[${i}]` : '', depth + 1);
        if (build) children[i] = child!;
      }
    }
    const dictionary = dictPtr === 0 ? null : walkSchema(w, dictPtr, build ? `${path}.dictionary` : '', depth + 1);
    if (!build) return null;
    const node: SchemaNode = { format, type: type!, name, metadata, flags: flagsLo, children, dictionary };
    checkNode(node, path);
    return node;
  } catch (e) {
    if (e instanceof ArrowDeviceError && e.path === '') throw prefixPath(e, path);
    throw e;
  }
}

/** The NUL-terminated string at `p` (at most `max` bytes), its errors placed at `path`. */
function stringAt(raw: RawAccess, p: Addr, max: number, path: string): string {
  try {
    return cString(raw, p, max);
  } catch (e) {
    throw prefixPath(e, path);
  }
}

/** The children of every leaf node read (an empty array shared by them all). */
const NO_NODES: readonly SchemaNode[] = Object.freeze([]);

/** One node's part of the image (see `SchemaImage`), recorded or compared. */
function putNode(w: SchemaWalk, flagsLo: number, flagsHi: number, n: number, dictPtr: Addr, formatPtr: Addr, namePtr: Addr, metadataPtr: Addr): void {
  const raw = w.raw;
  // No image holds a flags high word: the full read refuses one.
  if (flagsHi !== 0) throw DIFFERS;
  put(w, flagsLo);
  put(w, n);
  put(w, dictPtr === 0 ? 0 : 1);
  const formatLen = raw.strlen(formatPtr, 1 << 16);
  put(w, formatLen);
  putBytes(w, formatPtr, formatLen);
  const nameLen = namePtr === 0 ? -1 : raw.strlen(namePtr, 1 << 20);
  put(w, nameLen);
  if (nameLen > 0) putBytes(w, namePtr, nameLen);
  // Compared, the blob may not run past the image's length for it; recorded, not past the image's size.
  const metaLen = metadataPtr === 0 ? -1 : metadataLength(raw, metadataPtr, w.compare !== null ? w.compare[w.pos]! : MAX_IMAGE);
  if (metaLen === -2) {
    if (w.compare !== null) throw DIFFERS;
    w.out = null;
    return;
  }
  put(w, metaLen);
  if (metaLen > 0) putBytes(w, metadataPtr, metaLen);
}

/** The next number of the image: appended (recording stops past MAX_IMAGE), or compared. */
function put(w: SchemaWalk, v: number): void {
  const c = w.compare;
  if (c !== null) {
    if (w.pos >= c.length || c[w.pos++] !== v) throw DIFFERS;
  } else if (w.out !== null) {
    if (w.out.length < MAX_IMAGE) w.out.push(v);
    else w.out = null;
  }
}

/** The `len` bytes at `p`, each as `put` takes it. */
function putBytes(w: SchemaWalk, p: Addr, len: number): void {
  if (w.compare !== null && w.pos + len > w.compare.length) throw DIFFERS;
  const b = stage(w.raw, p, len);
  const u8 = staged.u8;
  for (let i = 0; i < len; i++) put(w, u8[b + i]!);
}

/**
 * The byte length of the metadata blob at `base` (CDataInterface.rst, "Metadata": an int32 pair count,
 * then each key and value as an int32 length and its bytes), read as `readMetadataAt` reads it; -2 where
 * it would run past `max` bytes or be malformed (the caller then reads it in full).
 */
function metadataLength(raw: RawAccess, base: Addr, max: number): number {
  let at = stage(raw, base, 4);
  const count = staged.dv.getInt32(at, true);
  if (count < 0 || 4 + count * 8 > max) return -2;
  let pos = 4;
  for (let i = 0; i < 2 * count; i++) {
    if (pos + 4 > max) return -2;
    at = stage(raw, base + pos, 4);
    const len = staged.dv.getInt32(at, true);
    if (len < 0 || pos + 4 + len > max) return -2;
    pos += 4 + len;
  }
  return pos;
}

// --- schemas read before ---------------------------------------------------------------

/**
 * Schemas read from pointers, by content: every node read equal to one seen
 * before is mapped to that one, so its plan (and arrow-js schema) is shared.
 * Bounded: the oldest entry goes when a new one would exceed MAX_READ_NODES.
 */
const byContent = new Map<string, SchemaNode>();
const MAX_READ_NODES = 64;
/** Schemas whose key would be longer are not shared (the key costs as much as the plan). */
const MAX_KEY_LENGTH = 1 << 16;

/** The node equal to `node` read before, or `node` itself (remembered). */
function sharedNode(node: SchemaNode): SchemaNode {
  const key = contentKey(node, '');
  if (key.length > MAX_KEY_LENGTH) return node;
  const hit = byContent.get(key);
  if (hit !== undefined) return hit;
  if (byContent.size >= MAX_READ_NODES) byContent.delete(byContent.keys().next().value!);
  byContent.set(key, node);
  return node;
}

/**
 * The last schema read from a pointer, as its image (`SchemaImage`) and its node: a schema handed
 * again with each array (a wasm module's, a driver's) is found by comparing its bytes, without decoding a
 * string or building a node (bench:wasm, one import at a time); test/array/schema-image.test.ts proves a
 * match gives the node the full read would, and a difference the full read's verdict.
 */
let lastImage: { readonly image: SchemaImage; readonly node: SchemaNode } | null = null;

/**
 * `readSchemaNode` for the imports: a schema with the bytes of the last one read comes back as
 * that node (`lastImage`), and one equal by content to a node read before as that node
 * (`sharedNode`), so arrays imported against either share one plan. The read records the image
 * it compares the next schema with (none where the schema is too large for one).
 */
export function readSharedSchema(mem: Memory, ptr: Ptr, path = 'schema'): SchemaNode {
  const last = lastImage;
  if (last !== null && matchesImage(mem, ptr, last.image)) return last.node;
  const w = schemaWalk(mem, [], null);
  const node = sharedNode(readWith(w, ptr, path));
  lastImage = w.out === null ? null : { image: w.out, node };
  return node;
}

/** Everything of a node, each string prefixed by its length so that no two different schemas give one key. */
function contentKey(n: SchemaNode, key: string): string {
  key += `(${n.format.length}:${n.format}${n.name === null ? '-' : `${n.name.length}:${n.name}`}f${n.flags}`;
  if (n.metadata !== null) {
    key += `m${n.metadata.size}`;
    for (const [k, v] of n.metadata) key += `${k.length}:${k}${v.length}:${v}`;
  }
  for (const c of n.children) {
    key = contentKey(c, key);
    if (key.length > MAX_KEY_LENGTH) return key;
  }
  if (n.dictionary !== null) key = contentKey(n.dictionary, `${key}d`);
  return `${key})`;
}
