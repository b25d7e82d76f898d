/**
 * `AdbcDatabase`: a driver found and loaded as the ADBC driver manager does
 * (discovery.ts), and one `AdbcDatabase` of it, initialised with its options.
 */
import { allocHandle, Driver, freeNative, handleReleases, loadLibrary } from './driver.js';
import { defaultEntrypoint, findDriver, resolveOptions } from './discovery.js';
import { AdbcError, AdbcStatus } from './error.js';
import { Closable, Lifetime, Serial } from './lifetime.js';
import * as options from './options.js';
import { openConnection, type AdbcConnection, type ConnectionDefaults } from './connection.js';
import type { ArrowAdbc } from './arrowjs.js';
import type { AdbcTarget, AdbcTypes } from './target.js';
import { AdbcPool, type PoolOptions } from './pool.js';
import { LoadFlags, type ConnectOptions } from './types.js';
import { abortable, checkSignal } from './abort.js';
import type { SignalOption } from './statement.js';
import type { Ptr } from '../memory/memory.js';
import { workersSetting } from '../memory/workers.js';
import { envVar } from '../platform/node.js';

/** Where a database's driver came from (`AdbcDatabase.driverInfo`). */
export interface DriverInfo {
  /** The shared library loaded. */
  library: string;
  /** Its init function. */
  entrypoint: string;
  /** The manifest that named it, if one did. */
  manifest: string | undefined;
  /** The connection profile applied, if one was. */
  profile: string | undefined;
  /** The ADBC version the driver accepted: 1001000 (1.1.0) or 1000000 (1.0.0). */
  adbcVersion: number;
}

/**
 * What `AdbcDatabase` is for every target (src/adbc/target.ts): the arrow-js
 * entry's `AdbcDatabase` (src/adbc/arrowjs.ts) and the flechette entry's
 * (src/flechette/adbc.ts) are this class with their target.
 *
 * A database (`AdbcDatabase`) through an ADBC driver, found as the ADBC
 * driver manager finds drivers: a short name through manifests, a path, a
 * URI naming the driver, or a connection profile (see `ConnectOptions`).
 * The constructor loads the driver and initialises the database
 * synchronously, and throws an `AdbcError` naming every place it looked
 * when the driver cannot be found. The same API as the official
 * `@apache-arrow/adbc-driver-manager`: switch by changing the import.
 * The targets' `AdbcDatabase.open` does the same with `AdbcDatabaseInit`
 * on a worker thread (`openWith`).
 *
 * @example
 * import { AdbcDatabase } from 'arrow-device/adbc';
 * await using db = new AdbcDatabase({ driver: 'sqlite', databaseOptions: { uri: ':memory:' } });
 * await using conn = await db.connect();
 * const table = await conn.query('SELECT 1 AS one');
 */
export class AdbcDatabaseBase<T extends AdbcTypes = ArrowAdbc> extends Closable {
  /** Where the driver came from, and the ADBC version it speaks. */
  readonly driverInfo: DriverInfo;
  readonly #driver: Driver;
  readonly #ptr: Ptr;
  readonly #life: Lifetime;
  readonly #serial = new Serial();
  readonly #defaults: ConnectionDefaults;
  readonly #target: AdbcTarget<T>;

  /**
   * Finds and loads the driver (see `ConnectOptions` for every form `driver` takes), then makes and
   * initialises its database (`AdbcDatabaseNew`, `AdbcDatabaseSetOption`, `AdbcDatabaseInit`), on the
   * JS thread. Throws an `AdbcError` (`NOT_FOUND` with every place tried, for a driver not found).
   */
  constructor(options: ConnectOptions, target: AdbcTarget<T>) {
    const size = options.statementCacheSize;
    if (size !== undefined && !(Number.isInteger(size) && size >= 0)) {
      throw new AdbcError('AdbcDatabase', { status: AdbcStatus.INVALID_ARGUMENT, message: `AdbcDatabase: options.statementCacheSize must be an integer from 0, got ${String(size)}` });
    }
    try {
      // Read before any handle exists: with the setting unreadable every off-thread call rejects, and a
      // database made anyway could not be released off the thread (its `close()`).
      workersSetting(envVar('ARROW_DEVICE_WORKERS'));
    } catch (e) {
      throw new AdbcError('AdbcDatabase', { status: AdbcStatus.INVALID_ARGUMENT, message: `AdbcDatabase: ${(e as Error).message}` }, { cause: e });
    }
    const statementOptions = Object.entries(options.statementOptions ?? {});
    for (const [key, value] of statementOptions) {
      if (typeof value !== 'string') {
        throw new AdbcError('AdbcDatabase', { status: AdbcStatus.INVALID_ARGUMENT, message: `AdbcDatabase: options.statementOptions[${JSON.stringify(key)}] must be a string, got ${typeof value}` });
      }
    }
    const opened = openDatabase(options, deferInit === 0);
    super(opened.life);
    this.driverInfo = opened.info;
    this.#driver = opened.driver;
    this.#ptr = opened.ptr;
    this.#life = opened.life;
    this.#target = target;
    this.#defaults = { queryDefaults: { ...options.queryOptions }, statementCacheSize: size, statementOptions };
  }

  /** The database for a synchronous call: open, and no connection being opened (`AdbcConnectionInit` reads it). */
  #use(op: string): Ptr {
    this.#life.check(op);
    this.#serial.checkIdle(op, 'database');
    return this.#ptr;
  }

  /**
   * Sets a string option after initialisation (`AdbcDatabaseSetOption`), where the driver allows it
   * (adbc.h: "some drivers may support setting options after initialization"); options for the start go
   * in the constructor's `databaseOptions`.
   *
   * @example
   * db.setOption('adbc.my_driver.log_level', 'debug');
   */
  setOption(key: string, value: string): void {
    this.#driver.call('DatabaseSetOption', this.#use('setOption'), key, value);
  }

  /**
   * Sets a bytes option after initialisation (`AdbcDatabaseSetOptionBytes`, ADBC 1.1.0).
   *
   * @example
   * db.setOptionBytes('adbc.my_driver.certificate', new TextEncoder().encode('-----BEGIN CERTIFICATE-----...'));
   */
  setOptionBytes(key: string, value: Uint8Array): void {
    options.setOptionBytes(this.#driver, 'Database', this.#use('setOptionBytes'), key, value);
  }

  /**
   * Sets an integer option after initialisation (`AdbcDatabaseSetOptionInt`, ADBC 1.1.0).
   *
   * @example
   * db.setOptionInt('adbc.my_driver.pool_size', 8);
   */
  setOptionInt(key: string, value: bigint | number): void {
    options.setOptionInt(this.#driver, 'Database', this.#use('setOptionInt'), key, value);
  }

  /**
   * Sets a floating-point option after initialisation (`AdbcDatabaseSetOptionDouble`, ADBC 1.1.0).
   *
   * @example
   * db.setOptionDouble('adbc.my_driver.timeout_seconds', 2.5);
   */
  setOptionDouble(key: string, value: number): void {
    options.setOptionDouble(this.#driver, 'Database', this.#use('setOptionDouble'), key, value);
  }

  /**
   * Reads a string option (`AdbcDatabaseGetOption`, ADBC 1.1.0): NOT_FOUND for a key the driver does
   * not know, NOT_IMPLEMENTED where the driver has no getters.
   *
   * @example
   * const uri = db.getOption('uri');
   */
  getOption(key: string): string {
    return options.getOption(this.#driver, 'Database', this.#use('getOption'), key);
  }

  /**
   * Reads a bytes option (`AdbcDatabaseGetOptionBytes`, ADBC 1.1.0).
   *
   * @example
   * const pem = db.getOptionBytes('adbc.my_driver.certificate');
   */
  getOptionBytes(key: string): Uint8Array {
    return options.getOptionBytes(this.#driver, 'Database', this.#use('getOptionBytes'), key);
  }

  /**
   * Reads an integer option (`AdbcDatabaseGetOptionInt`, ADBC 1.1.0), as a bigint (int64).
   *
   * @example
   * const size = db.getOptionInt('adbc.my_driver.pool_size');
   */
  getOptionInt(key: string): bigint {
    return options.getOptionInt(this.#driver, 'Database', this.#use('getOptionInt'), key);
  }

  /**
   * Reads a floating-point option (`AdbcDatabaseGetOptionDouble`, ADBC 1.1.0).
   *
   * @example
   * const seconds = db.getOptionDouble('adbc.my_driver.timeout_seconds');
   */
  getOptionDouble(key: string): number {
    return options.getOptionDouble(this.#driver, 'Database', this.#use('getOptionDouble'), key);
  }

  /**
   * Opens a connection (`AdbcConnectionNew`, `AdbcConnectionInit` on a worker thread).
   *
   * @example
   * await using conn = await db.connect();
   */
  async connect(): Promise<AdbcConnection<T>> {
    return this.#connect(undefined);
  }

  #connect(onClose: ((c: AdbcConnection<T>) => void) | undefined): Promise<AdbcConnection<T>> {
    this.#life.check('connect');
    return this.#serial.run(() =>
      openConnection(this.#driver, this.#ptr, this.#life, () => this.connect(), this.#target, this.#defaults, onClose),
    );
  }

  /**
   * A pool of this database's connections (`AdbcPool`), opened on demand up to `max` and reused:
   * what a service runs its many small queries through. The database stays open (its release waits)
   * while connections of the pool are; close the pool first.
   *
   * @example
   * await using pool = db.pool({ max: 16, idleTimeoutMillis: 30_000, acquireTimeoutMillis: 5_000 });
   * const t = await pool.query('SELECT 1 AS one', undefined, { signal: AbortSignal.timeout(2_000) });
   */
  pool(options: PoolOptions = {}): AdbcPool<T> {
    this.#life.check('pool');
    return new AdbcPool<T>((onClose) => this.#connect(onClose), options);
  }

  /**
   * Releases the database (after its connections), `AdbcDatabaseRelease` on a worker thread: DuckDB's
   * driver writes a file database's changes into its file there. Resolves when the release has returned;
   * while connections are open it resolves at once and the last connection's release starts it.
   * `closeSync()` and `using` release on the JS thread. Idempotent.
   *
   * @example
   * await db.close();
   */
  override async close(): Promise<void> {
    await this.closeOffThread();
  }

  /** `close()`: what the end of an `await using` scope calls. */
  override async [Symbol.asyncDispose](): Promise<void> {
    await this.closeOffThread();
  }

  /**
   * @internal What each target's `AdbcDatabase.open` runs: `make` constructs the database without
   * `AdbcDatabaseInit` (loading the driver, `AdbcDatabaseNew` and the options stay on the JS thread: they
   * return at once), then the init runs on a worker thread. It may do I/O: PostgreSQL's driver connects
   * and reads the server's type catalog there, DuckDB's and SQLite's open their file. A failed init
   * releases the database and rejects with the driver's `AdbcError`, as the constructor throws it. ADBC has
   * no cancel for a database, so an abort rejects at once with the signal's reason and the database is
   * released when the init returns; a signal aborted already loads nothing.
   */
  protected static async openWith<U extends AdbcTypes, D extends AdbcDatabaseBase<U>>(make: () => D, opts: SignalOption | undefined): Promise<D> {
    const signal = opts?.signal;
    checkSignal('AdbcDatabase.open', signal);
    deferInit++;
    let db: D;
    try {
      db = make();
    } finally {
      deferInit--;
    }
    // The release waits while the init runs (a close meanwhile is taken when it returns).
    const leave = db.#life.enter();
    const init = db.#serial
      .run(() => db.#driver.callAsync('DatabaseInit', db.#ptr))
      .finally(leave)
      .then(
        () => db,
        (e: unknown) => {
          db.closeSync();
          throw e;
        },
      );
    return abortable('AdbcDatabase.open', signal, () => init, () => undefined, (late) => late.closeSync());
  }
}

/**
 * Non-zero while `openWith` constructs: the constructor then leaves `AdbcDatabaseInit` to it. A counter
 * read in the constructor, not a constructor argument: the targets' constructors take the user's options
 * only, and construction is synchronous, so nothing else runs between the set and the read.
 */
let deferInit = 0;

/**
 * Finds and loads the driver, and makes its database and initialises it (`init`; else `openWith` runs the
 * init on a worker thread): what the constructor does before the object exists.
 */
function openDatabase(options: ConnectOptions, init: boolean): { info: DriverInfo; driver: Driver; ptr: Ptr; life: Lifetime } {
  {
    const { driver: name, options: dbOptions, profile } = resolveOptions(options);
    const flags = options.loadFlags ?? LoadFlags.Default;
    let lib: ReturnType<typeof loadLibrary> | undefined;
    const where = findDriver(name, flags, options.manifestSearchPaths ?? [], (library) => {
      try {
        lib = loadLibrary(library);
        return undefined;
      } catch (e) {
        return (e as Error).message;
      }
    });
    const candidates = options.entrypoint ? [options.entrypoint] : where.entrypoint ? [where.entrypoint] : [defaultEntrypoint(where.library), 'AdbcDriverInit'];
    let driver: Driver | undefined;
    let info: DriverInfo | undefined;
    const missing: string[] = [];
    for (const entrypoint of candidates) {
      let found = true;
      try {
        lib!.func(entrypoint, 'uint8_t', ['int', 'uintptr_t', 'uintptr_t']);
      } catch (e) {
        found = false;
        missing.push(`${entrypoint}: ${(e as Error).message}`);
      }
      if (!found) continue;
      driver = Driver.init(lib!, entrypoint, `${where.library}, ${entrypoint}`);
      info = { library: where.library, entrypoint, manifest: where.manifest, profile, adbcVersion: driver.version };
      break;
    }
    if (!driver || !info) {
      throw new AdbcError('AdbcDatabase', {
        status: AdbcStatus.NOT_FOUND,
        message: `driver ${where.library} has no init function: ${missing.join('; ')} (give the entrypoint option)`,
      });
    }
    const d = driver;
    const driverLife = new Lifetime('driver', null, () => d.release());
    const p = allocHandle();
    try {
      d.call('DatabaseNew', p);
    } catch (e) {
      freeNative(p);
      driverLife.close();
      throw e;
    }
    try {
      for (const [k, v] of dbOptions.strings) d.call('DatabaseSetOption', p, k, v);
      for (const [k, v] of dbOptions.ints) {
        if (d.has('DatabaseSetOptionInt')) d.call('DatabaseSetOptionInt', p, k, v);
        else d.call('DatabaseSetOption', p, k, String(v));
      }
      for (const [k, v] of dbOptions.doubles) {
        if (d.has('DatabaseSetOptionDouble')) d.call('DatabaseSetOptionDouble', p, k, v);
        else d.call('DatabaseSetOption', p, k, String(v));
      }
      if (init) d.call('DatabaseInit', p);
    } catch (e) {
      try {
        d.call('DatabaseRelease', p);
      } catch {
        // The first error is the one to report.
      } finally {
        freeNative(p);
        driverLife.close();
      }
      throw e;
    }
    // `close()`'s release runs on a worker thread: DuckDB's driver checkpoints a file database into it (tens
    // of milliseconds of writes).
    const life = new Lifetime('database', driverLife, ...handleReleases(d, 'DatabaseRelease', p));
    // The driver goes when its database does.
    driverLife.close();
    return { info, driver: d, ptr: p, life };
  }
}
