/**
 * Driver discovery as the ADBC driver manager does it, against the real
 * SQLite and DuckDB drivers: absolute paths, short names through manifests
 * (`manifestSearchPaths`, `ADBC_DRIVER_PATH`), manifest paths, URIs whose
 * scheme names the driver, connection profiles (`profile://`, the
 * `profile` option, `env_var` substitution), the entry point from the
 * manifest or derived from the library name, and the errors: a missing
 * driver names every place tried, a malformed manifest its line.
 * Plus the TOML reader those files go through.
 */
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { AdbcDatabase, AdbcError, AdbcStatus, defaultEntrypoint, LoadFlags, platformTuple, type ConnectOptions } from '../../src/adbc/index.js';
import { parseDriverUri } from '../../src/adbc/discovery.js';
import { parseToml, TomlError } from '../../src/adbc/toml.js';
import { tempDir } from '../helpers/tools.js';
import { DUCKDB, SQLITE } from './drivers.js';

const dir = tempDir('adbc-discovery');
after(() => rmSync(dir, { recursive: true, force: true }));
const manifests = join(dir, 'manifests');
const profiles = join(dir, 'profiles');
mkdirSync(manifests, { recursive: true });
mkdirSync(profiles, { recursive: true });
const toml = (s: string): string => JSON.stringify(s);

/** Opens, runs `SELECT 41 + 1`, closes; returns the answer and where the driver came from. */
async function answer(opts: ConnectOptions): Promise<{ value: unknown; db: AdbcDatabase }> {
  const db = new AdbcDatabase(opts);
  try {
    const conn = await db.connect();
    try {
      const t = await conn.query('SELECT 41 + 1 AS answer');
      try {
        return { value: Number(t.getChild('answer')!.get(0)), db };
      } finally {
        t.release();
      }
    } finally {
      await conn.close();
    }
  } finally {
    await db.close();
  }
}

describe('driver discovery (SQLite driver)', { skip: SQLITE.missing }, () => {
  writeFileSync(join(manifests, 'sqlite.toml'), `manifest_version = 1\nname = "SQLite"\n\n[Driver]\nshared = ${toml(SQLITE.library)}\n`);
  writeFileSync(join(manifests, 'bytable.toml'), `[Driver.shared]\n${platformTuple()} = ${toml(SQLITE.library)}\nother_os = "/nowhere.so"\n`);
  writeFileSync(join(manifests, 'otherplatform.toml'), `[Driver.shared]\nplan9_mips = "/nowhere.so"\n`);
  writeFileSync(join(manifests, 'broken.toml'), `[Driver]\nshared = "unterminated\n`);
  writeFileSync(join(profiles, 'mem.toml'), `profile_version = 1\ndriver = "sqlite"\n\n[Options]\nuri = "{{ env_var(ARROW_DEVICE_TEST_SQLITE_URI) }}"\n`);
  writeFileSync(join(profiles, 'nodriver.toml'), `profile_version = 1\n[Options]\nuri = ":memory:"\n`);

  test('an absolute path to the library; the entry point derived from its name (AdbcDriverSqliteInit)', async () => {
    const { value, db } = await answer({ driver: SQLITE.library, databaseOptions: { uri: ':memory:' } });
    assert.equal(value, 42);
    assert.equal(db.driverInfo.entrypoint, 'AdbcDriverSqliteInit');
    assert.equal(db.driverInfo.adbcVersion, 1_001_000);
    assert.equal(db.released, true);
  });

  test('a short name through a manifest in manifestSearchPaths, and through $ADBC_DRIVER_PATH', async () => {
    const { value, db } = await answer({ driver: 'sqlite', manifestSearchPaths: [manifests], databaseOptions: { uri: ':memory:' } });
    assert.equal(value, 42);
    assert.equal(db.driverInfo.manifest, join(manifests, 'sqlite.toml'));
    process.env.ADBC_DRIVER_PATH = manifests;
    try {
      assert.equal((await answer({ driver: 'sqlite', databaseOptions: { uri: ':memory:' } })).value, 42);
      // Without LoadFlags.SearchEnv the variable is not read: not found.
      assert.throws(() => new AdbcDatabase({ driver: 'sqlite', loadFlags: LoadFlags.SearchUser }), (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.NOT_FOUND && /LoadFlags.SearchEnv not set/.test(e.message));
    } finally {
      delete process.env.ADBC_DRIVER_PATH;
    }
  });

  test('a manifest path, with and without .toml; a table of libraries by platform', async () => {
    assert.equal((await answer({ driver: join(manifests, 'sqlite.toml'), databaseOptions: { uri: ':memory:' } })).value, 42);
    assert.equal((await answer({ driver: join(manifests, 'sqlite'), databaseOptions: { uri: ':memory:' } })).value, 42);
    assert.equal((await answer({ driver: 'bytable', manifestSearchPaths: [manifests], databaseOptions: { uri: ':memory:' } })).value, 42);
  });

  test('a URI whose scheme names the driver: in driver, or in databaseOptions.uri alone', async () => {
    assert.deepEqual(parseDriverUri('sqlite:file::memory:'), { driver: 'sqlite', uri: 'file::memory:' });
    assert.deepEqual(parseDriverUri('postgresql://u@h/db'), { driver: 'postgresql', uri: 'postgresql://u@h/db' });
    assert.deepEqual(parseDriverUri('profile://p'), { driver: '', profile: 'p' });
    assert.equal(parseDriverUri('/usr/lib/libx.so'), undefined);
    // A Windows path's drive colon names no driver there (elsewhere `c:/x` is driver c with that URI).
    assert.equal(parseDriverUri('C:\\drivers\\adbc_driver_sqlite.dll', 'win32'), undefined);
    assert.equal(parseDriverUri('d:/drivers/x.dll', 'win32'), undefined);
    assert.deepEqual(parseDriverUri('sqlite:C:/data/x.db', 'win32'), { driver: 'sqlite', uri: 'C:/data/x.db' });
    assert.deepEqual(parseDriverUri('c:/x', 'linux'), { driver: 'c', uri: 'c:/x' });
    assert.equal((await answer({ driver: 'sqlite:file::memory:', manifestSearchPaths: [manifests] })).value, 42);
    assert.equal((await answer({ databaseOptions: { uri: 'sqlite::memory:' }, manifestSearchPaths: [manifests] })).value, 42);
  });

  test('connection profiles: profile://name, the profile option, env_var substitution, a driver that disagrees', async () => {
    process.env.ARROW_DEVICE_TEST_SQLITE_URI = ':memory:';
    try {
      const { value, db } = await answer({ driver: 'profile://mem', profileSearchPaths: [profiles], manifestSearchPaths: [manifests] });
      assert.equal(value, 42);
      assert.equal(db.driverInfo.profile, join(profiles, 'mem.toml'));
      assert.equal((await answer({ databaseOptions: { profile: 'mem' }, profileSearchPaths: [profiles], manifestSearchPaths: [manifests] })).value, 42);
      assert.equal((await answer({ databaseOptions: { uri: 'profile://mem' }, profileSearchPaths: [profiles], manifestSearchPaths: [manifests] })).value, 42);
      // A profile without a driver takes the caller's.
      assert.equal((await answer({ driver: SQLITE.library, databaseOptions: { profile: 'nodriver' }, profileSearchPaths: [profiles] })).value, 42);
      assert.throws(() => new AdbcDatabase({ driver: 'duckdb', databaseOptions: { profile: 'mem' }, profileSearchPaths: [profiles] }),
        (e: unknown) => {
          // The official driver manager's message, word for word (its test asserts it); the profile in the details.
          assert.ok(e instanceof AdbcError && e.code === 'InvalidArguments');
          assert.equal(e.message, 'profile specifies driver `sqlite` which does not match requested driver `duckdb`');
          assert.equal(e.detail('profile'), 'mem');
          assert.equal(e.detail('profile_path'), join(profiles, 'mem.toml'));
          return true;
        });
      assert.throws(() => new AdbcDatabase({ driver: 'profile://mem', databaseOptions: { profile: 'mem' } }), /mutually exclusive/);
      assert.throws(() => new AdbcDatabase({ driver: 'profile://absent', profileSearchPaths: [profiles] }),
        (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.NOT_FOUND && e.message.includes(join(profiles, 'absent.toml')));
    } finally {
      delete process.env.ARROW_DEVICE_TEST_SQLITE_URI;
    }
  });

  test('a driver that is not found: NOT_FOUND naming every place tried', () => {
    const err = (() => {
      try {
        new AdbcDatabase({ driver: 'nosuchdriver', manifestSearchPaths: [manifests, join(dir, 'absent')] });
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.ok(err instanceof AdbcError, String(err));
    assert.equal(err.code, 'NotFound');
    // Windows: no system directory (the registry instead, which we say is not searched), and DLL names.
    const system = process.platform === 'win32' ? ['the registry', 'the library path, nosuchdriver.dll'] : ['system directory', `the library path, libnosuchdriver.${process.platform === 'darwin' ? 'dylib' : 'so'}`];
    for (const place of [join(manifests, 'nosuchdriver.toml'), join(dir, 'absent'), '$ADBC_DRIVER_PATH', 'user directory', ...system]) {
      assert.ok(err.message.includes(place), `names ${place}:\n${err.message}`);
    }
  });

  test('malformed and unusable manifests, relative paths, a missing entry point: clear errors', () => {
    assert.throws(() => new AdbcDatabase({ driver: 'broken', manifestSearchPaths: [manifests] }),
      (e: unknown) => e instanceof AdbcError && e.status === AdbcStatus.INVALID_ARGUMENT && e.message.includes(`${join(manifests, 'broken.toml')}:2: unterminated string`));
    assert.throws(() => new AdbcDatabase({ driver: join(manifests, 'otherplatform.toml') }),
      (e: unknown) => e instanceof AdbcError && e.message.includes(`names no library for ${platformTuple()} (it has: plan9_mips)`));
    assert.throws(() => new AdbcDatabase({ driver: 'lib/x.so', loadFlags: LoadFlags.SearchEnv }), (e: unknown) => e instanceof AdbcError && /relative paths are not allowed/.test(e.message));
    assert.throws(() => new AdbcDatabase({ driver: 'lib/x.so' }), (e: unknown) => e instanceof AdbcError && e.code === 'NotFound' && e.message.startsWith('driver lib/x.so cannot be loaded: '));
    assert.throws(() => new AdbcDatabase({ driver: SQLITE.library, entrypoint: 'NoSuchInit' }),
      (e: unknown) => e instanceof AdbcError && e.code === 'NotFound' && /NoSuchInit/.test(e.message));
    assert.throws(() => new AdbcDatabase({ databaseOptions: { username: 'x' } } as unknown as ConnectOptions), /a driver is required/);
  });
});

describe('driver discovery (DuckDB: the entry point from the manifest)', { skip: DUCKDB.missing }, () => {
  test('a manifest naming libduckdb.so and duckdb_adbc_init', async () => {
    writeFileSync(join(manifests, 'duckdb.toml'), `[Driver]\nshared = ${toml(DUCKDB.library)}\nentrypoint = "duckdb_adbc_init"\n`);
    const { value, db } = await answer({ driver: 'duckdb', manifestSearchPaths: [manifests] });
    assert.equal(value, 42);
    assert.equal(db.driverInfo.entrypoint, 'duckdb_adbc_init');
    // Without it, neither the derived name nor AdbcDriverInit exists in libduckdb.so: the error says both.
    assert.throws(() => new AdbcDatabase({ driver: DUCKDB.library }), (e: unknown) => e instanceof AdbcError && /AdbcDuckdbInit/.test(e.message) && /AdbcDriverInit/.test(e.message));
  });
});

test('the entry point derived from a library name, as the ADBC driver manager derives it', () => {
  assert.equal(defaultEntrypoint('/usr/lib/libadbc_driver_sqlite.so.2.0.0'), 'AdbcDriverSqliteInit');
  assert.equal(defaultEntrypoint('adbc_driver_postgresql.dll'), 'AdbcDriverPostgresqlInit');
  assert.equal(defaultEntrypoint('proprietary_driver.dll'), 'AdbcProprietaryDriverInit');
  assert.equal(defaultEntrypoint('libduckdb.so'), 'AdbcDuckdbInit');
  assert.equal(defaultEntrypoint('my-driver'), 'AdbcMyDriverInit');
});

describe('the TOML reader of manifests and profiles', () => {
  test('reads what manifests and profiles use', () => {
    const t = parseToml([
      '# a comment',
      'manifest_version = 1',
      "name = 'Literal \\n kept'",
      'version = "1.0.0" # trailing comment',
      '[ADBC]',
      "version = '1.1.0'",
      '[ADBC.features]',
      'supported = ["bulk insert", \'async\',',
      '  "x"]',
      '[Driver.shared]',
      'linux_amd64 = "/p/lib.so"',
      '"quoted key" = "esc \\"q\\" \\u00e9"',
      '[Options]',
      'a.b.c = 3_600',
      'f = 30.5',
      'big = 9223372036854775807',
      'flag = true',
      'inline = { x = 1, y = "z" }',
      'multi = """',
      'one\\',
      '   two"""',
    ].join('\n'));
    assert.equal(t.manifest_version, 1n);
    assert.equal(t.name, 'Literal \\n kept');
    assert.equal(t.version, '1.0.0');
    assert.deepEqual(JSON.parse(JSON.stringify(t.ADBC)), { version: '1.1.0', features: { supported: ['bulk insert', 'async', 'x'] } });
    assert.deepEqual({ ...(t.Driver as { shared: object }).shared }, { linux_amd64: '/p/lib.so', 'quoted key': 'esc "q" é' });
    const o = t.Options as Record<string, unknown>;
    assert.equal((o.a as { b: { c: bigint } }).b.c, 3600n);
    assert.equal(o.f, 30.5);
    assert.equal(o.big, 9223372036854775807n);
    assert.equal(o.flag, true);
    assert.deepEqual({ ...(o.inline as object) }, { x: 1n, y: 'z' });
    assert.equal(o.multi, 'onetwo');
  });

  test('refuses what it does not read, naming the line', () => {
    for (const [text, line, what] of [
      ['a = 1\na = 2', 2, 'defined twice'],
      ['[t]\n[t]', 2, 'defined twice'],
      ['x = 1979-05-27', 1, 'dates and times'],
      ['[[tables]]', 1, 'arrays of tables'],
      ['a = "x" b', 1, 'after the value'],
      ['a = ', 1, 'value is missing'],
      ['a = [1, 2', 1, 'expected'],
      ['a = "\\q"', 1, 'unknown escape'],
      ['n = 99999999999999999999', 1, 'does not fit 64 bits'],
    ] as const) {
      assert.throws(() => parseToml(text, 'f.toml'), (e: unknown) => e instanceof TomlError && e.line === line && e.message.startsWith(`f.toml:${line}: `) && e.message.includes(what), text);
    }
  });

  test('a key named __proto__ is a key, not a prototype', () => {
    const t = parseToml('[__proto__]\ny = 1\n');
    assert.equal(Object.getPrototypeOf(t), null);
    assert.ok(Object.hasOwn(t, '__proto__'));
  });
});
