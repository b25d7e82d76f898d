/** Test helpers: finding and running system tools, temp dirs, child processes. */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The path of `name` on PATH, or undefined. */
export function which(name: string): string | undefined {
  const r = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' });
  const out = r.stdout.trim();
  return r.status === 0 && out ? out : undefined;
}

/**
 * The C compiler the test peers are built with: `ARROW_DEVICE_CC` where a
 * runner set one (tools/test-runtime.mjs arm64: zig's cross compiler for the
 * emulated process), else cc or gcc on PATH.
 */
export function cCompiler(): string | undefined {
  return process.env.ARROW_DEVICE_CC || which('cc') || which('gcc');
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `arrow-device-${prefix}-`));
}

export function run(cmd: string, args: string[], opts: { cwd?: string } = {}): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}
