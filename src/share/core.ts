/**
 * The target-neutral core of Arrow data shared between the threads of one
 * process (docs/threads.md): the process's table of shares and each
 * thread's references to it, the structs and schemas moved into process
 * memory, the handles, and the import of a handle's arrays over the shared
 * structs. What a handle is built as in the receiving thread is a target's
 * (`ShareTarget`): arrow-js objects in src/share/share.ts (`share`,
 * `importShared` of the main entry), flechette tables in
 * src/flechette/share.ts; `ArrayView`s and `DeviceArray`s are built here.
 * Loads no apache-arrow. A handle made by one target's `share` is imported
 * by either target's `importShared`: the handle carries structs, not objects.
 *
 * The model is arrow-rs's `Arc` over an imported `FFI_ArrowArray`: one
 * count of references that every thread can reach (the table,
 * src/share/table.ts), each thread's own `ImportOwner` and views over the
 * memory, and the producer's `release` called once, by whichever thread
 * drops the last reference. CDataInterface.rst asks consumers to treat
 * exported buffers as immutable, so any number of threads may read them at
 * once.
 *
 * When a struct is first shared it moves into process memory (the C
 * allocator's, which any thread may free; our own small allocations sit in
 * this thread's JS slabs and die with it), and its schema is written there
 * too, so a thread reads both from addresses the table gives, never from the
 * handle: a handle names table slots by index and generation and nothing
 * else, and is checked against the table before any address is touched.
 */
import { ArrowDeviceError, invalid, unsupported } from '../errors.js';
import { liveCounters, setSharedCounts } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { callRelease } from '../memory/registry.js';
import { currentThread, onThreadExit } from '../platform/node.js';
import { parseFormat } from '../schema/format.js';
import type { Metadata } from '../schema/metadata.js';
import type { SchemaNode } from '../schema/node.js';
import type { ArrayImportOptions } from '../array/api.js';
import { importWith, type ImportCoreOptions } from '../array/importer.js';
import { ImportOwner, type OwnedStruct, type SharedLink } from '../array/owner.js';
import { planOfNode, type Plan } from '../array/plan.js';
import { validationLevel } from '../array/read.js';
import { viewOf, type ArrayView } from '../array/view.js';
import { backendFor } from '../device/backend.js';
import { readDeviceFields } from '../device/import.js';
import { DeviceArray, deviceArrayOf, deviceArrayOwner } from '../device/device-array.js';
import { EntryFlags, ShareTable, SlotType, type EntryInfo, type SlotRef } from './table.js';

/** What a handle rebuilds: the kind of object that was shared. */
export type SharedKind = 'table' | 'batch' | 'vector' | 'data' | 'view' | 'device';

/**
 * A handle to Arrow data shared between threads: plain data (numbers,
 * strings and the process's `SharedArrayBuffer` table of shares) that
 * survives structured clone, so `postMessage` carries it to a `Worker` of
 * the same process on Node.js, Bun and Deno. It carries one reference:
 * `importShared` consumes it, once. Its format is in PROTOCOL.md.
 */
export interface SharedHandle<K extends SharedKind = SharedKind> {
  /** The format's version: 1. */
  readonly arrowDeviceShare: 1;
  /**
   * What `importShared` returns: an `ImportedTable`, `ImportedRecordBatch`, `ImportedVector`, `ImportedData`, `ArrayView` or
   * `DeviceArray` (arrow-device); a flechette `ImportedTable` (table, batch), `ImportedColumn` (vector, data), `ArrayView` or
   * `DeviceArray` (arrow-device/flechette).
   */
  readonly kind: K;
  /** The process's table of shares (src/share/table.ts), shared by structured clone. */
  readonly table: SharedArrayBuffer;
  /** The table's identity (a random nonce, in hex): a handle whose table differs is refused. */
  readonly process: string;
  /** The references the handle carries, one per array (a table's batches in order). */
  readonly tickets: readonly SharedTicket[];
  /** The rows of the data, for the receiver's information (not trusted: the table's structs are). */
  readonly rows: number;
  /**
   * Arrow-js data whose every buffer is a `SharedArrayBuffer` travels as
   * itself: its arrays (`ArrayView`s over those buffers, which structured
   * clone shares, not copies), one per batch, and no tickets. Its memory
   * lives while any thread can reach it (the runtime counts), so there is no
   * reference to consume. Absent otherwise.
   */
  readonly views?: readonly ArrayView[];
}

/** One reference a handle carries: a slot of the table of shares, by index and generation (PROTOCOL.md). */
export interface SharedTicket {
  /** The slot's index in the table. */
  readonly slot: number;
  /** The slot's generation when the reference was made: a slot used since has another. */
  readonly generation: number;
}

/** A `Worker` whose end `share` watches: Node's `worker_threads.Worker` (also Bun's and Deno's). */
export interface WorkerLike {
  /** The worker's thread id (`worker_threads`), valid while it runs. */
  readonly threadId: number;
  /** Node's `EventEmitter.once`: `share` listens for `exit`. */
  once(event: 'exit', listener: (code: number) => void): unknown;
}

/** Options of `share`. */
export interface ShareOptions {
  /**
   * The worker the handle is for: only that thread may import it, and when
   * the worker exits, crashes or is terminated, every reference it holds
   * (and a handle it never imported) is given back, here, from the
   * `Worker`'s `exit` event (a terminated worker runs no JS of its own).
   */
  worker?: WorkerLike;
  /**
   * Where the producer's `release` may run: `'any'` thread (the last to let
   * go; the default for producers in C), or only the `'home'` thread, the
   * one that shared the import first (the default where `release` is a
   * callback of this library in this thread, whose JS lives here): the last
   * holder elsewhere hands the release back, and the home thread calls it
   * from a timer. A home thread must outlive the data it shared this way.
   */
  releaseOn?: 'any' | 'home';
}

/** Options of `importShared`: those of every array import (`validate`, `expand`, ...), except `copy` and `memory` (native memory only). */
export type SharedImportOptions = Omit<ArrayImportOptions, 'copy' | 'memory'>;

// --- this thread ----------------------------------------------------------------------------

/** The table this thread makes handles in (made on first share, or the first one a handle brought). */
let home: ShareTable | null = null;
/** Every table this thread has seen, by nonce (accounting, `releaseThreadShares`). */
const tables = new Map<string, ShareTable>();
let thread: { readonly id: number; readonly main: boolean } | null = null;
/** This thread's live links (its references), dropped if the thread exits with them. */
const links = new Set<Link>();
/** Entries to release here once another thread hands them back (`releaseOn: 'home'`). */
const homeWaits = new Set<Waiting>();
let homeTimer: ReturnType<typeof setInterval> | null = null;
const watched = new WeakSet<object>();

interface Waiting {
  readonly table: ShareTable;
  readonly entry: SlotRef;
  readonly mem: Memory;
}

function me(): { readonly id: number; readonly main: boolean } {
  if (thread === null) {
    thread = currentThread();
    // A worker that ends by itself gives back what it still holds; one terminated from outside
    // runs no JS, so its parent does (`share(x, { worker })`, `releaseThreadShares`).
    if (!thread.main) onThreadExit(() => dropAll());
  }
  return thread;
}

function pid(): number {
  return typeof process !== 'undefined' ? process.pid : 0;
}

function tableHere(): ShareTable {
  if (home === null) {
    home = ShareTable.create(pid());
    tables.set(home.nonce, home);
  }
  return home;
}

function native(mem: Memory, what: string): Required<Pick<Memory, 'allocProcess' | 'freeProcess'>> & Memory {
  if (mem.allocProcess === undefined || mem.freeProcess === undefined) {
    throw unsupported('share', `${what} lives in ${mem.name} memory: only native memory is shared between threads (a wasm module's memory is its own)`);
  }
  return mem as Required<Pick<Memory, 'allocProcess' | 'freeProcess'>> & Memory;
}

setSharedCounts(() => {
  let entries = 0;
  let handles = 0;
  let references = 0;
  for (const t of tables.values()) {
    const c = t.counts();
    entries += c.entries;
    handles += c.tickets;
    references += c.holds + c.tickets;
  }
  return { sharedReferences: links.size, processSharedEntries: entries, processSharedHandles: handles, processSharedReferences: references };
});

/** One thread's reference to an entry: what a shared `ImportOwner` holds. */
class Link implements SharedLink {
  private dropped = false;
  constructor(
    readonly table: ShareTable,
    readonly hold: SlotRef,
    readonly entry: SlotRef,
    readonly mem: Memory,
    /** This thread is the entry's home (`releaseOn: 'home'`): it releases the producer, whoever lets go last. */
    readonly home = false,
  ) {
    links.add(this);
  }

  drop(): void {
    if (this.dropped) return;
    this.dropped = true;
    links.delete(this);
    const last = this.table.drop(this.hold, SlotType.Hold);
    if (last) endEntry(this.table, last, this.mem);
    // Others still hold it: the last of them hands it back (endEntry), and this thread's timer releases it.
    else if (last === null && this.home) waitHome({ table: this.table, entry: this.entry, mem: this.mem });
  }
}

/** Ends an entry whose last reference is gone: here, or handed back to its home thread. */
function endEntry(table: ShareTable, e: SlotRef, mem: Memory): void {
  const info = table.entry(e, 'share');
  if ((info.flags & EntryFlags.Home) !== 0 && info.home !== me().id) {
    table.handBack(e);
    return;
  }
  finish(table, e, info, mem);
}

/** Calls the producer's release (or frees our block), frees the struct and schema, frees the slot. */
function finish(table: ShareTable, e: SlotRef, info: EntryInfo, mem: Memory): void {
  const m = native(mem, 'the shared struct');
  try {
    if ((info.flags & EntryFlags.Block) !== 0) {
      m.freeProcess(info.block);
    } else {
      // The array sits at offset 0 of an ArrowDeviceArray (CDeviceDataInterface.rst), so one read serves both.
      const arrayAddr = Number(info.struct);
      const rel = Number(m.readPtr(BigInt(arrayAddr + m.layouts.ArrowArray.offsets.release!)));
      try {
        if (rel !== 0) callRelease(m, rel, arrayAddr);
      } finally {
        liveCounters.releasedImports++;
        m.freeProcess(info.struct);
      }
    }
  } finally {
    if (info.schema !== 0n) m.freeProcess(info.schema);
    table.endEntry(e);
  }
}

function pollHome(): void {
  for (const w of homeWaits) {
    if (!w.table.handedBack(w.entry)) continue;
    homeWaits.delete(w);
    try {
      finish(w.table, w.entry, w.table.entry(w.entry, 'share'), w.mem);
    } catch {
      // A timer has nobody to report to; the entry's slot is freed either way.
    }
  }
  if (homeWaits.size === 0 && homeTimer !== null) {
    clearInterval(homeTimer);
    homeTimer = null;
  }
}

function waitHome(w: Waiting): void {
  homeWaits.add(w);
  if (homeTimer === null) {
    homeTimer = setInterval(pollHome, 5);
    // The home thread's other work keeps it alive; an exiting process frees everything anyway.
    (homeTimer as { unref?: () => void }).unref?.();
  }
}

function dropAll(): void {
  for (const l of [...links]) {
    try {
      l.drop();
    } catch {
      // At thread exit: nobody to report to.
    }
  }
}

// --- share ------------------------------------------------------------------------------------

/** The schema as bytes for process memory: a JSON tree of the `SchemaNode` (the parsed type is made again from the format). */
interface NodeJSON {
  f: string;
  n: string | null;
  m: [string, string][] | null;
  l: number;
  c: NodeJSON[];
  d: NodeJSON | null;
}

function nodeJSON(n: SchemaNode): NodeJSON {
  return {
    f: n.format,
    n: n.name,
    m: n.metadata === null ? null : [...n.metadata],
    l: n.flags,
    c: n.children.map(nodeJSON),
    d: n.dictionary === null ? null : nodeJSON(n.dictionary),
  };
}

function nodeOfJSON(j: NodeJSON, path: string, depth = 0): SchemaNode {
  if (depth > 64) throw invalid(path, 'nesting deeper than 64 levels');
  const metadata: Metadata | null = j.m === null ? null : new Map(j.m);
  return {
    format: j.f,
    type: parseFormat(j.f, `${path}.format`),
    name: j.n,
    metadata,
    flags: j.l,
    children: j.c.map((c, i) => nodeOfJSON(c, `${path}.children[${i}]`, depth + 1)),
    dictionary: j.d === null ? null : nodeOfJSON(j.d, `${path}.dictionary`, depth + 1),
  };
}

/** Writes `node` into process memory; returns its address and length. */
/** A schema's bytes, by node: a table's batches share one node, so it is encoded once, not once per batch. */
const schemaBytes = new WeakMap<SchemaNode, Uint8Array>();

function writeSchema(m: ReturnType<typeof native>, node: SchemaNode): { at: Ptr; length: number } {
  let bytes = schemaBytes.get(node);
  if (bytes === undefined) schemaBytes.set(node, (bytes = new TextEncoder().encode(JSON.stringify(nodeJSON(node)))));
  const at = m.allocProcess(bytes.byteLength);
  m.copyIn(at, bytes);
  return { at, length: bytes.byteLength };
}

/** Schemas read from process memory, by their bytes: a table's batches share one node, so one plan. */
const schemaCache = new Map<string, SchemaNode>();

function readSchema(m: Memory, info: EntryInfo, path: string): SchemaNode {
  const text = new TextDecoder().decode(m.read(info.schema, info.schemaLength));
  let node = schemaCache.get(text);
  if (node === undefined) {
    node = nodeOfJSON(JSON.parse(text) as NodeJSON, path);
    if (schemaCache.size >= 64) schemaCache.clear();
    schemaCache.set(text, node);
  }
  return node;
}

/**
 * The entry of `owner`'s import, made on its first share: the struct moves
 * into process memory and the owner holds the entry's first reference.
 */
function entryOf(owner: ImportOwner, opts: ShareOptions, path: string): { table: ShareTable; entry: SlotRef } {
  owner.check(path, 'a share');
  const link = owner.shared;
  if (link instanceof Link) return { table: link.table, entry: link.entry };
  if (link !== null) throw unsupported(path, 'shared by another copy of this library');
  const m = native(owner.mem, 'the import');
  const t = me();
  const table = tableHere();
  const size = m.layouts[owner.kind].size;
  const rel = m.readPtr(BigInt(owner.arrayAddr + m.layouts.ArrowArray.offsets.release!));
  const onHome = opts.releaseOn === 'home' || (opts.releaseOn === undefined && m.isOwnCallback?.(rel) === true);
  const struct = m.allocProcess(size);
  let schema: { at: Ptr; length: number } | null = null;
  try {
    schema = writeSchema(m, owner.schema!);
    m.copyIn(struct, m.read(owner.ptr, size));
    const flags = (owner.kind === 'ArrowDeviceArray' ? EntryFlags.Device : 0) | (onHome ? EntryFlags.Home : 0);
    const entry = table.addEntry({ struct, schema: schema.at, schemaLength: schema.length, block: 0n, flags, home: t.id }, 1);
    let hold: SlotRef;
    try {
      hold = table.addHold(entry, t.id);
    } catch (e) {
      table.endEntry(entry);
      throw e;
    }
    // From here the struct is the share's: ours is freed, the owner reads the process copy.
    m.free(owner.ptr);
    owner.addr = Number(struct);
    owner.shared = new Link(table, hold, entry, m, onHome);
    return { table, entry };
  } catch (e) {
    m.freeProcess(struct);
    if (schema !== null) m.freeProcess(schema.at);
    throw e;
  }
}

/** What a target found to share in `x` (`shareWith`): the owners behind it and the kind a handle rebuilds. */
export interface Found {
  readonly kind: SharedKind;
  readonly owners: readonly ImportOwner[];
  readonly rows: number;
  /** Whether the owners are copies made for this share (data built in JavaScript), released once their tickets hold them. */
  readonly copied: boolean;
}

/** Arrays that travel as they are (every buffer over a `SharedArrayBuffer`), as plain `ArrayView`s: no ticket, nothing to release. */
export interface SharedViews {
  readonly kind: SharedKind;
  readonly views: ArrayView[];
  readonly rows: number;
}

/** What shares a `DeviceArray` (every target shares it as itself). */
export function deviceFound(x: DeviceArray): Found {
  return { kind: 'device', owners: [deviceArrayOwner(x)], rows: x.length, copied: false };
}

/**
 * Shares `x` as `find` (the target's) finds it: the handle `share` returns.
 * Checks the arguments, takes a reference of every owner into the table (its
 * struct moved into process memory on its first share) and watches the worker.
 */
export function shareWith(x: object, opts: ShareOptions, find: (x: object) => Found | SharedViews): SharedHandle {
  if (x === null || typeof x !== 'object') throw invalid('x', `share takes an Arrow object, got ${x === null ? 'null' : typeof x}`);
  if (opts === null || typeof opts !== 'object') throw invalid('opts', 'must be an object');
  if (opts.releaseOn !== undefined && opts.releaseOn !== 'any' && opts.releaseOn !== 'home') throw invalid('opts.releaseOn', `must be 'any' or 'home', got ${String(opts.releaseOn)}`);
  const worker = opts.worker;
  let target = -1;
  if (worker !== undefined) {
    if (worker === null || typeof worker !== 'object' || typeof worker.once !== 'function') throw invalid('opts.worker', 'must be a Worker (worker_threads)');
    target = worker.threadId;
    if (!Number.isInteger(target) || target < 1) throw invalid('opts.worker', `the worker has no thread id (${String(target)}): it has exited, or is not a worker_threads Worker`);
  }
  me();
  const f = find(x);
  if ('views' in f) return { arrowDeviceShare: 1, kind: f.kind, table: tableHere().sab, process: tableHere().nonce, tickets: [], rows: f.rows, views: f.views };
  const found = f;
  if (found.owners.length === 0) throw invalid('x', `a ${found.kind} with no arrays: nothing to share (share its schema as data)`);
  const tickets: SlotRef[] = [];
  let table: ShareTable | null = null;
  try {
    for (let i = 0; i < found.owners.length; i++) {
      const e = entryOf(found.owners[i]!, opts, found.owners.length > 1 ? `x.batches[${i}]` : 'x');
      if (table !== null && e.table !== table) throw unsupported('x', 'its arrays were shared through different tables of shares');
      table = e.table;
      table.addRef(e.entry);
      try {
        tickets.push(table.addTicket(e.entry, target));
      } catch (err) {
        const last = table.dropRef(e.entry);
        if (last) endEntry(table, e.entry, found.owners[i]!.mem);
        throw err;
      }
    }
  } catch (err) {
    for (const t of tickets) dropTicket(table!, t, found.owners[0]!.mem);
    throw err;
  } finally {
    // A copy made here (data built in JavaScript) holds nothing in this thread once its tickets hold the entry.
    if (found.copied) for (const o of found.owners) o.release();
  }
  if (worker !== undefined) watchWorker(worker, target);
  return { arrowDeviceShare: 1, kind: found.kind, table: table!.sab, process: table!.nonce, tickets, rows: found.rows };
}

function dropTicket(table: ShareTable, t: SlotRef, mem: Memory): void {
  const last = table.drop(t, SlotType.Ticket);
  if (last) endEntry(table, last, mem);
}

function watchWorker(worker: WorkerLike, id: number): void {
  if (watched.has(worker)) return;
  watched.add(worker);
  worker.once('exit', () => releaseThreadShares(id));
}

/**
 * Gives back every reference thread `threadId` holds or was sent and never
 * imported: for a worker that ended without releasing (terminated, crashed),
 * called by its parent. `share(x, { worker })` calls it on the worker's
 * `exit` event. Never call it for a thread that still runs: its views would
 * outlive the memory. Returns the number of references given back.
 *
 * @example
 * import { Worker } from 'node:worker_threads';
 * const worker = new Worker('./sum.js');
 * const id = worker.threadId;                        // read while it runs: -1 once it exited
 * worker.on('exit', () => releaseThreadShares(id));
 */
export function releaseThreadShares(threadId: number): number {
  if (!Number.isInteger(threadId) || threadId < 0) throw invalid('threadId', `must be a thread id, got ${String(threadId)}`);
  if (thread !== null && threadId === thread.id) throw invalid('threadId', 'is this thread: release its imports instead');
  let n = 0;
  const mem = nativeMemory();
  for (const t of tables.values()) {
    for (const { ref, type } of t.referencesOf(threadId)) {
      const last = t.drop(ref, type);
      if (last === false) continue;
      n++;
      if (last) endEntry(t, last, mem);
    }
  }
  return n;
}

/**
 * Drops the reference a handle carries without importing it (a message
 * that will not be delivered, a worker that was never started). Throws like
 * `importShared` for a handle taken or dropped already.
 *
 * @example
 * import { Worker } from 'node:worker_threads';
 * const worker = new Worker('./sum.js');
 * const h = share(table);
 * try {
 *   worker.postMessage(h);
 * } catch (e) {
 *   dropShared(h); // not delivered: give its reference back
 *   throw e;
 * }
 */
export function dropShared(handle: SharedHandle): void {
  const h = checkHandle(handle);
  const table = ShareTable.open(h.table, h.process, pid(), 'handle');
  const mem = nativeMemory();
  // Every reference is dropped that can be; the first that cannot is reported after.
  let fault: ArrowDeviceError | null = null;
  h.tickets.forEach((t, i) => {
    const last = table.drop({ slot: t.slot, generation: t.generation }, SlotType.Ticket);
    if (last === false) fault ??= new ArrowDeviceError('released', `handle.tickets[${i}]`, 'not a handle waiting to be imported: imported or dropped already, or altered');
    else if (last) endEntry(table, last, mem);
  });
  if (fault !== null) throw fault;
}

// --- data built in JavaScript: over SharedArrayBuffers, or copied once into process memory ---------

/** Every buffer of the view's tree is over a `SharedArrayBuffer` (an empty or absent one needs none). */
export function allShared(v: ArrayView, depth = 0): boolean {
  if (depth > 64) return false;
  for (const b of v.buffers) if (b !== null && b.byteLength > 0 && !(b.buffer instanceof SharedArrayBuffer)) return false;
  return v.children.every((c) => allShared(c, depth + 1)) && (v.dictionary === null || allShared(v.dictionary, depth + 1));
}

/** A view as plain objects: structured clone keeps own data properties only. */
export function plainView(v: ArrayView): ArrayView {
  return {
    schema: v.schema,
    length: v.length,
    offset: v.offset,
    nullCount: v.nullCount,
    buffers: [...v.buffers],
    children: v.children.map(plainView),
    dictionary: v.dictionary === null ? null : plainView(v.dictionary),
  };
}

/** Whether `x` looks like an `ArrayView` (a target's own classes are tested first). */
export function isArrayView(x: object): x is ArrayView {
  const v = x as Partial<ArrayView>;
  return typeof v.length === 'number' && Array.isArray(v.buffers) && Array.isArray(v.children) && typeof v.schema === 'object';
}

/**
 * Data no import of ours made, as the owners of a copy in process memory: its
 * buffers are `ArrayBuffer`s of this thread, freed with it, so each array
 * (`views`, one per batch) is copied once into one block of process memory
 * (structs, buffer pointers and bytes together) and imported from there. The
 * block is freed with the entry's last reference; no producer `release` runs
 * (the entry says so: `EntryFlags.Block`).
 */
export function copiedFound(kind: SharedKind, views: readonly ArrayView[], rows: number): Found {
  const mem = native(nativeMemory(), 'data built in JavaScript');
  const owners: ImportOwner[] = [];
  try {
    for (const v of views) owners.push(blockOwner(mem, v));
  } catch (e) {
    for (const o of owners) o.release();
    throw e;
  }
  return { kind, owners, rows, copied: true };
}

/**
 * One array's block: every node's `ArrowArray`, its buffer and child pointer
 * arrays and its buffers' bytes (64-byte aligned, Columnar.rst "Buffer
 * alignment and padding"), and an owner in this thread over it whose link
 * frees the block at the end.
 */
function blockOwner(mem: ReturnType<typeof native>, root: ArrayView): ImportOwner {
  const L = mem.layouts.ArrowArray;
  const O = L.offsets;
  const align = (n: number): number => (n + 63) & ~63;
  // Pass 1: sizes.
  let size = 0;
  const place = new Map<ArrayView, number>();
  const walk = (v: ArrayView, depth: number): void => {
    if (depth > 64) throw invalid('x', 'nesting deeper than 64 levels');
    place.set(v, size);
    size = align(size + L.size + 8 * v.buffers.length + 8 * v.children.length);
    for (const b of v.buffers) if (b !== null && b.byteLength > 0) size = align(size + b.byteLength);
    for (const c of v.children) walk(c, depth + 1);
    if (v.dictionary !== null) walk(v.dictionary, depth + 1);
  };
  walk(root, 0);
  const block = mem.allocProcess(Math.max(size, 64));
  let copied = 0;
  try {
    const at = (v: ArrayView): bigint => block + BigInt(place.get(v)!);
    for (const [v, off] of place) {
      const s = block + BigInt(off);
      const bufs = s + BigInt(L.size);
      const kids = bufs + BigInt(8 * v.buffers.length);
      mem.writeI64(s + BigInt(O.length!), v.length);
      mem.writeI64(s + BigInt(O.null_count!), v.nullCount);
      mem.writeI64(s + BigInt(O.offset!), v.offset);
      mem.writeI64(s + BigInt(O.n_buffers!), v.buffers.length);
      mem.writeI64(s + BigInt(O.n_children!), v.children.length);
      mem.writePtr(s + BigInt(O.buffers!), v.buffers.length > 0 ? bufs : 0n);
      mem.writePtr(s + BigInt(O.children!), v.children.length > 0 ? kids : 0n);
      mem.writePtr(s + BigInt(O.dictionary!), v.dictionary !== null ? at(v.dictionary) : 0n);
      // Never called: the entry frees the block (EntryFlags.Block). Non-NULL, as a live struct's must be.
      mem.writePtr(s + BigInt(O.release!), block);
      let p = Number(kids - block) + 8 * v.children.length;
      v.buffers.forEach((b, i) => {
        if (b === null || b.byteLength === 0) {
          mem.writePtr(bufs + BigInt(8 * i), 0n);
          return;
        }
        p = align(p);
        mem.writePtr(bufs + BigInt(8 * i), block + BigInt(p));
        mem.copyIn(block + BigInt(p), b);
        p += b.byteLength;
        copied += b.byteLength;
      });
      v.children.forEach((c, i) => mem.writePtr(kids + BigInt(8 * i), at(c)));
    }
  } catch (e) {
    mem.freeProcess(block);
    throw e;
  }
  liveCounters.copiedBytes += copied;
  liveCounters.copiedBuffers++;
  const schema = writeSchema(mem, root.schema);
  const table = tableHere();
  let entry: SlotRef;
  try {
    entry = table.addEntry({ struct: block, schema: schema.at, schemaLength: schema.length, block, flags: EntryFlags.Block, home: me().id }, 1);
  } catch (e) {
    mem.freeProcess(block);
    mem.freeProcess(schema.at);
    throw e;
  }
  const hold = table.addHold(entry, me().id);
  const owner = new ImportOwner(mem, block, 'ArrowArray');
  owner.schema = root.schema;
  owner.shared = new Link(table, hold, entry, mem);
  // Not done(): with no views, that would release it at once. `share` releases it once its tickets hold the entry.
  return owner;
}

// --- import -------------------------------------------------------------------------------------

const KINDS = new Set<string>(['table', 'batch', 'vector', 'data', 'view', 'device']);

function checkHandle(handle: unknown): SharedHandle {
  if (handle === null || typeof handle !== 'object') throw invalid('handle', `must be a handle from share(), got ${handle === null ? 'null' : typeof handle}`);
  const h = handle as Partial<SharedHandle>;
  if (h.arrowDeviceShare !== 1) throw invalid('handle.arrowDeviceShare', `must be 1 (a handle of this format), got ${String(h.arrowDeviceShare)}`);
  if (typeof h.kind !== 'string' || !KINDS.has(h.kind)) throw invalid('handle.kind', `unknown kind ${String(h.kind)}`);
  if (typeof h.process !== 'string') throw invalid('handle.process', 'must be a string');
  if (h.views !== undefined) return h as SharedHandle;
  if (!Array.isArray(h.tickets) || h.tickets.length === 0) throw invalid('handle.tickets', 'must be a non-empty array');
  if (h.kind !== 'table' && h.tickets.length !== 1) throw invalid('handle.tickets', `a ${h.kind} has one array, the handle names ${h.tickets.length}`);
  h.tickets.forEach((t, i) => {
    if (t === null || typeof t !== 'object' || !Number.isInteger(t.slot) || !Number.isInteger(t.generation)) {
      throw invalid(`handle.tickets[${i}]`, 'must be { slot, generation }, integers');
    }
  });
  return h as SharedHandle;
}

/**
 * How a target builds what a handle carries (src/share/share.ts: arrow-js;
 * src/flechette/share.ts: flechette). `view` and `device` handles are built
 * here, the same for every target.
 */
export interface ShareTarget {
  /**
   * One array of a handle of kind `table`, `batch`, `vector` or `data`, built over `owner` (the shared
   * struct, synchronised for the host) through `importWith`, which releases it on failure.
   */
  one(owner: ImportOwner, plan: Plan, kind: SharedKind, opts: SharedImportOptions, level: number, path: string): object;
  /** The arrays of a table handle (one per record batch, each built by `one`) as one table, which owns them all. */
  table(batches: object[], node: SchemaNode, path: string): object;
  /** A handle whose arrays travel as views over `SharedArrayBuffer`s (`handle.views`): nothing to release. */
  views(h: SharedHandle, opts: SharedImportOptions): object;
}

/**
 * The one import of a handle, for every target's `importShared`: built by
 * `target`, over the same memory, zero-copy. Consumes the handle's
 * reference: a second import of one handle, a handle whose data was
 * released, one from another process or an altered one is a typed
 * `ArrowDeviceError` naming the fault, found in the process's table of
 * shares before any address is read. On a failure every reference the
 * handle carried is given back.
 */
export function importSharedWith(handle: SharedHandle, opts: SharedImportOptions, target: ShareTarget): object {
  const h = checkHandle(handle);
  if (opts === null || typeof opts !== 'object') throw invalid('opts', 'must be an object');
  if ((opts as ImportCoreOptions).copy !== undefined) throw invalid('opts.copy', 'importShared is zero-copy (share a copy instead)');
  if (h.views !== undefined) return target.views(h, opts);
  const table = ShareTable.open(h.table, h.process, pid(), 'handle');
  const t = me();
  if (!tables.has(table.nonce)) tables.set(table.nonce, table);
  home ??= table;
  const mem = native(nativeMemory(), 'importShared');
  const level = validationLevel(opts.validate);
  // Take every reference first: a handle is consumed whole, or (on a fault) not at all past the fault.
  const holds: { hold: SlotRef; entry: SlotRef }[] = [];
  try {
    h.tickets.forEach((tk, i) => {
      const ref = { slot: tk.slot, generation: tk.generation };
      holds.push({ hold: ref, entry: table.take(ref, t.id, `handle.tickets[${i}]`) });
    });
  } catch (e) {
    for (const x of holds) dropHold(table, x.hold, mem);
    for (const tk of h.tickets.slice(holds.length + 1)) quietDrop(table, tk, mem);
    throw e;
  }
  const links: Link[] = holds.map((x) => new Link(table, x.hold, x.entry, mem));
  const built: object[] = [];
  let node: SchemaNode | null = null;
  try {
    for (let i = 0; i < links.length; i++) {
      const one = importOne(table, links[i]!, h.kind, opts, level, links.length > 1 ? `handle.tickets[${i}]` : 'handle', target);
      built.push(one.x);
      node ??= one.node;
    }
  } catch (e) {
    for (const b of built) (b as { release(): void }).release();
    for (const l of links.slice(built.length + 1)) l.drop();
    throw e;
  }
  if (h.kind === 'table') return target.table(built, node!, 'handle');
  return built[0]!;
}

function dropHold(table: ShareTable, hold: SlotRef, mem: Memory): void {
  const last = table.drop(hold, SlotType.Hold);
  if (last) endEntry(table, last, mem);
}

function quietDrop(table: ShareTable, t: { slot: number; generation: number }, mem: Memory): void {
  try {
    const last = table.drop({ slot: t.slot, generation: t.generation }, SlotType.Ticket);
    if (last) endEntry(table, last, mem);
  } catch {
    // An altered ticket among good ones: the error already thrown names the first fault.
  }
}

/** One array of a handle: an owner over the shared struct, read and built as its kind says (the target's kinds by `target`). */
function importOne(
  table: ShareTable,
  link: Link,
  kind: SharedKind,
  opts: SharedImportOptions,
  level: number,
  path: string,
  target: ShareTarget,
): { x: object; node: SchemaNode } {
  let owner: ImportOwner | null = null;
  try {
    const info = table.entry(link.entry, path);
    const node = readSchema(link.mem, info, `${path}.schema`);
    const device = (info.flags & EntryFlags.Device) !== 0;
    const structKind: OwnedStruct = device ? 'ArrowDeviceArray' : 'ArrowArray';
    owner = new ImportOwner(link.mem, info.struct, structKind);
    owner.shared = link;
    const plan = planOfNode(node, opts);
    if (kind === 'device') {
      if (!device) throw invalid(path, 'a device handle whose entry holds an ArrowArray');
      return { x: deviceArrayOf(owner, plan, path, level), node };
    }
    if (device) {
      // Host-readable device memory (CUDA_HOST, CUDA_MANAGED, CPU): wait on the producer's event here too.
      const fields = readDeviceFields(link.mem, info.struct, `${path}.device_array`);
      const backend = backendFor(fields.deviceType);
      if (backend === undefined || !backend.hostReadable(fields.deviceType)) throw unsupported(path, 'the shared array is in memory the CPU cannot read: share it as a DeviceArray');
      backend.syncForHost({ mem: link.mem, ...fields });
    }
    const o = owner;
    owner = null; // importWith releases it on failure
    if (kind === 'view') return { x: importWith(o, plan, opts, level, path, (read) => viewOf(read, plan.root, 0)), node };
    return { x: target.one(o, plan, kind, opts, level, path), node };
  } catch (e) {
    if (owner !== null) owner.release('failed');
    else link.drop(); // idempotent: importWith's release dropped it already
    throw e;
  }
}
