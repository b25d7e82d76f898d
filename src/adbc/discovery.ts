/**
 * Finding a driver as the ADBC driver manager does (arrow-adbc docs,
 * "Driver Manifests" and "Connection Profiles"; its C driver manager's
 * `InternalAdbcParseOptions` and `FindDriver` are the reference for the
 * order): the `driver` option, a URI whose scheme names the driver, or a
 * connection profile, resolved to a shared library through manifests
 * (`<name>.toml`) in the search directories, then the library path; the
 * entry point from the options, the manifest, or the library's name.
 *
 * Every place tried is recorded, so a driver that cannot be found is an
 * error that lists them all.
 */
import { builtin, existsSync, join } from '../platform/node.js';
import { AdbcError, AdbcStatus } from './error.js';
import { parseToml, TomlError, type TomlTable, type TomlValue } from './toml.js';
import { LoadFlags, type ConnectOptions } from './types.js';

// node:path, loaded on first use (src/platform/node.ts `builtin`, as `existsSync` and `join` are), not at import.
const nodePath = (): typeof import('node:path') => builtin('node:path');

/** The options a database gets: strings, and the integer and double options a profile may carry (ADBC 1.1.0 typed setters). */
export interface DatabaseOptions {
  strings: Map<string, string>;
  ints: Map<string, bigint>;
  doubles: Map<string, number>;
}

/** A driver name resolved to a library: what to load, how, and how it was found. */
export interface DriverLocation {
  /** What `dlopen` gets: a path, or a bare file name for the library path. */
  library: string;
  /** The init function to call, or undefined: derive it from the library name, then `AdbcDriverInit`. */
  entrypoint: string | undefined;
  /** The manifest that named the library, if one did. */
  manifest: string | undefined;
  /** Every place looked at before, in order, with why it was passed over. */
  tried: string[];
}

const invalid = (op: string, message: string): AdbcError => new AdbcError(op, { status: AdbcStatus.INVALID_ARGUMENT, message });

/**
 * `driver:rest` split as the ADBC driver manager splits it: `profile://x`
 * names a profile; `scheme://...` names driver `scheme` and is the whole
 * URI; `driver:uri` names `driver` with `uri`. Undefined without a colon,
 * and on Windows for a path that starts with a drive (`C:\\drivers\\x.dll`,
 * `C:/x.dll`): its colon is the drive's, not a driver's.
 */
export function parseDriverUri(s: string, platform: string = process.platform): { driver: string; uri?: string; profile?: string } | undefined {
  if (platform === 'win32' && /^[A-Za-z]:[\\/]/.test(s)) return undefined;
  const i = s.indexOf(':');
  if (i < 0) return undefined;
  const driver = s.slice(0, i);
  if (s.length <= i + 1) return { driver };
  if (s[i + 1] === '/') {
    if (driver === 'profile' && s.length > i + 2) return { driver: '', profile: s.slice(i + 3) };
    return { driver, uri: s };
  }
  return { driver, uri: s.slice(i + 1) };
}

/**
 * The driver name and database options of `new AdbcDatabase(opts)`, after
 * profiles and URIs are applied: explicit options win over a profile's.
 */
export function resolveOptions(opts: ConnectOptions): { driver: string; options: DatabaseOptions; profile: string | undefined } {
  const op = 'AdbcDatabase';
  if (typeof opts !== 'object' || opts === null) throw invalid(op, `expected an options object ({ driver, databaseOptions }), got ${opts === null ? 'null' : typeof opts}`);
  const strings = new Map<string, string>();
  for (const [k, v] of Object.entries(opts.databaseOptions ?? {})) {
    if (typeof v !== 'string') throw invalid(op, `databaseOptions.${k}: expected a string, got ${typeof v}`);
    strings.set(k, v);
  }
  const options: DatabaseOptions = { strings, ints: new Map(), doubles: new Map() };
  if (opts.driver !== undefined && typeof opts.driver !== 'string') throw invalid(op, `driver: expected a string, got ${typeof (opts as { driver: unknown }).driver}`);
  let driver = opts.driver ?? '';
  const fromDriver = driver ? parseDriverUri(driver) : undefined;
  const uri = strings.get('uri');
  const fromUri = uri !== undefined ? parseDriverUri(uri) : undefined;

  const given = [strings.has('profile'), fromUri?.profile !== undefined, fromDriver?.profile !== undefined].filter(Boolean).length;
  if (given > 1) throw invalid(op, 'Multiple profiles specified: the `profile` option, a `profile://` uri and a `profile://` driver are mutually exclusive');
  let profileName: string | undefined;
  if (strings.has('profile')) {
    profileName = strings.get('profile')!;
    strings.delete('profile');
  } else if (fromUri?.profile !== undefined) {
    profileName = fromUri.profile;
    strings.delete('uri');
  } else if (fromDriver?.profile !== undefined) {
    profileName = fromDriver.profile;
    driver = '';
  }
  let profilePath: string | undefined;
  if (profileName !== undefined) {
    const p = findProfile(profileName, opts.profileSearchPaths ?? []);
    profilePath = p.path;
    if (p.driver) {
      if (driver && driver !== p.driver) {
        // The official driver manager's words exactly (code written for it matches on them); which
        // profile and where it was found go in the details.
        const enc = new TextEncoder();
        throw new AdbcError(op, {
          status: AdbcStatus.INVALID_ARGUMENT,
          message: `profile specifies driver \`${p.driver}\` which does not match requested driver \`${driver}\``,
          details: new Map([['profile', enc.encode(profileName)], ['profile_path', enc.encode(p.path)]]),
        });
      }
      driver = p.driver;
    }
    for (const [k, v] of p.options.strings) if (!strings.has(k)) strings.set(k, v);
    for (const [k, v] of p.options.ints) if (!strings.has(k)) options.ints.set(k, v);
    for (const [k, v] of p.options.doubles) if (!strings.has(k)) options.doubles.set(k, v);
  }

  // A driver given as `name:uri` (from the caller or a profile).
  if (driver) {
    const parsed = parseDriverUri(driver);
    if (parsed?.profile !== undefined) throw invalid(op, 'a profile cannot name a profile:// driver');
    if (parsed?.uri !== undefined) {
      driver = parsed.driver;
      strings.set('uri', parsed.uri);
    }
  }
  // No driver: the scheme of the uri names it.
  const u = strings.get('uri');
  if (!driver && u !== undefined) {
    const parsed = parseDriverUri(u);
    if (parsed?.profile !== undefined) throw invalid(op, 'a profile cannot set a profile:// uri');
    if (parsed?.uri !== undefined) {
      driver = parsed.driver;
      strings.set('uri', parsed.uri);
    } else if (!parsed) driver = u;
  }
  if (!driver) throw invalid(op, 'a driver is required: give `driver`, or a `uri` (whose scheme names the driver) or `profile` in databaseOptions');
  return { driver, options, profile: profilePath };
}

// --- platform and directories --------------------------------------------------------------------

/**
 * The platform tuple of driver manifests (`linux_amd64`, `macos_arm64`, ...): the key under which a
 * manifest's `[Driver.shared]` table names the library for this machine.
 *
 * @example
 * platformTuple(); // 'linux_amd64' on x64 Linux
 */
export function platformTuple(): string {
  const os: Record<string, string> = { linux: 'linux', darwin: 'macos', win32: 'windows', freebsd: 'freebsd', openbsd: 'openbsd' };
  const arch: Record<string, string> = {
    x64: 'amd64', arm64: 'arm64', ia32: 'x86', arm: 'arm', s390x: 's390x', ppc: 'powerpc', ppc64: process.platform === 'linux' && (process.config.variables as { node_byteorder?: string }).node_byteorder !== 'big' ? 'powerpc64le' : 'powerpc64',
    riscv64: 'riscv64', wasm32: 'wasm32',
  };
  return `${os[process.platform] ?? process.platform}_${arch[process.arch] ?? process.arch}`;
}

const LIB_PREFIX = process.platform === 'win32' ? '' : 'lib';
const LIB_SUFFIX = process.platform === 'win32' ? '.dll' : process.platform === 'darwin' ? '.dylib' : '.so';

function userConfigDir(): string {
  if (process.platform === 'darwin') return join(builtin('node:os').homedir(), 'Library', 'Application Support', 'ADBC');
  if (process.platform === 'win32') return join(process.env.LOCALAPPDATA ?? join(builtin('node:os').homedir(), 'AppData', 'Local'), 'ADBC');
  return join(process.env.XDG_CONFIG_HOME || join(builtin('node:os').homedir(), '.config'), 'adbc');
}

const capitalised = process.platform === 'darwin' || process.platform === 'win32';

function envDirs(name: string): string[] {
  const v = process.env[name];
  return v ? v.split(nodePath().delimiter).filter((d) => d !== '') : [];
}

/** The directories searched for driver manifests, in order, each labelled; disabled ones appear with why, for the error. */
function driverSearchDirs(flags: number, extra: readonly string[]): { dir: string | undefined; label: string }[] {
  const out: { dir: string | undefined; label: string }[] = [];
  if (flags & LoadFlags.SearchEnv) {
    const env = envDirs('ADBC_DRIVER_PATH');
    if (env.length === 0) out.push({ dir: undefined, label: '$ADBC_DRIVER_PATH: not set' });
    for (const d of env) out.push({ dir: d, label: `$ADBC_DRIVER_PATH ${d}` });
  } else out.push({ dir: undefined, label: '$ADBC_DRIVER_PATH: not searched (LoadFlags.SearchEnv not set)' });
  for (const d of extra) out.push({ dir: d, label: `manifestSearchPaths ${d}` });
  const user = join(userConfigDir(), capitalised ? 'Drivers' : 'drivers');
  out.push(flags & LoadFlags.SearchUser ? { dir: user, label: `user directory ${user}` } : { dir: undefined, label: `user directory ${user}: not searched (LoadFlags.SearchUser not set)` });
  if (process.platform !== 'win32') {
    const system = process.platform === 'darwin' ? '/Library/Application Support/ADBC/Drivers' : '/etc/adbc/drivers';
    out.push(flags & LoadFlags.SearchSystem ? { dir: system, label: `system directory ${system}` } : { dir: undefined, label: `system directory ${system}: not searched (LoadFlags.SearchSystem not set)` });
  } else {
    // The ADBC driver manager also reads driver entries from the registry on Windows
    // (SOFTWARE\ADBC\Drivers under HKEY_CURRENT_USER and HKEY_LOCAL_MACHINE); we do not, and say so.
    out.push({ dir: undefined, label: 'the registry (SOFTWARE\\ADBC\\Drivers): not searched by arrow-device; give a manifest path or directory' });
  }
  return out;
}

// --- manifests -----------------------------------------------------------------------------------

/** A TOML file read; its syntax errors become INVALID_ARGUMENT errors naming the file and line. */
function readTomlFile(path: string, what: string): TomlTable {
  let text: string;
  try {
    text = builtin('node:fs').readFileSync(path, 'utf8');
  } catch (e) {
    throw new AdbcError(what, { status: AdbcStatus.NOT_FOUND, message: `cannot read ${what} ${path}: ${(e as Error).message}` });
  }
  try {
    return parseToml(text, path);
  } catch (e) {
    if (e instanceof TomlError) throw invalid(what, `${what} ${e.message}`);
    throw e;
  }
}

const isTable = (v: TomlValue | undefined): v is TomlTable => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A driver manifest's library for this platform and entry point. Throws
 * INVALID_ARGUMENT for a malformed manifest; returns `missing` (the
 * reason) when it names no library for this platform (the search goes on).
 */
export function readManifest(path: string): { library: string; entrypoint: string | undefined } | { missing: string } {
  const t = readTomlFile(path, 'driver manifest');
  const version = t.manifest_version ?? 1n;
  if (version !== 1n) throw invalid('driver manifest', `driver manifest ${path}: manifest_version ${String(version)} is not supported (only 1)`);
  const drv = t.Driver;
  if (drv !== undefined && !isTable(drv)) throw invalid('driver manifest', `driver manifest ${path}: [Driver] must be a table`);
  const entrypoint = drv?.entrypoint;
  if (entrypoint !== undefined && typeof entrypoint !== 'string') throw invalid('driver manifest', `driver manifest ${path}: Driver.entrypoint must be a string`);
  const shared = drv?.shared;
  let library: TomlValue | undefined = shared;
  if (isTable(shared)) {
    const tuple = platformTuple();
    library = shared[tuple];
    if (library === undefined) return { missing: `${path} names no library for ${tuple} (it has: ${Object.keys(shared).join(', ') || 'none'})` };
  } else if (shared === undefined) {
    throw invalid('driver manifest', `driver manifest ${path}: Driver.shared is missing (a path, or a table of paths by platform)`);
  }
  if (typeof library !== 'string') throw invalid('driver manifest', `driver manifest ${path}: Driver.shared must be a string or a table of strings`);
  if (library === '') throw invalid('driver manifest', `driver manifest ${path}: Driver.shared is an empty string`);
  return { library, entrypoint: entrypoint || undefined };
}

/**
 * Resolves a driver name to a library, as the ADBC driver manager does:
 * a path with an extension (a `.toml` manifest, else a library); an
 * absolute path without one (`<path>.toml` if it exists, else the path);
 * a name, looked up as `<name>.toml`, then `<name>` and
 * `lib<name>.so` in each search directory, then handed to the library path.
 * `load(library)` returns undefined on success, else the loader's reason.
 */
export function findDriver(
  name: string,
  flags: number,
  manifestSearchPaths: readonly string[],
  load: (library: string) => string | undefined,
): DriverLocation {
  const op = 'AdbcDatabase';
  const tried: string[] = [];
  const allowRelative = (flags & LoadFlags.AllowRelativePaths) !== 0;
  const fromManifest = (path: string): DriverLocation => {
    const m = readManifest(path);
    if ('missing' in m) throw new AdbcError(op, { status: AdbcStatus.NOT_FOUND, message: `driver manifest ${m.missing}` });
    const why = load(m.library);
    if (why !== undefined) throw new AdbcError(op, { status: AdbcStatus.NOT_FOUND, message: `driver manifest ${path} names ${m.library}, which cannot be loaded: ${why}` });
    return { library: m.library, entrypoint: m.entrypoint, manifest: path, tried };
  };
  const direct = (library: string): DriverLocation => {
    const why = load(library);
    if (why !== undefined) throw new AdbcError(op, { status: AdbcStatus.NOT_FOUND, message: `driver ${library} cannot be loaded: ${why}` });
    return { library, entrypoint: undefined, manifest: undefined, tried };
  };
  const ext = nodePath().extname(name);
  if (ext !== '') {
    if (!nodePath().isAbsolute(name) && !allowRelative) {
      throw invalid(op, `driver ${name} is a relative path, and relative paths are not allowed (LoadFlags.AllowRelativePaths)`);
    }
    return ext === '.toml' ? fromManifest(name) : direct(name);
  }
  if (nodePath().isAbsolute(name)) {
    if (existsSync(`${name}.toml`)) return fromManifest(`${name}.toml`);
    return direct(name);
  }
  if (name.includes('/') && !allowRelative) {
    throw invalid(op, `driver ${name} is a relative path, and relative paths are not allowed (LoadFlags.AllowRelativePaths)`);
  }
  for (const { dir, label } of driverSearchDirs(flags, manifestSearchPaths)) {
    if (dir === undefined) {
      tried.push(label);
      continue;
    }
    if (!existsSync(dir)) {
      tried.push(`${label}: no such directory`);
      continue;
    }
    const manifest = join(dir, `${name}.toml`);
    if (existsSync(manifest)) {
      const m = readManifest(manifest);
      if ('missing' in m) tried.push(`${label}: ${m.missing}`);
      else {
        const why = load(m.library);
        if (why !== undefined) throw new AdbcError(op, { status: AdbcStatus.NOT_FOUND, message: `driver manifest ${manifest} names ${m.library}, which cannot be loaded: ${why}` });
        return { library: m.library, entrypoint: m.entrypoint, manifest, tried };
      }
    } else tried.push(`${manifest}: no such file`);
    for (const file of [name, `${LIB_PREFIX}${name}${LIB_SUFFIX}`]) {
      const p = join(dir, file);
      if (!existsSync(p)) continue;
      const why = load(p);
      if (why === undefined) return { library: p, entrypoint: undefined, manifest: undefined, tried };
      tried.push(`${p}: ${why}`);
    }
  }
  // Last, the system's library path (LD_LIBRARY_PATH, the loader's cache): the name, then lib<name>.so.
  for (const file of [name, `${LIB_PREFIX}${name}${LIB_SUFFIX}`]) {
    const why = load(file);
    if (why === undefined) return { library: file, entrypoint: undefined, manifest: undefined, tried };
    tried.push(`the library path, ${file}: ${why}`);
  }
  throw new AdbcError(op, {
    status: AdbcStatus.NOT_FOUND,
    message: `driver '${name}' not found; tried:\n${tried.map((t) => `  ${t}`).join('\n')}`,
  });
}

/**
 * The init function's default name, derived from the library's file name as
 * the ADBC driver manager derives it: `libadbc_driver_sqlite.so` ->
 * `AdbcDriverSqliteInit`, `proprietary_driver.dll` -> `AdbcProprietaryDriverInit`.
 *
 * @example
 * defaultEntrypoint('/usr/lib/libadbc_driver_sqlite.so'); // 'AdbcDriverSqliteInit'
 * defaultEntrypoint('C:\\drivers\\proprietary_driver.dll'); // 'AdbcProprietaryDriverInit'
 */
export function defaultEntrypoint(library: string): string {
  let file = nodePath().basename(library.replaceAll('\\', '/'));
  const dot = file.indexOf('.');
  if (dot >= 0) file = file.slice(0, dot);
  if (file.startsWith('lib')) file = file.slice(3);
  let out = file.split(/[-_]/).map((t) => (t === '' ? '' : t[0]!.toUpperCase() + t.slice(1))).join('');
  if (!out.startsWith('Adbc')) out = `Adbc${out}`;
  return `${out}Init`;
}

// --- profiles ------------------------------------------------------------------------------------

/** `{{ env_var(NAME) }}` in a profile value: the variable's value (empty when unset); any other function is an error. */
function substitute(key: string, value: string, path: string): string {
  return value.replace(/\{\{\s*([^{}]*?)\s*\}\}/g, (_m, body: string) => {
    const m = /^env_var\(([^()]*)\)$/.exec(body);
    if (!m) throw invalid('profile', `profile ${path}: option ${key}: unsupported substitution {{ ${body} }} (only env_var(NAME))`);
    const name = m[1]!.trim();
    if (name === '') throw invalid('profile', `profile ${path}: option ${key}: env_var() needs a variable name`);
    return process.env[name] ?? '';
  });
}

/** A connection profile read: its driver (if it names one) and options. */
export interface Profile {
  path: string;
  driver: string | undefined;
  options: DatabaseOptions;
}

function readProfile(path: string): Profile {
  const t = readTomlFile(path, 'profile');
  if (typeof t.profile_version !== 'bigint') throw invalid('profile', `profile ${path}: profile_version must be an integer`);
  if (t.profile_version !== 1n) throw invalid('profile', `profile ${path}: profile_version ${t.profile_version} is not supported (only 1)`);
  if (t.driver !== undefined && typeof t.driver !== 'string') throw invalid('profile', `profile ${path}: driver must be a string`);
  const opts = t.Options;
  if (!isTable(opts)) throw invalid('profile', `profile ${path}: the [Options] table is required`);
  const options: DatabaseOptions = { strings: new Map(), ints: new Map(), doubles: new Map() };
  const visit = (prefix: string, table: TomlTable): void => {
    for (const [k, v] of Object.entries(table)) {
      const key = prefix + k;
      if (typeof v === 'string') options.strings.set(key, substitute(key, v, path));
      else if (typeof v === 'bigint') options.ints.set(key, v);
      else if (typeof v === 'number') options.doubles.set(key, v);
      else if (typeof v === 'boolean') options.strings.set(key, v ? 'true' : 'false');
      else if (isTable(v)) visit(`${key}.`, v);
      else throw invalid('profile', `profile ${path}: option ${key}: arrays are not option values`);
    }
  };
  visit('', opts);
  return { path, driver: t.driver || undefined, options };
}

/**
 * Finds and reads profile `name`: a path to a `.toml` file, an absolute
 * path without the extension, or a name looked up as `<name>.toml` in
 * `profileSearchPaths`, `ADBC_PROFILE_PATH` and the user's profile
 * directory. Not found: NOT_FOUND naming every place tried.
 */
export function findProfile(name: string, profileSearchPaths: readonly string[]): Profile {
  if (name === '') throw invalid('profile', 'the profile name is empty');
  if (nodePath().extname(name) === '.toml') {
    if (!existsSync(name)) throw new AdbcError('profile', { status: AdbcStatus.NOT_FOUND, message: `profile file does not exist: ${name}` });
    return readProfile(name);
  }
  if (nodePath().isAbsolute(name)) return readProfile(`${name}.toml`);
  const dirs = [
    ...profileSearchPaths.map((d) => ({ dir: d, label: `profileSearchPaths ${d}` })),
    ...envDirs('ADBC_PROFILE_PATH').map((d) => ({ dir: d, label: `$ADBC_PROFILE_PATH ${d}` })),
  ];
  const user = join(userConfigDir(), capitalised ? 'Profiles' : 'profiles');
  dirs.push({ dir: user, label: `user directory ${user}` });
  const tried: string[] = [];
  if (!process.env.ADBC_PROFILE_PATH) tried.push('$ADBC_PROFILE_PATH: not set');
  for (const { dir } of dirs) {
    const p = join(dir, `${name}.toml`);
    if (existsSync(p)) return readProfile(p);
    tried.push(`${p}: no such file`);
  }
  throw new AdbcError('profile', { status: AdbcStatus.NOT_FOUND, message: `profile '${name}' not found; tried:\n${tried.map((t) => `  ${t}`).join('\n')}` });
}
