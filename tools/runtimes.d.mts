// Types for tools/runtimes.mjs (plain JavaScript for any Node), for the tests that import it.
export interface Runner {
  cmd: string;
  args: string[];
  env: Record<string, string>;
}
export const BUN_VERSION: string;
export const DENO_VERSION: string;
export const NODE_ARM64_VERSION: string;
export const NODE_WIN64_VERSION: string;
export const ARM64_SYSROOT: string;
export const NPM12_VERSION: string;
export const CORE: string[];
export const RUNTIMES: string[];
export function bun(): string;
export function deno(): string;
export function npm12(): string;
export function nodeArm64(): Runner | string;
export function nodeWin64(): Runner | string;
export function tsRunner(runtime: string): Runner | string;
export function jsRunner(runtime: string): Omit<Runner, 'env'> | string;
