#!/usr/bin/env node
// Runs the suite's core selection on Windows: Node.js 22 for Windows x64
// under Wine, with arrow-device installed for win32-x64 from the packed
// tarball, as a Windows user gets it.
//
//   node tools/windows.mjs [test files...]
//
// What it does, each step kept under .build/ so a second run skips it:
//
// 1. Node for Windows and a Wine prefix (tools/runtimes.mjs nodeWin64).
// 2. `npm pack` (prepack builds dist/ and the prebuilds), then a project in
//    .build/windows whose node_modules is installed for win32-x64 (`npm
//    install --os=win32 --cpu=x64 --ignore-scripts`: koffi's win32-x64
//    binary; its install script would build a Linux koffi).
// 3. The tests compiled to JavaScript on Linux (tsc; tsx's esbuild.exe does
//    not start under Wine 8: no bcryptprimitives.dll), with src/ compiled
//    beside them, one file per module: the tests import internal modules,
//    and the tarball's dist/ is bundled (tools/bundle.mjs), so it cannot
//    stand in for src/; the package itself is what the project installs.
// 4. The C test peers (test/ownership/counting.c, test/async/peer.c) built
//    as Windows DLLs with zig (x86_64-windows-gnu, against the UCRT): a
//    Windows process under Wine cannot start a Linux compiler. The tests
//    find them through ARROW_DEVICE_TEST_PEERS. The SQLite and Flight SQL
//    ADBC drivers from their win_amd64 wheels (pip download, the version
//    setup-drivers.sh pins), and arrow-go's example Flight SQL server built
//    for Windows with Go, for test/adbc (ADBC_SQLITE_DRIVER,
//    ADBC_FLIGHTSQL_DRIVER, ADBC_FLIGHTSQL_SERVER). Go programs need
//    bcryptprimitives.dll, which Wine 8 lacks: tools/wine/ has a stand-in.
// 5. Each file in its own `node.exe --test`, its output sent to a file and
//    printed after (Node under Wine cannot write to a Linux pipe).
//
// Prints the counts of each file and the totals; exits non-zero if any file
// fails. Files left out are listed with the reason.
//
// Plain JavaScript for any Node.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CORE, nodeWin64 } from './runtimes.mjs';
import { zig, zigEnv } from './zig.mjs';
import { describeBinary } from './binary.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const work = join(root, '.build', 'windows');

/** What cannot run under Wine of the core selection (tools/runtimes.mjs CORE), and why. */
const LEFT_OUT = {
  'test/platform/deno.test.ts': 'it runs Deno, a Linux program here, which a Windows process under Wine cannot start',
  'test/package/package.test.ts': 'it packs and installs with npm and runs Bun and Deno, Linux programs here; this run itself installs the packed tarball for win32',
};
/** Beside the core selection: the library pin (GetModuleHandleExW), and arrow-device/adbc with SQLite's and Flight SQL's drivers (step 4). */
const EXTRA = ['test/ownership/unloaded.test.ts', 'test/adbc/adbc.test.ts', 'test/adbc/discovery.test.ts', 'test/adbc/faults.test.ts'];
const SELECTION = [...CORE.filter((f) => !(f in LEFT_OUT)), ...EXTRA];

function step(what) {
  console.log(`\n----- windows: ${what}`);
}

/** A Windows path for a Linux one (Wine maps / to drive Z:). */
const winPath = (p) => `Z:${p.replaceAll('/', '\\')}`;

function npm(args, cwd) {
  execFileSync('npm', args, { cwd, stdio: ['ignore', 'inherit', 'inherit'] });
}

const picked = process.argv.slice(2);
const files = picked.length > 0 ? picked : SELECTION;

// 1. Node for Windows under Wine.
step('Node.js for Windows under Wine');
const node = nodeWin64();
if (typeof node === 'string') {
  console.error(`windows: cannot run: ${node}`);
  process.exit(1);
}
const env = { ...process.env, ...node.env };
// The Node that ran npm (with-node.mjs) is a Linux program, which a Windows process cannot start.
delete env.ARROW_DEVICE_LAUNCHER_NODE;
// Node's own output to a file: it cannot write to a Linux pipe.
const version = join(work, 'version.txt');
mkdirSync(work, { recursive: true });
spawnSync(node.cmd, [...node.args, '-e', `require('fs').writeFileSync(process.argv[1], process.version + ' ' + process.platform + '-' + process.arch)`, winPath(version)], {
  env,
  stdio: 'ignore',
});
if (!existsSync(version)) {
  console.error('windows: node.exe did not start under Wine');
  process.exit(1);
}
console.log(`Node.js ${readFileSync(version, 'utf8')} under ${execFileSync(node.cmd, ['--version'], { encoding: 'utf8' }).trim()}`);

// 2. The packed tarball, installed for win32-x64.
step('npm pack, installed for win32-x64 in .build/windows');
const rootPkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
rmSync(join(work, 'pack'), { recursive: true, force: true });
mkdirSync(join(work, 'pack'), { recursive: true });
npm(['pack', '--silent', '--pack-destination', join(work, 'pack')], root);
const tarball = readdirSync(join(work, 'pack')).find((f) => f.endsWith('.tgz'));
writeFileSync(
  join(work, 'package.json'),
  `${JSON.stringify(
    {
      name: 'arrow-device-windows-run',
      private: true,
      type: 'module',
      dependencies: {
        'arrow-device': `file:pack/${tarball}`,
        'apache-arrow': rootPkg.devDependencies['apache-arrow'],
        // The flechette target's tests (test/flechette, in the core selection) import it.
        '@uwdata/flechette': rootPkg.devDependencies['@uwdata/flechette'],
        koffi: rootPkg.dependencies.koffi,
      },
    },
    null,
    2,
  )}\n`,
);
// A fresh copy of the package every run (the tarball's name does not change with its content).
rmSync(join(work, 'node_modules', 'arrow-device'), { recursive: true, force: true });
npm(['install', '--os=win32', '--cpu=x64', '--ignore-scripts', '--no-audit', '--no-fund', '--no-package-lock', '--loglevel=error'], work);
const installed = join(work, 'node_modules', 'arrow-device');
if (!existsSync(join(work, 'node_modules', '@koromix', 'koffi-win32-x64'))) {
  console.error("windows: koffi's win32-x64 binary (@koromix/koffi-win32-x64) did not install");
  process.exit(1);
}

// 3. The tests and src/, compiled (the tests import src/'s internal modules, which the bundled dist/ does not keep apart).
step('the tests and src/ compiled to JavaScript (tsc)');
const run = join(work, 'run');
rmSync(run, { recursive: true, force: true });
execFileSync(process.execPath, [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json'), '--outDir', run, '--declaration', 'false', '--sourceMap', 'false'], {
  stdio: 'inherit',
});
if (existsSync(join(installed, 'prebuilds'))) cpSync(join(installed, 'prebuilds'), join(run, 'prebuilds'), { recursive: true });
// The suite's other files (C sources, fixtures), where the compiled tests look for them.
cpSync(join(root, 'test'), join(run, 'test'), { recursive: true, filter: (f) => statSync(f).isDirectory() || !f.endsWith('.ts') });

// 4. The C peers, as Windows DLLs, and the SQLite ADBC driver.
step('the C test peers as Windows DLLs (zig cc -target x86_64-windows-gnu)');
const peers = join(work, 'peers');
mkdirSync(peers, { recursive: true });
const PEERS = {
  counting: { source: 'test/ownership/counting.c', flags: ['-I', join(root, 'test', 'include')] },
  asyncpeer: { source: 'test/async/peer.c', flags: [] },
  threadsfixture: { source: 'test/threads/shared.c', flags: ['-I', join(root, 'test', 'include')] },
};
for (const [name, { source, flags }] of Object.entries(PEERS)) {
  const out = join(peers, `${name}.dll`);
  const src = join(root, source);
  const headers = join(root, 'test', 'include', 'arrow_c_abi.h');
  if (existsSync(out) && [src, headers].every((f) => statSync(out).mtimeMs >= statSync(f).mtimeMs)) continue;
  const r = spawnSync(zig(), ['cc', '-target', 'x86_64-windows-gnu', '-std=c11', '-O1', '-shared', '-pthread', ...flags, '-o', out, src], {
    stdio: 'inherit',
    env: { ...process.env, ...zigEnv() },
  });
  if (r.status !== 0) {
    console.error(`windows: zig cc failed for ${source}`);
    process.exit(1);
  }
  console.log(`${relative(root, out)} (${source})`);
}
for (const [name, fn] of [['counting', 'cp_make_batch'], ['asyncpeer', 'peer_produce'], ['threadsfixture', 'sp_make_batch']]) {
  const d = describeBinary(join(peers, `${name}.dll`));
  if (d.target !== 'win32-x64' || !d.exports.includes(fn)) {
    console.error(`windows: ${name}.dll is a ${d.target} library${d.exports.includes(fn) ? '' : ` without ${fn}`}`);
    process.exit(1);
  }
}

// The ADBC drivers for Windows: the win_amd64 wheels of the version test/adbc/setup-drivers.sh pins.
const adbcVersion = /^VERSION=(\S+)$/m.exec(readFileSync(join(root, 'test', 'adbc', 'setup-drivers.sh'), 'utf8'))?.[1];

/** The DLL of `adbc-driver-<name>` for win_amd64, under .build/windows/adbc-<name>/<version>/ (downloaded once). */
function adbcDriver(name) {
  const dir = join(work, `adbc-${name}`);
  // Named as on Windows (the entry point, AdbcDriver<Name>Init, is derived from the name), one folder per version.
  const dll = join(dir, adbcVersion, `adbc_driver_${name}.dll`);
  if (!existsSync(dll)) {
    mkdirSync(join(dir, 'wheels'), { recursive: true });
    mkdirSync(dirname(dll), { recursive: true });
    const py = process.env.PYTHON ?? 'python3';
    const dl = spawnSync(
      py,
      ['-m', 'pip', 'download', '--quiet', '--disable-pip-version-check', '--no-deps', '--only-binary=:all:', '--platform', 'win_amd64', '--dest', join(dir, 'wheels'), `adbc-driver-${name}==${adbcVersion}`],
      { stdio: 'inherit', env: { ...process.env, PIP_CACHE_DIR: join(dir, 'pip-cache') } },
    );
    // The wheel names its DLL libadbc_driver_<name>.so on every platform: taken out under a Windows name.
    const unpack = `import sys, zipfile, glob\nw = glob.glob(sys.argv[1] + '/adbc_driver_${name}-' + sys.argv[3] + '-*-win_amd64.whl')[0]\nopen(sys.argv[2], 'wb').write(zipfile.ZipFile(w).read('adbc_driver_${name}/libadbc_driver_${name}.so'))`;
    if (dl.status !== 0 || spawnSync(py, ['-c', unpack, join(dir, 'wheels'), dll, adbcVersion], { stdio: 'inherit' }).status !== 0) {
      console.error(`windows: could not get adbc-driver-${name}==${adbcVersion} for win_amd64 (pip)`);
      process.exit(1);
    }
  }
  const entry = `AdbcDriver${name[0].toUpperCase()}${name.slice(1)}Init`;
  const d = describeBinary(dll);
  if (d.target !== 'win32-x64' || !d.exports.includes(entry)) {
    console.error(`windows: ${dll} is a ${d.target} library${d.exports.includes(entry) ? '' : ` without ${entry}`}`);
    process.exit(1);
  }
  console.log(`${relative(root, dll)} (adbc-driver-${name} ${adbcVersion}, win_amd64)`);
  return dll;
}

step('the SQLite and Flight SQL ADBC drivers for Windows (their win_amd64 wheels)');
const driverEnv = { ADBC_SQLITE_DRIVER: winPath(adbcDriver('sqlite')) };

// Flight SQL: the driver (Go, in a DLL) and arrow-go's example server built for Windows with the
// machine's Go, at the version test/adbc/setup-flightsql-server.sh pins, sharing its module cache.
// Go programs ask bcryptprimitives.dll for ProcessPrng at start, which Wine 8 lacks: a stand-in
// (tools/wine/bcryptprimitives.c, never shipped) goes into the Wine prefix.
step("Flight SQL for Windows: arrow-go's example server (GOOS=windows) and Wine's missing bcryptprimitives.dll");
const go = [process.env.GO, ...(process.env.PATH ?? '').split(':').map((d) => d && join(d, 'go')), '/usr/local/go/bin/go'].find((g) => g && existsSync(g));
if (!go) {
  console.log('no Go here: the Flight SQL tests skip under Wine (they say why)');
} else {
  const serverVersion = /^VERSION=(\S+)$/m.exec(readFileSync(join(root, 'test', 'adbc', 'setup-flightsql-server.sh'), 'utf8'))?.[1];
  const module = /^MODULE=(\S+)$/m.exec(readFileSync(join(root, 'test', 'adbc', 'setup-flightsql-server.sh'), 'utf8'))?.[1];
  const goDir = join(root, '.build', 'flightsql');
  const server = join(goDir, 'gopath', 'bin', 'windows_amd64', 'sqlite_flightsql_server.exe');
  const stamp = join(goDir, 'VERSION-windows');
  if (!existsSync(server) || !existsSync(stamp) || readFileSync(stamp, 'utf8').trim() !== serverVersion) {
    const r = spawnSync(go, ['install', `${module}@${serverVersion}`], {
      stdio: 'inherit',
      env: {
        ...process.env,
        GOPATH: join(goDir, 'gopath'),
        GOMODCACHE: join(goDir, 'gopath', 'pkg', 'mod'),
        GOCACHE: join(goDir, 'gocache'),
        GOFLAGS: '-modcacherw',
        GOTOOLCHAIN: 'local',
        GOOS: 'windows',
        GOARCH: 'amd64',
        CGO_ENABLED: '0',
        GOBIN: '',
      },
    });
    if (r.status !== 0 || !existsSync(server)) {
      console.error(`windows: go install ${module}@${serverVersion} for windows/amd64 failed`);
      process.exit(1);
    }
    writeFileSync(stamp, `${serverVersion}\n`);
  }
  console.log(`${relative(root, server)} (${module}@${serverVersion}, windows/amd64)`);
  const shim = join(node.env.WINEPREFIX, 'drive_c', 'windows', 'system32', 'bcryptprimitives.dll');
  const shimSource = join(root, 'tools', 'wine', 'bcryptprimitives.c');
  if (!existsSync(shim) || statSync(shim).mtimeMs < statSync(shimSource).mtimeMs) {
    const r = spawnSync(zig(), ['cc', '-target', 'x86_64-windows-gnu', '-O2', '-shared', '-o', shim, shimSource], { stdio: 'inherit', env: { ...process.env, ...zigEnv() } });
    if (r.status !== 0) {
      console.error('windows: zig cc failed for tools/wine/bcryptprimitives.c');
      process.exit(1);
    }
  }
  Object.assign(driverEnv, { ADBC_FLIGHTSQL_DRIVER: winPath(adbcDriver('flightsql')), ADBC_FLIGHTSQL_SERVER: winPath(server) });
}

// 5. Each file under Wine.
console.log(`\n===== windows: ${readFileSync(version, 'utf8')} under Wine, ${files.length} test files =====`);
if (picked.length === 0) for (const [f, why] of Object.entries(LEFT_OUT)) console.log(`not run on windows: ${f}: ${why}`);
const logs = join(work, 'logs');
rmSync(logs, { recursive: true, force: true });
mkdirSync(logs, { recursive: true });
const failed = [];
const totals = { pass: 0, fail: 0, cancelled: 0, skipped: 0 };
const t0 = Date.now();
for (const f of files) {
  const js = join(run, f.replace(/\.ts$/, '.js'));
  const log = join(logs, `${f.replaceAll('/', '_')}.txt`);
  const started = Date.now();
  console.log(`\n----- windows: ${f}`);
  // cmd's redirection: Node writes to a Windows file handle, not to a Linux pipe.
  const r = spawnSync(node.cmd, ['cmd', '/c', `${winPath(node.args[0])} --test --test-reporter=spec ${winPath(js)} > ${winPath(log)} 2>&1`], {
    cwd: root,
    env: { ...env, ARROW_DEVICE_TEST_PEERS: winPath(peers), ...driverEnv },
    stdio: 'ignore',
    timeout: 600_000,
  });
  const out = existsSync(log) ? readFileSync(log, 'utf8') : '';
  process.stdout.write(out);
  const count = (k) => Number((out.match(new RegExp(`^ℹ ${k} (\\d+)$`, 'm')) ?? [])[1] ?? 0);
  for (const k of Object.keys(totals)) totals[k] += count(k);
  const how = r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`;
  console.log(`----- windows: ${f}: ${how}, ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (r.status !== 0 || !/^ℹ pass \d+$/m.test(out)) failed.push(`${f} (${how})`);
}
spawnSync(join(dirname(node.cmd), 'wineserver'), ['-k'], { env, stdio: 'ignore' });
console.log(
  `\n===== windows: ${files.length - failed.length} of ${files.length} test files passed in ${((Date.now() - t0) / 1000).toFixed(0)} s; ` +
    `tests: ${totals.pass} pass, ${totals.fail} fail, ${totals.cancelled} cancelled, ${totals.skipped} skipped =====`,
);
for (const f of failed) console.log(`FAILED on windows: ${f}`);
process.exit(failed.length === 0 ? 0 : 1);
