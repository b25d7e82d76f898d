/**
 * What the consumer and producer sides of the async device stream interface
 * (CDeviceDataInterface.rst, "Async Device Stream Interface") share: the
 * callback signatures, and keeping the event loop alive.
 */
import type { Signature } from '../memory/memory.js';

export const ON_SCHEMA = { name: 'async_on_schema', result: 'int32', params: ['pointer', 'pointer'] } as const satisfies Signature;
export const ON_NEXT_TASK = {
  name: 'async_on_next_task',
  result: 'int32',
  params: ['pointer', 'pointer', 'pointer'],
} as const satisfies Signature;
export const ON_ERROR = {
  name: 'async_on_error',
  result: 'void',
  params: ['pointer', 'int32', 'pointer', 'pointer'],
} as const satisfies Signature;
export const HANDLER_RELEASE = { name: 'async_handler_release', result: 'void', params: ['pointer'] } as const satisfies Signature;
/** `request` takes int64_t n (abi.h; the spec text says uint64_t in one place): n <= 0 is an error. */
export const REQUEST = { name: 'async_request', result: 'void', params: ['pointer', 'int64'] } as const satisfies Signature;
export const CANCEL = { name: 'async_cancel', result: 'void', params: ['pointer'] } as const satisfies Signature;
/** `extract_data` takes `struct ArrowAsyncTask*` (the spec text's `ArrowArrayTask` is a typo). */
export const EXTRACT_DATA = { name: 'async_extract_data', result: 'int32', params: ['pointer', 'pointer'] } as const satisfies Signature;

/**
 * Keeps the Node.js event loop alive while a stream is open: koffi queues
 * callbacks that native threads make to the JS thread, but a queued callback
 * does not hold the loop open by itself, so without this a program whose
 * only pending work is "wait for the producer" would exit.
 */
export class KeepAlive {
  private timer: ReturnType<typeof setInterval> | undefined = setInterval(() => {}, 1 << 30);

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** A promise to wait on until something changes, re-armed after each wake. */
export class Signal {
  private waiters: (() => void)[] = [];

  wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}

/**
 * Lets the event loop run (timers, I/O) in a stream that runs on the JS
 * thread alone: our producer calling our reader's handler directly makes
 * the whole stream a chain of microtasks otherwise. Where there is no
 * `setImmediate` (browsers), nothing: the wasm memory's calls were never
 * hops there either.
 */
export const yieldToEventLoop: (() => Promise<void>) | undefined =
  typeof setImmediate === 'function' ? () => new Promise<void>((resolve) => setImmediate(resolve)) : undefined;

/** How many tasks a direct (JS thread) stream hands over between two yields to the event loop. */
export const DIRECT_YIELD_EVERY = 256;
