/**
 * Callbacks for exported structs. One C callback is registered per signature
 * (koffi allows 8192 registrations in all), and it dispatches on the
 * struct's `private_data`, which holds a small integer id into a table of
 * JS records (DESIGN.md, "Export pins"). The record is what keeps the
 * exported JS buffers reachable until the consumer calls `release`.
 */
import type { CValue, Memory, Ptr, Signature } from './memory.js';

/** A table of live records keyed by the id we store in `private_data`. */
export class HandleTable<T> {
  private next = 1;
  private readonly items = new Map<number, T>();

  add(item: T): number {
    // Ids are pointer-sized on the C side; stay well inside 2^31 by reusing freed ones lazily.
    const id = this.next++;
    if (this.next > 0x7fffffff) this.next = 1;
    this.items.set(id, item);
    return id;
  }

  get(id: number): T | undefined {
    return this.items.get(id);
  }

  take(id: number): T | undefined {
    const v = this.items.get(id);
    if (v !== undefined) this.items.delete(id);
    return v;
  }

  get size(): number {
    return this.items.size;
  }
}

/** One registered C callback per (memory, signature), created on first use. */
export class CallbackCache {
  private readonly ptrs = new WeakMap<Memory, Map<string, Ptr>>();

  get(mem: Memory, key: string, sig: Signature, fn: (...args: CValue[]) => CValue | void): Ptr {
    let m = this.ptrs.get(mem);
    if (!m) {
      m = new Map();
      this.ptrs.set(mem, m);
    }
    let p = m.get(key);
    if (p === undefined) {
      p = mem.registerCallback(sig, fn);
      m.set(key, p);
    }
    return p;
  }
}

export const callbacks = new CallbackCache();

/** `void release(struct X*)`, the signature of every struct's release callback. */
export const RELEASE_SIG = { name: 'release', result: 'void', params: ['pointer'] } as const satisfies Signature;
