/**
 * `SchemaNode`: an `ArrowSchema` tree read into JS, with its format parsed.
 * It describes every type of the spec, including those arrow-js cannot
 * represent, and is what the array layer validates arrays against.
 */
import { Flag, ALL_FLAGS } from '../abi/constants.js';
import { ArrowDeviceError, invalid, prefixPath } from '../errors.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { parseFormat, type TypeInfo } from './format.js';
import { readMetadata, type Metadata } from './metadata.js';
import { readPointers, StructReader } from '../memory/struct.js';

export interface SchemaNode {
  readonly format: string;
  readonly type: TypeInfo;
  readonly name: string | null;
  readonly metadata: Metadata | null;
  /** The raw `flags` bits. */
  readonly flags: number;
  readonly children: readonly SchemaNode[];
  /** For a dictionary-encoded field, the type of the dictionary values; `type` is then the index type. */
  readonly dictionary: SchemaNode | null;
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
export function visitOnce<A extends bigint | number>(seen: Set<A> | AddressSet, ptr: A, path: string): void {
  if (seen instanceof AddressSet ? !seen.add(ptr as number) : seen.has(ptr)) {
    throw invalid(path, `the struct at 0x${ptr.toString(16)} is reached a second time: every child must be owned by one parent`);
  }
  if (!(seen instanceof AddressSet)) seen.add(ptr);
}

/**
 * A set of (number) addresses for `visitOnce` that allocates nothing per
 * use: an open-addressing table whose slots are stamped with the use they
 * belong to, so starting a new use (`reset`) clears nothing. The array
 * import reads one tree at a time and asks for `shared()`; nested use gets a
 * table of its own.
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

function checkNode(node: SchemaNode, path: string): void {
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
 * releases it). `path` prefixes error places; `depth` guards nesting.
 */
export function readSchemaNode(mem: Memory, ptr: Ptr, path = 'schema', depth = 0, seen = new Set<Ptr>()): SchemaNode {
  if (ptr === 0n) throw invalid(path, 'NULL pointer');
  if (depth > MAX_NESTING_DEPTH) throw invalid(path, `nesting deeper than ${MAX_NESTING_DEPTH} levels`);
  visitOnce(seen, ptr, path);
  try {
    // Every field first, in one copy (the reader's scratch is reused by the reads below).
    const st = StructReader.read(mem, ptr, mem.layouts.ArrowSchema);
    const release = st.ptr('release');
    const formatPtr = st.ptr('format');
    const namePtr = st.ptr('name');
    const metadataPtr = st.ptr('metadata');
    const flags64 = st.i64('flags');
    const n64 = st.i64('n_children');
    const childrenPtr = st.ptr('children');
    const dictPtr = st.ptr('dictionary');
    if (release === 0n) {
      throw new ArrowDeviceError('released', path, 'the struct is released (release is NULL)');
    }
    if (formatPtr === 0n) throw invalid(`${path}.format`, 'NULL pointer');
    let format: string;
    try {
      format = mem.readCString(formatPtr, 1 << 16);
    } catch (e) {
      throw prefixPath(e, `${path}.format`);
    }
    const type = parseFormat(format, `${path}.format`);
    let name: string | null = null;
    if (namePtr !== 0n) {
      try {
        name = mem.readCString(namePtr, 1 << 20);
      } catch (e) {
        throw prefixPath(e, `${path}.name`);
      }
    }
    const metadata = readMetadata(mem, metadataPtr, `${path}.metadata`);
    if (flags64 < 0n || (flags64 & ~BigInt(ALL_FLAGS)) !== 0n) {
      throw invalid(`${path}.flags`, `unknown flag bits 0x${BigInt.asUintN(64, flags64).toString(16)}`);
    }
    const flags = Number(flags64);
    if (n64 < 0n) throw invalid(`${path}.n_children`, `negative value ${n64}`);
    if (n64 > 1_000_000n) throw invalid(`${path}.n_children`, `implausible value ${n64}`);
    const n = Number(n64);
    if (n > 0 && childrenPtr === 0n) throw invalid(`${path}.children`, `NULL pointer with n_children = ${n}`);
    let childPtrs: Ptr[];
    try {
      childPtrs = readPointers(mem, childrenPtr, n);
    } catch (e) {
      throw prefixPath(e, `${path}.children`);
    }
    const children = childPtrs.map((cp, i) => readSchemaNode(mem, cp, `${path}.children[${i}]`, depth + 1, seen));
    const dictionary = dictPtr === 0n ? null : readSchemaNode(mem, dictPtr, `${path}.dictionary`, depth + 1, seen);
    const node: SchemaNode = { format, type, name, metadata, flags, children, dictionary };
    checkNode(node, path);
    return node;
  } catch (e) {
    if (e instanceof ArrowDeviceError && e.path === '') throw prefixPath(e, path);
    throw e;
  }
}

/** Calls the `release` of the `ArrowSchema` at `ptr` if it is not released yet. */
export function releaseSchemaStruct(mem: Memory, ptr: Ptr): void {
  if (ptr === 0n) return;
  const rel = mem.readPtr(ptr + BigInt(mem.layouts.ArrowSchema.offsets.release!));
  if (rel !== 0n) {
    mem.call(rel, { name: 'release', result: 'void', params: ['pointer'] }, ptr);
    // A conforming release sets release to NULL itself; make sure of it so we never call it twice.
    mem.writePtr(ptr + BigInt(mem.layouts.ArrowSchema.offsets.release!), 0n);
  }
}

/** Whether the `nullable` flag is set. */
export function isNullable(node: SchemaNode): boolean {
  return (node.flags & Flag.NULLABLE) !== 0;
}
