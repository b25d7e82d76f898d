/**
 * `ImportOwner`: the one owner of an imported `ArrowArray` tree (STYLE.md,
 * "one owner per import", after arrow-rs). Every zero-copy view made of the
 * producer's memory is registered with a FinalizationRegistry; when the last
 * one has been collected, no JS object can reach the memory any more and the
 * producer's `release` runs, exactly once.
 *
 * The struct itself is moved into memory we own at import time
 * (CDataInterface.rst, "Moving an array": bitwise copy, then mark the source
 * released), so the caller may free or reuse its struct at once.
 */
import { liveCounters } from '../memory/accounting.js';
import type { Memory, Ptr } from '../memory/memory.js';
import { ArrowDeviceError } from '../errors.js';

const viewRegistry = new FinalizationRegistry<ImportOwner>((owner) => owner.viewCollected());
const holderRegistry = new FinalizationRegistry<ImportOwner>((owner) => owner.holderCollected());

/** The layout name of the struct an owner holds: the release callback is at the same place in both. */
export type OwnedStruct = 'ArrowArray' | 'ArrowDeviceArray';

export class ImportOwner {
  /** Zero-copy views made and not collected yet. */
  private views = 0;
  /** Objects that can still make views (see `hold`) and are not collected yet. */
  private holdersLive = 0;
  private released = false;
  /** Set while the import is being built, so views collected early do not release it. */
  private building = true;

  /** `ptr` is our own copy of the struct, allocated with `mem.alloc`; the owner frees it. */
  constructor(
    readonly mem: Memory,
    readonly ptr: Ptr,
  ) {
    liveCounters.liveImports++;
  }

  /** Moves the struct at `src` into a new allocation and returns its owner. */
  static move(mem: Memory, src: Ptr, struct: OwnedStruct = 'ArrowArray'): ImportOwner {
    const size = mem.layouts[struct].size;
    const ptr = mem.alloc(size);
    mem.copyIn(ptr, mem.read(src, size));
    // Mark the source released: its release is now ours to call.
    mem.writePtr(src + BigInt(mem.layouts.ArrowArray.offsets.release!), 0n);
    return new ImportOwner(mem, ptr);
  }

  /** A zero-copy view of producer memory that keeps the producer's data alive. */
  view(addr: Ptr, byteLength: number): Uint8Array {
    if (this.released) {
      throw new ArrowDeviceError('released', '', 'the import was disposed: its buffers can no longer be read');
    }
    const v = this.mem.view(addr, byteLength);
    if (byteLength > 0) {
      this.views++;
      // A native view has an ArrayBuffer of its own, kept alive by every typed array made over
      // it. A wasm memory's views all share the memory's ArrayBuffer, which lives as long as
      // the module: there track the view itself; the arrow-js Data built over an import hold
      // the import's keep-alive token (see LazyData), so typed arrays they make stay covered.
      viewRegistry.register(this.mem.viewsShareBuffer ? v : v.buffer, this);
    }
    return v;
  }

  /**
   * Keeps the producer's memory alive while `holder` is reachable: an object
   * that can still create views (the lazy buffers of an ArrayView).
   */
  hold(holder: object): void {
    this.holdersLive++;
    this.holders.add(holder);
    holderRegistry.register(holder, this);
  }

  /** Whether `holder` is already held (a WeakSet: the owner must not keep it alive). */
  holds(holder: object): boolean {
    return this.holders.has(holder);
  }

  private readonly holders = new WeakSet<object>();

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
    if (this.views === 0 && this.holdersLive === 0 && !this.building) this.release();
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
   * Explicit early release, safe: refused while any zero-copy view of the
   * producer's memory may still be reachable (JS cannot detach a view of
   * foreign memory, so releasing then would leave it reading freed memory).
   * Buffers never viewed cannot be viewed afterwards: reading them throws.
   */
  dispose(): void {
    if (this.released) return;
    if (this.views > 0) {
      throw new ArrowDeviceError(
        'invalid',
        '',
        `${this.views} zero-copy view${this.views === 1 ? '' : 's'} of this import may still be reachable: ` +
          'drop them and let garbage collection run, or import with { copy: true }',
      );
    }
    this.release();
  }

  get isReleased(): boolean {
    return this.released;
  }

  /** Calls the producer's release (once) and frees our copy of the struct. */
  release(): void {
    if (this.released) return;
    this.released = true;
    const relOff = BigInt(this.mem.layouts.ArrowArray.offsets.release!);
    try {
      const rel = this.mem.readPtr(this.ptr + relOff);
      if (rel !== 0n) this.mem.call(rel, { name: 'release', result: 'void', params: ['pointer'] }, this.ptr);
    } finally {
      this.mem.free(this.ptr);
      liveCounters.liveImports--;
      liveCounters.releasedImports++;
    }
  }
}
