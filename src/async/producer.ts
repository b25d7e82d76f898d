/**
 * The producer side of the async device stream interface: we push data to
 * a native consumer's `ArrowAsyncDeviceStreamHandler`.
 *
 * - The `ArrowAsyncProducer` is ours, filled (and set in the handler) before
 *   `on_schema` is called; we free it after calling the handler's `release`.
 * - `request(n)` adds credit and never calls `on_next_task` itself (the
 *   production loop runs on the event loop, after the callback returns);
 *   `n <= 0` ends the stream with `on_error(EINVAL)`.
 * - Each `on_next_task` gets a task whose `extract_data` moves the batch out
 *   (exported zero-copy as a CPU `ArrowDeviceArray`, or a `DeviceArray` moved
 *   on); a NULL out discards it and still cleans up.
 * - `cancel` stops production at the next batch and then calls `release`,
 *   with no `on_error`. An error in the source: `on_error`, then `release`. A
 *   non-zero return from `on_schema` or `on_next_task` stops production and
 *   releases without `on_error`.
 * - The handler's callbacks are called with the memory's asynchronous call
 *   (a koffi worker thread), one at a time: a native consumer may call
 *   `request` from its own threads, which koffi queues to the JS thread, so
 *   the JS thread must never wait in a synchronous call into the consumer.
 *   Our own reader's handler is the exception: its callbacks are ours and
 *   never wait on another thread, so they are called directly in JS (no
 *   koffi hop; see `readerCallbacks`), with the same order and rules.
 */
import { RecordBatch, Schema, type Struct } from 'apache-arrow';
import { DeviceType, Errno } from '../abi/constants.js';
import { exportSchema, releaseArrowSchema } from '../array/api.js';
import { exportDeviceArray } from '../device/api.js';
import { DeviceArray } from '../device/device-array.js';
import { ArrowDeviceError, toErrno } from '../errors.js';
import { liveCounters } from '../memory/accounting.js';
import type { CValue, Memory, Ptr, Signature } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { defineCallback, HandleTable } from '../memory/registry.js';
import { access } from '../abi/accessors.js';
import { readField, readFieldBig, writeFieldBig, writeStruct } from '../memory/raw.js';
import { encodeMetadata, type Metadata } from '../schema/metadata.js';
import type { SchemaNode } from '../schema/node.js';
import type { ArrayView } from '../array/view.js';
import {
  CANCEL, DIRECT_YIELD_EVERY, EXTRACT_DATA, HANDLER_RELEASE, KeepAlive, ON_ERROR, ON_NEXT_TASK, ON_SCHEMA, REQUEST, Signal, yieldToEventLoop,
} from './common.js';
import { readerCallbacks } from './consumer.js';

/** What a task carries: an arrow-js record batch, a struct `ArrayView` (any type of the spec), or a `DeviceArray`. */
type Item = RecordBatch | DeviceArray | ArrayView;
/** What can be produced from: async or sync iterables of batches, a ReadableStream, an arrow-js async reader. */
export type AsyncBatchSource = AsyncIterable<Item> | Iterable<Item> | ReadableStream<Item>;

export interface AsyncProducerOptions {
  memory?: Memory;
  /** The stream's schema (an arrow-js `Schema` or a `SchemaNode`); else the first item's (a source with no item then needs it). */
  schema?: Schema | SchemaNode;
  /** `ArrowAsyncProducer.additional_metadata`, valid for the producer's lifetime. */
  additionalMetadata?: Metadata;
  /** Per-task metadata for `on_next_task`. */
  taskMetadata?: (batch: Item, index: number) => Metadata | null;
  /** The device type the producer announces (default CPU; DeviceArray items must match it). */
  deviceType?: number;
}

export interface AsyncProduceResult {
  /** Tasks handed to the consumer. */
  readonly batches: number;
  /** Whether the consumer cancelled. */
  readonly cancelled: boolean;
  /** How the stream ended. */
  readonly end: 'complete' | 'cancelled' | 'error' | 'consumer-stopped';
  /** The error reported through on_error, or the consumer's non-zero code. */
  readonly error?: ArrowDeviceError;
}

interface ProducerState {
  credit: number;
  cancelled: boolean;
  badRequest: number | null;
  changed: Signal;
  /** Tasks handed out and not extracted yet. */
  outstanding: number;
  /** Set once the handler is released: frees the ArrowAsyncProducer when nothing can use it any more. */
  retire: (() => void) | undefined;
}

/**
 * How long the `ArrowAsyncProducer` outlives the handler's release and its
 * last task's extraction. The spec lets a producer free it after `release`,
 * but Arrow C++ 26's consumer still calls `request` from its thread pool
 * after extracting a task, even after the release: freeing at once crashed
 * the process (found by the arrow-cpp peer, `--via async`, zero-length
 * batches). After the release our `request` and `cancel` are no-ops; the
 * memory is freed after this grace period.
 */
const PRODUCER_GRACE_MS = 1000;

interface TaskRecord {
  item: Item;
  deviceType: number;
  state: ProducerState;
  /** Our ArrowAsyncTask struct, freed when the task is extracted (see produceAsyncDeviceStream). */
  struct: Ptr;
}

const producers = new HandleTable<ProducerState>();
const tasks = new HandleTable<TaskRecord>();

function stateOf(mem: Memory, p: bigint): ProducerState | undefined {
  return producers.get(readField(mem, access(mem.target).ArrowAsyncProducer.private_data, p));
}

// request and cancel may come from the consumer's threads (queued by koffi to the JS thread), or
// synchronously from inside on_schema / on_next_task: both only update state and wake the loop.
// Defined at load: see CallbackCache.
const requestCb = defineCallback('async.request', REQUEST, (mem, p, n) => {
  const s = stateOf(mem, p as bigint);
  if (!s || s.cancelled) return; // after cancel: a NOP, but allowed
  const k = BigInt(n as bigint);
  if (k <= 0n) s.badRequest = Number(k);
  else s.credit += k > 1_000_000_000n ? 1_000_000_000 : Number(k);
  s.changed.wake();
});

const cancelCb = defineCallback('async.cancel', CANCEL, (mem, p) => {
  const s = stateOf(mem, p as bigint);
  if (!s || s.cancelled) return; // idempotent
  s.cancelled = true;
  s.changed.wake();
});

const extractCb = defineCallback('async.extract_data', EXTRACT_DATA, (mem, t, out) => {
  const rec = tasks.take(readField(mem, access(mem.target).ArrowAsyncTask.private_data, t as bigint));
  if (!rec) return Errno.EINVAL; // extracted twice, or not ours
  liveCounters.liveExports--;
  mem.free(rec.struct);
  if (--rec.state.outstanding === 0) rec.state.retire?.();
  if ((out as bigint) === 0n) {
    if (rec.item instanceof DeviceArray) rec.item.release();
    return 0; // the consumer does not want the data: cleaned up
  }
  try {
    exportDeviceArray(rec.item, { memory: mem, into: out as bigint });
    return 0;
  } catch (e) {
    return toErrno(e).errno;
  }
});

function isReadableStream(s: AsyncBatchSource): s is ReadableStream<Item> {
  return typeof (s as { getReader?: unknown }).getReader === 'function';
}

/** Iterates any of the sources; `return()` ends it early. */
function iterate(source: AsyncBatchSource): AsyncIterator<Item> {
  if (isReadableStream(source) && !(Symbol.asyncIterator in source)) {
    // Node's ReadableStream type is async-iterable, so without the DOM lib TypeScript
    // narrows `source` to never here; a browser's stream may still lack the iterator.
    const reader = (source as ReadableStream<Item>).getReader();
    return {
      next: async () => {
        const r = await reader.read();
        return r.done ? { done: true, value: undefined } : { done: false, value: r.value };
      },
      return: async () => {
        await reader.cancel();
        return { done: true, value: undefined };
      },
    };
  }
  if (Symbol.asyncIterator in source) return (source as AsyncIterable<Item>)[Symbol.asyncIterator]();
  const it = (source as Iterable<Item>)[Symbol.iterator]();
  return {
    next: async () => it.next(),
    return: async () => it.return?.() ?? { done: true, value: undefined },
  };
}

function schemaOf(item: Item): Schema | SchemaNode {
  if (item instanceof RecordBatch) return new Schema((item.data.type as Struct).children, item.schema.metadata);
  if (item instanceof DeviceArray) throw new ArrowDeviceError('invalid', 'options.schema', 'a stream of DeviceArray needs options.schema');
  return item.schema;
}

/**
 * Produces `source` into the native consumer's handler at `handler` and
 * resolves when the handler has been released (the stream is over).
 *
 * @example
 * const handler = nativeLib.make_handler();
 * const result = await produceAsyncDeviceStream(table.batches, handler);
 * console.log(result.end, result.batches);
 */
export async function produceAsyncDeviceStream(
  source: AsyncBatchSource,
  handler: Ptr,
  opts: AsyncProducerOptions = {},
): Promise<AsyncProduceResult> {
  const mem = opts.memory ?? nativeMemory();
  if (handler === 0n) throw new ArrowDeviceError('invalid', 'handler', 'NULL pointer');
  const H = access(mem.target).ArrowAsyncDeviceStreamHandler;
  const P = access(mem.target).ArrowAsyncProducer;
  const fn = (field: 'on_schema' | 'on_next_task' | 'on_error' | 'release'): Ptr => readFieldBig(mem, H[field], handler);
  for (const name of ['on_schema', 'on_next_task', 'on_error', 'release'] as const) {
    if (fn(name) === 0n) throw new ArrowDeviceError('invalid', `handler.${name}`, 'NULL: the handler is released or incomplete');
  }
  // Our own reader's handler: our JS callbacks run directly through `mem.call` (they never block, and
  // request and cancel, ours too, only update state: no reentrancy), also when its handler is the native
  // ring (which is for producers on other threads). A foreign handler's go through the async form, on a
  // koffi worker thread.
  const ours = readerCallbacks(mem, handler);
  const direct = ours !== null;
  const onSchema = ours?.on_schema ?? fn('on_schema');
  const onNextTask = ours?.on_next_task ?? fn('on_next_task');
  const onError = ours?.on_error ?? fn('on_error');
  const release = ours?.release ?? fn('release');
  const callHandler = (f: Ptr, sig: Signature, ...args: CValue[]): CValue | undefined | Promise<CValue | undefined> =>
    direct ? mem.call(f, sig, ...args) : mem.callAsync(f, sig, ...args);
  const deviceType = opts.deviceType ?? DeviceType.CPU;
  const state: ProducerState = { credit: 0, cancelled: false, badRequest: null, changed: new Signal(), outstanding: 0, retire: undefined };
  const id = producers.add(state);
  const md = encodeMetadata(opts.additionalMetadata ?? null);
  const mdPtr = md ? mem.alloc(md.length) : 0n;
  if (md) mem.copyIn(mdPtr, md);
  const producer = mem.alloc(P.$size);
  writeStruct(mem, producer, P.$size, (dv, at) => {
    P.device_type.set(dv, at, deviceType);
    P.request.setBig(dv, at, requestCb(mem));
    P.cancel.setBig(dv, at, cancelCb(mem));
    P.additional_metadata.setBig(dv, at, mdPtr);
    P.private_data.set(dv, at, id);
  });
  // The producer member must be populated before on_schema.
  writeFieldBig(mem, H.producer, handler, producer);
  const keepAlive = new KeepAlive();
  const it = iterate(source);
  let batches = 0;
  let end: AsyncProduceResult['end'] = 'complete';
  let error: ArrowDeviceError | undefined;

  const reportError = async (e: unknown): Promise<void> => {
    const { errno, message } = toErrno(e);
    error = e instanceof ArrowDeviceError ? e : new ArrowDeviceError('io', 'source', message, { errno });
    end = 'error';
    const msg = new TextEncoder().encode(message + '\0');
    const m = mem.alloc(msg.length);
    mem.copyIn(m, msg);
    try {
      await callHandler(onError, ON_ERROR, handler, errno, m, 0n);
    } finally {
      mem.free(m);
    }
  };

  try {
    let first: IteratorResult<Item> | undefined;
    let schema = opts.schema;
    if (!schema) {
      try {
        first = await it.next();
      } catch (e) {
        await reportError(e);
        return { batches, cancelled: false, end, error };
      }
      if (first.done) {
        await reportError(new ArrowDeviceError('invalid', 'source', 'the source has no batch to take the schema from: pass options.schema'));
        return { batches, cancelled: false, end, error };
      }
      schema = schemaOf(first.value);
    }
    const s = exportSchema(schema, { memory: mem });
    let rc: number;
    try {
      rc = (await callHandler(onSchema, ON_SCHEMA, handler, s)) as number;
    } finally {
      // The consumer moves the schema out; release it if it did not.
      releaseArrowSchema(s, { memory: mem });
      mem.free(s);
    }
    if (rc !== 0) {
      end = 'consumer-stopped';
      error = new ArrowDeviceError('producer', 'on_schema', `the consumer returned ${rc}`, { errno: rc });
      return { batches, cancelled: false, end, error };
    }
    for (;;) {
      // A direct stream never leaves the microtask queue by itself: let timers and I/O in now and then.
      if (direct && yieldToEventLoop && batches > 0 && batches % DIRECT_YIELD_EVERY === 0) await yieldToEventLoop();
      while (state.credit === 0 && !state.cancelled && state.badRequest === null) await state.changed.wait();
      if (state.cancelled) {
        end = 'cancelled'; // a successful cancel: no on_error, just release
        break;
      }
      if (state.badRequest !== null) {
        await reportError(new ArrowDeviceError('invalid', 'request', `n must be > 0, got ${state.badRequest}`));
        break;
      }
      let next: IteratorResult<Item>;
      try {
        next = first ?? (await it.next());
        first = undefined;
      } catch (e) {
        await reportError(e);
        break;
      }
      if (state.cancelled) {
        end = 'cancelled';
        break;
      }
      if (next.done) {
        rc = (await callHandler(onNextTask, ON_NEXT_TASK, handler, 0n, 0n)) as number; // end of stream
        break;
      }
      const item = next.value;
      if (item instanceof DeviceArray && item.deviceType !== deviceType) {
        await reportError(new ArrowDeviceError('invalid', `batch ${batches}`, `a ${item.deviceTypeName} array in a stream of device type ${deviceType}`));
        break;
      }
      state.credit--;
      const T = access(mem.target).ArrowAsyncTask;
      const task = mem.alloc(T.$size);
      const taskId = tasks.add({ item, deviceType, state, struct: task });
      state.outstanding++;
      liveCounters.liveExports++;
      writeStruct(mem, task, T.$size, (dv, at) => {
        T.extract_data.setBig(dv, at, extractCb(mem));
        T.private_data.set(dv, at, taskId);
      });
      const tmd = encodeMetadata(opts.taskMetadata?.(item, batches) ?? null);
      const tmdPtr = tmd ? mem.alloc(tmd.length) : 0n;
      if (tmd) mem.copyIn(tmdPtr, tmd);
      try {
        // The spec makes the task valid only during this call (the consumer moves its contents out),
        // but Arrow C++'s consumer keeps the pointer and extracts later: so the struct lives until its
        // extract_data runs, which frees it.
        rc = (await callHandler(onNextTask, ON_NEXT_TASK, handler, task, tmdPtr)) as number;
      } finally {
        if (tmdPtr) mem.free(tmdPtr);
      }
      batches++;
      if (rc !== 0) {
        end = 'consumer-stopped';
        error = new ArrowDeviceError('producer', 'on_next_task', `the consumer returned ${rc}`, { errno: rc });
        break;
      }
    }
    if (end !== 'complete') await it.return?.();
    return { batches, cancelled: state.cancelled, end, error };
  } finally {
    try {
      await callHandler(release, HANDLER_RELEASE, handler);
    } finally {
      // Ours to clean up after the handler's release (the spec's ArrowAsyncProducer lifetime):
      // request and cancel become no-ops now; the memory goes once no task can lead to a call
      // (see PRODUCER_GRACE_MS).
      producers.take(id);
      keepAlive.stop();
      state.retire = () => {
        state.retire = undefined;
        setTimeout(() => {
          mem.free(producer);
          if (mdPtr) mem.free(mdPtr);
        }, PRODUCER_GRACE_MS).unref();
      };
      if (state.outstanding === 0) state.retire();
    }
  }
}
