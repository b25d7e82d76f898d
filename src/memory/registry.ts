/**
 * Callbacks for exported structs. One C callback is registered per signature
 * (koffi allows 8192 registrations in all), and it dispatches on the
 * struct's `private_data`, which holds a small integer id into a table of
 * JS records (docs/architecture.md#exports-pin-their-buffers). The record is what keeps the
 * exported JS buffers reachable until the consumer calls `release`.
 */
import type { CValue, Memory, Ptr, Signature } from './memory.js';
import type { Addr } from './raw.js';

/**
 * A table of live records keyed by the id we store in `private_data`.
 *
 * Records live in an array of slots, not a Map: a program that exports
 * batches faster than their consumers release them (imports are released
 * by garbage collection) holds hundreds of thousands of records, and a Map
 * that size costs close to a microsecond an operation; an array slot costs
 * a few nanoseconds. An id is a slot and a generation (`gen << SLOT_BITS |
 * slot`, never 0, always below 2^31): a freed slot is reused only after
 * every other free slot (first in, first out), with its generation
 * advanced, so a stale id (a second `release` of the same struct) finds
 * nothing rather than another record.
 *
 * The generation has 8 bits: with few slots free, one slot would come back
 * with its old generation 256 exports later, and a stale second release
 * (a consumer's bug, which our callbacks must ignore) would release the
 * live export holding it. So a slot is reused only while MIN_FREE slots
 * are free; below that the table grows. A slot then comes back every
 * MIN_FREE exports at least, and a stale id matches again only after
 * 256 x MIN_FREE (16.7 million) more exports.
 */
export class HandleTable<T> {
  private static readonly SLOT_BITS = 23;
  private static readonly SLOT_MASK = (1 << HandleTable.SLOT_BITS) - 1;
  private static readonly GEN_MASK = (1 << (31 - HandleTable.SLOT_BITS)) - 1;
  /** Free slots kept before one is reused (see the class comment). */
  static readonly MIN_FREE = 1 << 16;
  /** Slot 0 is never used, so no id is 0. */
  private readonly items: (T | undefined)[] = [undefined];
  private readonly gens: number[] = [0];
  /** Free slots, oldest first from `head`. */
  private free: number[] = [];
  private head = 0;
  private live = 0;

  add(item: T): number {
    let slot: number;
    const free = this.free.length - this.head;
    // Reuse while enough are free, or when the table cannot grow.
    if (free > HandleTable.MIN_FREE || (free > 0 && this.items.length > HandleTable.SLOT_MASK)) {
      slot = this.free[this.head++]!;
      if (this.head > 1024 && this.head * 2 > this.free.length) {
        this.free = this.free.slice(this.head);
        this.head = 0;
      }
    } else {
      slot = this.items.length;
      if (slot > HandleTable.SLOT_MASK) throw new Error(`more than ${HandleTable.SLOT_MASK} live exported structs`);
      this.items.push(undefined);
      this.gens.push(0);
    }
    this.items[slot] = item;
    this.live++;
    return ((this.gens[slot]! << HandleTable.SLOT_BITS) | slot) >>> 0;
  }

  /** The slot of a live `id`, or -1. */
  private slotOf(id: number): number {
    if (!(id > 0 && id <= 0x7fffffff) || !Number.isInteger(id)) return -1;
    const slot = id & HandleTable.SLOT_MASK;
    return this.items[slot] !== undefined && this.gens[slot] === id >>> HandleTable.SLOT_BITS ? slot : -1;
  }

  get(id: number): T | undefined {
    const slot = this.slotOf(id);
    return slot < 0 ? undefined : this.items[slot];
  }

  take(id: number): T | undefined {
    const slot = this.slotOf(id);
    if (slot < 0) return undefined;
    const v = this.items[slot];
    this.items[slot] = undefined;
    this.gens[slot] = (this.gens[slot]! + 1) & HandleTable.GEN_MASK;
    this.free.push(slot);
    this.live--;
    return v;
  }

  get size(): number {
    return this.live;
  }
}

type CallbackImpl = (mem: Memory, ...args: CValue[]) => CValue | void;
/** A callback's implementation for calls from our own code with number addresses (see `callRelease`). */
type DirectImpl = (mem: Memory, arg: Addr) => void;

/** Every callback kind the library defines, by key. */
const defined = new Map<string, { sig: Signature; impl: CallbackImpl; direct?: DirectImpl }>();

/**
 * One registered C callback per (memory, kind). Every kind is registered
 * for a memory the first time any is needed (and `nativeMemory()` does it as
 * soon as it is created), not lazily one by one: koffi 3.3.4 cannot call a
 * callback that was registered while the JS thread was inside another koffi
 * callback (every call then throws "Maximum call stack size exceeded"), and
 * the first export of a kind may well happen inside a callback (a stream's
 * `get_next`, an async task's `extract_data`).
 */
export class CallbackCache {
  private readonly ptrs = new WeakMap<Memory, Map<string, Ptr>>();
  /** Per memory, the kinds with a direct implementation, by their C pointer as a number. */
  private readonly directs = new WeakMap<Memory, Map<Addr, DirectImpl>>();

  /** Registers, for `mem`, every defined kind not registered yet. */
  registerAll(mem: Memory): Map<string, Ptr> {
    let m = this.ptrs.get(mem);
    if (!m) {
      m = new Map();
      this.ptrs.set(mem, m);
    }
    let d = this.directs.get(mem);
    if (!d) {
      d = new Map();
      this.directs.set(mem, d);
    }
    for (const [key, { sig, impl, direct }] of defined) {
      if (m.has(key)) continue;
      const p = mem.registerCallback(sig, (...args: CValue[]) => impl(mem, ...args));
      m.set(key, p);
      if (direct) d.set(Number(p), direct);
    }
    return m;
  }

  /** The direct implementation of our callback at `fn` on `mem`, if it is one that has one. */
  direct(mem: Memory, fn: Addr): DirectImpl | undefined {
    return this.directs.get(mem)?.get(fn);
  }

  /** The C pointer of callback kind `key` on `mem`. */
  ptr(mem: Memory, key: string): Ptr {
    const p = this.ptrs.get(mem)?.get(key) ?? this.registerAll(mem).get(key);
    if (p === undefined) throw new Error(`callback kind "${key}" is not defined`);
    return p;
  }
}

/**
 * Defines a callback kind: `impl` receives the memory and the C arguments.
 * Call at module load (top level), so the kind is registered with the rest
 * before any callback runs. Returns the function giving its C pointer.
 */
export function defineCallback(key: string, sig: Signature, impl: CallbackImpl, direct?: DirectImpl): (mem: Memory) => Ptr {
  if (defined.has(key)) throw new Error(`callback kind "${key}" is defined twice`);
  defined.set(key, { sig, impl, direct });
  return (mem) => callbacks.ptr(mem, key);
}

export const callbacks = new CallbackCache();

/** `void release(struct X*)`, the signature of every struct's release callback. */
export const RELEASE_SIG = { name: 'release', result: 'void', params: ['pointer'] } as const satisfies Signature;

/**
 * Calls the release callback `fn` on the struct at `arg`: our own release
 * callbacks run directly in JS with number addresses (the common case of
 * an import of our own export: no trip through the FFI, no bigint), any
 * other through the memory.
 */
export function callRelease(mem: Memory, fn: Addr, arg: Addr): void {
  const d = callbacks.direct(mem, fn);
  if (d !== undefined) d(mem, arg);
  else mem.call(BigInt(fn), RELEASE_SIG, BigInt(arg));
}
