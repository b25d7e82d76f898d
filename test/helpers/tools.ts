/** Test helpers: finding and running system tools, temp dirs, child processes. */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

/**
 * The path of `name` on PATH, or undefined. Looked up here rather than by a
 * shell (`command -v`): Windows has no `sh`, and there a program's file name
 * ends in one of PATHEXT's extensions.
 */
export function which(name: string): string | undefined {
  // On Windows only names with one of those extensions: under Wine, PATH also holds the Linux
  // folders, whose programs a Windows process cannot start.
  const exts = process.platform === 'win32' ? (process.env.PATHEXT ?? '.EXE;.CMD;.BAT;.COM').split(';').filter(Boolean) : [''];
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    for (const ext of exts) {
      const p = join(dir, name + ext.toLowerCase());
      if (existsSync(p)) return p;
    }
  }
  return undefined;
}

/**
 * The C compiler the test peers are built with: `ARROW_DEVICE_CC` where a
 * runner set one (tools/test-runtime.mjs arm64: zig's cross compiler for the
 * emulated process), else cc or gcc on PATH. None on Windows: the Windows
 * run (tools/windows.mjs) builds the peers as DLLs beforehand (`prebuiltPeer`).
 */
export function cCompiler(): string | undefined {
  if (process.env.ARROW_DEVICE_CC) return process.env.ARROW_DEVICE_CC;
  return process.platform === 'win32' ? undefined : which('cc') || which('gcc');
}

/**
 * A C test peer built beforehand, `<ARROW_DEVICE_TEST_PEERS>/<name>.<dll|dylib|so>`,
 * or undefined. A runner sets the folder where the tests' process cannot
 * compile (Node for Windows under Wine cannot start Linux programs:
 * tools/windows.mjs builds the peers with zig first).
 */
export function prebuiltPeer(name: string): string | undefined {
  const dir = process.env.ARROW_DEVICE_TEST_PEERS;
  if (!dir) return undefined;
  const ext = process.platform === 'win32' ? 'dll' : process.platform === 'darwin' ? 'dylib' : 'so';
  const p = join(dir, `${name}.${ext}`);
  if (!existsSync(p)) throw new Error(`ARROW_DEVICE_TEST_PEERS is set, but ${p} is missing`);
  return p;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `arrow-device-${prefix}-`));
}

export function run(cmd: string, args: string[], opts: { cwd?: string } = {}): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}
