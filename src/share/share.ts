/**
 * Arrow data shared between the threads of one process without a copy
 * (docs/threads.md): `share(x)` gives a handle of plain data that survives
 * structured clone (`postMessage`), `importShared(handle)` in any thread
 * builds the same arrow-js objects over the same memory.
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
import { Data, RecordBatch, Schema, Struct, Table, Vector } from 'apache-arrow';
import { ArrowDeviceError, invalid, unsupported } from '../errors.js';
import { liveCounters, setSharedCounts } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { callRelease } from '../memory/registry.js';
import { currentThread, onThreadExit } from '../platform/node.js';
import { parseFormat } from '../schema/format.js';
import type { Metadata } from '../schema/metadata.js';
import type { SchemaNode } from '../schema/node.js';
import { toExportView, type ArrayImportOptions } from '../array/api.js';
import { buildBatch, buildData, importedTable, importedVector, ImportedRecordBatch, ImportedTable, owned, ownersOf, type ImportedData, type ImportedVector } from '../array/build.js';
import { viewToArrow } from '../array/arrowjs.js';
import { importWith, type ImportCoreOptions } from '../array/importer.js';
import { ImportOwner, type OwnedStruct, type SharedLink } from '../array/owner.js';
import { planOfNode } from '../array/plan.js';
import { validationLevel } from '../array/read.js';
import { viewOf, type ArrayView } from '../array/view.js';
import { backendFor } from '../device/backend.js';
import { readDeviceFields } from '../device/api.js';
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
  /** What `importShared` returns: an `ImportedTable`, `ImportedRecordBatch`, `ImportedVector`, `ImportedData`, `ArrayView` or `DeviceArray`. */
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

/** What `importShared` returns for a handle of kind `K`. */
export type SharedImport<K extends SharedKind> = K extends 'table'
  ? ImportedTable
  : K extends 'batch'
    ? ImportedRecordBatch
    : K extends 'vector'
      ? ImportedVector
      : K extends 'data'
        ? ImportedData
        : K extends 'view'
          ? ArrayView
          : DeviceArray;

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

/** The owners behind `x` and the kind a handle rebuilds, or null for arrow-js data no import of ours made. */
interface Found {
  readonly kind: SharedKind;
  readonly owners: readonly ImportOwner[];
  readonly rows: number;
  /** Whether the owners are copies made for this share (arrow-js data), released once their tickets hold them. */
  readonly copied: boolean;
}

function ownersToShare(x: object): Found | null {
  if (x instanceof DeviceArray) return { kind: 'device', owners: [deviceArrayOwner(x)], rows: x.length, copied: false };
  const owners = ownersOf(x);
  if (owners === undefined) return null;
  if (x instanceof Table) return { kind: 'table', owners, rows: x.numRows, copied: false };
  if (x instanceof RecordBatch) return { kind: 'batch', owners, rows: x.numRows, copied: false };
  if (x instanceof Vector) return { kind: 'vector', owners, rows: x.length, copied: false };
  if (x instanceof Data) return { kind: 'data', owners, rows: x.length, copied: false };
  return { kind: 'view', owners, rows: (x as ArrayView).length, copied: false };
}

/**
 * Shares `x` with other threads of this process: returns a handle that
 * `postMessage` carries (structured clone), from which `importShared` in the
 * receiving thread builds the same arrow-js objects over the same memory,
 * zero-copy, at a cost that grows with the number of buffers, not of rows.
 *
 * `x` is an import of this library (an `ImportedTable`, `ImportedRecordBatch`,
 * `ImportedVector`, `ImportedData`, an imported `ArrayView`, or a
 * `DeviceArray`) in native memory, or arrow-js data built in JavaScript:
 * a `Table`, `RecordBatch` or `Vector` whose every buffer is a
 * `SharedArrayBuffer` travels as itself (no copy: `handle.views`), other
 * arrow-js data is copied once into process memory (a JS `ArrayBuffer`
 * belongs to its thread, which may end first; `accounting().copiedBytes`
 * counts it).
 *
 * The handle carries one reference: import it once (send to N threads with
 * N calls). The producer's `release` runs once, when the last reference in
 * any thread is released (`release()`, `using`, or the garbage collector),
 * never while a thread can still read. `x` itself stays readable here until
 * it is released here; its release detaches this thread's views only.
 *
 * @example
 * import { Worker } from 'node:worker_threads';
 * const worker = new Worker(new URL('./sum.js', import.meta.url));
 * worker.postMessage(share(table, { worker }));  // zero-copy; given back if the worker dies
 * // in sum.js: using t = importShared(handle); ... t.getChild('v')
 */
export function share(x: Table, opts?: ShareOptions): SharedHandle<'table'>;
export function share(x: RecordBatch, opts?: ShareOptions): SharedHandle<'batch'>;
export function share(x: Vector, opts?: ShareOptions): SharedHandle<'vector'>;
export function share(x: Data, opts?: ShareOptions): SharedHandle<'data'>;
export function share(x: DeviceArray, opts?: ShareOptions): SharedHandle<'device'>;
export function share(x: ArrayView, opts?: ShareOptions): SharedHandle<'view'>;
export function share(x: Table | RecordBatch | Vector | Data | DeviceArray | ArrayView, opts: ShareOptions = {}): SharedHandle {
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
  const sab = ownersOf(x) === undefined && !(x instanceof DeviceArray) ? sharedBuffersOf(x) : null;
  if (sab !== null) return { arrowDeviceShare: 1, kind: sab.kind, table: tableHere().sab, process: tableHere().nonce, tickets: [], rows: sab.rows, views: sab.views };
  const found = ownersToShare(x) ?? copyToProcess(x);
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
    // A copy made here (arrow-js data) holds nothing in this thread once its tickets hold the entry.
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

// --- arrow-js data built in JavaScript: over SharedArrayBuffers, or copied once into process memory --

/** Every buffer of the view's tree is over a `SharedArrayBuffer` (an empty or absent one needs none). */
function allShared(v: ArrayView, depth = 0): boolean {
  if (depth > 64) return false;
  for (const b of v.buffers) if (b !== null && b.byteLength > 0 && !(b.buffer instanceof SharedArrayBuffer)) return false;
  return v.children.every((c) => allShared(c, depth + 1)) && (v.dictionary === null || allShared(v.dictionary, depth + 1));
}

/**
 * The arrays of a `Table`, `RecordBatch` or `Vector` of arrow-js whose every
 * buffer is over a `SharedArrayBuffer`, as plain `ArrayView`s over the same
 * memory; null otherwise (then it is copied). A `Data` or an `ArrayView` is
 * always copied: what comes back is an `ImportedData`, which only an import
 * makes.
 */
function sharedBuffersOf(x: object): { kind: SharedKind; views: ArrayView[]; rows: number } | null {
  let kind: SharedKind;
  let parts: (RecordBatch | Vector)[];
  let rows: number;
  if (x instanceof Table) [kind, parts, rows] = ['table', x.batches, x.numRows];
  else if (x instanceof RecordBatch) [kind, parts, rows] = ['batch', [x], x.numRows];
  else if (x instanceof Vector && x.data.length === 1) [kind, parts, rows] = ['vector', [x], x.length];
  else return null;
  if (parts.length === 0) return null;
  const views: ArrayView[] = [];
  for (const p of parts) {
    const v = toExportView(p);
    // Structured clone keeps own data properties only: the view as plain objects.
    if (!allShared(v)) return null;
    views.push(plainView(v));
  }
  return { kind, views, rows };
}

function plainView(v: ArrayView): ArrayView {
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

/**
 * Arrow-js objects over the `SharedArrayBuffer`s a handle's views carry: no
 * native memory is read, so a malformed view can only fail as arrow-js reads
 * it (a typed error here where the layout is wrong).
 */
function fromSharedViews(h: SharedHandle, opts: SharedImportOptions): SharedImport<SharedKind> {
  const views = h.views!;
  if (!Array.isArray(views) || views.length === 0 || (h.kind !== 'table' && views.length !== 1)) {
    throw invalid('handle.views', `a ${h.kind} handle with ${Array.isArray(views) ? views.length : 'no'} views`);
  }
  const data = views.map((v, i) => {
    try {
      return viewToArrow(v, opts, `handle.views[${i}]`);
    } catch (e) {
      if (e instanceof ArrowDeviceError) throw e;
      throw invalid(`handle.views[${i}]`, `not an array: ${String(e)}`);
    }
  });
  if (h.kind === 'vector') return importedVector(data[0]!, []);
  if (h.kind !== 'table' && h.kind !== 'batch') throw invalid('handle.kind', `views travel only for a table, a batch or a vector, not a ${h.kind}`);
  const batches = data.map((d, i) => {
    if (!(d.type instanceof Struct)) throw invalid(`handle.views[${i}]`, 'a batch must be a struct array');
    return owned(new ImportedRecordBatch(new Schema(d.type.children, views[i]!.schema.metadata ?? undefined), d as Data<Struct>), []);
  });
  return h.kind === 'batch' ? batches[0]! : owned(new ImportedTable(batches), []);
}

/**
 * Arrow-js data no import of ours made: its buffers are `ArrayBuffer`s of
 * this thread, freed with it, so each array is copied once into one block of
 * process memory (structs, buffer pointers and bytes together) and imported
 * from there. The block is freed with the entry's last reference; no producer
 * `release` runs (the entry says so: `EntryFlags.Block`).
 */
function copyToProcess(x: object): Found {
  const mem = native(nativeMemory(), 'arrow-js data');
  let kind: SharedKind;
  let views: ArrayView[];
  let rows: number;
  if (x instanceof Table) {
    kind = 'table';
    views = x.batches.map((b) => toExportView(b));
    rows = x.numRows;
  } else if (x instanceof RecordBatch) {
    kind = 'batch';
    views = [toExportView(x)];
    rows = x.numRows;
  } else if (x instanceof Vector) {
    kind = 'vector';
    views = [toExportView(x)];
    rows = x.length;
  } else if (x instanceof Data) {
    kind = 'data';
    views = [toExportView(x)];
    rows = x.length;
  } else if (isArrayView(x)) {
    kind = 'view';
    views = [x];
    rows = x.length;
  } else {
    throw invalid('x', 'not an arrow-js Table, RecordBatch, Vector or Data, an ArrayView or a DeviceArray');
  }
  const owners: ImportOwner[] = [];
  try {
    for (const v of views) owners.push(blockOwner(mem, v));
  } catch (e) {
    for (const o of owners) o.release();
    throw e;
  }
  return { kind, owners, rows, copied: true };
}

function isArrayView(x: object): x is ArrayView {
  const v = x as Partial<ArrayView>;
  return typeof v.length === 'number' && Array.isArray(v.buffers) && Array.isArray(v.children) && typeof v.schema === 'object';
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
 * Imports what another thread of this process shared (`share`): the same
 * arrow-js objects (`ImportedTable`, `ImportedRecordBatch`, ...) over the
 * same memory, zero-copy. Consumes the handle's reference: a second import
 * of one handle, a handle whose data was released, one from another process
 * or an altered one is a typed `ArrowDeviceError` naming the fault, found in
 * the process's table of shares before any address is read.
 *
 * Release it as any import (`release()`, `using`, or the garbage collector):
 * that detaches this thread's views and drops its reference; the last
 * reference in the process calls the producer's `release`.
 *
 * @example
 * import { parentPort } from 'node:worker_threads';
 * parentPort!.on('message', (handle: SharedHandle<'table'>) => {
 *   using t = importShared(handle);
 *   let sum = 0;
 *   for (const v of t.getChild('v')!) sum += Number(v);
 *   parentPort!.postMessage(sum);
 * });
 */
export function importShared<K extends SharedKind>(handle: SharedHandle<K>, opts?: SharedImportOptions): SharedImport<K>;
export function importShared(handle: SharedHandle, opts: SharedImportOptions = {}): SharedImport<SharedKind> {
  const h = checkHandle(handle);
  if (opts === null || typeof opts !== 'object') throw invalid('opts', 'must be an object');
  if ((opts as ImportCoreOptions).copy !== undefined) throw invalid('opts.copy', 'importShared is zero-copy (share a copy instead)');
  if (h.views !== undefined) return fromSharedViews(h, opts);
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
  try {
    for (let i = 0; i < links.length; i++) {
      built.push(importOne(table, links[i]!, h.kind, opts, level, links.length > 1 ? `handle.tickets[${i}]` : 'handle'));
    }
  } catch (e) {
    for (const b of built) (b as { release(): void }).release();
    for (const l of links.slice(built.length + 1)) l.drop();
    throw e;
  }
  if (h.kind === 'table') {
    const batches = built as ImportedRecordBatch[];
    return importedTable(batches, batches[0]!.schema as Schema);
  }
  return built[0] as SharedImport<SharedKind>;
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

/** One array of a handle: an owner over the shared struct, read and built as its kind says. */
function importOne(table: ShareTable, link: Link, kind: SharedKind, opts: SharedImportOptions, level: number, path: string): object {
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
      return deviceArrayOf(owner, plan, path, level);
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
    if (kind === 'batch' || kind === 'table') {
      plan.batch(path);
      return importWith(o, plan, opts, level, path, buildBatch);
    }
    if (kind === 'view') return importWith(o, plan, opts, level, path, (read) => viewOf(read, plan.root, 0));
    plan.type();
    const data = importWith(o, plan, opts, level, path, buildData);
    return kind === 'vector' ? importedVector(data, o) : data;
  } catch (e) {
    if (owner !== null) owner.release('failed');
    else link.drop(); // idempotent: importWith's release dropped it already
    throw e;
  }
}
