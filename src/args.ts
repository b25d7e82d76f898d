/**
 * Argument checks at the public boundary. A caller's mistake (a `number`
 * where a pointer goes, a pointer into a wasm module's memory without
 * `{ memory }`, a `Field` where a `Schema` goes) would otherwise surface deep
 * inside as "Cannot mix BigInt and other types", as "got undefined", or as a
 * crash of the process. Each check here costs a `typeof` or a comparison, and
 * throws an `ArrowDeviceError` of kind 'invalid' whose path is the parameter's
 * name and whose message says what was expected and what came.
 *
 * Target-neutral (the checks of arrow-js arguments are in
 * src/array/plan-arrowjs.ts).
 */
import { ArrowDeviceError, invalid } from './errors.js';
import type { Memory, Ptr } from './memory/memory.js';
import { MIN_VALID_ADDRESS } from './memory/native.js';

/** How a value reads in a message: "undefined", "the number 4096", "a Field", "an array". */
export function describeValue(v: unknown): string {
  if (v === undefined || v === null) return String(v);
  switch (typeof v) {
    case 'number':
      return `the number ${v}`;
    case 'bigint':
      return `the pointer 0x${v.toString(16)}`;
    case 'string':
      return `a string (${JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v)})`;
    case 'boolean':
      return `the boolean ${v}`;
    case 'function':
      return 'a function';
    case 'symbol':
      return 'a symbol';
  }
  if (Array.isArray(v)) return `an array of ${v.length}`;
  const name = (v as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' && name !== 'Object' ? `a ${name}` : 'an object';
}

/**
 * Checks a pointer argument: a bigint, and (unless NULL, which the callers
 * report in their own words) an address `m` can hold `size` bytes at. On
 * native memory that refuses the first 64 KiB, where nothing is ever mapped,
 * and so the small addresses of a wasm module's memory passed without
 * `{ memory }`; on a wasm memory, addresses beyond its current size.
 */
export function ptrArg(value: unknown, param: string, m: Memory, size: number, what: string): Ptr {
  if (typeof value !== 'bigint') {
    const hint = typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? `: pass BigInt(${value})` : '';
    throw invalid(param, `expected a pointer (bigint) to ${what}, got ${describeValue(value)}${hint}`);
  }
  if (value === 0n) return value;
  try {
    m.checkAddress(value, size);
  } catch (e) {
    if (!(e instanceof ArrowDeviceError)) throw e;
    const wasmHint =
      m.target.pointerSize === 8 && value > 0n && value < MIN_VALID_ADDRESS
        ? ", below 64 KiB where no native memory is mapped: is it a pointer into a WebAssembly module's memory? Pass { memory: wasmMemory(...) }"
        : '';
    throw new ArrowDeviceError('invalid', param, `expected a pointer to ${what} in ${m.name} memory: ${e.detail}${wasmHint}`, { cause: e });
  }
  return value;
}

/** Checks an optional pointer (`opts.into`): absent, or as `ptrArg`. */
export function optionalPtrArg(value: unknown, param: string, m: Memory, size: number, what: string): Ptr | undefined {
  return value === undefined ? undefined : ptrArg(value, param, m, size, what);
}

/** Checks an array of pointers (`importTable`'s arrays); each element as `ptrArg`. */
export function ptrArrayArg(value: unknown, param: string, m: Memory, size: number, what: string): readonly Ptr[] {
  if (!Array.isArray(value)) {
    throw invalid(param, `expected an array of pointers (bigint[]) to ${what}, got ${describeValue(value)}`);
  }
  for (let i = 0; i < value.length; i++) ptrArg(value[i], `${param}[${i}]`, m, size, what);
  return value as readonly Ptr[];
}

export { isSchemaNode } from './schema/node.js';

/** Checks an options argument: absent or an object (a pointer passed where the options go is a common slip). */
export function optionsArg<T extends object>(value: T | undefined, param = 'opts'): T | undefined {
  if (value === undefined || (typeof value === 'object' && value !== null && !Array.isArray(value))) return value;
  throw invalid(param, `expected an options object, got ${describeValue(value)}`);
}

/** `ptrArg` for the struct kinds, sized by `m`'s layouts (what a read of the struct would touch). */
export const schemaPtrArg = (v: unknown, param: string, m: Memory): Ptr => ptrArg(v, param, m, m.layouts.ArrowSchema.size, 'an ArrowSchema');
export const arrayPtrArg = (v: unknown, param: string, m: Memory): Ptr => ptrArg(v, param, m, m.layouts.ArrowArray.size, 'an ArrowArray');
export const deviceArrayPtrArg = (v: unknown, param: string, m: Memory): Ptr =>
  ptrArg(v, param, m, m.layouts.ArrowDeviceArray.size, 'an ArrowDeviceArray');
export const streamPtrArg = (v: unknown, param: string, m: Memory, device: boolean): Ptr =>
  device
    ? ptrArg(v, param, m, m.layouts.ArrowDeviceArrayStream.size, 'an ArrowDeviceArrayStream')
    : ptrArg(v, param, m, m.layouts.ArrowArrayStream.size, 'an ArrowArrayStream');
