/**
 * PROTOTYPE, test-only: a reader of the async device stream interface over
 * test/async/native-ring.c, the native handler that queues the producer's
 * calls in a ring and wakes JS once per burst (see the C file). It measures
 * what the "small native piece" of issue 13 would buy; nothing in src/ uses
 * it, and shipping it would need prebuilt binaries (see the closing note).
 *
 * What it does per batch is what AsyncDeviceStreamReader does (the task
 * moved out with its metadata decoded, extraction, import against the
 * stream's schema, the batch before released, back-pressure), but the
 * producer never waits for the JS thread, and JS takes the ring's
 * contents in one call per burst and requests in one call per burst.
 */
import koffi from 'koffi';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  importDeviceRecordBatch, importSchemaNode, nativeMemory, releaseImport, type ImportedRecordBatch, type Ptr, type SchemaNode,
} from '../../src/index.js';
import { AsyncStreamError } from '../../src/async/consumer.js';
import { readMetadata, type Metadata } from '../../src/schema/metadata.js';
import { run, tempDir, which } from '../helpers/tools.js';

const near = fileURLToPath(new URL('.', import.meta.url));
const here = existsSync(join(near, 'native-ring.c')) ? near : join(process.cwd(), 'test', 'async');
const cc = which('cc') ?? which('gcc');

export const nativeRingMissing: string | undefined =
  cc || process.env.ARROW_DEVICE_NATIVE_RING ? undefined : 'no C compiler (cc/gcc) to build the native ring prototype';

const EVENT_BYTES = 40;
const EV_TASK = 1;
const EV_END = 2;
const EV_ERROR = 3;
const EV_RELEASE = 4;
const REQUEST = { name: 'async_request', result: 'void', params: ['pointer', 'int64'] } as const;
const CANCEL = { name: 'async_cancel', result: 'void', params: ['pointer'] } as const;
const EXTRACT = { name: 'async_extract_data', result: 'int32', params: ['pointer', 'pointer'] } as const;

interface RingLib {
  path: string;
  ringNew: (doorbell: unknown, onSchema: unknown, priv: bigint, capacity: number) => bigint;
  take: (ring: bigint, out: Uint8Array, max: number) => number | bigint;
  doorbells: (ring: bigint) => number | bigint;
  freeCopy: (p: bigint) => void;
  free: (ring: bigint) => void;
  doorbellCb: unknown;
  onSchemaCb: unknown;
}

const readers = new Map<bigint, NativeRingReader>();
let lib: RingLib | undefined;

/** Builds the prototype (once) and registers its two JS callbacks (at once, outside any callback). */
export function nativeRing(): RingLib {
  if (lib) return lib;
  const mem = nativeMemory(); // first: the library sets koffi's async stack size before any library is loaded
  let so = process.env.ARROW_DEVICE_NATIVE_RING ?? '';
  if (!so) {
    so = join(tempDir('native-ring'), 'libnativering.so');
    run(cc!, ['-std=c11', '-D_GNU_SOURCE', '-O2', '-shared', '-fPIC', '-pthread', '-o', so, join(here, 'native-ring.c')]);
  }
  const l = koffi.load(so);
  const doorbellProto = koffi.proto('void native_ring_doorbell(void *ring)');
  const onSchemaProto = koffi.proto('int native_ring_on_schema(void *handler, void *schema)');
  const size = Number(l.func('int64_t ring_event_size(void)')() as number | bigint);
  if (size !== EVENT_BYTES) throw new Error(`ring_event is ${size} bytes, the reader reads ${EVENT_BYTES}`);
  lib = {
    path: so,
    ringNew: l.func('void *ring_new(void *doorbell, void *on_schema, void *priv, int64_t capacity)') as RingLib['ringNew'],
    take: l.func('int64_t ring_take(void *ring, uint8_t *out, int64_t max)') as RingLib['take'],
    doorbells: l.func('int64_t ring_doorbells(void *ring)') as RingLib['doorbells'],
    freeCopy: l.func('void ring_free_copy(void *p)') as RingLib['freeCopy'],
    free: l.func('void ring_free(void *ring)') as RingLib['free'],
    doorbellCb: koffi.register((ring: unknown) => readers.get(BigInt(ring as bigint))?.ring(), koffi.pointer(doorbellProto)),
    onSchemaCb: koffi.register(
      (h: unknown, s: unknown) => readers.get(BigInt(h as bigint))?.onSchema(BigInt(s as bigint)) ?? 22,
      koffi.pointer(onSchemaProto),
    ),
  };
  void mem;
  return lib;
}

interface Pending {
  task: Uint8Array;
  metadata: Metadata | null;
}

/** The prototype reader: `for await` yields record batches, releasing each when it moves on. */
export class NativeRingReader implements AsyncIterable<ImportedRecordBatch> {
  /** The ArrowAsyncDeviceStreamHandler to give the producer (the ring). */
  readonly handler: Ptr;
  private readonly mem = nativeMemory();
  private readonly lib = nativeRing();
  private readonly buf = new Uint8Array(EVENT_BYTES * 64);
  private node: SchemaNode | null = null;
  private producer: Ptr = 0n;
  private rung = false;
  private waiter: (() => void) | null = null;
  private freed = false;
  /** Tasks extracted with a NULL out (after a break). */
  discarded = 0;
  /** Doorbells the producer rang (koffi hops), read when the ring is freed. */
  doorbells = 0;

  constructor(private readonly queueSize: number) {
    this.handler = BigInt(this.lib.ringNew(this.lib.doorbellCb, this.lib.onSchemaCb, 0n, queueSize + 4));
    readers.set(this.handler, this);
  }

  /** The doorbell: the ring got something while JS waited for it (a koffi hop from the producer's thread). */
  ring(): void {
    this.rung = true;
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  /** on_schema, forwarded by the ring: the one call per stream that waits for JS. */
  onSchema(schema: Ptr): number {
    try {
      this.node = importSchemaNode(schema);
      this.producer = this.mem.readPtr(this.handler + BigInt(this.mem.layouts.ArrowAsyncDeviceStreamHandler.offsets.producer!));
      this.request(this.queueSize);
      this.ring();
      return 0;
    } catch {
      return 22; // EINVAL
    }
  }

  private request(n: number): void {
    const fn = this.mem.readPtr(this.producer + BigInt(this.mem.layouts.ArrowAsyncProducer.offsets.request!));
    this.mem.call(fn, REQUEST, this.producer, BigInt(n));
  }

  private extract(task: Uint8Array, out: Ptr): number {
    const m = this.mem;
    const t = m.alloc(task.length);
    try {
      m.copyIn(t, task);
      return m.call(m.readPtr(t), EXTRACT, t, out) as number;
    } finally {
      m.free(t);
    }
  }

  /** Takes what the ring holds: the tasks in `pending`, and the stream's state. */
  /** Returns how many calls it took: none arms the doorbell, wait for it then. */
  private drain(pending: Pending[], state: { ended: boolean; released: boolean; error: AsyncStreamError | null }): number {
    if (this.freed) return 0; // the release was taken: the ring is gone
    const n = Number(this.lib.take(this.handler, this.buf, 64));
    const dv = new DataView(this.buf.buffer, this.buf.byteOffset, n * EVENT_BYTES);
    for (let i = 0; i < n; i++) {
      const o = i * EVENT_BYTES;
      const kind = dv.getInt32(o, true);
      const code = dv.getInt32(o + 4, true);
      const md = dv.getBigUint64(o + 24, true);
      const msg = dv.getBigUint64(o + 32, true);
      let metadata: Metadata | null = null;
      if (md !== 0n) {
        metadata = readMetadata(this.mem, md, 'on_next_task.metadata');
        this.lib.freeCopy(md);
      }
      if (kind === EV_TASK) {
        pending.push({ task: this.buf.slice(o + 8, o + 24), metadata });
      } else if (kind === EV_END) {
        state.ended = true;
      } else if (kind === EV_ERROR) {
        const text = msg === 0n ? null : this.mem.readCString(msg);
        if (msg !== 0n) this.lib.freeCopy(msg);
        state.error ??= new AsyncStreamError(code, text, metadata);
      } else if (kind === EV_RELEASE) {
        state.released = true;
      }
    }
    if (state.released && !this.freed) {
      // Every call is in our hands: nothing calls the handler any more.
      this.doorbells = Number(this.lib.doorbells(this.handler));
      this.lib.free(this.handler);
      readers.delete(this.handler);
      this.freed = true;
    }
    return n;
  }

  private async waitForBell(): Promise<void> {
    if (!this.rung) await new Promise<void>((r) => (this.waiter = r));
    this.rung = false;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ImportedRecordBatch> {
    const keepAlive = setInterval(() => {}, 1 << 30); // koffi's queued callbacks do not hold the loop open
    const m = this.mem;
    const out = m.alloc(m.layouts.ArrowDeviceArray.size);
    const pending: Pending[] = [];
    const state = { ended: false, released: false, error: null as AsyncStreamError | null };
    let current: ImportedRecordBatch | null = null;
    let complete = false;
    try {
      while (this.node === null) await this.waitForBell();
      for (;;) {
        this.drain(pending, state);
        if (pending.length === 0) {
          if (state.error) throw state.error;
          if (state.ended || state.released) {
            complete = true;
            return;
          }
          await this.waitForBell();
          continue;
        }
        // Back-pressure in one call per burst: as many as just left the ring (at most queueSize ahead).
        if (!state.ended && !state.released && !state.error) this.request(pending.length);
        for (let p = pending.shift(); p; p = pending.shift()) {
          if (current) releaseImport(current);
          current = null;
          const rc = this.extract(p.task, out);
          if (rc !== 0) throw new AsyncStreamError(rc, 'extract_data failed', null);
          current = importDeviceRecordBatch(out, this.node) as ImportedRecordBatch;
          yield current;
        }
      }
    } finally {
      if (current) releaseImport(current);
      if (!complete && !state.released) {
        // break: cancel, then clean up every task that still arrives until the producer releases.
        const fn = m.readPtr(this.producer + BigInt(m.layouts.ArrowAsyncProducer.offsets.cancel!));
        m.call(fn, CANCEL, this.producer);
      }
      for (;;) {
        for (const p of pending.splice(0)) {
          this.extract(p.task, 0n);
          this.discarded++;
        }
        if (state.released) break;
        if (this.drain(pending, state) === 0) await this.waitForBell();
      }
      m.free(out);
      clearInterval(keepAlive);
    }
  }
}
