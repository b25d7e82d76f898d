// Types for tools/zig.mjs (plain JavaScript for any Node), for the tests that import it.
export const ZIG_VERSION: string;
export const GLIBC: string;
export const MACOS: string;
export const TARGETS: Record<string, string>;
export function zig(): string;
export function zigEnv(): Record<string, string>;
export function triple(target: string): string;
export function zigCc(target: string): string;
