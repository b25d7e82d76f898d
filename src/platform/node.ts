/**
 * The Node.js builtins arrow-device uses (the native backend, CUDA, the
 * async ring), and what it asks of the runtime. Node.js, Bun and Deno load
 * this file; in browser bundles, package.json's "browser" field swaps it
 * for browser.ts, so the library bundles without Node builtins.
 */
import { ArrowDeviceError } from '../errors.js';
import { createRequire as createRequireLocal } from 'node:module';

/** The builtins used, by name (types only: each is loaded by `builtin`, on first use). */
interface Builtins {
  'node:fs': typeof import('node:fs');
  'node:path': typeof import('node:path');
  'node:os': typeof import('node:os');
  'node:url': typeof import('node:url');
  'node:net': typeof import('node:net');
  'node:worker_threads': typeof import('node:worker_threads');
}
const builtins = new Map<string, unknown>();

/**
 * A Node.js builtin, loaded on first use: `process.getBuiltinModule`
 * (Node.js 22.3+, Bun, Deno), else `require`. Not a static `import`: an ESM
 * import of a builtin builds its module facade at load, which reads every
 * export (node:fs's stream getters load its streams): work every program
 * that imports arrow-device would pay whether it reaches that code or not
 * (issue 47; bench:startup's load lines show it).
 * node:module, needed first (koffi is `require`d), stays a static import.
 */
export function builtin<K extends keyof Builtins>(name: K): Builtins[K] {
  let m = builtins.get(name);
  if (m === undefined) {
    const get = (process as { getBuiltinModule?: (id: string) => unknown }).getBuiltinModule;
    m = typeof get === 'function' ? get(name) : createRequireLocal(import.meta.url)(name);
    builtins.set(name, m);
  }
  return m as Builtins[K];
}

export { createRequireLocal as createRequire };
export const existsSync = (path: string): boolean => builtin('node:fs').existsSync(path);
export const closeSync = (fd: number): void => builtin('node:fs').closeSync(fd);
export const readdirSync = (path: string): string[] => builtin('node:fs').readdirSync(path);
export const join = (...parts: string[]): string => builtin('node:path').join(...parts);
export const dirname = (path: string): string => builtin('node:path').dirname(path);
export const fileURLToPath = (url: string | URL): string => builtin('node:url').fileURLToPath(url);
/** A node:net Socket over a descriptor (the native async ring's doorbell). */
export const fdSocket = (fd: number): import('node:net').Socket => new (builtin('node:net').Socket)({ fd, readable: true, writable: false });

/** The JavaScript runtime: Bun and Deno say so in `process.versions`. */
export type Runtime = 'node' | 'bun' | 'deno';

export const runtime: Runtime = process.versions.bun !== undefined ? 'bun' : process.versions.deno !== undefined ? 'deno' : 'node';

/** The runtime and its version, for messages (`Node.js v22.12.0`, `Bun 1.4.5`, `Deno 2.9.6`). */
export const runtimeName: string =
  runtime === 'bun' ? `Bun ${process.versions.bun}` : runtime === 'deno' ? `Deno ${process.versions.deno}` : `Node.js ${process.version}`;

/**
 * An environment variable, or undefined where it is unset or may not be
 * read: Deno throws `NotCapable` for a variable outside its `--allow-env`,
 * and every variable arrow-device reads is an optional override, so a
 * denied read means "use the default".
 */
export function envVar(name: string): string | undefined {
  try {
    return process.env[name];
  } catch {
    return undefined;
  }
}

/** Several variables, read as `envVar` reads one (a denied or unset one is absent). */
export function envVars(...names: string[]): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const n of names) {
    const v = envVar(n);
    if (v !== undefined) out[n] = v;
  }
  return out;
}

/** The home directory, or undefined where it may not be read (Deno without --allow-env=HOME or --allow-sys). */
export function homeDir(): string | undefined {
  try {
    return builtin('node:os').homedir();
  } catch {
    return undefined;
  }
}

/**
 * Released means unreadable (docs/architecture.md#released-means-unreadable): a release detaches
 * every `ArrayBuffer` it handed out over foreign memory, with
 * `ArrayBuffer.prototype.transfer`. A runtime without it (Node.js 20 and
 * older) would leave a typed array that escaped before the release reading
 * freed memory, and its only other ways to detach (structuredClone,
 * postMessage) copy or refuse koffi's external buffers, so arrow-device
 * refuses to load there, before anything is imported, rather than weaken
 * that guarantee. Node.js 22+, Bun and Deno have it.
 */
export function requireDetach(proto: object = ArrayBuffer.prototype): void {
  if (typeof (proto as { transfer?: unknown }).transfer !== 'function') {
    throw new ArrowDeviceError(
      'unsupported',
      '',
      `arrow-device needs ArrayBuffer.prototype.transfer, which ${runtimeName} lacks: a release detaches the views it handed ` +
        'out so that none reads freed memory. Use Node.js 22 or newer, Bun or Deno.',
    );
  }
}

requireDetach();

/** node:worker_threads, loaded on first use (src/share only): a query never pays for it. */
interface WorkerThreads {
  readonly threadId: number;
  readonly isMainThread: boolean;
}
let workerThreads: WorkerThreads | undefined;

/**
 * This thread's id among the process's threads (`worker_threads.threadId`: 0 for the main thread,
 * unique within the process; Bun and Deno implement it too), and whether it is the main thread.
 */
export function currentThread(): { readonly id: number; readonly main: boolean } {
  workerThreads ??= builtin('node:worker_threads');
  return { id: workerThreads.threadId, main: workerThreads.isMainThread };
}

/**
 * Runs `fn` when this thread's `process` emits `exit`: a worker that ends
 * (its event loop empty, or `process.exit()`). A worker terminated from
 * outside (`worker.terminate()`) runs no JS: its parent learns it from the
 * `Worker`'s own `exit` event instead (src/share `share(x, { worker })`).
 */
export function onThreadExit(fn: () => void): void {
  process.once('exit', fn);
}
