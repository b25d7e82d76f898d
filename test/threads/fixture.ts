/**
 * The threads fixture (test/threads/shared.c), built at test time with cc
 * (or taken prebuilt: tools/windows.mjs builds it as a DLL) and bound with
 * koffi. Every thread that loads it gets the same library, so the same
 * counters: a worker and the main thread see one count of releases.
 */
import koffi from 'koffi';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nativeMemory, type Ptr } from '../../src/index.js';
import { cCompiler, prebuiltPeer, run, tempDir } from '../helpers/tools.js';

const near = fileURLToPath(new URL('.', import.meta.url));
const here = existsSync(join(near, 'shared.c')) ? near : join(process.cwd(), 'test', 'threads');
const cc = cCompiler();

/** Why the fixture cannot be built here, or undefined when it can. */
export const sharedMissing: string | undefined = cc || process.env.ARROW_DEVICE_TEST_PEERS ? undefined : 'no C compiler (cc/gcc) to build the threads fixture';

export interface SharedFixture {
  /** The path of the built library (a worker loads the same one). */
  readonly path: string;
  /** The calling thread (pthread_self), as a number. */
  thread(): bigint;
  outstanding(): number;
  releases(): number;
  doubleReleases(): number;
  /** The thread that ran the last release. */
  lastReleaseThread(): bigint;
  /** A new ArrowSchema struct<id: int64, v: float64>, in memory we allocated. */
  schema(): Ptr;
  /** A new ArrowArray of `rows` rows (id = start + i, v = id * 0.5), in memory we allocated. */
  batch(rows: number, start?: number): Ptr;
  /** The same as a CPU ArrowDeviceArray. */
  deviceBatch(rows: number, start?: number): Ptr;
}

/** Built once per process: a worker passes the path it was given (`SHARED_FIXTURE`), or builds its own. */
export function sharedLibrary(): string {
  const given = process.env.ARROW_DEVICE_SHARED_FIXTURE;
  if (given) return given;
  const prebuilt = prebuiltPeer('threadsfixture');
  const path = prebuilt ?? join(tempDir('threads'), 'libthreads.so');
  if (!prebuilt) run(cc!, ['-std=c11', '-O1', '-shared', '-fPIC', '-pthread', '-I', join(here, '..', 'include'), '-o', path, join(here, 'shared.c')]);
  // Workers of this process inherit the environment: they load the same file, so the same library.
  process.env.ARROW_DEVICE_SHARED_FIXTURE = path;
  return path;
}

let fixture: SharedFixture | undefined;

export function sharedFixture(): SharedFixture {
  if (fixture) return fixture;
  const path = sharedLibrary();
  const lib = koffi.load(path);
  const num = (decl: string): (() => number) => {
    const f = lib.func(decl) as () => number | bigint;
    return () => Number(f());
  };
  const big = (decl: string): (() => bigint) => {
    const f = lib.func(decl) as () => number | bigint;
    return () => BigInt(f());
  };
  const mkSchema = lib.func('int sp_make_schema(uintptr_t out)') as (p: Ptr) => number;
  const mkBatch = lib.func('int sp_make_batch(uintptr_t out, int64_t rows, int64_t start)') as (p: Ptr, r: number, s: number) => number;
  const mkDev = lib.func('int sp_make_device_batch(uintptr_t out, int64_t rows, int64_t start)') as (p: Ptr, r: number, s: number) => number;
  const m = nativeMemory();
  const into = (size: number, fill: (p: Ptr) => number): Ptr => {
    const p = m.alloc(size);
    const rc = fill(p);
    if (rc !== 0) {
      m.free(p);
      throw new Error(`threads fixture: rc ${rc}`);
    }
    return p;
  };
  fixture = {
    path,
    thread: big('uint64_t sp_thread(void)'),
    outstanding: num('int64_t sp_outstanding(void)'),
    releases: num('int64_t sp_releases(void)'),
    doubleReleases: num('int64_t sp_double_releases(void)'),
    lastReleaseThread: big('uint64_t sp_last_release_thread(void)'),
    schema: () => into(m.layouts.ArrowSchema.size, mkSchema),
    batch: (rows, start = 0) => into(m.layouts.ArrowArray.size, (p) => mkBatch(p, rows, start)),
    deviceBatch: (rows, start = 0) => into(m.layouts.ArrowDeviceArray.size, (p) => mkDev(p, rows, start)),
  };
  return fixture;
}
