/**
 * What the `--ab <ref>` modes of bench:cold and bench:startup share: another
 * commit built beside the working tree, so that a change to the import path
 * is compared with its parent by one command, in alternating fresh
 * processes (the machine's state of the moment is shared by both sides).
 *
 * The ref is checked out in a detached git worktree under .build/ab/<sha>
 * (the node_modules of this checkout linked into it) and compiled there with
 * its own tsconfig.run.json, so its benches and library are its own; the
 * worktree is kept, by commit, for the next run.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';

export interface Build {
  /** How the lines name it: `<ref> (<sha>)`, or `working tree`. */
  name: string;
  /** Its tsconfig.run.json output: bench/, src/, ... */
  run: string;
}

function git(root: string, args: string[]): string {
  const r = spawnSync('git', args, { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')} failed:\n${r.stderr}`);
  return r.stdout.trim();
}

/** The working tree's build (compiled by the npm script before the bench runs). */
export function workingTree(root: string): Build {
  return { name: 'working tree', run: join(root, '.build', 'run') };
}

/** `ref` checked out under .build/ab/<sha> and compiled with `tsc -p tsconfig.run.json` there (once per commit). */
export function buildRef(root: string, ref: string): Build {
  const sha = git(root, ['rev-parse', '--verify', '--short', `${ref}^{commit}`]);
  const dir = resolve(root, '.build', 'ab', sha);
  const run = join(dir, '.build', 'run');
  if (!existsSync(join(dir, 'package.json'))) git(root, ['worktree', 'add', '--detach', dir, sha]);
  if (!existsSync(join(dir, 'node_modules'))) symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
  if (!existsSync(join(run, 'src', 'index.js'))) {
    console.log(`# compiling ${ref} (${sha}) in ${dir}`);
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.run.json'], { cwd: dir, stdio: 'inherit' });
    if (tsc.status !== 0) throw new Error(`compiling ${ref} (${sha}) failed`);
  }
  return { name: `${ref} (${sha})`, run };
}

/**
 * The two sides of `--ab <a>[,<b>]`: commit a, against commit b or, without one, the working tree
 * (whose uncommitted changes, a neighbour's included, are then part of B).
 */
export function abBuilds(root: string, spec: string): [Build, Build] {
  const [a, b] = spec.split(',');
  if (!a) throw new Error('--ab needs a git ref');
  return [buildRef(root, a), b ? buildRef(root, b) : workingTree(root)];
}

export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The median of the pair ratios a[i] / b[i]: each pair ran back to back, so it shares the machine's moment. */
export const pairRatio = (a: number[], b: number[]): number => median(a.map((x, i) => x / b[i]!));
