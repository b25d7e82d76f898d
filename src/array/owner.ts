/**
 * `ImportOwner`: the one owner of an imported `ArrowArray` (or
 * `ArrowDeviceArray`) tree (docs/architecture.md#one-owner-per-import; one
 * owner per import, after arrow-rs). Every importer (arrays, record batches, tables,
 * device arrays, stream batches, async tasks) moves the foreign struct into
 * one of these and builds its JS objects over it; nothing else calls the
 * producer's `release`.
 *
 * It releases exactly once, whichever comes first:
 * - `release()`: deterministic, and safe at any time, also after values were
 *   read. Released means unreadable: every `ArrayBuffer` this owner handed
 *   out over producer memory is detached first (`ArrayBuffer.prototype.transfer`,
 *   zero-copy), so an escaped typed array reads as empty, never as freed
 *   memory; our own objects (the lazy arrow-js `Data`, `ArrayView`s, device
 *   arrays) check `released` and throw an error saying why.
 * - the garbage collector, as a last resort: every zero-copy view, and every
 *   object that can still make views (a holder), is registered with a
 *   FinalizationRegistry; when the last one has been collected, no JS object
 *   can reach the memory any more and the producer is released.
 *
 * WebAssembly linear memory cannot be detached (all views share the module's
 * one buffer): after release our objects throw, but a typed array that
 * escaped still reads whatever the module has put there since.
 *
 * The struct is moved into memory we own at import (CDataInterface.rst,
 * "Moving an array": bitwise copy, then the source marked released), so the
 * caller may free or reuse its struct at once.
 */
import { liveCounters } from '../memory/accounting.js';
import { markReleased, releaseOffset } from '../memory/cstruct.js';
import { callRelease } from '../memory/registry.js';
import type { Memory, Ptr } from '../memory/memory.js';
import type { SchemaNode } from '../schema/node.js';
import { ptrAt, rawOf, readField, stage, staged, type Addr, type Arena } from '../memory/raw.js';
import { access } from '../abi/accessors.js';
import { ArrowDeviceError } from '../errors.js';

const viewRegistry = new FinalizationRegistry<ImportOwner>((owner) => owner.viewCollected());
const holderRegistry = new FinalizationRegistry<ImportOwner>((owner) => owner.holderCollected());

/**
 * Holders not registered with `holderRegistry` yet (see `hold`), with their
 * owners: registered together at the next microtask, or at once when many
 * wait. An import released before then (a batch used and released in one
 * synchronous step, as a stream reader or `using` does) is never registered:
 * registration and unregistration cost more than the rest of a small import.
 * The list holds the holders strongly until then, so the collector cannot
 * miss one (and cannot run a finalizer inside a synchronous loop anyway).
 * Release takes an import off the list at once (`leavePending`): a released
 * import is never kept alive by it. It pays on `bench:overhead`
 * `1 row x 1 int32 column` (into one struct, released), in either order; imports
 * left to the collector are faster without it (docs/performance.md).
 */
let pendingOwners: (ImportOwner | null)[] = [];
let pendingHolders: (object | null)[] = [];
let flushQueued = false;
const MAX_PENDING = 4096;

/** Holders waiting for `registerPending` (internal: the tests' view of the list). */
export function pendingHolderCount(): number {
  let n = 0;
  for (const h of pendingHolders) if (h !== null) n++;
  return n;
}

function registerPending(): void {
  flushQueued = false;
  const owners = pendingOwners;
  const holders = pendingHolders;
  pendingOwners = [];
  pendingHolders = [];
  for (let i = 0; i < owners.length; i++) {
    const o = owners[i]!;
    // null: released while it waited (leavePending). Released and still here: an owner that waited
    // with two holders leaves with its last one only.
    if (o === null) continue;
    o.pendingAt = -1;
    if (o.isReleased) continue;
    holderRegistry.register(holders[i]!, o, o);
    o.registered = true;
  }
}

/** The struct an owner holds: an `ArrowArray`, or an `ArrowDeviceArray` (whose array sits at offset 0). */
export type OwnedStruct = 'ArrowArray' | 'ArrowDeviceArray';

/** `ArrayBuffer.prototype.transfer` (ES2024; Node 22+ and current browsers). */
type Transferable = ArrayBuffer & { transfer?(n?: number): ArrayBuffer; readonly detached?: boolean };

/** Why an import is released, for the error a later read gets. */
export type ReleaseReason =
  | 'released'
  | 'collected'
  | 'stream-advanced'
  | 'stream-ended'
  | 'moved'
  | 'failed';

const REASONS: Record<ReleaseReason, string> = {
  released: 'its release() (or [Symbol.dispose]) was called',
  collected: 'it was garbage collected',
  'stream-advanced':
    'the stream reader released it when its next() was called again (a reader keeps one batch alive at a time; ' +
    'use reader.keep(batch), the { keep: true } option or reader.toTable() to keep batches)',
  'stream-ended':
    'the stream reader released it when the reading ended (a reader keeps one batch alive at a time; ' +
    'use reader.keep(batch), the { keep: true } option or reader.toTable() to keep batches)',
  moved: 'it was moved to another consumer',
  failed: 'its import failed',
};

/** The reference an import shared between threads holds (src/share/core.ts). */
export interface SharedLink {
  /** Drops the reference; the last one, in any thread, calls the producer's release. Idempotent. */
  drop(): void;
}

export class ImportOwner {
  /** Zero-copy views made and not collected yet. */
  private views = 0;
  /** Objects that can still make views (see `hold`) and are not collected yet. */
  private holdersLive = 0;
  /** Whether a holder was registered with `holderRegistry` (`registerPending`), so release must unregister. */
  registered = false;
  /** Where the owner's last holder waits in the pending list (`hold`), or -1. */
  pendingAt = -1;
  private reason: ReleaseReason | null = null;
  /** Set while the import is being built, so views collected early do not release it. */
  private building = true;
  /** Every native ArrayBuffer handed out, weakly: detached at release. */
  private buffers: WeakRef<Transferable>[] | null = null;
  /**
   * The schema the struct was read by (set by the import path): what a
   * hand-on to another consumer (exchange protocol) exports with the moved
   * struct, faithful also when `expand` changed the arrow-js form.
   */
  schema: SchemaNode | null = null;

  /**
   * Our copy of the struct, as a number (src/memory/raw.ts). Set again once
   * when the import is first shared with other threads: the struct then
   * moves into process memory (src/share/core.ts).
   */
  addr: Addr;
  /**
   * Set while the struct is shared between threads (src/share): this owner's
   * reference to it. Release then drops the reference, and only the last
   * holder, in whichever thread, calls the producer's release.
   */
  shared: SharedLink | null = null;

  /** Adopts `ptr`, a struct of `kind` in our own allocation (`mem.alloc`): the owner frees it. */
  constructor(
    readonly mem: Memory,
    ptr: Ptr | Addr,
    readonly kind: OwnedStruct = 'ArrowArray',
  ) {
    this.addr = Number(ptr);
    liveCounters.liveImports++;
  }

  /** The producer's release callback, from the moved bytes; -1 when adopted (read at release). */
  private releaseFn: Addr = -1;

  /**
   * Moves the struct at `src` into memory we own and returns its owner.
   * `from`/`at`: where the caller just staged the struct's bytes (consume),
   * so they are not read again.
   */
  static move(mem: Memory, src: Ptr | Addr, kind: OwnedStruct = 'ArrowArray', from?: Arena, at = 0): ImportOwner {
    const size = mem.layouts[kind].size;
    const raw = rawOf(mem);
    const s = Number(src);
    // One allocation per import: a pool of struct slots for native memory was measured and did not
    // pay (docs/performance.md).
    const dst = Number(mem.alloc(size));
    // The allocation may have grown a wasm memory, detaching bytes staged in it in place (a
    // detached view has no bytes): then, as when nothing was staged, stage the struct now.
    if (from === undefined || from.u8.byteLength === 0) {
      try {
        at = stage(raw, s, size);
      } catch (e) {
        mem.free(BigInt(dst));
        throw e;
      }
      from = staged;
    }
    const relAt = releaseOffset(mem, kind);
    // Read before the source is marked released below: the staged bytes may be the source itself.
    const rel = ptrAt(from.dv, at + relAt, mem.target.pointerSize === 8);
    try {
      raw.writeFrom(dst, from, at, size);
      // Marked released (CDataInterface.rst, "Moving an array"): the caller may free its struct now.
      raw.writeWord(s + relAt, 0);
    } catch (e) {
      mem.free(BigInt(dst));
      throw e;
    }
    // The release callback is called later, maybe after the producer's library handle is gone.
    mem.keepLoaded?.(rel);
    const owner = new ImportOwner(mem, dst, kind);
    owner.releaseFn = rel;
    return owner;
  }

  /** Our copy of the struct. */
  get ptr(): Ptr {
    return BigInt(this.addr);
  }

  /** The `ArrowArray` the owner holds (inside the device array for `ArrowDeviceArray`), as a number. */
  get arrayAddr(): Addr {
    return this.kind === 'ArrowArray' ? this.addr : this.addr + access(this.mem.target).ArrowDeviceArray.array.offset;
  }

  /** The `ArrowArray` the owner holds (inside the device array for `ArrowDeviceArray`). */
  get arrayPtr(): Ptr {
    return BigInt(this.arrayAddr);
  }

  get isReleased(): boolean {
    return this.reason !== null;
  }

  /** Why the import was released, as a sentence fragment; `null` while live. */
  get releasedBecause(): string | null {
    return this.reason === null ? null : REASONS[this.reason];
  }

  /**
   * Throws the error that a read of a released import gets; `what` names
   * what was read. An import that never held producer memory (every buffer
   * empty or NULL, or copied) and was released when it was built reads
   * nothing of the producer's: it stays readable.
   */
  check(path: string, what = 'read'): void {
    if (this.reason !== null && (this.everHeld || this.reason !== 'collected')) throw releasedError(path, what, this.reason);
  }

  /** Whether a view or a holder was ever registered (the import reached producer memory). */
  private everHeld = false;

  /** A zero-copy view of producer memory that keeps the producer's data alive. */
  view(addr: Addr, byteLength: number, path = ''): Uint8Array {
    this.check(path, 'a buffer read');
    const v = this.mem.view(BigInt(addr), byteLength);
    if (byteLength > 0) {
      this.views++;
      this.everHeld = true;
      // A native view has an ArrayBuffer of its own, kept alive by every typed array made over
      // it. A wasm memory's views all share the memory's ArrayBuffer, which lives as long as
      // the module: there track the view itself; the arrow-js Data built over an import hold
      // the owner, so typed arrays they make stay covered.
      if (this.mem.viewsShareBuffer) {
        viewRegistry.register(v, this, this);
      } else {
        viewRegistry.register(v.buffer, this, this);
        (this.buffers ??= []).push(new WeakRef(v.buffer as Transferable));
      }
    }
    return v;
  }

  /**
   * Keeps the producer's memory alive while `holder` is reachable: an object
   * that can still create views (the lazy buffers of an import).
   */
  hold(holder: object): void {
    this.everHeld = true;
    this.holdersLive++;
    this.pendingAt = pendingOwners.length;
    pendingOwners.push(this);
    pendingHolders.push(holder);
    if (pendingOwners.length >= MAX_PENDING) {
      registerPending();
    } else if (!flushQueued) {
      flushQueued = true;
      queueMicrotask(registerPending);
    }
  }

  /** Called by the FinalizationRegistry. */
  viewCollected(): void {
    this.views--;
    this.releaseIfUnreachable();
  }

  /** Called by the FinalizationRegistry. */
  holderCollected(): void {
    this.holdersLive--;
    this.releaseIfUnreachable();
  }

  private releaseIfUnreachable(): void {
    if (this.views <= 0 && this.holdersLive <= 0 && !this.building && this.reason === null) {
      try {
        this.release('collected');
      } catch {
        // A finalizer has nobody to report to.
      }
    }
  }

  /**
   * Marks the import complete. Without live views or holders (an empty
   * array, or a copy), the producer is released at once.
   */
  done(): void {
    this.building = false;
    this.releaseIfUnreachable();
  }

  /**
   * Releases now, exactly once (later calls do nothing): detaches every
   * view handed out, calls the producer's release and frees our copy of the
   * struct.
   */
  release(reason: ReleaseReason = 'released'): void {
    if (this.reason !== null) return;
    this.reason = reason;
    this.detachAll();
    if (this.shared !== null) {
      // This thread's views are detached; the struct and the producer's memory are the share's.
      try {
        this.shared.drop();
      } finally {
        liveCounters.liveImports--;
      }
      return;
    }
    try {
      // The struct is ours and freed right after: no need to mark it released. Its release
      // callback is known from the move (nobody else writes our copy), else read now.
      const rel = this.releaseFn >= 0 ? this.releaseFn : readField(this.mem, access(this.mem.target).ArrowArray.release, this.arrayAddr);
      if (rel !== 0) callRelease(this.mem, rel, this.arrayAddr);
    } finally {
      this.freeStruct();
      liveCounters.liveImports--;
      liveCounters.releasedImports++;
    }
  }

  private freeStruct(): void {
    this.mem.free(BigInt(this.addr));
  }

  /**
   * Moves the struct, unchanged, into `into` (a struct of the same kind the
   * next consumer allocated): the consumer now owns the producer's memory,
   * so every view is detached as at release, and the producer's `release`
   * is not called by us.
   */
  moveTo(into: Ptr): void {
    this.check('', 'a move');
    if (this.shared !== null) {
      throw new ArrowDeviceError('unsupported', '', 'a move of a shared import: other threads may still read it (release this thread\'s import, or hand on a copy)');
    }
    this.reason = 'moved';
    this.detachAll();
    this.mem.copyIn(into, this.mem.read(this.ptr, this.mem.layouts[this.kind].size));
    markReleased(this.mem, 'ArrowArray', this.arrayPtr);
    this.freeStruct();
    liveCounters.liveImports--;
  }

  /**
   * Takes the owner's holder off the pending list at release, rather than
   * leaving it there, and so alive, until the next microtask: a synchronous
   * loop of imports would keep up to 4,096 released ones alive, which every
   * minor collection copies, promoting those it copies twice (issue 13). The
   * last entry is removed (a loop that imports and releases keeps the list
   * empty); another is cleared in place (`registerPending` skips it).
   */
  private leavePending(): void {
    const at = this.pendingAt;
    if (at < 0 || pendingOwners[at] !== this) return;
    this.pendingAt = -1;
    this.holdersLive--;
    if (at === pendingOwners.length - 1) {
      pendingOwners.pop();
      pendingHolders.pop();
    } else {
      pendingOwners[at] = null;
      pendingHolders[at] = null;
    }
  }

  private detachAll(): void {
    // Unregistering costs a search of the registry's cells: only where something was registered.
    if (this.views > 0 || this.buffers !== null) viewRegistry.unregister(this);
    if (this.holdersLive > 0) {
      this.leavePending();
      // One never registered (released before the microtask, the common case) needs no unregistering.
      if (this.registered) holderRegistry.unregister(this);
    }
    const bufs = this.buffers;
    this.buffers = null;
    if (!bufs) return;
    for (const ref of bufs) {
      const b = ref.deref();
      // transfer(0) detaches the buffer and hands its (foreign) bytes to nobody: zero-copy.
      if (b && b.detached !== true && b.transfer) b.transfer(0);
    }
  }
}

/** The error a read of a released import gets. */
function releasedError(path: string, what: string, reason: ReleaseReason): ArrowDeviceError {
  return new ArrowDeviceError('released', path, `${what} of a released import: ${REASONS[reason]}`);
}
