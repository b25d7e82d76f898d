/**
 * PROTOTYPE, test-only: a producer of the async device stream interface over
 * test/async/native-pump.c, the native piece that calls a native consumer's
 * handler from a thread of its own and answers the consumer's request,
 * cancel, extract_data and releases in C (see the C file). It measures what
 * the "small native piece" of issue 13 would buy on the producer side;
 * nothing in src/ uses it, and shipping it would need prebuilt binaries.
 *
 * Per batch it does what produceAsyncDeviceStream does (take a credit,
 * export the batch zero-copy, hand a task over, release the export when
 * the consumer is done with it), but nothing of the consumer waits for the
 * JS thread: JS is woken by a doorbell only when it waits for credit or for
 * the end. Per-task metadata is left out.
 */
import koffi from 'koffi';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Schema, type RecordBatch, type Struct } from 'apache-arrow';
import { Errno, exportDeviceArray, exportSchema, freeArrowSchema, nativeMemory, type Ptr } from '../../src/index.js';
import { run, tempDir, which } from '../helpers/tools.js';

const near = fileURLToPath(new URL('.', import.meta.url));
const here = existsSync(join(near, 'native-pump.c')) ? near : join(process.cwd(), 'test', 'async');
const cc = which('cc') ?? which('gcc');

export const nativePumpMissing: string | undefined =
  cc || process.env.ARROW_DEVICE_NATIVE_PUMP ? undefined : 'no C compiler (cc/gcc) to build the native pump prototype';

const CMD_SCHEMA = 1;
const CMD_TASK = 2;
const CMD_END = 3;
const CMD_ERROR = 4;
const CMD_RELEASE = 5;
const RELEASE = { name: 'release', result: 'void', params: ['pointer'] } as const;

type AsyncForm = { async: (...a: unknown[]) => void };

interface PumpLib {
  path: string;
  pumpNew: (handler: bigint, doorbell: unknown, deviceType: number, md: bigint) => bigint;
  task: (pump: bigint, array: bigint) => bigint;
  push: (pump: bigint, kind: number, code: number, ptr: bigint, md: bigint) => void;
  state: (pump: bigint, take: number, arm: number, out: BigInt64Array) => number;
  takeFreed: (pump: bigint, out: bigint, max: number) => number | bigint;
  doorbells: (pump: bigint) => number | bigint;
  free: AsyncForm;
  doorbellCb: unknown;
  arraySize: number;
}

const waiting = new Map<bigint, { rung: boolean; waiter: (() => void) | null }>();
let lib: PumpLib | undefined;

/** Builds the prototype (once) and registers its doorbell (at once, outside any callback). */
export function nativePump(): PumpLib {
  if (lib) return lib;
  nativeMemory(); // first: the library sets koffi's async stack size before any library is loaded
  let so = process.env.ARROW_DEVICE_NATIVE_PUMP ?? '';
  if (!so) {
    so = join(tempDir('native-pump'), 'libnativepump.so');
    run(cc!, ['-std=c11', '-D_GNU_SOURCE', '-O2', '-shared', '-fPIC', '-pthread', '-o', so, join(here, 'native-pump.c')]);
  }
  const l = koffi.load(so);
  const doorbellProto = koffi.proto('void native_pump_doorbell(void *pump)');
  lib = {
    path: so,
    pumpNew: l.func('void *pump_new(void *handler, void *doorbell, int32_t device_type, void *md)') as PumpLib['pumpNew'],
    task: l.func('void *pump_task(void *pump, void *array)') as PumpLib['task'],
    push: l.func('void pump_push(void *pump, int32_t kind, int32_t code, void *ptr, void *md)') as PumpLib['push'],
    state: l.func('int32_t pump_state(void *pump, int64_t take, int32_t arm, _Out_ int64_t *out)') as PumpLib['state'],
    takeFreed: l.func('int64_t pump_take_freed(void *pump, void *out, int64_t max)') as PumpLib['takeFreed'],
    doorbells: l.func('int64_t pump_doorbells(void *pump)') as PumpLib['doorbells'],
    free: l.func('void pump_free(void *pump)') as unknown as AsyncForm,
    doorbellCb: koffi.register((pump: unknown) => {
      const w = waiting.get(BigInt(pump as bigint));
      if (!w) return;
      w.rung = true;
      const f = w.waiter;
      w.waiter = null;
      f?.();
    }, koffi.pointer(doorbellProto)),
    arraySize: Number(l.func('int64_t pump_array_size(void)')() as number | bigint),
  };
  return lib;
}

export interface PumpResult {
  batches: number;
  end: 'complete' | 'cancelled' | 'error' | 'consumer-stopped';
  /** Doorbells rung (koffi hops into JS) over the stream. */
  doorbells: number;
}

/** Produces `batches` into a native consumer's handler through the pump; resolves once every export came back. */
export async function produceViaPump(batches: RecordBatch[], handler: Ptr): Promise<PumpResult> {
  const L = nativePump();
  const mem = nativeMemory();
  const keepAlive = setInterval(() => {}, 1 << 30); // koffi's queued callbacks do not hold the loop open
  const pump = BigInt(L.pumpNew(handler, L.doorbellCb, 1, 0n));
  const w = { rung: false, waiter: null as (() => void) | null };
  waiting.set(pump, w);
  const st = new BigInt64Array(7);
  const FREED_MAX = 64;
  const freedBuf = mem.alloc(L.arraySize * FREED_MAX);
  const out = mem.alloc(mem.layouts.ArrowDeviceArray.size);
  let exported = 0;
  let givenBack = 0;
  const bell = async (): Promise<void> => {
    if (!w.rung) await new Promise<void>((r) => (w.waiter = r));
    w.rung = false;
  };
  /** Releases (JS's own release, called directly) every array the consumer is done with. */
  const drainFreed = (): void => {
    for (;;) {
      const n = Number(L.takeFreed(pump, freedBuf, FREED_MAX));
      for (let i = 0; i < n; i++) {
        const a = freedBuf + BigInt(i * L.arraySize);
        const rel = mem.readPtr(a + BigInt(mem.layouts.ArrowArray.offsets.release!));
        if (rel !== 0n) mem.call(rel, RELEASE, a);
        givenBack++;
      }
      if (n < FREED_MAX) return;
    }
  };
  /** Waits until `done()` holds after a state read, arming the doorbell before each wait. */
  const until = async (done: () => boolean): Promise<void> => {
    for (;;) {
      drainFreed();
      L.state(pump, 0, 0, st);
      if (done()) return;
      L.state(pump, 0, 2, st);
      // Something moved between the two reads (a change, or arrays given back to release): look again.
      if (done() || st[6]! > 0n) continue;
      await bell();
    }
  };
  let end: PumpResult['end'] = 'complete';
  let i = 0;
  let errorMessage = 0n;
  try {
    const schema = exportSchema(new Schema((batches[0]!.data.type as Struct).children));
    L.push(pump, CMD_SCHEMA, 0, schema, 0n);
    await until(() => st[5]! >= 1n);
    freeArrowSchema(schema); // released by the consumer (or now), then freed
    if (st[3] !== 0n) end = 'consumer-stopped';
    while (end === 'complete') {
      drainFreed();
      const took = L.state(pump, 1, 0, st);
      if (st[1] !== 0n) end = 'cancelled';
      else if (st[2] !== 0n) end = 'error';
      else if (st[3] !== 0n) end = 'consumer-stopped';
      if (end !== 'complete') break;
      if (!took) {
        L.state(pump, 0, 1, st);
        if (st[0] === 0n && st[1] === 0n && st[2] === 0n && st[3] === 0n) await bell();
        continue;
      }
      if (i === batches.length) {
        L.push(pump, CMD_END, 0, 0n, 0n);
        break;
      }
      exportDeviceArray(batches[i++]!, { into: out });
      L.push(pump, CMD_TASK, 0, BigInt(L.task(pump, out)), 0n);
      exported++;
    }
    if (end === 'error') {
      const msg = new TextEncoder().encode('request: n must be > 0\0');
      errorMessage = mem.alloc(msg.length);
      mem.copyIn(errorMessage, msg);
      L.push(pump, CMD_ERROR, Errno.EINVAL, errorMessage, 0n);
    }
    L.push(pump, CMD_RELEASE, 0, 0n, 0n);
    await until(() => st[4] !== 0n && givenBack >= exported);
    return { batches: i, end, doorbells: Number(L.doorbells(pump)) };
  } finally {
    waiting.delete(pump);
    await new Promise<void>((res, rej) => L.free.async(pump, (e: unknown) => (e ? rej(e) : res())));
    mem.free(freedBuf);
    mem.free(out);
    if (errorMessage) mem.free(errorMessage);
    clearInterval(keepAlive);
  }
}
