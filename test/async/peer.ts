/** Builds test/async/peer.c at test time and binds it with koffi (see the C file for what it does). */
import koffi from 'koffi';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { cCompiler, prebuiltPeer, run, tempDir } from '../helpers/tools.js';

// The C source next to this file, or under the working directory's test/ when this file runs compiled (benchmarks).
const near = fileURLToPath(new URL('.', import.meta.url));
const here = existsSync(join(near, 'peer.c')) ? near : join(process.cwd(), 'test', 'async');
const cc = cCompiler();

export const peerMissing: string | undefined = cc || process.env.ARROW_DEVICE_ASYNC_PEER || process.env.ARROW_DEVICE_TEST_PEERS ? undefined : 'no C compiler (cc/gcc) to build the async test peer';

type Fn<T extends (...args: never[]) => unknown> = T & { async: (...args: unknown[]) => void };

export interface AsyncPeer {
  produce(handler: bigint, batches: number, rows: number, errorAt: number): bigint;
  /** errorAt -4: lets the producer send the end. */
  go(p: bigint): void;
  /** Whether the producer has called the handler's release. */
  released(p: bigint): boolean;
  /** How many tasks the producer has pushed so far. */
  produced(p: bigint): number;
  /** Joins the producer thread: produced, extracted, extracted_null, requests, max_credit, cancelled, schema_rc, next_rc. */
  produceWait(p: bigint): Promise<ProducerStats>;
  /** misbehave: see peer.c. failAt: on_next_task refuses that task (extracts it with NULL, returns EIO); hold: keeps every batch until after the release. */
  consumer(initialRequest: number, cancelAfter: number, requestZero: boolean, opts?: { failAt?: number; hold?: boolean; misbehave?: number }): bigint;
  consumerWait(handler: bigint, timeoutMs: number): Promise<ConsumerStats>;
  liveBatches(): number;
}

export interface ProducerStats {
  produced: number;
  extracted: number;
  extractedNull: number;
  requests: number;
  maxCredit: number;
  cancelled: boolean;
  schemaRc: number;
  nextRc: number;
  /** request and cancel calls that came after the producer had released the handler (a bug). */
  callsAfterRelease: number;
}

export interface ConsumerStats {
  timedOut: boolean;
  batches: number;
  rows: number;
  sum: bigint;
  errors: number;
  errorCode: number;
  released: number;
  extractedNull: number;
  endOfStream: boolean;
  bad: number;
  schemaChildren: number;
  /** Handler callbacks made on the thread that created the consumer (the JS thread). */
  callsOnCreatorThread: number;
  message: string;
  schemaFormat: string;
  additionalMetadata: Uint8Array;
  /** Tasks that came with one metadata pair, and the sum of their values (decimal numbers). */
  taskMetadata: number;
  taskMetadataSum: number;
  /** on_next_task calls after the consumer returned non-zero from one (a producer's bug). */
  callsAfterRefusal: number;
  /** extract_data called again (misbehave 1) and refused, nothing moved. */
  badExtractsRefused: number;
}

let peer: AsyncPeer | undefined;
let peerPath: string | undefined;

/** The built peer library's path (for benchmarks that bind more of it). */
export function asyncPeerPath(): string {
  asyncPeer();
  return peerPath!;
}

function callAsync<R>(fn: Fn<(...a: never[]) => R>, ...args: unknown[]): Promise<R> {
  return new Promise((resolve, reject) => fn.async(...args, (err: unknown, r: R) => (err ? reject(err) : resolve(r))));
}

const cstr = (b: Uint8Array): string => new TextDecoder().decode(b.subarray(0, b.indexOf(0) < 0 ? b.length : b.indexOf(0)));

export function asyncPeer(): AsyncPeer {
  if (peer) return peer;
  // A benchmark's child processes reuse the library their parent built (it passes the path).
  let so = process.env.ARROW_DEVICE_ASYNC_PEER || prebuiltPeer('asyncpeer') || '';
  if (!so) {
    so = join(tempDir('async-peer'), 'libasyncpeer.so');
    run(cc!, ['-std=c11', '-D_GNU_SOURCE', '-O1', '-shared', '-fPIC', '-pthread', '-o', so, join(here, 'peer.c')]);
  }
  peerPath = so;
  const lib = koffi.load(so);
  const produce = lib.func('void *peer_produce(void *handler, int64_t n, int64_t rows, int64_t error_at)');
  const produceWait = lib.func('void peer_produce_wait(void *p, _Out_ int64_t *stats)') as unknown as Fn<(p: bigint, s: BigInt64Array) => void>;
  const consumer = lib.func('void *peer_consumer(int64_t initial, int64_t cancel_after, int request_zero, int64_t fail_at, int hold, int misbehave)');
  const consumerWait = lib.func(
    'void peer_consumer_wait(void *h, int64_t timeout_ms, _Out_ int64_t *stats, _Out_ uint8_t *msg, _Out_ uint8_t *fmt, _Out_ uint8_t *md)',
  ) as unknown as Fn<(...a: unknown[]) => void>;
  const live = lib.func('int64_t peer_live_batches(void)');
  const go = lib.func('void peer_go(void *p)');
  const releasedFn = lib.func('int peer_released(void *p)');
  const producedFn = lib.func('int64_t peer_produced(void *p)');
  peer = {
    produce: (h, n, rows, errorAt) => BigInt(produce(h, n, rows, errorAt) as bigint),
    go: (p) => void go(p),
    released: (p) => (releasedFn(p) as number) !== 0,
    produced: (p) => Number(producedFn(p) as number | bigint),
    async produceWait(p) {
      const s = new BigInt64Array(9);
      await callAsync(produceWait, p, s);
      const n = Array.from(s, Number);
      return {
        produced: n[0]!, extracted: n[1]!, extractedNull: n[2]!, requests: n[3]!, maxCredit: n[4]!,
        cancelled: n[5] === 1, schemaRc: n[6]!, nextRc: n[7]!, callsAfterRelease: n[8]!,
      };
    },
    consumer: (initial, cancelAfter, requestZero, opts = {}) =>
      BigInt(consumer(initial, cancelAfter, requestZero ? 1 : 0, opts.failAt ?? -1, opts.hold ? 1 : 0, opts.misbehave ?? 0) as bigint),
    async consumerWait(h, timeoutMs) {
      const s = new BigInt64Array(15);
      const msg = new Uint8Array(128);
      const fmt = new Uint8Array(16);
      const md = new Uint8Array(64);
      await callAsync(consumerWait, h, timeoutMs, s, msg, fmt, md);
      const n = Array.from(s, Number);
      return {
        timedOut: n[0] === -1, batches: n[0]!, rows: n[1]!, sum: s[2]!, errors: n[3]!, errorCode: n[4]!, released: n[5]!,
        extractedNull: n[6]!, endOfStream: n[7] === 1, bad: n[8]!, schemaChildren: n[9]!, callsOnCreatorThread: n[10]!,
        message: cstr(msg), schemaFormat: cstr(fmt), additionalMetadata: md, taskMetadata: n[11]!, taskMetadataSum: n[12]!,
        callsAfterRefusal: n[13]!, badExtractsRefused: n[14]!,
      };
    },
    liveBatches: () => Number(live() as number | bigint),
  };
  return peer;
}
