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

type CallbackImpl = (mem: Memory, ...args: CValue[]) => CValue | void;

/** Every callback kind the library defines, by key. */
const defined = new Map<string, { sig: Signature; impl: CallbackImpl }>();

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

  /** Registers, for `mem`, every defined kind not registered yet. */
  registerAll(mem: Memory): Map<string, Ptr> {
    let m = this.ptrs.get(mem);
    if (!m) {
      m = new Map();
      this.ptrs.set(mem, m);
    }
    for (const [key, { sig, impl }] of defined) {
      if (!m.has(key)) m.set(key, mem.registerCallback(sig, (...args: CValue[]) => impl(mem, ...args)));
    }
    return m;
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
export function defineCallback(key: string, sig: Signature, impl: CallbackImpl): (mem: Memory) => Ptr {
  if (defined.has(key)) throw new Error(`callback kind "${key}" is defined twice`);
  defined.set(key, { sig, impl });
  return (mem) => callbacks.ptr(mem, key);
}

export const callbacks = new CallbackCache();

/** `void release(struct X*)`, the signature of every struct's release callback. */
export const RELEASE_SIG = { name: 'release', result: 'void', params: ['pointer'] } as const satisfies Signature;
