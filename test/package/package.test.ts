/**
 * The package as a consumer gets it: `npm pack`, the tarball installed into a
 * temporary project, then used the three ways a consumer uses it:
 *
 * - imported as ESM (a round trip through the C Data Interface);
 * - `require`d from CommonJS (Node's require(esm): Node ^20.19 or >= 22.12);
 * - type-checked from a consumer .ts file with `strict`, `skipLibCheck: false`,
 *   `lib: ["es2023"]` (no DOM) and `types: ["node"]`, by the repository's
 *   TypeScript, so the published .d.ts need nothing the consumer lacks.
 *
 * No registry: the project gets apache-arrow, koffi and @types/node as file:
 * links to this repository's node_modules, and npm runs with --offline.
 * dist/ is rebuilt first when a file under src/ is newer than it (CI builds
 * before testing, so there it is not).
 *
 * Also what a user meets: an uncaught error thrown inside the package prints
 * a few lines, which name src/*.ts under --enable-source-maps (the bundle's
 * lines are short and its maps ship); and npm 12, which blocks the install
 * scripts a project does not allow, installs the tarball into a fresh
 * project from the registry (npm's cache first) blocking nothing the package
 * needs (koffi's script is blocked, and its prebuilt loads). That one test
 * skips where the registry cannot be reached.
 *
 * Then the README's quick starts (every ```ts quickstart block) run as a
 * newcomer runs them: each a file of a second fresh project made from the
 * same tarball, with the packages it names installed (file: links, offline:
 * parquet-wasm from node_modules, DuckDB's package from .build/duckdb), run
 * by the same runtime as plain TypeScript (Node's type stripping; esbuild
 * where Node has none), and type-checked under `strict`.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/tools.js';
import { NPM12_VERSION } from '../../tools/runtimes.mjs';
import { npm12Cli, runNpm12, unreviewedScripts } from './npm12.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const modules = join(root, 'node_modules');
const tsc = join(modules, 'typescript/bin/tsc');

/** Runs a command; on failure the error carries its output, so the test says what broke. */
function sh(cmd: string, args: string[], cwd: string): string {
  try {
    return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_update_notifier: 'false' } });
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed in ${cwd}:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
  }
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

// require(esm) without a flag: Node 20.19+, 22.12+ (process.features.require_module says so).
const requireEsm = (process.features as { require_module?: boolean }).require_module === true;

/** What a consumer writes: arrow-js in, C structs out and back, values compared. */
const ESM_CONSUMER = `
import assert from 'node:assert/strict';
import { tableFromArrays } from 'apache-arrow';
import { accounting, exportRecordBatch, importRecordBatch, freeArrowSchema, ArrowDeviceError } from 'arrow-device';
const batch = tableFromArrays({ id: Int32Array.from([1, 2, 3]), name: ['a', null, 'c'] }).batches[0];
const { schema, array } = exportRecordBatch(batch);
const back = importRecordBatch(array, schema);
freeArrowSchema(schema);
assert.deepEqual(back.toArray().map((r) => r.toJSON()), [{ id: 1, name: 'a' }, { id: 2, name: null }, { id: 3, name: 'c' }]);
assert.equal(typeof accounting().liveImports, 'number');
assert.ok(new ArrowDeviceError('invalid', 'x', 'y') instanceof Error);
console.log('esm ok');
`;

/**
 * CommonJS: require('arrow-device') loads the ESM build, and batches made with
 * require('apache-arrow') (arrow-js's separate CommonJS build) go through it:
 * arrow-js's classes recognise each other's instances across its builds
 * (Symbol.hasInstance with Symbol.for markers), which this proves for us.
 */
const CJS_CONSUMER = `
const assert = require('node:assert/strict');
const { tableFromArrays, RecordBatch } = require('apache-arrow');
const ad = require('arrow-device');
const { exportRecordBatch, importRecordBatch, freeArrowSchema } = ad;
const batch = tableFromArrays({ id: Int32Array.from([1, 2, 3]) }).batches[0];
const { schema, array } = exportRecordBatch(batch);
const back = importRecordBatch(array, schema);
freeArrowSchema(schema);
assert.ok(back instanceof RecordBatch);
assert.deepEqual([...back.getChild('id')], [1, 2, 3]);
assert.equal(require('arrow-device'), ad);
// The CommonJS copy of arrow-js is not the package's (ESM) copy: its Data and DataType export still.
const { exportArray, importVector, exportSchema } = ad;
const idData = batch.getChild('id').data[0];
const idSchema = exportSchema(idData.type);
const v = importVector(exportArray(idData), idSchema);
assert.deepEqual(Array.from(v.toArray()), [1, 2, 3]);
v.release();
freeArrowSchema(idSchema);
import('arrow-device').then((esm) => {
  // One module instance for require and import: one registry of exports, one accounting.
  assert.equal(esm.importRecordBatch, importRecordBatch);
  console.log('cjs ok');
});
`;

/**
 * Two copies of the package in one process, as when a package manager does not
 * deduplicate two versions (an application's and a dependency's): each copy
 * works on its own and reads what the other exported, through the C structs.
 * koffi keeps one table of type names per process, so a copy must not name
 * what another copy names too.
 */
const TWO_COPIES = `
import assert from 'node:assert/strict';
import { tableFromArrays } from 'apache-arrow';
import * as a from 'arrow-device';
import * as b from './second/node_modules/arrow-device/dist/index.js';
assert.notEqual(a.importRecordBatch, b.importRecordBatch, 'two module instances');
const batch = tableFromArrays({ id: Int32Array.from([1, 2, 3]), name: ['a', null, 'c'] }).batches[0];
for (const [from, to] of [[a, b], [b, a]]) {
  const { schema, array } = from.exportRecordBatch(batch);
  const back = to.importRecordBatch(array, schema);
  assert.deepEqual(back.toArray().map((r) => r.toJSON()), [{ id: 1, name: 'a' }, { id: 2, name: null }, { id: 3, name: 'c' }]);
  assert.ok(from.accounting().liveExports > 0, 'the exporter holds the tree until the importer releases it');
  back.release();
  from.freeArrowSchema(schema);
  assert.equal(from.accounting().liveExports, 0, "the importer's release reached the exporting copy's callbacks");
  assert.equal(to.accounting().liveImports, 0);
  from.freeArrowArray(array);
}
console.log('two copies ok');
`;

/**
 * arrow-device/adbc from ESM: a missing driver is an AdbcError naming the
 * places tried; with the SQLite driver (its path in ADBC_SQLITE_DRIVER) a
 * real query and a zero-copy ingest.
 */
const ADBC_ESM_CONSUMER = `
import assert from 'node:assert/strict';
import { tableFromArrays } from 'apache-arrow';
import { AdbcDatabase, AdbcError, LoadFlags } from 'arrow-device/adbc';
import { accounting } from 'arrow-device';
assert.throws(() => new AdbcDatabase({ driver: 'nosuchdriver', loadFlags: LoadFlags.Default }), (e) => e instanceof AdbcError && e.code === 'NotFound');
const driver = process.env.ADBC_SQLITE_DRIVER;
if (driver) {
  const db = new AdbcDatabase({ driver, databaseOptions: { uri: ':memory:' } });
  const conn = await db.connect();
  assert.equal(await conn.ingest('t', tableFromArrays({ x: Int32Array.of(1, 2, 3) })), 3);
  const t = await conn.query('SELECT SUM(x) AS s FROM t');
  assert.equal(Number(t.getChild('s').get(0)), 6);
  t.release();
  await conn.close();
  await db.close();
  assert.equal(db.released, true);
}
assert.equal(accounting().liveImports, 0);
console.log('adbc esm ok');
`;

/** arrow-device/adbc from CommonJS: the same module instance as import's. */
const ADBC_CJS_CONSUMER = `
const assert = require('node:assert/strict');
const adbc = require('arrow-device/adbc');
assert.throws(() => new adbc.AdbcDatabase({ driver: 'nosuchdriver' }), (e) => e instanceof adbc.AdbcError && e.status === adbc.AdbcStatus.NOT_FOUND);
import('arrow-device/adbc').then((esm) => {
  assert.equal(esm.AdbcDatabase, adbc.AdbcDatabase);
  console.log('adbc cjs ok');
});
`;

/** Type-checked only: the public types as a consumer spells them. */
const TS_CONSUMER = `
import { Table, tableFromArrays, type RecordBatch } from 'apache-arrow';
import {
  ArrowDeviceError, exportRecordBatch, importRecordBatch, importTable, exportTable, nativeMemory, wasmMemoryFromExports,
  type Memory, type Ptr, type WasmMemoryOptions, type WasmLinearMemory,
} from 'arrow-device';
const batch: RecordBatch = tableFromArrays({ id: Int32Array.from([1, 2, 3]) }).batches[0]!;
const ptrs: { schema: Ptr; array: Ptr } = exportRecordBatch(batch);
const back: RecordBatch = importRecordBatch(ptrs.array, ptrs.schema);
const out = exportTable(new Table([back]));
const table: Table = importTable(out.arrays, out.schema);
const mem: Memory = nativeMemory();
declare const linear: WasmLinearMemory;
const options: Pick<WasmMemoryOptions, 'memory'> = { memory: linear };
export function fromExports(exports: object): Memory { return wasmMemoryFromExports(exports); }
export function describe(e: unknown): string { return e instanceof ArrowDeviceError ? e.kind + ' ' + e.path : String(e); }
export { table, mem, options };
import { AdbcDatabase, AdbcError, IngestMode, type AdbcConnection, type ConnectOptions } from 'arrow-device/adbc';
export async function adbcCount(options: ConnectOptions, sql: string): Promise<number> {
  await using db = new AdbcDatabase(options);
  await using conn: AdbcConnection = await db.connect();
  await conn.ingest('t', batch, { mode: IngestMode.CreateAppend });
  const result: Table = await conn.query(sql);
  return result.numRows;
}
export function adbcStatus(e: unknown): number | undefined { return e instanceof AdbcError ? e.status : undefined; }
`;

/** An error nobody catches, thrown inside the package (a NULL schema pointer): what Node prints for it. */
const UNCAUGHT = `
import { importSchema } from 'arrow-device';
importSchema(0n);
`;

/**
 * What a user of npm 12 gets: the round trip, then the native module koffi
 * loaded (require's cache is the process's, arrow-device's createRequire
 * included).
 */
const KOFFI_ADDON = `${ESM_CONSUMER}
import { createRequire } from 'node:module';
console.log(JSON.stringify(Object.keys(createRequire(import.meta.url).cache).filter((f) => f.endsWith('.node'))));
`;

/**
 * The install scripts npm 12 blocks in a user's project (which has no
 * allowScripts for them) that the package does not need, and why; the README's
 * Install section says so. Any other blocked script fails the npm 12 test.
 */
const NOT_NEEDED: Record<string, string> = {
  koffi: 'its install script only checks that the prebuilt of its @koromix/koffi-<platform>-<arch> package loads, and builds from source where none does',
};

/** The native ring's prebuilt library for this platform, as tools/build-native.mjs names it. */
const prebuilt = `prebuilds/${process.platform}-${process.arch}/libarrow-device-async.${process.platform === 'darwin' ? 'dylib' : 'so'}`;

/** A consumer's async reader, in the installed package: the prebuilt ring loads from node_modules. */
const RING_CONSUMER = `
import { createAsyncDeviceStreamReader } from 'arrow-device';
const reader = createAsyncDeviceStreamReader();
console.log('ring ' + reader.nativeRing);
reader.dispose();
`;

// --- the README's quick starts --------------------------------------------------------------

/** A ```ts quickstart block of README.md: its code and the line its fence opens on. */
interface Quickstart {
  line: number;
  code: string;
}

/** Every ```ts quickstart block of README.md, in order (test/readme runs the plain ```ts blocks). */
function readmeQuickstarts(): Quickstart[] {
  const lines = readFileSync(join(root, 'README.md'), 'utf8').split('\n');
  const blocks: Quickstart[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```ts quickstart') continue;
    let j = i + 1;
    while (j < lines.length && lines[j]!.trim() !== '```') j++;
    blocks.push({ line: i + 1, code: lines.slice(i + 1, j).join('\n') + '\n' });
    i = j;
  }
  return blocks;
}

/** The package a module specifier names (`@scope/name/sub/path` -> `@scope/name`), or undefined for a builtin or a relative path. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('node:') || specifier.startsWith('.') || specifier.startsWith('/')) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/** The packages a block needs installed: what it imports, and what it resolves (`require.resolve('pkg/file')`, `import.meta.resolve`). */
function packagesOf(code: string): string[] {
  const names = new Set<string>();
  for (const m of code.matchAll(/(?:\bfrom\s+|\bimport\s*\(\s*|\bimport\s+|\bresolve\(\s*)'([^']+)'/g)) {
    const name = packageOf(m[1]!);
    if (name) names.add(name);
  }
  return [...names].sort();
}

const DUCKDB_PACKAGE = '@duckdb/node-bindings-linux-x64';
const duckdbDir = join(root, '.build/duckdb/node_modules', DUCKDB_PACKAGE);

/**
 * Where the quick starts' project gets each package it may name, offline:
 * arrow-device from the tarball (set in `before`), the rest as file: links.
 * A package missing here makes its blocks skip with the reason (DuckDB's,
 * which `npm run setup:duckdb` installs on Linux x64 only), or fail with
 * DUCKDB_REQUIRED=1.
 */
const QUICKSTART_SOURCES: Record<string, { dir: string; missing?: string }> = {
  'apache-arrow': { dir: join(modules, 'apache-arrow') },
  koffi: { dir: join(modules, 'koffi') },
  'parquet-wasm': { dir: join(modules, 'parquet-wasm') },
  '@uwdata/flechette': { dir: join(modules, '@uwdata/flechette') },
  arquero: { dir: join(modules, 'arquero') },
  [DUCKDB_PACKAGE]: {
    dir: duckdbDir,
    missing: existsSync(join(duckdbDir, 'package.json')) ? undefined : `${DUCKDB_PACKAGE} is not installed in .build/duckdb: run \`npm run setup:duckdb\` (Linux x64 only)`,
  },
};

/** Why a block cannot run here (a package it needs is missing), or false. */
function quickstartSkip(block: Quickstart): string | false {
  for (const name of packagesOf(block.code)) {
    const missing = QUICKSTART_SOURCES[name]?.missing;
    if (missing && !(name === DUCKDB_PACKAGE && process.env.DUCKDB_REQUIRED === '1')) return missing;
  }
  return false;
}

/**
 * How this runtime runs a .mts file as a newcomer would: Bun and Deno run
 * TypeScript; Node strips types where it does by default (22.18+) or with
 * --experimental-strip-types (22.6+); older, the block is transpiled with
 * esbuild (a devDependency) into an .mjs file.
 */
function typeScriptRunner(): { args: string[]; transpile: boolean; how: string } {
  const versions = process.versions as { bun?: string; deno?: string; node: string };
  if (versions.bun) return { args: [], transpile: false, how: `Bun ${versions.bun} runs TypeScript` };
  if (versions.deno) return { args: [], transpile: false, how: `Deno ${versions.deno} runs TypeScript` };
  if ((process.features as { typescript?: string | false }).typescript) return { args: [], transpile: false, how: `Node ${process.version} strips types` };
  const [major, minor] = versions.node.split('.').map(Number) as [number, number];
  if (major > 22 || (major === 22 && minor >= 6)) return { args: ['--experimental-strip-types'], transpile: false, how: `Node ${process.version} --experimental-strip-types` };
  return { args: [], transpile: true, how: `Node ${process.version} has no type stripping: transpiled with esbuild` };
}

/** What a block claims it prints: `console.log(...); // claim` lines; compared without whitespace and quote style (runtimes format differently). */
function claimsOf(code: string): string[] {
  return [...code.matchAll(/console\.log\(.*\);\s*\/\/\s*(.+)$/gm)].map((m) => m[1]!.trim());
}
const loose = (s: string): string => s.replace(/\s+/g, '').replaceAll('"', "'");

const quickstarts = readmeQuickstarts();

describe('package', { timeout: 120_000 }, () => {
  let project = '';
  let tarball = '';

  before(() => {
    if (!existsSync(join(root, 'dist/index.js')) || newestMtime(join(root, 'src')) > newestMtime(join(root, 'dist'))) {
      console.log('package test: dist/ is older than src/, building');
      sh('npm', ['run', 'build'], root);
    }
    // What npm test's pretest (and npm pack's prepack) does: the native ring's prebuilt library for this
    // platform, where a C compiler is found.
    sh(process.execPath, ['tools/build-native.mjs', '--optional'], root);
    project = tempDir('package');
    // --ignore-scripts: dist/ is current (above); prepack would rebuild it regardless.
    const packed = JSON.parse(sh('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', project], root)) as { filename: string; files: { path: string }[] }[];
    const info = packed[0]!;
    tarball = join(project, info.filename);
    const files = new Set(info.files.map((f) => f.path));
    assert.ok(files.has('dist/index.js') && files.has('dist/index.d.ts') && files.has('src/index.ts'), 'dist and src are in the tarball');
    assert.ok(files.has('dist/adbc/index.js') && files.has('dist/adbc/index.d.ts'), 'the arrow-device/adbc subpath is in the tarball');
    for (const entry of ['flechette/index', 'flechette/adbc']) {
      assert.ok(files.has(`dist/${entry}.js`) && files.has(`dist/${entry}.d.ts`), `the arrow-device/${entry.replace('/index', '')} subpath is in the tarball`);
    }
    // The JavaScript is bundled (tools/bundle.mjs): the two entries, their shared chunks and the browser build, no per-module files.
    assert.ok(files.has('dist/browser/index.js'), 'the browser build is in the tarball');
    assert.ok([...files].some((f) => /^dist\/chunks\/[^/]+\.js$/.test(f)), 'the chunks the entries share are in the tarball');
    const js = [...files].filter((f) => f.startsWith('dist/') && f.endsWith('.js') && !/^dist\/(index|adbc\/index|flechette\/index|flechette\/adbc|browser\/index|chunks\/[^/]+)\.js$/.test(f));
    assert.deepEqual(js, [], 'no JavaScript under dist/ but the bundles');
    assert.ok(![...files].some((f) => f.startsWith('test/') || f.startsWith('.build/')), 'no tests or build outputs in the tarball');
    for (const c of ['native/async-ring.c', 'native/adbc-run.c']) assert.ok(files.has(c), `the native library's source ${c} is in the tarball`);
    // Every prebuilt library there is (the host's, or with `build-native.mjs --release` linux-x64 and linux-arm64) ships.
    const prebuilds = join(root, 'prebuilds');
    for (const target of existsSync(prebuilds) ? readdirSync(prebuilds) : []) {
      for (const lib of readdirSync(join(prebuilds, target))) assert.ok(files.has(`prebuilds/${target}/${lib}`), `the prebuilt prebuilds/${target}/${lib} is in the tarball`);
    }
    writeFileSync(join(project, 'package.json'), JSON.stringify({
      name: 'consumer',
      private: true,
      dependencies: {
        'arrow-device': `file:./${info.filename}`,
        'apache-arrow': `file:${join(modules, 'apache-arrow')}`,
        koffi: `file:${join(modules, 'koffi')}`,
        '@types/node': `file:${join(modules, '@types/node')}`,
      },
    }, null, 2));
    // --ignore-scripts: koffi's install script is not needed, its built module is in the linked directory.
    // --legacy-peer-deps: npm 11 crashes placing the peer apache-arrow when it is a file: link
    // ("Cannot read properties of null (reading 'matches')"); it is a direct dependency here anyway.
    sh('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', '--legacy-peer-deps'], project);
  });

  after(() => {
    if (project) rmSync(project, { recursive: true, force: true });
  });

  test('every bundle file of the tarball names its source map, which ships, and whose sources ship', () => {
    const installed = join(project, 'node_modules/arrow-device');
    const bundles = ['dist/index.js', 'dist/adbc/index.js', 'dist/browser/index.js',
      ...readdirSync(join(installed, 'dist/chunks')).filter((f) => f.endsWith('.js')).map((f) => `dist/chunks/${f}`)];
    for (const file of bundles) {
      // Node (--enable-source-maps) and bundlers find the map by this comment, the file's last line.
      const url = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(readFileSync(join(installed, file), 'utf8'))?.[1];
      assert.ok(url, `${file} names no source map`);
      const mapFile = join(installed, dirname(file), url);
      assert.ok(existsSync(mapFile), `${file}: its source map ${url} is not in the tarball`);
      const map = JSON.parse(readFileSync(mapFile, 'utf8')) as { sources: string[] };
      assert.ok(map.sources.some((s) => s.endsWith('.ts')), `${file}: its source map names no TypeScript source`);
      for (const s of map.sources) assert.ok(existsSync(join(dirname(mapFile), s)), `${file}: source map entry ${s} resolves`);
    }
  });

  test('an uncaught error prints a few lines, not the bundle; with --enable-source-maps they name the source file (src/*.ts)', () => {
    writeFileSync(join(project, 'uncaught.mjs'), UNCAUGHT);
    const run = (flags: string[]) => spawnSync(process.execPath, [...flags, 'uncaught.mjs'], { cwd: project, encoding: 'utf8', timeout: 60_000 });
    const plain = run([]);
    assert.equal(plain.status, 1, `the uncaught error ends the process: ${plain.stderr.slice(0, 2000)}`);
    assert.match(plain.stderr, /ArrowDeviceError/);
    // The runtime prints the throw site's source line: the minified bundle was one line per file (150 KB).
    const bytes = Buffer.byteLength(plain.stderr);
    assert.ok(bytes < 4096, `an uncaught error printed ${bytes} bytes to stderr, beginning:\n${plain.stderr.slice(0, 600)}`);
    const versions = process.versions as { bun?: string; deno?: string };
    if (versions.bun || versions.deno) return; // --enable-source-maps is Node's
    const mapped = run(['--enable-source-maps']);
    assert.equal(mapped.status, 1, mapped.stderr.slice(0, 2000));
    assert.ok(Buffer.byteLength(mapped.stderr) < 4096, `${Buffer.byteLength(mapped.stderr)} bytes with --enable-source-maps`);
    const ours = /node_modules[\\/]arrow-device[\\/]src[\\/]\S+\.ts:\d+/;
    // Node's first line is the throw site, and the first frame the function that threw.
    const lines = mapped.stderr.split('\n');
    assert.match(lines[0]!, ours, `the first line of stderr names no source file of the package:\n${mapped.stderr}`);
    const frame = lines.find((l) => /^\s+at /.test(l));
    assert.match(frame ?? '', ours, `the first stack frame names no source file of the package:\n${mapped.stderr}`);
  });

  test("a browser bundler gets the browser build: no Node builtin, no koffi (exports' browser condition)", {
    skip: process.platform === 'win32' ? "esbuild's binary does not start under Wine (tools/windows.mjs)" : false,
  }, async () => {
    const { build } = await import('esbuild');
    writeFileSync(join(project, 'browser-entry.mjs'), "import { importTable, wasmMemory } from 'arrow-device';\nconsole.log(importTable, wasmMemory);\n");
    const r = await build({
      absWorkingDir: project, entryPoints: ['browser-entry.mjs'], bundle: true, platform: 'browser', format: 'esm',
      external: ['apache-arrow'], write: false, metafile: true, logLevel: 'silent',
    });
    const inputs = Object.keys(r.metafile.inputs);
    assert.ok(inputs.some((i) => i.endsWith('arrow-device/dist/browser/index.js')), `the browser build is bundled: ${inputs.join(', ')}`);
    assert.deepEqual(inputs.filter((i) => i.includes('chunks/') || i.includes('koffi')), [], 'no Node chunk, no koffi');
  });

  test("an async reader uses the package's prebuilt native ring: nothing compiled on install", { skip: existsSync(join(root, prebuilt)) ? false : `no ${prebuilt} here (no C compiler to build it)` }, () => {
    writeFileSync(join(project, 'ring.mjs'), RING_CONSUMER);
    assert.equal(sh(process.execPath, ['ring.mjs'], project).trim(), 'ring true');
  });

  test('imports as ESM and round-trips a batch', () => {
    writeFileSync(join(project, 'esm.mjs'), ESM_CONSUMER);
    assert.equal(sh(process.execPath, ['esm.mjs'], project).trim(), 'esm ok');
  });

  test('requires from CommonJS (require(esm)): one module instance', { skip: requireEsm ? false : `Node ${process.version} has no require(esm) (needs ^20.19 or >= 22.12)` }, () => {
    writeFileSync(join(project, 'cjs.cjs'), CJS_CONSUMER);
    assert.equal(sh(process.execPath, ['cjs.cjs'], project).trim(), 'cjs ok');
  });

  test('arrow-device/adbc imports as ESM and requires from CommonJS', { skip: requireEsm ? false : `Node ${process.version} has no require(esm)` }, () => {
    writeFileSync(join(project, 'adbc.mjs'), ADBC_ESM_CONSUMER);
    writeFileSync(join(project, 'adbc.cjs'), ADBC_CJS_CONSUMER);
    const sqlite = join(root, '.build/adbc-sqlite/libadbc_driver_sqlite.so');
    const env = existsSync(sqlite) ? { ADBC_SQLITE_DRIVER: sqlite } : {};
    assert.equal(execFileSync(process.execPath, ['adbc.mjs'], { cwd: project, encoding: 'utf8', env: { ...process.env, ...env } }).trim(), 'adbc esm ok');
    assert.equal(sh(process.execPath, ['adbc.cjs'], project).trim(), 'adbc cjs ok');
  });

  test("two copies of the package in one process work side by side and read each other's exports", () => {
    const second = join(project, 'second/node_modules/arrow-device');
    mkdirSync(dirname(second), { recursive: true });
    cpSync(join(project, 'node_modules/arrow-device'), second, { recursive: true });
    writeFileSync(join(project, 'two.mjs'), TWO_COPIES);
    assert.equal(sh(process.execPath, ['two.mjs'], project).trim(), 'two copies ok');
  });

  test('the .d.ts type-check under strict, skipLibCheck false, lib es2023 without DOM', () => {
    mkdirSync(join(project, 'src'), { recursive: true });
    writeFileSync(join(project, 'src/consumer.ts'), TS_CONSUMER);
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        strict: true, skipLibCheck: false, lib: ['es2023'], types: ['node'],
        module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', noEmit: true,
      },
      include: ['src'],
    }, null, 2));
    sh(process.execPath, [tsc, '-p', 'tsconfig.json'], project);
  });

  test("the same consumer type-checks under TypeScript's older resolution (moduleResolution node10: no exports map; typesVersions finds arrow-device/adbc)", () => {
    writeFileSync(join(project, 'tsconfig.node10.json'), JSON.stringify({
      compilerOptions: {
        strict: true, skipLibCheck: false, lib: ['es2023', 'esnext.disposable'], types: ['node'],
        module: 'commonjs', moduleResolution: 'node10', target: 'es2022', noEmit: true, esModuleInterop: true,
      },
      include: ['src'],
    }, null, 2));
    sh(process.execPath, [tsc, '-p', 'tsconfig.node10.json'], project);
  });
  test("a user's npm 12 install blocks no install script the package needs: koffi loads its prebuilt", (t) => {
    const npm = npm12Cli();
    if ('skip' in npm) { t.skip(npm.skip); return; }
    const user = join(project, 'npm12-user');
    mkdirSync(user);
    writeFileSync(join(user, 'package.json'), JSON.stringify({ name: 'npm12-user', private: true }, null, 2));
    // What a user types (apache-arrow at the version the suite runs on), from the registry: koffi comes
    // with its platform's prebuilt package, as for a user. --prefer-offline: npm's cache first.
    const arrow = (JSON.parse(readFileSync(join(modules, 'apache-arrow/package.json'), 'utf8')) as { version: string }).version;
    const install = runNpm12(npm.cli, ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, `apache-arrow@${arrow}`], user);
    const output = `${install.stdout}${install.stderr}`;
    if (install.status !== 0 && /\b(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|ENOTCACHED)\b/.test(output)) {
      t.skip(`the registry cannot be reached (npm's cache lacks apache-arrow or koffi):\n${output.slice(-600)}`);
      return;
    }
    assert.equal(install.status, 0, `npm ${NPM12_VERSION} install failed:\n${output}`);
    const blocked = unreviewedScripts(npm.cli, user);
    for (const name of blocked) {
      assert.ok(NOT_NEEDED[name], `npm 12 blocks ${name}'s install script in a user's project, and nothing says the package works without it:\n${output}`);
      assert.match(output, new RegExp(`install-scripts\\s+${name}@`), `npm 12 did not say that it blocked ${name}'s script:\n${output}`);
    }
    console.log(`npm ${NPM12_VERSION}: blocked in a user's install: ${blocked.join(', ') || 'nothing'}`);
    // koffi: its script did not run, and its prebuilt is what loads.
    assert.ok(!existsSync(join(user, 'node_modules/koffi/build')), 'nothing was built in node_modules/koffi');
    writeFileSync(join(user, 'koffi-addon.mjs'), KOFFI_ADDON);
    const [ok, addons] = sh(process.execPath, ['koffi-addon.mjs'], user).trim().split('\n');
    assert.equal(ok, 'esm ok');
    const prebuilt = join(user, 'node_modules', '@koromix', `koffi-${process.platform}-${process.arch}`);
    const loaded = JSON.parse(addons!) as string[];
    assert.ok(loaded.length > 0 && loaded.every((f) => f.startsWith(prebuilt)), `koffi's native module is not its prebuilt (${prebuilt}): ${loaded.join(', ')}`);
  });

  describe("the README's quick starts, from the tarball in a fresh project", () => {
    let qs = '';
    const runner = typeScriptRunner();
    const ran: number[] = [];

    before(() => {
      qs = join(project, 'quickstarts');
      mkdirSync(qs, { recursive: true });
      const dependencies: Record<string, string> = { 'arrow-device': `file:${tarball}`, '@types/node': `file:${join(modules, '@types/node')}` };
      for (const block of quickstarts) {
        for (const name of packagesOf(block.code)) {
          if (name === 'arrow-device') continue;
          const source = QUICKSTART_SOURCES[name];
          assert.ok(source, `README.md line ${block.line}: the quick start needs ${name}, which this test cannot install offline (add it to QUICKSTART_SOURCES)`);
          if (!source.missing) dependencies[name] = `file:${source.dir}`;
        }
      }
      // apache-arrow and koffi always: arrow-device's peer and its dependency, as npm install would bring them.
      dependencies['apache-arrow'] ??= `file:${QUICKSTART_SOURCES['apache-arrow']!.dir}`;
      dependencies.koffi ??= `file:${QUICKSTART_SOURCES.koffi!.dir}`;
      writeFileSync(join(qs, 'package.json'), JSON.stringify({ name: 'quickstarts', private: true, dependencies }, null, 2));
      sh('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', '--legacy-peer-deps'], qs);
      console.log(`quick starts: ${quickstarts.length} in README.md, run by ${runner.how}`);
    });

    test('README.md has two to four quick starts', () => {
      assert.ok(quickstarts.length >= 2 && quickstarts.length <= 4, `README.md has ${quickstarts.length} \`\`\`ts quickstart blocks`);
    });

    quickstarts.forEach((block, i) => {
      const name = `quickstart-${i + 1}`;
      const skip = quickstartSkip(block);
      if (skip) console.log(`# skipping README quick start ${i + 1} (line ${block.line}): ${skip}`);
      test(`quick start ${i + 1} (README.md line ${block.line}) runs and prints what it claims`, { skip }, async () => {
        for (const pkg of packagesOf(block.code)) {
          const missing = QUICKSTART_SOURCES[pkg]?.missing;
          assert.ok(!missing, `README.md line ${block.line}: ${missing} (DUCKDB_REQUIRED=1: a missing DuckDB fails)`);
        }
        let file = `${name}.mts`;
        writeFileSync(join(qs, file), block.code);
        if (runner.transpile) {
          const { transformSync } = await import('esbuild');
          file = `${name}.mjs`;
          writeFileSync(join(qs, file), transformSync(block.code, { loader: 'ts', format: 'esm', target: 'node20', sourcefile: `README.md:${block.line}` }).code);
        }
        const r = spawnSync(process.execPath, [...runner.args, file], { cwd: qs, encoding: 'utf8', timeout: 90_000, env: { ...process.env, npm_config_update_notifier: 'false' } });
        const output = `${r.stdout ?? ''}${r.stderr ?? ''}`;
        assert.equal(r.status, 0, `README.md line ${block.line}: ${process.execPath} ${[...runner.args, file].join(' ')} ${r.signal ? `was killed by ${r.signal}` : `exited ${r.status}`}${r.error ? ` (${r.error.message})` : ''}:\n${output}`);
        assert.ok(r.stdout.trim().length > 0 || !block.code.includes('console.log('), `README.md line ${block.line}: the quick start prints, but printed nothing`);
        for (const claim of claimsOf(block.code)) {
          assert.ok(loose(r.stdout).includes(loose(claim)), `README.md line ${block.line}: it claims to print ${claim}; it printed:\n${r.stdout}`);
        }
        ran.push(i + 1);
      });
    });

    test('the quick starts type-check under strict', () => {
      const files = quickstarts.map((_, i) => `quickstart-${i + 1}.mts`); // written here too: a skipped block still type-checks
      quickstarts.forEach((block, i) => writeFileSync(join(qs, files[i]!), block.code));
      writeFileSync(join(qs, 'tsconfig.json'), JSON.stringify({
        // skipLibCheck: parquet-wasm's own declarations need the DOM lib; ours are checked without it above.
        compilerOptions: {
          strict: true, skipLibCheck: true, lib: ['es2023'], types: ['node'],
          module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', noEmit: true,
        },
        files,
      }, null, 2));
      sh(process.execPath, [tsc, '-p', 'tsconfig.json'], qs);
    });

    test('at least two quick starts ran; any other was skipped with its reason', () => {
      const skipped = quickstarts.map((b, i) => [i + 1, quickstartSkip(b)] as const).filter(([, why]) => why);
      console.log(`quick starts run: ${ran.join(', ') || 'none'}${skipped.map(([n, why]) => `; ${n} skipped: ${why}`).join('')}`);
      assert.equal(ran.length + skipped.length, quickstarts.length, 'every quick start either ran or was skipped with a reason');
      if (skipped.length === 0) assert.ok(ran.length >= 2, `${ran.length} quick starts ran`);
    });
  });
  describe('a flechette-only project: no apache-arrow installed (issue 52)', () => {
    let fq = '';
    const runner = typeScriptRunner();
    const duckdb = QUICKSTART_SOURCES[DUCKDB_PACKAGE]!;
    const flechetteBlocks = quickstarts.filter((b) => packagesOf(b.code).includes('@uwdata/flechette'));
    /** Quick start 1's job (open, query, read a stream, release, close) through the flechette entries. */
    const QUICK_START_1 = `import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { AdbcDatabase } from 'arrow-device/flechette/adbc';

const driver = createRequire(import.meta.url).resolve('${DUCKDB_PACKAGE}/libduckdb.so');
const db = new AdbcDatabase({ driver, entrypoint: 'duckdb_adbc_init', databaseOptions: { path: ':memory:' } });
const conn = await db.connect();
const table = await conn.query('SELECT range AS i, (range * range)::DOUBLE AS square FROM range(5)');
const squares = table.getChild('square').toArray(); // a Float64Array over DuckDB's memory
assert.deepEqual(Array.from(squares), [0, 1, 4, 9, 16]);
table.release();
assert.equal(squares.length, 0); // released: flechette's arrays over DuckDB's memory are detached
let rows = 0;
for await (const batch of await conn.queryStream('SELECT * FROM range(1000000)')) rows += batch.numRows;
console.log(rows); // 1000000
assert.throws(() => createRequire(import.meta.url).resolve('apache-arrow'));
await conn.close();
await db.close();
`;

    before(() => {
      // Not under the other projects: Node would find their apache-arrow by walking up.
      fq = tempDir('flechette-only');
      const dependencies: Record<string, string> = {
        'arrow-device': `file:${tarball}`,
        koffi: `file:${QUICKSTART_SOURCES.koffi!.dir}`,
        '@uwdata/flechette': `file:${QUICKSTART_SOURCES['@uwdata/flechette']!.dir}`,
        arquero: `file:${QUICKSTART_SOURCES.arquero!.dir}`,
        '@types/node': `file:${join(modules, '@types/node')}`,
      };
      if (!duckdb.missing) dependencies[DUCKDB_PACKAGE] = `file:${duckdb.dir}`;
      writeFileSync(join(fq, 'package.json'), JSON.stringify({ name: 'flechette-only', private: true, dependencies }, null, 2));
      sh('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', '--legacy-peer-deps'], fq);
    });

    after(() => {
      if (fq) rmSync(fq, { recursive: true, force: true });
    });

    test('apache-arrow is not installed there, and the flechette entries load', () => {
      assert.ok(!existsSync(join(fq, 'node_modules/apache-arrow')), 'apache-arrow was installed (an optional peer must not be)');
      writeFileSync(join(fq, 'load.mjs'), "import * as f from 'arrow-device/flechette'; import * as a from 'arrow-device/flechette/adbc'; console.log(typeof f.importArrayStream, typeof a.AdbcDatabase);");
      const r = spawnSync(process.execPath, [...(process.versions.deno !== undefined ? ['run', '-A'] : []), 'load.mjs'], { cwd: fq, encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
      assert.equal(r.stdout.trim(), 'function function');
      // The main entry names the package it needs.
      writeFileSync(join(fq, 'main.mjs'), "import('arrow-device').then(() => console.log('loaded'), (e) => console.log(String(e.message)));");
      const m = spawnSync(process.execPath, [...(process.versions.deno !== undefined ? ['run', '-A'] : []), 'main.mjs'], { cwd: fq, encoding: 'utf8', timeout: 60_000 });
      assert.match(m.stdout, /apache-arrow/, `the main entry without apache-arrow: ${m.stdout}${m.stderr}`);
    });

    const programs: [string, string][] = [['quick start 1, through arrow-device/flechette/adbc', QUICK_START_1], ...flechetteBlocks.map((b) => [`README.md line ${b.line}`, b.code] as [string, string])];
    test('the README has a flechette quick start', () => assert.ok(flechetteBlocks.length >= 1, 'no ```ts quickstart block imports @uwdata/flechette'));
    programs.forEach(([what, code], i) => {
      const skip = duckdb.missing && process.env.DUCKDB_REQUIRED !== '1' ? duckdb.missing : false;
      test(`${what} runs without apache-arrow`, { skip }, async () => {
        let file = `flechette-${i + 1}.mts`;
        writeFileSync(join(fq, file), code);
        if (runner.transpile) {
          const { transformSync } = await import('esbuild');
          file = `flechette-${i + 1}.mjs`;
          writeFileSync(join(fq, file), transformSync(code, { loader: 'ts', format: 'esm', target: 'node20' }).code);
        }
        const r = spawnSync(process.execPath, [...runner.args, file], { cwd: fq, encoding: 'utf8', timeout: 90_000 });
        assert.equal(r.status, 0, `${what}: exited ${r.status}:\n${r.stdout}${r.stderr}`);
        for (const claim of claimsOf(code)) assert.ok(loose(r.stdout).includes(loose(claim)), `${what}: it claims to print ${claim}; it printed:\n${r.stdout}`);
      });
    });
  });
});
