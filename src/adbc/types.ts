/**
 * The constants and option types of `arrow-device/adbc`, under the names
 * and values of the official JavaScript driver manager
 * (`@apache-arrow/adbc-driver-manager`, whose values are adbc.h's), so that
 * code written against it compiles against this module unchanged.
 */
import type { QueryOptions } from './statement.js';

/**
 * How a driver name is resolved (`ADBC_LOAD_FLAG_*` of adbc_driver_manager.h);
 * combine with `|`. `LoadFlags.Default` (every flag) applies when
 * `loadFlags` is not given.
 *
 * @example
 * // Only the directories given in manifestSearchPaths and $ADBC_DRIVER_PATH:
 * const db = new AdbcDatabase({ driver: 'sqlite', manifestSearchPaths: ['/opt/drivers'], loadFlags: LoadFlags.SearchEnv });
 */
export const LoadFlags = {
  /** Search the directories of `ADBC_DRIVER_PATH` (colon-separated). */
  SearchEnv: 1 << 1,
  /** Search the user's configuration directory (`$XDG_CONFIG_HOME/adbc/drivers`, else `~/.config/adbc/drivers`). */
  SearchUser: 1 << 2,
  /** Search the system configuration directory (`/etc/adbc/drivers`). */
  SearchSystem: 1 << 3,
  /** Allow a relative path as the driver name (resolved against the working directory). */
  AllowRelativePaths: 1 << 4,
  /** Every flag: the default. */
  Default: (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4),
} as const;
/** A `LoadFlags` value. */
export type LoadFlags = (typeof LoadFlags)[keyof typeof LoadFlags];

/**
 * How deep `getObjects` goes (`ADBC_OBJECT_DEPTH_*`).
 *
 * @example
 * const catalogs = await conn.getObjects({ depth: ObjectDepth.Catalogs });
 */
export const ObjectDepth = {
  /** Catalogs, schemas, tables and columns (the default). */
  All: 0,
  /** Catalogs only. */
  Catalogs: 1,
  /** Catalogs and schemas. */
  Schemas: 2,
  /** Catalogs, schemas and tables. */
  Tables: 3,
} as const;
/** An `ObjectDepth` value. */
export type ObjectDepth = (typeof ObjectDepth)[keyof typeof ObjectDepth];

/**
 * What `getInfo` can ask for (`ADBC_INFO_*`).
 *
 * @example
 * const info = await conn.getInfo([InfoCode.VendorName, InfoCode.DriverVersion]);
 */
export const InfoCode = {
  /** `ADBC_INFO_VENDOR_NAME`: the database's name (a string). */
  VendorName: 0,
  /** `ADBC_INFO_VENDOR_VERSION`: the database's version (a string). */
  VendorVersion: 1,
  /** `ADBC_INFO_VENDOR_ARROW_VERSION`: the Arrow library version the database uses (a string). */
  VendorArrowVersion: 2,
  /** `ADBC_INFO_VENDOR_SQL`: whether the database accepts SQL queries (a boolean). */
  VendorSql: 3,
  /** `ADBC_INFO_VENDOR_SUBSTRAIT`: whether the database accepts Substrait plans (a boolean). */
  VendorSubstrait: 4,
  /** `ADBC_INFO_VENDOR_SUBSTRAIT_MIN_VERSION`: the oldest Substrait version it accepts (a string). */
  VendorSubstraitMinVersion: 5,
  /** `ADBC_INFO_VENDOR_SUBSTRAIT_MAX_VERSION`: the newest Substrait version it accepts (a string). */
  VendorSubstraitMaxVersion: 6,
  /** `ADBC_INFO_DRIVER_NAME`: the driver's name (a string). */
  DriverName: 100,
  /** `ADBC_INFO_DRIVER_VERSION`: the driver's version (a string). */
  DriverVersion: 101,
  /** `ADBC_INFO_DRIVER_ARROW_VERSION`: the Arrow library version the driver was built with (a string). */
  DriverArrowVersion: 102,
  /** The ADBC version the driver implements (ADBC 1.1.0). */
  DriverAdbcVersion: 103,
} as const;
/** An `InfoCode` value. */
export type InfoCode = (typeof InfoCode)[keyof typeof InfoCode];

/**
 * The statistics ADBC defines (`ADBC_STATISTIC_*_KEY`), as `getStatistics` gives them in
 * `statistic_key`; keys from 1024 up are the driver's own (`getStatisticNames` names them).
 *
 * @example
 * const stats = await conn.getStatistics({ tableName: 'people' });
 * // in each catalog's db_schema_statistics: statistic_key === StatisticKey.RowCount
 */
export const StatisticKey = {
  /** `adbc.statistic.byte_width`: the average size of a value of the column, in bytes (float64). */
  AverageByteWidth: 0,
  /** `adbc.statistic.distinct_count`: how many distinct values the column holds. */
  DistinctCount: 1,
  /** `adbc.statistic.max_byte_width`: the largest value of the column, in bytes. */
  MaxByteWidth: 2,
  /** `adbc.statistic.max_value`: the column's largest value. */
  MaxValue: 3,
  /** `adbc.statistic.min_value`: the column's smallest value. */
  MinValue: 4,
  /** `adbc.statistic.null_count`: how many values of the column are null. */
  NullCount: 5,
  /** `adbc.statistic.row_count`: the rows of the table (or column). */
  RowCount: 6,
} as const;
/** A `StatisticKey` value. */
export type StatisticKey = (typeof StatisticKey)[keyof typeof StatisticKey];

/**
 * What bulk ingestion does with an existing table (`adbc.ingest.mode.*`).
 *
 * @example
 * await conn.ingest('events', table, { mode: IngestMode.Append });
 */
export const IngestMode = {
  /** Append to an existing table; fails if it does not exist. */
  Append: 'adbc.ingest.mode.append',
  /** Create the table; fails if it exists (the default). */
  Create: 'adbc.ingest.mode.create',
  /** Create the table if it does not exist, then append. */
  CreateAppend: 'adbc.ingest.mode.create_append',
  /** Drop the table if it exists, create it, insert. */
  Replace: 'adbc.ingest.mode.replace',
} as const;
/** An `IngestMode` value. */
export type IngestMode = (typeof IngestMode)[keyof typeof IngestMode];

/** The options of `new AdbcDatabase(...)` besides the driver and its database options. */
export interface ConnectOptionsBase {
  /**
   * The driver's init function (`AdbcDriverInitFunc`). Default: the
   * manifest's `Driver.entrypoint`, else the name derived from the library's
   * file name as the ADBC driver manager does (`libadbc_driver_sqlite.so` ->
   * `AdbcDriverSqliteInit`), else `AdbcDriverInit`.
   */
  entrypoint?: string;
  /** Directories searched for driver manifests (`<name>.toml`) and libraries, after `ADBC_DRIVER_PATH` and before the user and system directories. */
  manifestSearchPaths?: string[];
  /** Directories searched for connection profiles (`<name>.toml`), before `ADBC_PROFILE_PATH` and the user directory. */
  profileSearchPaths?: string[];
  /** Where to search (`LoadFlags`); default `LoadFlags.Default`. */
  loadFlags?: number;
  /**
   * Defaults of every reader this database's connections make (`query`, `queryStream`,
   * `executeQuery`, `readPartition`); a call's own `QueryOptions` override them. `{ keep: true }` is
   * the official package's behaviour: every batch a reader hands out stays valid after the next step
   * (collected batches stay readable), at the cost of keeping each batch's memory until it is released
   * or collected, not one batch at a time.
   *
   * @example
   * new AdbcDatabase({ driver: 'sqlite', queryOptions: { keep: true } });
   */
  queryOptions?: QueryDefaults;
  /**
   * How many statements each connection keeps by SQL text for `query`, `queryStream` and `execute`
   * (default 32; 0 turns the cache off). A call with a text seen before reuses its statement: no
   * `AdbcStatementNew`, `SetSqlQuery` or `Prepare` (a parse and plan, for PostgreSQL a round trip); only
   * the bind and the execution. A statement is dropped when a call on it fails, and a statement whose
   * text may change the schema or the session (DDL, `SET`, `DISCARD`, ...) empties the connection's cache
   * first. A schema changed by another connection makes a cached statement fail once (then it is
   * dropped): turn the cache off where that matters.
   */
  statementCacheSize?: number;
  /**
   * Options set on every statement this database's connections make (`AdbcStatementSetOption`, once, as
   * the statement is made: `createStatement`, `query`, `queryStream`, `execute`, `ingest`, ...); a cached
   * statement keeps them. A driver that refuses one fails the call that made the statement, with its
   * `AdbcError`. For example PostgreSQL's `adbc.postgresql.use_copy: 'false'` reads results without `COPY`:
   * faster for one-row lookups, slower for large results (docs/adbc.md, the services section, has the figures).
   *
   * @example
   * new AdbcDatabase({ driver: 'postgresql', databaseOptions: { uri: 'postgresql://localhost/app' }, statementOptions: { 'adbc.postgresql.use_copy': 'false' } });
   */
  statementOptions?: Record<string, string>;
}

/** `ConnectOptionsBase.queryOptions`: what `QueryOptions` a database's readers start from (a signal is per call). */
export type QueryDefaults = Omit<QueryOptions, 'signal'>;

/**
 * The options of `new AdbcDatabase(...)`: a driver, or a URI or profile in
 * `databaseOptions` that names one.
 *
 * `driver` takes every form the ADBC driver manager takes:
 * - a short name (`'sqlite'`, `'postgresql'`): `<name>.toml` manifests in
 *   the search directories, then the library path (`lib<name>.so`);
 * - an absolute path to a shared library, or to a manifest (with or
 *   without `.toml`); a relative one with `LoadFlags.AllowRelativePaths`;
 * - a URI whose scheme names the driver: `'sqlite:file::memory:'`
 *   (driver `sqlite`, uri `file::memory:`), `'postgresql://user@host/db'`
 *   (driver `postgresql`, the whole string as uri);
 * - a connection profile: `'profile://name'` (a `name.toml` in the
 *   profile search directories, or an absolute path to one).
 *
 * @example
 * new AdbcDatabase({ driver: 'sqlite', databaseOptions: { uri: ':memory:' } });
 * new AdbcDatabase({ driver: '/opt/adbc/libadbc_driver_postgresql.so', databaseOptions: { uri: 'postgresql://localhost/db' } });
 * new AdbcDatabase({ databaseOptions: { uri: 'postgresql://localhost/db' } }); // driver from the scheme
 * new AdbcDatabase({ driver: 'profile://warehouse', profileSearchPaths: ['./profiles'] });
 */
export type ConnectOptions =
  | (ConnectOptionsBase & {
      /** The driver: a short name, a path, a URI naming it, or `profile://name`. */
      driver: string;
      /** Database options (`AdbcDatabaseSetOption`): `uri`, `username`, driver-specific keys. */
      databaseOptions?: Record<string, string>;
    })
  | (ConnectOptionsBase & {
      /** Absent: `databaseOptions` names the driver. */
      driver?: undefined;
      /** Without `driver`: a `uri` whose scheme names the driver, or a `profile` that does. */
      databaseOptions: (
        | {
            /** A URI whose scheme names the driver (`'postgresql://localhost/db'`, `'sqlite:file::memory:'`). */
            uri: string;
          }
        | {
            /** A connection profile that names the driver: a name (`<name>.toml` in the profile search directories) or an absolute path to one. */
            profile: string;
          }
      ) &
        Record<string, string>;
    });

/**
 * Options of `ingest` and `ingestStream`.
 *
 * @example
 * await conn.ingest('t', table, { mode: IngestMode.Replace, temporary: true });
 */
export interface IngestOptions {
  /** What to do with an existing table; default `IngestMode.Create`. */
  mode?: IngestMode;
  /** The target table's catalog (`adbc.ingest.target_catalog`). */
  catalog?: string;
  /** The target table's schema (`adbc.ingest.target_db_schema`). */
  dbSchema?: string;
  /** Ingest into a temporary table (`adbc.ingest.temporary`). */
  temporary?: boolean;
  /** Stops the ingestion (`SignalOption`): the driver is asked to cancel and the call rejects at once. */
  signal?: AbortSignal;
}

/**
 * Filters of `getObjects` (`AdbcConnectionGetObjects`); name filters are SQL `LIKE` patterns.
 *
 * @example
 * const tables = await conn.getObjects({ depth: ObjectDepth.Tables, tableName: 'order%' });
 */
export interface GetObjectsOptions {
  /** How deep to go; default `ObjectDepth.All`. */
  depth?: ObjectDepth;
  /** Only catalogs whose name matches this pattern. */
  catalog?: string;
  /** Only database schemas whose name matches this pattern. */
  dbSchema?: string;
  /** Only tables whose name matches this pattern. */
  tableName?: string;
  /** Only tables of these types (`'table'`, `'view'`, as `getTableTypes` lists them). */
  tableType?: string[];
  /** Only columns whose name matches this pattern. */
  columnName?: string;
}
