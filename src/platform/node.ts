/**
 * The Node.js builtins arrow-device uses (the native backend, CUDA). In
 * browser bundles, package.json's "browser" field swaps this file for
 * browser.ts, so the library bundles without Node builtins.
 */
export { createRequire } from 'node:module';
export { closeSync, existsSync, readdirSync } from 'node:fs';
export { homedir } from 'node:os';
export { dirname, join } from 'node:path';
export { fileURLToPath } from 'node:url';
export { Socket } from 'node:net';
