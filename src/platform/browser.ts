/** Stand-ins for ./node.ts in browser bundles: the native backend and CUDA need Node.js, Bun or Deno. */
import { ArrowDeviceError } from '../errors.js';

function unavailable(name: string): never {
  throw new ArrowDeviceError('unsupported', '', `${name} is not available in the browser: the native backend (koffi) and CUDA need Node.js, Bun or Deno`);
}

export const createRequire = (..._: unknown[]): NodeJS.Require => unavailable('node:module');
export const existsSync = (..._: unknown[]): boolean => unavailable('node:fs');
export const closeSync = (..._: unknown[]): void => unavailable('node:fs');
export const readdirSync = (..._: unknown[]): string[] => unavailable('node:fs');
export const homeDir = (): string | undefined => undefined;
export const join = (..._: string[]): string => unavailable('node:path');
export const dirname = (..._: string[]): string => unavailable('node:path');
export const fileURLToPath = (..._: unknown[]): string => unavailable('node:url');

/** Stand-in for node:net's Socket (the native async ring's doorbell; never used in a browser). */
export const fdSocket = (_: number): never => unavailable('node:net');
/** No Node.js builtins in a browser. */
export const builtin = (name: string): never => unavailable(name);

export type Runtime = 'node' | 'bun' | 'deno';
/** Never read in a browser (the native pieces are unavailable there); 'node' keeps the type. */
export const runtime: Runtime = 'node';
export const runtimeName = 'a browser';
/** No environment in a browser: every override is unset. */
export const envVar = (_: string): string | undefined => undefined;
export const envVars = (..._: string[]): NodeJS.ProcessEnv => ({});
/**
 * Browsers read wasm memory only, which cannot be detached (all views share
 * the module's one buffer; documented): nothing to require here.
 */
export const requireDetach = (_?: object): void => undefined;
/** Sharing between threads needs native memory, which a browser lacks (src/share refuses first). */
export const currentThread = (): { readonly id: number; readonly main: boolean } => unavailable('node:worker_threads');
export const onThreadExit = (_: () => void): void => undefined;
