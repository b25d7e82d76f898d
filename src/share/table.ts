/**
 * The process's table of shares: what every thread checks a handle against
 * before it touches an address (docs/threads.md; issue "every core").
 *
 * It lives in a `SharedArrayBuffer`, so every thread that holds it reads and
 * changes the same words, with `Atomics` (the memory model of ECMAScript's
 * shared memory, not an engine's habit). A handle carries the table with it:
 * structured clone hands a `SharedArrayBuffer` to another thread of the same
 * process as the same memory, and cannot carry it to another process (so a
 * handle from elsewhere arrives without its table, and is refused).
 *
 * The table is an array of 64-byte slots. Slot 0 is the header; each other
 * slot is free or holds one of:
 *
 * - an ENTRY: a shared struct (an `ArrowArray` or `ArrowDeviceArray` in
 *   process memory), its schema (bytes in process memory), and the count of
 *   references to it;
 * - a TICKET: one reference that a handle carries and no thread has taken yet;
 * - a HOLD: one reference a thread holds (an import of that thread).
 *
 * A slot's first word is `generation << 4 | type`, changed only by
 * compare-and-swap: a handle names slots by index and generation, so a stale
 * or altered handle finds a different word and is refused, and two threads
 * taking one ticket cannot both win. Each ticket and hold counts one in its
 * entry's `refs`; whoever takes the count to zero ends the entry. No lock is
 * ever held, so a worker terminated between two steps cannot block the others
 * (at worst, one reference stays counted: memory kept, never freed early).
 */
import { ArrowDeviceError, invalid } from '../errors.js';

/** The slot types (low 4 bits of a slot's first word). */
export const enum SlotType {
  Free = 0,
  /** Taken by a thread that is writing it (not yet readable). */
  Claimed = 1,
  Entry = 2,
  Ticket = 3,
  Hold = 4,
  /** A ticket or hold whose reference is being dropped. */
  Dropping = 5,
}

const SLOT_I32 = 16;
const GEN_MASK = 0x7ffffff;

// Header words (slot 0).
const H_MAGIC = 0;
const H_VERSION = 1;
const H_CAPACITY = 2;
const H_HINT = 3;
const H_NONCE = 4; // 4 words
const H_PID = 8;
const H_ENTRIES = 9;
const H_TICKETS = 10;
const H_HOLDS = 11;

/** "ADsh": a table of ours. */
const MAGIC = 0x41447368;
export const TABLE_VERSION = 1;

// Slot words (i32 index within a slot).
const S_STATE = 0;
/** ENTRY: references (tickets + holds). */
const S_REFS = 1;
/** TICKET, HOLD: the entry's slot. */
const S_ENTRY = 2;
/** TICKET, HOLD: the entry's generation. */
const S_ENTRY_GEN = 3;
/** HOLD: the holding thread's id + 1; TICKET: the claiming thread's id + 1 (0: none yet). ENTRY: the home thread's id + 1. */
const S_THREAD = 4;
/** TICKET: the thread it is meant for, id + 1 (0: any). */
const S_TARGET = 5;
/** ENTRY: `EntryFlags`. */
const S_FLAGS = 6;
/** ENTRY: 1 once the last reference dropped outside the home thread of a home-released entry. */
const S_HANDBACK = 7;
// Slot int64 words (BigInt64Array index within a slot: slot * 8 + ...).
const L_STRUCT = 4;
const L_SCHEMA = 5;
const L_SCHEMA_LEN = 6;
const L_BLOCK = 7;

/** What an entry holds and how it ends. */
export const enum EntryFlags {
  /** The struct is an `ArrowDeviceArray` (else an `ArrowArray`). */
  Device = 1,
  /** The producer's release must run on the home thread (the thread that shared it first). */
  Home = 2,
  /** The struct and its buffers are one block of ours (`L_BLOCK`): ending frees it, no producer release. */
  Block = 4,
}

/** The default number of slots: 2 MiB of table, reserved lazily by the system. */
export const DEFAULT_SLOTS = 1 << 15;

/** A slot by index and generation: what a handle names. */
export interface SlotRef {
  readonly slot: number;
  readonly generation: number;
}

/** What an entry records. */
export interface EntryInfo {
  readonly struct: bigint;
  readonly schema: bigint;
  readonly schemaLength: number;
  readonly block: bigint;
  readonly flags: number;
  readonly home: number;
}

export class ShareTable {
  readonly i32: Int32Array;
  readonly i64: BigInt64Array;
  readonly capacity: number;

  constructor(readonly sab: SharedArrayBuffer) {
    this.i32 = new Int32Array(sab);
    this.i64 = new BigInt64Array(sab);
    this.capacity = this.i32[H_CAPACITY]!;
  }

  /** A new table of `slots` slots, stamped with this process's id and a random nonce. */
  static create(pid: number, slots = DEFAULT_SLOTS): ShareTable {
    const sab = new SharedArrayBuffer(slots * SLOT_I32 * 4);
    const i32 = new Int32Array(sab);
    i32[H_VERSION] = TABLE_VERSION;
    i32[H_CAPACITY] = slots;
    i32[H_HINT] = 1;
    const nonce = new Uint32Array(4);
    globalThis.crypto.getRandomValues(nonce);
    for (let k = 0; k < 4; k++) i32[H_NONCE + k] = nonce[k]! | 0;
    i32[H_PID] = pid | 0;
    Atomics.store(i32, H_MAGIC, MAGIC);
    return new ShareTable(sab);
  }

  /**
   * The table a handle carries, checked: `table` must be a `SharedArrayBuffer`
   * of ours, made in this process (`pid`), whose nonce the handle names.
   */
  static open(table: unknown, nonce: unknown, pid: number, path: string): ShareTable {
    if (!(table instanceof SharedArrayBuffer)) {
      throw invalid(`${path}.table`, `not a SharedArrayBuffer (got ${describe(table)}): a handle works only in the process that made it, posted by structured clone (postMessage), not serialized`);
    }
    if (table.byteLength < 2 * SLOT_I32 * 4 || table.byteLength % (SLOT_I32 * 4) !== 0) {
      throw invalid(`${path}.table`, `a SharedArrayBuffer of ${table.byteLength} bytes is no table of shares`);
    }
    const i32 = new Int32Array(table);
    if (Atomics.load(i32, H_MAGIC) !== MAGIC) throw invalid(`${path}.table`, 'not a table of shares (no magic number)');
    if (i32[H_VERSION] !== TABLE_VERSION) {
      throw new ArrowDeviceError('unsupported', `${path}.table`, `table version ${i32[H_VERSION]}, this library reads version ${TABLE_VERSION}`);
    }
    if (i32[H_CAPACITY]! * SLOT_I32 * 4 !== table.byteLength) throw invalid(`${path}.table`, 'its capacity does not match its size');
    if (i32[H_PID] !== (pid | 0)) {
      throw invalid(`${path}.table`, `made by process ${i32[H_PID]}, this is process ${pid}: a handle works only in the process that made it`);
    }
    const t = new ShareTable(table);
    if (t.nonce !== nonce) throw invalid(`${path}.process`, `the handle names table ${String(nonce)}, its table is ${t.nonce}`);
    return t;
  }

  /** The table's identity: its nonce, in hex. */
  get nonce(): string {
    let s = '';
    for (let k = 0; k < 4; k++) s += (this.i32[H_NONCE + k]! >>> 0).toString(16).padStart(8, '0');
    return s;
  }

  private state(slot: number): number {
    return Atomics.load(this.i32, slot * SLOT_I32 + S_STATE);
  }

  private cas(slot: number, from: number, to: number): boolean {
    return Atomics.compareExchange(this.i32, slot * SLOT_I32 + S_STATE, from, to) === from;
  }

  /** Takes a free slot and fills it with `fill` before anyone can read it as `type`. */
  private alloc(type: SlotType, fill: (base: number, base64: number) => void): SlotRef {
    const cap = this.capacity;
    const start = Atomics.load(this.i32, H_HINT);
    for (let n = 0; n < cap - 1; n++) {
      const slot = 1 + ((start - 1 + n) % (cap - 1));
      const w = this.state(slot);
      if ((w & 15) !== SlotType.Free) continue;
      const gen = ((w >>> 4) + 1) & GEN_MASK;
      if (!this.cas(slot, w, (gen << 4) | SlotType.Claimed)) continue;
      const base = slot * SLOT_I32;
      for (let k = 1; k < SLOT_I32; k++) this.i32[base + k] = 0;
      fill(base, slot * 8);
      Atomics.store(this.i32, base + S_STATE, (gen << 4) | type);
      Atomics.store(this.i32, H_HINT, slot + 1 < cap ? slot + 1 : 1);
      return { slot, generation: gen };
    }
    throw new ArrowDeviceError('nomem', 'share', `the table of shares is full (${cap - 1} slots: entries, handles not yet imported, and imports holding them)`);
  }

  /** Frees `slot`, now of `type` at `gen` (its owner's to free: no one else can change it). */
  private free(slot: number, gen: number, type: SlotType): void {
    if (!this.cas(slot, (gen << 4) | type, (gen << 4) | SlotType.Free)) {
      throw new ArrowDeviceError('io', 'share', `slot ${slot} changed under its owner (expected type ${type})`);
    }
  }

  /** A new entry with `refs` references. */
  addEntry(info: EntryInfo, refs: number): SlotRef {
    const r = this.alloc(SlotType.Entry, (b, l) => {
      this.i32[b + S_REFS] = refs;
      this.i32[b + S_FLAGS] = info.flags;
      this.i32[b + S_THREAD] = info.home + 1;
      this.i64[l + L_STRUCT] = info.struct;
      this.i64[l + L_SCHEMA] = info.schema;
      this.i64[l + L_SCHEMA_LEN] = BigInt(info.schemaLength);
      this.i64[l + L_BLOCK] = info.block;
    });
    Atomics.add(this.i32, H_ENTRIES, 1);
    return r;
  }

  /** The entry at `e`, which the caller holds a reference to; a typed error if it is not live. */
  entry(e: SlotRef, path: string): EntryInfo {
    this.checkSlot(e.slot, path);
    if (this.state(e.slot) !== ((e.generation << 4) | SlotType.Entry)) throw invalid(path, `entry ${e.slot}:${e.generation} is not live`);
    const b = e.slot * SLOT_I32;
    const l = e.slot * 8;
    return {
      struct: this.i64[l + L_STRUCT]!,
      schema: this.i64[l + L_SCHEMA]!,
      schemaLength: Number(this.i64[l + L_SCHEMA_LEN]!),
      block: this.i64[l + L_BLOCK]!,
      flags: this.i32[b + S_FLAGS]!,
      home: this.i32[b + S_THREAD]! - 1,
    };
  }

  /** One more reference to an entry the caller holds one to (for a new ticket). */
  addRef(e: SlotRef): void {
    Atomics.add(this.i32, e.slot * SLOT_I32 + S_REFS, 1);
  }

  /** A ticket for entry `e` (whose reference the caller counted with `addRef`), meant for thread `target` (-1: any). */
  addTicket(e: SlotRef, target: number): SlotRef {
    const r = this.alloc(SlotType.Ticket, (b) => {
      this.i32[b + S_ENTRY] = e.slot;
      this.i32[b + S_ENTRY_GEN] = e.generation;
      this.i32[b + S_TARGET] = target + 1;
    });
    Atomics.add(this.i32, H_TICKETS, 1);
    return r;
  }

  /** A hold of entry `e` by thread `thread`, its reference counted already. */
  addHold(e: SlotRef, thread: number): SlotRef {
    const r = this.alloc(SlotType.Hold, (b) => {
      this.i32[b + S_ENTRY] = e.slot;
      this.i32[b + S_ENTRY_GEN] = e.generation;
      this.i32[b + S_THREAD] = thread + 1;
    });
    Atomics.add(this.i32, H_HOLDS, 1);
    return r;
  }

  private checkSlot(slot: number, path: string): void {
    if (!Number.isInteger(slot) || slot < 1 || slot >= this.capacity) throw invalid(path, `slot ${String(slot)} is outside the table (1 to ${this.capacity - 1})`);
  }

  /**
   * Takes the ticket `t` for thread `thread`: it becomes that thread's hold,
   * in place, or a typed error says why it cannot (taken already, dropped,
   * never made, or meant for another thread). Returns the entry.
   */
  take(t: SlotRef, thread: number, path: string): SlotRef {
    this.checkSlot(t.slot, `${path}.slot`);
    if (!Number.isInteger(t.generation) || t.generation < 0 || t.generation > GEN_MASK) throw invalid(`${path}.generation`, `not a generation: ${String(t.generation)}`);
    const b = t.slot * SLOT_I32;
    const want = (t.generation << 4) | SlotType.Ticket;
    const w = this.state(t.slot);
    if (w !== want) {
      const type = w & 15;
      const why =
        w >>> 4 !== t.generation || type === SlotType.Free
          ? 'its reference was imported and released, or dropped, already (or the handle was altered)'
          : type === SlotType.Hold || type === SlotType.Dropping
            ? 'it was imported already (a handle carries one reference: share once per import)'
            : 'the slot holds no handle (the handle was altered)';
      throw new ArrowDeviceError('released', path, `handle ${t.slot}:${t.generation}: ${why}`);
    }
    const target = this.i32[b + S_TARGET]! - 1;
    if (target >= 0 && target !== thread) throw invalid(path, `the handle was shared for thread ${target}, this is thread ${thread}`);
    // Claim first, so that a thread terminated right after is found by its id (releaseThread).
    if (Atomics.compareExchange(this.i32, b + S_THREAD, 0, thread + 1) !== 0) {
      throw new ArrowDeviceError('released', path, `handle ${t.slot}:${t.generation}: another thread is importing it`);
    }
    if (!this.cas(t.slot, want, (t.generation << 4) | SlotType.Hold)) {
      throw new ArrowDeviceError('released', path, `handle ${t.slot}:${t.generation}: dropped while being imported`);
    }
    Atomics.sub(this.i32, H_TICKETS, 1);
    Atomics.add(this.i32, H_HOLDS, 1);
    return { slot: this.i32[b + S_ENTRY]!, generation: this.i32[b + S_ENTRY_GEN]! };
  }

  /**
   * Drops the reference of hold or ticket `r` (of `type`): returns its entry
   * when that was the last reference (the caller then ends the entry), null
   * when others remain, and `false` when `r` was no such slot (dropped or
   * taken by someone else first, or never made).
   */
  drop(r: SlotRef, type: SlotType.Hold | SlotType.Ticket): SlotRef | null | false {
    if (!Number.isInteger(r.slot) || r.slot < 1 || r.slot >= this.capacity || !Number.isInteger(r.generation)) return false;
    const b = r.slot * SLOT_I32;
    if (!this.cas(r.slot, (r.generation << 4) | type, (r.generation << 4) | SlotType.Dropping)) return false;
    const e: SlotRef = { slot: this.i32[b + S_ENTRY]!, generation: this.i32[b + S_ENTRY_GEN]! };
    const left = Atomics.sub(this.i32, e.slot * SLOT_I32 + S_REFS, 1) - 1;
    this.free(r.slot, r.generation, SlotType.Dropping);
    Atomics.sub(this.i32, type === SlotType.Hold ? H_HOLDS : H_TICKETS, 1);
    return left === 0 ? e : null;
  }

  /** Drops one reference counted with `addRef` that no ticket took; true when it was the last. */
  dropRef(e: SlotRef): boolean {
    return Atomics.sub(this.i32, e.slot * SLOT_I32 + S_REFS, 1) === 1;
  }

  /** Ends entry `e` (no references left): its slot is free for reuse. */
  endEntry(e: SlotRef): void {
    this.free(e.slot, e.generation, SlotType.Entry);
    Atomics.sub(this.i32, H_ENTRIES, 1);
  }

  /** Marks a home-released entry as ready for its home thread, and wakes a waiter. */
  handBack(e: SlotRef): void {
    const at = e.slot * SLOT_I32 + S_HANDBACK;
    Atomics.store(this.i32, at, 1);
    Atomics.notify(this.i32, at);
  }

  /** Whether entry `e` was handed back to its home thread (its last reference gone elsewhere). */
  handedBack(e: SlotRef): boolean {
    return this.state(e.slot) === ((e.generation << 4) | SlotType.Entry) && Atomics.load(this.i32, e.slot * SLOT_I32 + S_HANDBACK) === 1;
  }

  /**
   * The holds and tickets of thread `thread` (holds it took, tickets it
   * claimed or that were meant for it): what a terminated thread leaves.
   */
  referencesOf(thread: number): { ref: SlotRef; type: SlotType.Hold | SlotType.Ticket }[] {
    const out: { ref: SlotRef; type: SlotType.Hold | SlotType.Ticket }[] = [];
    for (let slot = 1; slot < this.capacity; slot++) {
      const w = this.state(slot);
      const type = w & 15;
      if (type !== SlotType.Hold && type !== SlotType.Ticket) continue;
      const b = slot * SLOT_I32;
      const mine = this.i32[b + S_THREAD] === thread + 1 || (type === SlotType.Ticket && this.i32[b + S_TARGET] === thread + 1);
      if (mine) out.push({ ref: { slot, generation: w >>> 4 }, type });
    }
    return out;
  }

  /** Process-wide counts: live entries, handles not imported yet, and holds. */
  counts(): { entries: number; tickets: number; holds: number } {
    return {
      entries: Atomics.load(this.i32, H_ENTRIES),
      tickets: Atomics.load(this.i32, H_TICKETS),
      holds: Atomics.load(this.i32, H_HOLDS),
    };
  }
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v !== 'object') return typeof v;
  return Object.prototype.toString.call(v).slice(8, -1);
}
