/**
 * Owned handles (PROTOCOL.md): both sides of the exchange protocol at the
 * level of struct memory.
 *
 * Producer side, `ExportHandle`: a struct we hand out in an allocation of
 * ours. Its dispose releases the struct if the consumer did not move it out,
 * then frees our allocation (the PyCapsule destructor,
 * PyCapsuleInterface.rst, "Lifetime Semantics"); a second dispose does
 * nothing. `released` resolves when the struct's `release` has run, whoever
 * called it: the consumer, on its moved copy, or our dispose.
 *
 * To know when that is for any struct (our exports, and a foreign producer's
 * struct we pass on: an imported batch, stream or device array moved onward)
 * the handle interposes on the root struct's release: at adoption its
 * `release` is saved and replaced by one of our callbacks; the callback,
 * called on the struct wherever the consumer moved it, finds the saved
 * release, puts it back, calls it (exactly once: the record is taken) and
 * resolves `released`. How the callback finds its record: a schema's or an
 * array's `private_data` is read by its release only (CDataInterface.rst),
 * so it is replaced by our id too, and put back before the release runs; a
 * stream's `private_data` is read by all its callbacks, so it stays, and the
 * record is the one whose `private_data` and three other callbacks are the
 * struct's (two live streams alike in all four are the same producer state:
 * either record releases it the same way). Children and everything the
 * struct points at are untouched, and the struct the producer's release sees
 * is bitwise the one it wrote (at a new address, as a move allows).
 * Consequence: the root's release runs JS, so a consumer that releases from
 * another thread needs the JS thread free, the rule of every export of this
 * library (docs/native.md#native-calls-that-call-back-from-other-threads).
 *
 * Consumer side, `takeHandle`: the checks a handle from any producer gets
 * (an object, a bigint address, a disposer, a known `memory`) and the
 * `Memory` its struct is read through.
 */
import type { ArrowHandle, ArrowWasmMemory } from '../abi/protocol.js';
import { ArrowDeviceError, invalid } from '../errors.js';
import { liveCounters } from './accounting.js';
import { releaseStruct, type CStructKind } from './cstruct.js';
import { access } from '../abi/accessors.js';
import type { Memory, Ptr } from './memory.js';
import { nativeMemory } from './native.js';
import { defineCallback, HandleTable, RELEASE_SIG } from './registry.js';

/**
 * What handles need of WebAssembly memory, given by src/memory/wasm.ts when it loads, so that code
 * that only uses native memory (`arrow-device/adbc`) loads no wasm code: before it loads no wasm
 * memory exists, and a handle a producer gives with a wasm memory is refused as `unsupported`.
 */
export interface WasmHandles {
  /** A wasm memory's descriptor for handles; undefined for any other memory. */
  handleMemory(m: Memory): ArrowWasmMemory | undefined;
  /** The memory a producer's descriptor names. */
  memoryOf(d: ArrowWasmMemory, path: string): Memory;
}

let wasm: WasmHandles | undefined;

/** Called once by src/memory/wasm.ts. */
export function setWasmHandles(w: WasmHandles): void {
  wasm = w;
}

/** The structs that carry `release` and `private_data` themselves (a device array's are its array's). */
type Interposable = 'ArrowSchema' | 'ArrowArray' | 'ArrowArrayStream' | 'ArrowDeviceArrayStream';

interface Interposed {
  readonly kind: Interposable;
  /** The struct's own `release` and `private_data`, put back before the release is called. */
  readonly release: Ptr;
  readonly privateData: Ptr;
  /** A stream's other callbacks, which tell its record apart (see the file comment). */
  readonly callbacks: readonly Ptr[] | null;
  readonly done: () => void;
}

/** Schemas and arrays: by the id written into their `private_data`. */
const interposed = new HandleTable<Interposed>();
/** Streams: by their `private_data`, which stays theirs. */
const interposedStreams = new Map<Ptr, Interposed[]>();

const isStream = (kind: Interposable): boolean => kind === 'ArrowArrayStream' || kind === 'ArrowDeviceArrayStream';
const STREAM_CALLBACKS = ['get_schema', 'get_next', 'get_last_error'] as const;

function streamCallbacksAt(mem: Memory, kind: Interposable, p: Ptr): Ptr[] {
  const o = mem.layouts[kind].offsets;
  return STREAM_CALLBACKS.map((f) => mem.readPtr(p + BigInt(o[f]!)));
}

/** Takes the record of the struct at `p` (whose release is our callback), or undefined. */
function takeRecord(mem: Memory, kind: Interposable, p: Ptr, pd: bigint): Interposed | undefined {
  if (!isStream(kind)) {
    const rec = interposed.take(Number(mem.readPtr(p + pd)));
    return rec && rec.kind === kind ? rec : undefined;
  }
  const key = mem.readPtr(p + pd);
  const list = interposedStreams.get(key);
  if (!list) return undefined;
  const cbs = streamCallbacksAt(mem, kind, p);
  const i = list.findIndex((r) => r.kind === kind && r.callbacks!.every((c, k) => c === cbs[k]));
  if (i < 0) return undefined;
  const [rec] = list.splice(i, 1);
  if (list.length === 0) interposedStreams.delete(key);
  return rec;
}

/** Records the struct of `kind` at `at` (live: `release` non-NULL) and puts our callback in its `release`. */
function interpose(mem: Memory, kind: Interposable, at: Ptr, done: () => void): void {
  const { rel, pd } = fieldOffsets(mem, kind);
  const release = mem.readPtr(at + rel);
  if (release === 0n) throw new ArrowDeviceError('released', kind, 'a handle needs a live struct (release is NULL)');
  const cb = CALLBACKS[kind](mem);
  const privateData = mem.readPtr(at + pd);
  if (isStream(kind)) {
    const rec: Interposed = { kind, release, privateData, callbacks: streamCallbacksAt(mem, kind, at), done };
    const list = interposedStreams.get(privateData);
    if (list) list.push(rec);
    else interposedStreams.set(privateData, [rec]);
  } else {
    mem.writePtr(at + pd, BigInt(interposed.add({ kind, release, privateData, callbacks: null, done })));
  }
  mem.writePtr(at + rel, cb);
}

/** Offsets of `release` and `private_data` in a struct of `kind`. */
function fieldOffsets(mem: Memory, kind: Interposable): { rel: bigint; pd: bigint } {
  const o = mem.layouts[kind].offsets;
  return { rel: BigInt(o.release!), pd: BigInt(o.private_data!) };
}

/** The release callback that stands in for the struct's own: restores it, calls it once, reports. */
function releaseInterposed(mem: Memory, kind: Interposable, p: Ptr): void {
  const { rel, pd } = fieldOffsets(mem, kind);
  // Only a struct whose release is still ours carries our id in private_data (a misbehaving second
  // call finds the producer's fields back in place, or NULL): never take someone else's record.
  if (mem.readPtr(p + rel) !== CALLBACKS[kind](mem)) return;
  const rec = takeRecord(mem, kind, p, pd);
  if (!rec) return;
  mem.writePtr(p + pd, rec.privateData);
  mem.writePtr(p + rel, rec.release);
  try {
    mem.call(rec.release, RELEASE_SIG, p);
  } finally {
    // A producer's release marks the struct released; one that forgets must not be called twice.
    mem.writePtr(p + rel, 0n);
    rec.done();
  }
}

/** One callback per struct kind (the offsets differ), defined at load (see registry.ts, CallbackCache). */
const CALLBACKS: Record<Interposable, (mem: Memory) => Ptr> = {
  ArrowSchema: defineCallback('handle.schema.release', RELEASE_SIG, (mem, p) => releaseInterposed(mem, 'ArrowSchema', p as bigint)),
  ArrowArray: defineCallback('handle.array.release', RELEASE_SIG, (mem, p) => releaseInterposed(mem, 'ArrowArray', p as bigint)),
  ArrowArrayStream: defineCallback('handle.stream.release', RELEASE_SIG, (mem, p) => releaseInterposed(mem, 'ArrowArrayStream', p as bigint)),
  ArrowDeviceArrayStream: defineCallback('handle.device_stream.release', RELEASE_SIG, (mem, p) =>
    releaseInterposed(mem, 'ArrowDeviceArrayStream', p as bigint),
  ),
};

/** What dispose needs, shared with the safety net (which must not hold the handle). */
interface HandleState {
  readonly mem: Memory;
  readonly kind: CStructKind;
  readonly address: Ptr;
  disposed: boolean;
}

function disposeState(s: HandleState): void {
  if (s.disposed) return;
  s.disposed = true;
  safetyNet.unregister(s);
  try {
    // Released through the interposed callback when the consumer did not move it out: `released` resolves.
    releaseStruct(s.mem, s.kind, s.address);
  } catch {
    // Dispose never throws (PROTOCOL.md): a producer release that failed has nobody to report to here.
  } finally {
    try {
      s.mem.free(s.address);
    } catch {
      // As above.
    }
    liveCounters.liveHandles--;
  }
}

/** The last resort for a handle dropped without dispose: released and freed when collected. */
const safetyNet = new FinalizationRegistry<HandleState>((s) => disposeState(s));

/**
 * An owned handle to a struct we hand out (PROTOCOL.md): what the protocol
 * methods of this library's objects return, and what the export functions
 * return with `{ handle: true }`. The consumer moves the struct out of
 * `address` (or releases it in place) and disposes the handle; disposing
 * one that was not consumed releases the struct, exactly once. Dispose is
 * idempotent and frees our allocation of the struct; a handle dropped
 * without dispose is disposed when garbage collected (a last resort).
 *
 * @example
 * using stream = exportArrayStream(table, { handle: true });
 * nativeLib.consume_stream.async(stream.address, cb);  // koffi's async form: returns at once
 * await stream.released;          // the consumer called release
 */
export class ExportHandle implements ArrowHandle {
  /** The struct's address, in our allocation. */
  readonly address: Ptr;
  /** The wasm32 module the struct lives in (absent for the process's own memory). */
  declare readonly memory?: ArrowWasmMemory;
  /** The struct: `ArrowSchema`, `ArrowArray`, `ArrowDeviceArray`, `ArrowArrayStream` or `ArrowDeviceArrayStream`. */
  readonly kind: CStructKind;
  /**
   * Resolves when the struct has been released: by the consumer (on its
   * moved copy, or in place), or by our dispose of a handle nobody
   * consumed. Never rejects. A consumer that keeps a moved struct forever
   * never resolves it.
   */
  readonly released: Promise<void>;
  readonly #state: HandleState;

  private constructor(state: HandleState, released: Promise<void>) {
    this.address = state.address;
    this.kind = state.kind;
    this.released = released;
    this.#state = state;
    const hm = wasm?.handleMemory(state.mem);
    if (hm) Object.defineProperty(this, 'memory', { value: hm, enumerable: true });
    else if (state.mem !== nativeMemory()) {
      throw new ArrowDeviceError('unsupported', 'memory', `a handle's struct must be in native or wasm32 memory, not ${state.mem.name}`);
    }
  }

  /**
   * @internal Takes ownership of the live struct of `kind` at `address`, an
   * allocation of ours in `mem`, as a handle. On failure the struct has been
   * released and the allocation freed.
   */
  static adopt(mem: Memory, kind: CStructKind, address: Ptr): ExportHandle {
    const state: HandleState = { mem, kind, address, disposed: false };
    let resolve!: () => void;
    const released = new Promise<void>((r) => (resolve = r));
    liveCounters.liveHandles++;
    try {
      const ikind: Interposable = kind === 'ArrowDeviceArray' ? 'ArrowArray' : kind;
      const at = kind === 'ArrowDeviceArray' ? address + BigInt(access(mem.target).ArrowDeviceArray.array.offset) : address;
      interpose(mem, ikind, at, resolve);
      const h = new ExportHandle(state, released);
      safetyNet.register(h, state, state);
      return h;
    } catch (e) {
      disposeState(state);
      throw e;
    }
  }

  /** Whether `[Symbol.dispose]()` has run (the struct is then released or moved out, and our allocation freed). */
  get disposed(): boolean {
    return this.#state.disposed;
  }

  /** Releases the struct if the consumer did not move it out, and frees our allocation. Idempotent; never throws. */
  [Symbol.dispose](): void {
    disposeState(this.#state);
  }
}

/**
 * The two handles of an array export (`exportRecordBatch(b, { handle: true })`,
 * `arrow.c_array`): disposing the pair disposes both.
 *
 * @example
 * function handOver(batch: RecordBatch): void {
 *   using pair = exportRecordBatch(batch, { handle: true });
 *   nativeLib.consume(pair.schema.address, pair.array.address); // the consumer moves both out
 * }                                                             // disposed: anything not taken is released
 */
export class ArrayExportHandles {
  /** Resolves when both structs have been released. */
  readonly released: Promise<void>;
  /** Pairs two handles; the export functions make these, a user has no need to. */
  constructor(
    /** The `ArrowSchema`. */
    readonly schema: ExportHandle,
    /** An `ArrowArray`, or an `ArrowDeviceArray` for device exports. */
    readonly array: ExportHandle,
  ) {
    this.released = Promise.all([schema.released, array.released]).then(() => undefined);
  }

  /** Disposes both handles. */
  [Symbol.dispose](): void {
    this.array[Symbol.dispose]();
    this.schema[Symbol.dispose]();
  }
}

/**
 * The handles of a table export (`exportTable(t, { handle: true })`): one schema, one array per batch.
 *
 * @example
 * using t = exportTable(table, { handle: true });
 * for (const a of t.arrays) nativeLib.consume(exportSchema(table.schema), a.address);
 * await t.released;  // every struct released, by the consumer or by the dispose
 */
export class TableExportHandles {
  /** Resolves when every struct has been released. */
  readonly released: Promise<void>;
  /** Groups the handles; `exportTable` makes these, a user has no need to. */
  constructor(
    /** The `ArrowSchema` of every batch. */
    readonly schema: ExportHandle,
    /** One `ArrowArray` per batch, in the table's order. */
    readonly arrays: readonly ExportHandle[],
  ) {
    this.released = Promise.all([schema.released, ...arrays.map((a) => a.released)]).then(() => undefined);
  }

  /** Disposes every handle. */
  [Symbol.dispose](): void {
    for (const a of this.arrays) a[Symbol.dispose]();
    this.schema[Symbol.dispose]();
  }
}

// --- consumer side ---------------------------------------------------------------------

/** A `Memory` given as a handle's `memory` (this library's own objects, passed among its users). */
function isMemory(x: object): x is Memory {
  const m = x as Partial<Memory>;
  return typeof m.readPtr === 'function' && typeof m.layouts === 'object' && typeof m.alloc === 'function';
}

/**
 * Checks a handle a producer returned and gives its address and the memory
 * its struct is read through (`memory`: a wasm module's, or the process's).
 * `path` names it in errors (`source[arrow.c_array]().array`).
 */
export function takeHandle(h: unknown, path: string): { address: Ptr; mem: Memory; handle: ArrowHandle } {
  if (typeof h !== 'object' || h === null) throw invalid(path, `expected a handle ({ address, [Symbol.dispose] }), got ${h === null ? 'null' : typeof h}`);
  const o = h as Partial<ArrowHandle>;
  if (typeof o[Symbol.dispose] !== 'function') throw invalid(`${path}[Symbol.dispose]`, 'expected a method: a handle must be disposable');
  if (typeof o.address !== 'bigint') {
    throw invalid(`${path}.address`, `expected a bigint, got ${typeof o.address === 'number' ? `the number ${o.address}` : typeof o.address}`);
  }
  if (o.address === 0n) throw invalid(`${path}.address`, 'NULL pointer');
  const d = o.memory as unknown;
  let mem: Memory;
  if (d === undefined || d === null) mem = nativeMemory();
  else if (typeof d === 'object' && isMemory(d)) mem = d;
  else if (wasm) mem = wasm.memoryOf(d as ArrowWasmMemory, `${path}.memory`);
  else throw new ArrowDeviceError('unsupported', `${path}.memory`, "a handle in WebAssembly memory, and arrow-device's wasm support is not loaded: import 'arrow-device' (arrow-device/adbc alone reads native memory only)");
  return { address: o.address, mem, handle: h as ArrowHandle };
}

/** Disposes a handle (or pair) from a producer; returns what its dispose threw, if anything (the protocol says it never throws). */
export function disposeHandle(h: unknown): unknown {
  try {
    const f = (h as { [Symbol.dispose]?: unknown } | null)?.[Symbol.dispose];
    if (typeof f === 'function') (f as () => void).call(h);
    return undefined;
  } catch (e) {
    return e ?? new Error('dispose threw');
  }
}
