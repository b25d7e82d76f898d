/**
 * Options of the three ADBC handles, read and written through one mechanism:
 * `Adbc{Database,Connection,Statement}{Get,Set}Option{,Bytes,Int,Double}`
 * (adbc.h, ADBC 1.1.0 for all but the string setter). The classes' methods
 * are thin front ends over these functions.
 *
 * The string and bytes getters follow adbc.h's length protocol: the caller
 * passes a buffer and its size in `*length`; the driver writes the value only
 * if it fits, and always sets `*length` to the value's size (a string's
 * includes its NUL). A larger size means "call again with a buffer this big".
 */
import type { Ptr } from '../memory/memory.js';
import { nativeMemory } from '../memory/native.js';
import { allocNative, bytesIn, freeNative, type Called, type Driver } from './driver.js';
import { AdbcError, AdbcStatus } from './error.js';

/** Which handle an option belongs to: the prefix of the entry's name. */
export type OptionHandle = 'Database' | 'Connection' | 'Statement';

/** The native memory, made on first use (not at load: see driver.ts). */
const mem = nativeMemory;

/** The first buffer offered to a string or bytes getter; most values fit, larger ones cost one call more. */
const FIRST_BUFFER = 256;
/** How many times a getter is asked again when the value grew between two calls (another thread setting it). */
const MAX_TRIES = 4;

/** Runs the length protocol on `f` (`AdbcXGetOption` or `...Bytes`): the value's bytes, its whole length as the driver counts it. */
function getSized(driver: Driver, f: Called, handle: Ptr, key: string): Uint8Array {
  const lengthSlot = allocNative(8);
  try {
    let size = FIRST_BUFFER;
    for (let i = 0; i < MAX_TRIES; i++) {
      const buffer = allocNative(size);
      try {
        mem().writeU64(lengthSlot, BigInt(size));
        driver.call(f, handle, key, buffer, lengthSlot);
        const length = Number(mem().readU64(lengthSlot));
        if (length <= size) return length > 0 ? mem().copyOut(buffer, length) : new Uint8Array();
        size = length; // too small: nothing was written; the driver said how much it needs
      } finally {
        freeNative(buffer);
      }
    }
    throw new AdbcError(`Adbc${f}`, { status: AdbcStatus.INTERNAL, message: `Adbc${f}(${JSON.stringify(key)}): the value's length changed on each of ${MAX_TRIES} calls` });
  } finally {
    freeNative(lengthSlot);
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: false });

/** `AdbcXGetOption`: a string option (its NUL dropped). */
export function getOption(driver: Driver, h: OptionHandle, p: Ptr, key: string): string {
  const bytes = getSized(driver, `${h}GetOption`, p, key);
  const nul = bytes.indexOf(0);
  return utf8.decode(nul < 0 ? bytes : bytes.subarray(0, nul));
}

/** `AdbcXGetOptionBytes`: a bytes option. */
export function getOptionBytes(driver: Driver, h: OptionHandle, p: Ptr, key: string): Uint8Array {
  return getSized(driver, `${h}GetOptionBytes`, p, key);
}

/** `AdbcXGetOptionInt`: an integer option. */
export function getOptionInt(driver: Driver, h: OptionHandle, p: Ptr, key: string): bigint {
  const slot = allocNative(8);
  try {
    driver.call(`${h}GetOptionInt`, p, key, slot);
    return mem().readI64(slot);
  } finally {
    freeNative(slot);
  }
}

/** `AdbcXGetOptionDouble`: a floating-point option. */
export function getOptionDouble(driver: Driver, h: OptionHandle, p: Ptr, key: string): number {
  const slot = allocNative(8);
  try {
    driver.call(`${h}GetOptionDouble`, p, key, slot);
    return mem().readF64(slot);
  } finally {
    freeNative(slot);
  }
}

/** `AdbcXSetOptionBytes`: the bytes are copied for the call (adbc.h: the driver copies what it keeps). */
export function setOptionBytes(driver: Driver, h: OptionHandle, p: Ptr, key: string, value: Uint8Array): void {
  const bytes = bytesIn(value);
  try {
    driver.call(`${h}SetOptionBytes`, p, key, bytes, value.byteLength);
  } finally {
    freeNative(bytes);
  }
}

/** `AdbcXSetOptionInt`. A number must be an integer (a bigint is passed as is). */
export function setOptionInt(driver: Driver, h: OptionHandle, p: Ptr, key: string, value: bigint | number): void {
  if (typeof value === 'number' && !Number.isSafeInteger(value)) {
    throw new AdbcError(`Adbc${h}SetOptionInt`, { status: AdbcStatus.INVALID_ARGUMENT, message: `setOptionInt(${JSON.stringify(key)}): ${value} is not a safe integer (pass a bigint)` });
  }
  driver.call(`${h}SetOptionInt`, p, key, BigInt(value));
}

/** `AdbcXSetOptionDouble`. */
export function setOptionDouble(driver: Driver, h: OptionHandle, p: Ptr, key: string, value: number): void {
  driver.call(`${h}SetOptionDouble`, p, key, value);
}
