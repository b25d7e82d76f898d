/** Stand-ins for ./node.ts in browser bundles: the native backend and CUDA need Node.js. */
import { ArrowDeviceError } from '../errors.js';

function unavailable(name: string): never {
  throw new ArrowDeviceError('unsupported', '', `${name} is not available in the browser: the native backend (koffi) and CUDA need Node.js`);
}

export const createRequire = (..._: unknown[]): NodeJS.Require => unavailable('node:module');
export const existsSync = (..._: unknown[]): boolean => unavailable('node:fs');
export const closeSync = (..._: unknown[]): void => unavailable('node:fs');
export const readdirSync = (..._: unknown[]): string[] => unavailable('node:fs');
export const homedir = (): string => unavailable('node:os');
export const join = (..._: string[]): string => unavailable('node:path');
export const dirname = (..._: string[]): string => unavailable('node:path');
export const fileURLToPath = (..._: unknown[]): string => unavailable('node:url');

/** Stand-in for node:net's Socket (the native async ring's doorbell; never used in a browser). */
export class Socket {
  constructor(..._: unknown[]) {
    unavailable('node:net');
  }
}
