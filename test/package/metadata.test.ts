/**
 * What `npm publish` reads, kept true without publishing:
 *
 * - package.json: name, a semver version (package-lock.json's root agrees),
 *   license Apache-2.0 with a LICENSE file, repository / homepage / bugs on
 *   one GitHub URL, keywords, `files` shipping what an install needs and no
 *   tests, and `exports` for every public subpath ('.', './adbc',
 *   './package.json') with `types` first, then import / require / default;
 *   every target has its source under src/ (and exists, once dist/ is built);
 * - nothing `npm pkg fix` would change (npm warns about each at publish);
 * - `allowScripts` names every dependency with an install script
 *   (package-lock.json's hasInstallScript) and nothing else, and npm 12,
 *   which blocks the scripts it does not name, finds none unreviewed in the
 *   installed tree (skipped where npm 12 cannot be installed);
 * - CHANGELOG.md in Keep a Changelog form: an [Unreleased] section first,
 *   then `## [x.y.z] - YYYY-MM-DD` sections newest first, the top one
 *   package.json's version, only the standard groups in their order, and a
 *   link reference for [Unreleased] and each version, on the repository.
 *
 * Each check is a function returning the problems it found; the tests run
 * them on the real files (no problem) and on broken copies (the problem is
 * named), so a check that can no longer fail fails here.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/tools.js';
import { npm12Cli, unreviewedScripts } from './npm12.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');

// Public subpaths: the package's front door (src/index.ts), the ADBC driver
// manager (src/adbc/index.ts), and the flechette target's two (issue 52). Other
// src/*/index.ts are internal modules that src/index.ts re-exports; a new public
// entry point is added here and to `exports`.
const PUBLIC_SUBPATHS: Record<string, string> = {
  '.': 'src/index.ts',
  './adbc': 'src/adbc/index.ts',
  './flechette': 'src/flechette/index.ts',
  './flechette/adbc': 'src/flechette/adbc.ts',
};
const CONDITIONS = ['types', 'import', 'require', 'default'];
// arrow-device's browser build (dist/browser/index.js, bundled with src/platform/browser.ts: tools/bundle.mjs),
// for bundlers, which pick the `browser` condition before `import`.
const CONDITIONS_OF: Record<string, string[]> = { '.': ['types', 'browser', 'import', 'require', 'default'] };
const GROUPS = ['Added', 'Changed', 'Deprecated', 'Removed', 'Fixed', 'Security'];
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-[0-9A-Za-z.-]+)?$/;

type Json = Record<string, any>;

const readJson = (file: string): Json => JSON.parse(readFileSync(join(root, file), 'utf8'));

/** `git+https://github.com/o/r.git` -> `https://github.com/o/r`, or undefined. */
function repoUrl(pkg: Json): string | undefined {
  const url = typeof pkg.repository === 'object' ? pkg.repository?.url : undefined;
  const m = typeof url === 'string' ? /^git\+(https:\/\/github\.com\/[^/]+\/[^/]+?)\.git$/.exec(url) : null;
  return m?.[1];
}

/** The source a built file comes from: dist/a/b.js, .d.ts, .js.map -> src/a/b.ts (the browser build's dist/browser/a/b.js too). */
function sourceOf(target: string): string | undefined {
  const m = /^\.\/dist\/(?:browser\/)?(.+?)(?:\.d\.ts|\.js)$/.exec(target);
  return m ? `src/${m[1]}.ts` : undefined;
}

export function checkPackage(pkg: Json, lock: Json, exists: (path: string) => boolean): string[] {
  const problems: string[] = [];
  const need = (ok: unknown, what: string) => { if (!ok) problems.push(what); };

  need(pkg.name === 'arrow-device', `name: ${pkg.name}`);
  need(typeof pkg.version === 'string' && SEMVER.test(pkg.version), `version: not semver (${pkg.version})`);
  need(lock.version === pkg.version && lock.packages?.['']?.version === pkg.version,
    `package-lock.json: root version ${lock.version} / ${lock.packages?.['']?.version}, package.json ${pkg.version}`);
  need(typeof pkg.description === 'string' && pkg.description.length > 20, 'description: missing');
  need(pkg.license === 'Apache-2.0', `license: ${pkg.license}`);
  need(exists('LICENSE'), 'LICENSE: no such file');

  const repo = repoUrl(pkg);
  need(pkg.repository?.type === 'git' && repo, `repository: not { type: "git", url: "git+https://github.com/<owner>/<name>.git" } (${JSON.stringify(pkg.repository)})`);
  if (repo) {
    need(pkg.homepage === `${repo}#readme`, `homepage: ${pkg.homepage}, expected ${repo}#readme`);
    need(pkg.bugs?.url === `${repo}/issues`, `bugs.url: ${pkg.bugs?.url}, expected ${repo}/issues`);
  }
  const keywords: unknown = pkg.keywords;
  need(Array.isArray(keywords) && ['arrow', 'apache-arrow', 'c-data-interface', 'zero-copy', 'webgpu', 'adbc'].every((k) => keywords.includes(k)),
    `keywords: ${JSON.stringify(keywords)}`);

  const files: unknown = pkg.files;
  if (!Array.isArray(files)) problems.push('files: missing');
  else {
    for (const f of ['dist', 'src', 'prebuilds', 'README.md', 'CHANGELOG.md', 'LICENSE']) need(files.includes(f), `files: lacks ${f}`);
    for (const f of files) {
      need(!/^(test|bench|tools|demo|examples|docs|\.build|node_modules|scratch)(\/|$)/.test(f), `files: ships ${f}`);
      need(exists(f) || f === 'dist' || f === 'prebuilds', `files: ${f} does not exist`); // dist, prebuilds: made by prepack
    }
  }

  // npm 12 runs a dependency's install scripts only where the project's `allowScripts` allows them (and
  // warns about the rest), so that a contributor's install runs the scripts CI's npm runs: every package of
  // the lockfile with one is listed (true: run it; false: not needed), and nothing else. By name only: the
  // lockfile records no resolved URLs, and without one npm 12 cannot verify a `name@version` pin and
  // refuses it; the versions are pinned by package.json and the lockfile.
  const withScripts = new Set(Object.entries((lock.packages ?? {}) as Record<string, Json>)
    .filter(([path, p]) => path !== '' && p.hasInstallScript === true)
    .map(([path]) => path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)));
  const allow: unknown = pkg.allowScripts;
  if (typeof allow !== 'object' || allow === null || Array.isArray(allow)) problems.push('allowScripts: missing (npm 12 blocks install scripts it does not allow)');
  else {
    for (const name of withScripts) need(typeof (allow as Json)[name] === 'boolean', `allowScripts: lacks ${name}, which has an install script (package-lock.json)`);
    for (const [key, value] of Object.entries(allow)) {
      need(typeof value === 'boolean', `allowScripts.${key}: ${JSON.stringify(value)}, not true or false`);
      need(withScripts.has(key), `allowScripts: "${key}" is not the name of a package of package-lock.json with an install script (a pin, name@version, never matches a lockfile without resolved URLs)`);
    }
  }

  need(engines(pkg), `engines.node: ${pkg.engines?.node}`);
  need(pkg.type === 'module', `type: ${pkg.type}`);
  need(pkg.main === pkg.exports?.['.']?.import, `main: ${pkg.main}, exports['.'].import: ${pkg.exports?.['.']?.import}`);
  need(pkg.types === pkg.exports?.['.']?.types, `types: ${pkg.types}, exports['.'].types: ${pkg.exports?.['.']?.types}`);

  const exportsMap: unknown = pkg.exports;
  if (typeof exportsMap !== 'object' || exportsMap === null) return [...problems, 'exports: missing'];
  const expected = [...Object.keys(PUBLIC_SUBPATHS), './package.json'].sort();
  need(JSON.stringify(Object.keys(exportsMap).sort()) === JSON.stringify(expected),
    `exports: subpaths ${Object.keys(exportsMap).join(', ')}, expected ${expected.join(', ')}`);
  need((exportsMap as Json)['./package.json'] === './package.json', `exports['./package.json']: ${(exportsMap as Json)['./package.json']}`);
  for (const [subpath, source] of Object.entries(PUBLIC_SUBPATHS)) {
    const entry = (exportsMap as Json)[subpath];
    if (typeof entry !== 'object' || entry === null) { problems.push(`exports['${subpath}']: missing`); continue; }
    // TypeScript reads conditions in order: `types` must come first.
    const conditions = CONDITIONS_OF[subpath] ?? CONDITIONS;
    need(JSON.stringify(Object.keys(entry)) === JSON.stringify(conditions),
      `exports['${subpath}']: conditions ${Object.keys(entry).join(', ')}, expected ${conditions.join(', ')}`);
    for (const cond of conditions) {
      const target = entry[cond];
      if (typeof target !== 'string') { problems.push(`exports['${subpath}'].${cond}: missing`); continue; }
      need(cond === 'types' ? target.endsWith('.d.ts') : target.endsWith('.js') && !target.endsWith('.d.ts'),
        `exports['${subpath}'].${cond}: ${target}`);
      const src = sourceOf(target);
      need(src === source, `exports['${subpath}'].${cond}: ${target} is not built from ${source}`);
      need(src && exists(src), `exports['${subpath}'].${cond}: its source ${src} does not exist`);
      // Once built (CI builds before testing; prepack always), the file itself.
      if (exists('dist')) need(exists(target.replace(/^\.\//, '')), `exports['${subpath}'].${cond}: ${target} not built (npm run build)`);
    }
  }
  return problems;
}

function engines(pkg: Json): boolean {
  return typeof pkg.engines?.node === 'string' && /^>=2[2-9]/.test(pkg.engines.node);
}

export function checkChangelog(text: string, version: string, repo: string | undefined): string[] {
  const problems: string[] = [];
  const need = (ok: unknown, what: string) => { if (!ok) problems.push(what); };
  const lines = text.split('\n');

  need(lines[0] === '# Changelog', `line 1: ${lines[0]}`);
  need(text.includes('(https://keepachangelog.com/en/1.1.0/)'), 'header: no Keep a Changelog link');
  need(text.includes('(https://semver.org/'), 'header: no Semantic Versioning link');

  // Sections: every `## ` heading is [Unreleased] or a dated version.
  const sections: { name: string; date?: string; line: number }[] = [];
  lines.forEach((l, i) => {
    if (!l.startsWith('## ')) return;
    const m = /^## \[(Unreleased|\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)\](?: - (\d{4}-\d{2}-\d{2}))?$/.exec(l);
    if (!m) { problems.push(`line ${i + 1}: not "## [x.y.z] - YYYY-MM-DD" nor "## [Unreleased]": ${l}`); return; }
    if (m[1] === 'Unreleased' ? m[2] : !m[2]) problems.push(`line ${i + 1}: ${m[1] === 'Unreleased' ? 'an [Unreleased] section has no date' : 'no date'}: ${l}`);
    sections.push({ name: m[1]!, date: m[2], line: i + 1 });
  });
  need(sections[0]?.name === 'Unreleased', 'no [Unreleased] section first');
  need(sections.filter((s) => s.name === 'Unreleased').length <= 1, 'more than one [Unreleased] section');
  const versions = sections.filter((s) => s.name !== 'Unreleased');
  need(versions[0]?.name === version, `top version section ${versions[0]?.name}, package.json says ${version}`);
  for (const s of versions) {
    const d = new Date(`${s.date}T00:00:00Z`);
    need(!Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s.date, `line ${s.line}: ${s.date} is no date`);
  }
  for (let i = 1; i < versions.length; i++) {
    const [a, b] = [versions[i - 1]!, versions[i]!];
    need(compareVersions(a.name, b.name) > 0, `line ${b.line}: ${b.name} after ${a.name}: newest first`);
    need(a.date! >= b.date!, `line ${b.line}: ${b.name} dated ${b.date}, after ${a.name}'s ${a.date}`);
  }

  // Groups: the standard ones, each once per section, in their order.
  let section = '';
  let last = -1;
  lines.forEach((l, i) => {
    if (l.startsWith('## ')) { section = l; last = -1; return; }
    if (!l.startsWith('### ')) return;
    const g = GROUPS.indexOf(l.slice(4));
    if (g < 0) problems.push(`line ${i + 1}: "${l.slice(4)}" is not one of ${GROUPS.join(', ')}`);
    else if (g <= last) problems.push(`line ${i + 1}: ${l.slice(4)} out of order or repeated in ${section}`);
    else last = g;
  });

  // Link references: one per section, on the repository, and none for a version not here.
  const refs = new Map<string, string>();
  for (const l of lines) {
    const m = /^\[([^\]]+)\]: (\S+)$/.exec(l);
    if (m) refs.set(m[1]!, m[2]!);
  }
  for (const s of sections) {
    const url = refs.get(s.name);
    if (!url) { problems.push(`no link reference [${s.name}]: <url>`); continue; }
    if (repo) need(url.startsWith(`${repo}/`), `[${s.name}]: ${url} is not on ${repo}`);
  }
  const named = new Set(sections.map((s) => s.name));
  for (const name of refs.keys()) if (/^\d+\.\d+\.\d+/.test(name) || name === 'Unreleased') need(named.has(name), `link reference [${name}] has no section`);
  if (repo && versions[0]) {
    need(refs.get('Unreleased') === `${repo}/compare/v${versions[0].name}...HEAD`, `[Unreleased]: ${refs.get('Unreleased')}, expected ${repo}/compare/v${versions[0].name}...HEAD`);
  }
  return problems;
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(/[.-]/).slice(0, 3).map(Number);
  const pb = b.split(/[.-]/).slice(0, 3).map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i]! - pb[i]!;
  return 0;
}

const pkg = readJson('package.json');
const lock = readJson('package-lock.json');
const changelog = readFileSync(join(root, 'CHANGELOG.md'), 'utf8');
const exists = (p: string) => existsSync(join(root, p));
const clone = (x: Json): Json => JSON.parse(JSON.stringify(x));

describe('package metadata', () => {
  test('package.json and package-lock.json: metadata, files, exports of every public subpath', () => {
    assert.deepEqual(checkPackage(pkg, lock, exists), []);
  });

  test('nothing npm pkg fix would change (npm publish warns about each)', (t) => {
    const dir = tempDir('pkgfix');
    /** package.json as `npm pkg fix` leaves it, or undefined without npm. */
    const fixed = (p: Json): Json | undefined => {
      writeFileSync(join(dir, 'package.json'), JSON.stringify(p, null, 2) + '\n');
      const r = spawnSync('npm', ['pkg', 'fix'], { cwd: dir, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
      if (r.error) return undefined;
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
    };
    try {
      const ours = fixed(pkg);
      if (!ours) { t.skip('npm not runnable'); return; }
      assert.deepEqual(ours, pkg);
      // The check can fail: a repository in npm's shorthand is rewritten.
      const shorthand = { ...clone(pkg), repository: 'arrow-device/arrow-device' };
      assert.notDeepEqual(fixed(shorthand), shorthand);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("npm 12 finds no dependency's install script unreviewed: a contributor's install runs the scripts CI's does", (t) => {
    const npm = npm12Cli();
    if ('skip' in npm) { t.skip(npm.skip); return; }
    assert.deepEqual(unreviewedScripts(npm.cli, root), [], 'npm 12 would block these: list them in package.json\'s allowScripts');
    // The check can fail: the same tree, its package.json without allowScripts, has every one unreviewed.
    const dir = tempDir('allowscripts');
    try {
      const { allowScripts: _, ...without } = pkg;
      writeFileSync(join(dir, 'package.json'), JSON.stringify(without, null, 2));
      writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(lock, null, 2));
      symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
      assert.deepEqual(unreviewedScripts(npm.cli, dir), Object.keys(pkg.allowScripts).sort());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('CHANGELOG.md: Keep a Changelog form, top version = package.json version, links', () => {
    assert.deepEqual(checkChangelog(changelog, pkg.version, repoUrl(pkg)), []);
  });

  test('the package checks fail on broken metadata', () => {
    const broken = (edit: (p: Json) => void, lockEdit?: (l: Json) => void) => {
      const p = clone(pkg);
      const l = clone(lock);
      edit(p);
      lockEdit?.(l);
      return checkPackage(p, l, exists).join('\n');
    };
    assert.match(broken((p) => { delete p.repository; }), /repository/);
    assert.match(broken((p) => { p.repository.url = 'https://example.com/x'; }), /repository/);
    assert.match(broken((p) => { p.homepage = 'https://example.com'; }), /homepage/);
    assert.match(broken((p) => { p.keywords = ['arrow']; }), /keywords/);
    assert.match(broken((p) => { p.license = 'MIT'; }), /license/);
    assert.match(broken((p) => { p.version = '0.2'; }), /version: not semver/);
    assert.match(broken(() => {}, (l) => { l.packages[''].version = '0.0.1'; }), /package-lock\.json/);
    assert.match(broken((p) => { p.files = p.files.filter((f: string) => f !== 'CHANGELOG.md'); }), /files: lacks CHANGELOG\.md/);
    assert.match(broken((p) => { p.files.push('test'); }), /files: ships test/);
    assert.match(broken((p) => { delete p.exports['./adbc']; }), /exports: subpaths/);
    assert.match(broken((p) => { p.exports['./adbc'] = { import: p.exports['./adbc'].import, types: p.exports['./adbc'].types, require: p.exports['./adbc'].require, default: p.exports['./adbc'].default }; }), /conditions import, types/);
    assert.match(broken((p) => { delete p.exports['./adbc'].require; }), /require/);
    assert.match(broken((p) => { p.exports['./adbc'].types = './dist/adbc/missing.d.ts'; }), /not built from src\/adbc\/index\.ts/);
    assert.match(broken((p) => { p.exports['.'].types = './dist/index.js'; }), /exports\['\.'\]\.types/);
    assert.match(broken((p) => { delete p.exports['.'].browser; }), /exports\['\.'\]: conditions types, import, require, default, expected types, browser/);
    assert.match(checkPackage(pkg, lock, (f) => f !== 'LICENSE' && exists(f)).join('\n'), /LICENSE: no such file/);
    assert.match(broken((p) => { delete p.allowScripts; }), /allowScripts: missing/);
    const scripted = Object.keys(pkg.allowScripts)[0]!;
    assert.match(broken((p) => { delete p.allowScripts[scripted]; }), new RegExp(`allowScripts: lacks ${scripted}, which has an install script`));
    assert.match(broken((p) => { p.allowScripts[`${scripted}@1.0.0`] = p.allowScripts[scripted]; delete p.allowScripts[scripted]; }), /a pin, name@version, never matches/);
    assert.match(broken((p) => { p.allowScripts['left-pad'] = true; }), /"left-pad" is not the name of a package/);
    assert.match(broken((p) => { p.allowScripts[scripted] = 'yes'; }), /not true or false/);
    assert.match(broken(() => {}, (l) => { l.packages['node_modules/@scope/native-thing'] = { version: '1.0.0', hasInstallScript: true }; }), /allowScripts: lacks @scope\/native-thing/);
    // The built files are checked once dist/ exists, so both states are simulated
    // whatever this checkout holds (a fresh clone has no dist/; CI builds first).
    const isDist = (f: string) => f === 'dist' || f.startsWith('dist/');
    const builtWithout = (missing: string) => (f: string) => (isDist(f) ? f !== missing : exists(f));
    assert.deepEqual(checkPackage(pkg, lock, builtWithout('dist/adbc/index.js')),
      ['import', 'require', 'default'].map((c) => `exports['./adbc'].${c}: ./dist/adbc/index.js not built (npm run build)`));
    assert.deepEqual(checkPackage(pkg, lock, builtWithout('dist/index.d.ts')),
      [`exports['.'].types: ./dist/index.d.ts not built (npm run build)`]);
    // Before the first build nothing under dist/ is asked for.
    assert.deepEqual(checkPackage(pkg, lock, (f) => !isDist(f) && exists(f)), []);
  });

  test('the CHANGELOG checks fail on a broken CHANGELOG', () => {
    const repo = repoUrl(pkg);
    const v = pkg.version as string;
    const broken = (text: string, version = v) => checkChangelog(text, version, repo).join('\n');
    const heading = changelog.split('\n').find((l) => l.startsWith(`## [${v}] - `))!;
    assert.ok(heading, `no section for ${v}`);
    assert.match(broken(changelog, '9.9.9'), /top version section/);
    assert.match(broken(changelog.replace(heading, `## ${v}`)), /not "## \[x\.y\.z\] - YYYY-MM-DD"/);
    assert.match(broken(changelog.replace(heading, `## [${v}]`)), /no date/);
    assert.match(broken(changelog.replace(heading, `## [${v}] - 2026-13-45`)), /is no date/);
    assert.match(broken(changelog.replace('## [Unreleased]\n', '')), /no \[Unreleased\] section first/);
    assert.match(broken(changelog.replace(/^\[Unreleased\]: .*\n/m, '')), /no link reference \[Unreleased\]/);
    assert.match(broken(changelog.replace(new RegExp(`^\\[${v.replace(/\./g, '\\.')}\\]: .*\\n`, 'm'), '')), new RegExp(`no link reference \\[${v.replace(/\./g, '\\.')}\\]`));
    assert.match(broken(changelog.replace(`${heading}\n`, `${heading}\n\n### Notes\n`)), /"Notes" is not one of/);
    assert.match(broken(changelog.replace(`${heading}\n`, `${heading}\n\n### Fixed\n- x\n\n### Added\n- y\n`)), /out of order or repeated/);
    assert.match(broken(changelog.replace('(https://keepachangelog.com/en/1.1.0/)', '(https://example.com)')), /Keep a Changelog/);
    assert.match(broken(`${changelog}[9.9.9]: ${repo}/releases/tag/v9.9.9\n`), /\[9\.9\.9\] has no section/);
    // Versions newest first.
    const older = changelog.split('\n').filter((l) => /^## \[\d/.test(l))[1];
    if (older) assert.match(broken(changelog.replace(older, '## [99.0.0] - 2020-01-01')), /newest first/);
  });
});
