/**
 * npm 12 for the package tests: its installs block every dependency's
 * install scripts that the project's `allowScripts` (package.json) does not
 * allow, and warn about each. Installed from the registry under .build/npm12
 * once (tools/runtimes.mjs), run by this Node.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { NPM12_VERSION, npm12 } from '../../tools/runtimes.mjs';

/** npm-cli.js of npm 12, or why it cannot run here (a test skips with it). */
export function npm12Cli(): { cli: string } | { skip: string } {
  const versions = process.versions as { bun?: string; deno?: string };
  if (versions.bun || versions.deno) return { skip: 'npm runs on Node: the Node runs of this file check it' };
  try {
    return { cli: npm12() };
  } catch (e) {
    return { skip: `npm ${NPM12_VERSION} is not under .build/npm12 and could not be installed from the registry: ${(e as Error).message}` };
  }
}

/**
 * Runs npm 12 in `cwd`. Without the npm_* variables of the environment: under
 * `npm test`, npm exports its own configuration as npm_config_* (the
 * project's local prefix among them), which npm 12 would read as its own.
 */
export function runNpm12(cli: string, args: string[], cwd: string): SpawnSyncReturns<string> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  return spawnSync(process.execPath, [cli, ...args], { cwd, encoding: 'utf8', timeout: 120_000, env: { ...env, npm_config_update_notifier: 'false' } });
}

/** The packages `npm install-scripts ls` lists as having install scripts that allowScripts does not cover, in `cwd`'s project. */
export function unreviewedScripts(cli: string, cwd: string): string[] {
  const r = runNpm12(cli, ['install-scripts', 'ls', '--json'], cwd);
  if (r.status !== 0) throw new Error(`npm ${NPM12_VERSION} install-scripts ls failed in ${cwd}:\n${r.stdout}${r.stderr}`);
  return (JSON.parse(r.stdout) as { allowScripts: { name: string }[] }).allowScripts.map((p) => p.name).sort();
}
