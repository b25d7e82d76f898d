/** Stand-ins for ./node.ts in browser bundles: the native backend and CUDA need Node.js. */
import { ArrowDeviceError } from '../errors.js';

function unavailable(name: string): never {
  throw new ArrowDeviceError('unsupported', '', `${name} is not available in the browser: the native backend (koffi) and CUDA need Node.js`);
}

export const createRequire = (..._: unknown[]): NodeJS.Require => unavailable('node:module');
export const existsSync = (..._: unknown[]): boolean => unavailable('node:fs');
export const readdirSync = (..._: unknown[]): string[] => unavailable('node:fs');
export const homedir = (): string => unavailable('node:os');
export const join = (..._: string[]): string => unavailable('node:path');
