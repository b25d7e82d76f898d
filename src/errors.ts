/**
 * One error hierarchy for the whole library. Every error carries an
 * errno-style code (the value a C callback would return for it: one place
 * maps errors to errno, docs/architecture.md#errors) and the path of the place it names,
 * such as `schema.children[2].format`. When an error passes up a level, the
 * parent puts its own segment in front with `prefixPath`.
 */
import { Errno, type ErrnoName } from './abi/constants.js';

/** What went wrong, in one word; each kind has its errno (`ArrowDeviceError.errno`). */
export type ErrorKind =
  /** Malformed or inconsistent foreign input (EINVAL). */
  | 'invalid'
  /** A read or write at an address the memory backend refuses: NULL, out of range (EINVAL). */
  | 'memory'
  /** A struct whose `release` is NULL was used (EINVAL). */
  | 'released'
  /** Valid input this library or arrow-js cannot handle, or a missing runtime such as CUDA (ENOSYS). */
  | 'unsupported'
  /** Allocation failed (ENOMEM). */
  | 'nomem'
  /** A foreign callback returned an error code (the code it returned). */
  | 'producer'
  /** Anything else (EIO). */
  | 'io';

const kindErrno: Record<ErrorKind, number> = {
  invalid: Errno.EINVAL,
  memory: Errno.EINVAL,
  released: Errno.EINVAL,
  unsupported: Errno.ENOSYS,
  nomem: Errno.ENOMEM,
  producer: Errno.EIO,
  io: Errno.EIO,
};

/** The optional parts of an `ArrowDeviceError`. */
export interface ArrowDeviceErrorOptions {
  /** The errno value; defaults to the kind's. */
  errno?: number;
  /** The error that led to this one (`Error.prototype.cause`). */
  cause?: unknown;
}

/**
 * The base class of every error this library throws on purpose: a `kind`, an errno-style code (what a
 * C callback returns for it) and the `path` of the place it names, so that a malformed struct from a
 * producer is a typed error that says where, never a crash.
 *
 * @example
 * try {
 *   importRecordBatch(arrayPtr, schema);
 * } catch (e) {
 *   if (!(e instanceof ArrowDeviceError)) throw e;
 *   console.log(e.kind, e.code, e.path, e.detail); // 'invalid' 'EINVAL' 'array.children[1].buffers[2]' ...
 * }
 */
export class ArrowDeviceError extends Error {
  /** `'ArrowDeviceError'` (a subclass sets its own). */
  override name = 'ArrowDeviceError';
  /** What went wrong, in one word: `'invalid'`, `'released'`, `'unsupported'`, ... */
  readonly kind: ErrorKind;
  /** errno-compatible code, what a C callback returns for this error. */
  readonly errno: number;
  /** Where: `schema.children[2].format`; empty when the error names no place. */
  path: string;
  /** What, without the path. */
  readonly detail: string;

  /** An error of `kind` at `path` (empty: no place); `message` is `path: detail`. */
  constructor(kind: ErrorKind, path: string, detail: string, options: ArrowDeviceErrorOptions = {}) {
    super(path ? `${path}: ${detail}` : detail, options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.errno = options.errno ?? kindErrno[kind];
    this.path = path;
    this.detail = detail;
  }

  /** The errno name of `errno`: "EINVAL". */
  get code(): ErrnoName | string {
    for (const [k, v] of Object.entries(Errno)) if (v === this.errno) return k;
    return `E${this.errno}`;
  }
}

/** Puts `prefix` in front of the error's path (`children[2]` + `.format`). Returns the same error. */
export function prefixPath<E>(err: E, prefix: string): E {
  if (err instanceof ArrowDeviceError) {
    const path = err.path === '' ? prefix : err.path.startsWith('[') ? prefix + err.path : `${prefix}.${err.path}`;
    err.path = path;
    err.message = `${path}: ${err.detail}`;
  }
  return err;
}

export function invalid(path: string, detail: string): ArrowDeviceError {
  return new ArrowDeviceError('invalid', path, detail);
}

export function unsupported(path: string, detail: string): ArrowDeviceError {
  return new ArrowDeviceError('unsupported', path, detail);
}

/** Maps any thrown value to an errno and a message, for returning from a C callback. */
export function toErrno(err: unknown): { errno: number; message: string } {
  if (err instanceof ArrowDeviceError) return { errno: err.errno === 0 ? Errno.EIO : err.errno, message: err.message };
  if (err instanceof RangeError && /allocat|memory/i.test(err.message)) return { errno: Errno.ENOMEM, message: err.message };
  if (err instanceof Error) return { errno: Errno.EIO, message: err.message };
  return { errno: Errno.EIO, message: String(err) };
}

/**
 * `new Uint8Array(size)` for a copy of foreign bytes; where JS cannot
 * allocate it (V8 throws a plain RangeError: "Array buffer allocation
 * failed", "Invalid typed array length"), a typed `nomem` error at `path`
 * naming the size. Callers with an empty path leave the place to theirs.
 */
export function allocBytes(size: number, path = ''): Uint8Array {
  try {
    return new Uint8Array(size);
  } catch (e) {
    if (!(e instanceof RangeError)) throw e;
    throw new ArrowDeviceError('nomem', path, `cannot allocate ${size} bytes in JS for a copy: ${e.message}`, { cause: e });
  }
}
