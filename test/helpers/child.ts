/**
 * Runs a snippet of TypeScript in a child process of the runtime running
 * the tests (Node.js through tsx, Bun, Deno), so a test of something that
 * could crash the process (an abort, a segfault) fails one test instead of
 * killing the run.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { tempDir } from './tools.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
/** Whether this suite runs compiled to JavaScript (the helpers are .js files then). */
const compiled = import.meta.url.endsWith('.js');

export interface ChildResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * The arguments before a TypeScript file that make `process.execPath` run it:
 * Node.js through tsx; Bun runs TypeScript itself; Deno with every
 * permission (the suite's own, not the library's smallest set: README) and
 * `.js` imports resolved to the `.ts` files (`--sloppy-imports`).
 */
export function runtimeArgs(): string[] {
  if (process.versions.bun !== undefined) return [];
  if (process.versions.deno !== undefined) return ['run', '-A', '--sloppy-imports', '--v8-flags=--expose-gc'];
  // Compiled (tools/windows.mjs: tsx's esbuild does not run under Wine), `@/src/...js` imports are
  // JavaScript: Node's own type stripping (22.18 and later) runs the snippet itself.
  if (compiled) return ['--experimental-strip-types', '--disable-warning=ExperimentalWarning'];
  return ['--import', 'tsx'];
}

/**
 * `code` is an ES module body; it can import from the repo with paths
 * relative to the repo root written as `@/src/...` (rewritten to the root's
 * `file:` URL: a Windows path pasted into a string literal or an import is not
 * one, its backslashes read as escapes).
 */
/**
 * Why a test that starts a child process cannot run here, or false: an
 * emulated process (tools/test-runtime.mjs node-arm64 sets
 * ARROW_DEVICE_EMULATED) cannot start another without a binfmt
 * registration, which the runner does not assume.
 */
export const childSkip: string | false = process.env.ARROW_DEVICE_EMULATED
  ? `this ${process.env.ARROW_DEVICE_EMULATED} process is emulated and cannot start another`
  : false;

export function runChild(code: string, timeoutMs = 30_000, env: Record<string, string> = {}): ChildResult {
  // Deno resolves bare imports (apache-arrow, koffi) through the package.json above the script: there
  // the child lives inside the repository's ignored .build/.
  if (process.versions.deno !== undefined) mkdirSync(join(repoRoot, '.build'), { recursive: true });
  const dir = process.versions.deno !== undefined ? mkdtempSync(join(repoRoot, '.build', 'child-')) : tempDir('child');
  const file = join(dir, 'child.ts');
  writeFileSync(file, code.replaceAll('@/', pathToFileURL(repoRoot).href));
  try {
    const r = spawnSync(process.execPath, [...runtimeArgs(), file], {
      cwd: repoRoot,
      encoding: 'utf8',
      timeout: timeoutMs,
      env: { ...process.env, ...env },
    });
    return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `runChild` of `imports` and an async `body` whose returned value the child prints as JSON: the value,
 * after a clean exit (an error naming the child's stderr otherwise). The body runs in an async function,
 * not at the module's top level: a child outside the repository may be compiled as CommonJS, where a
 * top-level `await` does not parse.
 */
export function childValue<T>(imports: string, body: string, timeoutMs = 30_000, env: Record<string, string> = {}): T {
  const r = runChild(`${imports}
(async () => {
${body}
})().then((value) => console.log(JSON.stringify(value)), (e) => {
  console.error(e);
  process.exit(1);
});
`, timeoutMs, env);
  if (r.status !== 0) throw new Error(`the child exited with ${r.status ?? r.signal}: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as T;
}
