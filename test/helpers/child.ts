/**
 * Runs a snippet of TypeScript in a child Node process, so a test of
 * something that could crash the process (an abort, a segfault) fails one
 * test instead of killing the run.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from './tools.js';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export interface ChildResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * `code` is an ES module body; it can import from the repo with paths
 * relative to the repo root written as `@/src/...` (rewritten to absolute).
 */
export function runChild(code: string, timeoutMs = 30_000): ChildResult {
  const dir = tempDir('child');
  const file = join(dir, 'child.ts');
  writeFileSync(file, code.replaceAll('@/', repoRoot));
  const r = spawnSync(process.execPath, ['--import', 'tsx', file], {
    cwd: repoRoot,
    encoding: 'utf8',
    timeout: timeoutMs,
  });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}
