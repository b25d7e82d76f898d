/**
 * Async device stream benchmark: batches per second and per-batch latency
 * through the ArrowAsyncDeviceStreamHandler, with the producer on a native
 * thread (test/async/peer.c) and on the JS thread (our producer into our
 * reader), and our producer into a native consumer thread; plus the cost of
 * one cross-thread callback into JS, measured in the same run, which is
 * where most of the time goes.
 *
 *   npm run bench:async
 */
import koffi from 'koffi';
import { Table, vectorFromArray, type RecordBatch } from 'apache-arrow';
import { createAsyncDeviceStreamReader, produceAsyncDeviceStream } from '../src/index.js';
import { asyncPeer, asyncPeerPath } from '../test/async/peer.js';

const N = Number(process.argv[2] ?? 5000);
const peer = asyncPeer();
const us = (ms: number, n: number): string => `${((ms * 1000) / n).toFixed(1)} us`;

async function nativeProducer(queueSize: number): Promise<{ ms: number; latency: number[] }> {
  const reader = createAsyncDeviceStreamReader({ queueSize });
  const t0 = performance.now();
  const p = peer.produce(reader.handler, N, 8, -1);
  const latency: number[] = [];
  let last = performance.now();
  for await (const _ of reader) {
    const now = performance.now();
    latency.push(now - last);
    last = now;
  }
  const ms = performance.now() - t0;
  await peer.produceWait(p);
  return { ms, latency };
}

function batches(n: number): RecordBatch[] {
  const b = new Table({ x: vectorFromArray(Int32Array.from({ length: 8 }, (_, i) => i)) }).batches[0]!;
  return Array.from({ length: n }, () => b);
}

async function jsToJs(queueSize: number): Promise<number> {
  const reader = createAsyncDeviceStreamReader({ queueSize });
  const t0 = performance.now();
  const done = produceAsyncDeviceStream(batches(N), reader.handler);
  for await (const _ of reader);
  await done;
  return performance.now() - t0;
}

async function jsToNative(): Promise<number> {
  const h = peer.consumer(8, -1, false);
  const t0 = performance.now();
  await produceAsyncDeviceStream(batches(N), h);
  await peer.consumerWait(h, 60_000);
  return performance.now() - t0;
}

async function crossThreadCallback(): Promise<number> {
  const proto = koffi.proto('void bench_cb(int64_t)');
  let count = 0;
  const cb = koffi.register(() => void count++, koffi.pointer(proto));
  const fn = koffi.load(asyncPeerPath()).func('void peer_call_from_thread(void *fn, int64_t n)') as unknown as {
    async: (...a: unknown[]) => void;
  };
  const t0 = performance.now();
  await new Promise<void>((resolve, reject) => fn.async(cb, N, (e: unknown) => (e ? reject(e) : resolve())));
  const ms = performance.now() - t0;
  koffi.unregister(cb);
  if (count !== N) throw new Error(`callback ran ${count} times, not ${N}`);
  return ms;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const p99 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)]!;

console.log(`async device stream bench: ${N} batches of 8 int32 rows, node ${process.version}`);
for (const q of [1, 8]) {
  const { ms, latency } = await nativeProducer(q);
  console.log(
    `native producer thread -> our reader, queue ${q}: ${((N / ms) * 1000).toFixed(0)} batches/s, ${us(ms, N)} per batch; ` +
      `gap between batches median ${(median(latency) * 1000).toFixed(1)} us, p99 ${(p99(latency) * 1000).toFixed(1)} us`,
  );
}
for (const q of [1, 8]) {
  const ms = await jsToJs(q);
  console.log(`our producer (JS thread) -> our reader, queue ${q}: ${((N / ms) * 1000).toFixed(0)} batches/s, ${us(ms, N)} per batch`);
}
{
  const ms = await jsToNative();
  console.log(`our producer (JS thread) -> native consumer thread: ${((N / ms) * 1000).toFixed(0)} batches/s, ${us(ms, N)} per batch`);
}
{
  const ms = await crossThreadCallback();
  console.log(`one empty callback from a native thread into JS (koffi's queue): ${us(ms, N)}`);
}
