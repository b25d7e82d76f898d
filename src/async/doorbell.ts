/**
 * The JS side of the native ring's and pump's doorbell (native/async-ring.c):
 * the read end of a pipe that a native thread writes one byte into when JS
 * waits for it. How a runtime's event loop watches a descriptor differs:
 *
 * - `socket`: a `node:net` Socket over the descriptor (Node.js, Deno).
 * - `stream`: `Bun.file(fd).stream()` (Bun: its `net.Socket({ fd })` over a
 *   pipe is accepted but never emits 'data', which hung every stream).
 * - `poll`: a short timer that looks at the ring (the fallback below).
 *
 * A mechanism that is accepted and then stays silent must not hang a
 * stream, so every doorbell is watched: the native side counts the bytes it
 * wrote, JS the bytes it heard. A watchdog timer compares them; a byte
 * written before one of its ticks that JS has still not heard at the next
 * tick means the event loop turned (each tick is a turn of its own, and
 * every turn polls I/O between two timer phases) without delivering it: the
 * doorbell is dead. That doorbell then polls (its stream goes on, slower),
 * the process gets one warning, and the streams started afterwards use JS
 * callbacks (`doorbellFailure` makes src/async/ring.ts report the ring
 * missing, with the reason).
 */
import { ArrowDeviceError } from '../errors.js';
import { closeSync, fdSocket, runtime, runtimeName } from '../platform/node.js';

export type DoorbellMechanism = 'socket' | 'stream' | 'poll';

export interface DoorbellOptions {
  /** The pipe's read end; the doorbell owns it from now on (its `close` closes it). */
  readonly fd: number;
  /** What rings, for messages: "the native ring", "the native pump". */
  readonly what: string;
  /** Called on the JS thread when the native side rang (or, polling, now and then). */
  readonly onRing: () => void;
  /** How many bytes the native side has written into the pipe so far. */
  readonly rung: () => number;
}

/** The watchdog's period. A dead doorbell is found within two of them. */
const WATCH_MS = 500;
/** How often a polling doorbell looks: one found dead (a stream waits on it), one released (reaping). */
const POLL_MS = 2;
const RELEASED_POLL_MS = 100;

let failure: string | undefined;
let forced: DoorbellMechanism | 'silent' | undefined;

/**
 * Why doorbells are not trusted any more in this process (one was found
 * dead), or undefined. New readers and producers then use JS callbacks.
 */
export function doorbellFailure(): string | undefined {
  return failure;
}

/**
 * For tests: the mechanism new doorbells use (`silent`: accepted, never
 * rings, as Bun's socket did), and a clean slate (`undefined` also forgets a
 * failure).
 */
export function setDoorbellForTests(mechanism: DoorbellMechanism | 'silent' | undefined): void {
  forced = mechanism;
  if (mechanism === undefined) failure = undefined;
}

interface BunFile {
  stream(): ReadableStream<Uint8Array>;
}
const bunFile = (globalThis as { Bun?: { file?: (fd: number) => BunFile } }).Bun?.file;

/** The mechanism this runtime's event loop watches a pipe with. */
export function defaultMechanism(): DoorbellMechanism {
  return runtime === 'bun' && typeof bunFile === 'function' ? 'stream' : 'socket';
}

const open = new Set<Doorbell>();
let watchdog: ReturnType<typeof setInterval> | undefined;

function watch(d: Doorbell): void {
  open.add(d);
  if (watchdog === undefined) {
    watchdog = setInterval(() => {
      for (const bell of open) bell.check();
    }, WATCH_MS);
    // The streams keep the process alive while they run; the watchdog never does.
    watchdog.unref?.();
  }
}

function unwatch(d: Doorbell): void {
  open.delete(d);
  if (open.size === 0 && watchdog !== undefined) {
    clearInterval(watchdog);
    watchdog = undefined;
  }
}

export class Doorbell {
  /** How JS hears it now: the runtime's mechanism, or `poll` once that was found dead. */
  mechanism: DoorbellMechanism;
  /** Why this doorbell polls, when it does because its mechanism was found dead. */
  failure: string | undefined;
  private heard = 0;
  /** The native side's count at the last watchdog tick, when JS had not heard all of it then. */
  private suspect = 0;
  private socket: import('node:net').Socket | null = null;
  private reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  private poller: ReturnType<typeof setInterval> | undefined;
  /** Bun's read of the descriptor, cancelled: the descriptor is closed only once it settled. */
  private letGo: Promise<void> | null = null;
  private closed = false;

  /**
   * Watches `opts.fd`. Throws an `ArrowDeviceError` where the descriptor
   * cannot be watched (out of descriptors, say); the descriptor is then
   * still the caller's.
   */
  constructor(private readonly opts: DoorbellOptions) {
    const m = forced ?? defaultMechanism();
    this.mechanism = m === 'silent' ? 'socket' : m;
    try {
      if (m === 'socket') this.openSocket();
      else if (m === 'stream') this.openStream();
      else if (m === 'poll') this.startPolling();
      // 'silent' (tests): the descriptor is held and never read.
    } catch (e) {
      throw new ArrowDeviceError('io', opts.what, `cannot watch its doorbell on ${runtimeName} (${m}): ${(e as Error).message}`, { cause: e });
    }
    watch(this);
  }

  private hear(bytes: number): void {
    this.heard += bytes;
    this.opts.onRing();
  }

  private openSocket(): void {
    const s = fdSocket(this.opts.fd);
    s.on('data', (b: Uint8Array) => this.hear(b.length));
    s.on('error', () => {});
    // The socket owns (and closes) the descriptor; it never keeps the process alive (the streams'
    // KeepAlive does while they run).
    s.unref();
    this.socket = s;
  }

  /** Bun: reading keeps the process alive while the doorbell is open; see `release`. */
  private openStream(): void {
    const reader = bunFile!(this.opts.fd).stream().getReader();
    this.reader = reader;
    const loop = async (): Promise<void> => {
      for (;;) {
        const r = await reader.read();
        if (r.done || this.closed) return;
        this.hear(r.value.length);
      }
    };
    loop().catch(() => {});
  }

  private startPolling(period = POLL_MS): void {
    if (this.poller !== undefined) clearInterval(this.poller);
    this.mechanism = 'poll';
    this.poller = setInterval(() => this.opts.onRing(), period);
    this.poller.unref?.();
  }

  /** @internal The watchdog's tick (see the file comment). */
  check(): void {
    if (this.closed || this.mechanism === 'poll') return;
    if (this.suspect > 0 && this.heard < this.suspect) {
      this.fail();
      return;
    }
    const rung = this.opts.rung();
    this.suspect = rung > this.heard ? rung : 0;
  }

  private fail(): void {
    const how = this.mechanism === 'stream' ? 'Bun.file(fd).stream()' : 'a net.Socket';
    const why =
      `the doorbell of ${this.opts.what} (a pipe watched with ${how}) was written and never heard on ${runtimeName}: ` +
      'this stream polls, and later async streams use JS callbacks';
    this.failure = why;
    if (failure === undefined) {
      failure = why;
      try {
        process.emitWarning(`arrow-device: ${why}`, { code: 'ARROW_DEVICE_DOORBELL' });
      } catch {
        // A runtime without warnings: the reason stays readable (nativeRingMissing).
      }
    }
    this.startPolling();
    this.opts.onRing(); // what was rung and not heard
  }

  /**
   * After this, the doorbell never keeps the process alive (a pump whose
   * consumer still holds batches after the stream). Bun's stream read
   * would: it is dropped for an unreferenced poll.
   */
  release(): void {
    if (this.closed || this.reader === null) return;
    this.startPolling(RELEASED_POLL_MS);
    this.letGo = this.cancelRead();
  }

  /**
   * Ends Bun's read. The descriptor stays open (and unread) until `close`:
   * the native side may still write, and a number closed under a pending
   * read could be reused by the next pipe and read here.
   */
  private cancelRead(): Promise<void> {
    const reader = this.reader!;
    this.reader = null;
    return reader.cancel().catch(() => {});
  }

  /** Stops watching and closes the descriptor (the native side closes the write end after). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    unwatch(this);
    if (this.poller !== undefined) clearInterval(this.poller);
    if (this.socket) {
      this.socket.destroy();
      return;
    }
    const fd = this.opts.fd;
    const closeFd = (): void => {
      try {
        closeSync(fd);
      } catch {
        // already closed
      }
    };
    const letGo = this.reader ? this.cancelRead() : this.letGo;
    if (letGo) void letGo.then(closeFd);
    else closeFd();
  }
}
