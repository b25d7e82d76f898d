/**
 * `AbortSignal` for the calls that may wait: one rule for all of them.
 *
 * - A signal aborted already starts nothing: the call rejects with its reason.
 * - An abort while the call runs asks the driver to stop (`AdbcStatementCancel`
 *   or `AdbcConnectionCancel`, thread-safe in adbc.h) and rejects at once with
 *   the signal's reason (an `AbortError` `DOMException` unless the caller gave
 *   one): a caller never waits for a driver that cannot cancel, or is slow to.
 * - What the abandoned call still produces (a reader, a table) is released
 *   when it arrives; the ADBC objects under it are released in order after it
 *   (src/adbc/lifetime.ts), so nothing stays live.
 */
import { AdbcError, AdbcStatus } from './error.js';

/**
 * The start of a call that takes a signal: INVALID_ARGUMENT unless `signal` is absent or an
 * `AbortSignal`-like object, and the signal's reason when it is aborted already (nothing starts).
 */
export function checkSignal(op: string, signal: AbortSignal | undefined): void {
  if (signal === undefined) return;
  if (typeof signal !== 'object' || signal === null || typeof signal.aborted !== 'boolean' || typeof signal.addEventListener !== 'function') {
    throw new AdbcError(op, { status: AdbcStatus.INVALID_ARGUMENT, message: `${op}: options.signal must be an AbortSignal` });
  }
  if (signal.aborted) throw reasonOf(signal);
}

/** The signal's reason, as a value to throw (the runtime's `AbortError` when the caller gave none). */
export function reasonOf(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('This operation was aborted', 'AbortError');
}

/** Throws the signal's reason when it has been aborted (between the steps of a call: the signal was checked at its start). */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw reasonOf(signal);
}

/**
 * `run()` raced against `signal`. On an abort while it runs, `stop()` is called (the driver's cancel;
 * its error is not the caller's: the call is rejected with the signal's reason), and the promise rejects
 * at once; a value `run` resolves to afterwards is handed to `discard` (which releases it).
 */
export function abortable<T>(op: string, signal: AbortSignal | undefined, run: () => Promise<T>, stop: () => void, discard: (late: T) => void): Promise<T> {
  if (signal === undefined) return run();
  try {
    checkSignal(op, signal);
  } catch (e) {
    return Promise.reject(e);
  }
  return new Promise<T>((resolve, reject) => {
    let aborted = false;
    const onAbort = (): void => {
      aborted = true;
      try {
        stop();
      } catch {
        // Cancellation is a request: the call is abandoned whether or not the driver took it.
      }
      reject(reasonOf(signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    run().then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        if (aborted) discard(v);
        else resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (!aborted) reject(e);
      },
    );
  });
}
