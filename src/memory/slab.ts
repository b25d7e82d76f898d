/**
 * Small native allocations carved from JS `ArrayBuffer`s ("slabs").
 *
 * An `ArrayBuffer`'s bytes live off the V8 heap at an address that never
 * changes (V8 does not move backing stores), so native code can read and
 * write them through that address like any other memory, and JS can read and
 * write them through a `DataView` without a call through the FFI. The
 * library's own structs are small (72 to 128 bytes; an exported tree a few
 * hundred), allocated and freed once per batch or more: from slabs, an
 * allocation is a free-list pop, a free is a push, and reading or writing
 * one of our structs (our copy of an import, an exported tree, a struct a
 * consumer's producer filled in memory we allocated) is a JS access. Larger
 * allocations go to the C allocator.
 *
 * The slabs stay reachable from this module for the life of the process, so
 * their bytes stay valid for any native code holding an address in them.
 * Memory given back is kept for reuse by size class (16 bytes apart) and not
 * returned to the system: the memory held is that of the most small
 * allocations live at once.
 */
import type { Arena } from './raw.js';

/** Bytes of one slab. */
export const SLAB_BYTES = 1 << 20;
/** The largest allocation served from a slab; larger ones go to the C allocator. */
export const SLAB_MAX = 8 * 1024;
const GRAIN = 16;

/** One slab: an ArrayBuffer and the native address of its first usable byte. */
export interface Slab extends Arena {
  /** One past the last usable byte's address. */
  readonly end: number;
  /**
   * The size class of the live block starting at each 16-byte grain, 0 where
   * none starts: how `free` knows a block's size, and refuses an address it
   * never handed out, or handed out and got back (2 bytes per 16).
   */
  readonly classes: Uint16Array;
}

export class SlabHeap {
  /** Every slab, by the megabyte its first byte is in (`Math.floor(addr / SLAB_BYTES)`). */
  private readonly byStart = new Map<number, Slab>();
  /** The slab last found, tried first. */
  private last: Slab | null = null;
  /** The slab new blocks are cut from, and where its free part starts. */
  private cur: Slab | null = null;
  private bump = 0;
  /** Blocks given back, by size class (the block's size / 16). */
  private readonly freeLists: number[][] = [];

  constructor(
    /** The native address of a typed array's first byte (koffi.address). */
    private readonly addressOf: (u8: Uint8Array) => number,
  ) {}

  /** The size class of an allocation of `size` bytes (0 < size <= SLAB_MAX). */
  static classOf(size: number): number {
    return Math.ceil(Math.max(size, 1) / GRAIN);
  }

  /** A zeroed block of size class `cls` (see `classOf`); its address. */
  alloc(cls: number): number {
    const list = this.freeLists[cls];
    let a: number;
    let s: Slab;
    if (list !== undefined && list.length > 0) {
      a = list.pop()!; // zeroed when given back
      s = this.find(a, 1)!;
    } else {
      const size = cls * GRAIN;
      s = this.cur !== null && this.bump + size <= this.cur.end ? this.cur : this.newSlab();
      a = this.bump;
      this.bump += size;
    }
    s.classes[(a - s.addr) / GRAIN] = cls;
    return a;
  }

  /**
   * The size class of the live block at `addr` if it is in a slab: -1 when
   * it is not in one (another allocator's), 0 when no live block starts
   * there (never handed out, or given back).
   */
  classAt(addr: number): number {
    const s = this.find(addr, 1);
    if (s === null) return -1;
    const g = addr - s.addr;
    return g % GRAIN === 0 ? s.classes[g / GRAIN]! : 0;
  }

  /** Gives back the live block at `addr` (see `classAt`), zeroed for the next allocation. */
  free(addr: number): void {
    const s = this.find(addr, 1)!;
    const g = (addr - s.addr) / GRAIN;
    const cls = s.classes[g]!;
    s.classes[g] = 0;
    s.u8.fill(0, addr - s.addr, addr - s.addr + cls * GRAIN);
    (this.freeLists[cls] ??= []).push(addr);
  }

  /** The slab holding the `n` bytes at `addr`, or null when they are not all in one. */
  find(addr: number, n: number): Slab | null {
    const l = this.last;
    if (l !== null && addr >= l.addr && addr + n <= l.end) return l;
    const k = Math.floor(addr / SLAB_BYTES);
    let s = this.byStart.get(k);
    if (s === undefined || addr < s.addr) s = this.byStart.get(k - 1);
    if (s !== undefined && addr >= s.addr && addr + n <= s.end) {
      this.last = s;
      return s;
    }
    return null;
  }

  private newSlab(): Slab {
    const u8 = new Uint8Array(SLAB_BYTES);
    const raw = this.addressOf(u8);
    // Blocks 16-aligned in the address space, as the C allocator's are.
    const skip = (GRAIN - (raw % GRAIN)) % GRAIN;
    const view = u8.subarray(skip);
    const s: Slab = {
      u8: view,
      dv: new DataView(view.buffer, view.byteOffset, view.byteLength),
      addr: raw + skip,
      next: 0,
      end: raw + SLAB_BYTES,
      classes: new Uint16Array(SLAB_BYTES / GRAIN),
    };
    this.byStart.set(Math.floor(s.addr / SLAB_BYTES), s);
    this.cur = s;
    this.bump = s.addr;
    return s;
  }
}
