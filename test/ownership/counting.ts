/**
 * The shared ownership fixture: test/ownership/counting.c, built at test time
 * with cc and bound with koffi. One C producer that counts outstanding
 * arrays (handed out, not released), their peak, releases and double
 * releases serves every ownership test, whichever importer it goes through.
 */
import koffi from 'koffi';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { existsSync } from 'node:fs';
import { nativeMemory, type Ptr } from '../../src/index.js';
import { cCompiler, prebuiltPeer, run, tempDir } from '../helpers/tools.js';

// The C source next to this file, or under the working directory's test/ when this file runs compiled (benchmarks).
const near = fileURLToPath(new URL('.', import.meta.url));
const here = existsSync(join(near, 'counting.c')) ? near : join(process.cwd(), 'test', 'ownership');
const cc = cCompiler();

/** Why the fixture cannot be built here, or undefined when it can. */
export const countingMissing: string | undefined = cc || process.env.ARROW_DEVICE_TEST_PEERS ? undefined : 'no C compiler (cc/gcc) to build the counting producer';

export interface Counting {
  /** Arrays handed out and not released yet. */
  outstanding(): number;
  /** The most arrays outstanding at once since the last `resetPeak`. */
  peak(): number;
  resetPeak(): void;
  releases(): number;
  doubleReleases(): number;
  streamReleases(): number;
  schemaReleases(): number;
  /** A new ArrowSchema (struct<x: int32>) in memory we allocated. */
  schema(): Ptr;
  /** A new ArrowArray of `rows` rows, x = start + i, in memory we allocated. */
  batch(rows: number, start?: number): Ptr;
  /** A new CPU ArrowDeviceArray, as `batch`. */
  deviceBatch(rows: number, start?: number): Ptr;
  /** A new ArrowArrayStream of `n` batches of `rows` rows. */
  stream(n: number, rows: number): Ptr;
  /** A new CPU ArrowDeviceArrayStream of `n` batches of `rows` rows. */
  deviceStream(n: number, rows: number): Ptr;
  /**
   * A new ArrowArrayStream of `n` batches of `rows` rows whose get_next sleeps `sleepMs` per call
   * and fails with `failCode` when asked for batch `failAt` (message `cp: batch <i> failed`).
   */
  slowStream(n: number, rows: number, opts?: { sleepMs?: number; failAt?: number; failCode?: number }): Ptr;
  /** Fills `out` (an ArrowArrayStream we allocated) as `slowStream` does; returns the C status. */
  fillSlowStream(out: Ptr, n: number, rows: number, opts?: { sleepMs?: number; failAt?: number; failCode?: number }): number;
  /** More about a slow stream's failure, asked of the live stream (null when released, or no failure). */
  streamErrorDetail(stream: Ptr): string | null;
  /** Calls of a slow stream's get_next on a thread other than the one that made it. */
  offThreadCalls(): number;
  /** The C fill functions themselves, for a struct someone else allocated: each returns the C status. */
  readonly fill: {
    schema(out: Ptr): number;
    batch(out: Ptr, rows: number, start?: number): number;
    deviceBatch(out: Ptr, rows: number, start?: number): number;
    deviceStream(out: Ptr, n: number, rows: number): number;
  };
  /** The C consumers: the koffi functions, for code that calls them as a user would (`.async` too). */
  readonly lib: {
    /** `int cp_consume(struct ArrowSchema*, struct ArrowArray*)`: reads the length, releases both. */
    consume: KoffiFunction;
    /** `int64_t cp_consume_stream(struct ArrowArrayStream*)`: reads every batch, releases the stream. */
    consume_stream: KoffiFunction;
    /** `int cp_make_stream(struct ArrowArrayStream* out, int64_t n, int64_t rows)`: a producer that fills a stream. */
    make_stream: KoffiFunction;
  };
  /** Rows the C consumers have read. */
  consumedRows(): number;
}

/** A koffi function: callable, and with koffi's `.async(...args, callback)` form. */
export type KoffiFunction = ((...args: unknown[]) => unknown) & { async: (...args: unknown[]) => void };

let fixture: Counting | undefined;
let built: string | undefined;

/**
 * The path of the built fixture library: code that must not use this
 * package (a hand-written protocol peer, test/protocol) loads it with koffi
 * itself; the counters are the same (one library per process).
 */
export function countingLibrary(): string {
  if (built) return built;
  const prebuilt = prebuiltPeer('counting');
  if (prebuilt) return (built = prebuilt);
  const so = join(tempDir('counting'), 'libcounting.so');
  run(cc!, ['-std=c11', '-O1', '-shared', '-fPIC', '-pthread', '-I', join(here, '..', 'include'), '-o', so, join(here, 'counting.c')]);
  return (built = so);
}

export function counting(): Counting {
  if (fixture) return fixture;
  const lib = koffi.load(countingLibrary());
  const i64 = (name: string) => {
    const f = lib.func(`int64_t ${name}(void)`);
    return (): number => Number(f() as number | bigint);
  };
  const make = (decl: string) => lib.func(decl) as (...a: unknown[]) => number;
  const mkSchema = make('int cp_make_schema(uintptr_t out)');
  const mkBatch = make('int cp_make_batch(uintptr_t out, int64_t rows, int32_t start)');
  const mkDevBatch = make('int cp_make_device_batch(uintptr_t out, int64_t rows, int32_t start)');
  const mkStream = make('int cp_make_stream(uintptr_t out, int64_t n, int64_t rows)');
  const mkDevStream = make('int cp_make_device_stream(uintptr_t out, int64_t n, int64_t rows)');
  const resetPeak = lib.func('void cp_reset_peak(void)');
  const mkSlow = make('int cp_make_slow_stream(uintptr_t out, int64_t n, int64_t rows, int64_t fail_at, int32_t code, int64_t sleep_ms)');
  const detail = lib.func('const char *cp_stream_error_detail(uintptr_t stream)') as (p: Ptr) => string | null;
  const fillSlow = (p: Ptr, n: number, rows: number, o: { sleepMs?: number; failAt?: number; failCode?: number } = {}): number =>
    mkSlow(p, n, rows, o.failAt ?? -1, o.failCode ?? 5, o.sleepMs ?? 0);
  const m = nativeMemory();
  const into = (size: number, fill: (p: Ptr) => number): Ptr => {
    const p = m.alloc(size);
    const rc = fill(p);
    if (rc !== 0) {
      m.free(p);
      throw new Error(`counting producer: rc ${rc}`);
    }
    return p;
  };
  fixture = {
    lib: {
      consume: lib.func('int cp_consume(uintptr_t schema, uintptr_t array)') as unknown as KoffiFunction,
      consume_stream: lib.func('int64_t cp_consume_stream(uintptr_t stream)') as unknown as KoffiFunction,
      make_stream: lib.func('int cp_make_stream(uintptr_t out, int64_t n, int64_t rows)') as unknown as KoffiFunction,
    },
    consumedRows: i64('cp_consumed_rows'),
    outstanding: i64('cp_outstanding'),
    peak: i64('cp_peak'),
    resetPeak: () => void resetPeak(),
    releases: i64('cp_releases'),
    doubleReleases: i64('cp_double_releases'),
    streamReleases: i64('cp_stream_releases'),
    schemaReleases: i64('cp_schema_releases'),
    schema: () => into(m.layouts.ArrowSchema.size, (p) => mkSchema(p)),
    batch: (rows, start = 0) => into(m.layouts.ArrowArray.size, (p) => mkBatch(p, rows, start)),
    deviceBatch: (rows, start = 0) => into(m.layouts.ArrowDeviceArray.size, (p) => mkDevBatch(p, rows, start)),
    stream: (n, rows) => into(m.layouts.ArrowArrayStream.size, (p) => mkStream(p, n, rows)),
    deviceStream: (n, rows) => into(m.layouts.ArrowDeviceArrayStream.size, (p) => mkDevStream(p, n, rows)),
    slowStream: (n, rows, o) => into(m.layouts.ArrowArrayStream.size, (p) => fillSlow(p, n, rows, o)),
    fillSlowStream: fillSlow,
    streamErrorDetail: (p) => detail(p),
    offThreadCalls: i64('cp_off_thread_calls'),
    fill: {
      schema: (p) => mkSchema(p),
      batch: (p, rows, start = 0) => mkBatch(p, rows, start),
      deviceBatch: (p, rows, start = 0) => mkDevBatch(p, rows, start),
      deviceStream: (p, n, rows) => mkDevStream(p, n, rows),
    },
  };
  return fixture;
}
