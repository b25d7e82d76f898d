/**
 * The native piece of async device streams (native/async-ring.c), loaded
 * from the package's prebuilt library for this platform when there is one.
 *
 * The other side of a stream calls us from its own threads. With JS
 * callbacks, each call is a hop to the JS thread that the calling thread
 * waits out (koffi runs a foreign thread's callback on the JS thread). The
 * library answers those calls in C and wakes JS once per burst, through a
 * pipe its event loop watches (the calling thread writes one byte and goes
 * on):
 * - the ring, a handler for a native producer: `AsyncDeviceStreamReader`
 *   uses it when it loads (see `asyncRing`), JS callbacks otherwise;
 * - the pump, a producer for a native consumer: `produceAsyncDeviceStream`
 *   uses it when it loads, JS callbacks on koffi workers otherwise.
 * `{ nativeRing: false }` or `ARROW_DEVICE_ASYNC_RING=0` ask for JS
 * callbacks.
 *
 * The library is found at `prebuilds/<platform>-<arch>/` of the package
 * (`npm pack` builds linux-x64 and linux-arm64, glibc: tools/build-native.mjs),
 * or at the path `ARROW_DEVICE_ASYNC_RING` names. It is never compiled on a
 * user's machine. Elsewhere (another platform, a musl libc, a library that
 * does not load, Deno without `--allow-read`), the reader and the producer
 * use JS callbacks and `asyncRingMissing` says why.
 */
import type { Ptr } from '../memory/memory.js';
import { koffi } from '../memory/native.js';
import { envVar, runtimeName } from '../platform/node.js';
import { findPrebuilt } from '../platform/prebuilt.js';
import { doorbellFailure } from './doorbell.js';

/** What the JS side reads of one ring event (`struct ring_event`). */
export const RING_EVENT_BYTES = 40;
export const RING_VERSION = 4;
export const EV_TASK = 1;
export const EV_END = 2;
export const EV_ERROR = 3;
export const EV_RELEASE = 4;

/** The library's functions (pointers as bigints, as the rest of the public surface speaks them). */
export interface RingLib {
  readonly path: string;
  ringNew(onSchema: Ptr, privateData: Ptr, capacity: number): Ptr;
  take(ring: Ptr, out: Uint8Array, max: number, arm: number): number;
  doorbells(ring: Ptr): number;
  /** The read end of the ring's doorbell pipe (its owner closes it). */
  bellFd(ring: Ptr): number;
  /**
   * The producer's request(n) / cancel, through the ring: unless the producer has released the handler
   * (it may free its ArrowAsyncProducer then, and its release only queues here). True if called.
   */
  request(ring: Ptr, n: number): boolean;
  cancel(ring: Ptr): boolean;
  freeCopy(p: Ptr): void;
  free(ring: Ptr): void;
  /** The pump: our producer into a native consumer (native/async-ring.c, "The pump"). */
  readonly pump: PumpLib;
}

/** What `PumpLib.push` queues: one call of the consumer's handler. */
export const CMD_SCHEMA = 1;
export const CMD_TASK = 2;
export const CMD_END = 3;
export const CMD_ERROR = 4;
export const CMD_RELEASE = 5;

/** The indices of `PumpLib.state`'s output (`pump_state`). */
export const enum PumpState {
  Credit = 0,
  Cancelled = 1,
  BadRequest = 2,
  ConsumerRc = 3,
  Released = 4,
  Handled = 5,
  Freed = 6,
  Delivered = 7,
  Tasks = 8,
  Lent = 9,
  LateCalls = 10,
  Doorbells = 11,
}
export const PUMP_STATE_LENGTH = 12;

/** The pump's functions (native/async-ring.c). */
export interface PumpLib {
  /** A pump for the handler (sets its `producer`); 0n when it cannot start one. */
  pumpNew(handler: Ptr, deviceType: number, additionalMetadata: Uint8Array | null): Ptr;
  /** The read end of the pump's doorbell pipe (its owner closes it). */
  bellFd(pump: Ptr): number;
  /** A task holding the exported array at `array` (moved in); 0n when out of memory (then the array is untouched). */
  task(pump: Ptr, array: Ptr): Ptr;
  /** Cleans up a task never handed over (its array comes back through `takeFreed`). */
  dropTask(task: Ptr): void;
  /** Queues a handler call; metadata and message are copied. 0 or ENOMEM. */
  push(pump: Ptr, kind: number, code: number, ptr: Ptr, metadata: Uint8Array | null, message: Uint8Array | null): number;
  /** Reads the state into `out` (see PumpState), taking `take` credits if there; `arm` 1 or 2 arms the doorbell. */
  state(pump: Ptr, take: number, arm: number, out: BigInt64Array): boolean;
  /** Moves up to `max` given-back ArrowArrays into `out`; returns how many. */
  takeFreed(pump: Ptr, out: Ptr, max: number): number;
  readonly arraySize: number;
  free(pump: Ptr): void;
}

let loaded: RingLib | null | undefined;
/** Why the ring is not used, when it is not (for tests and benchmarks to print). */
export let asyncRingMissing: string | undefined;

/**
 * The ring library, loaded once; null where it is not available (then
 * `asyncRingMissing` says why). Only for the native memory: a wasm
 * module's producer calls its handler on the JS thread, without hops.
 * Null too once a doorbell was found dead in this process
 * (src/async/doorbell.ts): new streams then use JS callbacks.
 */
export function asyncRing(): RingLib | null {
  if (loaded === undefined) loaded = loadRing();
  const dead = doorbellFailure();
  asyncRingMissing = dead ?? loadMissing;
  return dead === undefined ? loaded : null;
}

/**
 * Why there is no ring on Windows. Its doorbell is a POSIX pipe whose read
 * end the event loop watches as a socket; libuv on Windows cannot watch a C
 * runtime's pipe descriptor that way. The JS-callback path serves there: a
 * producer thread's calls reach JS through koffi's thread-safe callbacks.
 */
const WINDOWS = 'not built for Windows (its doorbell is a POSIX pipe): the async reader and producer use JS callbacks there';

/** Why the library did not load, when it did not. */
let loadMissing: string | undefined;

function loadRing(): RingLib | null {
  if (envVar('ARROW_DEVICE_ASYNC_RING') === '0') {
    loadMissing = 'turned off (ARROW_DEVICE_ASYNC_RING=0)';
    return null;
  }
  if (process.platform === 'win32' && !envVar('ARROW_DEVICE_ASYNC_RING')) {
    loadMissing = WINDOWS;
    return null;
  }
  const found = findPrebuilt();
  if ('missing' in found) {
    loadMissing = found.missing;
    return null;
  }
  const path = found.path;
  try {
    const k = koffi();
    const l = k.load(path);
    const version = Number(l.func('int32_t ring_version(void)')() as number);
    const size = Number(l.func('int64_t ring_event_size(void)')() as number | bigint);
    if (version !== RING_VERSION || size !== RING_EVENT_BYTES) {
      loadMissing = `${path} is version ${version} with ${size}-byte events; this package reads version ${RING_VERSION}, ${RING_EVENT_BYTES} bytes`;
      return null;
    }
    const ringNew = l.func('uintptr_t ring_new(uintptr_t on_schema, uintptr_t priv, int64_t capacity)');
    const take = l.func('int64_t ring_take(uintptr_t ring, uint8_t *out, int64_t max, int32_t arm)');
    const doorbells = l.func('int64_t ring_doorbells(uintptr_t ring)');
    const bellFd = l.func('int32_t ring_bell_fd(uintptr_t ring)');
    const freeCopy = l.func('void ring_free_copy(uintptr_t p)');
    const request = l.func('int32_t ring_request(uintptr_t ring, int64_t n)');
    const cancel = l.func('int32_t ring_cancel(uintptr_t ring)');
    const free = l.func('void ring_free(uintptr_t ring)');
    const pumpNew = l.func('uintptr_t pump_new(uintptr_t handler, int32_t device_type, const uint8_t *md, int64_t md_len)');
    const pumpBellFd = l.func('int32_t pump_bell_fd(uintptr_t pump)');
    const pumpTask = l.func('uintptr_t pump_task(uintptr_t pump, uintptr_t array)');
    const pumpDrop = l.func('int32_t pump_task_drop(uintptr_t task)');
    const pumpPush = l.func(
      'int32_t pump_push(uintptr_t pump, int32_t kind, int32_t code, uintptr_t ptr, const uint8_t *md, int64_t md_len, const uint8_t *msg, int64_t msg_len)',
    );
    const pumpState = l.func('int32_t pump_state(uintptr_t pump, int64_t take, int32_t arm, int64_t *out)');
    const pumpTakeFreed = l.func('int64_t pump_take_freed(uintptr_t pump, uintptr_t out, int64_t max)');
    const pumpFree = l.func('void pump_free(uintptr_t pump)');
    const arraySize = Number(l.func('int64_t pump_array_size(void)')() as number | bigint);
    return {
      path,
      ringNew: (s, p, c) => BigInt(ringNew(s, p, c) as number | bigint),
      take: (r, out, max, arm) => Number(take(r, out, max, arm) as number | bigint),
      doorbells: (r) => Number(doorbells(r) as number | bigint),
      bellFd: (r) => Number(bellFd(r) as number),
      freeCopy: (p) => void freeCopy(p),
      request: (r, n) => (request(r, n) as number) !== 0,
      cancel: (r) => (cancel(r) as number) !== 0,
      free: (r) => void free(r),
      pump: {
        pumpNew: (h, d, md) => BigInt(pumpNew(h, d, md, md ? md.length : 0) as number | bigint),
        bellFd: (p) => Number(pumpBellFd(p) as number),
        task: (p, a) => BigInt(pumpTask(p, a) as number | bigint),
        dropTask: (t) => void pumpDrop(t),
        push: (p, kind, code, ptr, md, msg) => Number(pumpPush(p, kind, code, ptr, md, md ? md.length : 0, msg, msg ? msg.length : 0) as number),
        state: (p, take, arm, out) => (pumpState(p, take, arm, out) as number) !== 0,
        takeFreed: (p, out, max) => Number(pumpTakeFreed(p, out, max) as number | bigint),
        arraySize,
        free: (p) => void pumpFree(p),
      },
    };
  } catch (e) {
    // A library for another libc or CPU, or a Deno without --allow-ffi: JS callbacks, and the reason.
    loadMissing = `${path} does not load on ${runtimeName}: ${(e as Error).message}`;
    return null;
  }
}
