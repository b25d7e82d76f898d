/**
 * `AdbcError`: what a failed ADBC call says, copied out of the driver's
 * `struct AdbcError` at once (adbc.h, "Error Handling").
 */

/**
 * `AdbcStatusCode` values (adbc.h).
 *
 * @example
 * try {
 *   await conn.execute('DELETE FROM t');
 * } catch (e) {
 *   if (!(e instanceof AdbcError && e.status === AdbcStatus.NOT_FOUND)) throw e;
 *   await conn.execute('CREATE TABLE t (x INTEGER)');
 * }
 */
export const AdbcStatus = {
  /** `ADBC_STATUS_OK`: no error. */
  OK: 0,
  /** `ADBC_STATUS_UNKNOWN`: an error of no other kind. */
  UNKNOWN: 1,
  /** `ADBC_STATUS_NOT_IMPLEMENTED`: the driver does not support the operation. */
  NOT_IMPLEMENTED: 2,
  /** `ADBC_STATUS_NOT_FOUND`: a named object (a table, an option) does not exist. */
  NOT_FOUND: 3,
  /** `ADBC_STATUS_ALREADY_EXISTS`: the object to create exists already. */
  ALREADY_EXISTS: 4,
  /** `ADBC_STATUS_INVALID_ARGUMENT`: invalid arguments, likely a programming error (a wrong format, a value out of range). */
  INVALID_ARGUMENT: 5,
  /** `ADBC_STATUS_INVALID_STATE`: the operation's preconditions are not met (an object not yet fully configured). */
  INVALID_STATE: 6,
  /** `ADBC_STATUS_INVALID_DATA`: invalid data was processed, not a programming error (a division by zero in a query). */
  INVALID_DATA: 7,
  /** `ADBC_STATUS_INTEGRITY`: the database's integrity was at stake (a failed foreign key or uniqueness check). */
  INTEGRITY: 8,
  /** `ADBC_STATUS_INTERNAL`: an error internal to the driver or the database. */
  INTERNAL: 9,
  /** `ADBC_STATUS_IO`: an I/O or network failure. */
  IO: 10,
  /** `ADBC_STATUS_CANCELLED`: the operation was cancelled, not by a timeout. */
  CANCELLED: 11,
  /** `ADBC_STATUS_TIMEOUT`: the operation timed out. */
  TIMEOUT: 12,
  /** `ADBC_STATUS_UNAUTHENTICATED`: authentication failed. */
  UNAUTHENTICATED: 13,
  /** `ADBC_STATUS_UNAUTHORIZED`: the client may not perform the operation. */
  UNAUTHORIZED: 14,
} as const;

/**
 * The status names of the official JavaScript driver manager's `AdbcError.code`
 * (those of the Rust `adbc_core::error::Status`), by status number.
 */
const CODE_NAMES = [
  'Ok', 'Unknown', 'NotImplemented', 'NotFound', 'AlreadyExists', 'InvalidArguments', 'InvalidState',
  'InvalidData', 'Integrity', 'Internal', 'IO', 'Cancelled', 'Timeout', 'Unauthenticated', 'Unauthorized',
] as const;

/**
 * The `code` of an `AdbcError`: a status name (`'NotFound'`, `'InvalidArguments'`, ...).
 *
 * @useDeclaredType
 */
export type AdbcErrorCode = (typeof CODE_NAMES)[number];

/** What an `AdbcError` is made of. */
export interface AdbcErrorInit {
  /** The `AdbcStatusCode`. */
  status: number;
  /** The driver's message (or ours, for errors of this module), or null. */
  message: string | null;
  /** The vendor code, or undefined when the driver gave none. */
  vendorCode?: number | undefined;
  /** The SQLSTATE (5 characters), or undefined. */
  sqlState?: string | undefined;
  /** ADBC 1.1.0 error details (`AdbcErrorGetDetail`): key -> bytes. */
  details?: Map<string, Uint8Array>;
}

/**
 * A failed ADBC call. Compatible with the official driver manager's
 * `AdbcError` (`code`, `vendorCode`, `sqlState`, `message` the driver's
 * text), and more: the numeric `status`, the ADBC 1.1.0 `details`, and the
 * `operation` that failed (`AdbcStatementExecuteQuery`, ...). A stream that
 * fails in mid-read gives an `AdbcError` made by the driver's
 * `AdbcErrorFromArrayStream` where it has one, with the stream error as
 * `cause`.
 *
 * @example
 * try {
 *   await conn.query('SELECT * FROM missing');
 * } catch (e) {
 *   if (e instanceof AdbcError) console.log(e.code, e.sqlState, e.message);
 * }
 */
export class AdbcError extends Error {
  /** `'AdbcError'`, as the official package's. */
  override name = 'AdbcError';
  /** The status as a name: `'NotFound'`, `'InvalidArguments'`, ... (the official package's `code`). */
  readonly code: AdbcErrorCode | `Status${number}`;
  /** The `AdbcStatusCode` (`AdbcStatus.NOT_FOUND`, ...). */
  readonly status: number;
  /** The driver's vendor code, if it gave one. */
  readonly vendorCode?: number;
  /** The SQLSTATE, if the driver gave one. */
  readonly sqlState?: string;
  /** ADBC 1.1.0 error details: key -> bytes (most drivers put UTF-8 there; see `detail()`). */
  readonly details: Map<string, Uint8Array>;
  /** The ADBC function (or step of this module) that failed. */
  readonly operation: string;

  /** The error of `operation`; `message` is the driver's, else (none, or empty) `<operation>: <code>`. */
  constructor(operation: string, init: AdbcErrorInit, options?: { cause?: unknown }) {
    const code = CODE_NAMES[init.status] ?? (`Status${init.status}` as const);
    super(init.message || `${operation}: ${code}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.operation = operation;
    this.status = init.status;
    this.code = code;
    if (init.vendorCode !== undefined) this.vendorCode = init.vendorCode;
    if (init.sqlState !== undefined) this.sqlState = init.sqlState;
    this.details = init.details ?? new Map();
  }

  /**
   * A detail as text, or undefined.
   *
   * @example
   * err.detail('duckdb:error_type'); // 'InvalidInput'
   */
  detail(key: string): string | undefined {
    const v = this.details.get(key);
    return v === undefined ? undefined : new TextDecoder().decode(v);
  }

  /**
   * The official package's helper: an `AdbcError` is returned as it is, anything else unchanged.
   *
   * @example
   * try {
   *   await conn.query('SELECT * FROM missing');
   * } catch (e) {
   *   throw AdbcError.fromError(e);
   * }
   */
  static fromError(err: unknown): unknown {
    return err;
  }
}

/** An error of this module (not the driver's): `status` and our message. */
export function adbcError(operation: string, status: number, message: string, cause?: unknown): AdbcError {
  return new AdbcError(operation, { status, message }, cause === undefined ? undefined : { cause });
}
